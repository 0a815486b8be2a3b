/* SPDX-License-Identifier: MIT */
/* Helpers shared by the `ztier bench` subcommands: timing, medians, size parsing, the
 * STREAM triad reference, and the table + one-line JSON output BENCHMARKING.md asks for. */
#ifndef ZT_TOOLS_BENCH_COMMON_H
#define ZT_TOOLS_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

double bench_now(void); /* monotonic seconds */

/* Median of n values (n >= 1); sorts a copy, leaves v untouched. */
double bench_median(const double *v, int n);

/* Writes `bytes` into memory mapped just before (mmap, memset, munmap): the first touch of new
 * pages, which an allocation that misses every cache pays (page faults and the kernel's
 * zeroing besides the write). Returns GB/s (1e9 bytes/s) of the mmap-to-munmap pass, or -1
 * when the mapping fails. */
double bench_fresh_touch(size_t bytes);

/* Parses "4096", "64K", "1M", "2G", "1.5G" (powers of 1024). Returns 0 on success. */
int bench_parse_size(const char *s, uint64_t *out);

/* Formats bytes as "1.00 GiB" into buf. */
const char *bench_fmt_bytes(uint64_t bytes, char *buf, size_t len);

/* One STREAM triad a[i] = b[i] + s*c[i] over n doubles with `threads` threads (OpenMP-free:
 * plain pthreads, contiguous chunks). Returns bytes moved per second (24 bytes/element). */
typedef struct bench_triad bench_triad;
bench_triad *bench_triad_create(size_t n_elems, int threads);
double bench_triad_run(bench_triad *t); /* one timed pass; returns GB/s (1e9 bytes/s) */
void bench_triad_destroy(bench_triad *t);

/* Looks for `--name value` or `--name=value` in argv; returns value or NULL. */
const char *bench_arg(int argc, char **argv, const char *name);
/* 1 if `--name` appears as a flag. */
int bench_flag(int argc, char **argv, const char *name);
/* *out = the value of `--name` when given: a whole decimal integer in [min, max], else a
 * message naming the option ("<cmd>: --name 'v': give an integer from min to max") and -1;
 * 0 (and *out untouched) when the option is absent. */
int bench_int_arg(int argc, char **argv, const char *cmd, const char *name, long min, long max,
                  int *out);
/* Rejects options not in the NULL-terminated list `known` (names without "--"), printing a
 * message that names the unknown option. Flags listed in `flags` take no value. Returns 0 ok. */
int bench_check_args(int argc, char **argv, const char *const *known, const char *const *flags);

#endif

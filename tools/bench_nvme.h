/* SPDX-License-Identifier: MIT */
/* Whole-extent writes and reads through ztier's NVMe swap space (bench_nvme.c), shared by
 * `ztier bench nvme` and `ztier bench profile`. */
#ifndef ZT_TOOLS_BENCH_NVME_H
#define ZT_TOOLS_BENCH_NVME_H

#include "tiers/swap.h"

#include <stdint.h>

typedef struct bench_nvme_spec {
    const char *path;     /* the folder */
    uint64_t size, block; /* bytes moved per transfer (a multiple of block); block size */
    int qd;               /* queue depth */
    zt_io_engine_kind engine;
    int rank; /* part of the swap file's name: ranks sharing a folder use their own */
} bench_nvme_spec;

/* A swap space of one extent of spec.size bytes and a registered buffer of incompressible
 * data, as the runtime's swap spaces are set up. */
typedef struct bench_nvme_file {
    zt_swap *sw;
    zt_swap_extent x;
    void *buf;
    uint64_t size;
} bench_nvme_file;

/* 0, or -1 after a message that starts with cmd; bench_nvme_close frees what was made either
 * way. */
int bench_nvme_open(bench_nvme_file *z, const bench_nvme_spec *spec, const char *cmd);
/* One write (write 1) or read of the whole extent, O_DIRECT at the spec's block size and
 * queue depth: GB/s, or -1 after a message. */
double bench_nvme_run(bench_nvme_file *z, int write);
void bench_nvme_close(bench_nvme_file *z);

#endif

/* SPDX-License-Identifier: MIT */
/* Measures a folder's write then read bandwidth with one transfer of `size` bytes each.
 * Returns 0, or -1 after printing why. */
#ifndef ZT_TOOLS_BENCH_DISK_H
#define ZT_TOOLS_BENCH_DISK_H

#include <stdint.h>

int bench_disk_bandwidth(const char *path, uint64_t size, double *read_bps, double *write_bps);

#endif

/* SPDX-License-Identifier: MIT */
/* Host<->device copies of a device backend over pinned buffers (bench_copy.c), shared by
 * `ztier bench copy` and `ztier bench profile`. */
#ifndef ZT_TOOLS_BENCH_COPY_H
#define ZT_TOOLS_BENCH_COPY_H

#include "device/device.h"

#include <stddef.h>

/* Two pinned host buffers, two device buffers and two streams of one backend instance. */
typedef struct bench_copy_bufs {
    zt_device *dev;
    zt_stream *stream, *stream2;
    void *host, *host2, *device, *device2;
    size_t bytes;
    int cuda; /* the backend is "cuda" (real or the cudasim stand-in) */
} bench_copy_bufs;

/* Opens backend ("host", "cuda") with buffers of bytes each, on the GPU of local_rank of
 * local_size ranks on this machine as the runtime chooses it (0, 1: the current GPU); 0, or -1
 * after a message that starts with cmd. bench_copy_close frees what was made either way. */
int bench_copy_open(bench_copy_bufs *c, const char *backend, size_t bytes, int local_rank,
                    int local_size, const char *cmd);
void bench_copy_close(bench_copy_bufs *c);

/* One synchronous copy of c->bytes through the backend's memcpy_async: GB/s, or -1 after a
 * message. */
double bench_copy_backend(bench_copy_bufs *c, zt_copy_kind kind);
/* An h2d and a d2h copy of c->bytes each at once, on the two streams: GB/s of both together
 * (2 x bytes over the time until both are done), or -1 after a message. */
double bench_copy_both(bench_copy_bufs *c);
/* The physical limit of a copy over the same buffers: pinned cudaMemcpyAsync straight through
 * the CUDA runtime with cuda, else memcpy. GB/s, < 0 on error. */
double bench_copy_limit(bench_copy_bufs *c, zt_copy_kind kind);

#endif

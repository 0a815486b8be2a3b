/* SPDX-License-Identifier: MIT */
/* `ztier bench prefetch`: the runtime both versions train (bench_prefetch_runtime.c) and the GPU
 * version (bench_prefetch_cuda.c, built with CUDA). */
#ifndef ZT_TOOLS_BENCH_PREFETCH_H
#define ZT_TOOLS_BENCH_PREFETCH_H

#include "ztier.h"

/* `layers` square fp32 layers of `hidden`, parameters offloaded to `offload` (cpu | nvme at
 * nvme), CPU AdamW; extra_zero / extra_ztier: more keys (", \"k\": v") for those objects.
 * NULL with the message on stderr when it fails. */
zt_runtime *bench_prefetch_runtime(int layers, int hidden, const char *offload, const char *nvme,
                                   const char *extra_zero, const char *extra_ztier);

int bench_prefetch_cuda(int layers, int hidden, int batch, int steps, const char *offload,
                        const char *nvme, int json);

#endif

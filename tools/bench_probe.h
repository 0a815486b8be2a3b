/* SPDX-License-Identifier: MIT */
/* The memory-traffic probe that is the limit of `ztier bench adam` (bench_probe.c). */
#ifndef ZT_TOOLS_BENCH_PROBE_H
#define ZT_TOOLS_BENCH_PROBE_H

#include "core/threadpool.h"
#include "optimizer/adam.h"

#include <stdint.h>

/* One pass with the fused Adam step's loads and stores (variant's store kinds) over the
 * same arrays, split over the pool in the step's chunks. Changes the values negligibly. */
void bench_adam_probe(zt_threadpool *pool, zt_adam_variant variant, float *master, float *m,
                      float *v, const void *grad, int grad_bf16, uint16_t *out, int64_t n);

#endif

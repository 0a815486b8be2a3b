/* SPDX-License-Identifier: MIT */
/* ZeRO++ int8 block (de)quantization timed over a thread pool (bench_quant.c), shared by
 * `ztier bench quant` and `ztier bench profile`. */
#ifndef ZT_TOOLS_BENCH_QUANT_H
#define ZT_TOOLS_BENCH_QUANT_H

#include "core/quant.h"
#include "core/threadpool.h"

#include <stdint.h>

/* Seconds of one quantization of n fp32 values x into q and scales s (blocks of 256). */
double bench_quant8_s(zt_threadpool *pool, zt_quant_variant v, const float *x, int64_t n, int8_t *q,
                      float *s);
/* Seconds of one dequantization of q and s back to n fp32 values y. */
double bench_dequant8_s(zt_threadpool *pool, zt_quant_variant v, const int8_t *q, const float *s,
                        int64_t n, float *y);

#endif

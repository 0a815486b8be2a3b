/* SPDX-License-Identifier: MIT */
/* Block quantization for ZeRO++ communication: symmetric int8 (weights, qwZ) and int4
 * (gradients, qgZ) with one fp32 scale per block of `block` elements:
 *   scale = max|x| over the block / 127 (int8) or / 7 (int4);
 *   q = round_to_nearest_even(x * (1 / scale))
 * so the error of every element is at most half a step (scale / 2). A block of zeros has
 * scale 0 and quantizes to zeros. Lengths need not be multiples of the block or of 8: the
 * last block is shorter. int4 values are packed two per byte, element 2i in the low nibble.
 * Variants: a scalar reference, AVX2 and AVX-512 (int8 and int4), chosen
 * at run time.
 * All variants give the same bits. */
#ifndef ZT_RUNTIME_COMM_QUANT_H
#define ZT_RUNTIME_COMM_QUANT_H

#include "core/threadpool.h"
#include "ztier.h"

#include <stddef.h>
#include <stdint.h>

typedef enum zt_quant_variant {
    ZT_QUANT_SCALAR = 0,
    ZT_QUANT_AVX2 = 1,
    ZT_QUANT_AVX512 = 2
} zt_quant_variant;

zt_quant_variant zt_quant_variant_best(void);
const char *zt_quant_variant_name(zt_quant_variant v);
int zt_quant_variant_supported(zt_quant_variant v);

static inline int64_t zt_quant_blocks(int64_t n, int block) { return (n + block - 1) / block; }

/* x (fp32, bf16 or fp16) -> q[n] int8 and scales[blocks] */
void zt_quant8(zt_quant_variant v, const void *x, zt_dtype dt, int64_t n, int block, int8_t *q,
               float *scales);
/* q, scales -> out[n] in dtype dt */
void zt_dequant8(zt_quant_variant v, const int8_t *q, const float *scales, int64_t n, int block,
                 void *out, zt_dtype dt);
/* acc[i] += q[i] * scale (fp32 accumulation) */
void zt_dequant8_add(zt_quant_variant v, const int8_t *q, const float *scales, int64_t n, int block,
                     float *acc);

/* The same split over a thread pool (NULL: this thread) in chunks of whole blocks: the same
 * bits as the serial kernels (core/quant_parallel.c). */
void zt_quant8_parallel(zt_threadpool *pool, zt_quant_variant v, const void *x, zt_dtype dt,
                        int64_t n, int block, int8_t *q, float *scales);
void zt_dequant8_parallel(zt_threadpool *pool, zt_quant_variant v, const int8_t *q,
                          const float *scales, int64_t n, int block, void *out, zt_dtype dt);

/* int4: q holds (n + 1) / 2 bytes. The best variant the CPU has (AVX-512, AVX2 or scalar). */
void zt_quant4_parallel(zt_threadpool *pool, const float *x, int64_t n, int block, uint8_t *q,
                        float *scales);
void zt_dequant4_add_parallel(zt_threadpool *pool, const uint8_t *q, const float *scales, int64_t n,
                              int block, float *acc);
void zt_quant4(const float *x, int64_t n, int block, uint8_t *q, float *scales);
void zt_dequant4_add(const uint8_t *q, const float *scales, int64_t n, int block, float *acc);
void zt_quant4_scalar(const float *x, int64_t n, int block, uint8_t *q, float *scales);
void zt_dequant4_add_scalar(const uint8_t *q, const float *scales, int64_t n, int block,
                            float *acc);
void zt_quant4_avx2(const float *x, int64_t n, int block, uint8_t *q, float *scales);
void zt_dequant4_add_avx2(const uint8_t *q, const float *scales, int64_t n, int block, float *acc);
void zt_quant4_avx512(const float *x, int64_t n, int block, uint8_t *q, float *scales);
void zt_dequant4_add_avx512(const uint8_t *q, const float *scales, int64_t n, int block,
                            float *acc);

/* scalar kernels (the reference) and the AVX-512 ones */
void zt_quant8_scalar(const void *x, zt_dtype dt, int64_t n, int block, int8_t *q, float *scales);
void zt_dequant8_scalar(const int8_t *q, const float *scales, int64_t n, int block, void *out,
                        zt_dtype dt);
void zt_dequant8_add_scalar(const int8_t *q, const float *scales, int64_t n, int block, float *acc);
void zt_quant8_avx2(const void *x, zt_dtype dt, int64_t n, int block, int8_t *q, float *scales);
void zt_dequant8_avx2(const int8_t *q, const float *scales, int64_t n, int block, void *out,
                      zt_dtype dt);
void zt_dequant8_add_avx2(const int8_t *q, const float *scales, int64_t n, int block, float *acc);
void zt_quant8_avx512(const void *x, zt_dtype dt, int64_t n, int block, int8_t *q, float *scales);
void zt_dequant8_avx512(const int8_t *q, const float *scales, int64_t n, int block, void *out,
                        zt_dtype dt);
void zt_dequant8_add_avx512(const int8_t *q, const float *scales, int64_t n, int block, float *acc);

#endif

/* SPDX-License-Identifier: MIT */
/* Array conversions between fp32, bf16 and fp16. One loop per (source, destination) pair;
 * on CPUs with AVX2 and F16C the loops run 8 elements at a time through functions compiled
 * for those instructions (target attributes, chosen at run time), with the scalar functions
 * of convert.h for the tails. Both give the same bits (tests/optimizer/test_convert.c). */
#include "core/convert.h"
#include "core/convert_simd.h"

#include <stdatomic.h>

#define SIMD_TARGET ZT_TARGET_AVX2_F16C

static int have_avx2_f16c(void)
{
    static atomic_int cached = -1; /* every thread that races here stores the same value */
    int have = atomic_load_explicit(&cached, memory_order_relaxed);
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
        atomic_store_explicit(&cached, have, memory_order_relaxed);
    }
    return have;
}

SIMD_TARGET static size_t f32_to_bf16_avx2(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), zt_avx2_f32_to_bf16(_mm256_loadu_ps(src + i)));
    return i;
}

SIMD_TARGET static size_t bf16_to_f32_avx2(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, zt_avx2_bf16_to_f32(_mm_loadu_si128((const __m128i *)(src + i))));
    return i;
}

SIMD_TARGET static size_t f32_to_f16_avx2(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return i;
}

SIMD_TARGET static size_t f16_to_f32_avx2(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    return i;
}

static void to_f32(float *dst, const uint16_t *src, zt_dtype src_type, size_t n)
{
    size_t i = 0;
    if (src_type == ZT_BF16) {
        if (have_avx2_f16c())
            i = bf16_to_f32_avx2(dst, src, n);
        for (; i < n; i++)
            dst[i] = zt_bf16_to_f32(src[i]);
    } else {
        if (have_avx2_f16c())
            i = f16_to_f32_avx2(dst, src, n);
        for (; i < n; i++)
            dst[i] = zt_f16_to_f32(src[i]);
    }
}

static void from_f32(uint16_t *dst, zt_dtype dst_type, const float *src, size_t n)
{
    size_t i = 0;
    if (dst_type == ZT_BF16) {
        if (have_avx2_f16c())
            i = f32_to_bf16_avx2(dst, src, n);
        for (; i < n; i++)
            dst[i] = zt_f32_to_bf16(src[i]);
    } else {
        if (have_avx2_f16c())
            i = f32_to_f16_avx2(dst, src, n);
        for (; i < n; i++)
            dst[i] = zt_f32_to_f16(src[i]);
    }
}

/* Elements per pass through the fp32 staging buffer of the 16-bit <-> 16-bit paths. */
#define BLOCK 1024

void zt_convert_array(void *dst, zt_dtype dst_type, const void *src, zt_dtype src_type, size_t n)
{
    if (dst_type == src_type) {
        if (dst != src)
            memmove(dst, src, n * (dst_type == ZT_F32 ? 4 : 2));
        return;
    }
    if (src_type == ZT_F32) {
        from_f32(dst, dst_type, src, n);
    } else if (dst_type == ZT_F32) {
        to_f32(dst, src, src_type, n);
    } else { /* bf16 <-> fp16 through fp32, which holds both exactly */
        float tmp[BLOCK];
        for (size_t i = 0; i < n; i += BLOCK) {
            size_t len = n - i < BLOCK ? n - i : BLOCK;
            to_f32(tmp, (const uint16_t *)src + i, src_type, len);
            from_f32((uint16_t *)dst + i, dst_type, tmp, len);
        }
    }
}

void zt_scale_array(void *x, zt_dtype type, float alpha, size_t n)
{
    if (type == ZT_F32) {
        float *f = x;
        for (size_t i = 0; i < n; i++)
            f[i] *= alpha;
        return;
    }
    float tmp[BLOCK];
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t len = n - i < BLOCK ? n - i : BLOCK;
        uint16_t *h = (uint16_t *)x + i;
        to_f32(tmp, h, type, len);
        for (size_t k = 0; k < len; k++)
            tmp[k] *= alpha;
        from_f32(h, type, tmp, len);
    }
}

/* SPDX-License-Identifier: MIT */
/* 8-lane fp32 <-> bf16 conversions for AVX2 code, shared by the array conversions
 * (convert.c, target attribute) and the AVX2 Adam kernel (compiled with -mavx2). Same bits as
 * zt_f32_to_bf16 / zt_bf16_to_f32 in convert.h. Include only where AVX2 may be used. */
#ifndef ZT_CORE_CONVERT_SIMD_H
#define ZT_CORE_CONVERT_SIMD_H

#include <immintrin.h>

#define ZT_TARGET_AVX2_F16C __attribute__((target("avx2,f16c")))

/* Round to nearest even; NaN -> quiet NaN keeping the top of the payload. */
static inline ZT_TARGET_AVX2_F16C __m128i zt_avx2_f32_to_bf16(__m256 x)
{
    __m256i u = _mm256_castps_si256(x), hi = _mm256_srli_epi32(u, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    r = _mm256_srli_epi32(r, 16);
    __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

static inline ZT_TARGET_AVX2_F16C __m256 zt_avx2_bf16_to_f32(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

#endif

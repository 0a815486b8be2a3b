/* SPDX-License-Identifier: MIT */
/* AVX2 (+F16C) block quantization, bit-identical to the scalar reference: 8 lanes, the last
 * n % 8 elements of a block through the same scalar formula. */
#include "core/convert.h"
#include "core/quant_elem.h"
#include "core/quant.h"
#include "core/quant_nibbles.h"

#include <immintrin.h>
#include <math.h>

static inline __attribute__((always_inline)) __m256 load8(const void *x, zt_dtype dt, int64_t i)
{
    if (dt == ZT_F32)
        return _mm256_loadu_ps((const float *)x + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)x + i));
    if (dt == ZT_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static float load1(const void *x, zt_dtype dt, int64_t i)
{
    if (dt == ZT_BF16)
        return zt_bf16_to_f32(((const uint16_t *)x)[i]);
    if (dt == ZT_F16)
        return zt_f16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

static float hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

void zt_quant8_avx2(const void *x, zt_dtype dt, int64_t n, int block, int8_t *q, float *scales)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n, i = lo;
        __m256 mx = _mm256_setzero_ps();
        for (; i + 8 <= hi; i += 8)
            mx = _mm256_max_ps(mx, _mm256_and_ps(load8(x, dt, i), absmask));
        float m = hmax(mx);
        for (; i < hi; i++)
            m = fmaxf(m, fabsf(load1(x, dt, i)));
        float s = m / 127.0f, inv = s > 0 ? 1.0f / s : 0.0f;
        scales[b] = s;
        __m256 vinv = _mm256_set1_ps(inv);
        for (i = lo; i + 8 <= hi; i += 8) {
            __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(load8(x, dt, i), vinv));
            v = _mm256_max_epi32(_mm256_min_epi32(v, _mm256_set1_epi32(127)),
                                 _mm256_set1_epi32(-127));
            __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
            _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(w, w));
        }
        for (; i < hi; i++) {
            float v = nearbyintf(load1(x, dt, i) * inv);
            q[i] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
        }
    }
}

static inline __attribute__((always_inline)) __m256 dequant8x(const int8_t *q, int64_t i, __m256 s)
{
    __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(v), s);
}

void zt_dequant8_avx2(const int8_t *q, const float *scales, int64_t n, int block, void *out,
                      zt_dtype dt)
{
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n, i = lo;
        __m256 s = _mm256_set1_ps(scales[b]);
        if (dt == ZT_F32)
            for (; i + 8 <= hi; i += 8)
                _mm256_storeu_ps((float *)out + i, dequant8x(q, i, s));
        for (; i < hi; i++) { /* bf16/fp16 outputs and tails: the scalar conversion */
            float v = (float)q[i] * scales[b];
            if (dt == ZT_F32)
                ((float *)out)[i] = v;
            else
                ((uint16_t *)out)[i] = dt == ZT_BF16 ? zt_f32_to_bf16(v) : zt_f32_to_f16(v);
        }
    }
}

void zt_dequant8_add_avx2(const int8_t *q, const float *scales, int64_t n, int block, float *acc)
{
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n, i = lo;
        __m256 s = _mm256_set1_ps(scales[b]);
        for (; i + 8 <= hi; i += 8)
            _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), dequant8x(q, i, s)));
        for (; i < hi; i++)
            acc[i] += (float)q[i] * scales[b];
    }
}

/* zt_quant4_code's value before its conversion: x * inv, NaN as 0, clamped to [-7, 7]. */
static __m256 code4(__m256 x, __m256 vinv)
{
    __m256 y = _mm256_mul_ps(x, vinv);
    y = _mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q));
    return _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(-7.0f)), _mm256_set1_ps(7.0f));
}

/* int4: 16 values per step (two vectors) -> 8 bytes, element 2k in the low nibble of byte k.
 * Blocks of odd size shift the pairing, so they (and each block's last n % 16 values) take
 * the scalar formula; the result is the scalar reference's. */
void zt_quant4_avx2(const float *x, int64_t n, int block, uint8_t *q, float *scales)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n, i = lo;
        __m256 mx = _mm256_setzero_ps();
        for (; i + 8 <= hi; i += 8) { /* |x|, a NaN as inf (zt_quant4_abs) */
            __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), absmask);
            mx = _mm256_max_ps(mx, _mm256_blendv_ps(a, inf, _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
        }
        float m = hmax(mx);
        for (; i < hi; i++)
            m = fmaxf(m, zt_quant4_abs(x[i]));
        float s = m / 7.0f, inv = s > 0 ? 1.0f / s : 0.0f;
        scales[b] = s;
        __m256 vinv = _mm256_set1_ps(inv);
        for (i = lo; (block & 1) == 0 && i + 16 <= hi; i += 16) {
            __m256i v0 = _mm256_cvtps_epi32(code4(_mm256_loadu_ps(x + i), vinv));
            __m256i v1 = _mm256_cvtps_epi32(code4(_mm256_loadu_ps(x + i + 8), vinv));
            /* 16 x int16 in element order (packs works per 128-bit lane) */
            __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0xd8);
            __m128i b16 =
                _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
            zt_pack_nibbles16(b16, q + i / 2);
        }
        for (; i < hi; i++)
            zt_quant4_put(q, i, zt_quant4_code(x[i], inv));
    }
}

void zt_dequant4_add_avx2(const uint8_t *q, const float *scales, int64_t n, int block, float *acc)
{
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n, i = lo;
        __m256 s = _mm256_set1_ps(scales[b]);
        for (; (block & 1) == 0 && i + 16 <= hi; i += 16) {
            __m128i v = zt_unpack_nibbles16(q + i / 2);
            __m256i lo8 = _mm256_cvtepi8_epi32(v), hi8 = _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8));
            __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(lo8), s);
            __m256 f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(hi8), s);
            _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), f0));
            _mm256_storeu_ps(acc + i + 8, _mm256_add_ps(_mm256_loadu_ps(acc + i + 8), f1));
        }
        for (; i < hi; i++)
            acc[i] += (float)zt_quant4_value(q[i / 2], i) * scales[b];
    }
}

/* SPDX-License-Identifier: MIT */
/* AVX-512 block quantization (F, BW, VL, DQ), matching the scalar reference bit for bit:
 * the same division, round-to-nearest-even and saturation. Blocks are walked one at a time
 * in 16-lane steps, the last step of a block masked. */
#include "core/quant_elem.h"
#include "core/quant.h"
#include "core/quant_nibbles.h"

#include <immintrin.h>
#include <math.h>

static inline __attribute__((always_inline)) __mmask16 lanes(int64_t left)
{
    return left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
}

static inline __attribute__((always_inline)) __m512 load(const void *x, zt_dtype dt, int64_t i,
                                                         __mmask16 k)
{
    if (dt == ZT_F32)
        return k == 0xffff ? _mm512_loadu_ps((const float *)x + i)
                           : _mm512_maskz_loadu_ps(k, (const float *)x + i);
    __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)x + i);
    if (dt == ZT_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static __m256i to_bf16(__m512 x) /* round to nearest even, NaN kept NaN (as the scalar) */
{
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, q));
}

static inline __attribute__((always_inline)) void store(void *out, zt_dtype dt, int64_t i, __m512 v,
                                                        __mmask16 k)
{
    if (dt == ZT_F32 && k == 0xffff)
        _mm512_storeu_ps((float *)out + i, v);
    else if (dt == ZT_F32)
        _mm512_mask_storeu_ps((float *)out + i, k, v);
    else if (dt == ZT_BF16)
        _mm256_mask_storeu_epi16((uint16_t *)out + i, k, to_bf16(v));
    else
        _mm256_mask_storeu_epi16((uint16_t *)out + i, k,
                                 _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* The common case, a whole fp32 block of 256: the block stays in 16 registers between the
 * max and the rounding, so memory is read once. Same arithmetic as the general loop. */
static inline __attribute__((always_inline)) void quant8_block256(const float *x, int8_t *q,
                                                                  float *scale)
{
    __m512 v[16], mx = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) {
        v[j] = _mm512_loadu_ps(x + 16 * j);
        mx = _mm512_max_ps(mx, _mm512_abs_ps(v[j]));
    }
    float s = _mm512_reduce_max_ps(mx) / 127.0f;
    *scale = s;
    __m512 inv = _mm512_set1_ps(s > 0 ? 1.0f / s : 0.0f);
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++)
        _mm_storeu_si128((__m128i *)(q + 16 * j),
                         _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v[j], inv))));
}

void zt_quant8_avx512(const void *x, zt_dtype dt, int64_t n, int block, int8_t *q, float *scales)
{
    if (dt == ZT_F32 && block == 256) {
        int64_t whole = n / 256;
        for (int64_t b = 0; b < whole; b++)
            quant8_block256((const float *)x + b * 256, q + b * 256, &scales[b]);
        if (whole * 256 == n)
            return;
        /* the short last block through the general loop below */
        x = (const float *)x + whole * 256, q += whole * 256, scales += whole, n -= whole * 256;
    }
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n;
        __m512 mx = _mm512_setzero_ps();
        for (int64_t i = lo; i < hi; i += 16)
            mx = _mm512_max_ps(mx, _mm512_abs_ps(load(x, dt, i, lanes(hi - i))));
        float s = _mm512_reduce_max_ps(mx) / 127.0f;
        scales[b] = s;
        __m512 inv = _mm512_set1_ps(s > 0 ? 1.0f / s : 0.0f);
        for (int64_t i = lo; i < hi; i += 16) {
            __mmask16 k = lanes(hi - i);
            __m128i v =
                _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(load(x, dt, i, k), inv)));
            if (k == 0xffff) /* masked stores are slow on some cores: only for the tail */
                _mm_storeu_si128((__m128i *)(q + i), v);
            else
                _mm_mask_storeu_epi8(q + i, k, v);
        }
    }
}

static inline __attribute__((always_inline)) __m512 dequant(const int8_t *q, int64_t i, __mmask16 k,
                                                            __m512 scale)
{
    __m128i b =
        k == 0xffff ? _mm_loadu_si128((const __m128i *)(q + i)) : _mm_maskz_loadu_epi8(k, q + i);
    __m512i v = _mm512_cvtepi8_epi32(b);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale);
}

void zt_dequant8_avx512(const int8_t *q, const float *scales, int64_t n, int block, void *out,
                        zt_dtype dt)
{
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n;
        __m512 s = _mm512_set1_ps(scales[b]);
        for (int64_t i = lo; i < hi; i += 16) {
            __mmask16 k = lanes(hi - i);
            store(out, dt, i, dequant(q, i, k, s), k);
        }
    }
}

void zt_dequant8_add_avx512(const int8_t *q, const float *scales, int64_t n, int block, float *acc)
{
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n;
        __m512 s = _mm512_set1_ps(scales[b]);
        for (int64_t i = lo; i < hi; i += 16) {
            __mmask16 k = lanes(hi - i);
            if (k == 0xffff) {
                _mm512_storeu_ps(acc + i,
                                 _mm512_add_ps(_mm512_loadu_ps(acc + i), dequant(q, i, k, s)));
                continue;
            }
            __m512 a = _mm512_maskz_loadu_ps(k, acc + i);
            _mm512_mask_storeu_ps(acc + i, k, _mm512_add_ps(a, dequant(q, i, k, s)));
        }
    }
}

/* int4: 16 values per step -> 8 bytes, element 2k in the low nibble of byte k. Blocks of odd
 * size shift the pairing, so they (and each block's last n % 16 values) take the scalar
 * formula; the result is the scalar reference's. */
void zt_quant4_avx512(const float *x, int64_t n, int block, uint8_t *q, float *scales)
{
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n, i = lo;
        __m512 mx = _mm512_setzero_ps(), inf = _mm512_set1_ps(INFINITY);
        for (int64_t k = lo; k < hi; k += 16) { /* |x|, a NaN as inf (zt_quant4_abs) */
            __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes(hi - k), x + k));
            mx = _mm512_max_ps(mx,
                               _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), inf));
        }
        float s = _mm512_reduce_max_ps(mx) / 7.0f, inv = s > 0 ? 1.0f / s : 0.0f;
        scales[b] = s;
        __m512 vinv = _mm512_set1_ps(inv);
        for (; (block & 1) == 0 && i + 16 <= hi; i += 16) { /* zt_quant4_code: NaN 0, clamp */
            __m512 y = _mm512_mul_ps(_mm512_loadu_ps(x + i), vinv);
            y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), y);
            y = _mm512_min_ps(_mm512_max_ps(y, _mm512_set1_ps(-7.0f)), _mm512_set1_ps(7.0f));
            zt_pack_nibbles16(_mm512_cvtepi32_epi8(_mm512_cvtps_epi32(y)), q + i / 2);
        }
        for (; i < hi; i++)
            zt_quant4_put(q, i, zt_quant4_code(x[i], inv));
    }
}

void zt_dequant4_add_avx512(const uint8_t *q, const float *scales, int64_t n, int block, float *acc)
{
    for (int64_t b = 0, lo = 0; lo < n; b++, lo += block) {
        int64_t hi = lo + block < n ? lo + block : n, i = lo;
        __m512 s = _mm512_set1_ps(scales[b]);
        for (; (block & 1) == 0 && i + 16 <= hi; i += 16) {
            __m128i v = zt_unpack_nibbles16(q + i / 2);
            __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)), s);
            _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i), f));
        }
        for (; i < hi; i++) {
            int v = (q[i / 2] >> (4 * (i & 1))) & 0xf;
            acc[i] += (float)(v >= 8 ? v - 16 : v) * scales[b];
        }
    }
}

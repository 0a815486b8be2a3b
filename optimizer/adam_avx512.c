/* SPDX-License-Identifier: MIT */
/* AVX-512 (F, BW, VL, DQ) Adam/AdamW kernel: 16 lanes. A masked head vector brings master
 * to a 64-byte boundary, full vectors use plain loads and stores, a masked vector takes the
 * tail; so any length and alignment runs, and since every lane computes the same operations
 * the split never changes a result. Compiled with AVX-512 flags (and -mavx512bf16, whose
 * instruction is only executed when zt_adam_consts.bf16_insn says the CPU has it); only
 * called when the CPU reports AVX-512 F/BW/VL/DQ. */
#include "optimizer/adam.h"

#include <float.h>
#include <immintrin.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE __mmask16 lanes(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

static ALWAYS_INLINE __m512 load_grad(const void *g, zt_dtype t, int64_t i, __mmask16 k, int full)
{
    if (t == ZT_F32)
        return full ? _mm512_loadu_ps((const float *)g + i)
                    : _mm512_maskz_loadu_ps(k, (const float *)g + i);
    const uint16_t *src = (const uint16_t *)g + i;
    __m256i h = full ? _mm256_loadu_si256((const __m256i *)src) : _mm256_maskz_loadu_epi16(k, src);
    if (t == ZT_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* fp32 -> bf16 in integer arithmetic: round to nearest even, NaN quieted (as the scalar). */
static ALWAYS_INLINE __m256i to_bf16_int(__m512 x)
{
    __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    r = _mm512_srli_epi32(r, 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

/* vcvtneps2bf16 rounds to nearest even and quiets NaNs exactly as the scalar does, but it
 * flushes subnormal inputs to zero; vectors holding one (rare) take the integer path. */
static ALWAYS_INLINE __m256i to_bf16(__m512 x, int insn)
{
    if (!insn)
        return to_bf16_int(x);
    __m512i u = _mm512_castps_si512(x);
    __mmask16 sub = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)) &
                    _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x007fffff));
    if (__builtin_expect(sub != 0, 0))
        return to_bf16_int(x);
    return (__m256i)_mm512_cvtneps_pbh(x);
}

static ALWAYS_INLINE void store_param(void *out, zt_dtype t, int64_t i, __m512 p, __mmask16 k,
                                      int full, int insn)
{
    if (t == ZT_F32) {
        if (full)
            _mm512_storeu_ps((float *)out + i, p);
        else
            _mm512_mask_storeu_ps((float *)out + i, k, p);
        return;
    }
    __m256i h = t == ZT_BF16 ? to_bf16(p, insn)
                             : _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    uint16_t *dst = (uint16_t *)out + i;
    if (full && ((uintptr_t)dst & 31) == 0) /* written, never read here: skip the cache */
        _mm256_stream_si256((__m256i *)dst, h);
    else if (full)
        _mm256_storeu_si256((__m256i *)dst, h);
    else
        _mm256_mask_storeu_epi16(dst, k, h);
}

static ALWAYS_INLINE __mmask16 nonfinite(__m512 g, __mmask16 k)
{
    return _mm512_mask_cmp_ps_mask(k, _mm512_abs_ps(g), _mm512_set1_ps(FLT_MAX), _CMP_NLE_UQ);
}

/* One vector of 16 lanes; k masks the head or the tail. Full vectors use unmasked loads and
 * stores: masked stores cost more on some cores (AMD Zen 4), so only the ends pay for them.
 * The operations are those of the scalar reference, in the same order (adam.h). */
static ALWAYS_INLINE int adam_vector(const zt_adam_consts *c, const zt_adam_tensors *t, int64_t i,
                                     __mmask16 k, int full)
{
    __m512 p = full ? _mm512_loadu_ps(t->master + i) : _mm512_maskz_loadu_ps(k, t->master + i);
    __m512 m = full ? _mm512_loadu_ps(t->m + i) : _mm512_maskz_loadu_ps(k, t->m + i);
    __m512 v = full ? _mm512_loadu_ps(t->v + i) : _mm512_maskz_loadu_ps(k, t->v + i);
    __m512 g =
        _mm512_mul_ps(load_grad(t->grad, t->grad_dtype, i, k, full), _mm512_set1_ps(c->grad_scale));
    int bad = __builtin_popcount(nonfinite(g, k));
    g = _mm512_fmadd_ps(_mm512_set1_ps(c->l2), p, g);
    m = _mm512_fmadd_ps(_mm512_set1_ps(c->beta1), m,
                        _mm512_mul_ps(_mm512_set1_ps(c->one_minus_beta1), g));
    v = _mm512_fmadd_ps(_mm512_set1_ps(c->beta2), v,
                        _mm512_mul_ps(_mm512_set1_ps(c->one_minus_beta2), _mm512_mul_ps(g, g)));
    __m512 denom =
        _mm512_fmadd_ps(_mm512_sqrt_ps(v), _mm512_set1_ps(c->inv_sqrt_bc2), _mm512_set1_ps(c->eps));
    p = _mm512_fnmadd_ps(_mm512_set1_ps(c->decay), p, p);
    p = _mm512_fnmadd_ps(_mm512_set1_ps(c->step_size), _mm512_div_ps(m, denom), p);
    if (full) {
        _mm512_storeu_ps(t->master + i, p);
        _mm512_storeu_ps(t->m + i, m);
        _mm512_storeu_ps(t->v + i, v);
    } else {
        _mm512_mask_storeu_ps(t->master + i, k, p);
        _mm512_mask_storeu_ps(t->m + i, k, m);
        _mm512_mask_storeu_ps(t->v + i, k, v);
    }
    if (t->param_out)
        store_param(t->param_out, t->param_dtype, i, p, k, full, c->bf16_insn);
    return bad;
}

int64_t zt_adam_step_avx512(const zt_adam_consts *c, const zt_adam_tensors *t)
{
    int64_t bad = 0, i = 0, n = t->n;
    /* head: up to the first 64-byte boundary of master (when the buffers share an alignment,
     * as the runtime's do, every full vector is then aligned) */
    int64_t head = (int64_t)((64 - ((uintptr_t)t->master & 63)) & 63) / 4;
    if (head > 0 && ((uintptr_t)t->master & 3) == 0) {
        head = head < n ? head : n;
        bad += adam_vector(c, t, 0, lanes(head), 0);
        i = head;
    }
    for (; i + 16 <= n; i += 16)
        bad += adam_vector(c, t, i, 0xffff, 1);
    if (i < n)
        bad += adam_vector(c, t, i, lanes(n - i), 0);
    _mm_sfence(); /* order the streaming stores before the caller reads the copy */
    return bad;
}

double zt_grad_sumsq_avx512(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad)
{
    __m512d acc_lo = _mm512_setzero_pd(), acc_hi = _mm512_setzero_pd();
    const __m512 gs = _mm512_set1_ps(scale);
    int64_t nonfin = 0;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = lanes(n - i);
        __m512 g = _mm512_mul_ps(load_grad(grad, dt, i, k, k == 0xffff), gs);
        __mmask16 badk = nonfinite(g, k);
        nonfin += __builtin_popcount(badk);
        g = _mm512_maskz_mov_ps((__mmask16)(k & ~badk), g); /* skipped lanes add 0 */
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(g));
        __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(g, 1));
        acc_lo = _mm512_fmadd_pd(lo, lo, acc_lo);
        acc_hi = _mm512_fmadd_pd(hi, hi, acc_hi);
    }
    *bad = nonfin;
    return _mm512_reduce_add_pd(_mm512_add_pd(acc_lo, acc_hi));
}

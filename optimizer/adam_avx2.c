/* SPDX-License-Identifier: MIT */
/* AVX2 + FMA + F16C Adam/AdamW kernel: 8 lanes; the last n % 8 elements go through the
 * scalar reference, which computes the same bits. Compiled with those flags; only called
 * when the CPU reports them. */
#include "optimizer/adam.h"
#include "core/convert_simd.h"

#include <float.h>
#include <immintrin.h>

static inline __m256 load_grad(const void *g, zt_dtype t, int64_t i)
{
    if (t == ZT_F32)
        return _mm256_loadu_ps((const float *)g + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)g + i));
    return t == ZT_F16 ? _mm256_cvtph_ps(h) : zt_avx2_bf16_to_f32(h);
}

static inline void store_param(void *out, zt_dtype t, int64_t i, __m256 p)
{
    if (t == ZT_F32)
        _mm256_storeu_ps((float *)out + i, p);
    else if (t == ZT_BF16)
        _mm_storeu_si128((__m128i *)((uint16_t *)out + i), zt_avx2_f32_to_bf16(p));
    else
        _mm_storeu_si128((__m128i *)((uint16_t *)out + i),
                         _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* Lanes where |g| is not <= FLT_MAX (inf or NaN), as a bit mask. */
static inline __m256 nonfinite(__m256 g)
{
    __m256 mag = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
    return _mm256_cmp_ps(mag, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ);
}

int64_t zt_adam_step_avx2(const zt_adam_consts *c, const zt_adam_tensors *t)
{
    const __m256 b1 = _mm256_set1_ps(c->beta1), b2 = _mm256_set1_ps(c->beta2);
    const __m256 omb1 = _mm256_set1_ps(c->one_minus_beta1);
    const __m256 omb2 = _mm256_set1_ps(c->one_minus_beta2);
    const __m256 step = _mm256_set1_ps(c->step_size), ibc2 = _mm256_set1_ps(c->inv_sqrt_bc2);
    const __m256 eps = _mm256_set1_ps(c->eps), decay = _mm256_set1_ps(c->decay);
    const __m256 l2 = _mm256_set1_ps(c->l2), gs = _mm256_set1_ps(c->grad_scale);
    int64_t bad = 0, i = 0;
    for (; i + 8 <= t->n; i += 8) {
        __m256 p = _mm256_loadu_ps(t->master + i);
        __m256 g = _mm256_mul_ps(load_grad(t->grad, t->grad_dtype, i), gs);
        bad += __builtin_popcount((unsigned)_mm256_movemask_ps(nonfinite(g)));
        g = _mm256_fmadd_ps(l2, p, g);
        __m256 m = _mm256_fmadd_ps(b1, _mm256_loadu_ps(t->m + i), _mm256_mul_ps(omb1, g));
        __m256 v = _mm256_fmadd_ps(b2, _mm256_loadu_ps(t->v + i),
                                   _mm256_mul_ps(omb2, _mm256_mul_ps(g, g)));
        __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(v), ibc2, eps);
        p = _mm256_fnmadd_ps(decay, p, p);
        p = _mm256_fnmadd_ps(step, _mm256_div_ps(m, denom), p);
        _mm256_storeu_ps(t->master + i, p);
        _mm256_storeu_ps(t->m + i, m);
        _mm256_storeu_ps(t->v + i, v);
        if (t->param_out)
            store_param(t->param_out, t->param_dtype, i, p);
    }
    if (i < t->n) {
        zt_adam_tensors rest = zt_adam_tensors_slice(t, i, t->n - i);
        bad += zt_adam_step_scalar(c, &rest);
    }
    return bad;
}

double zt_grad_sumsq_avx2(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad)
{
    __m256d acc_lo = _mm256_setzero_pd(), acc_hi = _mm256_setzero_pd();
    const __m256 gs = _mm256_set1_ps(scale);
    int64_t nonfin = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_mul_ps(load_grad(grad, dt, i), gs);
        __m256 badv = nonfinite(g);
        nonfin += __builtin_popcount((unsigned)_mm256_movemask_ps(badv));
        g = _mm256_andnot_ps(badv, g); /* non-finite lanes add 0 */
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(g));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(g, 1));
        acc_lo = _mm256_fmadd_pd(lo, lo, acc_lo);
        acc_hi = _mm256_fmadd_pd(hi, hi, acc_hi);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(acc_lo, acc_hi));
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    int64_t tail_bad = 0;
    size_t gsz = dt == ZT_F32 ? 4 : 2;
    sum += zt_grad_sumsq_scalar((const char *)grad + (size_t)i * gsz, dt, n - i, scale, &tail_bad);
    *bad = nonfin + tail_bad;
    return sum;
}

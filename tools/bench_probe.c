/* SPDX-License-Identifier: MIT */
/* The limit for `ztier bench adam`: a pass with exactly the fused Adam step's memory traffic
 * over the same buffers, threads and chunks — read master, m, v and the gradient, write
 * master, m, v back in place, write the bf16 copy with the same kind of store as the Adam
 * variant (streaming for AVX-512, plain for AVX2 and scalar; none when out is NULL, as the
 * step without a parameter copy) — and almost no arithmetic.
 * Counted with the same bytes per parameter as the Adam step, it is what the memory system
 * allows that traffic: a kernel cannot beat it (unlike a STREAM triad, whose byte count
 * leaves out the write-allocate read of its destination). */
#include "tools/bench_probe.h"

#include <immintrin.h>
#include <string.h>

typedef struct probe_ctx {
    float *master, *m, *v;
    const void *grad;
    int grad_bf16;
    uint16_t *out;
    zt_adam_variant variant;
} probe_ctx;

static float grad_at(const probe_ctx *c, int64_t i)
{
    if (!c->grad_bf16)
        return ((const float *)c->grad)[i];
    uint32_t u = (uint32_t)((const uint16_t *)c->grad)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void probe_scalar(const probe_ctx *c, int64_t lo, int64_t hi)
{
    for (int64_t i = lo; i < hi; i++) {
        float g = grad_at(c, i) * 1e-30f;
        float p = c->master[i] + g;
        c->master[i] = p;
        c->m[i] += g;
        c->v[i] += g;
        uint32_t u;
        memcpy(&u, &p, sizeof u);
        if (c->out)
            c->out[i] = (uint16_t)(u >> 16);
    }
}

__attribute__((target("avx2,fma"))) static void probe_avx2(const probe_ctx *c, int64_t lo,
                                                           int64_t hi)
{
    const __m256 tiny = _mm256_set1_ps(1e-30f);
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        __m256 g = c->grad_bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(
                                      _mm256_cvtepu16_epi32(_mm_loadu_si128(
                                          (const __m128i *)((const uint16_t *)c->grad + i))),
                                      16))
                                : _mm256_loadu_ps((const float *)c->grad + i);
        g = _mm256_mul_ps(g, tiny);
        __m256 p = _mm256_add_ps(_mm256_loadu_ps(c->master + i), g);
        _mm256_storeu_ps(c->master + i, p);
        _mm256_storeu_ps(c->m + i, _mm256_add_ps(_mm256_loadu_ps(c->m + i), g));
        _mm256_storeu_ps(c->v + i, _mm256_add_ps(_mm256_loadu_ps(c->v + i), g));
        if (!c->out)
            continue;
        __m256i h = _mm256_srli_epi32(_mm256_castps_si256(p), 16);
        __m128i packed =
            _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        _mm_storeu_si128((__m128i *)(c->out + i), packed);
    }
    probe_scalar(c, i, hi);
}

__attribute__((target("avx512f,avx512bw"))) static void probe_avx512(const probe_ctx *c, int64_t lo,
                                                                     int64_t hi)
{
    const __m512 tiny = _mm512_set1_ps(1e-30f);
    int64_t i = lo;
    /* streaming stores need 32-byte aligned destinations: plain stores up to there */
    while (c->out && i < hi && ((uintptr_t)(c->out + i) & 31))
        probe_scalar(c, i, i + 1), i++;
    for (; i + 16 <= hi; i += 16) {
        __m512 g = c->grad_bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(
                                      _mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                          (const __m256i *)((const uint16_t *)c->grad + i))),
                                      16))
                                : _mm512_loadu_ps((const float *)c->grad + i);
        g = _mm512_mul_ps(g, tiny);
        __m512 p = _mm512_add_ps(_mm512_loadu_ps(c->master + i), g);
        _mm512_storeu_ps(c->master + i, p);
        _mm512_storeu_ps(c->m + i, _mm512_add_ps(_mm512_loadu_ps(c->m + i), g));
        _mm512_storeu_ps(c->v + i, _mm512_add_ps(_mm512_loadu_ps(c->v + i), g));
        if (!c->out)
            continue;
        __m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(p), 16));
        _mm256_stream_si256((__m256i *)(c->out + i), h);
    }
    probe_scalar(c, i, hi);
    _mm_sfence();
}

static void probe_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const probe_ctx *c = arg;
    if (c->variant == ZT_ADAM_AVX512)
        probe_avx512(c, lo, hi);
    else if (c->variant == ZT_ADAM_AVX2)
        probe_avx2(c, lo, hi);
    else
        probe_scalar(c, lo, hi);
}

void bench_adam_probe(zt_threadpool *pool, zt_adam_variant variant, float *master, float *m,
                      float *v, const void *grad, int grad_bf16, uint16_t *out, int64_t n)
{
    probe_ctx c = {master, m, v, grad, grad_bf16, out, variant};
    zt_threadpool_run(pool, n, ZT_ADAM_CHUNK, probe_chunk, &c);
}

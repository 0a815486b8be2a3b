/* SPDX-License-Identifier: MIT */
/* Adam kernels: the scalar reference against Adam/AdamW in double over several steps; every
 * SIMD variant bitwise against the scalar reference (odd lengths, unaligned heads and tails,
 * subnormal, huge and tiny values, inf/nan gradients, every gradient and output dtype); the
 * thread-pool step bitwise against the serial one; the gradient sum of squares against a
 * double sum; the per-call constants; variant names. */
#include "optimizer/adam.h"
#include "core/convert.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rng_state = 0x12345678;

static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static float frand(float lo, float hi) { return lo + (hi - lo) * (float)rnd() / 2147483648.0f; }

enum { PAD = 32 }; /* floats of slack on each side of every array */

/* One shard's arrays. Each lives inside a 64-byte aligned block, PAD floats plus its own
 * offset from the start, so heads, tails and relative alignments vary. */
typedef struct shard {
    int64_t n;
    float *master, *m, *v, *gf;
    uint16_t *g16;
    void *out; /* 4 * n bytes: room for any parameter dtype */
    void *blocks[6];
} shard;

static void *carve(shard *s, int slot, size_t bytes, int offset_bytes)
{
    void *block = NULL;
    assert_int_equal(posix_memalign(&block, 64, bytes + 2 * PAD * sizeof(float)), 0);
    memset(block, 0x5a, bytes + 2 * PAD * sizeof(float));
    s->blocks[slot] = block;
    return (char *)block + PAD * sizeof(float) + offset_bytes;
}

/* offsets[k] (0..15 floats) for master, m, v, grad, g16, out. */
static void shard_alloc(shard *s, int64_t n, const int offsets[6])
{
    size_t f = sizeof(float) * (size_t)n;
    s->n = n;
    s->master = carve(s, 0, f, offsets[0] * 4);
    s->m = carve(s, 1, f, offsets[1] * 4);
    s->v = carve(s, 2, f, offsets[2] * 4);
    s->gf = carve(s, 3, f, offsets[3] * 4);
    s->g16 = carve(s, 4, f, offsets[4] * 2);
    s->out = carve(s, 5, f, offsets[5] * 4);
}

static void shard_free(shard *s)
{
    for (int k = 0; k < 6; k++)
        free(s->blocks[k]);
}

/* Values of every kind a shard can hold: mostly ordinary, some tiny, subnormal, huge, zero. */
static float some_value(float typical)
{
    switch (rnd() % 16) {
    case 0:
        return typical * 1e-6f;
    case 1:
        return frand(-1, 1) * 1e-39f; /* subnormal */
    case 2:
        return typical * 1e4f;
    case 3:
        return 0.0f;
    default:
        return frand(-1, 1) * typical;
    }
}

static void shard_fill(shard *s, int special)
{
    for (int64_t i = 0; i < s->n; i++) {
        s->master[i] = some_value(1.0f);
        s->m[i] = some_value(0.1f);
        s->v[i] = fabsf(some_value(0.01f));
        s->gf[i] = some_value(1.0f);
        if (special) {
            uint32_t r = rnd() % 64;
            if (r == 0)
                s->gf[i] = 3e30f; /* finite, but g * g overflows: v = inf */
            else if (r == 1)
                s->gf[i] = INFINITY;
            else if (r == 2)
                s->gf[i] = -NAN;
            else if (r == 3)
                s->gf[i] = 3e38f; /* overflows once scaled by grad_scale > 1 */
            else if (r == 4)
                s->master[i] = 1e-42f; /* subnormal master: its bf16 copy too */
        }
    }
}

static void shard_copy(shard *dst, const shard *src)
{
    size_t f = sizeof(float) * (size_t)src->n;
    memcpy(dst->master, src->master, f);
    memcpy(dst->m, src->m, f);
    memcpy(dst->v, src->v, f);
    memcpy(dst->gf, src->gf, f);
    memcpy(dst->g16, src->g16, sizeof(uint16_t) * (size_t)src->n);
    memcpy(dst->out, src->out, f);
}

/* gdt: fills g16 from gf. pdt < 0: no parameter copy. */
static zt_adam_tensors shard_tensors(shard *s, zt_dtype gdt, int pdt)
{
    if (gdt != ZT_F32)
        for (int64_t i = 0; i < s->n; i++)
            s->g16[i] = gdt == ZT_BF16 ? zt_f32_to_bf16(s->gf[i]) : zt_f32_to_f16(s->gf[i]);
    zt_adam_tensors t = {s->master,
                         s->m,
                         s->v,
                         gdt == ZT_F32 ? (void *)s->gf : (void *)s->g16,
                         gdt,
                         pdt < 0 ? NULL : s->out,
                         pdt < 0 ? ZT_F32 : (zt_dtype)pdt,
                         s->n};
    return t;
}

/* Same bits, or both NaN (a NaN's payload may differ between variants). */
static int same_f32(float a, float b)
{
    return (isnan(a) && isnan(b)) || zt_f32_bits(a) == zt_f32_bits(b);
}

static int same_16(uint16_t a, uint16_t b, zt_dtype dt)
{
    float x = dt == ZT_BF16 ? zt_bf16_to_f32(a) : zt_f16_to_f32(a);
    float y = dt == ZT_BF16 ? zt_bf16_to_f32(b) : zt_f16_to_f32(b);
    return a == b || (isnan(x) && isnan(y));
}

static void expect_same_shard(const shard *ref, const shard *got, int pdt, const char *what)
{
    for (int64_t i = 0; i < ref->n; i++) {
        int ok = same_f32(ref->master[i], got->master[i]) && same_f32(ref->m[i], got->m[i]) &&
                 same_f32(ref->v[i], got->v[i]);
        if (pdt == ZT_F32)
            ok = ok && same_f32(((float *)ref->out)[i], ((float *)got->out)[i]);
        else if (pdt >= 0)
            ok = ok && same_16(((uint16_t *)ref->out)[i], ((uint16_t *)got->out)[i], (zt_dtype)pdt);
        if (!ok)
            fail_msg("%s: element %lld of %lld: master %a/%a m %a/%a v %a/%a", what, (long long)i,
                     (long long)ref->n, (double)ref->master[i], (double)got->master[i],
                     (double)ref->m[i], (double)got->m[i], (double)ref->v[i], (double)got->v[i]);
    }
}

/* The parameter copy is the updated master rounded by the scalar conversions. */
static void expect_copy_of_master(const shard *s, int pdt)
{
    for (int64_t i = 0; i < s->n && pdt >= 0; i++) {
        if (pdt == ZT_F32)
            assert_true(same_f32(((float *)s->out)[i], s->master[i]));
        else {
            uint16_t want =
                pdt == ZT_BF16 ? zt_f32_to_bf16(s->master[i]) : zt_f32_to_f16(s->master[i]);
            assert_true(same_16(((uint16_t *)s->out)[i], want, (zt_dtype)pdt));
        }
    }
}

static zt_adam_hparams hparams(int adamw, float grad_scale)
{
    zt_adam_hparams h = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, adamw, 7, grad_scale};
    return h;
}

/* Kernels under test: each SIMD variant this CPU has; AVX-512 with and without the
 * AVX512_BF16 rounding instruction. */
typedef struct kernel {
    zt_adam_variant variant;
    int bf16_insn;
    const char *name;
} kernel;

static int kernels_available(kernel *out)
{
    int n = 0;
    if (zt_adam_variant_supported(ZT_ADAM_AVX2))
        out[n++] = (kernel){ZT_ADAM_AVX2, 0, "avx2"};
    if (zt_adam_variant_supported(ZT_ADAM_AVX512)) {
        out[n++] = (kernel){ZT_ADAM_AVX512, 0, "avx512"};
        zt_adam_consts c;
        zt_adam_hparams h = hparams(1, 1.0f);
        zt_adam_consts_init(&c, &h);
        if (c.bf16_insn)
            out[n++] = (kernel){ZT_ADAM_AVX512, 1, "avx512+bf16"};
    }
    return n;
}

static int64_t run_kernel(const kernel *k, const zt_adam_hparams *h, const zt_adam_tensors *t)
{
    zt_adam_consts c;
    zt_adam_consts_init(&c, h);
    c.bf16_insn = k->bf16_insn;
    return zt_adam_step_consts(k->variant, &c, t);
}

/* Runs the scalar reference and kernel k on copies of one random shard; compares bitwise. */
static void compare_kernel(const kernel *k, int64_t n, const int offsets[6], zt_dtype gdt, int pdt,
                           int adamw, float grad_scale)
{
    static const int aligned[6] = {0};
    shard ref, got;
    shard_alloc(&ref, n, aligned);
    shard_alloc(&got, n, offsets);
    shard_fill(&ref, 1);
    shard_copy(&got, &ref);
    zt_adam_hparams h = hparams(adamw, grad_scale);
    zt_adam_tensors tr = shard_tensors(&ref, gdt, pdt), tg = shard_tensors(&got, gdt, pdt);
    int64_t bad_ref = zt_adam_step(ZT_ADAM_SCALAR, &h, &tr);
    int64_t bad_got = run_kernel(k, &h, &tg);
    char what[160];
    snprintf(what, sizeof what, "%s n=%lld offsets %d,%d,%d,%d,%d,%d gdt=%d pdt=%d adamw=%d",
             k->name, (long long)n, offsets[0], offsets[1], offsets[2], offsets[3], offsets[4],
             offsets[5], gdt, pdt, adamw);
    if (bad_ref != bad_got)
        fail_msg("%s: non-finite count %lld, scalar %lld", what, (long long)bad_got,
                 (long long)bad_ref);
    expect_same_shard(&ref, &got, pdt, what);
    expect_copy_of_master(&got, pdt);
    /* nothing written outside the arrays */
    assert_int_equal(((unsigned char *)got.master)[-1], 0x5a);
    assert_int_equal(((unsigned char *)(got.master + n))[0], 0x5a);
    shard_free(&ref);
    shard_free(&got);
}

static void test_variants_bitwise_equal_scalar(void **state)
{
    (void)state;
    kernel ks[4];
    int nk = kernels_available(ks);
    if (nk == 0)
        skip();
    const int64_t lengths[] = {1, 7, 15, 16, 17, 31, 33, 1023, 100003};
    const int pdts[] = {-1, ZT_F32, ZT_BF16, ZT_F16};
    for (int k = 0; k < nk; k++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int off = 0; off < 16; off++) {
                int64_t n = lengths[l];
                if (n > 1023 && off % 5 != 1)
                    continue; /* the long shard at a few offsets only */
                /* all arrays at one offset, or each at its own */
                int same[6] = {off, off, off, off, off, off};
                int mixed[6] = {
                    off,           (off + 3) % 16, (off + 7) % 16, (off + 1) % 16, (off + 9) % 16,
                    (off + 5) % 16};
                zt_dtype gdt = (zt_dtype)((off + l) % 3);
                int pdt = pdts[(off + 2 * l) % 4];
                float gs = off % 4 == 0 ? 4.0f : 0.5f;
                compare_kernel(&ks[k], n, off % 2 ? mixed : same, gdt, pdt, off % 3 != 0, gs);
            }
    /* every gradient dtype with every parameter dtype, both modes, at one odd length */
    for (int k = 0; k < nk; k++)
        for (int g = 0; g < 3; g++)
            for (int p = 0; p < 4; p++)
                for (int adamw = 0; adamw <= 1; adamw++) {
                    int offs[6] = {3, 3, 3, 3, 3, 3};
                    compare_kernel(&ks[k], 1000 + 3 * g + p, offs, (zt_dtype)g, pdts[p], adamw,
                                   1.0f);
                }
}

static void test_nonfinite_gradients_counted(void **state)
{
    (void)state;
    for (zt_adam_variant var = ZT_ADAM_SCALAR; var <= ZT_ADAM_AVX512; var++) {
        if (!zt_adam_variant_supported(var))
            continue;
        for (int64_t n = 37; n <= 38; n++) { /* the bad ones in body and tail */
            static const int offs[6] = {1, 1, 1, 1, 1, 1};
            shard s;
            shard_alloc(&s, n, offs);
            shard_fill(&s, 0);
            s.gf[0] = INFINITY, s.gf[20] = NAN, s.gf[36] = -INFINITY, s.gf[9] = 3e38f;
            zt_adam_hparams h = hparams(1, 4.0f); /* 3e38 * 4 overflows to inf: counted too */
            zt_adam_tensors t = shard_tensors(&s, ZT_F32, ZT_BF16);
            assert_int_equal(zt_adam_step(var, &h, &t), 4);
            int64_t bad = 0;
            double ss = zt_grad_sumsq(var, s.gf, ZT_F32, n, 4.0f, &bad);
            assert_int_equal(bad, 4);
            assert_true(isfinite(ss) && ss > 0);
            /* the NaN gradient made a NaN parameter, and its bf16 copy is NaN too */
            assert_true(isnan(s.master[20]));
            assert_true(isnan(zt_bf16_to_f32(((uint16_t *)s.out)[20])));
            shard_free(&s);
        }
    }
}

/* The scalar kernel against Adam/AdamW computed in double, over several steps. */
static void test_scalar_matches_double(void **state)
{
    (void)state;
    enum { N = 257, STEPS = 10 };
    for (int adamw = 0; adamw <= 1; adamw++) {
        float p[N], m[N] = {0}, v[N] = {0}, g[N];
        double pd[N], md[N] = {0}, vd[N] = {0};
        double mterms[N] = {0}; /* |m| if its terms never cancelled: the scale of m's error */
        for (int i = 0; i < N; i++)
            pd[i] = p[i] = frand(-1, 1);
        const double lr = 1e-2, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.05, scale = 0.25;
        zt_adam_hparams h = {(float)lr, (float)b1, (float)b2, (float)eps,
                             (float)wd, adamw,     0,         (float)scale};
        for (int s = 1; s <= STEPS; s++) {
            for (int i = 0; i < N; i++)
                g[i] = frand(-4, 4);
            h.step = s;
            zt_adam_tensors t = {p, m, v, g, ZT_F32, NULL, ZT_F32, N};
            assert_int_equal(zt_adam_step(ZT_ADAM_SCALAR, &h, &t), 0);
            /* the double reference uses the float hyper-parameters' exact values */
            double flr = h.lr, fb1 = h.beta1, fb2 = h.beta2, fwd = h.weight_decay;
            for (int i = 0; i < N; i++) {
                double gi = g[i] * scale + (adamw ? 0.0 : fwd * pd[i]);
                md[i] = fb1 * md[i] + (1 - fb1) * gi;
                mterms[i] = fb1 * mterms[i] + (1 - fb1) * fabs(gi);
                vd[i] = fb2 * vd[i] + (1 - fb2) * gi * gi;
                double mhat = md[i] / (1 - pow(fb1, s)), vhat = vd[i] / (1 - pow(fb2, s));
                if (adamw)
                    pd[i] -= flr * fwd * pd[i];
                pd[i] -= flr * mhat / (sqrt(vhat) + (double)h.eps);
            }
            for (int i = 0; i < N; i++) {
                if (fabs(p[i] - pd[i]) > 1e-6 * (fabs(pd[i]) + lr) ||
                    fabs(m[i] - md[i]) > 1e-6 * mterms[i] ||
                    fabs(v[i] - vd[i]) > 1e-6 * fabs(vd[i]) + 1e-15)
                    fail_msg("adamw=%d step %d elem %d: p %.9g/%.9g m %.9g/%.9g v %.9g/%.9g", adamw,
                             s, i, (double)p[i], pd[i], (double)m[i], md[i], (double)v[i], vd[i]);
            }
        }
    }
}

static void parallel_equals_serial(zt_adam_variant var, int threads, int offset)
{
    zt_threadpool *pool = NULL;
    zt_error err;
    assert_int_equal(zt_threadpool_create(threads, -1, &pool, &err), ZT_OK);
    int64_t n = 3 * ZT_ADAM_CHUNK + 12345;
    int offs[6] = {offset, offset, offset, offset, offset, offset};
    shard a, b;
    shard_alloc(&a, n, offs);
    shard_alloc(&b, n, offs);
    shard_fill(&a, 1);
    shard_copy(&b, &a);
    zt_adam_hparams h = hparams(1, 1.0f);
    zt_adam_tensors ta = shard_tensors(&a, ZT_BF16, ZT_BF16);
    zt_adam_tensors tb = shard_tensors(&b, ZT_BF16, ZT_BF16);
    int64_t bad_a = zt_adam_step(var, &h, &ta);
    int64_t bad_b = zt_adam_step_parallel(pool, var, &h, &tb);
    assert_true(bad_a > 0);
    assert_int_equal(bad_a, bad_b);
    assert_memory_equal(a.master, b.master, sizeof(float) * (size_t)n);
    assert_memory_equal(a.m, b.m, sizeof(float) * (size_t)n);
    assert_memory_equal(a.v, b.v, sizeof(float) * (size_t)n);
    assert_memory_equal(a.out, b.out, sizeof(uint16_t) * (size_t)n);
    shard_free(&a);
    shard_free(&b);
    zt_threadpool_destroy(pool);
}

static void test_parallel_step_is_bitwise_serial(void **state)
{
    (void)state;
    for (zt_adam_variant var = ZT_ADAM_SCALAR; var <= ZT_ADAM_AVX512; var++) {
        if (!zt_adam_variant_supported(var))
            continue;
        for (int threads = 1; threads <= 3; threads++)
            parallel_equals_serial(var, threads, threads == 2 ? 5 : 0);
    }
    /* no pool: the caller's thread alone */
    float p[3] = {1, 2, 3}, m[3] = {0}, v[3] = {0}, g[3] = {1, 1, NAN};
    zt_adam_hparams h = hparams(1, 1.0f);
    zt_adam_tensors t = {p, m, v, g, ZT_F32, NULL, ZT_F32, 3};
    assert_int_equal(zt_adam_step_parallel(NULL, ZT_ADAM_SCALAR, &h, &t), 1);
}

static void test_grad_sumsq_matches_double(void **state)
{
    (void)state;
    int64_t n = 10007;
    float *g = malloc(sizeof(float) * (size_t)n);
    uint16_t *hb = malloc(sizeof(uint16_t) * (size_t)n), *hf = malloc(sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        g[i] = frand(-2, 2) * (i % 13 == 0 ? 1e-20f : 1.0f);
        hb[i] = zt_f32_to_bf16(g[i]);
        hf[i] = zt_f32_to_f16(g[i]);
    }
    g[5] = NAN, g[n - 1] = INFINITY; /* one in the vector body, one in the tail */
    hb[5] = 0x7fc0, hb[n - 1] = 0xff80;
    hf[5] = 0x7e00, hf[n - 3] = 0x7c00;
    const void *grads[3] = {g, hb, hf};
    for (int dt = 0; dt < 3; dt++) {
        double want = 0;
        for (int64_t i = 0; i < n; i++) {
            float x = dt == 0 ? g[i] : dt == 1 ? zt_bf16_to_f32(hb[i]) : zt_f16_to_f32(hf[i]);
            x *= 0.5f;
            if (isfinite(x))
                want += (double)x * x;
        }
        for (zt_adam_variant var = ZT_ADAM_SCALAR; var <= ZT_ADAM_AVX512; var++) {
            if (!zt_adam_variant_supported(var))
                continue;
            int64_t bad = -1;
            double got = zt_grad_sumsq(var, grads[dt], (zt_dtype)dt, n, 0.5f, &bad);
            if (!(fabs(got - want) <= 1e-12 * want))
                fail_msg("%s dtype %d: %.17g, double %.17g", zt_adam_variant_name(var), dt, got,
                         want);
            assert_int_equal(bad, 2);
            assert_true(zt_grad_sumsq(var, grads[dt], (zt_dtype)dt, 0, 1.0f, &bad) == 0.0);
            assert_int_equal(bad, 0);
        }
    }
    free(g), free(hb), free(hf);
}

/* The norm pass over a thread pool: the double-precision sum to rounding, the same bits for
 * 1, 2 and 3 threads, the non-finite elements counted in every chunk. */
static void test_grad_sumsq_parallel(void **state)
{
    (void)state;
    int64_t n = 5 * ZT_ADAM_CHUNK + 777;
    float *g = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        g[i] = frand(-2, 2);
    g[3] = NAN, g[2 * ZT_ADAM_CHUNK + 1] = INFINITY, g[n - 1] = -INFINITY;
    double want = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(g[i]))
            want += (double)(g[i] * 0.25f) * (double)(g[i] * 0.25f);
    zt_adam_variant var = zt_adam_variant_best();
    double first = 0;
    for (int threads = 1; threads <= 3; threads++) {
        zt_threadpool *pool = NULL;
        zt_error err = {0};
        assert_int_equal(zt_threadpool_create(threads, -1, &pool, &err), ZT_OK);
        int64_t bad = -1;
        double got = zt_grad_sumsq_parallel(pool, var, g, ZT_F32, n, 0.25f, &bad);
        zt_threadpool_destroy(pool);
        assert_int_equal(bad, 3);
        if (!(fabs(got - want) <= 1e-12 * want))
            fail_msg("%d threads: %.17g, double %.17g", threads, got, want);
        if (threads == 1)
            first = got;
        assert_memory_equal(&got, &first, sizeof got); /* the same bits */
    }
    int64_t bad = -1; /* no pool: the same chunks in order, the same bits */
    double nopool = zt_grad_sumsq_parallel(NULL, var, g, ZT_F32, n, 0.25f, &bad);
    assert_memory_equal(&nopool, &first, sizeof first);
    assert_int_equal(bad, 3);
    free(g);
}

/* The accumulation with the norm folded in: acc += grad exactly as element-wise fp32 adds,
 * and the returned sum has the bits of a separate zt_grad_sumsq_parallel pass over the
 * result, for fp32 and bf16 gradients, with and without a pool. */
static void test_grad_accumulate_folds_the_norm(void **state)
{
    (void)state;
    int64_t n = 3 * ZT_ADAM_CHUNK + 1001;
    float *acc = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
    float *g = malloc(sizeof(float) * (size_t)n);
    uint16_t *gb = malloc(sizeof(uint16_t) * (size_t)n);
    zt_threadpool *pool = NULL;
    zt_error err = {0};
    assert_int_equal(zt_threadpool_create(2, -1, &pool, &err), ZT_OK);
    zt_adam_variant var = zt_adam_variant_best();
    for (int with_pool = 0; with_pool < 2; with_pool++)
        for (int dt = 0; dt < 2; dt++) {
            for (int64_t i = 0; i < n; i++) {
                acc[i] = frand(-1, 1);
                g[i] = frand(-1, 1);
                gb[i] = zt_f32_to_bf16(g[i]);
                want[i] = acc[i] + (dt ? zt_bf16_to_f32(gb[i]) : g[i]);
            }
            g[ZT_ADAM_CHUNK + 5] = NAN, gb[ZT_ADAM_CHUNK + 5] = 0x7fc0;
            want[ZT_ADAM_CHUNK + 5] = NAN;
            int64_t bad = -1, bad2 = -1;
            double got = zt_grad_accumulate(with_pool ? pool : NULL, var, acc, ZT_F32,
                                            dt ? (const void *)gb : g, dt ? ZT_BF16 : ZT_F32, n,
                                            0.5f, &bad, 0);
            for (int64_t i = 0; i < n; i++)
                if (!(acc[i] == want[i] || (isnan(acc[i]) && isnan(want[i]))))
                    fail_msg("element %lld: %g, want %g", (long long)i, (double)acc[i],
                             (double)want[i]);
            double pass = zt_grad_sumsq_parallel(pool, var, acc, ZT_F32, n, 0.5f, &bad2);
            assert_memory_equal(&got, &pass, sizeof got);
            assert_int_equal(bad, 1);
            assert_int_equal(bad2, 1);
            /* without a norm wanted it only adds */
            assert_true(zt_grad_accumulate(pool, var, acc, ZT_F32, g, ZT_F32, 10, 1.0f, NULL, 0) ==
                        0.0);
            /* overwrite: acc's old contents (NaN here) are not read; 0 + g, as into zeros */
            g[7] = -0.0f, gb[7] = 0x8000;
            for (int64_t i = 0; i < n; i++)
                acc[i] = NAN, want[i] = 0.0f + (dt ? zt_bf16_to_f32(gb[i]) : g[i]);
            zt_grad_accumulate(with_pool ? pool : NULL, var, acc, ZT_F32, dt ? (const void *)gb : g,
                               dt ? ZT_BF16 : ZT_F32, n, 0.5f, NULL, 1);
            for (int64_t i = 0; i < n; i++)
                if (memcmp(&acc[i], &want[i], sizeof(float)) && !(isnan(acc[i]) && isnan(want[i])))
                    fail_msg("overwrite, element %lld: %g, want %g", (long long)i, (double)acc[i],
                             (double)want[i]);
            assert_true(!signbit(acc[7]));
        }
    /* a bf16 accumulator: each element's sum in fp32, rounded once; the norm of the bf16
     * values as a separate pass over them gives it */
    uint16_t *acc16 = malloc(sizeof(uint16_t) * (size_t)n),
             *want16 = malloc(sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        acc16[i] = zt_f32_to_bf16(frand(-1, 1));
        g[i] = frand(-1, 1);
        want16[i] = zt_f32_to_bf16(zt_bf16_to_f32(acc16[i]) + g[i]);
    }
    int64_t bad = -1, bad2 = -1;
    double got = zt_grad_accumulate(pool, var, acc16, ZT_BF16, g, ZT_F32, n, 0.5f, &bad, 0);
    assert_memory_equal(acc16, want16, sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) /* overwrite: the NaNs in acc16 are not read */
        acc16[i] = 0x7fc0, want16[i] = zt_f32_to_bf16(0.0f + g[i]);
    zt_grad_accumulate(pool, var, acc16, ZT_BF16, g, ZT_F32, n, 0.5f, NULL, 1);
    assert_memory_equal(acc16, want16, sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) /* and the sums again, for the norm check below */
        acc16[i] = zt_f32_to_bf16(frand(-1, 1)),
        want16[i] = zt_f32_to_bf16(zt_bf16_to_f32(acc16[i]) + g[i]);
    got = zt_grad_accumulate(pool, var, acc16, ZT_BF16, g, ZT_F32, n, 0.5f, &bad, 0);
    assert_memory_equal(acc16, want16, sizeof(uint16_t) * (size_t)n);
    double pass = zt_grad_sumsq_parallel(pool, var, acc16, ZT_BF16, n, 0.5f, &bad2);
    assert_memory_equal(&got, &pass, sizeof got);
    assert_int_equal(bad, 0);
    free(acc16), free(want16);
    zt_threadpool_destroy(pool);
    free(acc), free(want), free(g), free(gb);
}

/* The per-call constants: bias corrections in double, rounded once. */
static void test_consts_from_hparams(void **state)
{
    (void)state;
    zt_adam_hparams h = {3e-4f, 0.9f, 0.95f, 1e-6f, 0.01f, 1, 3, 2.0f};
    zt_adam_consts c;
    zt_adam_consts_init(&c, &h);
    double b1 = h.beta1, b2 = h.beta2;
    assert_true(c.step_size == (float)((double)h.lr / (1 - b1 * b1 * b1)));
    assert_true(c.inv_sqrt_bc2 == (float)(1 / sqrt(1 - b2 * b2 * b2)));
    assert_true(c.decay == h.lr * h.weight_decay && c.l2 == 0.0f);
    assert_true(c.grad_scale == 2.0f && c.eps == h.eps);
    h.adamw = 0;
    h.step = 0; /* taken as step 1 */
    zt_adam_consts_init(&c, &h);
    assert_true(c.decay == 0.0f && c.l2 == h.weight_decay);
    assert_true(c.step_size == (float)((double)h.lr / (1 - b1)));
}

static void test_variant_names(void **state)
{
    (void)state;
    zt_adam_variant v = ZT_ADAM_AVX2;
    assert_int_equal(zt_adam_variant_parse("scalar", &v), 0);
    assert_int_equal(v, ZT_ADAM_SCALAR);
    assert_int_equal(zt_adam_variant_parse("auto", &v), 0);
    assert_int_equal(v, zt_adam_variant_best());
    assert_int_equal(zt_adam_variant_parse(NULL, &v), 0);
    assert_int_equal(zt_adam_variant_parse("sse9", &v), -1);
    for (zt_adam_variant k = ZT_ADAM_SCALAR; k <= ZT_ADAM_AVX512; k++) {
        int rc = zt_adam_variant_parse(zt_adam_variant_name(k), &v);
        assert_int_equal(rc, zt_adam_variant_supported(k) ? 0 : -1);
        if (rc == 0)
            assert_int_equal(v, k);
    }
    assert_true(zt_adam_variant_supported(zt_adam_variant_best()));
    assert_string_equal(zt_adam_variant_name((zt_adam_variant)42), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_matches_double),
        cmocka_unit_test(test_variants_bitwise_equal_scalar),
        cmocka_unit_test(test_nonfinite_gradients_counted),
        cmocka_unit_test(test_parallel_step_is_bitwise_serial),
        cmocka_unit_test(test_grad_sumsq_matches_double),
        cmocka_unit_test(test_grad_sumsq_parallel),
        cmocka_unit_test(test_grad_accumulate_folds_the_norm),
        cmocka_unit_test(test_consts_from_hparams),
        cmocka_unit_test(test_variant_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

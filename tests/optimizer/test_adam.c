/* Adam kernels: the scalar reference against a double-precision AdamW/Adam; every SIMD
 * variant against the scalar reference on random inputs with odd lengths, unaligned heads
 * and tails, denormals, huge and tiny values, inf/nan gradients, each gradient and output
 * dtype; the thread-pool step equals the single-threaded one bitwise; conversions against
 * exact references; the gradient sum of squares against double. */
#include "optimizer/adam.h"
#include "optimizer/convert.h"

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

typedef struct buffers {
    float *master, *m, *v, *gf;
    uint16_t *g16, *out16;
    float *out32;
} buffers;

/* Allocates with `offset` floats of misalignment and fills with varied magnitudes. */
static void make(buffers *b, int64_t n, int offset, int special)
{
    b->master = (float *)malloc(sizeof(float) * (size_t)(n + 16)) + offset;
    b->m = (float *)malloc(sizeof(float) * (size_t)(n + 16)) + offset;
    b->v = (float *)malloc(sizeof(float) * (size_t)(n + 16)) + offset;
    b->gf = (float *)malloc(sizeof(float) * (size_t)(n + 16)) + offset;
    b->g16 = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(n + 16)) + offset;
    b->out16 = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(n + 16)) + offset;
    b->out32 = (float *)malloc(sizeof(float) * (size_t)(n + 16)) + offset;
    for (int64_t i = 0; i < n; i++) {
        float scale = (i % 7 == 0) ? 1e-3f : (i % 11 == 0) ? 30.0f : 1.0f;
        b->master[i] = frand(-1, 1) * scale;
        b->m[i] = frand(-0.1f, 0.1f);
        b->v[i] = frand(0, 0.01f);
        b->gf[i] = frand(-1, 1) * scale;
        if (special && i % 13 == 5)
            b->gf[i] = 1e-40f; /* denormal */
        if (special && i % 17 == 3)
            b->gf[i] = 3e30f;
        b->g16[i] = zt_f32_to_bf16(b->gf[i]);
    }
}

static void release(buffers *b, int offset)
{
    free(b->master - offset), free(b->m - offset), free(b->v - offset), free(b->gf - offset);
    free(b->g16 - offset), free(b->out16 - offset), free(b->out32 - offset);
}

static void copy(buffers *dst, const buffers *src, int64_t n)
{
    memcpy(dst->master, src->master, sizeof(float) * (size_t)n);
    memcpy(dst->m, src->m, sizeof(float) * (size_t)n);
    memcpy(dst->v, src->v, sizeof(float) * (size_t)n);
    memcpy(dst->gf, src->gf, sizeof(float) * (size_t)n);
    memcpy(dst->g16, src->g16, sizeof(uint16_t) * (size_t)n);
}

/* Equal up to rounding: FMA contraction in the SIMD kernels rounds differently, and a sum
 * that cancels keeps only the absolute error of its terms, so the bound scales with the
 * magnitude of the terms (`scale`), not only of the result. */
static int close_enough(float a, float b, double scale)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (a == b)
        return 1; /* also equal infinities */
    double diff = fabs((double)a - b), mag = fmax(fabs(a), fabs(b));
    return diff <= 4e-6 * mag + 1e-6 * scale + 1e-30;
}

static zt_adam_hparams hparams(int adamw)
{
    zt_adam_hparams h = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, adamw, 7, 0.5f};
    return h;
}

static zt_adam_tensors tensors(buffers *b, int64_t n, zt_dtype gdt, zt_dtype pdt)
{
    zt_adam_tensors t = {b->master, b->m, b->v, gdt == ZT_F32 ? (void *)b->gf : (void *)b->g16,
                         gdt, pdt == ZT_F32 ? (void *)b->out32 : (void *)b->out16, pdt, n};
    return t;
}

static void compare_variant(zt_adam_variant var, int64_t n, int offset, zt_dtype gdt,
                            zt_dtype pdt, int adamw, int special)
{
    buffers ref, got;
    make(&ref, n, offset, special);
    make(&got, n, (offset + 3) % 16, special);
    copy(&got, &ref, n);
    if (gdt == ZT_F16)
        for (int64_t i = 0; i < n; i++)
            ref.g16[i] = got.g16[i] = zt_f32_to_f16(ref.gf[i]);
    zt_adam_hparams h = hparams(adamw);
    zt_adam_tensors tr = tensors(&ref, n, gdt, pdt), tg = tensors(&got, n, gdt, pdt);
    float *m0 = malloc(sizeof(float) * (size_t)n), *v0 = malloc(sizeof(float) * (size_t)n);
    float *p0 = malloc(sizeof(float) * (size_t)n);
    memcpy(m0, ref.m, sizeof(float) * (size_t)n);
    memcpy(v0, ref.v, sizeof(float) * (size_t)n);
    memcpy(p0, ref.master, sizeof(float) * (size_t)n);
    int64_t bad_ref = zt_adam_step(ZT_ADAM_SCALAR, &h, &tr);
    int64_t bad_got = zt_adam_step(var, &h, &tg);
    assert_int_equal(bad_ref, bad_got);
    for (int64_t i = 0; i < n; i++) {
        double g = fabs(gdt == ZT_F32 ? ref.gf[i] : gdt == ZT_BF16 ? zt_bf16_to_f32(ref.g16[i])
                                                                  : zt_f16_to_f32(ref.g16[i]));
        g = g * h.grad_scale + h.weight_decay * fabs(p0[i]);
        if (!close_enough(ref.master[i], got.master[i], fabs(p0[i]) + h.lr) ||
            !close_enough(ref.m[i], got.m[i], fabs(m0[i]) + g) ||
            !close_enough(ref.v[i], got.v[i], fabs(v0[i]) + g * g))
            fail_msg("%s n=%lld off=%d gdt=%d elem %lld: master %g/%g m %g/%g v %g/%g",
                     zt_adam_variant_name(var), (long long)n, offset, gdt, (long long)i,
                     (double)ref.master[i], (double)got.master[i], (double)ref.m[i],
                     (double)got.m[i], (double)ref.v[i], (double)got.v[i]);
        /* the low-precision copy is the variant's own master rounded exactly */
        if (pdt == ZT_BF16)
            assert_int_equal(got.out16[i], zt_f32_to_bf16(got.master[i]));
        else if (pdt == ZT_F16)
            assert_int_equal(got.out16[i], zt_f32_to_f16(got.master[i]));
        else
            assert_memory_equal(&got.out32[i], &got.master[i], sizeof(float));
    }
    free(m0), free(v0), free(p0);
    release(&ref, offset);
    release(&got, (offset + 3) % 16);
}

static void test_variants_match_scalar(void **state)
{
    (void)state;
    const int64_t lengths[] = {1, 7, 15, 16, 17, 1023, 100003};
    const zt_dtype gdts[] = {ZT_F32, ZT_BF16, ZT_F16}, pdts[] = {ZT_F32, ZT_BF16, ZT_F16};
    int ran = 0;
    for (zt_adam_variant var = ZT_ADAM_AVX2; var <= ZT_ADAM_AVX512; var++) {
        if (!zt_adam_variant_supported(var))
            continue;
        ran++;
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int g = 0; g < 3; g++)
                for (int p = 0; p < 3; p++)
                    compare_variant(var, lengths[l], (int)(l * 5 % 16), gdts[g], pdts[p],
                                    (int)(l % 2), (int)(l % 3 == 0));
    }
    if (!ran)
        skip();
}

static void test_nonfinite_gradients_counted(void **state)
{
    (void)state;
    for (zt_adam_variant var = ZT_ADAM_SCALAR; var <= ZT_ADAM_AVX512; var++) {
        if (!zt_adam_variant_supported(var))
            continue;
        buffers b;
        int64_t n = 37;
        make(&b, n, 1, 0);
        b.gf[0] = INFINITY, b.gf[20] = NAN, b.gf[36] = -INFINITY, b.gf[9] = 3e38f;
        zt_adam_hparams h = hparams(1);
        h.grad_scale = 4.0f; /* 3e38 * 4 overflows to inf: counted too */
        zt_adam_tensors t = tensors(&b, n, ZT_F32, ZT_F32);
        assert_int_equal(zt_adam_step(var, &h, &t), 4);
        int64_t bad = 0;
        double ss = zt_grad_sumsq(var, b.gf, ZT_F32, n, 4.0f, &bad);
        assert_int_equal(bad, 4);
        assert_true(isfinite(ss));
        release(&b, 1);
    }
}

/* The scalar kernel against AdamW/Adam in double over several steps. */
static void test_scalar_matches_double(void **state)
{
    (void)state;
    enum { N = 257, STEPS = 10 };
    for (int adamw = 0; adamw <= 1; adamw++) {
        float p[N], m[N] = {0}, v[N] = {0}, g[N];
        double pd[N], md[N] = {0}, vd[N] = {0};
        for (int i = 0; i < N; i++)
            pd[i] = p[i] = frand(-1, 1);
        zt_adam_hparams h = {1e-2f, 0.9f, 0.99f, 1e-8f, 0.05f, adamw, 0, 1.0f};
        for (int s = 1; s <= STEPS; s++) {
            for (int i = 0; i < N; i++)
                g[i] = frand(-1, 1);
            h.step = s;
            zt_adam_tensors t = {p, m, v, g, ZT_F32, NULL, ZT_F32, N};
            zt_adam_step(ZT_ADAM_SCALAR, &h, &t);
            for (int i = 0; i < N; i++) {
                double gi = g[i] + (adamw ? 0.0 : 0.05 * pd[i]);
                md[i] = 0.9 * md[i] + 0.1 * gi;
                vd[i] = 0.99 * vd[i] + 0.01 * gi * gi;
                double mhat = md[i] / (1 - pow(0.9, s)), vhat = vd[i] / (1 - pow(0.99, s));
                if (adamw)
                    pd[i] -= 1e-2 * 0.05 * pd[i];
                pd[i] -= 1e-2 * mhat / (sqrt(vhat) + 1e-8);
            }
        }
        for (int i = 0; i < N; i++)
            if (fabs(p[i] - pd[i]) > 1e-5 * (1 + fabs(pd[i])))
                fail_msg("adamw=%d elem %d: %g vs double %g", adamw, i, (double)p[i], pd[i]);
    }
}

static void parallel_equals_serial(int threads)
{
    zt_threadpool *pool = NULL;
    zt_error err;
    assert_int_equal(zt_threadpool_create(threads, -1, &pool, &err), ZT_OK);
    int64_t n = 3 * 65536 + 12345;
    buffers a, b;
    make(&a, n, 0, 0);
    make(&b, n, 0, 0);
    copy(&b, &a, n);
    zt_adam_hparams h = hparams(1);
    zt_adam_variant var = zt_adam_variant_best();
    zt_adam_tensors ta = tensors(&a, n, ZT_BF16, ZT_BF16), tb = tensors(&b, n, ZT_BF16, ZT_BF16);
    zt_adam_step(var, &h, &ta);
    zt_adam_step_parallel(pool, var, &h, &tb);
    assert_memory_equal(a.master, b.master, sizeof(float) * (size_t)n);
    assert_memory_equal(a.v, b.v, sizeof(float) * (size_t)n);
    assert_memory_equal(a.out16, b.out16, sizeof(uint16_t) * (size_t)n);
    release(&a, 0);
    release(&b, 0);
    zt_threadpool_destroy(pool);
}

static void test_parallel_step_is_bitwise_serial(void **state)
{
    (void)state;
    parallel_equals_serial(1);
    parallel_equals_serial(2);
    parallel_equals_serial(3);
}

static void test_grad_sumsq_matches_double(void **state)
{
    (void)state;
    int64_t n = 10007;
    float *g = malloc(sizeof(float) * (size_t)n);
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
    double want = 0, want16 = 0;
    for (int64_t i = 0; i < n; i++) {
        g[i] = frand(-2, 2);
        h[i] = zt_f32_to_bf16(g[i]);
        want += (double)(g[i] * 0.5f) * (double)(g[i] * 0.5f);
        float b = zt_bf16_to_f32(h[i]) * 0.5f;
        want16 += (double)b * b;
    }
    for (zt_adam_variant var = ZT_ADAM_SCALAR; var <= ZT_ADAM_AVX512; var++) {
        if (!zt_adam_variant_supported(var))
            continue;
        int64_t bad = -1;
        assert_true(fabs(zt_grad_sumsq(var, g, ZT_F32, n, 0.5f, &bad) - want) < 1e-9 * want);
        assert_int_equal(bad, 0);
        assert_true(fabs(zt_grad_sumsq(var, h, ZT_BF16, n, 0.5f, &bad) - want16) < 1e-9 * want16);
    }
    free(g), free(h);
}

/* bf16: the reference is the textbook rule on the bit pattern; fp16: every half value
 * round-trips, and fp32 -> fp16 matches a double-based rounding. */
static void test_conversions_exact(void **state)
{
    (void)state;
    for (uint32_t k = 0; k < 2000000; k++) {
        uint32_t u = rnd() ^ (k << 7);
        float f;
        memcpy(&f, &u, 4);
        uint16_t got = zt_f32_to_bf16(f);
        if (isnan(f)) {
            assert_true(isnan(zt_bf16_to_f32(got)));
            continue;
        }
        double x = f, lo = zt_bf16_to_f32((uint16_t)(u >> 16)), hi;
        uint16_t lo_bits = (uint16_t)(u >> 16), hi_bits = (uint16_t)(lo_bits + 1);
        /* the value one bf16 step above lo, even past the largest finite one */
        hi = (lo_bits & 0x7fff) == 0x7f7f ? copysign(ldexp(1.0, 128), x) : zt_bf16_to_f32(hi_bits);
        double dlo = fabs(x - lo), dhi = fabs(hi - x);
        uint16_t want = dlo < dhi ? lo_bits : dhi < dlo ? hi_bits : ((lo_bits & 1) ? hi_bits : lo_bits);
        if ((u & 0x7fffffffu) == 0x7f800000u)
            want = lo_bits; /* infinities stay */
        assert_int_equal(got, want);
    }
    for (uint32_t h = 0; h < 65536; h++) {
        float f = zt_f16_to_f32((uint16_t)h);
        if (isnan(f))
            continue;
        assert_int_equal(zt_f32_to_f16(f), h);
    }
    assert_int_equal(zt_f32_to_f16(70000.0f), 0x7c00); /* overflow to inf */
    assert_int_equal(zt_f32_to_f16(1e-8f), 0x0000);     /* below half the smallest subnormal */
    assert_int_equal(zt_f32_to_f16(6e-8f), 0x0001);     /* rounds to the smallest subnormal */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_matches_double),
        cmocka_unit_test(test_variants_match_scalar),
        cmocka_unit_test(test_nonfinite_gradients_counted),
        cmocka_unit_test(test_parallel_step_is_bitwise_serial),
        cmocka_unit_test(test_grad_sumsq_matches_double),
        cmocka_unit_test(test_conversions_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

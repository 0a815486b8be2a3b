/* SPDX-License-Identifier: MIT */
/* ZeRO++ block quantization kernels: the AVX2 and AVX-512 variants equal the scalar reference
 * bit for bit over dtypes, odd lengths and block sizes; every element's error is within half
 * a step of its block's scale (checked in double); zero blocks stay zero; int4 packs and
 * unpacks within its bound, and a non-finite gradient is never quantized away: a block holding
 * a NaN or an inf dequantizes to NaN throughout, in every variant alike. */
#include "core/convert.h"
#include "core/quant.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)((double)(rs >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static void fill(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = frand() * ((i / 37) % 3 == 0 ? 100.0f : 0.01f);
    for (int64_t i = 0; i < n && i < 70; i++)
        x[i] = 0.0f; /* a zero block at the start */
}

static void check_bound(const float *x, const float *y, const float *scales, int64_t n, int block)
{
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)x[i] - y[i]), half = 0.5 * scales[i / block];
        if (err > half * (1 + 1e-5) + 1e-6 * fabs((double)x[i]) + 1e-30) /* + float rounding */
            fail_msg("elem %lld: |%g - %g| = %g > half step %g", (long long)i, (double)x[i],
                     (double)y[i], err, half);
    }
}

static void test_int8_variants_match_and_bound(void **state)
{
    (void)state;
    const int64_t lengths[] = {1, 15, 17, 64, 1000, 4099, 2560};
    const int blocks[] = {16, 64, 100, 256, 2048}; /* 256: the register-resident fast path */
    zt_quant_variant simd[2] = {ZT_QUANT_AVX2, ZT_QUANT_AVX512};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++)
            for (zt_dtype dt = ZT_F32; dt <= ZT_F16; dt++) {
                int64_t n = lengths[li], nb = zt_quant_blocks(n, blocks[bi]);
                float *x = malloc(sizeof(float) * (size_t)n),
                      *y = malloc(sizeof(float) * (size_t)n);
                uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n),
                         *h2 = malloc(sizeof(uint16_t) * (size_t)n);
                int8_t *q1 = malloc((size_t)n), *q2 = malloc((size_t)n);
                float *s1 = malloc(sizeof(float) * (size_t)nb),
                      *s2 = malloc(sizeof(float) * (size_t)nb);
                fill(x, n);
                const void *in = x;
                if (dt != ZT_F32) { /* the exact input is the 16-bit value */
                    zt_convert_array(h, dt, x, ZT_F32, (size_t)n);
                    zt_convert_array(x, ZT_F32, h, dt, (size_t)n);
                    in = h;
                }
                zt_quant8(ZT_QUANT_SCALAR, in, dt, n, blocks[bi], q1, s1);
                zt_dequant8(ZT_QUANT_SCALAR, q1, s1, n, blocks[bi], y, ZT_F32);
                check_bound(x, y, s1, n, blocks[bi]);
                for (int vi = 0; vi < 2; vi++) {
                    zt_quant_variant var = simd[vi];
                    if (!zt_quant_variant_supported(var))
                        continue;
                    zt_quant8(var, in, dt, n, blocks[bi], q2, s2);
                    assert_memory_equal(q1, q2, (size_t)n);
                    assert_memory_equal(s1, s2, sizeof(float) * (size_t)nb);
                    zt_dequant8(ZT_QUANT_SCALAR, q1, s1, n, blocks[bi], h,
                                dt == ZT_F32 ? ZT_BF16 : dt);
                    zt_dequant8(var, q1, s1, n, blocks[bi], h2, dt == ZT_F32 ? ZT_BF16 : dt);
                    assert_memory_equal(h, h2, sizeof(uint16_t) * (size_t)n);
                    float *a1 = calloc((size_t)n, sizeof(float)),
                          *a2 = calloc((size_t)n, sizeof(float));
                    for (int64_t i = 0; i < n; i++) /* a running sum: a contracted FMA shows */
                        a1[i] = a2[i] = 0.25f * (float)(i % 5) + 1e-3f * x[i];
                    zt_dequant8_add(ZT_QUANT_SCALAR, q1, s1, n, blocks[bi], a1);
                    zt_dequant8_add(var, q1, s1, n, blocks[bi], a2);
                    assert_memory_equal(a1, a2, sizeof(float) * (size_t)n);
                    free(a1), free(a2);
                }
                for (int64_t i = 0; i < n && i < 64; i++)
                    assert_int_equal(q1[i], 0);
                free(x), free(y), free(h), free(h2), free(q1), free(q2), free(s1), free(s2);
            }
}

static void test_int4_roundtrip_bound(void **state)
{
    (void)state;
    const int64_t n = 1001; /* odd: the last byte holds one value */
    const int block = 32;
    float x[1001], y[1001] = {0}, scales[32];
    uint8_t q[501];
    fill(x, n);
    zt_quant4_scalar(x, n, block, q, scales);
    zt_dequant4_add_scalar(q, scales, n, block, y);
    check_bound(x, y, scales, n, block);
    typedef void (*quant4_fn)(const float *, int64_t, int, uint8_t *, float *);
    typedef void (*dequant4_fn)(const uint8_t *, const float *, int64_t, int, float *);
    const zt_quant_variant simd[2] = {ZT_QUANT_AVX2, ZT_QUANT_AVX512};
    const quant4_fn quant[2] = {zt_quant4_avx2, zt_quant4_avx512};
    const dequant4_fn dequant[2] = {zt_dequant4_add_avx2, zt_dequant4_add_avx512};
    for (int vi = 0; vi < 2; vi++) /* same bits, also for odd blocks */
        for (int bi = 0; zt_quant_variant_supported(simd[vi]) && bi < 3; bi++) {
            int blk = (int[]){32, 33, 256}[bi];
            float s1[64], s2[64], a1[1001], a2[1001];
            for (int i = 0; i < 1001; i++) /* a running sum: a contracted FMA shows */
                a1[i] = a2[i] = 0.25f * (float)(i % 5) + 1e-3f * x[i];
            uint8_t q1[501], q2[501];
            memset(q1, 0x00, sizeof q1), memset(q2, 0xff, sizeof q2); /* nothing read first */
            zt_quant4_scalar(x, n, blk, q1, s1);
            quant[vi](x, n, blk, q2, s2);
            assert_memory_equal(q1, q2, sizeof q1);
            assert_memory_equal(s1, s2, sizeof(float) * (size_t)zt_quant_blocks(n, blk));
            zt_dequant4_add_scalar(q1, s1, n, blk, a1);
            dequant[vi](q1, s1, n, blk, a2);
            assert_memory_equal(a1, a2, sizeof a1);
        }
    /* the extreme of each block is represented exactly as +-7 steps */
    for (int64_t b = 0; b < zt_quant_blocks(n, block); b++)
        assert_true(scales[b] >= 0);
}

/* Blocks of 32: finite values with one NaN; with one -inf; all of magnitude ~1e-40 (1 / scale
 * overflows to inf) with zeros among them; ordinary values. The NaN and inf blocks must come
 * back NaN in every element (the step's non-finite check then sees them), the tiny block
 * must keep each value's sign (or give 0) and the ordinary block its bound; every variant
 * gives the scalar reference's bits. */
static void test_int4_non_finite_blocks(void **state)
{
    (void)state;
    enum { N = 128, BLOCK = 32 };
    float x[N];
    fill(x, N);
    for (int i = 0; i < 32; i++)
        x[i] = 0.5f * (float)(i - 16);
    x[5] = NAN;
    for (int i = 32; i < 64; i++)
        x[i] = 0.25f * (float)(i - 40);
    x[40] = -INFINITY;
    for (int i = 64; i < 96; i++)
        x[i] = i % 3 == 0 ? 0.0f : (i % 2 ? 1.0f : -1.0f) * 1e-40f * (float)(1 + i % 5);
    typedef void (*quant4_fn)(const float *, int64_t, int, uint8_t *, float *);
    const zt_quant_variant vars[3] = {ZT_QUANT_SCALAR, ZT_QUANT_AVX2, ZT_QUANT_AVX512};
    const quant4_fn quant[3] = {zt_quant4_scalar, zt_quant4_avx2, zt_quant4_avx512};
    uint8_t q0[N / 2];
    float s0[N / BLOCK];
    for (int vi = 0; vi < 3; vi++) {
        if (!zt_quant_variant_supported(vars[vi]))
            continue;
        uint8_t q[N / 2];
        float s[N / BLOCK], y[N] = {0};
        memset(q, 0xff, sizeof q);
        quant[vi](x, N, BLOCK, q, s);
        zt_dequant4_add_scalar(q, s, N, BLOCK, y);
        for (int i = 0; i < 64; i++)
            if (!isnan(y[i]))
                fail_msg("%s: element %d of a block with a non-finite value came back %g, not "
                         "NaN",
                         zt_quant_variant_name(vars[vi]), i, (double)y[i]);
        for (int i = 64; i < 96; i++)
            if (!(y[i] == 0.0f || (y[i] > 0) == (x[i] > 0)) || !isfinite(y[i]))
                fail_msg("%s: tiny element %d: %g came back %g", zt_quant_variant_name(vars[vi]), i,
                         (double)x[i], (double)y[i]);
        check_bound(x + 96, y + 96, s + 3, 32, BLOCK);
        if (vi == 0) {
            memcpy(q0, q, sizeof q), memcpy(s0, s, sizeof s);
        } else {
            assert_memory_equal(q0, q, sizeof q);
            assert_memory_equal(s0, s, sizeof s);
        }
    }
}

/* The pool-split quantizer equals the serial one bit for bit, for lengths and blocks that do
 * and do not divide its chunks, on 1 to 3 threads. */
static void test_int8_parallel_equals_serial(void **state)
{
    (void)state;
    const int64_t lengths[] = {100, 65536 * 3 + 17, 250000};
    const int blocks[] = {64, 256, 1000};
    for (size_t li = 0; li < 3; li++)
        for (size_t bi = 0; bi < 3; bi++)
            for (int threads = 1; threads <= 3; threads++) {
                int64_t n = lengths[li], nb = zt_quant_blocks(n, blocks[bi]);
                float *x = malloc(sizeof(float) * (size_t)n),
                      *y1 = malloc(sizeof(float) * (size_t)n);
                float *y2 = malloc(sizeof(float) * (size_t)n);
                int8_t *q1 = malloc((size_t)n), *q2 = malloc((size_t)n);
                float *s1 = malloc(sizeof(float) * (size_t)nb),
                      *s2 = malloc(sizeof(float) * (size_t)nb);
                fill(x, n);
                zt_threadpool *pool = NULL;
                zt_error err = {0};
                assert_int_equal(zt_threadpool_create(threads, -1, &pool, &err), ZT_OK);
                zt_quant_variant v = zt_quant_variant_best();
                zt_quant8(v, x, ZT_F32, n, blocks[bi], q1, s1);
                zt_quant8_parallel(pool, v, x, ZT_F32, n, blocks[bi], q2, s2);
                assert_memory_equal(q1, q2, (size_t)n);
                assert_memory_equal(s1, s2, sizeof(float) * (size_t)nb);
                zt_dequant8(v, q1, s1, n, blocks[bi], y1, ZT_F32);
                zt_dequant8_parallel(pool, v, q2, s2, n, blocks[bi], y2, ZT_F32);
                assert_memory_equal(y1, y2, sizeof(float) * (size_t)n);
                zt_threadpool_destroy(pool);
                free(x), free(y1), free(y2), free(q1), free(q2), free(s1), free(s2);
            }
}

/* The same for int4, against the scalar reference, with odd block sizes too (a chunk must
 * hold an even number of elements to start on a whole byte of packed nibbles). */
static void test_int4_parallel_equals_serial(void **state)
{
    (void)state;
    const int64_t lengths[] = {101, 65536 * 3 + 17, 250001};
    const int blocks[] = {63, 256, 1001};
    for (size_t li = 0; li < 3; li++)
        for (size_t bi = 0; bi < 3; bi++)
            for (int threads = 1; threads <= 3; threads++) {
                int64_t n = lengths[li], nb = zt_quant_blocks(n, blocks[bi]);
                size_t nq = (size_t)(n + 1) / 2, nf = sizeof(float) * (size_t)n;
                float *x = malloc(nf), *a1 = malloc(nf), *a2 = malloc(nf);
                uint8_t *q1 = malloc(nq), *q2 = malloc(nq);
                float *s1 = malloc(sizeof(float) * (size_t)nb),
                      *s2 = malloc(sizeof(float) * (size_t)nb);
                fill(x, n);
                for (int64_t i = 0; i < n; i++)
                    a1[i] = a2[i] = 0.25f * (float)(i % 5);
                zt_threadpool *pool = NULL;
                zt_error err = {0};
                assert_int_equal(zt_threadpool_create(threads, -1, &pool, &err), ZT_OK);
                memset(q1, 0x00, nq), memset(q2, 0xff, nq); /* no byte is read before set */
                zt_quant4_scalar(x, n, blocks[bi], q1, s1);
                zt_quant4_parallel(pool, x, n, blocks[bi], q2, s2);
                assert_memory_equal(q1, q2, nq);
                assert_memory_equal(s1, s2, sizeof(float) * (size_t)nb);
                zt_dequant4_add_scalar(q1, s1, n, blocks[bi], a1);
                zt_dequant4_add_parallel(pool, q2, s2, n, blocks[bi], a2);
                assert_memory_equal(a1, a2, nf);
                zt_threadpool_destroy(pool);
                free(x), free(a1), free(a2), free(q1), free(q2), free(s1), free(s2);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_variants_match_and_bound),
        cmocka_unit_test(test_int4_roundtrip_bound),
        cmocka_unit_test(test_int4_non_finite_blocks),
        cmocka_unit_test(test_int8_parallel_equals_serial),
        cmocka_unit_test(test_int4_parallel_equals_serial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

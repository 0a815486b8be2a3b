/* SPDX-License-Identifier: MIT */
/* fp32 <-> bf16 / fp16 conversions: the scalar functions against exact references (the
 * textbook nearest-even rule for bf16; every fp16 value; a rounding computed in double and
 * the compiler's _Float16 casts for fp32 -> fp16), and the array functions, whose AVX2/F16C
 * loops must give the scalar functions' bits at every length and alignment. */
#include "core/convert.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

/* fp32 bit patterns of every kind: each exponent with random mantissas, mantissas at the
 * rounding points of bf16 and fp16 (exactly halfway, just above, just below), NaNs. */
static uint32_t some_pattern(uint32_t k)
{
    uint32_t u = rnd();
    uint32_t exp = (k >> 3) & 0xff, sign = (k & 1) << 31, man = u & 0x7fffff;
    switch (k % 8) {
    case 1:
        man = (man & ~0xffffu) | 0x8000u; /* bf16 tie */
        break;
    case 2:
        man = (man & ~0x1fffu) | 0x1000u; /* fp16 tie (normal range) */
        break;
    case 3:
        man = (man & ~0xffffu) | (u & 1 ? 0x8001u : 0x7fffu);
        break;
    case 4:
        man = (man & ~0x1fffu) | (u & 1 ? 0x1001u : 0x0fffu);
        break;
    case 5:
        man = man & (0x7fffffu << (u % 24)); /* trailing zeros: fp16 subnormal ties */
        break;
    default:
        break;
    }
    return sign | (exp << 23) | man;
}

static float from_bits(uint32_t u) { return zt_f32_from_bits(u); }

/* Nearest-even bf16 of a non-NaN fp32, from the distances to the two neighbours. */
static uint16_t bf16_reference(uint32_t u)
{
    double x = from_bits(u);
    uint16_t lo_bits = (uint16_t)(u >> 16), hi_bits = (uint16_t)(lo_bits + 1);
    if ((u & 0x7fffffffu) == 0x7f800000u || (u & 0xffffu) == 0)
        return lo_bits; /* infinities and exact values stay */
    double lo = zt_bf16_to_f32(lo_bits);
    /* one bf16 step further from zero, even past the largest finite one */
    double hi = (lo_bits & 0x7fff) == 0x7f7f ? copysign(ldexp(1.0, 128), x)
                                             : (double)zt_bf16_to_f32(hi_bits);
    double dlo = fabs(x - lo), dhi = fabs(hi - x);
    return dlo < dhi ? lo_bits : dhi < dlo ? hi_bits : ((lo_bits & 1) ? hi_bits : lo_bits);
}

/* Nearest-even fp16 of a finite fp32, rounded on the fp16 grid in double (exact: dividing by
 * a power of two, nearbyint in the default rounding mode) and encoded by hand. */
static uint16_t f16_reference(float f)
{
    double x = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (x >= 65520.0)
        return sign | 0x7c00;
    int e = x > 0 ? ilogb(x) : -30;
    double spacing = ldexp(1.0, (e < -14 ? -14 : e) - 10);
    double q = nearbyint(x / spacing) * spacing;
    if (q == 0)
        return sign;
    if (q < ldexp(1.0, -14)) /* subnormal: a multiple of 2^-24 */
        return sign | (uint16_t)(q / ldexp(1.0, -24));
    e = ilogb(q); /* rounding may have carried into the next binade */
    return sign | (uint16_t)((e + 15) << 10) | (uint16_t)(q / ldexp(1.0, e - 10) - 1024);
}

static uint16_t f16_by_cast(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t b;
    memcpy(&b, &h, sizeof b);
    return b;
}

static void test_bf16_round_to_nearest_even(void **state)
{
    (void)state;
    for (uint32_t k = 0; k < 4000000; k++) {
        uint32_t u = some_pattern(k);
        uint16_t got = zt_f32_to_bf16(from_bits(u));
        if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN: quiet, same sign and top payload */
            assert_int_equal(got, (uint16_t)((u >> 16) | 0x40));
            continue;
        }
        if (got != bf16_reference(u))
            fail_msg("%08x -> %04x, want %04x", u, got, bf16_reference(u));
    }
    assert_int_equal(zt_f32_to_bf16(from_bits(0x7f800001u)), 0x7fc0); /* sNaN stays NaN */
    assert_int_equal(zt_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80); /* rounds up to inf */
    assert_int_equal(zt_f32_to_bf16(from_bits(0x00008000u)), 0x0000); /* subnormal tie: even */
    assert_int_equal(zt_f32_to_bf16(from_bits(0x00018000u)), 0x0002);
    for (uint32_t h = 0; h < 65536; h++) /* bf16 -> fp32 is exact: the bits shifted */
        assert_int_equal(zt_f32_bits(zt_bf16_to_f32((uint16_t)h)), h << 16);
}

static void test_f16_every_value(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = zt_f16_to_f32((uint16_t)h);
        _Float16 x;
        memcpy(&x, &h, sizeof x);
        float want = (float)x; /* the compiler's conversion (libgcc or F16C) */
        if (zt_f32_bits(f) != zt_f32_bits(want))
            fail_msg("fp16 %04x -> %08x, cast gives %08x", h, zt_f32_bits(f), zt_f32_bits(want));
        uint16_t back = zt_f32_to_f16(f);
        if (isnan(f))
            assert_int_equal(back, h | 0x200); /* NaN comes back quieted */
        else
            assert_int_equal(back, h);
    }
}

static void test_f32_to_f16_round_to_nearest_even(void **state)
{
    (void)state;
    for (uint32_t k = 0; k < 4000000; k++) {
        uint32_t u = some_pattern(k);
        /* concentrate on the exponents fp16 can hold or round into */
        if (k & 8)
            u = (u & 0x807fffffu) | ((uint32_t)(96 + (k >> 4) % 48) << 23);
        float f = from_bits(u);
        uint16_t got = zt_f32_to_f16(f), cast = f16_by_cast(f);
        if (got != cast)
            fail_msg("%08x -> %04x, cast gives %04x", u, got, cast);
        if (!isnan(f) && got != f16_reference(f))
            fail_msg("%08x -> %04x, double reference %04x", u, got, f16_reference(f));
    }
    assert_int_equal(zt_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(zt_f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(zt_f32_to_f16(65520.0f), 0x7c00); /* halfway above the largest: inf */
    assert_int_equal(zt_f32_to_f16(-70000.0f), 0xfc00);
    assert_int_equal(zt_f32_to_f16(ldexpf(1, -25)), 0x0000);          /* tie: even */
    assert_int_equal(zt_f32_to_f16(ldexpf(1.0000001f, -25)), 0x0001); /* above: up */
    assert_int_equal(zt_f32_to_f16(ldexpf(3, -25)), 0x0002);          /* tie: even */
    assert_int_equal(zt_f32_to_f16(ldexpf(2047, -25)), 0x0400);       /* carries into normal */
    assert_int_equal(zt_f32_to_f16(1e-42f), 0x0000);
    assert_int_equal(zt_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(zt_f32_to_f16(from_bits(0x7f800001u)), 0x7e00);
}

static const char *dt_name(zt_dtype t)
{
    return t == ZT_F32 ? "f32" : t == ZT_BF16 ? "bf16" : "f16";
}

static size_t dt_size(zt_dtype t) { return t == ZT_F32 ? 4 : 2; }

/* Element i of an array of type t, as fp32 bits through the scalar functions. */
static float element(const void *p, zt_dtype t, size_t i)
{
    if (t == ZT_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == ZT_BF16 ? zt_bf16_to_f32(h) : zt_f16_to_f32(h);
}

static uint32_t encode(float x, zt_dtype t)
{
    return t == ZT_F32 ? zt_f32_bits(x) : t == ZT_BF16 ? zt_f32_to_bf16(x) : zt_f32_to_f16(x);
}

static uint32_t stored(const void *p, zt_dtype t, size_t i)
{
    return t == ZT_F32 ? zt_f32_bits(((const float *)p)[i]) : ((const uint16_t *)p)[i];
}

static void test_arrays_match_scalar(void **state)
{
    (void)state;
    const size_t lengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 1000, 1024, 2500};
    unsigned char *src = malloc(4 * 2600 + 64), *dst = malloc(4 * 2600 + 64);
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (int s = 0; s < 3; s++)
            for (int d = 0; d < 3; d++) {
                size_t n = lengths[li], off = (li * 2 + (size_t)s) % 8;
                zt_dtype st = (zt_dtype)s, dt = (zt_dtype)d;
                void *in = src + off * dt_size(st), *out = dst + ((off + 3) % 8) * dt_size(dt);
                for (size_t i = 0; i < n; i++) {
                    uint32_t u = some_pattern((uint32_t)rnd());
                    if (st == ZT_F32)
                        memcpy((float *)in + i, &u, 4);
                    else
                        ((uint16_t *)in)[i] = (uint16_t)u;
                }
                memset(dst, 0xee, 4 * 2600 + 64);
                zt_convert_array(out, dt, in, st, n);
                for (size_t i = 0; i < n; i++) {
                    uint32_t want = st == dt ? stored(in, st, i) : encode(element(in, st, i), dt);
                    if (stored(out, dt, i) != want)
                        fail_msg("%s -> %s n=%zu elem %zu: %x, want %x", dt_name(st), dt_name(dt),
                                 n, i, stored(out, dt, i), want);
                }
                /* the byte after the last element is untouched */
                assert_int_equal(((unsigned char *)out)[n * dt_size(dt)], 0xee);
            }
    free(src), free(dst);
}

static void test_scale_array(void **state)
{
    (void)state;
    enum { N = 2051 };
    for (int t = 0; t < 3; t++) {
        zt_dtype dt = (zt_dtype)t;
        float ref[N];
        unsigned char buf[4 * N];
        for (size_t i = 0; i < N; i++) {
            float x = (float)((int)(rnd() % 2001) - 1000) / 64.0f;
            if (dt == ZT_F32)
                memcpy(buf + 4 * i, &x, 4);
            else
                ((uint16_t *)buf)[i] = (uint16_t)encode(x, dt);
            ref[i] = element(buf, dt, i);
        }
        zt_scale_array(buf, dt, 0.3f, N);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(stored(buf, dt, i), encode(ref[i] * 0.3f, dt));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_round_to_nearest_even),
        cmocka_unit_test(test_f16_every_value),
        cmocka_unit_test(test_f32_to_f16_round_to_nearest_even),
        cmocka_unit_test(test_arrays_match_scalar),
        cmocka_unit_test(test_scale_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

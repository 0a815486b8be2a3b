/* SPDX-License-Identifier: MIT */
/* Parameter initialisation is a pure function of (seed, name, index): any split into shards
 * gives the same values, and the normal/uniform generators have the requested moments. */
#include "runtime/runtime.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static zt_param make_param(const char *name, zt_init_kind kind, float a, float b, uint64_t seed)
{
    zt_param p;
    memset(&p, 0, sizeof p);
    p.name = (char *)name;
    p.init.kind = kind;
    p.init.a = a;
    p.init.b = b;
    p.init.seed = seed;
    return p;
}

static void test_shards_match_whole(void **state)
{
    (void)state;
    enum { N = 10007 };
    zt_param p = make_param("layer.w", ZT_INIT_NORMAL, 0.0f, 0.02f, 7);
    float *whole = malloc(N * sizeof(float)), *parts = malloc(N * sizeof(float));
    assert_int_equal(zt_param_init_fill(&p, 0, N, whole, NULL), ZT_OK);
    int cuts[] = {0, 1, 17, 4096, 9999, N};
    for (size_t i = 0; i + 1 < sizeof cuts / sizeof cuts[0]; i++)
        assert_int_equal(
            zt_param_init_fill(&p, cuts[i], cuts[i + 1] - cuts[i], parts + cuts[i], NULL), ZT_OK);
    assert_memory_equal(whole, parts, N * sizeof(float));
    free(whole), free(parts);
}

static void test_seed_and_name_change_values(void **state)
{
    (void)state;
    float a[64], b[64], c[64];
    zt_param p1 = make_param("x", ZT_INIT_UNIFORM, -1, 1, 1);
    zt_param p2 = make_param("x", ZT_INIT_UNIFORM, -1, 1, 2);
    zt_param p3 = make_param("y", ZT_INIT_UNIFORM, -1, 1, 1);
    assert_int_equal(zt_param_init_fill(&p1, 0, 64, a, NULL), ZT_OK);
    assert_int_equal(zt_param_init_fill(&p2, 0, 64, b, NULL), ZT_OK);
    assert_int_equal(zt_param_init_fill(&p3, 0, 64, c, NULL), ZT_OK);
    assert_memory_not_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
}

static void test_moments(void **state)
{
    (void)state;
    enum { N = 200000 };
    float *x = malloc(N * sizeof(float));
    zt_param n = make_param("n", ZT_INIT_NORMAL, 0.5f, 2.0f, 3);
    assert_int_equal(zt_param_init_fill(&n, 0, N, x, NULL), ZT_OK);
    double mean = 0, var = 0;
    for (int i = 0; i < N; i++)
        mean += x[i];
    mean /= N;
    for (int i = 0; i < N; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= N - 1;
    assert_true(fabs(mean - 0.5) < 0.02);
    assert_true(fabs(sqrt(var) - 2.0) < 0.02);
    zt_param u = make_param("u", ZT_INIT_UNIFORM, -3.0f, 5.0f, 3);
    assert_int_equal(zt_param_init_fill(&u, 0, N, x, NULL), ZT_OK);
    double lo = 1e9, hi = -1e9;
    mean = 0;
    for (int i = 0; i < N; i++) {
        lo = fmin(lo, x[i]), hi = fmax(hi, x[i]);
        mean += x[i];
    }
    assert_true(lo >= -3.0 && hi < 5.0);
    assert_true(fabs(mean / N - 1.0) < 0.05);
    zt_param c = make_param("c", ZT_INIT_CONSTANT, 0.25f, 0, 0);
    assert_int_equal(zt_param_init_fill(&c, 5, 10, x, NULL), ZT_OK);
    for (int i = 0; i < 10; i++)
        assert_float_equal(x[i], 0.25f, 0.0f);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards_match_whole),
        cmocka_unit_test(test_seed_and_name_change_values),
        cmocka_unit_test(test_moments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The promises of docs/abi.md a program relies on without checking: the structs the library
 * writes into are written only up to the caller's struct_size (a program built against an
 * older, smaller struct keeps the memory past it; one built against a newer header learns
 * which fields were filled), an unset struct_size is refused before anything happens, and
 * zt_runtime_create refuses a caller compiled against a header this library cannot serve. */
#include "ztier.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define GUARD 0xA5
#define N 32                /* elements of the one parameter */
#define GRAD 0.5f           /* every gradient element */
#define GRAD_NORM 2.8284271 /* sqrt(N * GRAD^2): the norm zt_step must report */

/* A committed runtime with one layer of N parameters, its gradient accumulated and ready for
 * zt_step. */
static zt_runtime *ready_to_step(void)
{
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(NULL, "{\"ztier\": {\"hbm_capacity\": \"16M\"}}", &rt),
                     ZT_OK);
    int layer, param;
    assert_int_equal(zt_layer_add(rt, "l0", &layer), ZT_OK);
    assert_int_equal(zt_param_add(rt, layer, "w", (int64_t[]){4, 8}, 2, NULL, &param), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    zt_layer_view v;
    assert_int_equal(zt_fetch(rt, layer, ZT_BACKWARD, &v), ZT_OK);
    assert_int_equal(v.params[0].dtype, ZT_F32);
    assert_int_equal(v.params[0].numel, N);
    float *g = v.params[0].grad;
    for (int i = 0; i < N; i++)
        g[i] += GRAD;
    assert_int_equal(zt_release(rt, layer, ZT_BACKWARD), ZT_OK);
    return rt;
}

static void assert_guard(const unsigned char *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (p[i] != GUARD)
            fail_msg("byte %zu past the caller's struct_size was written (0x%02x)", i, p[i]);
}

/* zt_step into buf (guard bytes but for its first struct_size), as a caller whose
 * zt_step_info has that size. */
static void step_into(zt_runtime *rt, unsigned char *buf, size_t len, size_t struct_size)
{
    memset(buf, GUARD, len);
    memcpy(buf, &struct_size, sizeof struct_size);
    if (zt_step(rt, NULL, (zt_step_info *)buf) != ZT_OK)
        fail_msg("%s", zt_last_error(rt));
}

/* A caller built when zt_step_info ended after clip_coef: it gets step, grad_norm and
 * clip_coef, and not one byte past them. */
static void test_step_info_older_caller(void **state)
{
    (void)state;
    zt_runtime *rt = ready_to_step();
    size_t old_size = offsetof(zt_step_info, clip_coef) + sizeof(float);
    unsigned char buf[sizeof(zt_step_info) + 64];
    step_into(rt, buf, sizeof buf, old_size);
    zt_step_info got;
    memcpy(&got, buf, old_size);
    assert_int_equal(got.struct_size, old_size);
    assert_int_equal(got.step, 1);
    assert_float_equal(got.grad_norm, GRAD_NORM, 1e-5);
    assert_float_equal(got.clip_coef, 1.0, 0); /* no gradient_clipping configured */
    assert_guard(buf, old_size, sizeof buf);
    zt_runtime_destroy(rt);
}

/* A caller built against a newer header (a field this library does not know): it gets every
 * field the library has, struct_size says how many bytes, and its own field stays. */
static void test_step_info_newer_caller(void **state)
{
    (void)state;
    zt_runtime *rt = ready_to_step();
    unsigned char buf[sizeof(zt_step_info) + 64];
    step_into(rt, buf, sizeof buf, sizeof(zt_step_info) + 16);
    zt_step_info got;
    memcpy(&got, buf, sizeof got);
    assert_int_equal(got.struct_size, sizeof(zt_step_info));
    assert_int_equal(got.step, 1);
    assert_int_equal(got.micro_steps, 1);
    assert_float_equal(got.grad_norm, GRAD_NORM, 1e-5);
    assert_guard(buf, sizeof(zt_step_info), sizeof buf);
    zt_runtime_destroy(rt);
}

/* struct_size 0 (a zt_step_info not from ZT_STEP_INFO_INIT) or too small for the first field:
 * refused before the step, which then runs as if the bad call had not been made. */
static void test_step_info_unset_size_refused(void **state)
{
    (void)state;
    zt_runtime *rt = ready_to_step();
    zt_step_info info;
    memset(&info, 0, sizeof info);
    assert_int_equal(zt_step(rt, NULL, &info), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "ZT_STEP_INFO_INIT"));
    assert_non_null(strstr(zt_last_error(rt), "unset"));
    info.struct_size = offsetof(zt_step_info, step) + sizeof(int32_t); /* half of step */
    assert_int_equal(zt_step(rt, NULL, &info), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "too small"));
    int64_t steps = -1;
    assert_int_equal(zt_step_count(rt, &steps), ZT_OK);
    assert_int_equal(steps, 0);
    zt_step_info ok = ZT_STEP_INFO_INIT;
    assert_int_equal(zt_step(rt, NULL, &ok), ZT_OK);
    assert_int_equal(ok.step, 1);
    assert_float_equal(ok.grad_norm, GRAD_NORM, 1e-5); /* the gradients were kept */
    zt_runtime_destroy(rt);
}

/* zt_stats and zt_optimizer_info follow the same rule through the same code. */
static void test_stats_and_optimizer_older_caller(void **state)
{
    (void)state;
    zt_runtime *rt = ready_to_step();
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    unsigned char buf[sizeof(zt_stats) + 64];
    size_t old_size = offsetof(zt_stats, device_bytes_capacity);
    memset(buf, GUARD, sizeof buf);
    memcpy(buf, &old_size, sizeof old_size);
    assert_int_equal(zt_stats_get(rt, (zt_stats *)buf), ZT_OK);
    zt_stats full = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &full), ZT_OK);
    zt_stats got;
    memcpy(&got, buf, old_size);
    assert_int_equal(got.struct_size, old_size);
    assert_int_equal(got.device_bytes_peak, full.device_bytes_peak);
    assert_true(full.device_bytes_peak >= N * sizeof(float));
    assert_guard(buf, old_size, sizeof buf);

    unsigned char obuf[sizeof(zt_optimizer_info) + 64];
    size_t old_opt = offsetof(zt_optimizer_info, beta1);
    memset(obuf, GUARD, sizeof obuf);
    memcpy(obuf, &old_opt, sizeof old_opt);
    assert_int_equal(zt_optimizer_get(rt, (zt_optimizer_info *)obuf), ZT_OK);
    zt_optimizer_info o;
    memcpy(&o, obuf, old_opt);
    assert_int_equal(o.struct_size, old_opt);
    assert_float_equal(o.lr, 1e-3, 1e-9); /* DeepSpeed's default lr for Adam */
    assert_guard(obuf, old_opt, sizeof obuf);

    zt_stats unset;
    memset(&unset, 0, sizeof unset);
    assert_int_equal(zt_stats_get(rt, &unset), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "ZT_STATS_INIT"));
    zt_runtime_destroy(rt);
}

static void expect_create_refused(int api_version, const char *fragment)
{
    zt_options opts = ZT_OPTIONS_INIT;
    opts.api_version = api_version;
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(&opts, NULL, &rt), ZT_ERR_ARGUMENT);
    assert_non_null(rt);
    if (!strstr(zt_last_error(rt), fragment))
        fail_msg("api_version %d: expected \"%s\" in: %s", api_version, fragment,
                 zt_last_error(rt));
    zt_runtime_destroy(rt);
}

/* A program compiled against a newer header (calls and fields this library may lack), or
 * against ztier 0.1's (api_version 1: zt_init_fn returned void), is refused with a message
 * that says which and what to do; the header's own api_version is accepted. */
static void test_create_checks_api_version(void **state)
{
    (void)state;
    expect_create_refused(ZT_API_VERSION + 1, "compiled against a newer ztier.h");
    expect_create_refused(1, "rebuild it against this header");
    zt_options opts = ZT_OPTIONS_INIT;
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(&opts, NULL, &rt), ZT_OK);
    zt_runtime_destroy(rt);
}

/* The version an embedder checks at run time is the header's. */
static void test_version_matches_header(void **state)
{
    (void)state;
    assert_int_equal(zt_version(), ZT_VERSION);
    assert_int_equal(zt_version() / 10000, ZT_VERSION_MAJOR);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ZT_VERSION_MAJOR, ZT_VERSION_MINOR, ZT_VERSION_PATCH);
    assert_string_equal(zt_version_string(), want);
    assert_true(ZT_VERSION_MAJOR >= 1); /* zt_init_fn's change to zt_status was a break */
    assert_true(ZT_API_VERSION >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_info_older_caller),
        cmocka_unit_test(test_step_info_newer_caller),
        cmocka_unit_test(test_step_info_unset_size_refused),
        cmocka_unit_test(test_stats_and_optimizer_older_caller),
        cmocka_unit_test(test_create_checks_api_version),
        cmocka_unit_test(test_version_matches_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* zt_runtime_expect_load: a commit followed by a load initialises nothing (the
 * initialisers are never called), every call that reads the values before the load is
 * refused with a message naming the missing load (also after a failed load), and the load
 * then restores exactly what a runtime committed the usual way saved: master, Adam m and v. */
#include "rt_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

enum { ROWS = 24, COLS = 40, NUMEL = ROWS * COLS };

static int init_calls; /* calls of fill below: commit's initialisation */

/* An initialiser whose values are known independently: element i of w is i * 0.25 - 3. */
static zt_status fill(void *user, const char *name, int64_t first, int64_t count, float *dst)
{
    (void)user, (void)name;
    init_calls++;
    for (int64_t i = 0; i < count; i++)
        dst[i] = (float)(first + i) * 0.25f - 3.0f;
    return ZT_OK;
}

typedef struct model {
    int w, b;
} model;

static zt_status reg(zt_runtime *rt, void *user)
{
    model *m = user;
    int l0, l1;
    int64_t shape[2] = {ROWS, COLS}, bias = COLS;
    zt_init cb = {ZT_INIT_CALLBACK, 0, 0, 7, fill, NULL};
    zt_init c = {ZT_INIT_CONSTANT, 0.5f, 0, 7, NULL, NULL};
    zt_status st = zt_layer_add(rt, "l0", &l0);
    if (st == ZT_OK)
        st = zt_param_add(rt, l0, "w", shape, 2, &cb, &m->w);
    if (st == ZT_OK)
        st = zt_layer_add(rt, "l1", &l1);
    return st == ZT_OK ? zt_param_add(rt, l1, "b", &bias, 1, &c, &m->b) : st;
}

/* The optimizer state on NVMe: commit's initialisation writes there too. */
static const char *config =
    "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"nvme\", "
    "\"nvme_path\": \"$SCRATCH\"}}, \"aio\": {\"block_size\": 4096}, \"optimizer\": {\"type\": "
    "\"AdamW\", \"params\": {\"lr\": 0.001}}, \"ztier\": {\"log_effective_settings\": false}}";

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("expect-load");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

static void expect_refused(zt_runtime *rt, zt_status st)
{
    assert_int_equal(st, ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "before zt_checkpoint_load"));
    assert_non_null(strstr(zt_last_error(rt), "zt_runtime_expect_load"));
}

static void test_skips_init_then_load_restores(void **state)
{
    (void)state;
    char ck[600];
    snprintf(ck, sizeof ck, "%s/ck", rt_fixture_dir());
    model a, b;
    init_calls = 0;
    zt_runtime *ra = rt_fixture_make(NULL, config, reg, &a); /* the usual commit */
    assert_true(init_calls > 0);
    assert_int_equal(zt_checkpoint_save(ra, ck), ZT_OK);
    zt_runtime_destroy(ra); /* its NVMe folder is the next one's */

    init_calls = 0;
    zt_runtime *rb = rt_fixture_create(NULL, config);
    rt_fixture_register(rb, reg, &b);
    assert_int_equal(zt_runtime_expect_load(rb), ZT_OK);
    rt_fixture_commit(rb);
    assert_int_equal(init_calls, 0); /* nothing initialised */

    static float got[NUMEL];
    zt_layer_view view;
    expect_refused(rb, zt_fetch(rb, 0, ZT_FORWARD, &view));
    expect_refused(rb, zt_param_read(rb, b.w, got, NUMEL));
    expect_refused(rb, zt_param_read_state(rb, b.w, ZT_STATE_ADAM_M, got, NUMEL));
    expect_refused(rb, zt_param_write(rb, b.w, got, NUMEL));
    expect_refused(rb, zt_step(rb, NULL, NULL));
    expect_refused(rb, zt_checkpoint_save(rb, ck));
    /* a failed load leaves the promise open */
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none", rt_fixture_dir());
    assert_int_not_equal(zt_checkpoint_load(rb, missing), ZT_OK);
    expect_refused(rb, zt_fetch(rb, 0, ZT_FORWARD, &view));

    assert_int_equal(zt_checkpoint_load(rb, ck), ZT_OK);
    assert_int_equal(init_calls, 0);
    assert_int_equal(zt_param_read(rb, b.w, got, NUMEL), ZT_OK);
    for (int i = 0; i < NUMEL; i++)
        assert_true(got[i] == (float)i * 0.25f - 3.0f);
    float bias[COLS];
    assert_int_equal(zt_param_read(rb, b.b, bias, COLS), ZT_OK);
    for (int i = 0; i < COLS; i++)
        assert_true(bias[i] == 0.5f);
    for (int s = ZT_STATE_ADAM_M; s <= ZT_STATE_ADAM_V; s++) {
        memset(got, 0xff, sizeof got); /* NaN: a state not restored shows */
        assert_int_equal(zt_param_read_state(rb, b.w, (zt_param_state)s, got, NUMEL), ZT_OK);
        for (int i = 0; i < NUMEL; i++)
            assert_true(got[i] == 0.0f);
    }
    assert_int_equal(zt_fetch(rb, 0, ZT_FORWARD, &view), ZT_OK);
    assert_int_equal(zt_release(rb, 0, ZT_FORWARD), ZT_OK);
    zt_runtime_destroy(rb);
}

static void test_after_commit_is_usage(void **state)
{
    (void)state;
    model m;
    zt_runtime *rt = rt_fixture_make(NULL, config, reg, &m);
    assert_int_equal(zt_runtime_expect_load(rt), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "after zt_runtime_commit"));
    static float got[NUMEL]; /* and the committed values stay usable */
    assert_int_equal(zt_param_read(rt, m.w, got, NUMEL), ZT_OK);
    assert_true(got[7] == 7 * 0.25f - 3.0f);
    assert_int_equal(zt_runtime_expect_load(NULL), ZT_ERR_ARGUMENT);
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skips_init_then_load_restores),
        cmocka_unit_test(test_after_commit_is_usage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

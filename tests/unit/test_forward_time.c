/* SPDX-License-Identifier: MIT */
/* zt_stats.forward_s, the step's forward time (runtime/fwd_time.h): from the step's first
 * forward fetch to its first backward fetch,
 *  - with the stream-ordered calls, on the trainer's stream: 3 x 20 ms of work queued on it
 *    between the two fetches count, though the host reaches the backward fetch long before
 *    the stream has run them (the host's clock would say less);
 *  - with the blocking calls, on the host's clock: 3 x 20 ms the host computes in between,
 *    within the test's own clock around the two calls;
 *  - 0 before the first step, and the latest step's afterwards.
 * ZT_TEST_FORWARD_BACKEND=cuda runs it with the cuda backend (the stand-in in CI). */
#include "rt_fixture.h"
#include "train.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
#define WORK_S 0.020

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("forward-time");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

/* ZT_TEST_FORWARD_BACKEND=cuda: the cuda backend (its timed events; the stand-in in CI) */
static const char *config(void)
{
    static char buf[512];
    const char *b = getenv("ZT_TEST_FORWARD_BACKEND");
    snprintf(buf, sizeof buf,
             "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}},"
             " \"ztier\": {\"hbm_capacity\": \"16M\", \"device_backend\": \"%s\","
             " \"comm_backend\": \"single\"}}",
             b && *b ? b : "host");
    return buf;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void work(void *arg)
{
    (void)arg;
    struct timespec t = {0, (long)(WORK_S * 1e9)};
    while (nanosleep(&t, &t) != 0)
        ;
}

static double forward_s(zt_runtime *rt)
{
    zt_stats s = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    return s.forward_s;
}

/* One step; stream: the stream-ordered calls on it, else the blocking ones. *host_s: the
 * host's time from before the first forward fetch to after the first backward fetch. */
static void step(zt_runtime *rt, const minimal_model *m, void *stream, double *host_s)
{
    zt_layer_view v;
    double t0 = now_s();
    for (int l = 0; l < MLP_LAYERS; l++) {
        if (stream) {
            assert_int_equal(zt_fetch_async(rt, m->layer[l], ZT_FORWARD, stream, &v), ZT_OK);
            assert_int_equal(zt_stream_launch(rt, stream, work, NULL), ZT_OK);
            assert_int_equal(zt_release_async(rt, m->layer[l], ZT_FORWARD, stream), ZT_OK);
        } else {
            assert_int_equal(zt_fetch(rt, m->layer[l], ZT_FORWARD, &v), ZT_OK);
            work(NULL);
            assert_int_equal(zt_release(rt, m->layer[l], ZT_FORWARD), ZT_OK);
        }
    }
    for (int l = MLP_LAYERS - 1; l >= 0; l--) {
        if (stream)
            assert_int_equal(zt_fetch_async(rt, m->layer[l], ZT_BACKWARD, stream, &v), ZT_OK);
        else
            assert_int_equal(zt_fetch(rt, m->layer[l], ZT_BACKWARD, &v), ZT_OK);
        if (l == MLP_LAYERS - 1)
            *host_s = now_s() - t0;
        if (stream)
            assert_int_equal(zt_release_async(rt, m->layer[l], ZT_BACKWARD, stream), ZT_OK);
        else
            assert_int_equal(zt_release(rt, m->layer[l], ZT_BACKWARD), ZT_OK);
    }
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
}

static void test_stream_time(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = rt_fixture_mlp(NULL, config(), &dims, 5, &m);
    void *stream = NULL;
    assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    assert_true(forward_s(rt) == 0.0); /* no step yet */
    for (int s = 0; s < 2; s++) {
        double host_s = 0, t0 = now_s();
        step(rt, &m, stream, &host_s);
        double f = forward_s(rt), around = now_s() - t0;
        print_message("step %d: forward_s %.4f, the host at the backward fetch after %.4f s, "
                      "the step's calls %.4f s\n",
                      s, f, host_s, around);
        assert_true(f >= MLP_LAYERS * WORK_S && f <= around);
        assert_true(host_s < MLP_LAYERS * WORK_S); /* the stream's time, not the host's */
    }
    assert_int_equal(zt_stream_destroy(rt, stream), ZT_OK);
    zt_runtime_destroy(rt);
}

static void test_host_time(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = rt_fixture_mlp(NULL, config(), &dims, 5, &m);
    for (int s = 0; s < 2; s++) {
        double host_s = 0;
        step(rt, &m, NULL, &host_s);
        double f = forward_s(rt);
        print_message("step %d: forward_s %.4f, the host's %.4f\n", s, f, host_s);
        assert_true(f >= MLP_LAYERS * WORK_S && f <= host_s);
    }
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_time),
        cmocka_unit_test(test_host_time),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

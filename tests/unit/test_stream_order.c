/* SPDX-License-Identifier: MIT */
/* The stream-ordered calls under the host backend, whose streams are worker threads: the
 * ordering rules of zt_fetch_async / zt_release_async hold against a caller stream that is
 * slow or stopped on purpose.
 *  - Training on a stream equals training with the blocking calls bit for bit, for
 *    parameters in host memory, device memory and on NVMe.
 *  - Every fetch and release of a micro-step returns while the caller's stream is stopped
 *    (the host never waits for it); until it runs, no gradient is summed and no buffer it may
 *    use goes back to the budget; zt_step then waits for it.
 *  - No host waits per layer on one rank with parameters in host or device memory
 *    (zt_stats.host_syncs); a device budget that needs the caller's buffers back, or too few
 *    landing buffers, makes the host wait (counted) and changes no result.
 *  - Misuse: a NULL or foreign stream, streams before commit, a double destroy. */
#include "mlp_weights.h"
#include "rt_fixture.h"
#include "train.h"

#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
#define STEPS 4
#define ACCUM 2

static int setup(void **state)
{
    (void)state;
    alarm(120); /* a wait that should not happen fails the test instead of hanging it */
    return rt_fixture_open("stream-order");
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    return rt_fixture_close();
}

static const char *config(const char *param, const char *hbm, int landing)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
             "\"$SCRATCH\"}, \"offload_optimizer\": {\"device\": \"cpu\"},"
             " \"stage3_param_persistence_threshold\": 0},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}},"
             " \"gradient_accumulation_steps\": %d, \"gradient_clipping\": 1.0,"
             " \"aio\": {\"block_size\": 4096},"
             " \"ztier\": {\"hbm_capacity\": \"%s\", \"gradient_landing_buffers\": %d}}",
             param, ACCUM, hbm, landing);
    return buf;
}

static zt_runtime *make(const char *cfg, minimal_model *m)
{
    return rt_fixture_mlp(NULL, cfg, &dims, 7, m);
}

/* STEPS steps of ACCUM micro-steps with the blocking calls. */
static void train_blocking(const char *cfg, mlp_weights *out, float *losses)
{
    minimal_model m;
    zt_runtime *rt = make(cfg, &m);
    int rows = dims.batch / ACCUM;
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < ACCUM; k++)
            assert_int_equal(minimal_micro_step(rt, &m, s, k * rows, rows, &losses[s * ACCUM + k]),
                             ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    mlp_weights_read_or_fail(rt, &m, out);
    zt_runtime_destroy(rt);
}

static uint64_t host_syncs(zt_runtime *rt)
{
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    return st.host_syncs;
}

/* The same on a stream; *layer_syncs: host waits inside the micro-steps' fetch/release. */
static void train_on_stream(const char *cfg, int delay_us, mlp_weights *out, float *losses,
                            uint64_t *layer_syncs)
{
    minimal_model m;
    zt_runtime *rt = make(cfg, &m);
    void *stream = NULL;
    assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    int rows = dims.batch / ACCUM;
    *layer_syncs = 0;
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < ACCUM; k++) {
            minimal_stream_step *q = NULL;
            uint64_t before = host_syncs(rt);
            zt_status st =
                minimal_micro_step_queue(rt, &m, stream, s, k * rows, rows, delay_us, &q);
            if (st != ZT_OK)
                fail_msg("step %d: %s", s, zt_last_error(rt));
            *layer_syncs += host_syncs(rt) - before;
            assert_int_equal(minimal_micro_step_finish(rt, stream, q, &losses[s * ACCUM + k]),
                             ZT_OK);
        }
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    mlp_weights_read_or_fail(rt, &m, out);
    assert_int_equal(zt_stream_destroy(rt, stream), ZT_OK);
    zt_runtime_destroy(rt);
}

static void check_placement(const char *param, int expect_no_waits)
{
    mlp_weights ref, got;
    float ref_loss[STEPS * ACCUM], loss[STEPS * ACCUM];
    uint64_t syncs;
    train_blocking(config(param, "16M", 8), &ref, ref_loss);
    train_on_stream(config(param, "16M", 8), 0, &got, loss, &syncs);
    mlp_weights_assert_same(&ref, &got, param);
    assert_memory_equal(ref_loss, loss, sizeof loss);
    print_message("params %-5s: %llu host waits in %d stream-ordered micro-steps\n", param,
                  (unsigned long long)syncs, STEPS * ACCUM);
    if (expect_no_waits)
        assert_int_equal(syncs, 0);
    mlp_weights_free(&ref);
    mlp_weights_free(&got);
}

static void test_stream_training_equals_blocking_cpu(void **state)
{
    (void)state;
    check_placement("cpu", 1);
}

static void test_stream_training_equals_blocking_device(void **state)
{
    (void)state;
    check_placement("none", 1);
}

/* NVMe: the host waits for each staged copy to recycle its buffer (counted, not zero). */
static void test_stream_training_equals_blocking_nvme(void **state)
{
    (void)state;
    check_placement("nvme", 0);
}

/* A slow stream, one landing buffer and a device budget that the caller's deferred frees
 * must make room in: the host waits (counted) and the result is unchanged. */
static void test_slow_stream_under_pressure(void **state)
{
    (void)state;
    mlp_weights ref, got;
    float ref_loss[STEPS * ACCUM], loss[STEPS * ACCUM];
    uint64_t syncs;
    train_blocking(config("cpu", "24K", 1), &ref, ref_loss);
    train_on_stream(config("cpu", "24K", 1), 300, &got, loss, &syncs);
    mlp_weights_assert_same(&ref, &got, "slow stream, 24K budget, 1 landing buffer");
    assert_memory_equal(ref_loss, loss, sizeof loss);
    assert_true(syncs > 0);
    mlp_weights_free(&ref);
    mlp_weights_free(&got);
}

static sem_t gate;
static void wait_at_gate(void *arg)
{
    (void)arg;
    sem_wait(&gate);
}

/* The caller's stream is stopped while a whole micro-step is fetched, queued and released:
 * every call returns, nothing is summed, no buffer returns to the budget. zt_step, called
 * right after the gate opens, waits for the stream and equals the blocking run. */
static void test_calls_do_not_wait_for_a_stopped_stream(void **state)
{
    (void)state;
    mlp_weights ref, got;
    float ref_loss[STEPS * ACCUM], loss;
    train_blocking(config("cpu", "16M", 8), &ref, ref_loss);

    minimal_model m;
    zt_runtime *rt = make(config("cpu", "16M", 8), &m);
    void *stream = NULL;
    assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    int rows = dims.batch / ACCUM;
    for (int s = 0; s < STEPS; s++) {
        minimal_stream_step *q[ACCUM];
        sem_init(&gate, 0, 0);
        assert_int_equal(zt_stream_launch(rt, stream, wait_at_gate, NULL), ZT_OK);
        zt_stats before = ZT_STATS_INIT, during = ZT_STATS_INIT;
        assert_int_equal(zt_stats_get(rt, &before), ZT_OK);
        for (int k = 0; k < ACCUM; k++)
            assert_int_equal(
                minimal_micro_step_queue(rt, &m, stream, s, k * rows, rows, 200, &q[k]), ZT_OK);
        assert_int_equal(zt_stats_get(rt, &during), ZT_OK);
        assert_int_equal(during.releases - before.releases, 2 * MLP_LAYERS * ACCUM);
        assert_int_equal(during.reduced_bytes, before.reduced_bytes); /* nothing summed yet */
        assert_int_equal(during.host_syncs, before.host_syncs);
        assert_int_equal(zt_async_error(rt), ZT_OK); /* polls without waiting */
        sem_post(&gate);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK); /* waits for the stream */
        for (int k = 0; k < ACCUM; k++) {
            assert_int_equal(minimal_micro_step_finish(rt, stream, q[k], &loss), ZT_OK);
            assert_float_equal(loss, ref_loss[s * ACCUM + k], 0);
        }
        /* while the stream was stopped, the gradient buffers of both micro-steps (released,
         * their copies not run) were still allocated: at least the model's size twice more
         * than now, with the step done and the next step's layers prefetched */
        zt_stats after = ZT_STATS_INIT;
        assert_int_equal(zt_stats_get(rt, &after), ZT_OK);
        uint64_t model = (16 * 48 + 48 + 48 * 48 + 48 + 48 * 4 + 4) * sizeof(float);
        assert_true(during.device_bytes_current >= after.device_bytes_current + ACCUM * model);
        sem_destroy(&gate);
    }
    mlp_weights_read_or_fail(rt, &m, &got);
    mlp_weights_assert_same(&ref, &got, "stopped stream");
    zt_stats end = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &end), ZT_OK);
    assert_true(end.reduced_bytes > 0);
    zt_runtime_destroy(rt); /* the stream goes with it */
    mlp_weights_free(&ref);
    mlp_weights_free(&got);
}

/* ---- mixing the forms: zt_fetch_async, then the blocking zt_release ----
 * The async fetch zeroes the gradients on the caller's stream; the blocking release must not
 * sum or free them before that stream has run (the memset and the caller's writes queued
 * after it): it orders itself after the stream the fetch was given. */

/* A layer's gradients as the fetch gave them, copied (the view is the runtime's). */
typedef struct grad_fill {
    float *grad[2];
    int64_t numel[2];
    int layer, step;
} grad_fill;

static void take_grads(grad_fill *f, const zt_layer_view *v, int layer, int step)
{
    assert_int_equal(v->n_params, 2);
    for (int i = 0; i < 2; i++)
        f->grad[i] = v->params[i].grad, f->numel[i] = v->params[i].numel;
    f->layer = layer, f->step = step;
}

/* Writes a gradient that depends on the layer, the step and the element (exact in fp32). */
static void fill_grads(void *arg)
{
    const grad_fill *f = arg;
    for (int i = 0; i < 2; i++)
        for (int64_t j = 0; j < f->numel[i]; j++)
            f->grad[i][j] = (float)((j % 13) - 6 + f->layer - f->step) / 64.0f;
}

static void sleep_20ms(void *arg)
{
    (void)arg;
    usleep(20000);
}

/* STEPS steps of one backward pass over the layers, the gradients written by fill_grads: on
 * the host between zt_fetch and zt_release, or (stream != 0) on a stream that is stopped for
 * 20 ms first, between zt_fetch_async and the blocking zt_release. */
static void backward_only(const char *cfg, int on_stream, mlp_weights *out)
{
    minimal_model m;
    zt_runtime *rt = make(cfg, &m);
    void *stream = NULL;
    if (on_stream)
        assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    for (int s = 0; s < STEPS; s++) {
        for (int l = MLP_LAYERS - 1; l >= 0; l--) {
            zt_layer_view v;
            grad_fill f;
            if (on_stream) {
                assert_int_equal(zt_stream_launch(rt, stream, sleep_20ms, NULL), ZT_OK);
                assert_int_equal(zt_fetch_async(rt, m.layer[l], ZT_BACKWARD, stream, &v), ZT_OK);
                take_grads(&f, &v, l, s);
                assert_int_equal(zt_stream_launch(rt, stream, fill_grads, &f), ZT_OK);
            } else {
                assert_int_equal(zt_fetch(rt, m.layer[l], ZT_BACKWARD, &v), ZT_OK);
                take_grads(&f, &v, l, s);
                fill_grads(&f);
            }
            /* f is on this stack frame: the release has waited for the stream's task */
            if (zt_release(rt, m.layer[l], ZT_BACKWARD) != ZT_OK)
                fail_msg("release: %s", zt_last_error(rt));
        }
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    mlp_weights_read_or_fail(rt, &m, out);
    if (on_stream)
        assert_int_equal(zt_stream_destroy(rt, stream), ZT_OK);
    zt_runtime_destroy(rt);
}

static void check_async_fetch_blocking_release(const char *param)
{
    mlp_weights ref, got;
    backward_only(config(param, "16M", 8), 0, &ref);
    backward_only(config(param, "16M", 8), 1, &got);
    mlp_weights_assert_same(&ref, &got, param);
    mlp_weights_free(&ref);
    mlp_weights_free(&got);
}

static void test_async_fetch_blocking_release_cpu(void **state)
{
    (void)state;
    check_async_fetch_blocking_release("cpu");
}

static void test_async_fetch_blocking_release_device(void **state)
{
    (void)state;
    check_async_fetch_blocking_release("none");
}

static void test_stream_misuse(void **state)
{
    (void)state;
    minimal_model m;
    void *stream = NULL;
    zt_runtime *rt = rt_fixture_create(NULL, config("cpu", "16M", 2));
    rt_fixture_register_mlp(rt, &dims, 7, &m);
    assert_int_equal(zt_stream_create(rt, &stream), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "before zt_runtime_commit"));
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    zt_layer_view v;
    assert_int_equal(zt_fetch_async(rt, m.layer[0], ZT_FORWARD, NULL, &v), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "stream is NULL"));
    int not_a_stream;
    assert_int_equal(zt_fetch_async(rt, m.layer[0], ZT_FORWARD, &not_a_stream, &v),
                     ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "zt_stream_create"));
    assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    assert_int_equal(zt_stream_launch(rt, stream, NULL, NULL), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_release_async(rt, m.layer[0], ZT_FORWARD, stream), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "without a matching fetch"));
    /* the blocking and the stream-ordered forms mix */
    assert_int_equal(zt_fetch_async(rt, m.layer[0], ZT_FORWARD, stream, &v), ZT_OK);
    assert_int_equal(zt_release(rt, m.layer[0], ZT_FORWARD), ZT_OK);
    assert_int_equal(zt_fetch(rt, m.layer[0], ZT_FORWARD, &v), ZT_OK);
    assert_int_equal(zt_release_async(rt, m.layer[0], ZT_FORWARD, stream), ZT_OK);
    assert_int_equal(zt_stream_destroy(rt, stream), ZT_OK);
    assert_int_equal(zt_stream_destroy(rt, stream), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "destroyed already"));
    assert_int_equal(zt_release_async(rt, m.layer[0], ZT_FORWARD, stream), ZT_ERR_ARGUMENT);
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_training_equals_blocking_cpu),
        cmocka_unit_test(test_stream_training_equals_blocking_device),
        cmocka_unit_test(test_stream_training_equals_blocking_nvme),
        cmocka_unit_test(test_slow_stream_under_pressure),
        cmocka_unit_test(test_calls_do_not_wait_for_a_stopped_stream),
        cmocka_unit_test(test_stream_misuse),
        cmocka_unit_test(test_async_fetch_blocking_release_cpu),
        cmocka_unit_test(test_async_fetch_blocking_release_device),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

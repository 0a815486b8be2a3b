/* SPDX-License-Identifier: MIT */
/* The overlapped optimizer step (ztier.overlap_step: "auto" turns it on for the optimizer
 * state on NVMe, "on" also for the state in host memory):
 * zt_step returns with layers' updates still to run, and each layer is updated by the first
 * later call that needs it.
 *  - Training gives the same bits as the step that updates everything before it returns,
 *    for the optimizer state on NVMe (with 3, 5 and 10 buffer sets) and in host memory,
 *    parameters in host memory, in device memory and on NVMe, with the blocking and the
 *    stream-ordered calls; the overlap really happens (zt_stats.overlapped_updates), and not
 *    at all when switched off or under "auto" with the state in host memory.
 *  - Readers of the whole state (zt_param_read, a checkpoint save) right after zt_step see
 *    the finished step; a checkpoint saved there resumes bit for bit.
 *  - An update that fails after zt_step returned (an NVMe read error) is returned by the
 *    fetch that ran it, naming the cause, then by every call that uses the state, until a
 *    checkpoint load; training then goes on. */
#include "mlp_weights.h"
#include "rt_fixture.h"
#include "tiers/io.h"
#include "train.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
#define STEPS 4
#define ACCUM 2

static int setup(void **state)
{
    (void)state;
    alarm(120);
    return rt_fixture_open("overlap-step");
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    return rt_fixture_close();
}

/* Small sub-groups (many transfers per layer) and a prefetch window of one layer, so that
 * the step leaves most layers to the next forward pass; buffers: offload_optimizer's
 * buffer_count (the NVMe step's sets of three: 4 gives the minimum of 3 sets). */
static const char *config_buffers(const char *param, const char *optim, const char *overlap,
                                  int buffers)
{
    static char buf[2048];
    snprintf(
        buf, sizeof buf,
        "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
        "\"$SCRATCH\"}, \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"$SCRATCH\","
        " \"buffer_count\": %d},"
        " \"stage3_param_persistence_threshold\": 0, \"sub_group_size\": 1024,"
        " \"stage3_prefetch_bucket_size\": 1},"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}},"
        " \"gradient_accumulation_steps\": %d, \"gradient_clipping\": 1.0,"
        " \"aio\": {\"block_size\": 4096},"
        " \"ztier\": {\"hbm_capacity\": \"16M\", \"overlap_step\": \"%s\"}}",
        param, optim, buffers, ACCUM, overlap);
    return buf;
}

static const char *config(const char *param, const char *optim, const char *overlap)
{
    return config_buffers(param, optim, overlap, 4);
}

static zt_runtime *make(const char *cfg, minimal_model *m)
{
    return rt_fixture_mlp(NULL, cfg, &dims, 11, m);
}

static void micro_step(zt_runtime *rt, const minimal_model *m, void *stream, int s, int k,
                       float *loss)
{
    int rows = dims.batch / ACCUM;
    zt_status st = stream ? minimal_micro_step_on(rt, m, stream, s, k * rows, rows, 0, loss)
                          : minimal_micro_step(rt, m, s, k * rows, rows, loss);
    if (st != ZT_OK)
        fail_msg("micro-step %d.%d: %s", s, k, zt_last_error(rt));
}

static void step(zt_runtime *rt)
{
    if (zt_step(rt, NULL, NULL) != ZT_OK)
        fail_msg("zt_step: %s", zt_last_error(rt));
}

/* STEPS steps; the weights after them, every loss and the overlapped updates. */
static uint64_t train(const char *cfg, int on_stream, mlp_weights *out, float *losses)
{
    minimal_model m;
    zt_runtime *rt = make(cfg, &m);
    void *stream = NULL;
    if (on_stream)
        assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < ACCUM; k++)
            micro_step(rt, &m, stream, s, k, &losses[s * ACCUM + k]);
        step(rt);
    }
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    mlp_weights_read_or_fail(rt, &m, out);
    zt_runtime_destroy(rt);
    return st.overlapped_updates;
}

static void test_bitwise_equal_to_the_serial_step(void **state)
{
    (void)state;
    const char *params[] = {"cpu", "none", "nvme"};
    mlp_weights ref, got;
    float ref_loss[STEPS * ACCUM], loss[STEPS * ACCUM];
    /* optimizer state, overlap_step, stream calls; "auto" is on for NVMe, off for host
     * memory */
    /* ... and buffers: 15 and 30 make 5 and 10 sets, which read further ahead */
    static const struct {
        const char *optim, *overlap;
        int overlap_on, on_stream, buffers;
    } runs[] = {{"nvme", "off", 0, 0, 4},  {"nvme", "on", 1, 0, 4}, {"nvme", "auto", 1, 1, 4},
                {"cpu", "on", 1, 0, 4},    {"cpu", "on", 1, 1, 4},  {"cpu", "auto", 0, 0, 4},
                {"nvme", "off", 0, 0, 15}, {"nvme", "on", 1, 0, 30}};
    for (int p = 0; p < 3; p++) {
        /* the reference: the optimizer state in host memory, the serial step */
        assert_int_equal(train(config(params[p], "cpu", "off"), 0, &ref, ref_loss), 0);
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
            int overlap = runs[r].overlap_on;
            char what[160];
            snprintf(what, sizeof what,
                     "parameters '%s', optimizer '%s', overlap_step '%s', "
                     "stream %d, %d buffers",
                     params[p], runs[r].optim, runs[r].overlap, runs[r].on_stream, runs[r].buffers);
            uint64_t overlapped =
                train(config_buffers(params[p], runs[r].optim, runs[r].overlap, runs[r].buffers),
                      runs[r].on_stream, &got, loss);
            mlp_weights_assert_same(&got, &ref, what);
            assert_memory_equal(loss, ref_loss, sizeof loss);
            /* 3 layers, one moved by the step's own prefetch: the others are left to later
             * calls in every step after the first */
            if (overlap && overlapped < (uint64_t)(STEPS - 1))
                fail_msg("%s: only %llu updates overlapped", what, (unsigned long long)overlapped);
            if (!overlap)
                assert_int_equal(overlapped, 0);
            mlp_weights_free(&got);
        }
        mlp_weights_free(&ref);
    }
}

/* zt_param_read and a checkpoint save right after zt_step see the whole step; the
 * checkpoint resumes bit for bit. */
static void readers_see_the_finished_step(const char *optim)
{
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt-%s", rt_fixture_dir(), optim);
    mlp_weights serial, mid, resumed, uninterrupted;
    float loss;
    minimal_model m;
    /* the serial step's weights after 2 steps */
    zt_runtime *rt = make(config("cpu", optim, "off"), &m);
    for (int s = 0; s < 2; s++) {
        for (int k = 0; k < ACCUM; k++)
            micro_step(rt, &m, NULL, s, k, &loss);
        step(rt);
    }
    mlp_weights_read_or_fail(rt, &m, &serial);
    zt_runtime_destroy(rt);

    rt = make(config("cpu", optim, "on"), &m);
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < ACCUM; k++)
            micro_step(rt, &m, NULL, s, k, &loss);
        step(rt);
        if (s == 1) { /* updates pending: the readers finish them first */
            assert_int_equal(zt_checkpoint_save(rt, ckpt), ZT_OK);
            mlp_weights_read_or_fail(rt, &m, &mid);
            mlp_weights_assert_same(&mid, &serial, "zt_param_read after an overlapped step");
        }
    }
    mlp_weights_read_or_fail(rt, &m, &uninterrupted);
    zt_runtime_destroy(rt);

    rt = make(config("cpu", optim, "on"), &m);
    assert_int_equal(zt_checkpoint_load(rt, ckpt), ZT_OK);
    for (int s = 2; s < STEPS; s++) {
        for (int k = 0; k < ACCUM; k++)
            micro_step(rt, &m, NULL, s, k, &loss);
        step(rt);
    }
    mlp_weights_read_or_fail(rt, &m, &resumed);
    zt_runtime_destroy(rt);
    mlp_weights_assert_same(&resumed, &uninterrupted, "resumed from a checkpoint saved mid-step");
    mlp_weights_free(&serial), mlp_weights_free(&mid);
    mlp_weights_free(&resumed), mlp_weights_free(&uninterrupted);
}

static void test_readers_see_the_finished_step(void **state)
{
    (void)state;
    readers_see_the_finished_step("nvme");
    readers_see_the_finished_step("cpu");
}

/* An NVMe read that fails while a fetch runs a layer's update. */
static void test_failed_update_is_reported_until_a_load(void **state)
{
    (void)state;
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt-fail", rt_fixture_dir());
    minimal_model m;
    float loss, w[16 * 48];
    zt_runtime *rt = make(config("cpu", "nvme", "auto"), &m);
    assert_int_equal(zt_checkpoint_save(rt, ckpt), ZT_OK);
    for (int k = 0; k < ACCUM; k++)
        micro_step(rt, &m, NULL, 0, k, &loss);
    step(rt);
    zt_io_test_fail(ZT_IO_READ, EIO, 0); /* the next optimizer-state read */
    zt_status st = minimal_micro_step(rt, &m, 1, 0, dims.batch / ACCUM, &loss);
    zt_io_test_fail(-1, 0, 0);
    assert_int_equal(st, ZT_ERR_IO);
    const char *msg = zt_last_error(rt);
    if (!strstr(msg, "fetch of layer 'fc") || !strstr(msg, "NVMe read of 'fc") ||
        !strstr(msg, "ztier-optim-r0.swap") || !strstr(msg, "load a checkpoint"))
        fail_msg("unexpected message: %s", msg);
    /* every later user of the state reports it; nothing is saved over the good checkpoint */
    assert_int_equal(zt_async_error(rt), ZT_ERR_IO);
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_ERR_IO);
    assert_int_equal(zt_param_read(rt, m.weight[0], w, 16 * 48), ZT_ERR_IO);
    assert_int_equal(zt_checkpoint_save(rt, ckpt), ZT_ERR_IO);
    /* a load makes the state consistent: training goes on */
    assert_int_equal(zt_checkpoint_load(rt, ckpt), ZT_OK);
    assert_int_equal(zt_async_error(rt), ZT_OK);
    for (int s = 0; s < 2; s++) {
        for (int k = 0; k < ACCUM; k++)
            micro_step(rt, &m, NULL, s, k, &loss);
        step(rt);
    }
    assert_int_equal(zt_param_read(rt, m.weight[0], w, 16 * 48), ZT_OK);
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitwise_equal_to_the_serial_step),
        cmocka_unit_test(test_readers_see_the_finished_step),
        cmocka_unit_test(test_failed_update_is_reported_until_a_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

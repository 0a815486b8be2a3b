/* SPDX-License-Identifier: MIT */
/* The optimizer on the device (offload_optimizer "none", ztier.device_optimizer "on"), run
 * by the host backend's device kernels — the code path the cuda backend takes, with the
 * same per-element Adam (core/adam_elem.h):
 *  - without clipping, training equals the CPU optimizer bit for bit (both kernels compute
 *    zt_adam_elem), for parameters in device memory, host memory and on NVMe, with the
 *    blocking and the stream-ordered calls; with clipping, to float rounding;
 *  - the state lives in device memory (zt_stats, zt_optimizer_get), not in the host tier;
 *  - stream-ordered releases never wait for the device (no landing buffers needed);
 *  - a checkpoint saved from device memory resumes bit for bit;
 *  - configurations that cannot work are refused with the fix. */
#include "mlp_weights.h"
#include "runtime/runtime.h" /* the step's device counters */
#include "rt_fixture.h"
#include "train.h"

#include <math.h>
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

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("device-optimizer");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

static const char *config(const char *param, const char *devopt, float clip)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
             "\"$SCRATCH\"}, \"offload_optimizer\": {\"device\": \"none\"},"
             " \"stage3_param_persistence_threshold\": 0},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, "
             "\"weight_decay\": 0.1}}, \"gradient_accumulation_steps\": 2,"
             " \"gradient_clipping\": %g, \"aio\": {\"block_size\": 4096},"
             " \"ztier\": {\"hbm_capacity\": \"16M\", \"device_optimizer\": \"%s\","
             " \"gradient_landing_buffers\": 1}}",
             param, (double)clip, devopt);
    return buf;
}

static zt_runtime *make(const char *cfg, minimal_model *m)
{
    return rt_fixture_mlp(NULL, cfg, &dims, 5, m);
}

/* Trains from step `from` to `to`; on_stream: stream-ordered calls. *layer_syncs: host
 * waits inside the micro-steps. */
static void train(zt_runtime *rt, const minimal_model *m, int from, int to, int on_stream,
                  uint64_t *layer_syncs)
{
    void *stream = NULL;
    if (on_stream)
        assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    int rows = dims.batch / 2;
    for (int s = from; s < to; s++) {
        for (int k = 0; k < 2; k++) {
            zt_stats before = ZT_STATS_INIT, after = ZT_STATS_INIT;
            zt_stats_get(rt, &before);
            float loss;
            minimal_stream_step *q = NULL;
            zt_status st = on_stream
                               ? minimal_micro_step_queue(rt, m, stream, s, k * rows, rows, 50, &q)
                               : minimal_micro_step(rt, m, s, k * rows, rows, &loss);
            if (st != ZT_OK)
                fail_msg("step %d: %s", s, zt_last_error(rt));
            zt_stats_get(rt, &after);
            if (layer_syncs)
                *layer_syncs += after.host_syncs - before.host_syncs;
            if (on_stream)
                assert_int_equal(minimal_micro_step_finish(rt, stream, q, &loss), ZT_OK);
        }
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    if (stream)
        assert_int_equal(zt_stream_destroy(rt, stream), ZT_OK);
}

static void run(const char *cfg, int on_stream, mlp_weights *out, uint64_t *layer_syncs,
                zt_stats *stats, zt_optimizer_info *info)
{
    minimal_model m;
    zt_runtime *rt = make(cfg, &m);
    train(rt, &m, 0, STEPS, on_stream, layer_syncs);
    mlp_weights_read_or_fail(rt, &m, out);
    if (stats)
        assert_int_equal(zt_stats_get(rt, stats), ZT_OK);
    if (info)
        assert_int_equal(zt_optimizer_get(rt, info), ZT_OK);
    zt_runtime_destroy(rt);
}

static void check_placement(const char *param)
{
    mlp_weights cpu, dev, dev_stream;
    zt_stats cs = ZT_STATS_INIT, ds = ZT_STATS_INIT;
    zt_optimizer_info ci = ZT_OPTIMIZER_INFO_INIT, di = ZT_OPTIMIZER_INFO_INIT;
    uint64_t syncs = 0;
    run(config(param, "off", 0), 0, &cpu, NULL, &cs, &ci);
    run(config(param, "on", 0), 0, &dev, NULL, &ds, &di);
    run(config(param, "on", 0), 1, &dev_stream, &syncs, NULL, NULL);
    assert_int_equal(ci.on_device, 0);
    assert_int_equal(di.on_device, 1);
    /* master, m, v and the accumulators (3364 elements, padded) moved off the host tier */
    uint64_t state = 4 * 3364 * sizeof(float);
    assert_true(cs.host_bytes_peak >= ds.host_bytes_peak + state);
    assert_true(ds.device_bytes_peak >= cs.device_bytes_peak + state);
    double d1 = mlp_weights_max_rel_diff(&dev, &cpu);
    double d2 = mlp_weights_max_rel_diff(&dev_stream, &cpu);
    print_message("params %-4s: device optimizer vs CPU %g, on a stream %g; %llu host waits in "
                  "the stream-ordered micro-steps\n",
                  param, d1, d2, (unsigned long long)syncs);
    assert_true(d1 == 0.0);
    assert_true(d2 == 0.0);
    if (strcmp(param, "nvme") != 0)
        assert_int_equal(syncs, 0);
    mlp_weights_free(&cpu), mlp_weights_free(&dev), mlp_weights_free(&dev_stream);
}

/* Adam's count of non-finite gradients is this step's: zeroed with the norm's sums every
 * step (device memory starts as garbage: the CUDA stand-in fills it with 0xff, ASan's
 * malloc with 0xbe). No step here has any. */
static void test_adam_count_is_the_steps(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = make(config("none", "on", 0), &m);
    train(rt, &m, 0, 2, 0, NULL);
    unsigned long long count = 1;
    zt_error err = {0};
    assert_int_equal(zt_device_copy_sync(rt->device.dev, &count,
                                         (char *)rt->opt.dev_step_stats + ZT_DEVICE_STEP_COUNT_AT,
                                         sizeof count, ZT_COPY_D2H, rt->device.stream, &err),
                     ZT_OK);
    assert_int_equal(count, 0);
    zt_runtime_destroy(rt);
}

static void test_device_params(void **state)
{
    (void)state;
    check_placement("none");
}

static void test_host_params(void **state)
{
    (void)state;
    check_placement("cpu");
}

static void test_nvme_params(void **state)
{
    (void)state;
    check_placement("nvme");
}

/* With clipping the norm's double sums are added in another order: equal to float rounding. */
static void test_clipped_steps_agree(void **state)
{
    (void)state;
    mlp_weights cpu, dev;
    run(config("cpu", "off", 0.05f), 0, &cpu, NULL, NULL, NULL);
    run(config("cpu", "on", 0.05f), 0, &dev, NULL, NULL, NULL);
    double d = mlp_weights_max_rel_diff(&dev, &cpu);
    print_message("clipped: device optimizer vs CPU %g\n", d);
    assert_true(d < 1e-5);
    mlp_weights_free(&cpu), mlp_weights_free(&dev);
}

/* Save after 2 steps, go on to 4; a new runtime loads the checkpoint and goes on to 4 too. */
static void test_checkpoint_resumes_bitwise(void **state)
{
    (void)state;
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", rt_fixture_dir());
    minimal_model m;
    mlp_weights straight, resumed;
    zt_runtime *rt = make(config("cpu", "on", 0.05f), &m);
    train(rt, &m, 0, 2, 0, NULL);
    assert_int_equal(zt_checkpoint_save(rt, ckpt), ZT_OK);
    train(rt, &m, 2, 4, 0, NULL);
    mlp_weights_read_or_fail(rt, &m, &straight);
    zt_runtime_destroy(rt);
    rt = make(config("cpu", "on", 0.05f), &m);
    train(rt, &m, 0, 1, 1, NULL); /* other values and accumulators first: the load replaces them */
    float loss;
    assert_int_equal(minimal_micro_step(rt, &m, 9, 0, dims.batch / 2, &loss), ZT_OK);
    assert_int_equal(zt_checkpoint_load(rt, ckpt), ZT_OK);
    train(rt, &m, 2, 4, 0, NULL);
    mlp_weights_read_or_fail(rt, &m, &resumed);
    zt_runtime_destroy(rt);
    assert_true(mlp_weights_max_rel_diff(&resumed, &straight) == 0.0);
    mlp_weights_free(&straight), mlp_weights_free(&resumed);
}

static void expect_config_error(const char *cfg, const char *needle)
{
    rt_fixture_expect_config_error(cfg, &dims, needle);
}

static void test_bad_configurations(void **state)
{
    (void)state;
    expect_config_error("{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\"}},"
                        " \"ztier\": {\"device_optimizer\": \"on\"}}",
                        "offload_optimizer.device to \"none\"");
    expect_config_error("{\"ztier\": {\"device_optimizer\": \"sometimes\"}}",
                        "ztier.device_optimizer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adam_count_is_the_steps),
        cmocka_unit_test(test_device_params),
        cmocka_unit_test(test_host_params),
        cmocka_unit_test(test_nvme_params),
        cmocka_unit_test(test_clipped_steps_agree),
        cmocka_unit_test(test_checkpoint_resumes_bitwise),
        cmocka_unit_test(test_bad_configurations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

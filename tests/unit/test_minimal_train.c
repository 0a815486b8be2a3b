/* SPDX-License-Identifier: MIT */
/* The minimal example's MLP trained through ztier must equal the same model trained by an
 * independent in-memory implementation (tests/common/ref_mlp.c) from the same initial
 * values after 20 steps (relative error <= 1e-6), for every placement and Adam variant, and
 * 4 accumulated micro-batches must equal one batch of 4x the size. */
#include "ref_mlp.h"
#include "rt_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define STEPS 20

static const mlp_dims dims = {16, 48, 4, 32};
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

static zt_runtime *create(const char *config, minimal_model *m)
{
    zt_runtime *rt = NULL;
    /* the commit is where the optimizer's variant is chosen */
    zt_status st = rt_fixture_try_mlp(NULL, config, &dims, 42, m, &rt);
    if (st != ZT_OK && strstr(zt_last_error(rt), "this CPU or build lacks it")) {
        zt_runtime_destroy(rt); /* this CPU lacks the requested variant */
        return NULL;
    }
    if (st != ZT_OK)
        fail_msg("create or commit: %s", zt_last_error(rt));
    return rt;
}

static void train_and_compare_with(const char *param_dev, const char *opt_dev, const char *variant,
                                   const char *more_ztier)
{
    char extra[160];
    snprintf(extra, sizeof extra, ", \"adam_variant\": \"%s\"%s", variant, more_ztier);
    minimal_model m;
    zt_runtime *rt = create(ref_mlp_config(&hp, param_dev, opt_dev, 1, "", extra), &m);
    if (!rt)
        return;
    ref_mlp ref;
    assert_int_equal(ref_mlp_init(&ref, rt, &m, &hp), 0);
    float first = 0, last = 0, ref_last = 0;
    for (int s = 0; s < STEPS; s++) {
        float loss;
        assert_int_equal(minimal_micro_step(rt, &m, s, 0, dims.batch, &loss), ZT_OK);
        zt_step_info info = ZT_STEP_INFO_INIT;
        assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
        assert_int_equal(info.skipped, 0);
        assert_int_equal(info.micro_steps, 1);
        ref_last = ref_mlp_step(&ref, s, 1);
        first = s == 0 ? loss : first;
        last = loss;
    }
    double err = ref_mlp_max_rel_error(&ref, rt, &m);
    if (err > 1e-6)
        fail_msg("%s/%s/%s: relative error %g", param_dev, opt_dev, variant, err);
    zt_stats stats = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &stats), ZT_OK);
    assert_int_equal(stats.trace_deviations, 0);
    assert_true(stats.prefetch_hits >= (uint64_t)(STEPS - 1) * 4); /* layers after the first */
    assert_true(fabsf(last - ref_last) <= 1e-5f * fabsf(ref_last));
    assert_true(last < 0.7f * first); /* it learns */
    ref_mlp_free(&ref);
    zt_runtime_destroy(rt);
}

static void train_and_compare(const char *param_dev, const char *opt_dev, const char *variant)
{
    train_and_compare_with(param_dev, opt_dev, variant, "");
}

/* Adam, the norm and the gradient sums on the device (the host backend's kernels). */
static void test_device_optimizer_equals_reference(void **state)
{
    (void)state;
    train_and_compare_with("none", "none", "auto", ", \"device_optimizer\": \"on\"");
    train_and_compare_with("cpu", "none", "auto", ", \"device_optimizer\": \"on\"");
}

static void test_host_placement_equals_reference(void **state)
{
    (void)state;
    train_and_compare("cpu", "cpu", "auto");
}

static void test_device_placement_equals_reference(void **state)
{
    (void)state;
    train_and_compare("none", "none", "auto");
}

static void test_scalar_adam_equals_reference(void **state)
{
    (void)state;
    train_and_compare("cpu", "cpu", "scalar");
}

static void test_avx2_adam_equals_reference(void **state)
{
    (void)state;
    train_and_compare("none", "cpu", "avx2");
}

static void test_avx512_adam_equals_reference(void **state)
{
    (void)state;
    train_and_compare("cpu", "none", "avx512");
}

/* 4 micro-batches of B rows accumulated == one step over the same 4B rows (the reference
 * averages the four micro-batch gradients). */
static void test_accumulation_equals_big_batch(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = create(ref_mlp_config(&hp, "cpu", "cpu", 4, "", ""), &m);
    ref_mlp ref;
    assert_int_equal(ref_mlp_init(&ref, rt, &m, &hp), 0);
    for (int s = 0; s < 10; s++) {
        for (int k = 0; k < 4; k++) {
            float loss;
            assert_int_equal(minimal_micro_step(rt, &m, 4 * s + k, 0, dims.batch, &loss), ZT_OK);
        }
        zt_step_info info = ZT_STEP_INFO_INIT;
        assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
        assert_int_equal(info.micro_steps, 4);
        ref_mlp_step(&ref, 4 * s, 4);
    }
    double err = ref_mlp_max_rel_error(&ref, rt, &m);
    if (err > 1e-5)
        fail_msg("accumulation: relative error %g", err);
    ref_mlp_free(&ref);
    zt_runtime_destroy(rt);
}

/* STEPS steps of the model beside the reference (before, when not NULL, runs ahead of each
 * micro-step); returns the largest relative difference of their parameters after. */
static double train_beside_reference(zt_runtime *rt, minimal_model *m, ref_mlp *ref,
                                     void (*before)(zt_runtime *, minimal_model *, int))
{
    for (int s = 0; s < STEPS; s++) {
        if (before)
            before(rt, m, s);
        float loss;
        assert_int_equal(minimal_micro_step(rt, m, s, 0, dims.batch, &loss), ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
        ref_mlp_step(ref, s, 1);
    }
    return ref_mlp_max_rel_error(ref, rt, m);
}

/* An extra fetch of fc3 before steps 5, 6 and 12: a call order the trace has not seen. */
static void fetch_fc3_off_order(zt_runtime *rt, minimal_model *m, int s)
{
    if (s == 5 || s == 6 || s == 12) {
        zt_layer_view v;
        assert_int_equal(zt_fetch(rt, m->layer[2], ZT_FORWARD, &v), ZT_OK);
        assert_int_equal(zt_release(rt, m->layer[2], ZT_FORWARD), ZT_OK);
    }
}

/* An extra out-of-order fetch in some steps changes the recorded layer order: the trace is
 * re-recorded, prefetching recovers, and the parameters still equal the reference. */
static void test_layer_order_change_retraces(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = create(ref_mlp_config(&hp, "cpu", "cpu", 1, "", ""), &m);
    ref_mlp ref;
    assert_int_equal(ref_mlp_init(&ref, rt, &m, &hp), 0);
    double err = train_beside_reference(rt, &m, &ref, fetch_fc3_off_order);
    if (err > 1e-6)
        fail_msg("order change: relative error %g", err);
    zt_stats stats = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &stats), ZT_OK);
    assert_int_equal(stats.trace_deviations, 4); /* steps 5, 7 (order back), 12 and 13 */
    ref_mlp_free(&ref);
    zt_runtime_destroy(rt);
}

static void nvme_dir(void);

/* Layers below the persistence threshold are replicated and resident (fc1 and fc3 here),
 * the others sharded: training still equals the reference, and the resident layers are
 * never counted as prefetches; with the optimizer state on NVMe, too (the resident layers'
 * masters then in host memory of their own, the others' m and v alone on NVMe). */
static void test_persistent_small_layers_equal_reference(void **state)
{
    (void)state;
    nvme_dir();
    const char *placements[3][2] = {{"cpu", "cpu"}, {"cpu", "nvme"}, {"nvme", "nvme"}};
    for (int k = 0; k < 3; k++) {
        minimal_model m;
        zt_runtime *rt =
            create(ref_mlp_config(&hp, placements[k][0], placements[k][1], 1,
                                  ", \"stage3_param_persistence_threshold\": 1000", ""),
                   &m);
        ref_mlp ref;
        assert_int_equal(ref_mlp_init(&ref, rt, &m, &hp), 0);
        double err = train_beside_reference(rt, &m, &ref, NULL);
        if (err > 1e-6)
            fail_msg("persistent layers, %s/%s: relative error %g", placements[k][0],
                     placements[k][1], err);
        zt_stats st = ZT_STATS_INIT;
        assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
        assert_int_equal(st.persistent_layers, 2);            /* fc1 and fc3 */
        assert_true(st.prefetch_hits <= (uint64_t)STEPS * 2); /* only fc2 is ever prefetched */
        ref_mlp_free(&ref);
        zt_runtime_destroy(rt);
    }
}

/* The NVMe placements' swap files go to the scratch folder. */
static void nvme_dir(void) { setenv("ZT_NVME_PATH", rt_fixture_dir(), 1); }

static void test_nvme_placements_equal_reference(void **state)
{
    (void)state;
    nvme_dir();
    train_and_compare("nvme", "cpu", "auto");
    train_and_compare("cpu", "nvme", "auto");
    train_and_compare("nvme", "nvme", "auto");
}

/* Parameters and optimizer state on NVMe give the same bits as everything in host memory,
 * also when the pipelined optimizer step cuts layers into many small sub-groups, and when
 * the parameters in host or device memory are the master (the state on NVMe is then m, v). */
static void test_nvme_is_bitwise_host(void **state)
{
    (void)state;
    nvme_dir();
    const char *placements[4][2] = {
        {"cpu", "cpu"}, {"nvme", "nvme"}, {"cpu", "nvme"}, {"none", "nvme"}};
    float *result[4][2 * MLP_LAYERS];
    minimal_model m;
    for (int k = 0; k < 4; k++) {
        char cfg[2200];
        const char *base = ref_mlp_config(&hp, placements[k][0], placements[k][1], 1,
                                          k >= 2 ? ", \"sub_group_size\": 1024" : "", "");
        snprintf(cfg, sizeof cfg, "{\"aio\": {\"block_size\": 4096}, %s", base + 1);
        zt_runtime *rt = create(cfg, &m);
        for (int s = 0; s < 10; s++) {
            float loss;
            assert_int_equal(minimal_micro_step(rt, &m, s, 0, dims.batch, &loss), ZT_OK);
            assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
        }
        zt_stats st = ZT_STATS_INIT;
        assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
        if (k > 0)
            assert_true(st.nvme_read_bytes > 0 && st.nvme_write_bytes > 0);
        if (k >= 2) {
            /* The fp32 parameters are the master (in host memory updated in place, in device
             * memory copied in): a step reads m and v alone, each sub-group of 1024 elements
             * one 4096-byte block. Steps 1-9 are done; the 10th's updates wait for the next
             * fetches (overlapped). */
            uint64_t blocks = 0;
            for (int l = 0; l < MLP_LAYERS; l++)
                blocks += ((uint64_t)(m.n_in[l] + 1) * (uint64_t)m.n_out[l] + 1023) / 1024;
            assert_int_equal(st.nvme_read_bytes, 9 * 2 * blocks * 4096);
        }
        for (int l = 0; l < MLP_LAYERS; l++) {
            int64_t nw = (int64_t)m.n_in[l] * m.n_out[l];
            result[k][2 * l] = malloc(sizeof(float) * (size_t)nw);
            result[k][2 * l + 1] = malloc(sizeof(float) * (size_t)m.n_out[l]);
            assert_int_equal(zt_param_read(rt, m.weight[l], result[k][2 * l], nw), ZT_OK);
            assert_int_equal(zt_param_read(rt, m.bias[l], result[k][2 * l + 1], m.n_out[l]), ZT_OK);
        }
        zt_runtime_destroy(rt);
    }
    for (int l = 0; l < MLP_LAYERS; l++) {
        for (int k = 1; k < 4; k++) {
            assert_memory_equal(result[0][2 * l], result[k][2 * l],
                                sizeof(float) * (size_t)m.n_in[l] * (size_t)m.n_out[l]);
            assert_memory_equal(result[0][2 * l + 1], result[k][2 * l + 1],
                                sizeof(float) * (size_t)m.n_out[l]);
        }
        for (int k = 0; k < 4; k++)
            free(result[k][2 * l]), free(result[k][2 * l + 1]);
    }
}

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("swap-minimal");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_placement_equals_reference),
        cmocka_unit_test(test_device_placement_equals_reference),
        cmocka_unit_test(test_scalar_adam_equals_reference),
        cmocka_unit_test(test_avx2_adam_equals_reference),
        cmocka_unit_test(test_avx512_adam_equals_reference),
        cmocka_unit_test(test_accumulation_equals_big_batch),
        cmocka_unit_test(test_layer_order_change_retraces),
        cmocka_unit_test(test_persistent_small_layers_equal_reference),
        cmocka_unit_test(test_nvme_placements_equal_reference),
        cmocka_unit_test(test_device_optimizer_equals_reference),
        cmocka_unit_test(test_nvme_is_bitwise_host),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

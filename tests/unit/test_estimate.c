/* SPDX-License-Identifier: MIT */
/* The estimate of a run against the run itself: for the minimal MLP under several placements
 * and device budgets (one that forces evictions), the estimated host, pinned and NVMe bytes
 * equal what zt_stats reports after three training steps, and the estimated device peak is
 * within 5% of the measured one. fp32 parameters in host memory are their own master. */
#include "rt_fixture.h"
#include "runtime/estimate.h"
#include "train.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static const mlp_dims dims = {64, 512, 8, 32};

static const char *config(const char *pdev, const char *odev, const char *hbm, const char *extra)
{
    static char buf[4096];
    snprintf(
        buf, sizeof buf,
        "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
        "\"$SCRATCH\"}, \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"$SCRATCH\"}, "
        "\"stage3_param_persistence_threshold\": 1000%s}, \"aio\": {\"block_size\": "
        "8192}, \"ztier\": {\"hbm_capacity\": \"%s\"}}",
        pdev, odev, extra, hbm);
    return buf;
}

static zt_runtime *registered(const char *cfg, minimal_model *m)
{
    zt_runtime *rt = rt_fixture_create(NULL, cfg);
    rt_fixture_register_mlp(rt, &dims, 5, m);
    return rt;
}

/* A micro-step's fetches and releases without the compute (the example computes in fp32
 * only; memory does not depend on the values). */
static void dry_micro_step(zt_runtime *rt, const minimal_model *m)
{
    zt_layer_view v;
    for (int l = 0; l < MLP_LAYERS; l++) {
        assert_int_equal(zt_fetch(rt, m->layer[l], ZT_FORWARD, &v), ZT_OK);
        assert_int_equal(zt_release(rt, m->layer[l], ZT_FORWARD), ZT_OK);
    }
    for (int l = MLP_LAYERS - 1; l >= 0; l--) {
        assert_int_equal(zt_fetch(rt, m->layer[l], ZT_BACKWARD, &v), ZT_OK);
        assert_int_equal(zt_release(rt, m->layer[l], ZT_BACKWARD), ZT_OK);
    }
}

static void check(const char *what, const char *cfg)
{
    minimal_model m;
    zt_runtime *est_rt = registered(cfg, &m);
    zt_estimate e;
    uint64_t capacity = (uint64_t)est_rt->cfg.hbm_capacity;
    if (zt_rt_estimate(est_rt, 1, capacity, NULL, 0, 3, &e) != ZT_OK)
        fail_msg("%s: %s", what, zt_last_error(est_rt));
    zt_runtime_destroy(est_rt);

    zt_runtime *rt = registered(cfg, &m);
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    for (int s = 0; s < 3; s++) {
        float loss;
        if (rt->reg.dtype == ZT_F32)
            assert_int_equal(minimal_micro_step(rt, &m, s, 0, dims.batch, &loss), ZT_OK);
        else
            dry_micro_step(rt, &m);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    double dev = (double)e.device_peak / (double)st.device_bytes_peak;
    printf("%-34s device %8llu est %8llu (%.3f), window %8llu, host %8llu est %8llu, "
           "nvme %8llu est %8llu, %llu evictions/step est %llu\n",
           what, (unsigned long long)st.device_bytes_peak, (unsigned long long)e.device_peak, dev,
           (unsigned long long)e.device_window, (unsigned long long)st.host_bytes_peak,
           (unsigned long long)e.plan.host_bytes, (unsigned long long)st.nvme_bytes_peak,
           (unsigned long long)(e.plan.nvme_param_bytes + e.plan.nvme_optim_bytes),
           (unsigned long long)(st.evictions / 3), (unsigned long long)e.evictions);
    assert_int_equal(st.host_bytes_peak, e.plan.host_bytes);
    assert_int_equal(st.nvme_bytes_peak, e.plan.nvme_param_bytes + e.plan.nvme_optim_bytes);
    assert_int_equal(st.pinned_bytes, e.plan.pinned_bytes);
    assert_int_equal(st.persistent_bytes, e.plan.persistent_bytes);
    assert_int_equal(st.replicated_bytes, e.plan.replicated_bytes);
    assert_true(dev >= 0.95 && dev <= 1.05);
    assert_true(e.device_peak <= e.device_window);
    /* one layer at a time (no tie): the order's minimum is the plan's, commit's as before */
    assert_int_equal(e.device_min_order, e.plan.device_min);
    zt_runtime_destroy(rt);
}

static void test_estimate_matches_runs(void **state)
{
    (void)state;
    check("params cpu, optimizer cpu", config("cpu", "cpu", "64M", ""));
    check("params on device, optimizer cpu", config("none", "cpu", "64M", ""));
    check("params nvme, optimizer nvme", config("nvme", "nvme", "64M", ""));
    check("params cpu, optimizer nvme, bf16",
          config("cpu", "nvme", "64M", "}, \"bf16\": {\"enabled\": true"));
    check("params cpu, small prefetch window", config("cpu", "cpu", "64M",
                                                      ", \"stage3_prefetch_bucket_size\": 20000, "
                                                      "\"stage3_max_reuse_distance\": 0"));
    check("params cpu, budget forces evictions", config("cpu", "cpu", "2150000", ""));
    /* stages 0, 1 and 2: replicas resident, the optimizer where it is placed */
    check("stage 2, optimizer cpu", config("none", "cpu", "64M", ", \"stage\": 2"));
    check("stage 1, optimizer nvme", config("none", "nvme", "64M", ", \"stage\": 1"));
    check("stage 2, optimizer nvme, bf16",
          config("none", "nvme", "64M", ", \"stage\": 2}, \"bf16\": {\"enabled\": true"));
    check("stage 0", config("none", "none", "64M", ", \"stage\": 0"));
    check("params nvme, budget forces evictions", config("nvme", "cpu", "2150000", ""));
    check("params cpu, optimizer nvme, evictions", config("cpu", "nvme", "2150000", ""));
    check("params nvme, optimizer nvme, small window",
          config("nvme", "nvme", "2150000", ", \"stage3_prefetch_bucket_size\": 20000"));
    check("params cpu, bf16 gradient sums",
          config("cpu", "cpu", "64M\", \"grad_accum_dtype\": \"bf16", ""));
    check("params cpu, optimizer on the device",
          config("cpu", "none", "64M\", \"device_optimizer\": \"on", ""));
    check("params nvme, optimizer on the device, bf16",
          config("nvme", "none", "64M\", \"device_optimizer\": \"on",
                 "}, \"bf16\": {\"enabled\": true"));
}

/* ---- a deeper stack of layers of uneven sizes, driven without compute ---- */

#define STACK 9
static const int64_t stack_sizes[STACK] = {3000, 40000, 9000,  70000, 20000,
                                           500,  45000, 12000, 30000};

/* The stack's layers "l<i>", each with one parameter "l<i>.w"; their ids in `layers`. */
static zt_status register_stack(zt_runtime *rt, void *layers)
{
    int *ids = layers;
    zt_status st = ZT_OK;
    for (int i = 0; i < STACK && st == ZT_OK; i++) {
        char name[32];
        int p;
        snprintf(name, sizeof name, "l%d", i);
        st = zt_layer_add(rt, name, &ids[i]);
        snprintf(name, sizeof name, "l%d.w", i);
        if (st == ZT_OK)
            st = zt_param_add(rt, ids[i], name, &stack_sizes[i], 1, NULL, &p);
    }
    return st;
}

static zt_runtime *stack_runtime(const char *cfg, int *layers)
{
    zt_runtime *rt = rt_fixture_create(NULL, cfg);
    rt_fixture_register(rt, register_stack, layers);
    return rt;
}

static void check_stack(const char *what, const char *cfg)
{
    int layers[STACK];
    zt_runtime *rt = stack_runtime(cfg, layers);
    zt_estimate e;
    if (zt_rt_estimate(rt, 1, (uint64_t)rt->cfg.hbm_capacity, NULL, 0, 4, &e) != ZT_OK)
        fail_msg("%s: %s", what, zt_last_error(rt));
    zt_runtime_destroy(rt);
    rt = stack_runtime(cfg, layers);
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    zt_layer_view v;
    for (int s = 0; s < 4; s++) {
        for (int l = 0; l < 2 * STACK; l++) {
            int id = l < STACK ? l : 2 * STACK - 1 - l;
            zt_pass pass = l < STACK ? ZT_FORWARD : ZT_BACKWARD;
            assert_int_equal(zt_fetch(rt, layers[id], pass, &v), ZT_OK);
            assert_int_equal(zt_release(rt, layers[id], pass), ZT_OK);
        }
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    double dev = (double)e.device_peak / (double)st.device_bytes_peak;
    printf("%-38s device %8llu est %8llu (%.3f), window %8llu, %llu evictions est %llu\n", what,
           (unsigned long long)st.device_bytes_peak, (unsigned long long)e.device_peak, dev,
           (unsigned long long)e.device_window, (unsigned long long)st.evictions,
           (unsigned long long)e.evictions * 4);
    assert_true(dev >= 0.95 && dev <= 1.05);
    assert_int_equal(st.host_bytes_peak, e.plan.host_bytes);
    assert_int_equal(e.device_min_order, e.plan.device_min);
    zt_runtime_destroy(rt);
}

static void test_estimate_follows_the_prefetch_window(void **state)
{
    (void)state;
    const char *base = "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}, "
                       "\"stage3_param_persistence_threshold\": %s, "
                       "\"stage3_prefetch_bucket_size\": %s, \"stage3_max_reuse_distance\": %s}, "
                       "\"ztier\": {\"hbm_capacity\": \"%s\"}}";
    static const char *const cases[][5] = {
        {"whole model in the window", "0", "5e7", "1e9", "8M"},
        {"window of 50000 elements", "0", "50000", "1e9", "8M"},
        {"window of 1 layer, no reuse", "0", "1", "0", "8M"},
        {"reuse within 60000 elements", "0", "100000", "60000", "8M"},
        {"persistent small layers", "10000", "80000", "1e9", "8M"},
        {"budget below the window", "0", "5e7", "1e9", "1000000"},
        {"budget at the minimum", "0", "5e7", "1e9", "560000"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cfg[1024];
        snprintf(cfg, sizeof cfg, base, cases[i][1], cases[i][2], cases[i][3], cases[i][4]);
        check_stack(cases[i][0], cfg);
    }
}

static void test_estimate_refuses_a_budget_below_the_minimum(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = registered(config("cpu", "cpu", "64M", ""), &m);
    zt_estimate e;
    assert_int_equal(zt_rt_estimate(rt, 1, 100000, NULL, 0, 2, &e), ZT_ERR_DEVICE_NOMEM);
    assert_non_null(strstr(zt_last_error(rt), "layer 'fc2'"));
    assert_true(e.plan.device_min > 100000);
    /* the runtime is still usable: the estimate did not commit it */
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    zt_runtime_destroy(rt);
}

/* fp32 parameters whose home and optimizer state are both in host memory are their own
 * master: the same memory, so bf16 parameters (a 2-byte home beside the fp32 master) take
 * exactly one 2-byte home per sharded layer more host memory than fp32 ones, not 2 bytes per
 * parameter less. */
static uint64_t host_peak(const char *cfg, uint64_t *bf16_homes)
{
    minimal_model m;
    zt_runtime *rt = registered(cfg, &m);
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    for (int s = 0; s < 2; s++) {
        dry_micro_step(rt, &m);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    *bf16_homes = 0;
    for (int i = 0; i < rt->reg.n_layers; i++) {
        const zt_layer *L = &rt->reg.layers[i];
        int shared = L->master.ptr == L->param_home.ptr;
        assert_int_equal(shared, rt->reg.dtype == ZT_F32 && !L->persistent);
        if (!L->persistent)
            *bf16_homes += zt_host_tier_footprint((uint64_t)L->shard_numel * 2);
    }
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    zt_runtime_destroy(rt);
    return st.host_bytes_peak;
}

/* The estimate for `world` ranks applies the batch rules commit applies for that many ranks
 * (DeepSpeed's: tests/config/test_batch_rules.c): an accumulation derived from
 * train_batch_size replays as many micro-steps as one given outright, and a triple that is
 * inconsistent on `world` ranks is refused naming its numbers, as commit would refuse it. */
static void test_estimate_applies_the_batch_rules_for_its_world(void **state)
{
    (void)state;
    minimal_model m;
    char derived[4096], given[4096];
    snprintf(derived, sizeof derived, "%s",
             config("cpu", "cpu", "2150000",
                    "}, \"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 2, "
                    "\"fp16\": {\"enabled\": false"));
    snprintf(given, sizeof given, "%s",
             config("cpu", "cpu", "2150000",
                    "}, \"train_micro_batch_size_per_gpu\": 2, "
                    "\"gradient_accumulation_steps\": 4, \"fp16\": {\"enabled\": false"));
    zt_estimate a, b;
    zt_runtime *rt = registered(derived, &m);
    if (zt_rt_estimate(rt, 2, 8u << 20, NULL, 0, 3, &a) != ZT_OK)
        fail_msg("derived: %s", zt_last_error(rt));
    zt_runtime_destroy(rt);
    rt = registered(given, &m);
    if (zt_rt_estimate(rt, 2, 8u << 20, NULL, 0, 3, &b) != ZT_OK)
        fail_msg("given: %s", zt_last_error(rt));
    zt_runtime_destroy(rt);
    assert_int_equal(a.device_peak, b.device_peak);
    assert_int_equal(a.evictions, b.evictions);

    rt = registered(derived, &m); /* 16 = 2 x accumulation x 3 has no whole solution */
    assert_int_equal(zt_rt_estimate(rt, 3, 8u << 20, NULL, 0, 3, &a), ZT_ERR_CONFIG);
    const char *msg = zt_last_error(rt);
    assert_non_null(strstr(msg, "16"));
    assert_non_null(strstr(msg, "2"));
    zt_runtime_destroy(rt);
}

static void test_fp32_parameters_in_host_memory_are_the_master(void **state)
{
    (void)state;
    uint64_t homes, unused;
    uint64_t fp32 = host_peak(config("cpu", "cpu", "64M", ""), &unused);
    uint64_t bf16 =
        host_peak(config("cpu", "cpu", "64M", "}, \"bf16\": {\"enabled\": true"), &homes);
    printf("host bytes: fp32 parameters %llu, bf16 %llu (2-byte homes %llu)\n",
           (unsigned long long)fp32, (unsigned long long)bf16, (unsigned long long)homes);
    assert_true(homes > 0);
    assert_int_equal(bf16 - fp32, homes);
}

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("estimate");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_estimate_matches_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_estimate_follows_the_prefetch_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_estimate_refuses_a_budget_below_the_minimum, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_estimate_applies_the_batch_rules_for_its_world, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fp32_parameters_in_host_memory_are_the_master, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

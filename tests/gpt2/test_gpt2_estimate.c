/* SPDX-License-Identifier: MIT */
/* The estimate of a GPT-2 run (`ztier estimate`'s model: the example's registration and
 * call order, replayed through the prefetch scheduler) against the run: three training steps
 * of the tiny GPT-2 under several placements and device budgets; host, pinned and NVMe bytes
 * equal, the device peak within 5%. */
#include "dataloader.h"
#include "gpt2_ztier.h"
#include "rt_fixture.h"
#include "runtime/estimate.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

enum { B = 4, T = 16 };

typedef struct tiny_gpt2 {
    gpt2_ztier *g;
    const gpt2_config *c;
} tiny_gpt2;

static zt_status register_tiny(zt_runtime *rt, void *model)
{
    tiny_gpt2 *t = model;
    return gpt2_ztier_register(t->g, rt, t->c, 9);
}

static zt_runtime *registered(const char *cfg, gpt2_ztier *g, gpt2_config *c)
{
    assert_int_equal(gpt2_config_named("tiny", 256, c), 0);
    zt_runtime *rt = rt_fixture_create(NULL, cfg);
    rt_fixture_register(rt, register_tiny, &(tiny_gpt2){g, c});
    return rt;
}

static void estimate(const char *cfg, zt_estimate *e)
{
    gpt2_ztier g;
    gpt2_config c;
    zt_runtime *rt = registered(cfg, &g, &c);
    gpt2_call calls[256];
    zt_est_event ev[256];
    int n = gpt2_micro_step_calls(&c, calls, 256);
    assert_true(n <= 256);
    for (int i = 0; i < n; i++)
        ev[i] = (zt_est_event){calls[i].layer, calls[i].backward ? ZT_BACKWARD : ZT_FORWARD,
                               calls[i].release};
    if (zt_rt_estimate(rt, 1, (uint64_t)rt->cfg.hbm_capacity, ev, n, 3, e) != ZT_OK)
        fail_msg("%s", zt_last_error(rt));
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
}

static void check(const char *what, const char *cfg)
{
    zt_estimate e;
    estimate(cfg, &e);
    gpt2_ztier g;
    gpt2_config c;
    zt_runtime *rt = registered(cfg, &g, &c);
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    gpt2_model *m = gpt2_model_create(&c, B, T);
    assert_non_null(m);
    gpt2_source src = gpt2_ztier_source(&g);
    int tok[B * T], tgt[B * T];
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < B * T; i++)
            tok[i] = (i * 7 + s) % 256, tgt[i] = (i * 11 + s) % 256;
        float loss;
        assert_int_equal(gpt2_forward(m, &src, tok, tgt, &loss), 0);
        assert_int_equal(gpt2_backward(m, &src, NULL), 0);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    double dev = (double)e.device_peak / (double)st.device_bytes_peak;
    printf("%-40s device %8llu est %8llu (%.3f), host %8llu est %8llu, nvme %8llu est %8llu\n",
           what, (unsigned long long)st.device_bytes_peak, (unsigned long long)e.device_peak, dev,
           (unsigned long long)st.host_bytes_peak, (unsigned long long)e.plan.host_bytes,
           (unsigned long long)st.nvme_bytes_peak,
           (unsigned long long)(e.plan.nvme_param_bytes + e.plan.nvme_optim_bytes));
    assert_true(dev >= 0.95 && dev <= 1.05);
    assert_int_equal(st.host_bytes_peak, e.plan.host_bytes);
    assert_int_equal(st.nvme_bytes_peak, e.plan.nvme_param_bytes + e.plan.nvme_optim_bytes);
    assert_int_equal(st.pinned_bytes, e.plan.pinned_bytes);
    gpt2_model_destroy(m);
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
}

static const char *config(const char *pdev, const char *odev, const char *hbm, const char *more)
{
    static char buf[4096];
    snprintf(
        buf, sizeof buf,
        "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
        "\"$SCRATCH\"}, \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"$SCRATCH\"}, "
        "\"stage3_param_persistence_threshold\": 0}, \"aio\": {\"block_size\": 4096}, "
        "\"ztier\": {\"hbm_capacity\": \"%s\"}%s}",
        pdev, odev, hbm, more);
    return buf;
}

static void test_gpt2_estimate_matches_runs(void **state)
{
    (void)state;
    check("tiny: params cpu, optimizer cpu", config("cpu", "cpu", "16M", ""));
    check("tiny: params nvme, optimizer nvme", config("nvme", "nvme", "16M", ""));
    check("tiny: params on device, optimizer cpu", config("none", "cpu", "16M", ""));
    check("tiny: bf16 params cpu", config("cpu", "cpu", "16M", ", \"bf16\": {\"enabled\": true}"));
    /* the tied embedding (held through backward) plus the largest block: evictions */
    check("tiny: params cpu, tight budget", config("cpu", "cpu", "180000", ""));
    /* the smallest budget this call order runs with is what the estimate says */
    zt_estimate e;
    estimate(config("cpu", "cpu", "16M", ""), &e);
    char hbm[32];
    snprintf(hbm, sizeof hbm, "%llu", (unsigned long long)e.device_min_order);
    check("tiny: params cpu, the order's minimum", config("cpu", "cpu", hbm, ""));
    gpt2_ztier g;
    gpt2_config c;
    snprintf(hbm, sizeof hbm, "%llu", (unsigned long long)e.device_min_order - 64);
    zt_runtime *rt = registered(config("cpu", "cpu", hbm, ""), &g, &c);
    /* one layer at a time would fit, but the registration ties wte to the head, held through
     * the backward pass: commit refuses, naming the order's minimum */
    assert_true(e.device_min_order - 64 >= e.plan.device_min);
    assert_int_equal(zt_runtime_commit(rt), ZT_ERR_DEVICE_NOMEM);
    char want[64];
    snprintf(want, sizeof want, "below the %llu bytes", (unsigned long long)e.device_min_order);
    assert_non_null(strstr(zt_last_error(rt), want));
    assert_non_null(strstr(zt_last_error(rt), "'embed' (backward) held"));
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
}

/* The call order commit replays for the registration (zt_layer_tie of wte to the head) is
 * the one gpt2_forward and gpt2_backward make (gpt2_micro_step_calls, checked against them in
 * test_gpt2_grad). */
static void test_gpt2_registered_order(void **state)
{
    (void)state;
    gpt2_ztier g;
    gpt2_config c;
    zt_runtime *rt = registered(config("cpu", "cpu", "16M", ""), &g, &c);
    gpt2_call calls[256];
    int n = gpt2_micro_step_calls(&c, calls, 256), got;
    zt_est_event *ev = zt_rt_registered_order(rt, &got);
    assert_non_null(ev);
    assert_int_equal(got, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(ev[i].layer, g.layer_ids[calls[i].layer]);
        assert_int_equal(ev[i].pass, calls[i].backward ? ZT_BACKWARD : ZT_FORWARD);
        assert_int_equal(ev[i].release, calls[i].release);
    }
    free(ev);
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
}

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("gpt2-estimate");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

/* "d<L>c<C>" shapes: heads of 64, context 1024, the parameter count of GPT-2's formula
 * (embeddings, L blocks of 12C^2 + 13C, the final layernorm); malformed names refused. */
static void test_custom_shapes(void **state)
{
    (void)state;
    gpt2_config c;
    assert_int_equal(gpt2_config_named("d40c3072", 0, &c), 0);
    assert_int_equal(c.layers, 40);
    assert_int_equal(c.channels, 3072);
    assert_int_equal(c.heads, 48);
    assert_int_equal(c.max_seq, 1024);
    double C = 3072, want = 50304.0 * C + 1024 * C + 40 * (12 * C * C + 13 * C) + 2 * C;
    assert_true((double)gpt2_num_params(&c) == want);
    gpt2_config shaped, named;
    assert_int_equal(gpt2_config_named("d12c768", 0, &shaped), 0); /* d12's shape */
    assert_int_equal(gpt2_config_named("d12", 0, &named), 0);
    assert_int_equal(gpt2_num_params(&shaped), gpt2_num_params(&named));
    const char *bad[] = {"d0c64", "d4c100", "dxc64", "d4c64x", "d4", "c64", "d4c0", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (gpt2_config_named(bad[i], 0, &c) == 0)
            fail_msg("'%s' was taken for a shape", bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gpt2_estimate_matches_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpt2_registered_order, setup, teardown),
        cmocka_unit_test(test_custom_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

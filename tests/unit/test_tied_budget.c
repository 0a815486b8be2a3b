/* SPDX-License-Identifier: MIT */
/* Commit's device budget check with a tied layer (zt_layer_tie), on a model shaped like
 * llm.c's GPT-2: an embedding whose weight the head after the last layer reuses, blocks of
 * uneven sizes, a final layernorm. The trainer holds the embedding through the backward pass,
 * so the step needs the embedding and the largest block in their backward passes at once:
 * commit refuses the one-layer minimum with that sum named, commits at exactly the sum, and
 * the step then runs and peaks at it. Without the declaration commit keeps the one-layer
 * minimum (and the held order then fails at a fetch, which is what the declaration is for). */
#include "rt_fixture.h"
#include "runtime/estimate.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

enum { EMBED, H0, H1, H2, LNF, LAYERS };

/* Elements per layer (multiples of ZT_PARAM_ALIGN_ELEMS: no padding). */
#define EMBED_NUMEL (256 * 64 + 64 * 64) /* wte [V 256, C 64] and wpe [T 64, C 64] */
#define LARGEST_BLOCK_NUMEL (64 * 512)   /* h1 */
/* fp32 parameters and gradients in device memory during a backward pass, nothing resident
 * (parameters offloaded, no persistent layer) */
#define ONE_LAYER_MIN (2ull * 4 * LARGEST_BLOCK_NUMEL)            /* 262144 */
#define TIED_MIN (2ull * 4 * (EMBED_NUMEL + LARGEST_BLOCK_NUMEL)) /* 425984 */

typedef struct gpt_like {
    int tie;
    int layer[LAYERS];
} gpt_like;

static zt_status register_gpt_like(zt_runtime *rt, void *model)
{
    gpt_like *g = model;
    static const char *const names[LAYERS] = {"embed", "h0", "h1", "h2", "ln_f"};
    static const int64_t shapes[][2][2] = {
        {{256, 64}, {64, 64}}, {{64, 256}, {0}}, {{64, 512}, {0}}, {{64, 384}, {0}}, {{64}, {64}}};
    static const int dims[LAYERS] = {2, 2, 2, 2, 1};
    zt_status st = ZT_OK;
    for (int l = 0; st == ZT_OK && l < LAYERS; l++) {
        st = zt_layer_add(rt, names[l], &g->layer[l]);
        for (int k = 0; st == ZT_OK && k < 2 && shapes[l][k][0]; k++) {
            char name[32];
            int p;
            snprintf(name, sizeof name, "%s.w%d", names[l], k);
            st = zt_param_add(rt, g->layer[l], name, shapes[l][k], dims[l], NULL, &p);
        }
    }
    if (st == ZT_OK && g->tie) /* the head after ln_f reuses the embedding */
        st = zt_layer_tie(rt, g->layer[EMBED], g->layer[LNF]);
    return st;
}

static const char *config(uint64_t hbm)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}, "
             "\"offload_optimizer\": {\"device\": \"cpu\"}, "
             "\"stage3_param_persistence_threshold\": 0}, "
             "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}, "
             "\"ztier\": {\"hbm_capacity\": %llu}}",
             (unsigned long long)hbm);
    return buf;
}

static zt_status try_commit(uint64_t hbm, gpt_like *g, zt_runtime **rt)
{
    return rt_fixture_try(NULL, config(hbm), register_gpt_like, g, rt);
}

/* The number after `after` in the message. */
static unsigned long long number_after(const char *msg, const char *after)
{
    const char *at = strstr(msg, after);
    if (!at)
        fail_msg("'%s' not in: %s", after, msg);
    return strtoull(at + strlen(after), NULL, 10);
}

/* One micro-step in llm.c's order: the embedding, the blocks, ln_f, the embedding again as
 * the head; backward: the embedding fetched first and held until the end. Each fetch writes
 * 1 into every gradient element of its first parameter. */
static zt_status micro_step(zt_runtime *rt, const gpt_like *g)
{
    zt_layer_view v;
    zt_status st = ZT_OK;
    for (int l = 0; st == ZT_OK && l <= LAYERS; l++) {
        int id = g->layer[l < LAYERS ? l : EMBED];
        if ((st = zt_fetch(rt, id, ZT_FORWARD, &v)) == ZT_OK)
            st = zt_release(rt, id, ZT_FORWARD);
    }
    zt_layer_view embed;
    if (st == ZT_OK)
        st = zt_fetch(rt, g->layer[EMBED], ZT_BACKWARD, &embed);
    for (int l = LNF; st == ZT_OK && l > EMBED; l--) {
        if ((st = zt_fetch(rt, g->layer[l], ZT_BACKWARD, &v)) != ZT_OK)
            break;
        float *grad = v.params[0].grad;
        for (int64_t i = 0; i < v.params[0].numel; i++)
            grad[i] = 1.0f;
        st = zt_release(rt, g->layer[l], ZT_BACKWARD);
    }
    if (st == ZT_OK) {
        float *grad = embed.params[0].grad;
        for (int64_t i = 0; i < embed.params[0].numel; i++)
            grad[i] = 1.0f;
        st = zt_release(rt, g->layer[EMBED], ZT_BACKWARD);
    }
    return st;
}

/* The smallest budget `ztier estimate`'s replay finds for the registered (tied) order. */
static uint64_t estimated_minimum(int tie)
{
    gpt_like g = {.tie = tie};
    zt_runtime *rt = rt_fixture_create(NULL, config(64ull << 20));
    rt_fixture_register(rt, register_gpt_like, &g);
    zt_estimate e;
    assert_int_equal(zt_rt_estimate(rt, 1, 64ull << 20, NULL, 0, 2, &e), ZT_OK);
    assert_int_equal(e.plan.device_min, ONE_LAYER_MIN);
    zt_runtime_destroy(rt);
    return e.device_min_order;
}

static void test_commit_refuses_the_one_layer_minimum_of_a_tied_model(void **state)
{
    (void)state;
    assert_int_equal(estimated_minimum(1), TIED_MIN);
    uint64_t budgets[] = {ONE_LAYER_MIN, TIED_MIN - 1};
    for (int i = 0; i < 2; i++) {
        gpt_like g = {.tie = 1};
        zt_runtime *rt;
        assert_int_equal(try_commit(budgets[i], &g, &rt), ZT_ERR_DEVICE_NOMEM);
        const char *msg = zt_last_error(rt);
        printf("budget %llu: %s\n", (unsigned long long)budgets[i], msg);
        assert_int_equal(number_after(msg, "device memory budget of "), budgets[i]);
        assert_int_equal(number_after(msg, "is below the "), TIED_MIN);
        assert_int_equal(number_after(msg, "raise the budget to "), TIED_MIN);
        assert_int_equal(number_after(msg, "one layer alone would need "), ONE_LAYER_MIN);
        assert_non_null(
            strstr(msg, "the backward fetch of layer 'h1' with 'embed' (backward) held"));
        assert_non_null(strstr(msg, "'embed' from the backward pass of 'ln_f'"));
        assert_non_null(strstr(msg, "ztier.hbm_capacity"));
        assert_non_null(strstr(msg, "offload_param"));
        zt_runtime_destroy(rt);
    }
}

static void test_commit_at_the_tied_minimum_runs_the_step(void **state)
{
    (void)state;
    gpt_like g = {.tie = 1};
    zt_runtime *rt;
    assert_int_equal(try_commit(TIED_MIN, &g, &rt), ZT_OK);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(micro_step(rt, &g), ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    /* h1's backward pass beside the held embedding fills the budget exactly */
    assert_int_equal(st.device_bytes_peak, TIED_MIN);
    int64_t steps;
    assert_int_equal(zt_step_count(rt, &steps), ZT_OK);
    assert_int_equal(steps, 3);
    zt_runtime_destroy(rt);
}

static void test_untied_commit_keeps_the_one_layer_minimum(void **state)
{
    (void)state;
    assert_int_equal(estimated_minimum(0), ONE_LAYER_MIN);
    gpt_like g = {.tie = 0};
    zt_runtime *rt;
    assert_int_equal(try_commit(ONE_LAYER_MIN - 1, &g, &rt), ZT_ERR_DEVICE_NOMEM);
    assert_int_equal(number_after(zt_last_error(rt), "is below the "), ONE_LAYER_MIN);
    assert_non_null(strstr(zt_last_error(rt), "while layer 'h1' runs its backward pass"));
    zt_runtime_destroy(rt);
    assert_int_equal(try_commit(ONE_LAYER_MIN, &g, &rt), ZT_OK);
    /* undeclared, the held embedding does not fit beside h1: the failure the tie prevents */
    assert_int_equal(micro_step(rt, &g), ZT_ERR_DEVICE_NOMEM);
    assert_non_null(strstr(zt_last_error(rt), "layer 'h2'")); /* the first block backward */
    zt_runtime_destroy(rt);
}

static void test_tie_arguments(void **state)
{
    (void)state;
    gpt_like g = {.tie = 0};
    zt_runtime *rt = rt_fixture_create(NULL, config(TIED_MIN));
    rt_fixture_register(rt, register_gpt_like, &g);
    assert_int_equal(zt_layer_tie(rt, g.layer[H1], g.layer[H0]), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "'h1'"));
    assert_int_equal(zt_layer_tie(rt, g.layer[H1], g.layer[H1]), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_layer_tie(rt, g.layer[EMBED], LAYERS), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_layer_tie(rt, -1, g.layer[LNF]), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_layer_tie(NULL, 0, 1), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_layer_tie(rt, g.layer[EMBED], g.layer[LNF]), ZT_OK);
    assert_int_equal(zt_layer_tie(rt, g.layer[EMBED], g.layer[LNF]), ZT_OK); /* the same again */
    assert_int_equal(zt_layer_tie(rt, g.layer[EMBED], g.layer[H2]), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "already tied after layer 'ln_f'"));
    /* the registered order: forward with the head's second use after ln_f, backward with
     * the embedding fetched before ln_f and released last */
    int n;
    zt_est_event *ev = zt_rt_registered_order(rt, &n);
    assert_non_null(ev);
    static const int want[][3] = {
        {EMBED, ZT_FORWARD, 0},  {EMBED, ZT_FORWARD, 1}, {H0, ZT_FORWARD, 0},
        {H0, ZT_FORWARD, 1},     {H1, ZT_FORWARD, 0},    {H1, ZT_FORWARD, 1},
        {H2, ZT_FORWARD, 0},     {H2, ZT_FORWARD, 1},    {LNF, ZT_FORWARD, 0},
        {LNF, ZT_FORWARD, 1},    {EMBED, ZT_FORWARD, 0}, {EMBED, ZT_FORWARD, 1},
        {EMBED, ZT_BACKWARD, 0}, {LNF, ZT_BACKWARD, 0},  {LNF, ZT_BACKWARD, 1},
        {H2, ZT_BACKWARD, 0},    {H2, ZT_BACKWARD, 1},   {H1, ZT_BACKWARD, 0},
        {H1, ZT_BACKWARD, 1},    {H0, ZT_BACKWARD, 0},   {H0, ZT_BACKWARD, 1},
        {EMBED, ZT_BACKWARD, 1}};
    assert_int_equal(n, sizeof want / sizeof want[0]);
    for (int i = 0; i < n; i++) {
        assert_int_equal(ev[i].layer, g.layer[want[i][0]]);
        assert_int_equal(ev[i].pass, want[i][1]);
        assert_int_equal(ev[i].release, want[i][2]);
    }
    free(ev);
    rt_fixture_commit(rt);
    assert_int_equal(zt_layer_tie(rt, g.layer[H0], g.layer[LNF]), ZT_ERR_USAGE);
    zt_runtime_destroy(rt);
}

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("tied-budget");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_refuses_the_one_layer_minimum_of_a_tied_model,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_at_the_tied_minimum_runs_the_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_untied_commit_keeps_the_one_layer_minimum, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tie_arguments, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* Low-precision training through the runtime: bf16/fp16 working parameters and gradients
 * with fp32 master weights, checked against a reference written here; fp16 dynamic loss
 * scaling skips a step with an inf gradient without changing anything but the scale, and
 * global-norm clipping, all on a quadratic model whose gradient is exact:
 *   loss = 0.5 * ||w - t||^2,  dL/dw = w - t. */
#include "rt_fixture.h"
#include "ztier.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define N 1000
#define STEPS 15

static float target(int64_t i) { return 0.001f * (float)(i % 37) - 0.01f; }

/* Independent reference conversions (round to nearest even). */
static float round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static uint16_t to_bf16(float x)
{
    uint32_t u;
    x = round_bf16(x);
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* The quadratic model: one layer "q" with one parameter "q.w" of N elements. */
typedef struct quadratic {
    int layer, param;
} quadratic;

static zt_status register_quadratic(zt_runtime *rt, void *model)
{
    quadratic *q = model;
    int64_t shape[1] = {N};
    zt_init init = {ZT_INIT_UNIFORM, -0.05f, 0.05f, 9, NULL, NULL};
    zt_status st = zt_layer_add(rt, "q", &q->layer);
    return st == ZT_OK ? zt_param_add(rt, q->layer, "q.w", shape, 1, &init, &q->param) : st;
}

static zt_runtime *make(const char *precision, float clip, int *layer, int *param)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{%s \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"betas\": "
             "[0.9, 0.999], \"eps\": 1e-8, \"weight_decay\": 0.0}}, \"gradient_clipping\": %g,"
             " \"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}},"
             " \"ztier\": {\"hbm_capacity\": \"16M\"}}",
             precision, (double)clip);
    quadratic q;
    zt_runtime *rt = rt_fixture_make(NULL, cfg, register_quadratic, &q);
    *layer = q.layer;
    *param = q.param;
    return rt;
}

/* Reference AdamW step on fp32 master from gradient g (already unscaled). */
static void ref_adamw(float *w, float *m, float *v, const float *g, int step, float clip)
{
    double ss = 0;
    for (int i = 0; i < N; i++)
        ss += (double)g[i] * g[i];
    float norm = (float)sqrt(ss), coef = clip > 0 && norm > clip ? clip / (norm + 1e-6f) : 1.0f;
    float step_size = (float)((double)0.01f / (1.0 - pow(0.9f, step)));
    float inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(0.999f, step)));
    for (int i = 0; i < N; i++) {
        float gi = g[i] * coef;
        m[i] = 0.9f * m[i] + (1.0f - 0.9f) * gi; /* as written in float, like the config */
        v[i] = 0.999f * v[i] + (1.0f - 0.999f) * (gi * gi);
        w[i] -= step_size * (m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + 1e-8f));
    }
}

static void test_bf16_params_and_grads(void **state)
{
    (void)state;
    int layer, param;
    zt_runtime *rt = make("\"bf16\": {\"enabled\": true},", 0.05f, &layer, &param);
    float w[N], m[N] = {0}, v[N] = {0}, g[N];
    assert_int_equal(zt_param_read(rt, param, w, N), ZT_OK);
    for (int s = 1; s <= STEPS; s++) {
        zt_layer_view view;
        assert_int_equal(zt_fetch(rt, layer, ZT_BACKWARD, &view), ZT_OK);
        assert_int_equal(view.params[0].dtype, ZT_BF16);
        const uint16_t *p = view.params[0].data;
        uint16_t *gp = view.params[0].grad;
        for (int i = 0; i < N; i++) {
            /* the working copy is the master rounded to bf16: within half a bf16 step */
            if (!(fabsf(from_bf16(p[i]) - w[i]) <= 0.00391f * fabsf(w[i]) + 1e-20f))
                fail_msg("step %d elem %d: bf16 %g vs master %g", s, i, (double)from_bf16(p[i]),
                         (double)w[i]);
            float gi = from_bf16(p[i]) - target(i);
            gp[i] = to_bf16(gi);
            g[i] = from_bf16(gp[i]);
        }
        assert_int_equal(zt_release(rt, layer, ZT_BACKWARD), ZT_OK);
        zt_step_info info = ZT_STEP_INFO_INIT;
        assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
        ref_adamw(w, m, v, g, s, 0.05f);
    }
    float got[N];
    assert_int_equal(zt_param_read(rt, param, got, N), ZT_OK);
    for (int i = 0; i < N; i++)
        assert_float_equal(got[i], w[i], 1e-6f * (1.0f + fabsf(w[i])));
    zt_runtime_destroy(rt);
}

static void test_fp16_overflow_skips_step(void **state)
{
    (void)state;
    int layer, param;
    zt_runtime *rt = make("\"fp16\": {\"enabled\": true, \"initial_scale_power\": 8, "
                          "\"hysteresis\": 1},",
                          0.0f, &layer, &param);
    float before[N], after[N];
    assert_int_equal(zt_param_read(rt, param, before, N), ZT_OK);
    zt_layer_view view;
    assert_int_equal(zt_fetch(rt, layer, ZT_BACKWARD, &view), ZT_OK);
    assert_int_equal(view.params[0].dtype, ZT_F16);
    uint16_t *gp = view.params[0].grad;
    gp[17] = 0x7c00; /* +inf in fp16 */
    assert_int_equal(zt_release(rt, layer, ZT_BACKWARD), ZT_OK);
    zt_step_info info = ZT_STEP_INFO_INIT;
    assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
    assert_int_equal(info.skipped, 1);
    assert_int_equal(info.step, 0);
    assert_float_equal(info.loss_scale, 128.0f, 0.0f); /* 2^8 halved */
    assert_int_equal(zt_param_read(rt, param, after, N), ZT_OK);
    assert_memory_equal(before, after, sizeof before); /* nothing lost or changed */
    /* the next clean step goes through, with gradients unscaled by the new loss scale */
    assert_int_equal(zt_fetch(rt, layer, ZT_BACKWARD, &view), ZT_OK);
    assert_int_equal(zt_release(rt, layer, ZT_BACKWARD), ZT_OK);
    assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
    assert_int_equal(info.skipped, 0);
    assert_int_equal(info.step, 1);
    zt_runtime_destroy(rt);
}

static void test_clipping_reports_norm_and_coefficient(void **state)
{
    (void)state;
    int layer, param;
    zt_runtime *rt = make("", 0.5f, &layer, &param);
    zt_layer_view view;
    assert_int_equal(zt_fetch(rt, layer, ZT_BACKWARD, &view), ZT_OK);
    float *gp = view.params[0].grad;
    for (int i = 0; i < N; i++)
        gp[i] = 0.1f; /* norm = 0.1 * sqrt(1000) */
    assert_int_equal(zt_release(rt, layer, ZT_BACKWARD), ZT_OK);
    zt_step_info info = ZT_STEP_INFO_INIT;
    assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
    float norm = 0.1f * sqrtf((float)N);
    assert_float_equal(info.grad_norm, norm, 1e-4f);
    assert_float_equal(info.clip_coef, 0.5f / (norm + 1e-6f), 1e-6f);
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_params_and_grads),
        cmocka_unit_test(test_fp16_overflow_skips_step),
        cmocka_unit_test(test_clipping_reports_norm_and_coefficient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

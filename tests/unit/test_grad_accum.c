/* SPDX-License-Identifier: MIT */
/* bf16 gradient accumulators (ztier.grad_accum_dtype = "bf16"): training with two micro-steps
 * per step stays close to fp32 accumulation (the sums are rounded to bf16 once per
 * micro-step), with the optimizer state in host memory and on NVMe (the pipelined step reads
 * the bf16 sums); the accumulators take half the host memory; the device optimizer refuses it
 * with the fix. */
#include "mlp_weights.h"
#include "rt_fixture.h"
#include "train.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static const mlp_dims dims = {64, 256, 16, 32};

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("grad-accum");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

static const char *config(const char *optim, const char *accum)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
             " \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"$SCRATCH\"},"
             " \"stage3_param_persistence_threshold\": 0}, \"gradient_accumulation_steps\": 2,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}},"
             " \"aio\": {\"block_size\": 4096},"
             " \"ztier\": {\"hbm_capacity\": \"16M\", \"grad_accum_dtype\": \"%s\"}}",
             optim, accum);
    return buf;
}

static void train(const char *cfg, mlp_weights *out, float *last_loss, uint64_t *host_peak)
{
    minimal_model m;
    zt_runtime *rt = rt_fixture_mlp(NULL, cfg, &dims, 11, &m);
    int rows = dims.batch / 2;
    for (int s = 0; s < 8; s++) {
        float a, b;
        assert_int_equal(minimal_micro_step(rt, &m, s, 0, rows, &a), ZT_OK);
        assert_int_equal(minimal_micro_step(rt, &m, s, rows, rows, &b), ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
        *last_loss = (a + b) / 2;
    }
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    *host_peak = st.host_bytes_peak;
    assert_int_equal(mlp_weights_read(rt, &m, out), ZT_OK);
    zt_runtime_destroy(rt);
}

/* Relative L2 distance of all weights (single elements near zero may move by a whole Adam
 * step when their tiny gradient's rounding changes sign). */
static double rel_l2(const mlp_weights *a, const mlp_weights *b)
{
    double num = 0, den = 0;
    for (int k = 0; k < 2 * MLP_LAYERS; k++)
        for (int64_t i = 0; i < a->n[k]; i++) {
            double d = (double)a->w[k][i] - b->w[k][i];
            num += d * d;
            den += (double)b->w[k][i] * b->w[k][i];
        }
    return sqrt(num / den);
}

static void check(const char *optim)
{
    mlp_weights f32, b16;
    float loss32, loss16;
    uint64_t host32, host16;
    train(config(optim, "fp32"), &f32, &loss32, &host32);
    train(config(optim, "bf16"), &b16, &loss16, &host16);
    double d = rel_l2(&b16, &f32);
    print_message("optimizer %s: bf16 sums vs fp32: weights %.3g relative (L2), loss %.5f "
                  "vs %.5f, host peak %llu vs %llu bytes\n",
                  optim, d, (double)loss16, (double)loss32, (unsigned long long)host16,
                  (unsigned long long)host32);
    assert_true(d > 0.0);  /* the sums were rounded */
    assert_true(d < 2e-2); /* ... and stay close */
    assert_true(loss16 < 1.05f * loss32 + 1e-4f);
    /* the accumulators (86544 elements over three layers, padded) in half the bytes */
    assert_true(host32 >= host16 + 86544 * 2 - 3 * 4096);
    mlp_weights_free(&f32), mlp_weights_free(&b16);
}

static void test_host_optimizer(void **state)
{
    (void)state;
    check("cpu");
}

static void test_nvme_optimizer(void **state)
{
    (void)state;
    check("nvme");
}

static void test_device_optimizer_refuses(void **state)
{
    (void)state;
    zt_runtime *rt = NULL;
    /* the whole text is checked at create: the error comes there */
    assert_int_equal(zt_runtime_create(NULL,
                                       "{\"zero_optimization\": {\"offload_optimizer\": "
                                       "{\"device\": \"none\"}}, \"ztier\": {\"device_optimizer\": "
                                       "\"on\", \"grad_accum_dtype\": \"bf16\"}}",
                                       &rt),
                     ZT_ERR_CONFIG);
    assert_non_null(strstr(zt_last_error(rt), "ztier.grad_accum_dtype"));
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_optimizer),
        cmocka_unit_test(test_nvme_optimizer),
        cmocka_unit_test(test_device_optimizer_refuses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

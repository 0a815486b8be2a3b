/* SPDX-License-Identifier: MIT */
/* zero_optimization.offload_optimizer.ratio (DeepSpeed's Twin-Flow): with the optimizer state
 * in host memory, the first layers' Adam runs on the device and the rest on the CPU. Against
 * the all-CPU optimizer (no ratio) over several steps with gradient accumulation:
 *  - ratios 0, 0.3, 0.5, 1 and "auto" (measured, and given rates that make it split through
 *    $ZT_TEST_ADAM_RATES) train the same weights (bit for bit without clipping:
 *    both kernels compute core/adam_elem.h; to float rounding with clipping, whose norm adds
 *    double sums in another order), with parameters in device and host memory, with the
 *    overlapped step, and in bf16 and fp16;
 *  - the device's share lives in device memory (zt_stats, zt_optimizer_info.offload_ratio),
 *    the layers it takes are the first ones, and `ztier estimate` counts them as a run does;
 *  - a checkpoint saved from a split resumes bit for bit, and loads into the all-CPU
 *    optimizer (the state of both places is saved and restored);
 *  - bad ratios are refused with ZT_ERR_CONFIG naming the key.
 * ZT_TEST_SPLIT_BACKEND=cuda runs it all with the cuda backend (the stand-in in CI). */
#include "core/convert.h"
#include "core/log.h"
#include "mlp_weights.h"
#include "runtime/estimate.h"
#include "runtime/runtime.h" /* the layers' placement */
#include "rt_fixture.h"
#include "train.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
#define STEPS 4

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("optimizer-split");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

static const char *backend(void)
{
    const char *b = getenv("ZT_TEST_SPLIT_BACKEND");
    return b && *b ? b : "host";
}

/* ratio: a JSON value, or NULL for none (the all-CPU reference); extra: ", keys" at the top
 * level, or ";, keys" in the ztier object. */
static const char *config(const char *param, const char *ratio, float clip, const char *extra)
{
    static char buf[2048];
    char r[64] = "";
    if (ratio)
        snprintf(r, sizeof r, ", \"ratio\": %s", ratio);
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\"},"
             " \"offload_optimizer\": {\"device\": \"cpu\"%s},"
             " \"stage3_param_persistence_threshold\": 0},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, "
             "\"weight_decay\": 0.1}}, \"gradient_accumulation_steps\": 2,"
             " \"gradient_clipping\": %g%s,"
             " \"ztier\": {\"hbm_capacity\": \"16M\", \"device_backend\": \"%s\","
             " \"comm_backend\": \"single\"%s}}",
             param, r, (double)clip, extra && extra[0] == ',' ? extra : "", backend(),
             extra && extra[0] == ';' ? extra + 1 : "");
    return buf;
}

static zt_runtime *make(const char *cfg, minimal_model *m)
{
    return rt_fixture_mlp(NULL, cfg, &dims, 5, m);
}

/* A micro-step of a quadratic loss, sum (k + 1) (w - t)^2 / 2 toward t = sin(...), for
 * trainers the example cannot serve (it computes in fp32 host memory only): bf16, and the
 * cuda backend's device memory. The views go through host memory with the device's copies. */
static void quadratic_micro_step(zt_runtime *rt, const minimal_model *m, int k)
{
    zt_error err = {0};
    for (int l = 0; l < MLP_LAYERS; l++) { /* a forward pass (nothing computed): timed */
        zt_layer_view v;
        assert_int_equal(zt_fetch(rt, m->layer[l], ZT_FORWARD, &v), ZT_OK);
        assert_int_equal(zt_release(rt, m->layer[l], ZT_FORWARD), ZT_OK);
    }
    for (int l = MLP_LAYERS - 1; l >= 0; l--) {
        zt_layer_view v;
        assert_int_equal(zt_fetch(rt, m->layer[l], ZT_BACKWARD, &v), ZT_OK);
        for (int j = 0; j < v.n_params; j++) {
            const zt_tensor_view *t = &v.params[j];
            size_t bytes = (size_t)t->numel * zt_dtype_size(t->dtype);
            void *p = malloc(bytes), *g = malloc(bytes);
            assert_non_null(p), assert_non_null(g);
            assert_int_equal(zt_device_copy_sync(rt->device.dev, p, t->data, bytes, ZT_COPY_D2H,
                                                 rt->device.stream, &err),
                             ZT_OK);
            for (int64_t i = 0; i < t->numel; i++) {
                float gi = (float)(k + 1) * (zt_load_f32(p, t->dtype, (size_t)i) -
                                             sinf((float)(i + 7 * j + 31 * l)));
                zt_store_f32(g, t->dtype, (size_t)i, gi * rt->train.loss_scale);
            }
            assert_int_equal(zt_device_copy_sync(rt->device.dev, t->grad, g, bytes, ZT_COPY_H2D,
                                                 rt->device.stream, &err),
                             ZT_OK);
            free(p), free(g);
        }
        assert_int_equal(zt_release(rt, m->layer[l], ZT_BACKWARD), ZT_OK);
    }
}

/* The example's MLP where it can run (fp32 on the host backend), else the quadratic. */
static void micro_step(zt_runtime *rt, const minimal_model *m, int s, int k)
{
    int rows = dims.batch / 2;
    float loss;
    if (rt->reg.dtype != ZT_F32 || strcmp(backend(), "host") != 0) /* scaled by the loss scale */
        quadratic_micro_step(rt, m, k);
    else if (minimal_micro_step(rt, m, s, k * rows, rows, &loss) != ZT_OK)
        fail_msg("step %d: %s", s, zt_last_error(rt));
}

static void train(zt_runtime *rt, const minimal_model *m, int from, int to)
{
    for (int s = from; s < to; s++) {
        for (int k = 0; k < 2; k++)
            micro_step(rt, m, s, k);
        if (zt_step(rt, NULL, NULL) != ZT_OK)
            fail_msg("zt_step %d: %s", s, zt_last_error(rt));
    }
}

typedef struct run_out {
    mlp_weights w;
    zt_stats stats;
    zt_optimizer_info info;
    int on_device[MLP_LAYERS];             /* the layers' placement */
    double device_share;                   /* of the elements, from the layers' sizes */
    double auto_ratio, cpu_rate, dev_rate; /* "auto": the choice and the rates measured */
    double forward_min;                    /* the smallest forward time recorded */
    int shard[MLP_LAYERS];                 /* the layers' elements */
    int max_device_layers;                 /* what the budget holds, for a re-split */
} run_out;

static void run_with(const zt_options *opts, const char *cfg, run_out *o)
{
    minimal_model m;
    zt_runtime *rt = rt_fixture_mlp(opts, cfg, &dims, 5, &m);
    train(rt, &m, 0, STEPS);
    mlp_weights_read_or_fail(rt, &m, &o->w);
    o->stats = (zt_stats)ZT_STATS_INIT;
    o->info = (zt_optimizer_info)ZT_OPTIMIZER_INFO_INIT;
    assert_int_equal(zt_stats_get(rt, &o->stats), ZT_OK);
    assert_int_equal(zt_optimizer_get(rt, &o->info), ZT_OK);
    double total = 0, dev = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        const zt_layer *L = &rt->reg.layers[m.layer[l]];
        o->on_device[l] = L->opt_device;
        o->shard[l] = (int)L->shard_numel;
        total += (double)L->shard_numel;
        dev += L->opt_device ? (double)L->shard_numel : 0;
    }
    o->device_share = dev / total;
    o->auto_ratio = rt->opt.auto_ratio;
    o->cpu_rate = rt->opt.cpu_rate;
    o->dev_rate = rt->opt.dev_rate;
    o->forward_min = rt->fwd.min_s;
    o->max_device_layers = rt->opt.split_max_layers;
    zt_runtime_destroy(rt);
}

static void run(const char *cfg, run_out *o) { run_with(NULL, cfg, o); }

/* The rule of "auto" with the overlapped step, from the layers' sizes: the fewest first
 * layers on the device that leave the CPU a share its Adam updates within the forward. */
static int layers_for_forward(const run_out *o, double forward_s, double cpu_rate)
{
    for (int k = 0; k < MLP_LAYERS; k++) {
        double cpu = 0;
        for (int l = k; l < MLP_LAYERS; l++)
            cpu += o->shard[l];
        if (cpu / cpu_rate <= forward_s)
            return k;
    }
    return MLP_LAYERS;
}

/* The layers a ratio puts on the device: the first ones, as many as bring their elements
 * closest to (1 - ratio) of all (fc1 816, fc2 2352, fc3 196 elements, each padded alike). */
static int expected_device_layers(double ratio)
{
    static const double n[MLP_LAYERS] = {16 * 48 + 48, 48 * 48 + 48, 48 * 4 + 4};
    double total = n[0] + n[1] + n[2], want = (1 - ratio) * total, cum = 0, best_err = want;
    int best = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        cum += n[l];
        if (fabs(cum - want) < best_err)
            best_err = fabs(cum - want), best = l + 1;
    }
    return best;
}

static void check_split(const run_out *ref, const run_out *o, const char *what, double ratio,
                        double tol)
{
    double d = mlp_weights_max_rel_diff(&o->w, &ref->w);
    print_message("%-28s CPU share %.3f (%d %d %d on the device), weights vs all-CPU %g, "
                  "device peak %llu (all-CPU %llu)\n",
                  what, (double)o->info.offload_ratio, o->on_device[0], o->on_device[1],
                  o->on_device[2], d, (unsigned long long)o->stats.device_bytes_peak,
                  (unsigned long long)ref->stats.device_bytes_peak);
    if (!(d <= tol))
        fail_msg("%s: weights differ from the all-CPU optimizer's by %g (tolerance %g)", what, d,
                 tol);
    assert_true(fabs((double)o->info.offload_ratio - (1.0 - o->device_share)) < 1e-6);
    int k = -1;
    if (ratio < 0) { /* "auto": the CPU's share of the measured rates, both positive */
        assert_true(o->cpu_rate > 0 && o->dev_rate > 0);
        assert_true(fabs(o->auto_ratio - o->cpu_rate / (o->cpu_rate + o->dev_rate)) < 1e-6);
        ratio = o->auto_ratio;
        if (o->stats.optimizer_resplits) /* overlapped: re-split by the forward time */
            k = layers_for_forward(o, o->forward_min, o->cpu_rate);
    }
    if (k < 0) /* the first layers, as close as whole ones get */
        k = expected_device_layers(ratio);
    for (int l = 0; l < MLP_LAYERS; l++)
        assert_int_equal(o->on_device[l], l < k);
    int dev_layers = o->on_device[0] + o->on_device[1] + o->on_device[2];
    assert_int_equal(o->info.on_device, dev_layers == MLP_LAYERS);
    if (dev_layers || o->stats.optimizer_resplits) /* master, m, v, the accumulator: once */
        assert_true(o->stats.device_bytes_peak >= ref->stats.device_bytes_peak + 16 * 816);
}

static void check_ratios(const char *param, float clip, const char *extra, double tol)
{
    run_out ref, o;
    run(config(param, NULL, clip, extra), &ref);
    assert_true(ref.info.offload_ratio == 1.0f);
    assert_int_equal(ref.on_device[0] + ref.on_device[1] + ref.on_device[2], 0);
    static const char *const ratios[] = {"1", "0.5", "0.3", "0"};
    for (size_t i = 0; i < sizeof ratios / sizeof *ratios; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s params, ratio %s%s", param, ratios[i],
                 clip > 0 ? ", clipped" : "");
        run(config(param, ratios[i], clip, extra), &o);
        check_split(&ref, &o, what, atof(ratios[i]), tol);
        if (!strcmp(ratios[i], "1")) /* today's all-CPU optimizer exactly */
            assert_true(mlp_weights_max_rel_diff(&o.w, &ref.w) == 0.0);
        mlp_weights_free(&o.w);
    }
    /* "auto" as measured here, and with rates that make it split (ZT_TEST_ADAM_RATES) */
    static const char *const rates[] = {NULL, "1e6,3e6", "3e6,1e6"};
    static const int split_layers[] = {-1, 2, 1};
    /* overlapped: forward times (ZT_TEST_FORWARD_S) that re-split after step 1 (all on the
     * CPU: 1 s holds its whole share) and again after step 2 (0.5 ms: fc3's 196 elements at
     * 1e6/s; fc1 and fc2 on the device) */
    int overlapped = extra && strstr(extra, "overlap_step") != NULL;
    for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s params, ratio auto (%s)", param,
                 rates[i] ? rates[i] : "measured");
        if (rates[i])
            setenv("ZT_TEST_ADAM_RATES", rates[i], 1);
        if (overlapped && rates[i])
            setenv("ZT_TEST_FORWARD_S", "1,0.0005", 1);
        run(config(param, "\"auto\"", clip, extra), &o);
        unsetenv("ZT_TEST_ADAM_RATES");
        unsetenv("ZT_TEST_FORWARD_S");
        check_split(&ref, &o, what, -1, tol);
        if (overlapped && rates[i]) { /* 2 or 1 layers (the rates) -> 0 -> 2 */
            assert_int_equal(o.stats.optimizer_resplits, 2);
            assert_true(o.stats.forward_s == 0.0005);
        }
        if (split_layers[i] >= 0)
            assert_int_equal(o.on_device[0] + o.on_device[1] + o.on_device[2],
                             overlapped ? 2 : split_layers[i]);
        mlp_weights_free(&o.w);
    }
    mlp_weights_free(&ref.w);
}

static void test_device_params(void **state)
{
    (void)state;
    check_ratios("none", 0, NULL, 0.0);
}

static void test_host_params(void **state)
{
    (void)state;
    check_ratios("cpu", 0, NULL, 0.0);
}

static void test_clipped(void **state)
{
    (void)state;
    check_ratios("none", 0.05f, NULL, 1e-5);
}

/* ztier.overlap_step "on": the CPU's layers updated when next needed. */
static void test_overlapped(void **state)
{
    (void)state;
    check_ratios("none", 0.05f, ";, \"overlap_step\": \"on\"", 1e-5);
}

/* ... with fp32 parameters in host memory, which are the CPU's layers' masters: a layer
 * moved off the device takes them as its master again. */
static void test_overlapped_host_params(void **state)
{
    (void)state;
    check_ratios("cpu", 0, ";, \"overlap_step\": \"on\"", 0.0);
}

/* bf16 parameters and gradients: both optimizers update the same fp32 master (compared
 * here, zt_param_read) and round it to bf16 alike. */
static void test_bf16(void **state)
{
    (void)state;
    check_ratios("none", 0.05f, ", \"bf16\": {\"enabled\": true}", 1e-5);
    check_ratios("cpu", 0, ", \"bf16\": {\"enabled\": true}", 0.0);
}

/* fp16 with a fixed loss scale: the gradients are scaled (rt->train.loss_scale) and both
 * optimizers unscale them alike. */
static void test_fp16(void **state)
{
    (void)state;
    check_ratios("none", 0.05f, ", \"fp16\": {\"enabled\": true, \"loss_scale\": 128}", 1e-5);
}

/* Save after 2 steps, go on to 4; a split runtime and an all-CPU one each load it and go on
 * to 4: the same weights (the split's bit for bit). */
static void test_checkpoint(void **state)
{
    (void)state;
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", rt_fixture_dir());
    minimal_model m;
    mlp_weights straight, resumed, on_cpu;
    zt_runtime *rt = make(config("none", "0.5", 0.05f, NULL), &m);
    train(rt, &m, 0, 2);
    assert_int_equal(zt_checkpoint_save(rt, ckpt), ZT_OK);
    train(rt, &m, 2, 4);
    mlp_weights_read_or_fail(rt, &m, &straight);
    zt_runtime_destroy(rt);

    rt = make(config("none", "0.5", 0.05f, NULL), &m);
    train(rt, &m, 0, 1); /* other values and accumulators first: the load replaces them */
    micro_step(rt, &m, 9, 1);
    assert_int_equal(zt_checkpoint_load(rt, ckpt), ZT_OK);
    train(rt, &m, 2, 4);
    mlp_weights_read_or_fail(rt, &m, &resumed);
    zt_runtime_destroy(rt);

    rt = make(config("none", NULL, 0.05f, NULL), &m);
    assert_int_equal(zt_checkpoint_load(rt, ckpt), ZT_OK);
    train(rt, &m, 2, 4);
    mlp_weights_read_or_fail(rt, &m, &on_cpu);
    zt_runtime_destroy(rt);
    double d = mlp_weights_max_rel_diff(&on_cpu, &straight);
    print_message("checkpoint of a split: resumed split %g, resumed all-CPU %g\n",
                  mlp_weights_max_rel_diff(&resumed, &straight), d);
    assert_true(mlp_weights_max_rel_diff(&resumed, &straight) == 0.0);
    assert_true(d < 1e-5);
    mlp_weights_free(&straight), mlp_weights_free(&resumed), mlp_weights_free(&on_cpu);
}

/* The estimate counts the device's share as the run holds it. */
static void test_estimate_counts_the_share(void **state)
{
    (void)state;
    run_out ref, o;
    run(config("none", NULL, 0, NULL), &ref);
    run(config("none", "0.5", 0, NULL), &o);
    minimal_model m;
    zt_runtime *rt = rt_fixture_create(NULL, config("none", "0.5", 0, NULL));
    rt_fixture_register_mlp(rt, &dims, 5, &m);
    zt_estimate e, e_ref;
    assert_int_equal(zt_rt_estimate(rt, 1, 16 << 20, NULL, 0, 3, &e), ZT_OK);
    zt_runtime_destroy(rt);
    rt = rt_fixture_create(NULL, config("none", NULL, 0, NULL));
    rt_fixture_register_mlp(rt, &dims, 5, &m);
    assert_int_equal(zt_rt_estimate(rt, 1, 16 << 20, NULL, 0, 3, &e_ref), ZT_OK);
    zt_runtime_destroy(rt);
    print_message("estimate: device optimizer %llu bytes in %d layers, CPU share %.3f; host "
                  "%llu (run %llu), device resident %llu (all-CPU %llu)\n",
                  (unsigned long long)e.plan.device_optim_bytes, e.plan.device_optim_layers,
                  (double)e.plan.cpu_ratio, (unsigned long long)e.plan.host_bytes,
                  (unsigned long long)o.stats.host_bytes_peak,
                  (unsigned long long)e.plan.device_resident,
                  (unsigned long long)e_ref.plan.device_resident);
    assert_int_equal(e.plan.device_optim_layers, 1); /* fc1 */
    assert_true(fabs((double)e.plan.cpu_ratio - (double)o.info.offload_ratio) < 1e-6);
    /* the run's host and device bytes move by the share as the estimate's do */
    assert_int_equal(e.plan.host_bytes, o.stats.host_bytes_peak);
    assert_int_equal(e_ref.plan.host_bytes, ref.stats.host_bytes_peak);
    assert_true(e.plan.device_resident - e_ref.plan.device_resident >= e.plan.device_optim_bytes);
    /* the device peak as test_estimate holds it (within 5%), and on the host backend, where
     * frees are not left to a stream's order, the share's bytes exactly */
    double r = (double)e.device_peak / (double)o.stats.device_bytes_peak;
    assert_true(r >= 0.95 && r <= 1.05);
    if (!strcmp(backend(), "host"))
        assert_int_equal(o.stats.device_bytes_peak - ref.stats.device_bytes_peak,
                         e.device_peak - e_ref.device_peak);
    mlp_weights_free(&ref.w), mlp_weights_free(&o.w);
}

static void expect_config_error(const char *cfg, const char *needle)
{
    rt_fixture_expect_config_error(cfg, &dims, needle);
}

static void test_bad_ratios(void **state)
{
    (void)state;
    static const char *const bad[] = {"-1", "2", "\"x\"", "\"\"", "[0.5]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_config_error(config("none", bad[i], 0, NULL),
                            "zero_optimization.offload_optimizer.ratio");
    expect_config_error("{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"nvme\","
                        " \"nvme_path\": \"/tmp\", \"ratio\": 0.5}}}",
                        "offload_optimizer.ratio = 0.5 with device \"nvme\"");
    expect_config_error("{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\","
                        " \"ratio\": \"auto\"}}, \"ztier\": {\"grad_accum_dtype\": \"bf16\"}}",
                        "ratio = \"auto\" puts part of the optimizer on the device, which sums "
                        "gradients in fp32; ztier.grad_accum_dtype");
}

/* "auto" keeps on the device only the layers that leave the prefetch window room in the
 * budget: its rates ask for fc1 and fc2 there, 128 KiB holds fc1's beside the window. */
static void test_auto_fits_the_budget(void **state)
{
    (void)state;
    const char *cap = ";, \"hbm_capacity\": \"128K\"";
    run_out ref, o;
    run(config("none", NULL, 0, cap), &ref);
    setenv("ZT_TEST_ADAM_RATES", "1e6,3e6", 1);
    run(config("none", "\"auto\"", 0, cap), &o);
    unsetenv("ZT_TEST_ADAM_RATES");
    print_message("auto in 128 KiB: %d %d %d on the device, device peak %llu\n", o.on_device[0],
                  o.on_device[1], o.on_device[2], (unsigned long long)o.stats.device_bytes_peak);
    assert_int_equal(expected_device_layers(o.auto_ratio), 2);
    assert_int_equal(o.on_device[0], 1);
    assert_int_equal(o.on_device[1] + o.on_device[2], 0);
    assert_true(o.stats.device_bytes_peak <= 128 << 10);
    assert_true(mlp_weights_max_rel_diff(&o.w, &ref.w) == 0.0);
    mlp_weights_free(&ref.w), mlp_weights_free(&o.w);
}

/* A device share beyond the device budget: commit says the ratio put it there. */
static void test_share_beyond_the_budget(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = make(config("cpu", NULL, 0, ";, \"hbm_capacity\": \"64K\""), &m);
    uint64_t bytes = 0; /* all on the CPU, it fits; on the device: 16 bytes per element */
    for (int l = 0; l < MLP_LAYERS; l++)
        bytes += 16 * (uint64_t)rt->reg.layers[m.layer[l]].shard_numel;
    zt_runtime_destroy(rt);
    char want[96];
    snprintf(want, sizeof want, "offload_optimizer.ratio 0.000 keeps %llu bytes",
             (unsigned long long)bytes);
    rt = NULL;
    zt_status st = rt_fixture_try_mlp(NULL, config("cpu", "0", 0, ";, \"hbm_capacity\": \"64K\""),
                                      &dims, 5, &m, &rt);
    print_message("ratio 0 in 64 KiB: %s\n", zt_last_error(rt));
    assert_int_equal(st, ZT_ERR_DEVICE_NOMEM);
    assert_non_null(strstr(zt_last_error(rt), want));
    zt_runtime_destroy(rt);
}

/* "auto" with the overlapped step follows the forward time (ZT_TEST_FORWARD_S, the rates
 * from ZT_TEST_ADAM_RATES: the CPU's Adam at 1e6 elements/s): the CPU keeps the largest
 * share of whole layers it updates within the forward. A slow forward (1 s) leaves it all
 * (the commit's 2 layers come back), a fast one (10 us) none, 0.5 ms fc3's 196 elements;
 * after each move the weights are the all-CPU optimizer's, bit for bit. */
static void test_auto_follows_the_forward(void **state)
{
    (void)state;
    const char *overlap = ";, \"overlap_step\": \"on\"";
    run_out ref, o;
    run(config("none", NULL, 0, overlap), &ref);
    static const char *const forward[] = {"1", "0.00001", "0.0005"};
    static const int want[] = {0, 3, 2};
    setenv("ZT_TEST_ADAM_RATES", "1e6,3e6", 1);
    for (int i = 0; i < 3; i++) {
        setenv("ZT_TEST_FORWARD_S", forward[i], 1);
        run(config("none", "\"auto\"", 0, overlap), &o);
        unsetenv("ZT_TEST_FORWARD_S");
        int k = layers_for_forward(&o, atof(forward[i]), 1e6);
        double d = mlp_weights_max_rel_diff(&o.w, &ref.w);
        print_message("forward %s s: %d %d %d on the device (rule: %d), %llu re-splits, "
                      "forward_s %g, weights vs all-CPU %g\n",
                      forward[i], o.on_device[0], o.on_device[1], o.on_device[2], k,
                      (unsigned long long)o.stats.optimizer_resplits, o.stats.forward_s, d);
        assert_int_equal(k, want[i]);
        for (int l = 0; l < MLP_LAYERS; l++)
            assert_int_equal(o.on_device[l], l < k);
        /* the commit's split (2 layers) moved once, unless the rule asks for it */
        assert_int_equal(o.stats.optimizer_resplits, k != 2);
        assert_true(o.stats.forward_s == atof(forward[i]));
        assert_true(fabs((double)o.info.offload_ratio - (1.0 - o.device_share)) < 1e-6);
        assert_true(d == 0.0);
        mlp_weights_free(&o.w);
    }
    unsetenv("ZT_TEST_ADAM_RATES");
    mlp_weights_free(&ref.w);
}

typedef struct log_count {
    int warned, moved;
} log_count;

static void count_log(void *user, int level, const char *msg)
{
    log_count *c = user;
    if (level == ZT_LOG_WARN && strstr(msg, "cannot update its share within"))
        c->warned++;
    if (level == ZT_LOG_INFO && strstr(msg, "optimizer state now on the device"))
        c->moved++;
}

/* A forward too short for what the budget leaves the CPU: "auto" keeps the layers the
 * budget holds (fc1, beside the prefetch window in 128 KiB) and warns once over 4 steps. */
static void test_auto_warns_when_the_budget_forces_a_wait(void **state)
{
    (void)state;
    const char *cfg = ";, \"overlap_step\": \"on\", \"hbm_capacity\": \"128K\"";
    zt_options opts = ZT_OPTIONS_INIT;
    log_count c = {0, 0};
    opts.log_level = ZT_LOG_INFO;
    opts.log_fn = count_log;
    opts.log_user = &c;
    run_out ref, o;
    run(config("none", NULL, 0, cfg), &ref);
    setenv("ZT_TEST_ADAM_RATES", "1e6,3e6", 1);
    setenv("ZT_TEST_FORWARD_S", "0.00001", 1);
    run_with(&opts, config("none", "\"auto\"", 0, cfg), &o);
    unsetenv("ZT_TEST_ADAM_RATES");
    unsetenv("ZT_TEST_FORWARD_S");
    print_message("128 KiB, 10 us forward: %d %d %d on the device, %d warnings, %d moves\n",
                  o.on_device[0], o.on_device[1], o.on_device[2], c.warned, c.moved);
    assert_int_equal(layers_for_forward(&o, 1e-5, 1e6), 3);
    assert_int_equal(o.max_device_layers, 1);
    assert_int_equal(o.on_device[0] + o.on_device[1] + o.on_device[2], 1);
    assert_int_equal(o.on_device[0], 1);
    assert_int_equal(c.warned, 1);
    assert_int_equal(c.moved, 0);
    assert_true(o.stats.device_bytes_peak <= 128 << 10);
    assert_true(mlp_weights_max_rel_diff(&o.w, &ref.w) == 0.0);
    mlp_weights_free(&ref.w), mlp_weights_free(&o.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_params),
        cmocka_unit_test(test_host_params),
        cmocka_unit_test(test_clipped),
        cmocka_unit_test(test_overlapped),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16),
        cmocka_unit_test(test_checkpoint),
        cmocka_unit_test(test_estimate_counts_the_share),
        cmocka_unit_test(test_bad_ratios),
        cmocka_unit_test(test_share_beyond_the_budget),
        cmocka_unit_test(test_auto_fits_the_budget),
        cmocka_unit_test(test_auto_follows_the_forward),
        cmocka_unit_test(test_auto_warns_when_the_budget_forces_a_wait),
        cmocka_unit_test(test_overlapped_host_params),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

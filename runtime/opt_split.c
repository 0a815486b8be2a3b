/* SPDX-License-Identifier: MIT */
/* offload_optimizer.ratio (opt_split.h): which layers' optimizer runs on the device, and the
 * rates "auto" chooses from. */
#include "runtime/opt_split.h"
#include "core/log.h"
#include "core/test_hooks.h"
#include "core/time.h"
#include "optimizer/adam.h"

#include <math.h>
#include <stdlib.h>

/* Elements the "auto" probe updates on each side (the model's, within these bounds): enough
 * that a pass takes longer than a launch and a wait, few enough to cost milliseconds and
 * 16 MiB of device memory at most at commit; the best of a few passes counts. */
#define ZT_SPLIT_PROBE_MIN ((int64_t)1 << 16)
#define ZT_SPLIT_PROBE_MAX ((int64_t)1 << 20)
#define ZT_SPLIT_PROBE_PASSES 3

float zt_opt_split_target(const zt_runtime *rt)
{
    const zt_offload_config *o = &rt->cfg.offload_optimizer;
    if (o->device != ZT_TIER_HOST)
        return 1.0f;
    if (o->ratio != ZT_RATIO_AUTO)
        return o->ratio;
    return rt->opt.cpu_rate > 0 ? rt->opt.auto_ratio : 0.0f;
}

/* The number of leading layers whose elements come closest to `want` (fewer on a tie). */
static int device_prefix(const zt_runtime *rt, double want)
{
    double cum = 0, best_err = want;
    int best = 0;
    for (int i = 0; i < rt->reg.n_layers; i++) {
        cum += (double)rt->reg.layers[i].shard_numel;
        if (fabs(cum - want) < best_err) {
            best_err = fabs(cum - want);
            best = i + 1;
        }
    }
    return best;
}

void zt_opt_split_first(zt_runtime *rt, int k)
{
    double total = 0, dev = 0;
    for (int i = 0; i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        L->opt_device = i < k;
        total += (double)L->shard_numel;
        dev += L->opt_device ? (double)L->shard_numel : 0;
    }
    rt->opt.cpu_ratio = total > 0 ? (float)(1.0 - dev / total) : k ? 0.0f : 1.0f;
}

void zt_opt_split_layers(zt_runtime *rt)
{
    double total = 0;
    for (int i = 0; i < rt->reg.n_layers; i++)
        total += (double)rt->reg.layers[i].shard_numel;
    int all = zt_config_device_optimizer(&rt->cfg);
    zt_opt_split_first(rt,
                       all ? rt->reg.n_layers
                           : device_prefix(rt, (1.0 - (double)zt_opt_split_target(rt)) * total));
}

/* Elements per second of the best of a few timed Adam passes over n elements, after one
 * untimed one. */
static double cpu_rate(zt_runtime *rt, int64_t n, const zt_adam_hparams *h)
{
    float *b = calloc(4 * (size_t)n, sizeof *b);
    if (!b)
        return 0;
    zt_adam_tensors t = {b, b + n, b + 2 * n, b + 3 * n, ZT_F32, NULL, ZT_F32, n};
    zt_adam_step_parallel(rt->cpu.pool, rt->cpu.adam_variant, h, &t);
    double best = 1e30;
    for (int k = 0; k < ZT_SPLIT_PROBE_PASSES; k++) {
        double t0 = zt_now_s();
        zt_adam_step_parallel(rt->cpu.pool, rt->cpu.adam_variant, h, &t);
        double s = zt_now_s() - t0;
        best = s < best ? s : best;
    }
    free(b);
    return (double)n / (best > 1e-9 ? best : 1e-9);
}

/* One pass on the device, waited for: master, m, v, grad and the count in b. */
static zt_status device_pass(zt_runtime *rt, const zt_adam_consts *c, float *b, int64_t n,
                             double *s)
{
    zt_device *d = rt->device.dev;
    unsigned long long *count = (unsigned long long *)(b + 4 * n);
    double t0 = zt_now_s();
    zt_status st = zt_device_adam_async(d, c, b, b + n, b + 2 * n, b + 3 * n, b, ZT_F32, (size_t)n,
                                        count, rt->device.stream, &rt->err);
    if (st == ZT_OK)
        st = zt_device_stream_synchronize(d, rt->device.stream, &rt->err);
    double took = zt_now_s() - t0;
    *s = took < *s ? took : *s;
    return st;
}

static zt_status device_rate(zt_runtime *rt, int64_t n, const zt_adam_hparams *h, double *rate)
{
    zt_device *d = rt->device.dev;
    size_t bytes = 4 * (size_t)n * sizeof(float) + 8;
    void *b = NULL;
    zt_adam_consts c;
    zt_adam_consts_init(&c, h);
    double warm = 1e30, best = 1e30;
    zt_status st = zt_device_alloc(d, bytes, &b, &rt->err);
    if (st == ZT_OK)
        st = zt_device_memset_async(d, b, 0, bytes, rt->device.stream, &rt->err);
    if (st == ZT_OK)
        st = device_pass(rt, &c, b, n, &warm);
    for (int k = 0; st == ZT_OK && k < ZT_SPLIT_PROBE_PASSES; k++)
        st = device_pass(rt, &c, b, n, &best);
    *rate = (double)n / (best > 1e-9 ? best : 1e-9);
    if (b)
        zt_device_free(d, b);
    if (st != ZT_OK)
        zt_error_prefix(&rt->err, "offload_optimizer.ratio \"auto\": timing the device's Adam: ");
    return st;
}

zt_status zt_opt_split_measure(zt_runtime *rt)
{
    const zt_offload_config *o = &rt->cfg.offload_optimizer;
    if (o->device != ZT_TIER_HOST || o->ratio != ZT_RATIO_AUTO)
        return ZT_OK;
    int64_t n = 0;
    for (int i = 0; i < rt->reg.n_params; i++)
        n += rt->reg.params[i].numel;
    n = n < ZT_SPLIT_PROBE_MIN   ? ZT_SPLIT_PROBE_MIN
        : n > ZT_SPLIT_PROBE_MAX ? ZT_SPLIT_PROBE_MAX
                                 : n;
    int64_t room = (int64_t)(rt->device.dev->capacity / 64); /* a quarter of the budget */
    n = n < room ? n : room > 1024 ? room : 1024;
    zt_adam_hparams h = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 1};
    h.grad_scale = 1.0f;
    double dev = 0, cpu = cpu_rate(rt, n, &h);
    if (cpu <= 0)
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM,
                      "offload_optimizer.ratio \"auto\": out of memory timing the CPU's Adam");
    zt_status st = device_rate(rt, n, &h, &dev);
    if (st != ZT_OK)
        return st;
    (void)zt_test_adam_rates(&cpu, &dev); /* tests choose the rates */
    rt->opt.cpu_rate = cpu;
    rt->opt.dev_rate = dev;
    rt->opt.auto_ratio = (float)(cpu / (cpu + dev));
    return ZT_OK;
}

void zt_opt_split_report(const zt_runtime *rt)
{
    const zt_offload_config *o = &rt->cfg.offload_optimizer;
    if (rt->dist.rank != 0 || o->ratio == 1.0f)
        return;
    if (o->device != ZT_TIER_HOST) {
        ZT_LOGW("optimizer",
                "zero_optimization.offload_optimizer.ratio = %s is not applied: it splits an "
                "optimizer offloaded to host memory (device \"cpu\"), and here the state is %s; "
                "remove the key, or set device to \"cpu\"",
                o->ratio == ZT_RATIO_AUTO ? "\"auto\"" : "a fraction",
                o->device == ZT_TIER_DEVICE ? "not offloaded" : "on NVMe");
        return;
    }
    float want = zt_opt_split_target(rt), got = rt->opt.cpu_ratio;
    if (o->ratio == ZT_RATIO_AUTO)
        ZT_LOGI("optimizer",
                "offload_optimizer.ratio \"auto\": CPU Adam %.3g elements/s (%d threads), device "
                "Adam %.3g elements/s: the CPU's share %.3f",
                rt->opt.cpu_rate, rt->cpu.threads, rt->opt.dev_rate, (double)want);
    ZT_LOGI("optimizer",
            "split: %d of %d layers (%.1f%% of this rank's optimizer elements) on the device, "
            "the rest on the CPU (ratio %.3f)",
            rt->opt.dev_layers, rt->reg.n_layers, 100.0 * (1.0 - (double)got), (double)got);
    if (fabsf(got - want) > 0.02f)
        ZT_LOGW("optimizer",
                "zero_optimization.offload_optimizer.ratio %.3f cannot be honoured exactly: the "
                "split keeps layers whole, and the closest is %.3f of the elements on the CPU "
                "(%d of %d layers on the device); split the model into smaller layers for a "
                "closer split",
                (double)want, (double)got, rt->opt.dev_layers, rt->reg.n_layers);
}

/* --- "auto" after each step: the split the forward time allows --- */

int zt_opt_split_refinable(const zt_runtime *rt)
{
    const zt_offload_config *o = &rt->cfg.offload_optimizer;
    return o->device == ZT_TIER_HOST && o->ratio == ZT_RATIO_AUTO &&
           rt->cfg.overlap_step == ZT_OVERLAP_ON && rt->dist.world == 1;
}

static double layer_elems(const zt_runtime *rt, int i)
{
    return (double)rt->reg.layers[i].shard_numel;
}

int zt_opt_split_for_forward(const zt_runtime *rt, double forward_s, double cpu_rate)
{
    double total = 0, cum = 0;
    for (int i = 0; i < rt->reg.n_layers; i++)
        total += layer_elems(rt, i);
    int k = 0;
    for (; k < rt->reg.n_layers; cum += layer_elems(rt, k), k++)
        if ((total - cum) <= forward_s * cpu_rate) /* the CPU's rest done within the forward */
            break;
    return k;
}

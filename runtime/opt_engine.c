/* SPDX-License-Identifier: MIT */
/* The optimizer engines (opt_engine.h): what differs between the placements of the
 * optimizer state, each a table of the step's operations. */
#include "runtime/opt_engine.h"
#include "core/time.h"
#include "core/trace.h"

#include <string.h>

/* --- a failure that leaves the state half updated --- */

zt_status zt_rt_keep_async(zt_runtime *rt, zt_status st, const zt_error *e)
{
    if (st != ZT_OK && rt->async_err.status == ZT_OK) {
        rt->async_err = *e;
        zt_error_prefix(&rt->async_err, "the optimizer state is inconsistent since its step "
                                        "failed partway (load a checkpoint to go on): ");
    }
    if (rt->async_err.status != ZT_OK)
        rt->err = rt->async_err;
    return rt->async_err.status;
}

/* --- the gradient sums in host memory (host and NVMe engines) --- */

/* Layers whose sums received nothing this step (no backward release) hold the previous
 * step's: their gradient is zero. */
static void zero_unsummed(zt_runtime *rt)
{
    for (int i = 0; i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        if (L->accum_count == 0 && !L->opt_device)
            memset(L->grad_acc, 0, (size_t)L->shard_numel * zt_dtype_size(rt->reg.acc_dtype));
    }
}

static zt_status host_grad_stats(zt_runtime *rt, float scale, double out[2])
{
    zero_unsummed(rt);
    for (int i = 0; i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        if (L->opt_device || (L->persistent && rt->dist.rank != 0))
            continue; /* the device's (split); replicated: every rank holds the same sum */
        int64_t bad = 0;
        double sum = L->norm_valid /* folded into the last accumulation */
                         ? (bad = L->norm_bad, L->norm_sumsq)
                         : zt_grad_sumsq_parallel(rt->cpu.pool, rt->cpu.adam_variant, L->grad_acc,
                                                  rt->reg.acc_dtype, L->shard_numel, scale, &bad);
        out[0] += sum;
        out[1] += (double)bad;
    }
    return ZT_OK;
}

/* The sums are not zeroed: the next step's first accumulation overwrites them, and a layer
 * that gets no gradient by the next step is zeroed then (zero_unsummed). A layer of the
 * device's share is cleared by the split's clear_grads, after the update it joined. */
static void clear_host_grads(zt_layer *L)
{
    if (L->opt_device)
        return;
    L->accum_count = 0;
    L->norm_valid = 0;
}

void zt_opt_clear_updated(zt_runtime *rt)
{
    int done = zt_opt_done_layers(rt);
    for (done = done < 0 ? rt->reg.n_layers : done; rt->train.step_cleared < done;
         rt->train.step_cleared++)
        clear_host_grads(&rt->reg.layers[rt->train.step_cleared]);
}

static zt_status host_clear_grads(zt_runtime *rt)
{
    if (zt_opt_done_layers(rt) < 0)
        rt->train.step_cleared = 0; /* no step in progress: every layer now */
    zt_opt_clear_updated(rt);       /* else those updated, the others when they are */
    return ZT_OK;
}

/* --- host: Adam over each layer's shard on the CPU --- */

static zt_status update_layer(zt_runtime *rt, zt_layer *L, const zt_adam_hparams *h)
{
    float *master = zt_home_host_ptr(&L->master);
    float *m = zt_home_host_ptr(&L->exp_avg), *v = zt_home_host_ptr(&L->exp_avg_sq);
    void *home = zt_home_host_ptr(&L->param_home);
    void *out = home ? home : rt->reg.dtype == ZT_F32 ? rt->opt.staging : rt->opt.staging_lp;
    /* parameters that are the master (zt_plan_master_is_param) are updated in place */
    zt_adam_tensors t = {master,
                         m,
                         v,
                         L->grad_acc,
                         rt->reg.acc_dtype,
                         out == master ? NULL : out,
                         rt->reg.dtype,
                         L->shard_numel};
    double t0 = zt_now_s();
    zt_adam_step_parallel(rt->cpu.pool, rt->cpu.adam_variant, h, &t);
    zt_trace_span("optimizer", t0, "adam %s (%lld elements)", L->name, (long long)L->shard_numel);
    if (out == home)
        return ZT_OK;
    if (L->param_home.kind == ZT_TIER_DEVICE)
        rt->stats.h2d_bytes += L->param_home.bytes;
    return zt_home_store(&rt->tiers.homes, &L->param_home, out, &rt->err);
}

static zt_status host_begin(zt_runtime *rt, const zt_adam_hparams *h)
{
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++)
        if (!rt->reg.layers[i].opt_device)
            st = update_layer(rt, &rt->reg.layers[i], h);
    return st;
}

/* The overlapped step over state in host memory: layers [updated, through) in order. */
static zt_status host_advance(zt_runtime *rt, int through, zt_error *e)
{
    zt_opt_engine *o = &rt->opt;
    while (o->host_step_pending && o->host_step_updated < through) {
        zt_layer *L = &rt->reg.layers[o->host_step_updated];
        zt_status st = L->opt_device ? ZT_OK /* the split's: done at begin */
                                     : update_layer(rt, L, &o->host_step_h);
        if (st != ZT_OK) {
            *e = rt->err;
            o->host_step_pending = 0; /* ended, half done: the state needs a load */
            return st;
        }
        if (++o->host_step_updated == rt->reg.n_layers)
            o->host_step_pending = 0;
    }
    return ZT_OK;
}

static int host_done_layers(const zt_runtime *rt)
{
    return rt->opt.host_step_pending ? rt->opt.host_step_updated : -1;
}

/* Left to later calls: each layer is updated when first needed. */
static zt_status host_begin_overlapped(zt_runtime *rt, const zt_adam_hparams *h)
{
    if (rt->reg.n_layers == 0)
        return ZT_OK;
    rt->opt.host_step_h = *h;
    rt->opt.host_step_updated = 0;
    rt->opt.host_step_pending = 1;
    rt->train.step_cleared = 0;
    return ZT_OK;
}

/* --- nvme: the pipelined step over the shards' homes; a failure leaves the state on NVMe
 * half updated, so it is kept --- */

static zt_status nvme_start(zt_runtime *rt, const zt_adam_hparams *h, int overlap)
{
    zt_error e = {0};
    zt_status st = rt->async_err.status;
    if (st == ZT_OK)
        st = zt_nvme_step_begin(rt->opt.nvme_step, rt->opt.shards, rt->reg.n_layers, h,
                                rt->cpu.pool, rt->cpu.adam_variant, &rt->tiers.homes, rt->reg.dtype,
                                &rt->stats.h2d_bytes, &e);
    if (st == ZT_OK) /* overlapped: each layer is updated when first needed */
        rt->train.step_cleared = 0;
    if (st == ZT_OK && !overlap)
        st = zt_nvme_step_advance(rt->opt.nvme_step, rt->reg.n_layers, &e);
    return zt_rt_keep_async(rt, st, &e);
}

static zt_status nvme_begin(zt_runtime *rt, const zt_adam_hparams *h)
{
    return nvme_start(rt, h, 0);
}

static zt_status nvme_begin_overlapped(zt_runtime *rt, const zt_adam_hparams *h)
{
    return nvme_start(rt, h, 1);
}

static zt_status nvme_advance(zt_runtime *rt, int through, zt_error *e)
{
    return zt_nvme_step_advance(rt->opt.nvme_step, through, e);
}

static int nvme_done_layers(const zt_runtime *rt)
{
    return zt_nvme_step_shards_done(rt->opt.nvme_step);
}

/* --- device: accumulators and Adam in device memory, on ztier's stream --- */

static zt_status device_begin(zt_runtime *rt, const zt_adam_hparams *h)
{
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++)
        st = zt_dev_opt_update(rt, &rt->reg.layers[i], h);
    return st;
}

static zt_status device_clear_grads(zt_runtime *rt)
{
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++)
        st = zt_dev_opt_zero_acc(rt, &rt->reg.layers[i]);
    if (st == ZT_OK) /* the step returns with its device work done */
        st = zt_device_stream_synchronize(rt->device.dev, rt->device.stream, &rt->err);
    return st;
}

/* --- split (offload_optimizer.ratio): the device's layers as the device engine's, the
 * CPU's as the host engine's (or host-overlapped), the device's Adam enqueued first so both
 * run at once --- */

static zt_status split_grad_stats(zt_runtime *rt, float scale, double out[2])
{
    zt_status st = host_grad_stats(rt, scale, out);
    return st == ZT_OK ? zt_dev_opt_grad_stats(rt, scale, out) : st;
}

static zt_status device_share_update(zt_runtime *rt, const zt_adam_hparams *h)
{
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++)
        if (rt->reg.layers[i].opt_device)
            st = zt_dev_opt_update(rt, &rt->reg.layers[i], h);
    return st;
}

static zt_status split_begin(zt_runtime *rt, const zt_adam_hparams *h)
{
    zt_status st = device_share_update(rt, h);
    return st == ZT_OK ? host_begin(rt, h) : st;
}

static zt_status split_begin_overlapped(zt_runtime *rt, const zt_adam_hparams *h)
{
    zt_status st = device_share_update(rt, h);
    return st == ZT_OK ? host_begin_overlapped(rt, h) : st;
}

static zt_status split_clear_grads(zt_runtime *rt)
{
    zt_status st = host_clear_grads(rt);
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++)
        if (rt->reg.layers[i].opt_device)
            st = zt_dev_opt_zero_acc(rt, &rt->reg.layers[i]);
    if (st == ZT_OK) /* the device's share done when the step returns */
        st = zt_device_stream_synchronize(rt->device.dev, rt->device.stream, &rt->err);
    return st;
}

static const zt_opt_engine_ops host_engine = {"host",       host_grad_stats,  host_begin,
                                              host_advance, host_done_layers, host_clear_grads};
static const zt_opt_engine_ops host_overlapped_engine = {"host-overlapped",     host_grad_stats,
                                                         host_begin_overlapped, host_advance,
                                                         host_done_layers,      host_clear_grads};
static const zt_opt_engine_ops nvme_engine = {"nvme",       host_grad_stats,  nvme_begin,
                                              nvme_advance, nvme_done_layers, host_clear_grads};
static const zt_opt_engine_ops nvme_overlapped_engine = {"nvme-overlapped",     host_grad_stats,
                                                         nvme_begin_overlapped, nvme_advance,
                                                         nvme_done_layers,      host_clear_grads};
static const zt_opt_engine_ops device_engine = {"device",         zt_dev_opt_grad_stats,
                                                device_begin,     host_advance,
                                                host_done_layers, device_clear_grads};

static const zt_opt_engine_ops split_engine = {"split",      split_grad_stats, split_begin,
                                               host_advance, host_done_layers, split_clear_grads};
static const zt_opt_engine_ops split_overlapped_engine = {
    "split-overlapped", split_grad_stats, split_begin_overlapped,
    host_advance,       host_done_layers, split_clear_grads};

/* ztier.overlap_step: "auto" overlaps with the state on NVMe, whose transfers then overlap
 * the caller's compute; "on" also with the state in host memory: for a GPU trainer whose host
 * runs ahead of its stream, the CPU's Adam for a layer then overlaps the GPU's work on the
 * layers before it (not yet measured on a GPU); a CPU trainer computes on the same cores and
 * gains nothing. The device optimizer never overlaps. */
void zt_opt_engine_choose(zt_runtime *rt)
{
    int on = rt->cfg.overlap_step == ZT_OVERLAP_ON, off = rt->cfg.overlap_step == ZT_OVERLAP_OFF;
    if (rt->opt.on_device)
        rt->opt.ops = &device_engine;
    else if (rt->opt.dev_layers || rt->opt.resplit) /* ratio: the CPU's share as the host's */
        rt->opt.ops = on ? &split_overlapped_engine : &split_engine;
    else if (rt->opt.nvme_step)
        rt->opt.ops = off ? &nvme_engine : &nvme_overlapped_engine;
    else
        rt->opt.ops = on ? &host_overlapped_engine : &host_engine;
}

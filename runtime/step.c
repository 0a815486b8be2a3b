/* SPDX-License-Identifier: MIT */
/* The optimizer step: global gradient norm and overflow check (one all-reduce), then a fused
 * Adam pass over each layer's shard on the CPU, writing the new working-dtype parameters to
 * their home tier. A step with inf/nan gradients changes nothing but the loss scale. */
#include "core/time.h"
#include "core/trace.h"
#include "core/log.h"
#include "runtime/opt_engine.h"
#include "runtime/opt_resplit.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Sum of squares of the averaged gradient over every rank's shards, and the count of
 * non-finite elements, both agreed on by every rank. */
static zt_status global_grad_stats(zt_runtime *rt, double *sumsq, double *nonfinite)
{
    double acc[2] = {0.0, 0.0};
    zt_status st = zt_opt_grad_stats(rt, zt_rt_grad_average_factor(rt), acc);
    /* every rank joins the collective, also one whose sums failed (its error comes first) */
    zt_status red =
        zt_comm_allreduce_sync(rt->dist.comm, acc, 2, ZT_COMM_F64, ZT_REDUCE_SUM, &rt->err);
    st = st != ZT_OK ? st : red;
    *sumsq = acc[0];
    *nonfinite = acc[1];
    return st;
}

static int max_accum_count(const zt_runtime *rt)
{
    int m = 0;
    for (int i = 0; i < rt->reg.n_layers; i++)
        if (rt->reg.layers[i].accum_count > m)
            m = rt->reg.layers[i].accum_count;
    return m;
}

/* fp16 dynamic loss scaling: halve after `hysteresis` overflows, double after `window`
 * clean steps. A fixed fp16.loss_scale or bf16/fp32 keep the scale. */
static void update_loss_scale(zt_runtime *rt, int overflow)
{
    if (!rt->cfg.fp16 || rt->cfg.fp16_loss_scale > 0)
        return;
    if (overflow) {
        rt->train.good_steps = 0;
        if (--rt->train.hysteresis_left <= 0) {
            rt->train.loss_scale = fmaxf(rt->train.loss_scale * 0.5f, rt->cfg.fp16_min_loss_scale);
            rt->train.hysteresis_left = rt->cfg.fp16_hysteresis;
        }
        return;
    }
    if (++rt->train.good_steps % rt->cfg.fp16_loss_scale_window == 0) {
        rt->train.loss_scale *= 2.0f;
        rt->train.hysteresis_left = rt->cfg.fp16_hysteresis;
    }
}

/* A per-step value: NaN, infinities and values above the config's bound are refused like
 * the config refuses them; < 0 means the configured value. */
static zt_status step_value(zt_runtime *rt, const char *name, float v, float configured, float *out)
{
    if (!isfinite(v) || v > 1e3f)
        return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                      "zt_step: zt_step_args.%s = %g; it must be a number in [0, 1000], or < 0 "
                      "for the configured value (%g)",
                      name, (double)v, (double)configured);
    *out = v >= 0.0f ? v : configured;
    return ZT_OK;
}

/* The step's values: the trainer's lr and weight decay (args may be NULL or an older,
 * shorter struct), else the config's schedule at this step, else the configured ones. */
typedef struct step_values {
    float lr, wd, beta1, beta2;
} step_values;

static zt_status scheduled(zt_runtime *rt, step_values *v)
{
    const zt_lr_schedule *s = &rt->cfg.sched;
    double b1 = v->beta1, b2 = v->beta2;
    v->lr = (float)zt_lr_schedule_lr(s, rt->train.steps, (double)rt->cfg.lr);
    if (zt_lr_schedule_betas(s, rt->train.steps, &b1, &b2) && !(b1 >= 0.0 && b1 < 1.0))
        return ZT_ERR(&rt->err, ZT_ERR_CONFIG,
                      "scheduler OneCycle: at optimizer step %lld its momentum decay gives "
                      "beta1 = %g, outside [0, 1) (cycle_max_mom * (1 + decay_mom_rate * steps "
                      "/ decay_step_size)); lower scheduler.params.decay_mom_rate",
                      (long long)rt->train.steps + 1, b1);
    v->beta1 = (float)b1;
    v->beta2 = (float)b2;
    return ZT_OK;
}

static zt_status get_step_values(zt_runtime *rt, const zt_step_args *args, step_values *v)
{
    v->lr = rt->cfg.lr;
    v->wd = rt->cfg.weight_decay;
    v->beta1 = rt->cfg.beta1;
    v->beta2 = rt->cfg.beta2;
    zt_status st = ZT_OK;
    int given = args && args->lr >= 0.0f;
    if (args)
        st = step_value(rt, "lr", args->lr, rt->cfg.lr, &v->lr);
    if (st == ZT_OK && args &&
        args->struct_size >= offsetof(zt_step_args, weight_decay) + sizeof(float))
        st = step_value(rt, "weight_decay", args->weight_decay, rt->cfg.weight_decay, &v->wd);
    if (st != ZT_OK || rt->cfg.sched.type == ZT_LR_CONSTANT)
        return st;
    if (!given)
        return scheduled(rt, v);
    if (!rt->train.lr_override_warned && rt->dist.rank == 0)
        ZT_LOGW("step",
                "zt_step_args.lr = %g overrides the config's scheduler %s: the trainer's lr "
                "is used and the schedule%s is not applied; pass lr < 0 to use the schedule, or "
                "remove the scheduler section",
                (double)v->lr, zt_lr_schedule_name(rt->cfg.sched.type),
                rt->cfg.sched.type == ZT_LR_ONE_CYCLE ? " (and its momentum cycling)" : "");
    rt->train.lr_override_warned = 1;
    return ZT_OK;
}

static zt_adam_hparams make_hparams(const zt_runtime *rt, const step_values *v, float coef)
{
    zt_adam_hparams h;
    memset(&h, 0, sizeof h);
    h.lr = v->lr;
    h.beta1 = v->beta1;
    h.beta2 = v->beta2;
    h.eps = rt->cfg.eps;
    h.weight_decay = v->wd;
    h.adamw = rt->cfg.optimizer == ZT_OPT_ADAMW;
    h.step = rt->train.steps + 1;
    h.grad_scale = coef * zt_rt_grad_average_factor(rt);
    return h;
}

zt_status zt_rt_step_through(zt_runtime *rt, int layer)
{
    if (rt->train.step_cleared > layer)
        return ZT_OK;
    zt_error e = {0};
    zt_status st = rt->async_err.status;
    int before = rt->train.step_cleared;
    double t0 = zt_now_s();
    if (st == ZT_OK)
        st = zt_opt_advance(rt, layer + 1, &e);
    st = zt_rt_keep_async(rt, st, &e);
    if (st == ZT_OK)
        zt_opt_clear_updated(rt);
    if (!rt->train.stepping && rt->train.step_cleared > before) { /* after zt_step returned */
        rt->stats.overlapped_updates += (uint64_t)(rt->train.step_cleared - before);
        for (int i = before; i < rt->train.step_cleared; i++) /* the new parameters' copy waited */
            rt->stats.host_syncs += rt->reg.layers[i].param_home.kind == ZT_TIER_DEVICE;
        rt->stats.overlapped_update_s += zt_now_s() - t0;
        zt_trace_span("step", t0, "step through %s", rt->reg.layers[layer].name);
    }
    return st;
}

zt_status zt_rt_step_complete(zt_runtime *rt)
{
    return rt->reg.n_layers ? zt_rt_step_through(rt, rt->reg.n_layers - 1) : ZT_OK;
}

int zt_rt_param_home_ready(void *ctx, const zt_home *home, int demand)
{
    zt_runtime *rt = ctx;
    for (int i = rt->train.step_cleared; i < rt->reg.n_layers; i++) /* none: no step in progress */
        if (&rt->reg.layers[i].param_home == home) {
            if (!demand)
                return 0;
            zt_rt_step_through(rt, i); /* a failure is kept in rt->async_err */
            return 1;
        }
    return 1;
}

zt_status zt_rt_drain_optimizer(zt_runtime *rt)
{
    zt_status st = zt_rt_step_complete(rt);
    if (st == ZT_OK)
        st = zt_rt_finish_reductions(rt); /* and the caller's streams, up to release */
    if (st != ZT_OK)
        return st;
    zt_error e = {0};
    if (rt->async_err.status != ZT_OK)
        return zt_rt_keep_async(rt, ZT_OK, NULL);
    return zt_rt_keep_async(rt, zt_nvme_step_drain(rt->opt.nvme_step, &e), &e);
}

zt_status zt_rt_async_error(zt_runtime *rt)
{
    zt_rt_poll_reductions(rt); /* a failed gradient copy is kept like a failed write-back */
    zt_error e = {0};
    return zt_rt_keep_async(rt, zt_nvme_step_poll(rt->opt.nvme_step, &e), &e);
}

static zt_status run_step(zt_runtime *rt, const zt_step_args *args, zt_step_info *info)
{
    double t0 = zt_now_s();
    double sumsq = 0, nonfinite = 0;
    step_values v;
    /* the previous step's updates all done (a trainer that skips a layer's fetch); every
     * release's gradients summed; the caller's streams past their last release */
    zt_status updated = zt_rt_step_complete(rt); /* reported after the collective */
    zt_status flushed = zt_rt_flush_local_sums(rt);
    zt_status st = zt_rt_finish_reductions(rt);
    int timed = 0; /* the trainer's streams are past their releases: the forward is over */
    if (st == ZT_OK)
        st = zt_fwd_collect(&rt->fwd, rt->device.dev, &timed, &rt->err);
    if (timed && st == ZT_OK)
        rt->stats.forward_s = rt->fwd.last_s;
    if (st == ZT_OK)
        st = flushed;
    if (st == ZT_OK)
        st = get_step_values(rt, args, &v);
    if (st == ZT_OK)
        st = global_grad_stats(rt, &sumsq, &nonfinite);
    if (st == ZT_OK)
        st = updated;
    if (st != ZT_OK)
        return st;
    zt_step_info out = {0};
    out.micro_steps = max_accum_count(rt);
    out.lr = v.lr;
    out.grad_norm = (float)sqrt(sumsq);
    out.clip_coef = 1.0f;
    out.skipped = nonfinite > 0;
    if (!out.skipped && rt->cfg.gradient_clipping > 0 && out.grad_norm > rt->cfg.gradient_clipping)
        out.clip_coef = rt->cfg.gradient_clipping / (out.grad_norm + 1e-6f);
    if (out.skipped) {
        ZT_LOGW("step", "step %lld skipped: %.0f non-finite gradient elements (loss scale %g)",
                (long long)rt->train.steps + 1, nonfinite, (double)rt->train.loss_scale);
        rt->stats.skipped_steps++;
    } else {
        zt_prefetcher_invalidate(rt->prefetch); /* gathered copies are about to go stale */
        zt_adam_hparams h = make_hparams(rt, &v, out.clip_coef);
        if ((st = zt_opt_begin(rt, &h)) != ZT_OK)
            return st;
        rt->train.steps++;
        rt->stats.steps++;
    }
    update_loss_scale(rt, out.skipped);
    if ((st = zt_opt_clear_grads(rt)) != ZT_OK)
        return st;
    if (timed && (st = zt_opt_split_refine(rt)) != ZT_OK) /* "auto": for the next forward */
        return st;
    zt_prefetcher_step_done(rt->prefetch);
    out.step = rt->train.steps;
    out.loss_scale = rt->train.loss_scale;
    if (info)
        *info = out;
    rt->stats.step_s += zt_now_s() - t0;
    zt_trace_span("step", t0, "step %lld%s", (long long)rt->train.steps,
                  out.skipped ? " (skipped)" : "");
    return ZT_OK;
}

zt_status zt_rt_step(zt_runtime *rt, const zt_step_args *args, zt_step_info *info)
{
    rt->train.stepping = 1;
    zt_status st = run_step(rt, args, info);
    rt->train.stepping = 0;
    return st;
}

/* Counts, in the topology's byte counters, a block this rank sends to `peer` alone. The
 * node layout is the topology's: ranks rank - local_rank .. + node_size share this node. */
static void count_sent_to(zt_topology *t, int peer, uint64_t bytes)
{
    if (peer == t->rank)
        return;
    const zt_layout *L = &t->layout;
    int same = L->node_of ? L->node_of[peer] == L->node_of[t->rank] : 1;
    if (same)
        t->bytes_intra += bytes;
    else
        t->bytes_inter += bytes;
}

/* Gathers the parameter's elements, not its layer: rank r contributes the overlap of the
 * parameter with shard r (empty for most ranks of a small parameter), to root alone or, root
 * < 0, to every rank; so each element crosses the network once per receiving rank. st is
 * this rank's status so far: a rank that cannot take part (its shard did not load, a wrong
 * numel on the root, no memory here) stops every rank before the gather, none waits for it. */
static zt_status gather_param(zt_runtime *rt, const zt_param *p, zt_status st, const float *own,
                              float *dst, int root)
{
    const zt_layer *L = &rt->reg.layers[p->layer];
    int n = rt->dist.world;
    size_t *counts = calloc(2 * (size_t)n, sizeof *counts);
    if (!counts && st == ZT_OK)
        st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory reading parameter '%s'", p->name);
    char what[160];
    snprintf(what, sizeof what, "reading parameter '%.120s'", p->name);
    if ((st = zt_comm_agree(rt->dist.comm, st, what, &rt->err)) != ZT_OK) {
        free(counts);
        return st;
    }
    size_t *displs = counts + n;
    for (int r = 0; r < n; r++) {
        int64_t lo = (int64_t)r * L->shard_numel, hi = lo + L->shard_numel;
        int64_t a = p->offset > lo ? p->offset : lo;
        int64_t b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        counts[r] = b > a ? (size_t)(b - a) : 0;
        displs[r] = b > a ? (size_t)(a - p->offset) : 0;
    }
    uint64_t mine = (uint64_t)counts[rt->dist.rank] * sizeof(float);
    if (root < 0)
        zt_topology_count(&rt->dist.topo, mine);
    else
        count_sent_to(&rt->dist.topo, root, mine);
    st = zt_comm_gatherv_sync(rt->dist.comm, own, dst, counts, displs, ZT_COMM_F32, root, &rt->err);
    free(counts);
    return st;
}

zt_status zt_rt_param_read(zt_runtime *rt, int param_id, int state, int root, float *dst,
                           int64_t numel)
{
    const zt_param *p = &rt->reg.params[param_id];
    zt_layer *L = &rt->reg.layers[p->layer];
    int receives = root < 0 || root == rt->dist.rank;
    zt_status st = ZT_OK;
    if (receives && numel != p->numel)
        st = ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                    "parameter '%s' has %lld elements, the destination holds %lld", p->name,
                    (long long)p->numel, (long long)numel);
    if (st == ZT_OK)
        st = zt_rt_drain_optimizer(rt);
    zt_home *home = state == 1 ? &L->exp_avg : state == 2 ? &L->exp_avg_sq : &L->master;
    if (st == ZT_OK)
        st = zt_home_load(&rt->tiers.homes, home, rt->opt.staging, &rt->err);
    int64_t a, b, at;
    zt_param_in_shard(rt, p, &a, &b, &at);
    const float *own = (const float *)rt->opt.staging + at;
    if (L->persistent || rt->dist.world == 1) { /* all of it is here */
        if (st == ZT_OK && receives)
            memcpy(dst, own, (size_t)p->numel * sizeof(float));
        return st;
    }
    return gather_param(rt, p, st, own, receives ? dst : NULL, root);
}

/* Sets the overlap of the parameter with this rank's shard in the fp32 master, and the
 * working-dtype copy derived from it. Gathered copies of the layer are dropped first so no
 * fetch sees the old values. */
zt_status zt_rt_param_write(zt_runtime *rt, int param_id, const float *src, int64_t numel)
{
    const zt_param *p = &rt->reg.params[param_id];
    zt_layer *L = &rt->reg.layers[p->layer];
    if (numel != p->numel)
        return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                      "parameter '%s' has %lld elements, the source holds %lld", p->name,
                      (long long)p->numel, (long long)numel);
    for (int64_t i = 0; i < numel; i++)
        if (!isfinite(src[i]))
            return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                          "zt_param_write('%s'): element %lld is %g; parameters must be finite",
                          p->name, (long long)i, (double)src[i]);
    zt_status st = zt_rt_drain_optimizer(rt);
    if (st == ZT_OK)
        st = zt_home_load(&rt->tiers.homes, &L->master, rt->opt.staging, &rt->err);
    if (st != ZT_OK)
        return st;
    zt_prefetcher_invalidate(rt->prefetch);
    int64_t a, b, at;
    zt_param_in_shard(rt, p, &a, &b, &at);
    memcpy((float *)rt->opt.staging + at, src + a, (size_t)(b - a) * sizeof(float));
    return zt_layer_set_master(rt, L, rt->opt.staging);
}

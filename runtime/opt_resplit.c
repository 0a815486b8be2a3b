/* SPDX-License-Identifier: MIT */
/* offload_optimizer.ratio "auto" after a step (opt_resplit.h): the split the forward time
 * allows, and the move of whole layers' optimizer state to it. */
#include "runtime/opt_resplit.h"
#include "core/log.h"
#include "runtime/opt_split.h"
#include "runtime/plan.h"

/* One layer's optimizer state where its (new) opt_device puts it: master, m, v and the
 * gradient sums (zero at a step boundary) in fresh homes, the values copied through the
 * staging buffer, then the old homes freed: a failure leaves the layer as it was. */
typedef struct moved_state {
    zt_home master, m, v;
    void *acc;
} moved_state;

static zt_status copy_home(zt_runtime *rt, zt_homes *h, zt_home *from, zt_home *to)
{
    zt_status st = zt_home_load(h, from, rt->opt.staging, &rt->err);
    return st == ZT_OK ? zt_home_store(h, to, rt->opt.staging, &rt->err) : st;
}

static zt_status alloc_moved(zt_runtime *rt, const zt_plan *plan, zt_layer *L, moved_state *n)
{
    zt_tier_kind opt = zt_plan_optim_tier(plan, L);
    uint64_t bytes = (uint64_t)L->shard_numel * 4;
    zt_homes oh = rt->tiers.homes, mh;
    oh.swap = rt->tiers.optim_swap;
    mh = oh;
    mh.pin = zt_plan_master_to_device(plan, L);
    zt_status st = ZT_OK;
    if (zt_plan_master_is_param(plan, L)) /* fp32 host parameters: the device wrote the same */
        zt_home_share(&L->param_home, L->name, &n->master);
    else if ((st = zt_home_alloc(&mh, zt_plan_master_tier(plan, L), bytes, L->name, &n->master,
                                 &rt->err)) == ZT_OK)
        st = copy_home(rt, &oh, &L->master, &n->master);
    if (st == ZT_OK && (st = zt_home_alloc(&oh, opt, bytes, L->name, &n->m, &rt->err)) == ZT_OK)
        st = copy_home(rt, &oh, &L->exp_avg, &n->m);
    if (st == ZT_OK && (st = zt_home_alloc(&oh, opt, bytes, L->name, &n->v, &rt->err)) == ZT_OK)
        st = copy_home(rt, &oh, &L->exp_avg_sq, &n->v);
    if (st != ZT_OK)
        return st;
    if (L->opt_device) {
        void *host_acc = L->grad_acc;
        st = zt_dev_opt_alloc_acc(rt, L); /* zeroed on the device */
        n->acc = L->grad_acc;
        L->grad_acc = host_acc;
        return st;
    }
    L->norm_valid = 0;
    return zt_host_tier_alloc(&rt->tiers.host,
                              (uint64_t)L->shard_numel * zt_dtype_size(rt->reg.acc_dtype), L->name,
                              &n->acc, &rt->err);
}

/* Frees the accumulator of the placement opt_device says (the layer's, or a new one). */
static void free_acc(zt_runtime *rt, const zt_layer *L, int on_device, void *acc)
{
    if (!acc)
        return;
    if (on_device)
        zt_device_free(rt->device.dev, acc);
    else
        zt_host_tier_free(&rt->tiers.host, acc,
                          (uint64_t)L->shard_numel * zt_dtype_size(rt->reg.acc_dtype));
}

static void free_moved(zt_runtime *rt, moved_state *s, const zt_layer *L, int acc_on_device)
{
    zt_homes h = rt->tiers.homes;
    zt_home_free(&h, &s->master);
    zt_home_free(&h, &s->m);
    zt_home_free(&h, &s->v);
    free_acc(rt, L, acc_on_device, s->acc);
}

static zt_status move_layer(zt_runtime *rt, const zt_plan *plan, zt_layer *L)
{
    moved_state n = {0};
    L->opt_device = !L->opt_device; /* the plan's tiers for it follow the flag */
    zt_status st = alloc_moved(rt, plan, L, &n);
    if (st != ZT_OK) {
        free_moved(rt, &n, L, L->opt_device);
        L->opt_device = !L->opt_device; /* where it still is */
        zt_error_prefix(&rt->err,
                        "moving the optimizer state of layer '%s' to %s memory: ", L->name,
                        L->opt_device ? "host" : "device");
        return st;
    }
    moved_state old = {L->master, L->exp_avg, L->exp_avg_sq, L->grad_acc};
    free_moved(rt, &old, L, !L->opt_device);
    L->master = n.master, L->exp_avg = n.m, L->exp_avg_sq = n.v, L->grad_acc = n.acc;
    L->accum_count = 0;
    return ZT_OK;
}

/* Moves the layers whose placement differs between the first `old` and the first `k` on
 * the device; those leaving the device first, so that their memory makes room. */
static zt_status move_split(zt_runtime *rt, int old, int k)
{
    zt_plan plan; /* its tiers for a layer depend on the layer's flag alone */
    zt_plan_make(rt, rt->dist.world, &plan);
    zt_prefetcher_invalidate(rt->prefetch); /* gathered copies would hold the room */
    zt_status st = ZT_OK;
    for (int i = k; st == ZT_OK && i < old; i++)
        st = move_layer(rt, &plan, &rt->reg.layers[i]);
    for (int i = old; st == ZT_OK && i < k; i++)
        st = move_layer(rt, &plan, &rt->reg.layers[i]);
    double total = 0, dev = 0;
    rt->opt.dev_layers = 0;
    for (int i = 0; i < rt->reg.n_layers; i++) { /* as moved, a failure included */
        const zt_layer *L = &rt->reg.layers[i];
        rt->opt.dev_layers += L->opt_device;
        total += (double)L->shard_numel;
        dev += L->opt_device ? (double)L->shard_numel : 0;
    }
    rt->opt.cpu_ratio = total > 0 ? (float)(1.0 - dev / total) : 1.0f;
    return st;
}

zt_status zt_opt_split_refine(zt_runtime *rt)
{
    if (!rt->opt.resplit || rt->fwd.measured == 0)
        return ZT_OK;
    double f = rt->fwd.min_s; /* a forward that waited for the CPU is longer, never shorter */
    int want = zt_opt_split_for_forward(rt, f, rt->opt.cpu_rate);
    int k = want < rt->opt.split_max_layers ? want : rt->opt.split_max_layers;
    if (want > k && !rt->opt.resplit_warned) {
        rt->opt.resplit_warned = 1;
        ZT_LOGW("optimizer",
                "offload_optimizer.ratio \"auto\": the CPU's Adam (%.3g elements/s) cannot "
                "update its share within the %.3g s forward: that needs %d layers' state on the "
                "device and the device budget holds %d; each step waits for the CPU's update "
                "(raise ztier.hbm_capacity, or shorten the CPU's share with more CPU threads)",
                rt->opt.cpu_rate, f, want, k);
    }
    int old = rt->opt.dev_layers;
    if (k == old)
        return ZT_OK;
    zt_status st = zt_rt_step_complete(rt); /* the CPU's share of this step updated first */
    if (st == ZT_OK)
        st = move_split(rt, old, k);
    if (st != ZT_OK) {
        rt->opt.resplit = 0; /* the layers stay as moved; no further moves */
        return st;
    }
    rt->stats.optimizer_resplits++;
    if (rt->dist.rank == 0)
        ZT_LOGI("optimizer",
                "offload_optimizer.ratio \"auto\": forward %.3g s, CPU Adam %.3g elements/s: "
                "%d of %d layers' optimizer state now on the device (was %d), the CPU's share "
                "%.3f",
                f, rt->opt.cpu_rate, k, rt->reg.n_layers, old, (double)rt->opt.cpu_ratio);
    return ZT_OK;
}

#include "prefetch/prefetch.h"
#include "prefetch/gather.h"
#include "prefetch/schedule.h"
#include "core/log.h"
#include "runtime/zeropp.h"

#include <stdlib.h>

static int held(const zt_layer *L) { return zt_layer_holds(L); }

static zt_sched_limits limits(const zt_runtime *rt)
{
    zt_sched_limits lim = {rt->cfg.stage3_prefetch_bucket_size,
                           rt->cfg.stage3_max_live_parameters,
                           rt->cfg.stage3_max_reuse_distance};
    return lim;
}

/* The scheduler's view of every layer now (rt->sched, sized at commit). */
static const zt_sched_layer *snapshot(const zt_runtime *rt)
{
    for (int i = 0; i < rt->n_layers; i++) {
        const zt_layer *L = &rt->layers[i];
        rt->sched[i] = (zt_sched_layer){L->flat_numel, L->persistent,
                                        L->gstate != ZT_GATHER_NONE,
                                        L->gstate == ZT_GATHER_READY, held(L)};
    }
    return rt->sched;
}

/* Moves each layer of the window one stage on. A failure only cancels that layer's
 * prefetch: its own fetch redoes the work and reports the error with its context. */
static void advance_window(zt_runtime *rt, int current)
{
    int ids[ZT_SCHED_LOOKAHEAD];
    zt_sched_limits lim = limits(rt);
    int n = zt_sched_window(&lim, &rt->trace, snapshot(rt), rt->n_layers, current, ids,
                            ZT_SCHED_LOOKAHEAD);
    for (int i = 0; i < n; i++) {
        zt_layer *L = &rt->layers[ids[i]];
        zt_error err = {0};
        if (zt_gather_advance(rt, L, 0, &err) != ZT_OK)
            ZT_LOGD("prefetch", "prefetch of layer '%s' cancelled: %s", L->name, err.msg);
    }
}

static void report_deviation(zt_runtime *rt, int layer, zt_pass pass)
{
    ZT_LOGW("prefetch",
            "layer order changed: fetch of '%s' (%s) at call %d of the step differs from the "
            "recorded order; prefetching pauses and the order is re-recorded this step",
            rt->layers[layer].name, pass == ZT_FORWARD ? "forward" : "backward",
            rt->trace.next_n);
    for (int i = 0; i < rt->n_layers; i++) {
        zt_layer *L = &rt->layers[i];
        if (i != layer && !held(L) && L->gstate != ZT_GATHER_NONE)
            zt_gather_drop(rt, L);
    }
}

void zt_prefetch_observe(zt_runtime *rt, int layer, zt_pass pass)
{
    int was_valid = rt->trace.valid && !rt->trace.deviated;
    int r = zt_trace_observe(&rt->trace, layer, pass);
    if (r == 0 && was_valid)
        report_deviation(rt, layer, pass);
}

void zt_prefetch_advance(zt_runtime *rt, int current)
{
    if (rt->trace.valid && !rt->trace.deviated)
        advance_window(rt, current);
}

int zt_prefetch_keep(const zt_runtime *rt, const zt_layer *L)
{
    zt_sched_limits lim = limits(rt);
    return zt_sched_keep(&lim, &rt->trace, snapshot(rt), rt->n_layers, (int)(L - rt->layers));
}

void zt_prefetch_drop_unheld(zt_runtime *rt)
{
    for (int i = 0; i < rt->n_layers; i++) /* hpZ slices of the old parameters go too */
        if (rt->layers[i].secondary && !rt->layers[i].from_secondary)
            zt_hpz_release(rt, &rt->layers[i]);
    for (int i = 0; i < rt->n_layers; i++) {
        zt_layer *L = &rt->layers[i];
        if (!held(L) && L->gstate != ZT_GATHER_NONE)
            zt_gather_drop(rt, L);
    }
}

void zt_prefetch_after_step(zt_runtime *rt)
{
    zt_trace_end_step(&rt->trace);
    advance_window(rt, -1);
}

int zt_prefetch_evict_one(zt_runtime *rt)
{
    int victim = zt_sched_victim(&rt->trace, snapshot(rt), rt->n_layers);
    if (victim < 0)
        return 0;
    ZT_LOGD("prefetch", "evicting gathered layer '%s' to make room", rt->layers[victim].name);
    zt_gather_drop(rt, &rt->layers[victim]);
    rt->stats.evictions++;
    return 1;
}

zt_status zt_device_alloc_evicting(zt_runtime *rt, size_t bytes, void **ptr, zt_error *err)
{
    for (;;) {
        zt_status st = rt->dev->iface->alloc(rt->dev, bytes, ptr, err);
        if (st != ZT_ERR_DEVICE_NOMEM || !zt_prefetch_evict_one(rt))
            return st;
    }
}

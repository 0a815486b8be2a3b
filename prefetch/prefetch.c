#include "prefetch/prefetch.h"
#include "prefetch/gather.h"
#include "runtime/log.h"
#include "runtime/zeropp.h"

/* Look no further than this many trace entries ahead. */
#define PREFETCH_MAX_LOOKAHEAD 64

static int held(const zt_layer *L) { return zt_layer_holds(L); }

static int64_t live_elements(const zt_runtime *rt)
{
    int64_t live = 0;
    for (int i = 0; i < rt->n_layers; i++)
        if (rt->layers[i].gstate != ZT_GATHER_NONE && !rt->layers[i].persistent)
            live += rt->layers[i].flat_numel;
    return live;
}

/* Moves each layer of the window one stage on. A failure only cancels that layer's
 * prefetch: its own fetch redoes the work and reports the error with its context. */
static void advance_window(zt_runtime *rt, int current)
{
    int64_t bucket = rt->cfg.stage3_prefetch_bucket_size;
    int64_t live = live_elements(rt), ahead = 0;
    if (bucket <= 0)
        return;
    for (int k = 0; k < PREFETCH_MAX_LOOKAHEAD; k++) {
        zt_trace_entry e;
        if (!zt_trace_peek(&rt->trace, k, &e))
            break;
        zt_layer *L = &rt->layers[e.layer];
        if (e.layer == current || L->gstate == ZT_GATHER_READY)
            continue;
        if (ahead > 0 && ahead + L->flat_numel > bucket)
            break;
        if (L->gstate == ZT_GATHER_NONE) {
            if (live + L->flat_numel > rt->cfg.stage3_max_live_parameters)
                break;
            live += L->flat_numel;
        }
        ahead += L->flat_numel;
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
    int64_t distance = 0;
    if (live_elements(rt) > rt->cfg.stage3_max_live_parameters)
        return 0;
    int self = (int)(L - rt->layers);
    for (int k = 0; k < PREFETCH_MAX_LOOKAHEAD; k++) {
        zt_trace_entry e;
        if (!zt_trace_peek(&rt->trace, k, &e))
            return 0;
        if (e.layer == self)
            return distance <= rt->cfg.stage3_max_reuse_distance;
        distance += rt->layers[e.layer].flat_numel;
    }
    return 0;
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

/* Position of the next use of layer `id` in the trace, or a large number if none. */
static int next_use(const zt_runtime *rt, int id)
{
    for (int k = 0; k < PREFETCH_MAX_LOOKAHEAD; k++) {
        zt_trace_entry e;
        if (!zt_trace_peek(&rt->trace, k, &e))
            break;
        if (e.layer == id)
            return k;
    }
    return 1 << 30;
}

int zt_prefetch_evict_one(zt_runtime *rt)
{
    int victim = -1, furthest = -1;
    for (int i = 0; i < rt->n_layers; i++) {
        const zt_layer *L = &rt->layers[i];
        if (held(L) || L->gstate == ZT_GATHER_NONE || L->persistent)
            continue;
        int k = next_use(rt, i);
        if (k > furthest)
            victim = i, furthest = k;
    }
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

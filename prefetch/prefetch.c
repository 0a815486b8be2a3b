#include "prefetch/prefetch.h"
#include "prefetch/gather.h"
#include "runtime/log.h"

/* Look no further than this many trace entries ahead. */
#define PREFETCH_MAX_LOOKAHEAD 64

static int held(const zt_layer *L) { return L->holds[ZT_FORWARD] + L->holds[ZT_BACKWARD]; }

static int64_t live_elements(const zt_runtime *rt)
{
    int64_t live = 0;
    for (int i = 0; i < rt->n_layers; i++)
        if (rt->layers[i].gstate != ZT_GATHER_NONE)
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
        if (zt_gather_advance(rt, L, &err) != ZT_OK)
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

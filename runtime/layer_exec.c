/* SPDX-License-Identifier: MIT */
/* Per-layer execution: fetch makes a layer's full parameters ready through the prefetcher
 * (and allocates zeroed gradient buffers for the backward pass), bringing the layer up to
 * date first when an overlapped step is in progress; release ends the hold and, after a
 * backward pass, hands the gradients to the reduction (runtime/reduce.c).
 *
 * With the caller's stream (zt_fetch_async / zt_release_async) nothing here waits for the
 * device on a single rank: a fetch orders the caller's stream after the layer's copy and
 * zeroes gradients on that stream; a release first records the caller's stream on ztier's
 * stream, the fence of every device free (no buffer is reused before the caller's stream
 * passes its release). Every wait for the device is counted (zt_stats.host_syncs).
 *
 * Mixing the forms: a blocking release of a layer fetched with a stream first waits on the
 * host for that stream (and the one its gradients were zeroed on), so that nothing it sums
 * or frees is still to be written by the caller's stream. */
#include "core/align.h"
#include "core/convert.h"
#include "core/time.h"
#include "core/trace.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *pass_name(zt_pass pass)
{
    return pass == ZT_FORWARD ? "forward" : pass == ZT_BACKWARD ? "backward" : "inference";
}

/* Zeroed gradient buffers: on the caller's stream, or on rt->device.stream and waited for. */
static zt_status alloc_grads(zt_runtime *rt, zt_layer *L, zt_stream *caller)
{
    size_t bytes = (size_t)L->flat_numel * zt_dtype_size(rt->reg.dtype);
    zt_status st = zt_prefetcher_alloc(rt->prefetch, bytes, &L->grads, &rt->err);
    zt_stream *s = caller ? caller : rt->device.stream;
    if (st == ZT_OK)
        st = zt_device_memset_async(rt->device.dev, L->grads, 0, bytes, s, &rt->err);
    if (st == ZT_OK && !caller)
        st = zt_rt_sync_stream(rt, s);
    L->grads_stream = caller;
    return st;
}

/* The blocking release of a layer an async fetch gave a stream: the host waits for the
 * streams whose work may still touch the layer's buffers (the gradients' memset, the
 * caller's kernels), as the blocking form's caller would have for its own work. */
static zt_status wait_fetch_streams(zt_runtime *rt, zt_layer *L, zt_pass pass)
{
    zt_stream *s = L->fetch_stream[pass];
    zt_stream *g = pass == ZT_BACKWARD && L->grads ? L->grads_stream : NULL;
    zt_status st = s ? zt_rt_sync_stream(rt, s) : ZT_OK;
    if (st == ZT_OK && g && g != s)
        st = zt_rt_sync_stream(rt, g);
    return st;
}

void zt_rt_forget_stream(zt_runtime *rt, const zt_stream *s)
{
    zt_fwd_forget_stream(&rt->fwd, rt->device.dev, s);
    for (int i = 0; i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        for (int p = 0; p < 3; p++)
            if (L->fetch_stream[p] == s)
                L->fetch_stream[p] = NULL;
        if (L->grads_stream == s)
            L->grads_stream = NULL;
        if (L->act_stream == s)
            L->act_stream = NULL;
    }
}

/* The parameters are complete once `ready` is: the caller's stream waits for it, or the
 * host does. */
static zt_status order_after(zt_runtime *rt, zt_event *ready, zt_stream *caller)
{
    if (!ready)
        return ZT_OK;
    if (caller)
        return zt_device_stream_wait_event(rt->device.dev, caller, ready, &rt->err);
    if (zt_device_event_query(rt->device.dev, ready) == 1)
        return ZT_OK;
    return zt_rt_sync_event(rt, ready);
}

static void fill_views(zt_runtime *rt, zt_layer *L, zt_pass pass, void *full, zt_layer_view *view)
{
    size_t dsize = zt_dtype_size(rt->reg.dtype);
    /* inference passes use the forward views: no gradients */
    zt_tensor_view *views = L->views + (pass == ZT_BACKWARD ? L->n_params : 0);
    for (int i = 0; i < L->n_params; i++) {
        const zt_param *p = &rt->reg.params[L->param_ids[i]];
        zt_tensor_view *v = &views[i];
        v->name = p->name;
        v->param_id = L->param_ids[i];
        v->dtype = rt->reg.dtype;
        v->ndim = p->ndim;
        memcpy(v->shape, p->shape, sizeof v->shape);
        v->numel = p->numel;
        v->data = (char *)full + (size_t)p->offset * dsize;
        v->grad = pass == ZT_BACKWARD ? (char *)L->grads + (size_t)p->offset * dsize : NULL;
    }
    view->layer = (int)(L - rt->reg.layers);
    view->n_params = L->n_params;
    view->params = views;
}

zt_status zt_rt_fetch(zt_runtime *rt, int layer, zt_pass pass, zt_stream *caller,
                      zt_layer_view *view)
{
    zt_layer *L = &rt->reg.layers[layer];
    double t0 = zt_now_s();
    zt_fwd_on_fetch(&rt->fwd, rt->device.dev, pass,
                    caller); /* the forward time's ends (fwd_time.h) */
    zt_rt_poll_reductions(rt);
    zt_status updated = ZT_OK; /* the step's update of the layer (see below) */
    /* the optimizer state is read while the backward pass runs, once the step is done */
    if (pass == ZT_BACKWARD && (updated = zt_rt_step_complete(rt)) == ZT_OK)
        zt_nvme_step_preread(rt->opt.nvme_step, rt->opt.shards, rt->reg.n_layers);
    /* With an overlapped step in progress, this layer and the next one in the step's order
     * are updated: the next one's state was read while the caller computed this layer's
     * predecessor, and once updated it may be prefetched like any other. */
    if (pass != ZT_BACKWARD && rt->train.step_cleared < rt->reg.n_layers)
        updated = zt_rt_step_through(rt, layer + 1 < rt->reg.n_layers ? layer + 1 : layer);
    void *full = NULL;
    zt_event *ready = NULL;
    zt_status st = zt_prefetcher_fetch(rt->prefetch, layer, pass, &full, &ready, &rt->err);
    int held = st == ZT_OK;
    /* A failed update is reported after the gather, whose collectives every rank issues
     * alike (the gather updates the layer before it reads its home; a failure there is
     * kept in rt->async_err and found here). */
    if (st == ZT_OK)
        st = updated != ZT_OK ? updated : zt_rt_step_through(rt, layer);
    /* held from here on, so making room for the gradients cannot evict it */
    if (st == ZT_OK && pass == ZT_BACKWARD && !L->grads)
        st = alloc_grads(rt, L, caller);
    if (st == ZT_OK)
        st = order_after(rt, ready, caller);
    if (st != ZT_OK) {
        if (held) /* this call's hold is undone */
            zt_prefetcher_release(rt->prefetch, layer, pass);
        zt_error_prefix(&rt->err, "fetch of layer '%s' (%s): ", L->name, pass_name(pass));
        return st;
    }
    if (caller) /* a blocking release waits for it (mixing the forms) */
        L->fetch_stream[pass] = caller;
    fill_views(rt, L, pass, full, view);
    double t1 = zt_now_s();
    rt->stats.fetch_wait_s += t1 - t0;
    rt->stats.fetches++;
    zt_trace_span("fetch", t0, "fetch %s (%s)", L->name, pass_name(pass));
    if (zt_prefetcher_holds(rt->prefetch, layer, pass) == 1)
        L->fetched_at[pass] = t1;
    return ZT_OK;
}

zt_status zt_rt_release(zt_runtime *rt, int layer, zt_pass pass, zt_stream *caller)
{
    zt_layer *L = &rt->reg.layers[layer];
    int holds = zt_prefetcher_holds(rt->prefetch, layer, pass);
    if (holds == 0)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "release of layer '%s' (%s) without a matching fetch: it is not held "
                      "for that pass (double release?)",
                      L->name, pass_name(pass));
    double t0 = zt_now_s();
    /* first, so that every free below (and the kept buffer's later one) waits for the
     * caller's stream */
    zt_status st = caller ? zt_rt_fence_after_caller(rt, caller) : wait_fetch_streams(rt, L, pass);
    if (st != ZT_OK) {
        zt_error_prefix(&rt->err, "release of layer '%s' (%s): ", L->name, pass_name(pass));
        return st; /* still held: the caller may retry or destroy */
    }
    if (holds == 1)
        zt_trace_async("layer", L->fetched_at[pass], "%s (%s)", L->name, pass_name(pass));
    /* released first: its parameters are no longer needed, so the reduction below may use
     * their room */
    zt_prefetcher_release(rt->prefetch, layer, pass);
    if (holds == 1)
        L->fetch_stream[pass] = NULL;
    if (pass == ZT_BACKWARD && holds == 1) {
        /* the step's update of this layer reads its sums: done (and the sums cleared) first;
         * a failure is reported after the collective, which every rank joins alike */
        zt_status updated = zt_rt_step_through(rt, layer);
        st = zt_rt_reduce_release(rt, L, caller);
        st = updated != ZT_OK ? updated : st;
        if (st != ZT_OK)
            zt_error_prefix(&rt->err, "release of layer '%s' (backward): ", L->name);
    }
    zt_rt_poll_reductions(rt);
    rt->stats.releases++;
    zt_trace_span("release", t0, "release %s (%s)", L->name, pass_name(pass));
    return st;
}

int zt_rt_layers_held(const zt_runtime *rt)
{
    return rt->prefetch ? zt_prefetcher_held(rt->prefetch) : 0;
}

void zt_rt_describe_held(const zt_runtime *rt, char *out, size_t len)
{
    size_t used = 0;
    int shown = 0;
    out[0] = '\0';
    for (int i = 0; i < rt->reg.n_layers && used < len; i++)
        for (int p = 0; p < 3 && used < len; p++) {
            int holds = zt_prefetcher_holds(rt->prefetch, i, (zt_pass)p);
            if (!holds)
                continue;
            if (shown++ == 8) { /* enough to find the missing release */
                snprintf(out + used, len - used, ", ...");
                return;
            }
            int n = snprintf(out + used, len - used, "%s'%s' (%s%s)", used ? ", " : "",
                             rt->reg.layers[i].name, pass_name((zt_pass)p),
                             holds > 1 ? ", nested" : "");
            used += n > 0 ? (size_t)n : 0;
        }
}

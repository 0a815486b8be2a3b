/* Per-layer execution: fetch gathers a layer's full parameters into device memory (and
 * zeroed gradient buffers for the backward pass); release frees them and, after a backward
 * pass, reduce-scatters the gradients and accumulates this rank's shard in fp32. */
#include "prefetch/gather.h"
#include "core/time.h"
#include "prefetch/prefetch.h"
#include "core/log.h"
#include "runtime/step_nvme.h"
#include "runtime/zeropp.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *pass_name(zt_pass pass)
{
    return pass == ZT_FORWARD ? "forward" : pass == ZT_BACKWARD ? "backward" : "inference";
}

static zt_status alloc_grads(zt_runtime *rt, zt_layer *L)
{
    size_t bytes = (size_t)L->flat_numel * zt_dtype_size(rt->dtype);
    zt_status st = zt_device_alloc_evicting(rt, bytes, &L->grads, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->memset_async(rt->dev, L->grads, 0, bytes, rt->stream, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->stream_synchronize(rt->dev, rt->stream, &rt->err);
    return st;
}

static void fill_views(zt_runtime *rt, zt_layer *L, zt_pass pass, zt_layer_view *view)
{
    size_t dsize = zt_dtype_size(rt->dtype);
    zt_tensor_view *views = L->views + (pass == ZT_BACKWARD ? L->n_params : 0); /* inference:
                                                                    the forward views */
    for (int i = 0; i < L->n_params; i++) {
        const zt_param *p = &rt->params[L->param_ids[i]];
        zt_tensor_view *v = &views[i];
        v->name = p->name;
        v->param_id = L->param_ids[i];
        v->dtype = rt->dtype;
        v->ndim = p->ndim;
        memcpy(v->shape, p->shape, sizeof v->shape);
        v->numel = p->numel;
        v->data = (char *)L->gathered + (size_t)p->offset * dsize;
        v->grad = pass == ZT_BACKWARD ? (char *)L->grads + (size_t)p->offset * dsize : NULL;
    }
    view->layer = (int)(L - rt->layers);
    view->n_params = L->n_params;
    view->params = views;
}

/* Brings the layer to READY: its copy and all-gather are issued before the prefetch window
 * moves on, so this layer's collective precedes the ones the window issues. An inference
 * fetch does not move the window: it is outside the recorded order. */
static zt_status gather_layer(zt_runtime *rt, zt_layer *L, int move_window)
{
    zt_status st = ZT_OK;
    while (st == ZT_OK && L->gstate != ZT_GATHER_COMM && L->gstate != ZT_GATHER_READY)
        st = zt_gather_advance(rt, L, 1, &rt->err);
    if (st == ZT_OK && move_window)
        zt_prefetch_advance(rt, (int)(L - rt->layers));
    if (st == ZT_OK)
        st = zt_gather_complete(rt, L, &rt->err);
    return st;
}

zt_status zt_rt_fetch(zt_runtime *rt, int layer, zt_pass pass, zt_layer_view *view)
{
    zt_layer *L = &rt->layers[layer];
    double t0 = zt_now_s();
    int training = pass != ZT_INFERENCE;
    if (training)
        zt_prefetch_observe(rt, layer, pass);
    if (pass == ZT_BACKWARD && rt->optim_swap) /* the optimizer state is read during backward */
        zt_step_nvme_preread(rt);
    if (L->gstate != ZT_GATHER_NONE && !L->persistent)
        rt->stats.prefetch_hits++;
    zt_status st = gather_layer(rt, L, training);
    if (st == ZT_OK) {
        L->holds[pass]++; /* held from here on, so making room for gradients cannot evict it */
        if (pass == ZT_BACKWARD && !L->grads)
            st = alloc_grads(rt, L);
        if (st != ZT_OK && --L->holds[pass] == 0 && zt_layer_holds(L) == 0)
            zt_gather_drop(rt, L);
    }
    if (st != ZT_OK) {
        zt_error_prefix(&rt->err, "fetch of layer '%s' (%s): ", L->name, pass_name(pass));
        return st;
    }
    fill_views(rt, L, pass, view);
    rt->stats.fetch_wait_s += zt_now_s() - t0;
    rt->stats.fetches++;
    return ZT_OK;
}

/* grad_acc += shard, converting from dtype. */
static void accumulate_shard(zt_runtime *rt, zt_layer *L, const void *shard, zt_dtype dtype)
{
    const float *g = shard;
    if (dtype != ZT_F32) {
        zt_convert_array(rt->staging, ZT_F32, shard, dtype, (size_t)L->shard_numel);
        g = rt->staging;
    }
    float *acc = L->grad_acc;
    for (int64_t i = 0; i < L->shard_numel; i++)
        acc[i] += g[i];
}

/* 16-bit gradients are widened to fp32 on the device before they are summed over ranks, so
 * no rank's contribution is rounded to 16 bits in the sum. */
static zt_status widen_grads(zt_runtime *rt, zt_layer *L, void **wide)
{
    size_t n = (size_t)L->flat_numel;
    zt_status st = zt_device_alloc_evicting(rt, n * sizeof(float), wide, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->cast_async(rt->dev, *wide, ZT_F32, L->grads, rt->dtype, n,
                                        rt->stream, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->stream_synchronize(rt->dev, rt->stream, &rt->err);
    return st;
}

/* Sums the layer's gradients over ranks into this rank's shard (in place at the start of
 * the buffer), copies it to the host and adds it to the fp32 accumulator. */
static zt_status reduce_grads(zt_runtime *rt, zt_layer *L)
{
    void *buf = L->grads, *wide = NULL;
    zt_dtype dt = rt->dtype;
    zt_status st = ZT_OK;
    if (dt != ZT_F32 && rt->world > 1) {
        st = widen_grads(rt, L, &wide);
        buf = wide, dt = ZT_F32;
    }
    if (st == ZT_OK && rt->cfg.zero_quantized_gradients && rt->world > 1 && !L->persistent) {
        st = zt_qgz_reduce(rt, L, buf, &rt->err); /* host memory: the host device backend */
        if (wide)
            rt->dev->iface->free(rt->dev, wide);
        if (st == ZT_OK)
            L->accum_count++;
        return st;
    }
    zt_comm_req req = {0};
    if (st == ZT_OK)
        zt_comm_count(rt, (uint64_t)L->shard_numel * zt_dtype_size(dt) * (L->persistent ? 2 : 1));
    if (st == ZT_OK && L->persistent) /* replicated: every rank needs the whole sum */
        st = rt->comm->iface->allreduce(rt->comm, buf, buf, (size_t)L->shard_numel,
                                        zt_comm_dtype_of(dt), ZT_REDUCE_SUM, &req, &rt->err);
    else if (st == ZT_OK)
        st = rt->comm->iface->reduce_scatter(rt->comm, buf, buf, (size_t)L->shard_numel,
                                             zt_comm_dtype_of(dt), ZT_REDUCE_SUM, &req, &rt->err);
    if (st == ZT_OK)
        st = rt->comm->iface->wait(rt->comm, &req, &rt->err);
    void *host = rt->staging_lp; /* holds one fp32 shard */
    size_t bytes = (size_t)L->shard_numel * zt_dtype_size(dt);
    if (st == ZT_OK)
        st = zt_device_copy_sync(rt->dev, host, buf, bytes, ZT_COPY_D2H, rt->stream, &rt->err);
    if (wide)
        rt->dev->iface->free(rt->dev, wide);
    if (st != ZT_OK)
        return st;
    rt->stats.d2h_bytes += bytes;
    rt->stats.reduced_bytes += (uint64_t)L->flat_numel * zt_dtype_size(dt);
    accumulate_shard(rt, L, host, dt);
    L->accum_count++;
    return ZT_OK;
}

zt_status zt_rt_release(zt_runtime *rt, int layer, zt_pass pass)
{
    zt_layer *L = &rt->layers[layer];
    if (L->holds[pass] == 0)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "release of layer '%s' (%s) without a matching fetch: it is not held "
                      "for that pass (double release?)",
                      L->name, pass_name(pass));
    L->holds[pass]--;
    zt_status st = ZT_OK;
    if (pass == ZT_BACKWARD && L->holds[ZT_BACKWARD] == 0) {
        st = reduce_grads(rt, L);
        rt->dev->iface->free(rt->dev, L->grads);
        L->grads = NULL;
        if (st != ZT_OK)
            zt_error_prefix(&rt->err, "release of layer '%s' (backward): ", L->name);
    }
    if (zt_layer_holds(L) == 0 && !zt_prefetch_keep(rt, L))
        zt_gather_drop(rt, L);
    rt->stats.releases++;
    return st;
}

int zt_rt_layers_held(const zt_runtime *rt)
{
    int held = 0;
    for (int i = 0; i < rt->n_layers; i++)
        held += zt_layer_holds(&rt->layers[i]);
    return held;
}

void zt_rt_describe_held(const zt_runtime *rt, char *out, size_t len)
{
    size_t used = 0;
    int shown = 0;
    out[0] = '\0';
    for (int i = 0; i < rt->n_layers && used < len; i++)
        for (int p = 0; p < 3 && used < len; p++) {
            if (!rt->layers[i].holds[p])
                continue;
            if (shown++ == 8) { /* enough to find the missing release */
                snprintf(out + used, len - used, ", ...");
                return;
            }
            int n = snprintf(out + used, len - used, "%s'%s' (%s%s)", used ? ", " : "",
                             rt->layers[i].name, pass_name((zt_pass)p),
                             rt->layers[i].holds[p] > 1 ? ", nested" : "");
            used += n > 0 ? (size_t)n : 0;
        }
}

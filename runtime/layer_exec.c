/* Per-layer execution: fetch makes a layer's full parameters ready through the prefetcher
 * (and allocates zeroed gradient buffers for the backward pass); release ends the hold and,
 * after a backward pass, reduce-scatters the gradients and accumulates this rank's shard in
 * fp32. */
#include "core/convert.h"
#include "core/time.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <string.h>

static const char *pass_name(zt_pass pass)
{
    return pass == ZT_FORWARD ? "forward" : pass == ZT_BACKWARD ? "backward" : "inference";
}

static zt_status alloc_grads(zt_runtime *rt, zt_layer *L)
{
    size_t bytes = (size_t)L->flat_numel * zt_dtype_size(rt->dtype);
    zt_status st = zt_prefetcher_alloc(rt->prefetch, bytes, &L->grads, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->memset_async(rt->dev, L->grads, 0, bytes, rt->stream, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->stream_synchronize(rt->dev, rt->stream, &rt->err);
    return st;
}

static void fill_views(zt_runtime *rt, zt_layer *L, zt_pass pass, void *full,
                       zt_layer_view *view)
{
    size_t dsize = zt_dtype_size(rt->dtype);
    /* inference passes use the forward views: no gradients */
    zt_tensor_view *views = L->views + (pass == ZT_BACKWARD ? L->n_params : 0);
    for (int i = 0; i < L->n_params; i++) {
        const zt_param *p = &rt->params[L->param_ids[i]];
        zt_tensor_view *v = &views[i];
        v->name = p->name;
        v->param_id = L->param_ids[i];
        v->dtype = rt->dtype;
        v->ndim = p->ndim;
        memcpy(v->shape, p->shape, sizeof v->shape);
        v->numel = p->numel;
        v->data = (char *)full + (size_t)p->offset * dsize;
        v->grad = pass == ZT_BACKWARD ? (char *)L->grads + (size_t)p->offset * dsize : NULL;
    }
    view->layer = (int)(L - rt->layers);
    view->n_params = L->n_params;
    view->params = views;
}

zt_status zt_rt_fetch(zt_runtime *rt, int layer, zt_pass pass, zt_layer_view *view)
{
    zt_layer *L = &rt->layers[layer];
    double t0 = zt_now_s();
    if (pass == ZT_BACKWARD) /* the optimizer state is read while the backward pass runs */
        zt_nvme_step_preread(rt->nvme_step, rt->opt_shards, rt->n_layers);
    void *full = NULL;
    zt_status st = zt_prefetcher_fetch(rt->prefetch, layer, pass, &full, &rt->err);
    /* held from here on, so making room for the gradients cannot evict it */
    if (st == ZT_OK && pass == ZT_BACKWARD && !L->grads && (st = alloc_grads(rt, L)) != ZT_OK)
        zt_prefetcher_release(rt->prefetch, layer, pass);
    if (st != ZT_OK) {
        zt_error_prefix(&rt->err, "fetch of layer '%s' (%s): ", L->name, pass_name(pass));
        return st;
    }
    fill_views(rt, L, pass, full, view);
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
    zt_status st = zt_prefetcher_alloc(rt->prefetch, n * sizeof(float), wide, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->cast_async(rt->dev, *wide, ZT_F32, L->grads, rt->dtype, n,
                                        rt->stream, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->stream_synchronize(rt->dev, rt->stream, &rt->err);
    return st;
}

/* Sums over ranks (in place at the start of buf), copies this rank's shard to the host and
 * adds it to the fp32 accumulator. */
static zt_status reduce_in_place(zt_runtime *rt, zt_layer *L, void *buf, zt_dtype dt)
{
    zt_comm_req req = {0};
    zt_topology_count(&rt->topo,
                      (uint64_t)L->shard_numel * zt_dtype_size(dt) * (L->persistent ? 2 : 1));
    zt_status st = L->persistent /* replicated: every rank needs the whole sum */
                       ? rt->comm->iface->allreduce(rt->comm, buf, buf, (size_t)L->shard_numel,
                                                    zt_comm_dtype_of(dt), ZT_REDUCE_SUM, &req,
                                                    &rt->err)
                       : rt->comm->iface->reduce_scatter(rt->comm, buf, buf,
                                                         (size_t)L->shard_numel,
                                                         zt_comm_dtype_of(dt), ZT_REDUCE_SUM,
                                                         &req, &rt->err);
    if (st == ZT_OK)
        st = rt->comm->iface->wait(rt->comm, &req, &rt->err);
    void *host = rt->staging_lp; /* holds one fp32 shard */
    size_t bytes = (size_t)L->shard_numel * zt_dtype_size(dt);
    if (st == ZT_OK)
        st = zt_device_copy_sync(rt->dev, host, buf, bytes, ZT_COPY_D2H, rt->stream, &rt->err);
    if (st != ZT_OK)
        return st;
    rt->stats.d2h_bytes += bytes;
    rt->stats.reduced_bytes += (uint64_t)L->flat_numel * zt_dtype_size(dt);
    accumulate_shard(rt, L, host, dt);
    return ZT_OK;
}

/* Sums the layer's gradients over ranks into this rank's fp32 accumulator. What can fail
 * before the collective (widening, qgZ's buffers) is agreed on first, so a rank that fails
 * there stops every rank at once instead of leaving them in the collective. */
static zt_status reduce_grads(zt_runtime *rt, zt_layer *L)
{
    void *buf = L->grads, *wide = NULL;
    zt_dtype dt = rt->dtype;
    int qgz = rt->cfg.zero_quantized_gradients && rt->world > 1 && !L->persistent;
    int widen = dt != ZT_F32 && rt->world > 1;
    zt_status st = ZT_OK;
    if (widen) {
        st = widen_grads(rt, L, &wide);
        buf = wide, dt = ZT_F32;
    }
    if (widen || qgz) /* the same on every rank: the configuration decides */
        st = zt_comm_agree(rt->comm, st, "the gradient reduction", &rt->err);
    if (st == ZT_OK && qgz) /* host memory: the host device backend */
        st = zt_qgz_reduce(&rt->topo, buf, L->shard_numel, rt->cfg.quant_block_size,
                           L->grad_acc, L->name, &rt->err);
    else if (st == ZT_OK)
        st = reduce_in_place(rt, L, buf, dt);
    zt_device_tier_free(&rt->dtier, wide);
    if (st == ZT_OK)
        L->accum_count++;
    return st;
}

zt_status zt_rt_release(zt_runtime *rt, int layer, zt_pass pass)
{
    zt_layer *L = &rt->layers[layer];
    int holds = zt_prefetcher_holds(rt->prefetch, layer, pass);
    if (holds == 0)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "release of layer '%s' (%s) without a matching fetch: it is not held "
                      "for that pass (double release?)",
                      L->name, pass_name(pass));
    /* released first: its parameters are no longer needed, so the reduction below may use
     * their room */
    zt_prefetcher_release(rt->prefetch, layer, pass);
    zt_status st = ZT_OK;
    if (pass == ZT_BACKWARD && holds == 1) {
        st = reduce_grads(rt, L);
        zt_device_tier_free(&rt->dtier, L->grads);
        L->grads = NULL;
        if (st != ZT_OK)
            zt_error_prefix(&rt->err, "release of layer '%s' (backward): ", L->name);
    }
    rt->stats.releases++;
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
    for (int i = 0; i < rt->n_layers && used < len; i++)
        for (int p = 0; p < 3 && used < len; p++) {
            int holds = zt_prefetcher_holds(rt->prefetch, i, (zt_pass)p);
            if (!holds)
                continue;
            if (shown++ == 8) { /* enough to find the missing release */
                snprintf(out + used, len - used, ", ...");
                return;
            }
            int n = snprintf(out + used, len - used, "%s'%s' (%s%s)", used ? ", " : "",
                             rt->layers[i].name, pass_name((zt_pass)p),
                             holds > 1 ? ", nested" : "");
            used += n > 0 ? (size_t)n : 0;
        }
}

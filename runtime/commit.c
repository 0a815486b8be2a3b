/* Commit: freeze the registry, lay each layer out as one flat buffer split evenly over
 * ranks, place every shard on its tier, and write the initial values. */
#include "runtime/log.h"
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static void layout_layer(zt_runtime *rt, zt_layer *L)
{
    int64_t off = 0;
    for (int i = 0; i < L->n_params; i++) {
        zt_param *p = &rt->params[L->param_ids[i]];
        p->offset = off;
        off += round_up(p->numel, ZT_PARAM_ALIGN_ELEMS);
    }
    L->flat_numel = round_up(off ? off : 1, (int64_t)rt->world * ZT_PARAM_ALIGN_ELEMS);
    L->shard_numel = L->flat_numel / rt->world;
}

/* The optimizer runs on the CPU, so "none" (device) keeps its state in host memory. */
static zt_tier_kind optimizer_tier(const zt_runtime *rt)
{
    zt_tier_kind k = rt->cfg.offload_optimizer.device;
    return k == ZT_TIER_DEVICE ? ZT_TIER_HOST : k;
}

static zt_status place_layer(zt_runtime *rt, zt_layer *L)
{
    uint64_t shard = (uint64_t)L->shard_numel;
    zt_tier_kind opt = optimizer_tier(rt);
    zt_status st = zt_home_alloc(&rt->homes, rt->cfg.offload_param.device,
                                 shard * zt_dtype_size(rt->dtype), L->name, &L->param_home,
                                 &rt->err);
    if (st == ZT_OK)
        st = zt_home_alloc(&rt->homes, opt, shard * 4, L->name, &L->master, &rt->err);
    if (st == ZT_OK)
        st = zt_home_alloc(&rt->homes, opt, shard * 4, L->name, &L->exp_avg, &rt->err);
    if (st == ZT_OK)
        st = zt_home_alloc(&rt->homes, opt, shard * 4, L->name, &L->exp_avg_sq, &rt->err);
    if (st == ZT_OK)
        st = zt_host_tier_alloc(&rt->host, shard * 4, L->name, (void **)&L->grad_acc, &rt->err);
    if (st == ZT_OK)
        st = rt->dev->iface->event_create(rt->dev, &L->copied, &rt->err);
    if (st == ZT_OK && !(L->views = calloc(2 * (size_t)L->n_params, sizeof *L->views)))
        st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory for the views of layer '%s'",
                    L->name);
    return st;
}

/* Fills this rank's fp32 master shard of a layer from the parameters' initialisers. */
static void init_master_shard(zt_runtime *rt, const zt_layer *L, float *master)
{
    int64_t lo = (int64_t)rt->rank * L->shard_numel, hi = lo + L->shard_numel;
    memset(master, 0, (size_t)L->shard_numel * sizeof(float));
    for (int i = 0; i < L->n_params; i++) {
        const zt_param *p = &rt->params[L->param_ids[i]];
        int64_t a = p->offset > lo ? p->offset : lo;
        int64_t b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (a < b)
            zt_param_init_fill(p, a - p->offset, b - a, master + (a - lo));
    }
}

static zt_status init_layer(zt_runtime *rt, zt_layer *L)
{
    float *master = rt->staging;
    init_master_shard(rt, L, master);
    zt_status st = zt_home_store(&rt->homes, &L->master, master, &rt->err);
    if (st != ZT_OK)
        return st;
    void *working = master;
    if (rt->dtype != ZT_F32) {
        working = rt->staging_lp;
        zt_convert_array(working, rt->dtype, master, ZT_F32, (size_t)L->shard_numel);
    }
    return zt_home_store(&rt->homes, &L->param_home, working, &rt->err);
}

static zt_status alloc_staging(zt_runtime *rt)
{
    int64_t max_shard = 1;
    for (int i = 0; i < rt->n_layers; i++)
        if (rt->layers[i].shard_numel > max_shard)
            max_shard = rt->layers[i].shard_numel;
    /* Two halves: an fp32 shard and its working-dtype copy. */
    rt->staging_bytes = 2 * (size_t)max_shard * sizeof(float);
    zt_status st = zt_host_tier_alloc(&rt->host, rt->staging_bytes, "staging buffer",
                                      &rt->staging, &rt->err);
    rt->staging_lp = st == ZT_OK ? (char *)rt->staging + (size_t)max_shard * sizeof(float) : NULL;
    return st;
}

zt_status zt_rt_commit(zt_runtime *rt)
{
    if (rt->n_layers == 0)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE, "commit with no layers: add layers and parameters "
                                              "with zt_layer_add/zt_param_add first");
    for (int i = 0; i < rt->n_layers; i++)
        if (rt->layers[i].n_params == 0)
            return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                          "layer '%s' has no parameters; add at least one with zt_param_add",
                          rt->layers[i].name);
    for (int i = 0; i < rt->n_layers; i++)
        layout_layer(rt, &rt->layers[i]);
    zt_status st = alloc_staging(rt);
    for (int i = 0; st == ZT_OK && i < rt->n_layers; i++)
        st = place_layer(rt, &rt->layers[i]);
    for (int i = 0; st == ZT_OK && i < rt->n_layers; i++)
        st = init_layer(rt, &rt->layers[i]);
    if (st != ZT_OK)
        return st;
    rt->state = ZT_RT_COMMITTED;
    ZT_LOGI("runtime", "committed %d layers, %d parameters; host tier %llu bytes, device %llu",
            rt->n_layers, rt->n_params, (unsigned long long)rt->host.current,
            (unsigned long long)rt->dev->bytes_in_use);
    return ZT_OK;
}

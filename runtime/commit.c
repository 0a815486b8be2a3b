/* Commit: freeze the registry, lay each layer out as one flat buffer split evenly over
 * ranks, place every shard on its tier, and write the initial values. */
#include "runtime/log.h"
#include "runtime/runtime.h"
#include "runtime/step_nvme.h"

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
    /* Small layers are not worth a collective per use: every rank keeps all of them. */
    L->persistent = off < rt->cfg.stage3_param_persistence_threshold;
    int64_t ranks = L->persistent ? 1 : rt->world;
    L->flat_numel = round_up(off ? off : 1, ranks * ZT_PARAM_ALIGN_ELEMS);
    L->shard_numel = L->flat_numel / ranks;
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
    zt_homes ph = rt->homes, oh = rt->homes;
    ph.swap = rt->param_swap;
    oh.swap = rt->optim_swap;
    zt_tier_kind param_tier = L->persistent ? ZT_TIER_DEVICE : rt->cfg.offload_param.device;
    zt_status st = zt_home_alloc(&ph, param_tier,
                                 shard * zt_dtype_size(rt->dtype), L->name, &L->param_home,
                                 &rt->err);
    if (st == ZT_OK)
        st = zt_home_alloc(&oh, opt, shard * 4, L->name, &L->master, &rt->err);
    if (st == ZT_OK)
        st = zt_home_alloc(&oh, opt, shard * 4, L->name, &L->exp_avg, &rt->err);
    if (st == ZT_OK)
        st = zt_home_alloc(&oh, opt, shard * 4, L->name, &L->exp_avg_sq, &rt->err);
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
static zt_status init_master_shard(zt_runtime *rt, const zt_layer *L, float *master)
{
    memset(master, 0, (size_t)L->shard_numel * sizeof(float));
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < L->n_params; i++) {
        const zt_param *p = &rt->params[L->param_ids[i]];
        int64_t a, b, at;
        zt_param_in_shard(rt, p, &a, &b, &at);
        if (a < b)
            st = zt_param_init_fill(p, a, b - a, master + at, &rt->err);
    }
    return st;
}

static zt_status init_layer(zt_runtime *rt, zt_layer *L)
{
    zt_status st = init_master_shard(rt, L, rt->staging);
    if (st == ZT_OK)
        st = zt_layer_set_master(rt, L, rt->staging);
    if (st != ZT_OK || L->exp_avg.kind != ZT_TIER_NVME)
        return st; /* host and device homes start zeroed */
    memset(rt->staging, 0, (size_t)L->shard_numel * sizeof(float));
    st = zt_home_store(&rt->homes, &L->exp_avg, rt->staging, &rt->err);
    return st == ZT_OK ? zt_home_store(&rt->homes, &L->exp_avg_sq, rt->staging, &rt->err) : st;
}

static zt_status alloc_staging(zt_runtime *rt)
{
    int64_t max_shard = 1;
    for (int i = 0; i < rt->n_layers; i++)
        if (rt->layers[i].shard_numel > max_shard)
            max_shard = rt->layers[i].shard_numel;
    /* Two halves, each page-aligned for O_DIRECT: an fp32 shard and its working-dtype copy. */
    size_t half = ((size_t)max_shard * sizeof(float) + 4095) / 4096 * 4096;
    rt->staging_bytes = 2 * half;
    zt_status st = zt_host_tier_alloc(&rt->host, rt->staging_bytes, "staging buffer",
                                      &rt->staging, &rt->err);
    rt->staging_lp = st == ZT_OK ? (char *)rt->staging + half : NULL;
    if (st != ZT_OK || optimizer_tier(rt) != ZT_TIER_NVME)
        return st;
    /* three sets of master, m and v sub-group buffers for the pipelined NVMe step */
    int64_t per = zt_step_nvme_chunk_elems(rt, (uint64_t)rt->cfg.aio_block_size);
    rt->opt_buf_bytes = (size_t)(per < max_shard ? per : max_shard) * sizeof(float);
    for (int k = 0; st == ZT_OK && k < 9; k++)
        st = zt_host_tier_alloc(&rt->host, rt->opt_buf_bytes, "optimizer staging",
                                (void **)&rt->opt_buf[k], &rt->err);
    return st;
}

static zt_swap_config swap_config(const zt_runtime *rt, const zt_offload_config *off,
                                  const char *tag)
{
    zt_swap_config c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < off->n_nvme_paths; i++)
        c.paths[i] = off->nvme_path[i];
    c.n_paths = off->n_nvme_paths;
    c.tag = tag;
    c.rank = rt->rank;
    c.block_size = (uint64_t)rt->cfg.aio_block_size;
    c.queue_depth = rt->cfg.aio_queue_depth;
    c.threads = rt->cfg.aio_intra_op_parallelism;
    c.engine = rt->cfg.io_engine;
    c.allow_buffered = rt->cfg.allow_buffered_io;
    c.verify_checksums = rt->cfg.verify_checksums;
    return c;
}

/* The buffers NVMe transfers use, registered with io_uring so requests skip page pinning. */
static void register_buffers(zt_runtime *rt)
{
    void *bufs[10];
    size_t lens[10];
    int n = 0;
    bufs[n] = rt->staging, lens[n++] = rt->staging_bytes;
    if (rt->param_swap) {
        zt_pinned_region(rt->param_staging, &bufs[n], &lens[n]);
        zt_swap_register_buffers(rt->param_swap, bufs, lens, n + 1);
    }
    for (int k = 0; k < 9 && rt->optim_swap; k++)
        bufs[n] = rt->opt_buf[k], lens[n++] = rt->opt_buf_bytes;
    if (rt->optim_swap)
        zt_swap_register_buffers(rt->optim_swap, bufs, lens, n);
}

/* Sizes and creates the NVMe swap spaces the placement needs, and the staging buffers. */
static zt_status open_swaps(zt_runtime *rt)
{
    uint64_t bs = (uint64_t)rt->cfg.aio_block_size, pbytes = 0, obytes = 0, max_pshard = 0;
    for (int i = 0; i < rt->n_layers; i++) {
        uint64_t shard = (uint64_t)rt->layers[i].shard_numel;
        uint64_t p = shard * zt_dtype_size(rt->dtype);
        pbytes += zt_swap_footprint(p, bs);
        obytes += 3 * zt_swap_footprint(shard * 4, bs);
        max_pshard = p > max_pshard ? p : max_pshard;
    }
    zt_status st = ZT_OK;
    if (rt->cfg.offload_param.device == ZT_TIER_NVME) {
        zt_swap_config c = swap_config(rt, &rt->cfg.offload_param, "param");
        st = zt_swap_create(&c, pbytes, &rt->param_swap, &rt->err);
        if (st == ZT_OK)
            st = zt_pinned_pool_create((int)rt->cfg.offload_param.buffer_count, max_pshard,
                                       &rt->param_staging, &rt->err);
    }
    if (st == ZT_OK && optimizer_tier(rt) == ZT_TIER_NVME) {
        zt_swap_config c = swap_config(rt, &rt->cfg.offload_optimizer, "optim");
        st = zt_swap_create(&c, obytes, &rt->optim_swap, &rt->err);
    }
    if (st == ZT_OK)
        register_buffers(rt);
    return st;
}

/* Layers below the persistence threshold stay resident in device memory whatever
 * offload_param says: a configuration that asks for offload is told how much stays. */
static void report_persistent(zt_runtime *rt)
{
    uint64_t bytes = 0;
    uint32_t n = 0;
    for (int i = 0; i < rt->n_layers; i++)
        if (rt->layers[i].persistent) {
            bytes += (uint64_t)rt->layers[i].flat_numel * zt_dtype_size(rt->dtype);
            n++;
        }
    rt->stats.persistent_bytes = bytes;
    rt->stats.persistent_layers = n;
    if (n == 0 || rt->cfg.offload_param.device == ZT_TIER_DEVICE)
        return;
    const char *where = rt->cfg.offload_param.device == ZT_TIER_NVME ? "nvme" : "cpu";
    long long threshold = (long long)rt->cfg.stage3_param_persistence_threshold;
    if (n == (uint32_t)rt->n_layers)
        ZT_LOGW("runtime",
                "zero_optimization.offload_param.device is \"%s\", but all %d layers are below "
                "zero_optimization.stage3_param_persistence_threshold (%lld elements): their "
                "%llu bytes of parameters stay in device memory and no parameter is offloaded; "
                "lower the threshold (0 offloads every layer)",
                where, rt->n_layers, threshold, (unsigned long long)bytes);
    else
        ZT_LOGI("runtime",
                "%u of %d layers (%llu bytes of parameters) stay in device memory, not on %s: "
                "they are below zero_optimization.stage3_param_persistence_threshold (%lld "
                "elements; 0 offloads every layer)",
                n, rt->n_layers, (unsigned long long)bytes, where, threshold);
}

/* The device budget must hold the parameters that live there plus the largest layer while
 * its backward pass runs (gathered parameters, gradients, and their fp32 copy for the
 * reduction of 16-bit gradients over ranks); below that no schedule can run. */
static zt_status check_device_budget(zt_runtime *rt)
{
    uint64_t ds = zt_dtype_size(rt->dtype), resident = 0, worst = 0;
    const zt_layer *big = NULL;
    for (int i = 0; i < rt->n_layers; i++) {
        const zt_layer *L = &rt->layers[i];
        uint64_t flat = (uint64_t)L->flat_numel;
        if (L->persistent || rt->cfg.offload_param.device == ZT_TIER_DEVICE)
            resident += (uint64_t)L->shard_numel * ds;
        uint64_t need = flat * ds * (L->persistent ? 1 : 2);
        if (rt->dtype != ZT_F32 && rt->world > 1)
            need += flat * 4;
        if (need > worst)
            worst = need, big = L;
    }
    if (resident + worst <= rt->dev->capacity)
        return ZT_OK;
    return ZT_ERR(&rt->err, ZT_ERR_DEVICE_NOMEM,
                  "the device memory budget of %llu bytes (ztier.hbm_capacity on the host "
                  "backend) is below the %llu bytes this model needs at least: %llu bytes of "
                  "parameters that live in device memory plus %llu bytes while layer '%s' runs "
                  "its backward pass (parameters and gradients); raise the budget, offload "
                  "parameters (zero_optimization.offload_param.device) or split that layer",
                  (unsigned long long)rt->dev->capacity,
                  (unsigned long long)(resident + worst), (unsigned long long)resident,
                  (unsigned long long)worst, big->name);
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
    zt_status st = zt_rt_open(rt);
    if (st != ZT_OK)
        return st;
    for (int i = 0; i < rt->n_layers; i++)
        layout_layer(rt, &rt->layers[i]);
    report_persistent(rt);
    if ((st = check_device_budget(rt)) != ZT_OK)
        return st;
    st = alloc_staging(rt);
    if (st == ZT_OK)
        st = open_swaps(rt);
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
    zt_rt_log_optimizer(rt);
    return ZT_OK;
}

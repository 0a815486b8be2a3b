/* SPDX-License-Identifier: MIT */
/* The placement plan (see plan.h). Every size here is the one commit allocates: the host
 * tier's and the pinned pool's page rounding and the swap space's block rounding come from
 * those modules, so the plan and a committed runtime's zt_stats agree. */
#include "runtime/plan.h"
#include "runtime/opt_split.h"
#include "core/align.h"
#include "core/convert.h"

static int64_t round_up(int64_t x, int64_t m)
{
    return (int64_t)zt_round_up((uint64_t)x, (uint64_t)m);
}

static void layout_layer(zt_runtime *rt, zt_layer *L, int world)
{
    int64_t off = 0;
    for (int i = 0; i < L->n_params; i++) {
        zt_param *p = &rt->reg.params[L->param_ids[i]];
        p->offset = off;
        off += round_up(p->numel, ZT_PARAM_ALIGN_ELEMS);
    }
    /* Small layers are not worth a collective per use: every rank keeps all of them; stage 0
     * keeps every layer so (plain data parallelism). */
    L->persistent = rt->cfg.stage == 0 || off < rt->cfg.stage3_param_persistence_threshold;
    L->replicated = !L->persistent && rt->cfg.stage < 3;
    int64_t ranks = L->persistent ? 1 : world;
    L->flat_numel = round_up(off ? off : 1, ranks * ZT_PARAM_ALIGN_ELEMS);
    L->shard_numel = L->flat_numel / ranks;
}

void zt_plan_layout(zt_runtime *rt, int world)
{
    for (int i = 0; i < rt->reg.n_layers; i++)
        layout_layer(rt, &rt->reg.layers[i], world);
    zt_opt_split_layers(rt); /* by the shards' elements */
}

zt_tier_kind zt_plan_optim_tier(const zt_plan *p, const zt_layer *L)
{
    return L->opt_device ? ZT_TIER_DEVICE : p->optim_tier;
}

int zt_plan_local_sums(const zt_runtime *rt, const zt_plan *p, const zt_layer *L)
{
    return rt->cfg.stage == 1 && L->replicated && p->world > 1 &&
           rt->cfg.gradient_accumulation_steps > 1;
}

uint64_t zt_plan_qwz_bytes(const zt_runtime *rt, const zt_plan *p, const zt_layer *L)
{
    if (!rt->cfg.zero_quantized_weights || p->world == 1 || L->persistent)
        return 0;
    return zt_qwz_scratch_bytes(p->world, L->shard_numel, rt->cfg.quant_block_size);
}

int zt_plan_uses_qgz(const zt_runtime *rt, const zt_plan *p, const zt_layer *L)
{
    return rt->cfg.zero_quantized_gradients && p->world > 1 && !L->persistent;
}

int64_t zt_plan_bucket_elems(const zt_runtime *rt, int world, int *slots)
{
    int64_t total = 0;
    *slots = 0;
    for (int i = 0; world > 1 && i < rt->reg.n_layers; i++) {
        const zt_layer *L = &rt->reg.layers[i];
        if (!(rt->cfg.zero_quantized_gradients && !L->persistent)) /* not qgZ's */
            total += L->flat_numel;
    }
    if (total == 0)
        return 0;
    int64_t cap = rt->cfg.reduce_bucket_size;
    *slots = cap >= total ? 1 : ZT_BUCKET_SLOTS;
    return cap < total ? cap : total;
}

uint64_t zt_plan_qgz_bytes(const zt_runtime *rt, const zt_plan *p)
{
    int64_t n = 0; /* the largest shard qgZ reduces: every buffer grows with it */
    for (int i = 0; i < rt->reg.n_layers; i++) {
        const zt_layer *L = &rt->reg.layers[i];
        if (zt_plan_uses_qgz(rt, p, L) && L->shard_numel > n)
            n = L->shard_numel;
    }
    if (n == 0)
        return 0;
    int block = rt->cfg.quant_block_size;
    uint64_t sum = p->optim_tier == ZT_TIER_DEVICE ? 0 : (uint64_t)n * 4;
    return zt_qgz_head_bytes(p->world, p->qgz_node_ranks, n, block) +
           ZT_QGZ_SLOTS * (sum + zt_qgz_tail_bytes(p->world, p->qgz_node_ranks, n, block));
}

/* Device bytes layer L needs at least in its backward pass: at its fetch, its gathered
 * parameters (resident when persistent) with qwZ's transfer buffers, which go before its
 * gradients come; at its release, the gradients, their fp32 copy for a sum over ranks of
 * 16-bit gradients (qgZ's, or with communication_data_type "fp32") and qgZ's buffers (the parameters, no longer held, may be evicted). */
static uint64_t backward_need(const zt_runtime *rt, const zt_layer *L, const zt_plan *p)
{
    uint64_t flat = (uint64_t)L->flat_numel, ds = zt_dtype_size(p->dtype);
    uint64_t params = L->persistent || L->replicated ? 0 : flat * ds, grads = flat * ds;
    uint64_t qwz = zt_plan_qwz_bytes(rt, p, L);
    uint64_t fetch = params + (qwz > grads ? qwz : grads);
    int widened =
        zt_plan_uses_qgz(rt, p, L) || zt_config_reduce_dtype(&rt->cfg, p->dtype) == ZT_F32;
    uint64_t wide = p->dtype != ZT_F32 && p->world > 1 && !zt_plan_local_sums(rt, p, L) && widened
                        ? flat * 4
                        : 0;
    uint64_t release = grads + wide + (zt_plan_uses_qgz(rt, p, L) ? zt_plan_qgz_bytes(rt, p) : 0);
    return fetch > release ? fetch : release;
}

int zt_plan_nvme_step_sets(const zt_config *cfg)
{
    int64_t sets = cfg->offload_optimizer.buffer_count / 3;
    return sets < ZT_NVME_STEP_MIN_SETS   ? ZT_NVME_STEP_MIN_SETS
           : sets > ZT_NVME_STEP_MAX_SETS ? ZT_NVME_STEP_MAX_SETS
                                          : (int)sets;
}

int zt_plan_master_is_param(const zt_plan *p, const zt_layer *L)
{
    if (p->dtype != ZT_F32 || L->persistent) /* small: a master of their own (master_tier) */
        return 0;
    zt_tier_kind opt = zt_plan_optim_tier(p, L);
    if (p->param_tier == ZT_TIER_DEVICE) /* copied in by the NVMe step */
        return opt == ZT_TIER_NVME;
    return p->param_tier == ZT_TIER_HOST && (opt == ZT_TIER_HOST || opt == ZT_TIER_NVME);
}

zt_tier_kind zt_plan_master_tier(const zt_plan *p, const zt_layer *L)
{
    zt_tier_kind opt = zt_plan_optim_tier(p, L);
    return L->persistent && opt == ZT_TIER_NVME ? ZT_TIER_HOST : opt;
}

int zt_plan_master_to_device(const zt_plan *p, const zt_layer *L)
{
    zt_tier_kind param = L->persistent ? ZT_TIER_DEVICE : p->param_tier;
    return p->dtype == ZT_F32 && param == ZT_TIER_DEVICE &&
           zt_plan_optim_tier(p, L) == ZT_TIER_NVME;
}

/* The master is in host memory (the parameters' home or its own): the NVMe step updates it
 * in place, and no buffer set holds it. */
static int master_in_host(const zt_plan *p, const zt_layer *L)
{
    if (zt_plan_master_is_param(p, L))
        return p->param_tier == ZT_TIER_HOST;
    return zt_plan_master_tier(p, L) == ZT_TIER_HOST;
}

static void plan_layer(const zt_runtime *rt, const zt_layer *L, zt_plan *p)
{
    uint64_t shard = (uint64_t)L->shard_numel, ds = zt_dtype_size(p->dtype);
    uint64_t bs = (uint64_t)rt->cfg.aio_block_size, param_bytes = shard * ds;
    zt_tier_kind opt = zt_plan_optim_tier(p, L);
    if (opt == ZT_TIER_DEVICE) { /* master, m, v and the gradient accumulator */
        p->device_resident += 4 * shard * 4;
        p->device_optim_bytes += 4 * shard * 4;
        p->device_optim_layers++;
    } else
        p->host_bytes += zt_host_tier_footprint(/* gradient accumulator */
                                                shard * (rt->cfg.grad_accum_bf16 ? 2 : 4));
    /* m and v where the optimizer state lives; a master of its own where master_tier says */
    int own_master = !zt_plan_master_is_param(p, L);
    zt_tier_kind master_tier = zt_plan_master_tier(p, L);
    if (opt == ZT_TIER_HOST)
        p->host_bytes += 2 * zt_host_tier_footprint(shard * 4);
    else if (opt == ZT_TIER_NVME)
        p->nvme_optim_bytes += 2 * zt_swap_footprint(shard * 4, bs);
    if (own_master && master_tier == ZT_TIER_HOST)
        p->host_bytes += zt_host_tier_footprint(shard * 4);
    else if (own_master && master_tier == ZT_TIER_NVME)
        p->nvme_optim_bytes += zt_swap_footprint(shard * 4, bs);
    if (zt_plan_local_sums(rt, p, L)) /* stage 1: the micro-steps' fp32 sums */
        p->device_resident += (uint64_t)L->flat_numel * 4;
    if (L->replicated) { /* its full parameters; the partition's home is its slice */
        p->device_resident += (uint64_t)L->flat_numel * ds;
        p->replicated_bytes += (uint64_t)L->flat_numel * ds;
        p->replicated_layers++;
    } else if (L->persistent) {
        p->device_resident += param_bytes;
        p->persistent_bytes += param_bytes;
        p->persistent_layers++;
    } else if (p->param_tier == ZT_TIER_DEVICE) {
        p->device_resident += param_bytes;
    } else if (p->param_tier == ZT_TIER_HOST) {
        p->host_bytes += zt_host_tier_footprint(param_bytes);
    } else {
        p->nvme_param_bytes += zt_swap_footprint(param_bytes, bs);
        if (param_bytes > p->max_param_shard_bytes)
            p->max_param_shard_bytes = param_bytes;
    }
    if (backward_need(rt, L, p) > p->device_min) {
        p->device_min = backward_need(rt, L, p);
        p->device_min_layer = L->name;
    }
    if (L->shard_numel > p->max_shard)
        p->max_shard = L->shard_numel;
}

void zt_plan_make(const zt_runtime *rt, int world, zt_plan *p)
{
    *p = (zt_plan){0};
    p->world = world;
    const zt_topology *t = &rt->dist.topo;
    int rpn = rt->cfg.ranks_per_node;
    if (t->world && t->size == world) /* committing: the layout every rank agreed on */
        p->qgz_node_ranks = zt_topology_qgz_nodes(t);
    else
        p->qgz_node_ranks = zt_qgz_two_level(world, rpn) ? rpn : 0;
    p->dtype = zt_config_dtype(&rt->cfg);
    p->param_tier = rt->cfg.offload_param.device;
    p->optim_tier = zt_config_device_optimizer(&rt->cfg)               ? ZT_TIER_DEVICE
                    : rt->cfg.offload_optimizer.device == ZT_TIER_NVME ? ZT_TIER_NVME
                                                                       : ZT_TIER_HOST;
    p->max_shard = 1;
    for (int i = 0; i < rt->reg.n_layers; i++)
        plan_layer(rt, &rt->reg.layers[i], p);
    p->cpu_ratio = rt->opt.cpu_ratio;
    if (p->device_optim_layers) {
        /* the step's sums and counter; new parameters bound for a home off the device */
        p->device_resident += ZT_DEVICE_STEP_STATS_BYTES;
        if (p->param_tier != ZT_TIER_DEVICE)
            p->device_param_tmp = (uint64_t)p->max_shard * zt_dtype_size(p->dtype);
        p->device_resident += p->device_param_tmp;
    }
    p->device_min += p->device_resident; /* the largest backward need, on top */
    /* Two halves, each page-aligned for O_DIRECT: an fp32 shard and its working-dtype copy. */
    p->staging_bytes = 2 * zt_round_up((uint64_t)p->max_shard * sizeof(float), ZT_PAGE_BYTES);
    p->host_bytes += zt_host_tier_footprint(p->staging_bytes);
    if (p->optim_tier == ZT_TIER_NVME) {
        /* three sets of master, m and v sub-group buffers for the pipelined NVMe step */
        int64_t per =
            zt_nvme_step_chunk_elems(rt->cfg.sub_group_size, (uint64_t)rt->cfg.aio_block_size);
        p->opt_buf_bytes = (uint64_t)(per < p->max_shard ? per : p->max_shard) * sizeof(float);
        p->opt_buf_stride = zt_host_tier_stride(p->opt_buf_bytes);
        p->opt_sets = zt_plan_nvme_step_sets(&rt->cfg);
        p->opt_bufs_per_set = 2;
        p->opt_bufs_pinned = 0;
        for (int i = 0; i < rt->reg.n_layers; i++) {
            const zt_layer *L = &rt->reg.layers[i];
            if (!master_in_host(p, L))
                p->opt_bufs_per_set = 3; /* a master read or copied into the set */
            if (zt_plan_master_to_device(p, L) && !master_in_host(p, L))
                p->opt_bufs_pinned = 1; /* copied from and to device memory */
        }
        p->host_bytes += zt_host_tier_footprint((uint64_t)p->opt_bufs_per_set *
                                                (uint64_t)p->opt_sets * p->opt_buf_stride);
    }
    if (p->max_param_shard_bytes)
        p->pinned_bytes = zt_staging_pool_footprint((int)rt->cfg.offload_param.buffer_count,
                                                    p->max_param_shard_bytes);
}

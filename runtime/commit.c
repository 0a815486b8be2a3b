/* SPDX-License-Identifier: MIT */
/* Commit: freeze the registry, lay each layer out as one flat buffer split evenly over
 * ranks (the plan), place every shard on its tier, set up the modules that move them (the
 * prefetcher with one gather per layer, the NVMe optimizer step), and write the initial
 * values. */
#include "core/log.h"
#include "runtime/estimate.h"
#include "runtime/plan.h"
#include "runtime/opt_engine.h"
#include "runtime/opt_split.h"
#include "runtime/runtime.h"
#include "tiers/numa_place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static zt_status place_layer(zt_runtime *rt, const zt_plan *plan, zt_layer *L)
{
    uint64_t shard = (uint64_t)L->shard_numel;
    zt_tier_kind opt = zt_plan_optim_tier(plan, L);
    zt_homes ph = rt->tiers.homes, oh = rt->tiers.homes;
    ph.swap = rt->tiers.param_swap;
    ph.pin = rt->cfg.offload_param.pin_memory; /* the device copies parameters from home */
    oh.swap = rt->tiers.optim_swap;
    /* zt_runtime_expect_load: the load writes every byte of the parameters, master, m and v
     * (a rank file holds whole shards, padding included; a resharded load zeroes the padding
     * itself), so their host homes are not zeroed here: the load's threads back the pages as
     * its reads land, rather than commit touching all of them first (on a fresh VM page,
     * most of a resume's commit). */
    ph.unzeroed = oh.unzeroed = rt->load_pending;
    zt_tier_kind param_tier = L->persistent ? ZT_TIER_DEVICE : plan->param_tier;
    size_t ds = zt_dtype_size(rt->reg.dtype);
    zt_status st;
    if (L->replicated) { /* the partition's home is this rank's slice of the replica */
        st = zt_home_alloc(&ph, ZT_TIER_DEVICE, (uint64_t)L->flat_numel * ds, L->name, &L->replica,
                           &rt->err);
        if (st == ZT_OK) {
            zt_home_share(&L->replica, L->name, &L->param_home);
            L->param_home.ptr = (char *)L->replica.ptr + (size_t)rt->dist.rank * shard * ds;
            L->param_home.bytes = shard * ds;
        }
    } else {
        st = zt_home_alloc(&ph, param_tier, shard * ds, L->name, &L->param_home, &rt->err);
    }
    if (st == ZT_OK && zt_plan_local_sums(rt, plan, L))
        st = zt_home_alloc(&ph, ZT_TIER_DEVICE, (uint64_t)L->flat_numel * 4, L->name,
                           &L->grad_local, &rt->err);
    if (st == ZT_OK && zt_plan_master_is_param(plan, L))
        zt_home_share(&L->param_home, L->name, &L->master);
    else if (st == ZT_OK) {
        zt_homes mh = oh; /* a persistent layer's fp32 master in host memory goes to the device */
        mh.pin = zt_plan_master_to_device(plan, L);
        st = zt_home_alloc(&mh, zt_plan_master_tier(plan, L), shard * 4, L->name, &L->master,
                           &rt->err);
    }
    if (st == ZT_OK)
        st = zt_home_alloc(&oh, opt, shard * 4, L->name, &L->exp_avg, &rt->err);
    if (st == ZT_OK)
        st = zt_home_alloc(&oh, opt, shard * 4, L->name, &L->exp_avg_sq, &rt->err);
    if (st == ZT_OK && L->opt_device)
        st = zt_dev_opt_alloc_acc(rt, L);
    else if (st == ZT_OK)
        /* never zeroed: a step's first accumulation overwrites the sums, and a layer that
         * got none is zeroed at the step (opt_engine.c, zero_unsummed); the first backward
         * backs the pages */
        st = zt_host_tier_alloc_as(&rt->tiers.host, shard * zt_dtype_size(rt->reg.acc_dtype),
                                   L->name, ZT_HOST_UNZEROED, &L->grad_acc, &rt->err);
    if (st == ZT_OK)
        st = zt_gather_init(zt_prefetcher_gather(rt->prefetch, (int)(L - rt->reg.layers)),
                            &rt->gather_env, L->name, L->flat_numel, L->shard_numel, L->persistent,
                            &L->param_home, L->replicated ? &L->replica : NULL, &rt->err);
    if (st == ZT_OK && !(L->views = calloc(2 * (size_t)L->n_params, sizeof *L->views)))
        st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory for the views of layer '%s'", L->name);
    return st;
}

/* Fills this rank's fp32 master shard of a layer from the parameters' initialisers. */
static zt_status init_master_shard(zt_runtime *rt, const zt_layer *L, float *master)
{
    memset(master, 0, (size_t)L->shard_numel * sizeof(float));
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < L->n_params; i++) {
        const zt_param *p = &rt->reg.params[L->param_ids[i]];
        int64_t a, b, at;
        zt_param_in_shard(rt, p, &a, &b, &at);
        if (a < b)
            st = zt_param_init_fill(p, a, b - a, master + at, &rt->err);
    }
    return st;
}

static zt_status init_layer(zt_runtime *rt, zt_layer *L)
{
    zt_status st = init_master_shard(rt, L, rt->opt.staging);
    if (st == ZT_OK)
        st = zt_layer_set_master(rt, L, rt->opt.staging);
    if (st != ZT_OK || L->exp_avg.kind != ZT_TIER_NVME)
        return st; /* host and device homes start zeroed */
    memset(rt->opt.staging, 0, (size_t)L->shard_numel * sizeof(float));
    st = zt_home_store(&rt->tiers.homes, &L->exp_avg, rt->opt.staging, &rt->err);
    return st == ZT_OK ? zt_home_store(&rt->tiers.homes, &L->exp_avg_sq, rt->opt.staging, &rt->err)
                       : st;
}

static zt_status alloc_staging(zt_runtime *rt, const zt_plan *plan)
{
    rt->opt.staging_bytes = plan->staging_bytes;
    /* gradients are copied into it from the device */
    zt_status st = zt_host_tier_alloc_pinned(&rt->tiers.host, rt->opt.staging_bytes,
                                             "staging buffer", &rt->opt.staging, &rt->err);
    rt->opt.staging_lp = st == ZT_OK ? (char *)rt->opt.staging + rt->opt.staging_bytes / 2 : NULL;
    rt->opt.buf_bytes = plan->opt_buf_bytes;
    rt->opt.sets = plan->opt_sets;
    int per_set = plan->opt_bufs_per_set; /* 2: no master buffers (left NULL) */
    rt->opt.block_bytes = (size_t)per_set * (size_t)plan->opt_sets * plan->opt_buf_stride;
    if (st == ZT_OK && rt->opt.buf_bytes && plan->opt_bufs_pinned) /* masters copied in */
        st = zt_host_tier_alloc_pinned(&rt->tiers.host, rt->opt.block_bytes, "optimizer staging",
                                       &rt->opt.block, &rt->err);
    else if (st == ZT_OK && rt->opt.buf_bytes)
        st = zt_host_tier_alloc(&rt->tiers.host, rt->opt.block_bytes, "optimizer staging",
                                &rt->opt.block, &rt->err);
    char *next = rt->opt.block;
    for (int k = 0; st == ZT_OK && next && k < 3 * rt->opt.sets; k++) {
        if (k % 3 == 0 && per_set == 2)
            continue;
        rt->opt.buf[k] = (float *)next;
        next += plan->opt_buf_stride;
    }
    return st;
}

zt_swap_config zt_rt_swap_config(const zt_runtime *rt, const zt_offload_config *off,
                                 const char *tag)
{
    zt_swap_config c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < off->n_nvme_paths; i++)
        c.paths[i] = off->nvme_path[i];
    c.n_paths = off->n_nvme_paths;
    c.tag = tag;
    c.rank = rt->dist.rank;
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
    void *bufs[3];
    size_t lens[3];
    int n = 0;
    bufs[n] = rt->opt.staging, lens[n++] = rt->opt.staging_bytes;
    if (rt->tiers.param_swap) {
        zt_staging_region(rt->tiers.param_staging, &bufs[n], &lens[n]);
        zt_swap_register_buffers(rt->tiers.param_swap, bufs, lens, n + 1);
    }
    if (rt->tiers.optim_swap && rt->opt.block) {
        bufs[n] = rt->opt.block, lens[n++] = rt->opt.block_bytes;
        zt_swap_register_buffers(rt->tiers.optim_swap, bufs, lens, n);
    }
}

/* The run's NVMe space, every swap space together (this node's ranks write the same
 * folders), before any is created: a refusal states the run's need, not one file's. */
static zt_status check_swap_space(zt_runtime *rt, const zt_plan *plan)
{
    zt_swap_config pc = zt_rt_swap_config(rt, &rt->cfg.offload_param, "param");
    zt_swap_config oc = zt_rt_swap_config(rt, &rt->cfg.offload_optimizer, "optim");
    zt_swap_config ac;
    uint64_t act = zt_rt_act_swap_bytes(rt, &ac); /* 0: none on NVMe */
    zt_swap_need needs[3] = {{&pc, plan->nvme_param_bytes, "parameters"},
                             {&oc, plan->nvme_optim_bytes, "optimizer state"},
                             {&ac, act, "activation checkpoints"}};
    return zt_swap_check_run(needs, 3, rt->dist.topo.node_size, &rt->err);
}

/* Creates the NVMe swap spaces the plan sizes, and the parameters' staging buffers. */
static zt_status open_swaps(zt_runtime *rt, const zt_plan *plan)
{
    zt_numa_scope scope; /* the I/O engines' threads start on the rank's node */
    zt_numa_scope_enter(&scope, zt_host_tier_node(&rt->tiers.host));
    zt_status st = check_swap_space(rt, plan);
    if (st == ZT_OK && plan->nvme_param_bytes) {
        zt_swap_config c = zt_rt_swap_config(rt, &rt->cfg.offload_param, "param");
        st = zt_swap_create(&c, plan->nvme_param_bytes, &rt->tiers.param_swap, &rt->err);
        if (st == ZT_OK)
            st = zt_staging_pool_create(
                (int)rt->cfg.offload_param.buffer_count, plan->max_param_shard_bytes,
                rt->cfg.offload_param.pin_memory ? &rt->tiers.pinner : NULL,
                zt_host_tier_node(&rt->tiers.host), &rt->tiers.param_staging, &rt->err);
    }
    if (st == ZT_OK && plan->nvme_optim_bytes) {
        zt_swap_config c = zt_rt_swap_config(rt, &rt->cfg.offload_optimizer, "optim");
        st = zt_swap_create(&c, plan->nvme_optim_bytes, &rt->tiers.optim_swap, &rt->err);
    }
    if (st == ZT_OK)
        register_buffers(rt);
    zt_numa_scope_leave(&scope);
    return st;
}

/* Offloaded parameters that are not pinned make every copy to a GPU a staged, blocking one:
 * said once, since it is the configuration's choice (offload_param.pin_memory false). */
static void report_unpinned(const zt_runtime *rt, const zt_plan *plan)
{
    if (plan->param_tier != ZT_TIER_DEVICE && !rt->cfg.offload_param.pin_memory &&
        strcmp(rt->device.iface->name, "cuda") == 0)
        ZT_LOGW("runtime",
                "zero_optimization.offload_param.pin_memory is false: the GPU copies the "
                "offloaded parameters from pageable memory, which blocks the host at each copy "
                "and runs at a fraction of the pinned bandwidth; set it to true (the default)");
}

/* Layers below the persistence threshold stay resident in device memory whatever
 * offload_param says: a configuration that asks for offload is told how much stays. */
static void report_persistent(zt_runtime *rt, const zt_plan *plan)
{
    unsigned long long bytes = plan->persistent_bytes;
    int n = plan->persistent_layers;
    rt->stats.persistent_bytes = bytes;
    rt->stats.persistent_layers = (uint32_t)n;
    rt->stats.replicated_bytes = plan->replicated_bytes;
    rt->stats.replicated_layers = (uint32_t)plan->replicated_layers;
    if (n == 0 || plan->param_tier == ZT_TIER_DEVICE)
        return;
    const char *where = plan->param_tier == ZT_TIER_NVME ? "nvme" : "cpu";
    long long threshold = (long long)rt->cfg.stage3_param_persistence_threshold;
    if (n == rt->reg.n_layers)
        ZT_LOGW("runtime",
                "zero_optimization.offload_param.device is \"%s\", but all %d layers are below "
                "zero_optimization.stage3_param_persistence_threshold (%lld elements): their "
                "%llu bytes of parameters stay in device memory and no parameter is offloaded; "
                "lower the threshold (0 offloads every layer)",
                where, rt->reg.n_layers, threshold, bytes);
    else
        ZT_LOGI("runtime",
                "%d of %d layers (%llu bytes of parameters) stay in device memory, not on %s: "
                "they are below zero_optimization.stage3_param_persistence_threshold (%lld "
                "elements; 0 offloads every layer)",
                n, rt->reg.n_layers, bytes, where, threshold);
}

/* The tied layers (zt_layer_tie) as "'embed' from 'ln_f'", for a message. */
static void describe_ties(const zt_runtime *rt, char *buf, size_t len)
{
    int at = 0;
    buf[0] = 0;
    for (int i = 0; i < rt->reg.n_layers && at >= 0 && (size_t)at < len; i++) {
        const zt_layer *L = &rt->reg.layers[i];
        if (L->tied_after >= 0)
            at += snprintf(buf + at, len - (size_t)at, "%s'%s' from the backward pass of '%s'",
                           at ? ", " : "", L->name, rt->reg.layers[L->tied_after].name);
    }
}

/* The device budget must hold the parameters that live there plus what the step's call order
 * holds at once: the largest layer in its backward pass, and with tied layers (zt_layer_tie)
 * the layers held through it beside it. The order is replayed as `ztier estimate` replays
 * it (runtime/estimate.h), so a budget commit accepts runs the first step. */
static zt_status check_device_budget(zt_runtime *rt, const zt_plan *plan)
{
    int n;
    zt_est_event *order = zt_rt_registered_order(rt, &n);
    if (!order)
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory checking the device budget");
    /* two steps (the first records the order, the second prefetches by it) of one
     * micro-step: every micro-step makes the same calls */
    zt_order_need need;
    zt_status st = zt_rt_order_need(rt, plan, order, n, 2, 1, &need);
    free(order);
    uint64_t cap = rt->device.dev->capacity, acts = zt_rt_act_device_min(rt);
    if (st == ZT_OK && need.min <= cap && need.min + acts > cap)
        return ZT_ERR(&rt->err, ZT_ERR_DEVICE_NOMEM,
                      "the device memory budget of %llu bytes is below the %llu bytes this model "
                      "needs at least: %llu for its parameters and gradients plus %llu for the "
                      "activation checkpoints registered with zt_act_register (every saved copy "
                      "with activation_checkpointing.device \"none\", else one load of the "
                      "largest); raise the "
                      "budget, or keep the checkpoints in host memory or on NVMe "
                      "(activation_checkpointing.device)",
                      (unsigned long long)cap, (unsigned long long)(need.min + acts),
                      (unsigned long long)need.min, (unsigned long long)acts);
    if (st != ZT_OK || need.min <= cap)
        return st;
    const char *key = strcmp(rt->device.iface->name, "host") == 0
                          ? "ztier.hbm_capacity on the host backend"
                          : "on cuda the GPU's free memory less a reserve, or ztier.hbm_capacity";
    if (!need.tight[0])
        return ZT_ERR(&rt->err, ZT_ERR_DEVICE_NOMEM,
                      "the device memory budget of %llu bytes (%s) is below the %llu bytes "
                      "this model needs at least: %llu bytes of parameters that live in device "
                      "memory plus %llu bytes while layer '%s' runs its backward pass "
                      "(parameters, gradients, transfer buffers); raise the budget, offload "
                      "parameters (zero_optimization.offload_param.device) or split that layer",
                      (unsigned long long)cap, key, (unsigned long long)need.min,
                      (unsigned long long)plan->device_resident,
                      (unsigned long long)(need.min - plan->device_resident),
                      plan->device_min_layer);
    char ties[256];
    describe_ties(rt, ties, sizeof ties);
    return ZT_ERR(&rt->err, ZT_ERR_DEVICE_NOMEM,
                  "the device memory budget of %llu bytes (%s) is below the %llu bytes the "
                  "first step needs at least with the layers it holds at once: %llu bytes of "
                  "parameters that live in device memory plus %llu bytes at %s (%s%s; one "
                  "layer alone would need %llu); raise the budget to "
                  "%llu bytes, offload parameters (zero_optimization.offload_param.device) or "
                  "hold fewer layers across the backward pass",
                  (unsigned long long)cap, key, (unsigned long long)need.min,
                  (unsigned long long)plan->device_resident,
                  (unsigned long long)(need.min - plan->device_resident), need.tight,
                  ties[0] ? "tied by zt_layer_tie: " : "no layer tied by zt_layer_tie", ties,
                  (unsigned long long)plan->device_min, (unsigned long long)need.min);
}

/* The prefetcher and the gather pipeline's shared environment. */
static zt_status open_prefetch(zt_runtime *rt)
{
    rt->gather_env = (zt_gather_env){.dev = rt->device.dev,
                                     .stream = rt->device.prefetch_stream,
                                     .dtier = &rt->tiers.dtier,
                                     .staging = rt->tiers.param_staging,
                                     .topo = &rt->dist.topo,
                                     .dtype = rt->reg.dtype,
                                     .qwz = rt->cfg.zero_quantized_weights,
                                     .bucket_elems = rt->cfg.allgather_bucket_size,
                                     .hpz = rt->dist.topo.hpz,
                                     .quant_block = rt->cfg.quant_block_size,
                                     .home_ready = zt_rt_param_home_ready,
                                     .home_ready_ctx = rt,
                                     .reclaim = zt_rt_reclaim_reduction,
                                     .reclaim_ctx = rt};
    zt_sched_limits lim = {rt->cfg.stage3_prefetch_bucket_size, rt->cfg.stage3_max_live_parameters,
                           rt->cfg.stage3_max_reuse_distance};
    return zt_prefetcher_create(&lim, &rt->gather_env, rt->reg.n_layers, &rt->prefetch, &rt->err);
}

/* With the optimizer state on NVMe: the pipelined step over every layer's shard. */
static zt_status open_nvme_step(zt_runtime *rt)
{
    if (!rt->tiers.optim_swap)
        return ZT_OK;
    rt->opt.shards = calloc((size_t)rt->reg.n_layers, sizeof *rt->opt.shards);
    if (!rt->opt.shards)
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory for the optimizer's shard list");
    for (int i = 0; i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        rt->opt.shards[i] =
            (zt_opt_shard){&L->master,  &L->exp_avg,       &L->exp_avg_sq, &L->param_home,
                           L->grad_acc, rt->reg.acc_dtype, L->shard_numel};
    }
    void *param_out = rt->reg.dtype == ZT_F32 ? rt->opt.staging : rt->opt.staging_lp;
    return zt_nvme_step_create(
        rt->opt.buf, rt->opt.sets, (int64_t)(rt->opt.buf_bytes / sizeof(float)), param_out,
        (zt_nvme_step_device){rt->device.dev, rt->device.prefetch_stream, &rt->stats.d2h_bytes},
        &rt->opt.nvme_step, &rt->err);
}

/* 1 when the steps' whole prefetch window (and the activations' least) fits the budget. */
static int window_fits(zt_runtime *rt, const zt_plan *plan, const zt_est_event *order, int n)
{
    zt_order_need need;
    zt_error saved = rt->err;
    int ok = zt_rt_order_need(rt, plan, order, n, 2, 1, &need) == ZT_OK &&
             need.window + zt_rt_act_device_min(rt) <= rt->device.dev->capacity;
    rt->err = saved;
    return ok;
}

/* offload_optimizer.ratio "auto": of the layers its rates put on the device, the most (the
 * first ones) whose state leaves the whole prefetch window room in the device budget; the
 * rest stay on the CPU (a fixed ratio is the user's: commit refuses what does not fit).
 * With a split the forward time refines (opt_split.h), the most the budget holds of all
 * layers is kept as its bound, and the rates' split within it laid out. */
static zt_status fit_auto_split(zt_runtime *rt, zt_plan *plan)
{
    int k = plan->device_optim_layers, want = k;
    rt->opt.resplit = zt_opt_split_refinable(rt);
    if (rt->opt.resplit)
        k = rt->reg.n_layers;
    if (rt->cfg.offload_optimizer.ratio != ZT_RATIO_AUTO || k == 0 || rt->opt.on_device)
        return ZT_OK;
    int n;
    zt_est_event *order = zt_rt_registered_order(rt, &n);
    if (!order)
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory fitting the optimizer split");
    int lo = 0, hi = k; /* fewer layers on the device never need more of it */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        zt_opt_split_first(rt, mid);
        zt_plan_make(rt, rt->dist.world, plan);
        if (window_fits(rt, plan, order, n))
            lo = mid;
        else
            hi = mid - 1;
    }
    free(order);
    rt->opt.split_max_layers = lo;
    rt->opt.resplit = rt->opt.resplit && lo > 0; /* else nothing could move */
    if (rt->opt.resplit) /* the rates' split first; the steps' forward times move it */
        k = want, lo = want < lo ? want : lo;
    zt_opt_split_first(rt, lo);
    zt_plan_make(rt, rt->dist.world, plan);
    if (lo < k)
        ZT_LOGI("optimizer",
                "offload_optimizer.ratio \"auto\": %d of the %d layers its rates put on the "
                "device fit the device budget beside the prefetch window; the rest stay on the CPU",
                lo, k);
    return ZT_OK;
}

/* The device optimizer's buffer for new parameters bound off the device: the plan's, or
 * with a split "auto" may move, the one the most it may move would need. */
static uint64_t device_param_tmp(zt_runtime *rt, const zt_plan *plan)
{
    if (!rt->opt.resplit || !rt->opt.split_max_layers || plan->device_param_tmp)
        return plan->device_param_tmp;
    zt_plan most;
    int k = 0; /* the first k now: put back after */
    for (int i = 0; i < rt->reg.n_layers; i++)
        k += rt->reg.layers[i].opt_device;
    zt_opt_split_first(rt, rt->opt.split_max_layers);
    zt_plan_make(rt, rt->dist.world, &most);
    zt_opt_split_first(rt, k);
    return most.device_param_tmp;
}

zt_status zt_rt_commit(zt_runtime *rt)
{
    if (rt->reg.n_layers == 0)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "commit with no layers: add layers and parameters "
                      "with zt_layer_add/zt_param_add first");
    for (int i = 0; i < rt->reg.n_layers; i++)
        if (rt->reg.layers[i].n_params == 0)
            return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                          "layer '%s' has no parameters; add at least one with zt_param_add",
                          rt->reg.layers[i].name);
    zt_status st = zt_rt_open(rt);
    if (st != ZT_OK)
        return st;
    if ((st = zt_opt_split_measure(rt)) != ZT_OK) /* "auto": before the split is laid out */
        return st;
    zt_plan plan;
    zt_plan_layout(rt, rt->dist.world);
    zt_plan_make(rt, rt->dist.world, &plan);
    if ((st = fit_auto_split(rt, &plan)) != ZT_OK)
        return st;
    report_persistent(rt, &plan);
    report_unpinned(rt, &plan);
    if ((st = check_device_budget(rt, &plan)) != ZT_OK) {
        if (st == ZT_ERR_DEVICE_NOMEM && plan.device_optim_layers && !rt->opt.on_device)
            zt_error_prefix(&rt->err,
                            "zero_optimization.offload_optimizer.ratio %.3f keeps %llu bytes of "
                            "optimizer state in device memory (a higher ratio keeps less): ",
                            (double)plan.cpu_ratio, (unsigned long long)plan.device_optim_bytes);
        return st;
    }
    st = alloc_staging(rt, &plan);
    if (st == ZT_OK && (plan.device_optim_layers || rt->opt.split_max_layers))
        st = zt_dev_opt_open(rt, device_param_tmp(rt, &plan));
    if (st == ZT_OK)
        st = open_swaps(rt, &plan);
    rt->train.step_cleared = rt->reg.n_layers; /* no step in progress */
    if (st == ZT_OK)
        st = open_prefetch(rt);
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++)
        st = place_layer(rt, &plan, &rt->reg.layers[i]);
    if (st == ZT_OK)
        st = open_nvme_step(rt);
    if (st == ZT_OK)
        st = zt_rt_act_open(rt);
    zt_opt_engine_choose(rt); /* from what was opened */
    /* zt_runtime_expect_load: the load overwrites every value; initialising them first was
     * most of a resume's CPU time */
    for (int i = 0; st == ZT_OK && !rt->load_pending && i < rt->reg.n_layers; i++)
        st = init_layer(rt, &rt->reg.layers[i]);
    if (st != ZT_OK)
        return st;
    rt->state = ZT_RT_COMMITTED;
    ZT_LOGI("runtime", "committed %d layers, %d parameters; host tier %llu bytes, device %llu",
            rt->reg.n_layers, rt->reg.n_params, (unsigned long long)rt->tiers.host.current,
            (unsigned long long)rt->device.dev->bytes_in_use);
    if (rt->load_pending)
        ZT_LOGI("runtime", "parameters left uninitialised: zt_checkpoint_load fills them "
                           "(zt_runtime_expect_load)");
    zt_rt_log_optimizer(rt);
    zt_opt_split_report(rt);
    return ZT_OK;
}

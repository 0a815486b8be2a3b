/* SPDX-License-Identifier: MIT */
#include "runtime/runtime.h"
#include "core/align.h"
#include "core/log.h"
#include "tiers/numa_place.h"

#include <stdlib.h>
#include <string.h>

zt_status zt_rt_act_register(zt_runtime *rt, int layer, uint64_t bytes)
{
    zt_layer *L = &rt->reg.layers[layer];
    if (L->act_bytes)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "zt_act_register: layer '%s' registered %llu bytes of activations "
                      "already; register each layer once, with the most it will save",
                      L->name, (unsigned long long)L->act_bytes);
    L->act_bytes = bytes;
    return ZT_OK;
}

/* activation_checkpointing.device, else cpu_checkpointing's host memory. */
static zt_tier_kind act_tier(const zt_config *c)
{
    if (c->act_offload.device != ZT_TIER_DEVICE)
        return c->act_offload.device;
    return c->act_cpu_checkpointing ? ZT_TIER_HOST : ZT_TIER_DEVICE;
}

const char *zt_rt_act_home(const zt_runtime *rt)
{
    zt_tier_kind t = act_tier(&rt->cfg);
    return t == ZT_TIER_NVME ? "nvme" : t == ZT_TIER_HOST ? "cpu" : "none";
}

/* The registered sizes in one pass: how many layers, their sum, the largest, and the largest
 * sum of `held` consecutive ones in registration order (the order layers are saved in). */
typedef struct act_sizes {
    int n;
    uint64_t sum, max, max_window;
} act_sizes;

static act_sizes sizes_of(const zt_runtime *rt, int held)
{
    act_sizes z = {0};
    uint64_t window = 0;
    for (int i = 0, first = 0, in_window = 0; i < rt->reg.n_layers; i++) {
        uint64_t b = rt->reg.layers[i].act_bytes;
        if (!b)
            continue;
        z.n++, z.sum += b, window += b;
        z.max = b > z.max ? b : z.max;
        if (++in_window > held) { /* the oldest registered layer leaves the window */
            while (!rt->reg.layers[first].act_bytes)
                first++;
            window -= rt->reg.layers[first++].act_bytes;
            in_window--;
        }
        z.max_window = window > z.max_window ? window : z.max_window;
    }
    return z;
}

uint64_t zt_rt_act_device_min(const zt_runtime *rt)
{
    act_sizes z = sizes_of(rt, 1);
    return act_tier(&rt->cfg) == ZT_TIER_DEVICE ? z.sum : z.max;
}

void zt_rt_act_estimate(const zt_runtime *rt, int *layers, uint64_t *home, uint64_t *device_min,
                        uint64_t *device_max)
{
    /* a load holds its layer and the next prefetch_layers in reverse order (the previous one
     * is freed by then) */
    act_sizes z = sizes_of(rt, rt->cfg.act_prefetch_layers + 1);
    int on_device = act_tier(&rt->cfg) == ZT_TIER_DEVICE;
    *layers = z.n, *home = z.sum;
    *device_min = on_device ? z.sum : z.max;
    *device_max = on_device ? z.sum : z.max_window;
}

/* The folders of the activation swap: its own, else the parameters', else the optimizer's. */
static const zt_offload_config *act_paths(const zt_config *c)
{
    if (c->act_offload.n_nvme_paths)
        return &c->act_offload;
    return c->offload_param.n_nvme_paths ? &c->offload_param : &c->offload_optimizer;
}

uint64_t zt_rt_act_swap_bytes(const zt_runtime *rt, zt_swap_config *c)
{
    *c = zt_rt_swap_config(rt, act_paths(&rt->cfg), "act");
    uint64_t need = 0;
    for (int i = 0; i < rt->reg.n_layers; i++)
        if (rt->reg.layers[i].act_bytes)
            need +=
                zt_swap_footprint(zt_round_up(rt->reg.layers[i].act_bytes, 4096), c->block_size);
    return act_tier(&rt->cfg) == ZT_TIER_NVME ? need : 0;
}

static zt_status open_swap(zt_runtime *rt)
{
    const zt_offload_config *off = act_paths(&rt->cfg);
    if (!off->n_nvme_paths)
        return ZT_ERR(&rt->err, ZT_ERR_CONFIG,
                      "activation_checkpointing.device is \"nvme\" but no folder is set: set "
                      "activation_checkpointing.nvme_path (it falls back to offload_param's or "
                      "offload_optimizer's nvme_path)");
    zt_swap_config c;
    uint64_t need = zt_rt_act_swap_bytes(rt, &c);
    zt_numa_scope scope; /* the I/O engine's threads start on the rank's node */
    zt_numa_scope_enter(&scope, zt_host_tier_node(&rt->tiers.host));
    zt_status st = zt_swap_create(&c, need, &rt->acts.swap, &rt->err);
    zt_numa_scope_leave(&scope);
    if (st != ZT_OK)
        zt_error_prefix(&rt->err, "activation checkpoints on NVMe: ");
    return st;
}

/* DeepSpeed keys that ask for something ztier does otherwise, said once at commit. */
static void report_keys(const zt_runtime *rt, int registered)
{
    const zt_config *c = &rt->cfg;
    if (c->act_partition)
        ZT_LOGW("activations",
                "activation_checkpointing.partition_activations is true: not supported, "
                "because ztier has no tensor parallelism: no rank holds a copy of another "
                "rank's activations to split, so each rank keeps its own whole; set it to false");
    if (c->act_number_checkpoints && c->act_number_checkpoints != registered)
        ZT_LOGW("activations",
                "activation_checkpointing.number_checkpoints is %lld but %d layers registered "
                "activations (zt_act_register); the store is sized from the registrations",
                (long long)c->act_number_checkpoints, registered);
    if (c->act_profile && !c->trace_path[0])
        ZT_LOGW("activations",
                "activation_checkpointing.profile is true but ztier.trace_path is not set: the "
                "per-layer spans go to the trace; set ztier.trace_path to see them");
    if (!registered && act_tier(c) != ZT_TIER_DEVICE)
        ZT_LOGW("activations",
                "activation_checkpointing asks for checkpoints in %s, but the trainer "
                "registered none (zt_act_register): nothing is moved off the device",
                act_tier(c) == ZT_TIER_NVME ? "NVMe" : "host memory");
}

zt_status zt_rt_act_open(zt_runtime *rt)
{
    int registered = 0;
    uint64_t *bytes = calloc((size_t)rt->reg.n_layers, sizeof *bytes);
    if (!bytes)
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory for the activation store");
    for (int i = 0; i < rt->reg.n_layers; i++)
        registered += (bytes[i] = rt->reg.layers[i].act_bytes) != 0;
    report_keys(rt, registered);
    zt_status st = ZT_OK;
    zt_tier_kind tier = act_tier(&rt->cfg);
    if (registered && tier == ZT_TIER_NVME)
        st = open_swap(rt);
    if (registered && st == ZT_OK)
        st = zt_device_stream_create(rt->device.dev, &rt->acts.stream, &rt->err);
    if (registered && st == ZT_OK) {
        zt_act_env env = {.dev = rt->device.dev,
                          .stream = rt->acts.stream,
                          .dtier = &rt->tiers.dtier,
                          .homes = rt->tiers.homes,
                          .tier = tier,
                          .ahead = rt->cfg.act_prefetch_layers,
                          .staging = (int)rt->cfg.act_offload.buffer_count,
                          .sync_saves = rt->cfg.act_sync,
                          .profile = rt->cfg.act_profile};
        env.homes.swap = rt->acts.swap;
        env.homes.pin = rt->cfg.act_offload.pin_memory;
        st = zt_act_store_create(&env, rt->reg.n_layers, bytes, &rt->acts.store, &rt->err);
    }
    free(bytes);
    return st;
}

void zt_rt_act_close(zt_runtime *rt)
{
    zt_act_store_destroy(rt->acts.store);
    rt->acts.store = NULL;
    zt_swap_destroy(rt->acts.swap);
    rt->acts.swap = NULL;
    if (rt->acts.stream)
        zt_device_stream_destroy(rt->device.dev, rt->acts.stream);
    rt->acts.stream = NULL;
}

static zt_status check_registered(zt_runtime *rt, int layer, const char *call)
{
    if (rt->acts.store && zt_act_store_capacity(rt->acts.store, layer))
        return ZT_OK;
    return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                  "%s: layer '%s' registered no activations; call zt_act_register(rt, %d, "
                  "bytes) before zt_runtime_commit",
                  call, rt->reg.layers[layer].name, layer);
}

zt_status zt_rt_act_save(zt_runtime *rt, int layer, const void *src, uint64_t bytes,
                         zt_stream *caller)
{
    zt_status st = check_registered(rt, layer, "zt_act_save");
    if (st != ZT_OK)
        return st;
    uint64_t cap = zt_act_store_capacity(rt->acts.store, layer);
    if (bytes > cap)
        return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                      "zt_act_save: %llu bytes for layer '%s', which registered %llu; register "
                      "the most the layer saves",
                      (unsigned long long)bytes, rt->reg.layers[layer].name,
                      (unsigned long long)cap);
    return zt_act_store_save(rt->acts.store, layer, src, bytes, caller, &rt->err);
}

zt_status zt_rt_act_load(zt_runtime *rt, int layer, zt_stream *caller, void **ptr, uint64_t *bytes)
{
    zt_status st = check_registered(rt, layer, "zt_act_load");
    if (st == ZT_OK)
        st = zt_act_store_load(rt->acts.store, layer, caller, ptr, bytes, &rt->err);
    if (st == ZT_OK) /* a blocking free waits for it (mixing the forms, api/ztier.h) */
        rt->reg.layers[layer].act_stream = caller;
    return st;
}

zt_status zt_rt_act_free(zt_runtime *rt, int layer, zt_stream *caller)
{
    zt_status st = check_registered(rt, layer, "zt_act_free");
    zt_stream **loaded_on = st == ZT_OK ? &rt->reg.layers[layer].act_stream : NULL;
    /* the blocking form after an async load: the loading stream's reads of the buffer are
     * done before it goes back */
    if (st == ZT_OK && !caller && *loaded_on)
        st = zt_rt_sync_stream(rt, *loaded_on);
    if (st == ZT_OK)
        st = zt_act_store_free(rt->acts.store, layer, caller, &rt->err);
    if (st == ZT_OK)
        *loaded_on = NULL;
    return st;
}

void zt_rt_act_discard(zt_runtime *rt)
{
    if (rt->acts.store)
        zt_act_store_discard(rt->acts.store);
    for (int i = 0; i < rt->reg.n_layers; i++)
        rt->reg.layers[i].act_stream = NULL;
}

int zt_rt_act_outstanding(const zt_runtime *rt)
{
    return rt->acts.store ? zt_act_store_outstanding(rt->acts.store) : 0;
}

void zt_rt_act_stats(const zt_runtime *rt, zt_stats *out)
{
    if (!rt->acts.store)
        return;
    zt_act_stats a;
    zt_act_store_stats(rt->acts.store, &a);
    out->act_saves = a.saves;
    out->act_saved_bytes = a.saved_bytes;
    out->act_device_bytes = a.device_bytes;
    out->act_device_peak_bytes = a.device_peak;
    out->act_home_bytes = a.home_bytes;
    out->act_prefetch_hits = a.prefetch_hits;
    out->act_wait_s = a.wait_s;
    out->act_evictions = a.evictions;
    out->h2d_bytes += a.h2d_bytes;
    out->d2h_bytes += a.d2h_bytes;
    if (rt->acts.swap) {
        zt_swap_stats ss;
        zt_swap_get_stats(rt->acts.swap, &ss);
        out->nvme_bytes_current += ss.used;
        out->nvme_bytes_peak += ss.used;
        out->nvme_read_bytes += ss.read_bytes;
        out->nvme_write_bytes += ss.write_bytes;
        /* not its read_s/write_s: the store collects finished transfers when it next looks,
         * so those measure its pace, not a wait; what loads waited is act_wait_s */
    }
}

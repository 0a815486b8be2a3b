/* SPDX-License-Identifier: MIT */
/* The placement plan: how every layer is laid out over the ranks and what each tier holds
 * on one rank, from the registry and the configuration alone. Commit lays out and allocates
 * by it; `ztier estimate` prints it for a world size the caller chooses. */
#ifndef ZT_RUNTIME_PLAN_H
#define ZT_RUNTIME_PLAN_H

#include "runtime/runtime.h"

typedef struct zt_plan {
    int world;
    int qgz_node_ranks;      /* ranks per node of two-level qgZ's, 0 for one level: the
                                committed topology's, else (estimates) consecutive nodes of
                                ztier.ranks_per_node */
    zt_dtype dtype;          /* of parameters and gradients */
    zt_tier_kind param_tier; /* home of sharded parameters (persistent ones: device) */
    zt_tier_kind optim_tier; /* home of master, m, v: host or NVMe (Adam on the CPU), or the
                                device (ztier.device_optimizer: Adam and the gradient
                                accumulators on the device too) */
    int64_t max_shard;       /* elements of the largest shard */
    uint64_t staging_bytes;  /* host: one fp32 shard in transit and its working-dtype copy */
    uint64_t opt_buf_bytes;  /* host: each of the NVMe step's sub-group buffers (or 0) */
    uint64_t
        opt_buf_stride;    /* ... they lie in one allocation this far apart (zt_host_tier_stride) */
    int opt_sets;          /* the NVMe step's buffer sets (offload_optimizer.buffer_count) */
    int opt_bufs_per_set;  /* 3 (master, m, v), or 2 (m, v) where every master is the
                                parameters' home in host memory, updated in place */
    int opt_bufs_pinned;   /* a master is copied in from device memory: pinned buffers */
    uint64_t host_bytes;   /* host tier in all: the above, gradient accumulators, homes */
    uint64_t pinned_bytes; /* NVMe parameter staging pool */
    uint64_t nvme_param_bytes, nvme_optim_bytes; /* swap files */
    uint64_t max_param_shard_bytes;              /* one staging buffer of the pool */
    uint64_t device_resident;    /* parameters (and a device optimizer's state) in device memory */
    uint64_t device_param_tmp;   /* device optimizer: one shard's new parameters in transit */
    uint64_t device_optim_bytes; /* the device optimizer's state and sums (in device_resident):
                                    every layer's, or the device's share of
                                    offload_optimizer.ratio */
    int device_optim_layers;
    float cpu_ratio;     /* the share of this rank's optimizer elements updated on the CPU */
    uint64_t device_min; /* resident + the largest need of one backward pass (its
                                 parameters, gradients and transfer buffers) */
    const char *device_min_layer;
    uint64_t persistent_bytes;
    int persistent_layers;
    uint64_t replicated_bytes; /* stages 1 and 2: the replicas in device_resident */
    int replicated_layers;
} zt_plan;

/* Lays every layer out for `world` ranks: parameter offsets, flat and shard sizes, and
 * whether it is persistent (below stage3_param_persistence_threshold). */
void zt_plan_layout(zt_runtime *rt, int world);

/* Where layer L's master, m and v live: the device for a layer of the device optimizer
 * (L->opt_device, all of them or offload_optimizer.ratio's share), else optim_tier. */
zt_tier_kind zt_plan_optim_tier(const zt_plan *p, const zt_layer *L);

/* 1 when layer L's fp32 master is its parameters' home itself: fp32 parameters always hold
 * the master's bytes, so they are kept once where the step can reach them — a home in host
 * memory with the optimizer state in host memory or on NVMe (updated in place), a home in
 * device memory with the state on NVMe (the NVMe step copies each sub-group in). 4 bytes per
 * parameter less; on NVMe the step moves m and v only, a third less traffic. Persistent
 * layers (small, in device memory) keep a master of their own (zt_plan_master_tier). */
int zt_plan_master_is_param(const zt_plan *p, const zt_layer *L);
/* Where a master of its own (not zt_plan_master_is_param) lives: the optimizer state's tier,
 * but host memory for a persistent layer's with the state on NVMe (small, and updated in
 * place there rather than read and written through the NVMe step's sets). */
zt_tier_kind zt_plan_master_tier(const zt_plan *p, const zt_layer *L);
/* 1 when the NVMe step copies layer L's new master bytes straight to its parameters' device
 * home (fp32 parameters in device memory, the state on NVMe): the host memory that holds the
 * master then (the step's set buffers, or a persistent layer's own master) is pinned. */
int zt_plan_master_to_device(const zt_plan *p, const zt_layer *L);

/* 1 when layer L keeps the fp32 sums of this rank's micro-steps in device memory and
 * reduce-scatters them once per step (stage 1, several ranks, gradient accumulation); else
 * each backward release reduce-scatters its gradients (stage 2, and stage 1 without
 * accumulation, where the two are the same). */
int zt_plan_local_sums(const zt_runtime *rt, const zt_plan *p, const zt_layer *L);

/* Device bytes of qwZ's transfer buffers for layer L (0 where they are not used), held from
 * a gather's all-gather to its end. */
uint64_t zt_plan_qwz_bytes(const zt_runtime *rt, const zt_plan *p, const zt_layer *L);

/* Whether L's gradients are reduced by qgZ, and the bytes of qgZ's buffers (0 without it),
 * made at a step's first qgZ release for the largest layer and held until the step: the head
 * scratch and ZT_QGZ_SLOTS slots, each a last exchange's tail and, with the optimizer off
 * the device, the fp32 sum of a shard (runtime/reduce.c). */
int zt_plan_uses_qgz(const zt_runtime *rt, const zt_plan *p, const zt_layer *L);
/* Gradient buckets (reduce_bucket_size, world > 1): the most flat elements a bucket of
 * several layers can hold (a layer that would take it past the size closes it first, and it
 * holds each layer at most once), and in *slots how many fp32 buffers of that size a step
 * makes (1 when one bucket can hold every layer); 0 and 0 with one rank or nothing to
 * bucket. */
int64_t zt_plan_bucket_elems(const zt_runtime *rt, int world, int *slots);
uint64_t zt_plan_qgz_bytes(const zt_runtime *rt, const zt_plan *p);

/* The NVMe step's buffer sets: offload_optimizer.buffer_count counts buffers as DeepSpeed's
 * does, one optimizer state of a sub-group each, so a set (master, m, v) takes three; at
 * least ZT_NVME_STEP_MIN_SETS, at most ZT_NVME_STEP_MAX_SETS. Each set beyond three reads one
 * more sub-group ahead (in the backward pass, before the step), at 3 sub-group buffers of
 * host memory each. */
int zt_plan_nvme_step_sets(const zt_config *cfg);

/* The bytes of each tier on one rank for the layout zt_plan_layout made. */
void zt_plan_make(const zt_runtime *rt, int world, zt_plan *out);

#endif

/* SPDX-License-Identifier: MIT */
/* One layer's gather: the staged pipeline that brings its full parameters into device
 * memory,
 *   NONE -> [READING: NVMe home -> pinned staging buffer] -> COPYING (the shard copied into
 *   its slot of a full-size device buffer, on the prefetch stream) -> COMM (all-gather, or
 *   qwZ's int8 all-gather, or hpZ's node-local gather) -> READY.
 * Each zt_gather_advance moves the layer one stage, waiting only for the stage before it, so
 * collectives are issued at points that depend on the call sequence alone, identical on
 * every rank. A gather knows its own layer only; which layers advance, stay or are dropped
 * is the prefetcher's decision (prefetch.h). */
#ifndef ZT_PREFETCH_GATHER_H
#define ZT_PREFETCH_GATHER_H

#include "comm/zeropp.h"
#include "tiers/device_tier.h"
#include "tiers/home.h"
#include "tiers/staging_pool.h"

typedef enum zt_gather_state {
    ZT_GATHER_NONE = 0,
    ZT_GATHER_READING, /* NVMe -> pinned staging buffer in flight */
    ZT_GATHER_COPYING,
    ZT_GATHER_COMM,
    ZT_GATHER_READY
} zt_gather_state;

/* What every layer's gather shares. */
typedef struct zt_gather_env {
    zt_device *dev;
    zt_stream *stream;        /* the prefetch stream: shard copies */
    zt_device_tier *dtier;    /* full buffers, secondary slices */
    zt_staging_pool *staging; /* NVMe reads (NULL without parameters on NVMe) */
    zt_topology *topo;
    zt_dtype dtype;
    int qwz;                            /* int8 all-gather (zero_quantized_weights) */
    int hpz;                            /* keep node-local slices (zero_hpz_partition_size > 1) */
    int quant_block;                    /* elements per quantization block */
    uint64_t h2d_bytes, gathered_bytes; /* counters */
    uint64_t host_syncs;                /* times the host waited for a device stream */
    int64_t bucket_elems; /* stages 1/2: most partition elements one bucketed all-gather packs */
    uint64_t buckets;     /* bucketed all-gathers issued */
    double comm_wait_s;   /* time the host waited for all-gathers to complete (exposed) */
    /* set once the caller hands ztier its stream: a dropped layer's copy still in flight is
     * then fenced (freed after it) instead of waited for; until then drops wait, so that
     * device memory stays a function of the calls (what ztier estimate replays) */
    int fenced_drops;
    /* called before a layer's home is read (or handed out, persistent): the optimizer step
     * may still have to update it. For a fetch (demand) the callee brings it up to date and
     * returns 1; for a prefetch it may return 0, and the layer is left to its fetch. The
     * answer must depend on the call sequence alone (every rank's prefetches issue the same
     * collectives). NULL: homes are always current. Failures are the callee's to keep and
     * report. */
    int (*home_ready)(void *ctx, const zt_home *home, int demand);
    void *home_ready_ctx;
    /* called when the device tier is full, before anything gathered is evicted: frees device
     * memory that work in flight holds (the runtime's gradient reductions) by completing the
     * oldest; 1 when it completed one, 0 when none was in flight. Failures are the callee's
     * to keep and report. NULL: nothing in flight holds device memory. */
    int (*reclaim)(void *ctx);
    void *reclaim_ctx;
} zt_gather_env;

/* Stages 1 and 2: consecutive replicated layers all-gathered by one collective. */
typedef struct zt_gather_bucket {
    struct zt_gather *first; /* its gathers: count of them, consecutive in memory */
    int count;
    int64_t elems;     /* the sum of their partitions */
    void *send, *recv; /* device: elems, and ranks x elems, elements */
    zt_comm_req req;
} zt_gather_bucket;

typedef struct zt_gather {
    const char *name;    /* not owned */
    int64_t flat_numel;  /* the full layer */
    int64_t shard_numel; /* this rank's part (persistent: flat_numel) */
    int persistent;      /* the home is the full layer in device memory: nothing to move */
    const zt_home *home; /* this rank's shard of the working-dtype parameters */
    /* stages 1 and 2: the full layer's device memory, owned by the runtime; the gather fills
     * it instead of a buffer of its own, and a drop leaves it allocated (NULL: not replicated) */
    const zt_home *replica;
    zt_gather_bucket *bucket; /* COMM in a bucketed all-gather */
    zt_gather_state state;
    void *buf;        /* device: the full parameters while gathered */
    zt_event *copied; /* the shard's copy into buf is done */
    zt_comm_req req;  /* the all-gather in flight */
    void *nvme_buf;   /* staging buffer of an NVMe read in flight */
    zt_swap_io nvme_io;
    zt_qwz qwz;
    void *qwz_scratch;  /* device: qwZ's transfer buffers, from its start to its finish */
    int advancing;      /* inside zt_gather_advance: its allocations may not evict it */
    void *secondary;    /* hpZ: this rank's 1/node_size slice of the layer */
    int from_secondary; /* the gather in flight reads the node's slices */
} zt_gather;

zt_status zt_gather_init(zt_gather *g, zt_gather_env *env, const char *name, int64_t flat_numel,
                         int64_t shard_numel, int persistent, const zt_home *home,
                         const zt_home *replica, zt_error *err);
/* Drops whatever is gathered (waiting for stages in flight) and frees the event. */
void zt_gather_fini(zt_gather *g, zt_gather_env *env);

/* Moves the gather one stage on. demand: a fetch the caller waits for, so on device-memory
 * exhaustion the device tier may evict (a prefetch passes 0 and gives up instead). *needs_staging is set
 * (and nothing changes) when an NVMe read needs a staging buffer and every one is in use:
 * the caller finishes another layer's read and tries again. A failure drops the gather. */
zt_status zt_gather_advance(zt_gather *g, zt_gather_env *env, int demand, int *needs_staging,
                            zt_error *err);

/* A READY gather's buffer is complete once this event is (a single rank's copy to the device
 * may still be in flight: the consumer orders its work after the event or waits for it);
 * NULL when there is nothing to wait for (persistent layers). */
zt_event *zt_gather_ready_event(const zt_gather *g);

/* Waits for any stage in flight and frees the full buffer (state NONE; a replica stays
 * allocated, out of date until the next gather). Never fails. */
void zt_gather_drop(zt_gather *g, zt_gather_env *env);

/* Packs the partitions of k consecutive replicated gathers (NONE, homes current) into one
 * all-gather; each is then COMM in the bucket. Without room for its buffers (never evicting)
 * nothing changes and *started is 0: the caller gathers them one by one. */
zt_status zt_gather_bucket_start(zt_gather *g, int k, zt_gather_env *env, int *started,
                                 zt_error *err);
/* Waits for the bucket's all-gather and copies every piece into its replica: each of its
 * gathers READY, or NONE after a failure (the buffers stay allocated if the collective
 * never completed). Frees the bucket. */
zt_status zt_gather_bucket_finish(zt_gather_bucket *b, zt_gather_env *env, zt_error *err);

/* Frees the hpZ slice (before the parameters change). */
void zt_gather_release_secondary(zt_gather *g, zt_gather_env *env);

#endif

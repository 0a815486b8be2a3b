/* SPDX-License-Identifier: MIT */
/* The prefetcher: one object that owns every layer's gather (gather.h), the recorded layer
 * order (trace.h) and who holds which layer, and makes every read-ahead, keep, drop and
 * eviction decision through the scheduler (schedule.h):
 *  - at a training fetch, the layers the trace expects next move one stage further, within
 *    stage3_prefetch_bucket_size and stage3_max_live_parameters, up to their collective:
 *    a layer whose collective is in flight is completed by its own fetch, so the gathers
 *    ahead of use stay in flight together;
 *  - a released layer stays gathered when the trace needs it again within
 *    stage3_max_reuse_distance elements;
 *  - device memory runs out: the unheld gathered layer needed furthest away is evicted (the
 *    device tier calls back);
 *  - a changed order drops the window and is re-recorded; inference fetches are outside the
 *    order.
 * Every decision depends only on the call sequence and the configuration, so every rank
 * issues the same collectives in the same order. */
#ifndef ZT_PREFETCH_PREFETCH_H
#define ZT_PREFETCH_PREFETCH_H

#include "prefetch/gather.h"
#include "prefetch/schedule.h"

typedef struct zt_prefetcher zt_prefetcher;

typedef struct zt_prefetch_stats {
    uint64_t prefetch_hits;  /* fetches whose layer was already on its way */
    uint64_t evictions;      /* gathered layers freed to make room */
    uint64_t deviations;     /* steps whose layer order left the recorded one */
    uint64_t slices_dropped; /* hpZ slices freed to make room */
} zt_prefetch_stats;

/* n_layers gathers, each to be set up with zt_gather_init on zt_prefetcher_gather(pf, i).
 * Registers itself as env->dtier's evictor. env must outlive the prefetcher. */
zt_status zt_prefetcher_create(const zt_sched_limits *lim, zt_gather_env *env, int n_layers,
                               zt_prefetcher **out, zt_error *err);
/* Drops every gather; NULL is a no-op. */
void zt_prefetcher_destroy(zt_prefetcher *pf);

zt_gather *zt_prefetcher_gather(zt_prefetcher *pf, int layer);

/* Makes the layer's full parameters ready and holds it for pass; *full receives them and
 * *ready the event after which they are complete (NULL: already complete; see
 * zt_gather_ready_event): the caller waits for it or orders its stream after it. Training
 * passes are checked against the recorded order and move the window on. On failure nothing
 * is held. */
zt_status zt_prefetcher_fetch(zt_prefetcher *pf, int layer, zt_pass pass, void **full,
                              zt_event **ready, zt_error *err);
/* Ends one hold of (layer, pass); once nothing holds the layer it is kept or dropped. */
void zt_prefetcher_release(zt_prefetcher *pf, int layer, zt_pass pass);

int zt_prefetcher_holds(const zt_prefetcher *pf, int layer, zt_pass pass);
int zt_prefetcher_held(const zt_prefetcher *pf); /* holds over every layer and pass */

/* Device memory for the caller (gradients), evicting gathered layers when needed. */
zt_status zt_prefetcher_alloc(zt_prefetcher *pf, size_t bytes, void **ptr, zt_error *err);

/* The parameters are about to change: drops every unheld gathered copy and hpZ slice. */
void zt_prefetcher_invalidate(zt_prefetcher *pf);
/* The optimizer step is done: the step just recorded becomes the order, and the next step's
 * first layers start moving. */
void zt_prefetcher_step_done(zt_prefetcher *pf);

void zt_prefetcher_stats(const zt_prefetcher *pf, zt_prefetch_stats *out);

#endif

/* SPDX-License-Identifier: MIT */
/* The prefetch scheduler's decisions as pure functions of the recorded layer order, each
 * layer's state and the limits of the configuration: which layers the window moves on, which
 * released layer stays gathered, which unheld layer is evicted for room. The runtime's
 * prefetcher (prefetch.c) acts on them, and `ztier estimate` (runtime/estimate.c) replays a
 * step with them, so the estimate follows the schedule the runtime really runs. */
#ifndef ZT_PREFETCH_SCHEDULE_H
#define ZT_PREFETCH_SCHEDULE_H

#include "prefetch/layer_order.h"

#include <stdint.h>

/* Look no further than this many trace entries ahead. */
#define ZT_SCHED_LOOKAHEAD 64

typedef struct zt_sched_layer {
    int64_t numel;  /* elements of the full (gathered) layer */
    int persistent; /* resident: never prefetched, kept or evicted */
    int gathered;   /* has a gathered buffer, at any stage of its pipeline */
    int ready;      /* the gather has completed */
    int held;       /* outstanding fetches over every pass */
} zt_sched_layer;

typedef struct zt_sched_limits {
    int64_t bucket;         /* stage3_prefetch_bucket_size: elements ahead of the fetch */
    int64_t max_live;       /* stage3_max_live_parameters: gathered elements at most */
    int64_t reuse_distance; /* stage3_max_reuse_distance: keep a layer needed within this */
} zt_sched_limits;

/* Gathered elements of the layers that are not persistent. */
int64_t zt_sched_live(const zt_sched_layer *layers, int n);

/* After a fetch of layer `current` (-1: none, at the start of a step): the layers the window
 * moves one stage further, in trace order (a layer may appear twice: it moves twice). Writes
 * at most max ids to out and returns the count. */
int zt_sched_window(const zt_sched_limits *lim, const zt_layer_order *t,
                    const zt_sched_layer *layers, int n, int current, int *out, int max);

/* At a release that leaves layer `self` unheld: 1 to keep it gathered for a use soon. */
int zt_sched_keep(const zt_sched_limits *lim, const zt_layer_order *t, const zt_sched_layer *layers,
                  int n, int self);

/* The unheld gathered layer needed furthest in the future, or -1 when none can go. */
int zt_sched_victim(const zt_layer_order *t, const zt_sched_layer *layers, int n);

#endif

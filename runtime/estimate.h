/* SPDX-License-Identifier: MIT */
/* Sizing a run before starting it (`ztier estimate`): the placement plan of a registered,
 * uncommitted model for a chosen world size, and the device memory its training steps reach,
 * found by replaying the steps' fetches and releases through the prefetch scheduler
 * (prefetch/schedule.h) with the device budget, without allocating or moving anything. */
#ifndef ZT_RUNTIME_ESTIMATE_H
#define ZT_RUNTIME_ESTIMATE_H

#include "runtime/plan.h"

/* One call of a micro-step: zt_fetch (release 0) or zt_release (release 1). */
typedef struct zt_est_event {
    int layer;
    zt_pass pass;
    int release;
} zt_est_event;

typedef struct zt_estimate {
    zt_plan plan;
    uint64_t device_capacity;  /* the budget the replay ran under */
    uint64_t device_peak;      /* the replayed steps' peak under that budget */
    uint64_t device_window;    /* the peak with no budget: what the whole window takes */
    uint64_t device_min_order; /* the smallest budget these steps run with (layers held
                                  together, like a tied embedding, need more than
                                  plan.device_min) */
    uint64_t evictions;        /* prefetched layers freed for room, per step under the budget */
} zt_estimate;

/* Estimates one rank of the registered model run on `world` ranks with the runtime's
 * configuration: the plan, then `steps` optimizer steps of gradient_accumulation_steps
 * micro-steps each, every micro-step the n events given (NULL: each layer fetched and
 * released forward in order, then backward in reverse). Lays the model out for `world`; the
 * runtime must not be committed (it stays uncommitted and usable). */
zt_status zt_rt_estimate(zt_runtime *rt, int world, uint64_t device_capacity,
                         const zt_est_event *events, int n, int steps, zt_estimate *out);

#endif

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

#define ZT_ORDER_TIGHT 256

typedef struct zt_estimate {
    zt_plan plan;
    uint64_t device_capacity;   /* the budget the replay ran under */
    int runs;                   /* the steps run under that budget (device_peak and evictions are
                                  theirs); 0: it is below device_min_order */
    uint64_t device_peak;       /* the replayed steps' peak under that budget */
    uint64_t device_window;     /* the peak with no budget: what the whole window takes */
    uint64_t device_min_order;  /* the smallest budget these steps run with (layers held
                                  together, like a tied embedding, need more than
                                  plan.device_min) */
    uint64_t evictions;         /* prefetched layers freed for room, per step under the budget */
    char tight[ZT_ORDER_TIGHT]; /* where a byte below device_min_order runs out, when that is
                                   above plan.device_min (zt_order_need.tight) */
    /* Activation checkpoints registered (zt_act_register): the layers, the bytes of their
     * homes (host memory, NVMe, or device memory with activation_checkpointing.device
     * "none"), and the store's device buffers: at least (counted in device_min_order) and at
     * most (a load and prefetch_layers read ahead; counted in device_window) */
    int act_layers;
    uint64_t act_home, act_device_min, act_device_max;
} zt_estimate;

/* Estimates one rank of the registered model run on `world` ranks with the runtime's
 * configuration: the plan, then `steps` optimizer steps of gradient_accumulation_steps
 * micro-steps each, every micro-step the n events given (NULL: zt_rt_registered_order).
 * Lays the model out for `world`; the runtime must not be committed (it stays uncommitted
 * and usable). Below the minimum: ZT_ERR_DEVICE_NOMEM naming it, with the plan,
 * device_min_order and device_window filled and runs 0. */
zt_status zt_rt_estimate(zt_runtime *rt, int world, uint64_t device_capacity,
                         const zt_est_event *events, int n, int steps, zt_estimate *out);

/* One micro-step's calls as the registration declares them: each layer fetched and released
 * forward in order, a tied layer (zt_layer_tie) fetched and released again after the layer
 * it is tied after; then backward in reverse, a tied layer fetched before the backward pass
 * of that layer and released at its own place. Without ties: forward in order, backward in
 * reverse. *n receives the count; the caller frees the array; NULL when out of memory. */
zt_est_event *zt_rt_registered_order(const zt_runtime *rt, int *n);

/* What a call order needs of the device. */
typedef struct zt_order_need {
    uint64_t min;               /* the smallest budget the steps run with */
    uint64_t window;            /* their peak with no budget */
    char tight[ZT_ORDER_TIGHT]; /* where min - 1 bytes run out ("the backward fetch of layer
                                    'h3' with 'embed' (backward) held"); "" when min is the plan's
                                    device_min (one layer's backward pass alone) */
} zt_order_need;

/* Replays `steps` steps of `micro_steps` micro-steps of the n events (every layer id valid)
 * under the plan (made by zt_plan_make for the layout of zt_plan_layout) and finds the
 * smallest budget they run with: the call behind zt_rt_estimate and commit's device budget
 * check. Allocates nothing of the runtime; leaves rt->err as it was unless it fails
 * (ZT_ERR_ARGUMENT: an event releases a layer not fetched for that pass; ZT_ERR_NOMEM). */
zt_status zt_rt_order_need(zt_runtime *rt, const zt_plan *plan, const zt_est_event *ev, int n,
                           int steps, int micro_steps, zt_order_need *out);

/* When the prefetch window issued the work of each fetch's gather, as the replay of `steps`
 * steps (the last one recorded: the trace is valid and the step before ended with zt_step's
 * window) under `capacity` runs it with the scheduler's decisions (zt_sched_window,
 * stage3_prefetch_bucket_size and stage3_max_live_parameters): per stage of the gather (0:
 * its start, which allocates and issues the NVMe read or the copy to the device; then each
 * step of the pipeline, the copy of a staged read, the all-gather), the call, an index into
 * the step's calls (micro-step * n + event), at whose fetch (the window's move after it, or
 * the fetch itself on demand) that stage was issued. `ztier plan` starts each transfer when
 * that call is made (tools/plan.c). */
#define ZT_EST_STAGES 3
#define ZT_EST_STEP_START (-1) /* at the end of the step before (zt_step's window move) */
#define ZT_EST_NOT_ISSUED (-2) /* not issued since the layer's last fetch (it stayed gathered) */

typedef struct zt_est_issue {
    int at[ZT_EST_STAGES];
} zt_est_issue;

/* out: n * micro_steps entries (those of releases all ZT_EST_NOT_ISSUED). ZT_ERR_DEVICE_NOMEM
 * when the steps do not fit `capacity`; ZT_ERR_ARGUMENT, ZT_ERR_NOMEM as zt_rt_order_need. */
zt_status zt_rt_prefetch_issues(zt_runtime *rt, const zt_plan *plan, uint64_t capacity,
                                const zt_est_event *ev, int n, int steps, int micro_steps,
                                zt_est_issue *out);

#endif

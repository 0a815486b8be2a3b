/* SPDX-License-Identifier: MIT */
/* The optimizer engines: one per placement of the optimizer state, chosen once at commit
 * (zt_opt_engine_choose) and called by the step through these wrappers, never through flags.
 *  - host:            state in host memory, every layer updated inside zt_step;
 *  - host-overlapped: the same, each layer updated when something first needs it after
 *                     zt_step (ztier.overlap_step "on");
 *  - nvme:            state on NVMe, the pipelined step (optimizer/nvme_step.h) inside zt_step;
 *  - nvme-overlapped: its updates left to later calls (ztier.overlap_step "auto" or "on");
 *  - device:          accumulators, the norm's sums and Adam in device memory
 *                     (runtime/step_device.c). */
#ifndef ZT_RUNTIME_OPT_ENGINE_H
#define ZT_RUNTIME_OPT_ENGINE_H

#include "runtime/runtime.h"

typedef struct zt_opt_engine_ops {
    const char *name;
    /* out[0]: sum of squares of this rank's gradient sums times scale, out[1]: their count of
     * non-finite elements (layers that got no gradient this step count as zeros). */
    zt_status (*grad_stats)(zt_runtime *rt, float scale, double out[2]);
    /* Updates every layer with h, or starts a step whose updates later calls make. A failure
     * that leaves the state half updated is kept in rt->async_err. */
    zt_status (*begin)(zt_runtime *rt, const zt_adam_hparams *h);
    /* The step in progress updates its layers before `through`, in order. */
    zt_status (*advance)(zt_runtime *rt, int through, zt_error *e);
    /* Layers the step in progress has updated; -1 when none is in progress. */
    int (*done_layers)(const zt_runtime *rt);
    /* After a step: the gradient sums of the updated layers are cleared (all, when no step is
     * in progress any more). */
    zt_status (*clear_grads)(zt_runtime *rt);
} zt_opt_engine_ops;

/* Clears the gradient sums of the layers the step in progress has updated since the last
 * call (all not yet cleared, once none is in progress). */
void zt_opt_clear_updated(zt_runtime *rt);

/* From what commit opened: the device optimizer, the NVMe step, ztier.overlap_step. */
void zt_opt_engine_choose(zt_runtime *rt);

static inline const char *zt_opt_engine_name(const zt_runtime *rt) { return rt->opt.ops->name; }
static inline zt_status zt_opt_grad_stats(zt_runtime *rt, float scale, double out[2])
{
    return rt->opt.ops->grad_stats(rt, scale, out);
}
static inline zt_status zt_opt_begin(zt_runtime *rt, const zt_adam_hparams *h)
{
    return rt->opt.ops->begin(rt, h);
}
static inline zt_status zt_opt_advance(zt_runtime *rt, int through, zt_error *e)
{
    return rt->opt.ops->advance(rt, through, e);
}
static inline int zt_opt_done_layers(const zt_runtime *rt)
{
    return rt->opt.ops ? rt->opt.ops->done_layers(rt) : -1;
}
static inline zt_status zt_opt_clear_grads(zt_runtime *rt) { return rt->opt.ops->clear_grads(rt); }

#endif

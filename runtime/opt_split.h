/* SPDX-License-Identifier: MIT */
/* offload_optimizer.ratio, DeepSpeed's Twin-Flow: with the optimizer state offloaded to host
 * memory, the fraction `ratio` of this rank's optimizer elements is updated by the CPU's Adam
 * and the rest by the device optimizer (runtime/step_device.c), concurrently in each step.
 * The split keeps layers whole: the first layers in registration order (those the next
 * forward needs first) go to the device, the last ones stay on the CPU, as DeepSpeed keeps
 * its first sub-groups on the GPU. "auto" measures both Adam rates at commit and, with the
 * overlapped step, moves the split after each step to fit the CPU's share within the
 * measured forward time (runtime/fwd_time.h; zt_opt_split_refine). */
#ifndef ZT_RUNTIME_OPT_SPLIT_H
#define ZT_RUNTIME_OPT_SPLIT_H

#include "runtime/runtime.h"

/* The CPU's share to lay out: 1 unless the state is in host memory; the configured ratio; for
 * "auto" the measured choice, or 0 before it is measured (estimates: the most the device may
 * hold). */
float zt_opt_split_target(const zt_runtime *rt);

/* Sets every layer's opt_device from the configuration (the device optimizer: all; a ratio:
 * the first layers) and rt->opt.cpu_ratio to the share that results. Laid out layers only. */
void zt_opt_split_layers(zt_runtime *rt);

/* Puts the first k layers' optimizer on the device and the rest on the CPU. */
void zt_opt_split_first(zt_runtime *rt, int k);

/* "auto" (at commit, before the layout): times the CPU's Adam at its thread budget and the
 * device's Adam on one shard-sized buffer each and chooses the CPU's share
 * cpu_rate / (cpu_rate + device_rate): both shares then take the same time, so the CPU's
 * share is done when the device's is, before the next forward starts. Commit then keeps as
 * many of those layers on the device as leave the prefetch window room in the budget. */
zt_status zt_opt_split_measure(zt_runtime *rt);

/* "auto" re-splits after a step (ztier.overlap_step "on", one rank): 1 when it may. */
int zt_opt_split_refinable(const zt_runtime *rt);

/* The fewest leading layers whose optimizer goes on the device so that the CPU's Adam, at
 * cpu_rate elements/s, updates the rest within forward_s: the CPU's share r (of this rank's
 * N elements) satisfies r N / cpu_rate <= forward_s, and is the largest such share whole
 * layers give. */
int zt_opt_split_for_forward(const zt_runtime *rt, double forward_s, double cpu_rate);

/* At commit: the split at info level; a warning at the default level where the configured
 * ratio cannot be honoured (no offload to host memory; layers kept whole). */
void zt_opt_split_report(const zt_runtime *rt);

#endif

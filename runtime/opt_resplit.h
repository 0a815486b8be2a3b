/* SPDX-License-Identifier: MIT */
/* offload_optimizer.ratio "auto" with the overlapped step: the split moved after a step to
 * fit the CPU's share within the forward time (runtime/fwd_time.h), by the rule of
 * zt_opt_split_for_forward (opt_split.h). */
#ifndef ZT_RUNTIME_OPT_RESPLIT_H
#define ZT_RUNTIME_OPT_RESPLIT_H

#include "runtime/runtime.h"

/* After a step whose forward was timed (runtime/fwd_time.h), "auto" with the overlapped
 * step: the split zt_opt_split_for_forward gives for the smallest forward time measured so
 * far (a forward that waited for the CPU's update is longer, never shorter, so the choice
 * cannot feed on itself), at most the split_max_layers the device budget holds (past it a
 * warning, once: each step then waits for the CPU). A different split completes the
 * step's CPU share first, then moves the layers' master, m and v between device and host
 * memory with their values unchanged (gradient sums are zero at the boundary), and says so
 * at info level. A failed move leaves each layer whole where it is, and ends refinement. */
zt_status zt_opt_split_refine(zt_runtime *rt);

#endif

/* SPDX-License-Identifier: MIT */
/* `ztier plan --search` (docs/plan.md, "Searching for the fastest configuration"): every
 * configuration of placement, ZeRO stage, micro-batch x accumulation for the same global batch
 * and activation checkpoint policy, then the prefetch window and the optimizer split varied on
 * the fastest, each checked against the memory budgets with `ztier estimate`'s bytes and timed
 * with `ztier plan`'s step model; the fastest printed as a ds_config section, with the
 * runner-up and the resource that bound it, and for each dimension whether the model tells its
 * values apart. */
#ifndef ZT_TOOLS_PLAN_SEARCH_H
#define ZT_TOOLS_PLAN_SEARCH_H

#include "tools/estimate_model.h"

/* The search for `ztier plan <model arguments> --profile P --search [--host-memory SIZE]
 * [--nvme-memory SIZE] [--nvme-path DIR] [--json]`; argc/argv: the command's, o: its model
 * arguments. Returns the command's exit status (0, or 1 with the cause on stderr). */
int plan_search(int argc, char **argv, const est_options *o, const char *profile);

#endif

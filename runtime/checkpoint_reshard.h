/* SPDX-License-Identifier: MIT */
/* Loading a checkpoint whose files split the layers otherwise than this run does: saved by
 * another number of ranks, or with layers replicated in one run and partitioned in the other
 * (ZeRO stage 0 against 1-3). See checkpoint_reshard.c. */
#ifndef ZT_RUNTIME_CHECKPOINT_RESHARD_H
#define ZT_RUNTIME_CHECKPOINT_RESHARD_H

#include "runtime/checkpoint_manifest.h"

/* Reads this rank's part of every layer's master, m and v from the pieces of the files that
 * hold it (a replicated layer's whole from one file) into its tiers. */
zt_status zt_ckpt_reshard_restore(zt_runtime *rt, const char *folder, const zt_manifest *m);

#endif

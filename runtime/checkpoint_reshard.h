/* SPDX-License-Identifier: MIT */
/* Loading a checkpoint whose files split the layers otherwise than this run does: saved by
 * another number of ranks, or with layers replicated in one run and partitioned in the other
 * (ZeRO stage 0 against 1-3). See checkpoint_reshard.c. */
#ifndef ZT_RUNTIME_CHECKPOINT_RESHARD_H
#define ZT_RUNTIME_CHECKPOINT_RESHARD_H

#include "runtime/checkpoint_manifest.h"

/* One pass: reads this rank's part of every layer's master, m and v from the pieces of the
 * files that hold it (a replicated layer's whole from one file) into image (the layout of
 * this run's own file: the header's bytes, then per layer master, m, v of shard_numel each;
 * padding zeros), or with image NULL straight into their homes (all in host memory; for a
 * load that need not keep them should it fail: zt_runtime_expect_load), CRCs each piece as it lands, and with the other ranks (a collective: every
 * rank calls it) checks every file's CRC-32 and header (the files k = rank, rank + world, ...
 * on this rank), as zt_ckpt_check_file would, having read each byte once. The files' sizes
 * were checked before (zt_ckpt_validate). With an image nothing is restored: the caller
 * restores from it once the ranks agree. */
zt_status zt_ckpt_reshard_read(zt_runtime *rt, const char *folder, const zt_manifest *m,
                               unsigned char *image);

/* Two passes, where image does not fit in memory: the files k = rank, rank + world, ...
 * checked whole (zt_ckpt_check_file, want bytes each), then after the ranks agree, restored
 * piece by piece from them into the tiers. */
zt_status zt_ckpt_reshard_check(zt_runtime *rt, const char *folder, const zt_manifest *m,
                                uint64_t want);
zt_status zt_ckpt_reshard_restore(zt_runtime *rt, const char *folder, const zt_manifest *m);

#endif

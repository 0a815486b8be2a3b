/* SPDX-License-Identifier: MIT */
/* The optimizer step when master, m and v live on NVMe: every shard is cut into sub-groups
 * (sub_group_size elements, capped so the buffers stay small, whole swap blocks) and
 * pipelined over N >= 3 buffer sets — sub-groups i+1 .. i+N-2 are read while i is updated
 * and i-1 is written back. The step's last write-backs complete in the background, and the
 * first N sub-groups of the next step may be read while the caller runs its backward pass
 * (the state does not depend on the gradients): more sets, more of the state read ahead.
 * The result is bit-identical to the in-memory step: the same kernel runs on the same
 * values, only the order of transfers differs.
 *
 * The state is reached through its homes (tiers/home.h): this module knows shards, not
 * layers. A transfer that fails in the background is kept and reported by the next call
 * that returns a status (run or drain), never lost. */
#ifndef ZT_OPTIMIZER_NVME_STEP_H
#define ZT_OPTIMIZER_NVME_STEP_H

#include "optimizer/adam.h"
#include "tiers/home.h"

#define ZT_NVME_STEP_MIN_SETS 3 /* buffer sets in the pipeline: read, update, write */
#define ZT_NVME_STEP_MAX_SETS 32
#define ZT_NVME_STEP_MAX_BUFS (3 * ZT_NVME_STEP_MAX_SETS) /* master, m, v per set */

/* One shard of optimizer state and what its update reads and writes. m and v live on NVMe;
 * the master too, or in host memory (updated in place, the parameters then stored from the
 * working copy), or it is the parameters' fp32 home (zt_home_share of param): in host
 * memory the update changes it in place; in device memory each sub-group is copied from it
 * into its set (on zt_nvme_step_device's stream, with the sub-group's reads, read-ahead
 * included), and
 * the new parameters go back as the working copy. */
typedef struct zt_opt_shard {
    zt_home *master, *m, *v; /* fp32 homes of equal size */
    zt_home *param;          /* the working-dtype parameters: any tier */
    const void *grad;        /* gradient shard of grad_dtype (fp32 or bf16), host memory */
    zt_dtype grad_dtype;
    int64_t numel;
} zt_opt_shard;

typedef struct zt_nvme_step zt_nvme_step;

/* Elements per sub-group: sub_group_size, capped at 16M, in whole swap blocks. */
int64_t zt_nvme_step_chunk_elems(int64_t sub_group_size, uint64_t block_size);

/* Where masters in device memory are copied from: the device, a stream that waits for
 * nothing of the caller's, and the counter of the bytes copied (dev NULL: none are). */
typedef struct zt_nvme_step_device {
    zt_device *dev;
    zt_stream *stream;
    uint64_t *d2h_bytes;
} zt_nvme_step_device;

/* bufs: 3 * sets host buffers (master, m, v of each set) of buf_elems floats each,
 * 4096-aligned, owned by the caller (the masters' NULL where every master is in host
 * memory; pinned where one is in device memory); sets in [ZT_NVME_STEP_MIN_SETS,
 * ZT_NVME_STEP_MAX_SETS]; param_staging: a host buffer for one shard's working-dtype
 * parameters. */
zt_status zt_nvme_step_create(float *const *bufs, int sets, int64_t buf_elems, void *param_staging,
                              zt_nvme_step_device dev, zt_nvme_step **out, zt_error *err);
/* Waits for transfers still in flight; a step in progress is abandoned. NULL is a no-op. */
void zt_nvme_step_destroy(zt_nvme_step *s);

/* Starts reading the first sub-groups of the next step (when a backward pass begins); a
 * no-op while a step is in progress. */
void zt_nvme_step_preread(zt_nvme_step *s, const zt_opt_shard *shards, int n);

/* A step in two parts, so that the caller can compute while it runs: begin plans it (and
 * starts reading the first sub-group not read ahead); advance updates the shards up to
 * `through` (exclusive) in order, leaving the next sub-group's read in flight. Shards are
 * updated strictly in order, each when advance is asked for it or a later one, and the
 * result is that of zt_nvme_step_run. h, pool, homes and h2d_bytes are kept until the step
 * ends; the shards' gradients must not change before their shard is updated. A failure ends
 * the step (nothing stays in flight) with the state half updated. */
zt_status zt_nvme_step_begin(zt_nvme_step *s, const zt_opt_shard *shards, int n,
                             const zt_adam_hparams *h, zt_threadpool *pool, zt_adam_variant v,
                             zt_homes *homes, zt_dtype dtype, uint64_t *h2d_bytes, zt_error *err);
zt_status zt_nvme_step_advance(zt_nvme_step *s, int through, zt_error *err);
/* Shards fully updated by the step in progress; -1 when none is in progress. */
int zt_nvme_step_shards_done(const zt_nvme_step *s);

/* begin, then advance through every shard: the working-dtype parameters go to their homes
 * through homes (h2d_bytes counts those that go to device memory). Returns with the last
 * write-backs still in flight. */
zt_status zt_nvme_step_run(zt_nvme_step *s, const zt_opt_shard *shards, int n,
                           const zt_adam_hparams *h, zt_threadpool *pool, zt_adam_variant v,
                           zt_homes *homes, zt_dtype dtype, uint64_t *h2d_bytes, zt_error *err);

/* Completes the step in progress, waits for every transfer in flight and reports the first
 * failure not yet reported. Every reader of the state on NVMe calls it first; read-ahead
 * data is dropped (it may go stale). */
zt_status zt_nvme_step_drain(zt_nvme_step *s, zt_error *err);

/* Collects the write-backs that have completed, without waiting, and reports the first
 * failure not yet reported (ZT_OK when there is none). */
zt_status zt_nvme_step_poll(zt_nvme_step *s, zt_error *err);

#endif

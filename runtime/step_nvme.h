/* The NVMe-pipelined optimizer step (see step_nvme.c). */
#ifndef ZT_RUNTIME_STEP_NVME_H
#define ZT_RUNTIME_STEP_NVME_H

#include "runtime/runtime.h"

/* Elements per sub-group: sub_group_size, capped at 16M, in whole swap blocks. */
int64_t zt_step_nvme_chunk_elems(const zt_runtime *rt, uint64_t block_size);

/* Updates every layer whose master, m and v are on NVMe (rt->opt_buf holds 3 x 3 buffers).
 * Returns with the last write-backs still in flight. */
zt_status zt_step_nvme(zt_runtime *rt, const zt_adam_hparams *h);

/* Starts reading the next step's first sub-groups (called when a backward pass begins). */
void zt_step_nvme_preread(zt_runtime *rt);

/* Waits for write-backs still in flight; an I/O error in them is reported here. Every reader
 * of the NVMe optimizer state calls it first. */
zt_status zt_step_nvme_drain(zt_runtime *rt);

#endif

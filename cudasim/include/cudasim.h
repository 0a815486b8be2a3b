/* SPDX-License-Identifier: MIT */
/* cudasim: the CPU stand-in for the CUDA runtime, cuBLAS and NCCL that ztier's CUDA code runs
 * on in CI (a build with -DZT_CUDA_FAKE=ON). Device memory is host memory behind a range
 * table; each stream runs its work on a thread of its own, in stream order and with seeded
 * delays; kernels compiled from the project's .cu files run with a user-space thread per CUDA
 * thread. While it runs it checks what a GPU would not tell: device memory touched by two
 * streams with no event or synchronisation ordering them (vector clocks), host access to a
 * pinned buffer while a copy from or into it may still be in flight (the pages are protected
 * until the host has observed the copy's completion), kernel arguments that are not device
 * memory of the launching device, writes past an allocation, barriers and warp operations
 * that not every thread reaches, and the launch limits. See docs/cudasim.md.
 *
 * This header is the stand-in's own control surface for tests; nothing in it exists on a real
 * GPU. Settings also come from the environment (read once, at the first CUDA call):
 *   ZT_CUDASIM_DEVICES   number of devices (default 1)
 *   ZT_CUDASIM_MEM       bytes of memory per device (default 8G; K/M/G suffixes)
 *   ZT_CUDASIM_SEED      seed of the stream delays, block and thread orders (default 1)
 *   ZT_CUDASIM_DELAY_US  the longest delay before a stream operation runs (default 200)
 *   ZT_CUDASIM_NO_POOLS  1: devices without stream-ordered memory pools (as some are)
 *   ZT_CUDASIM_ON_ERROR  "abort" (default): a finding prints its report and aborts the
 *                        process; "log": it is counted and kept for cudasim_last_report
 */
#ifndef CUDASIM_H
#define CUDASIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1: findings abort the process (the default); 0: they are counted and logged. */
void cudasim_set_abort_on_finding(int abort_on_finding);
/* The number of findings since the start or the last cudasim_reset_findings. */
int cudasim_findings(void);
/* The last finding's report (empty when there is none); stays valid until the next finding
 * or reset. */
const char *cudasim_last_finding(void);
void cudasim_reset_findings(void);

/* Fault injection. Each counts calls from now on; 0 turns it off. */
/* The n-th device or pinned allocation from now, and every later one until this is called
 * with 0, fails with cudaErrorMemoryAllocation (a device that is out of memory). */
void cudasim_fail_alloc_after(int n);
/* The next n event and stream queries answer cudaErrorNotReady even when the work is done. */
void cudasim_not_ready_next(int n);
/* The n-th NCCL collective from now never completes (a peer that hangs) until the
 * communicator is aborted. */
void cudasim_hang_collective_after(int n);
/* The n-th NCCL collective from now meets a failed peer: the communicator's asynchronous
 * error (ncclCommGetAsyncError) becomes ncclRemoteError while the collective's kernel keeps
 * waiting for the peer's data, as NCCL's do, until the communicator is aborted. */
void cudasim_nccl_error_after(int n);
/* The n-th call from now of the CUDA runtime function named `call` (e.g. "cudaEventRecord",
 * "cudaMemcpyAsync", "cudaStreamWaitEvent", "cudaStreamCreateWithFlags") fails with
 * cudaErrorUnknown and does nothing; the calls before and after it run. NULL turns it off. */
void cudasim_fail_call(const char *call, int n);

/* Waits until every stream of every device has run all its work (tests' teardown). */
void cudasim_drain(void);

/* What the stand-in has seen, for tests of what a kernel or library call does: */
unsigned long long cudasim_atomic_ops(void); /* atomic operations kernels made so far */
int cudasim_last_sort_bits(void);            /* key bits the last cub radix sort sorted */
int cudasim_live_events(void);               /* events made and not yet destroyed */
/* cublasLtMatmul calls queued so far with that epilogue (a cublasLtEpilogue_t; -1: any) */
unsigned long long cudasim_lt_matmuls(int epilogue);

#ifdef __cplusplus
}
#endif
#endif

/* SPDX-License-Identifier: MIT */
// What code compiled from a .cu file (cudasim_kernel.h) calls in the stand-in: the kernel
// launch, the per-thread context behind threadIdx and friends, the block and warp
// synchronisation, and device work that a library would run on a stream (the radix sort).
#ifndef CUDASIM_DEVICE_H
#define CUDASIM_DEVICE_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace cudasim
{

// One CUDA thread's coordinates.
struct ThreadCtx {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
};
// The running CUDA thread's context (set by the grid runner before each switch to it).
extern thread_local ThreadCtx *t_ctx;

// A range an operation reads or writes; bytes == SIZE_MAX: to the end of the allocation.
struct Access {
    const void *ptr;
    size_t bytes;
    bool write;
};

// A pointer argument of a kernel: const pointee = read, else read and written.
struct KernelArg {
    int index;
    const void *ptr;
    bool is_const;
};

// Queues a kernel: checks the launch configuration and that every pointer argument is
// memory of the launching device (or pinned host memory), orders the kernel on its stream,
// and runs `thread_body` once per CUDA thread there. Returns the launch's error (what
// cudaGetLastError reports after a <<<>>> launch) and records it as the thread's last error.
cudaError_t launch_kernel(const char *name, const void *key, dim3 grid, dim3 block, size_t shared,
                          cudaStream_t stream, std::vector<KernelArg> pointers,
                          std::function<void()> thread_body);

// Inside a kernel: __syncthreads, __syncwarp, and a warp's exchange of `bytes` (<= 8) per
// lane (lane reads src_lane's value; src_lane outside the width reads its own).
void sync_block();
void sync_warp(unsigned mask);
void warp_exchange(unsigned mask, const void *mine, void *out, size_t bytes, int src_lane);
void *dynamic_shared();

// Where the running CUDA thread is, for the shared-memory checks (cudasim_kernel.h's
// Shared): which block run (a new one starts fresh shared memory), which barrier interval,
// the thread, and how many warp operations it has passed.
struct SharedClock {
    uint64_t block_run;
    uint64_t phase;
    unsigned thread;
    uint64_t warp_ops;
};
SharedClock shared_clock();
// "kernel K, block (x, y, z)" of the running thread, for messages.
const char *running_where();

// Counters for cudasim.h's queries: an atomic operation in a kernel, a radix sort's bits.
void count_atomic();
void note_sort_bits(int bits);

// Work a CUDA library would run on the device (the radix sort), queued on `stream` with its
// accesses checked like a kernel's.
cudaError_t device_work(cudaStream_t stream, const char *what, std::vector<Access> accesses,
                        std::function<void()> work);

} // namespace cudasim

#endif

/* SPDX-License-Identifier: MIT */
/* Kernels that exercise the stand-in (tests/cudasim): correct ones, checked against CPU
 * references, and ones with a bug on purpose (each named for the bug), which the stand-in
 * must report naming the kernel. Each launch function returns the launch's cudaError_t as
 * an int; `stream` is a cudaStream_t. */
#ifndef ZT_TESTS_SIM_KERNELS_H
#define ZT_TESTS_SIM_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[linear thread id] = linear id, over a 3-D grid of 3-D blocks */
int sim_indices(unsigned *out, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, void *stream);
/* per warp: out[w*32 + l] = sum over the warp's lanes (xor butterfly); bcast[w*32 + l] = the
 * value of lane 5; down[..] = v[l + 1] (own value for the last lane) */
int sim_warp_ops(const float *v, float *sum, float *bcast, float *down, int n, void *stream);
/* out[b] = sum of x[b*256 .. b*256 + 255] (a block's tree reduction in __shared__ memory) */
int sim_block_sum(const float *x, float *out, int blocks, void *stream);
/* the same without the __syncthreads between the tree's levels */
int sim_block_sum_no_barrier(const float *x, float *out, int blocks, void *stream);
/* the tree reading a __shared__ element no thread of the block wrote */
int sim_block_sum_uninitialised(const float *x, float *out, int blocks, void *stream);
/* thread 0 writes y[0] while the block's other threads read it, with no barrier between: a
 * race on global memory, which only ThreadSanitizer sees (tsan_race.c) */
int sim_race_global(float *y, void *stream);
/* *count += 1 from every thread (atomicAdd), grid of `blocks` x 128 */
int sim_count(unsigned long long *count, int blocks, void *stream);
/* y[i] = 2 x[i] for i < n, blocks of 128: with and without the bounds check */
int sim_twice(float *y, const float *x, int n, void *stream);
int sim_twice_no_guard(float *y, const float *x, int n, void *stream);
/* threads past n return before the block's __syncthreads (barrier divergence) */
int sim_divergent_barrier(float *y, int n, void *stream);
/* lanes past n return before the warp's shuffle */
int sim_shuffle_after_exit(float *y, int n, void *stream);
/* launches with the given configuration (grid x, block x, dynamic shared bytes) a kernel that
 * writes the dynamic shared memory it got and copies it to out (shared / 4 floats) */
int sim_dynamic_shared(float *out, unsigned grid, unsigned block, size_t shared, void *stream);
/* cudaFuncSetAttribute(MaxDynamicSharedMemorySize) for sim_dynamic_shared's kernel */
int sim_dynamic_shared_opt_in(int bytes);

#ifdef __cplusplus
}
#endif
#endif

/* SPDX-License-Identifier: MIT */
// Kernels for the stand-in's own tests (sim_kernels.h): built by nvcc or, with ZT_CUDA_FAKE,
// through the stand-in's rewrite, like the project's kernels.
#include "sim_kernels.h"

#include <cuda_runtime.h>

namespace
{

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

int launched() { return static_cast<int>(cudaGetLastError()); }

__global__ void indices(unsigned *out)
{
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned per = blockDim.x * blockDim.y * blockDim.z;
    out[block * per + thread] = block * per + thread;
}

__global__ void warp_ops(const float *v, float *sum, float *bcast, float *down, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x; // n is a multiple of 32: whole warps
    if (i >= n)
        return;
    float s = v[i];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    sum[i] = s;
    bcast[i] = __shfl_sync(0xffffffffu, v[i], 5);
    down[i] = __shfl_down_sync(0xffffffffu, v[i], 1);
}

__global__ void block_sum(const float *x, float *out)
{
    __shared__ float part[256];
    part[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    for (unsigned s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = part[0];
}

__global__ void block_sum_no_barrier(const float *x, float *out)
{
    __shared__ float part[256];
    part[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    for (unsigned s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        // the barrier that belongs here is missing
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = part[0];
}

__global__ void block_sum_uninitialised(const float *x, float *out)
{
    __shared__ float part[512];
    part[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0)
        out[blockIdx.x] = part[0] + part[300]; // nobody wrote part[300]
}

__global__ void count(unsigned long long *c) { atomicAdd(c, 1ull); }

__global__ void race_global(float *y)
{
    if (threadIdx.x == 0)
        y[0] = 1.0f;
    y[1 + threadIdx.x] = y[0]; // the barrier that belongs before this line is missing
}

__global__ void twice(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 2.0f * x[i];
}

__global__ void twice_no_guard(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    (void)n; // the bounds check that belongs here is missing
    y[i] = 2.0f * x[i];
}

__global__ void divergent_barrier(float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    y[i] = 1.0f;
    __syncthreads();
}

__global__ void shuffle_after_exit(float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    y[i] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void dynamic_shared(float *out, int floats)
{
    extern __shared__ float dyn[];
    for (int k = threadIdx.x; k < floats; k += blockDim.x)
        dyn[k] = (float)(k + blockIdx.x);
    __syncthreads();
    if (threadIdx.x == 0 && blockIdx.x == 0)
        for (int k = 0; k < floats; k++)
            out[k] = dyn[k];
}

} // namespace

extern "C" int sim_indices(unsigned *out, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, void *stream)
{
    indices<<<dim3(gx, gy, gz), dim3(bx, by, bz), 0, as_stream(stream)>>>(out);
    return launched();
}

extern "C" int sim_warp_ops(const float *v, float *sum, float *bcast, float *down, int n,
                            void *stream)
{
    warp_ops<<<(n + 127) / 128, 128, 0, as_stream(stream)>>>(v, sum, bcast, down, n);
    return launched();
}

extern "C" int sim_block_sum(const float *x, float *out, int blocks, void *stream)
{
    block_sum<<<blocks, 256, 0, as_stream(stream)>>>(x, out);
    return launched();
}

extern "C" int sim_block_sum_no_barrier(const float *x, float *out, int blocks, void *stream)
{
    block_sum_no_barrier<<<blocks, 256, 0, as_stream(stream)>>>(x, out);
    return launched();
}

extern "C" int sim_block_sum_uninitialised(const float *x, float *out, int blocks, void *stream)
{
    block_sum_uninitialised<<<blocks, 256, 0, as_stream(stream)>>>(x, out);
    return launched();
}

extern "C" int sim_race_global(float *y, void *stream)
{
    race_global<<<1, 64, 0, as_stream(stream)>>>(y);
    return launched();
}

extern "C" int sim_count(unsigned long long *c, int blocks, void *stream)
{
    count<<<blocks, 128, 0, as_stream(stream)>>>(c);
    return launched();
}

extern "C" int sim_twice(float *y, const float *x, int n, void *stream)
{
    twice<<<(n + 127) / 128, 128, 0, as_stream(stream)>>>(y, x, n);
    return launched();
}

extern "C" int sim_twice_no_guard(float *y, const float *x, int n, void *stream)
{
    twice_no_guard<<<(n + 127) / 128, 128, 0, as_stream(stream)>>>(y, x, n);
    return launched();
}

extern "C" int sim_divergent_barrier(float *y, int n, void *stream)
{
    divergent_barrier<<<(n + 127) / 128, 128, 0, as_stream(stream)>>>(y, n);
    return launched();
}

extern "C" int sim_shuffle_after_exit(float *y, int n, void *stream)
{
    shuffle_after_exit<<<(n + 31) / 32, 32, 0, as_stream(stream)>>>(y, n);
    return launched();
}

extern "C" int sim_dynamic_shared(float *out, unsigned grid, unsigned block, size_t shared,
                                  void *stream)
{
    dynamic_shared<<<grid, block, shared, as_stream(stream)>>>(out, (int)(shared / 4));
    return launched();
}

extern "C" int sim_dynamic_shared_opt_in(int bytes)
{
    return static_cast<int>(
        cudaFuncSetAttribute(dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

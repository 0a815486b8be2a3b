// CUDA kernels for the cuda device backend: casts, scaling and a non-finite check over
// fp32/bf16/fp16 arrays, in grid-stride loops. Compiled wherever the toolkit is present.
#include "runtime/device/cuda_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

__device__ float load(const void *p, zt_dtype t, size_t i)
{
    if (t == ZT_BF16)
        return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    if (t == ZT_F16)
        return __half2float(static_cast<const __half *>(p)[i]);
    return static_cast<const float *>(p)[i];
}

__device__ void store(void *p, zt_dtype t, size_t i, float x)
{
    if (t == ZT_BF16)
        static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(x);
    else if (t == ZT_F16)
        static_cast<__half *>(p)[i] = __float2half_rn(x);
    else
        static_cast<float *>(p)[i] = x;
}

__global__ void cast_kernel(void *dst, zt_dtype dt, const void *src, zt_dtype st, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        store(dst, dt, i, load(src, st, i));
}

__global__ void scale_kernel(void *x, zt_dtype t, float alpha, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        store(x, t, i, load(x, t, i) * alpha);
}

__global__ void nonfinite_kernel(const void *x, zt_dtype t, size_t n, int *flag)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite(load(x, t, i)))
            *flag = 1;
}

unsigned blocks_for(size_t n)
{
    size_t b = (n + 255) / 256;
    return b == 0 ? 1u : b > 4096 ? 4096u : static_cast<unsigned>(b);
}

} // namespace

extern "C" int zt_cuda_cast(void *dst, zt_dtype dst_type, const void *src, zt_dtype src_type,
                            size_t n, void *stream)
{
    cast_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(dst, dst_type, src,
                                                                             src_type, n);
    return static_cast<int>(cudaGetLastError());
}

extern "C" int zt_cuda_scale(void *x, zt_dtype type, float alpha, size_t n, void *stream)
{
    scale_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, type, alpha, n);
    return static_cast<int>(cudaGetLastError());
}

extern "C" int zt_cuda_nonfinite(const void *x, zt_dtype type, size_t n, int *flag, void *stream)
{
    nonfinite_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, type, n,
                                                                                  flag);
    return static_cast<int>(cudaGetLastError());
}

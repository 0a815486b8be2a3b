/* SPDX-License-Identifier: MIT */
// CUDA kernels for the cuda device backend: casts, scaling and a non-finite check over
// fp32/bf16/fp16 arrays in grid-stride loops, and ZeRO++ int8 block quantization. Every
// element goes through fp32: bf16/fp16 results are rounded to nearest even exactly once, so
// the bits match the CPU references (optimizer/convert.h, core/quant_scalar.c).
// Compiled wherever the toolkit is present; not run on this project's GPU-less machines.
#include "device/cuda_kernels.h"
#include "core/adam_elem.h"
#include "core/quant_elem.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace
{

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

// max|x| over [lo, hi) by the whole thread block (blockDim.x a power of two, <= 1024); with
// nan_inf (int4: zt_quant4_abs) a NaN counts as an infinite magnitude.
__device__ float block_absmax(const void *x, zt_dtype t, size_t lo, size_t hi, bool nan_inf)
{
    __shared__ float partial[1024];
    float m = 0.0f;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        m = fmaxf(m, nan_inf ? zt_quant4_abs(load(x, t, i)) : fabsf(load(x, t, i)));
    partial[threadIdx.x] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
        __syncthreads();
    }
    return partial[0];
}

// One thread block per quantization block (up to 1024 threads striding over it): its max,
// then the rounding pass.
__global__ void quant8_kernel(const void *x, zt_dtype t, size_t n, int block, signed char *q,
                              float *scales)
{
    size_t lo = (size_t)blockIdx.x * block;
    size_t hi = lo + block < n ? lo + block : n;
    float scale = block_absmax(x, t, lo, hi, false) / 127.0f, inv = zt_quant_inv(scale);
    if (threadIdx.x == 0)
        scales[blockIdx.x] = scale;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        q[i] = static_cast<signed char>(zt_quant8_value(load(x, t, i), inv));
}

__global__ void dequant8_kernel(const signed char *q, const float *scales, size_t n, int block,
                                void *out, zt_dtype t)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        store(out, t, i, static_cast<float>(q[i]) * scales[i / block]);
}

// A launch's own error, leaving alone one the caller had pending (CUDA keeps one per thread;
// cuda.c clears what ztier's calls leave behind): what is pending after the launch and was
// not before it. Made first thing in each launching function.
class LaunchStatus
{
    cudaError_t before_ = cudaPeekAtLastError();

public:
    int operator()() const
    {
        cudaError_t now = cudaPeekAtLastError();
        return now != before_ ? static_cast<int>(now) : 0;
    }
};

unsigned blocks_for(size_t n)
{
    size_t b = (n + 255) / 256;
    return b == 0 ? 1u : b > 4096 ? 4096u : static_cast<unsigned>(b);
}

/* One CUDA block per quantization block of `block` elements, with a power-of-two thread
 * count for the max reduction (at most 1024). Returns false for a block size < 1 or more
 * blocks than a grid takes. */
bool quant_launch_shape(size_t n, int block, unsigned *nblocks, unsigned *threads)
{
    size_t nb = block < 1 ? 0 : (n + block - 1) / block;
    if (block < 1 || nb > 0x7fffffffu)
        return false;
    unsigned t = 1;
    while (t < static_cast<unsigned>(block) && t < 1024)
        t <<= 1;
    *nblocks = static_cast<unsigned>(nb), *threads = t;
    return true;
}

} // namespace

extern "C" int zt_cuda_cast(void *dst, zt_dtype dst_type, const void *src, zt_dtype src_type,
                            size_t n, void *stream)
{
    LaunchStatus launched;
    cast_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(dst, dst_type, src,
                                                                              src_type, n);
    return launched();
}

extern "C" int zt_cuda_scale(void *x, zt_dtype type, float alpha, size_t n, void *stream)
{
    LaunchStatus launched;
    scale_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, type, alpha, n);
    return launched();
}

extern "C" int zt_cuda_nonfinite(const void *x, zt_dtype type, size_t n, int *flag, void *stream)
{
    LaunchStatus launched;
    nonfinite_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, type, n,
                                                                                   flag);
    return launched();
}

extern "C" int zt_cuda_quant8(const void *x, zt_dtype type, size_t n, int block, signed char *q,
                              float *scales, void *stream)
{
    LaunchStatus launched;
    unsigned nblocks, threads;
    if (!quant_launch_shape(n, block, &nblocks, &threads))
        return static_cast<int>(cudaErrorInvalidValue);
    if (nblocks)
        quant8_kernel<<<nblocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(x, type, n, block,
                                                                                  q, scales);
    return launched();
}

extern "C" int zt_cuda_dequant8(const signed char *q, const float *scales, size_t n, int block,
                                void *out, zt_dtype type, void *stream)
{
    LaunchStatus launched;
    if (block < 1)
        return static_cast<int>(cudaErrorInvalidValue);
    dequant8_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(q, scales, n,
                                                                                  block, out, type);
    return launched();
}

namespace
{

// The fused Adam/AdamW step of optimizer/adam.h, element by element through the same
// zt_adam_elem as the CPU's scalar reference (compiled with --fmad=false, so the bits
// match). Non-finite scaled gradients are counted into *nonfinite.
__global__ void adam_kernel(zt_adam_consts c, float *master, float *m, float *v, const void *grad,
                            zt_dtype gt, void *param_out, zt_dtype pt, size_t n,
                            unsigned long long *nonfinite)
{
    unsigned long long bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float p = master[i], mm = m[i], vv = v[i];
        float g = zt_adam_elem(&c, load(grad, gt, i), &p, &mm, &vv);
        bad += !(fabsf(g) <= 3.402823466e+38f);
        master[i] = p;
        m[i] = mm;
        v[i] = vv;
        if (param_out)
            store(param_out, pt, i, p);
    }
    if (bad)
        atomicAdd(nonfinite, bad);
}

} // namespace

namespace
{

__global__ void accumulate_kernel(float *acc, const void *src, zt_dtype t, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        acc[i] += load(src, t, i);
}

// The block's (sum, bad) pairs summed by a fixed tree (blocks of 256 threads); thread 0
// gets the totals.
__device__ void block_sums(double sum, double bad, double *total_sum, double *total_bad)
{
    __shared__ double part[256], badp[256];
    part[threadIdx.x] = sum;
    badp[threadIdx.x] = bad;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            part[threadIdx.x] += part[threadIdx.x + s];
            badp[threadIdx.x] += badp[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *total_sum = part[0], *total_bad = badp[0];
}

// Per-block partial sums in double into parts[2b], parts[2b + 1]; sumsq_combine adds them
// in a fixed order (the order differs from the CPU's: sums agree to double rounding, as
// adam.h says, and repeat bit for bit run to run).
__global__ void sumsq_kernel(const float *x, size_t n, float scale, double *parts)
{
    double sum = 0.0, bad = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = x[i] * scale;
        if (!(fabsf(g) <= 3.402823466e+38f))
            bad += 1.0;
        else
            sum += (double)g * (double)g;
    }
    block_sums(sum, bad, &parts[2 * blockIdx.x], &parts[2 * blockIdx.x + 1]);
}

// One block of 256: thread t adds the partials t, t + 256, ... in order, then the same tree;
// out[] += the totals.
__global__ void sumsq_combine(const double *parts, unsigned nb, double *out)
{
    double sum = 0.0, bad = 0.0, total_sum = 0.0, total_bad = 0.0;
    for (unsigned k = threadIdx.x; k < nb; k += blockDim.x) {
        sum += parts[2 * k];
        bad += parts[2 * k + 1];
    }
    block_sums(sum, bad, &total_sum, &total_bad);
    if (threadIdx.x == 0)
        out[0] += total_sum, out[1] += total_bad;
}

} // namespace

extern "C" int zt_cuda_accumulate(float *acc, const void *src, zt_dtype src_type, size_t n,
                                  void *stream)
{
    LaunchStatus launched;
    accumulate_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(acc, src,
                                                                                    src_type, n);
    return launched();
}

extern "C" int zt_cuda_sumsq(const float *x, size_t n, float scale, double *out, double *parts,
                             void *stream)
{
    LaunchStatus launched;
    unsigned nb = blocks_for(n); /* at most 4096: ZT_SUMSQ_SCRATCH_DOUBLES / 2 */
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    sumsq_kernel<<<nb, 256, 0, s>>>(x, n, scale, parts);
    sumsq_combine<<<1, 256, 0, s>>>(parts, nb, out);
    return launched();
}

extern "C" int zt_cuda_adam(const zt_adam_consts *c, float *master, float *m, float *v,
                            const void *grad, zt_dtype grad_dtype, void *param_out,
                            zt_dtype param_dtype, size_t n, unsigned long long *nonfinite,
                            void *stream)
{
    LaunchStatus launched;
    adam_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        *c, master, m, v, grad, grad_dtype, param_out, param_dtype, n, nonfinite);
    return launched();
}

namespace
{

// int4 (qgZ): first each block's scale (max|x| / 7, one thread block per quantization block),
// then one thread per packed byte: its two elements may belong to two blocks.
__global__ void scale4_kernel(const float *x, size_t n, int block, float *scales)
{
    size_t lo = (size_t)blockIdx.x * block;
    size_t hi = lo + block < n ? lo + block : n;
    float m = block_absmax(x, ZT_F32, lo, hi, true);
    if (threadIdx.x == 0)
        scales[blockIdx.x] = m / 7.0f;
}

__global__ void pack4_kernel(const float *x, size_t n, int block, const float *scales,
                             unsigned char *q)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < (n + 1) / 2;
         j += (size_t)gridDim.x * blockDim.x) {
        size_t i = 2 * j;
        unsigned char b = zt_quant4_code(x[i], zt_quant_inv(scales[i / block]));
        if (i + 1 < n)
            b |= (unsigned char)(zt_quant4_code(x[i + 1], zt_quant_inv(scales[(i + 1) / block]))
                                 << 4);
        q[j] = b;
    }
}

__global__ void dequant4_add_kernel(const unsigned char *q, const float *scales, size_t n,
                                    int block, float *acc)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        acc[i] += (float)zt_quant4_value(q[i / 2], (int64_t)i) * scales[i / block];
}

} // namespace

extern "C" int zt_cuda_quant4(const float *x, size_t n, int block, unsigned char *q, float *scales,
                              void *stream)
{
    LaunchStatus launched;
    unsigned nblocks, threads;
    if (!quant_launch_shape(n, block, &nblocks, &threads))
        return static_cast<int>(cudaErrorInvalidValue);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (nblocks) {
        scale4_kernel<<<nblocks, threads, 0, s>>>(x, n, block, scales);
        pack4_kernel<<<blocks_for((n + 1) / 2), 256, 0, s>>>(x, n, block, scales, q);
    }
    return launched();
}

extern "C" int zt_cuda_dequant4_add(const unsigned char *q, const float *scales, size_t n,
                                    int block, float *acc, void *stream)
{
    LaunchStatus launched;
    if (block < 1)
        return static_cast<int>(cudaErrorInvalidValue);
    dequant4_add_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(q, scales, n,
                                                                                      block, acc);
    return launched();
}

// The GPT-2 kernels on the GPU, running the CPU kernels' math (gpt2_rows.h): a warp per row
// for the row kernels (lane l takes elements l, l + 32, ...: coalesced loads, the row's sums
// and maxima as shuffle butterflies), a thread per element for the element-wise ones.
// Gradients that rows share are added atomically, layernorm's weights' first into a block's
// shared partial sums; attention's row and element pieces sit around cuBLAS's batched GEMMs
// (gpt2_attention.h).
#include "gpt2_cuda.h"
#include "gpt2_rows.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace
{

constexpr int kThreads = 128;
constexpr int kLanes = 32;                  // a warp: one row
constexpr int kWarps = kThreads / kLanes;   // rows per block
constexpr unsigned kLnBackwardBlocks = 512; // layernorm backward: blocks of partial dw, db
constexpr size_t kSharedMax = 48 * 1024;    // dynamic shared memory without opting in

unsigned blocks(long long n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// a warp per row
unsigned row_blocks(long long rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

__device__ __forceinline__ long long warp_row()
{
    return ((long long)blockIdx.x * blockDim.x + threadIdx.x) / kLanes;
}

__device__ __forceinline__ int lane() { return threadIdx.x % kLanes; }

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

int launched() { return static_cast<int>(cudaGetLastError()); }

__global__ void encoder_fwd(float *out, const int *tok, const float *wte, const float *wpe,
                            int BT, int T, int C)
{
    long long r = warp_row();
    if (r < BT)
        encoder_row_forward(out + (size_t)r * C, wte + (size_t)tok[r] * C,
                            wpe + (size_t)(r % T) * C, C, lane(), kLanes);
}

__global__ void encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *tok, int BT,
                            int T, int C)
{
    long long r = warp_row();
    if (r < BT)
        encoder_row_backward(dwte + (size_t)tok[r] * C, dwpe + (size_t)(r % T) * C,
                             dout + (size_t)r * C, C, lane(), kLanes);
}

__global__ void layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C)
{
    long long n = warp_row();
    if (n < N)
        layernorm_row_forward(out + (size_t)n * C, &mean[n], &rstd[n], inp + (size_t)n * C, w,
                              b, C, lane(), kLanes);
}

// Each warp takes rows n, n + the grid's warps, ...; with `shared`, the block's rows add
// their dw, db into shared memory (2C floats) and the block adds those to dw, db once.
__global__ void layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, const float *mean,
                              const float *rstd, int N, int C, int shared)
{
    extern __shared__ float part[];
    float *pdw = shared ? part : dw, *pdb = shared ? part + C : db;
    if (shared) {
        for (int c = threadIdx.x; c < 2 * C; c += blockDim.x)
            part[c] = 0.0f;
        __syncthreads();
    }
    long long step = (long long)gridDim.x * (blockDim.x / kLanes);
    for (long long n = warp_row(); n < N; n += step)
        layernorm_row_backward(dinp + (size_t)n * C, pdw, pdb, dout + (size_t)n * C,
                               inp + (size_t)n * C, w, mean[n], rstd[n], C, lane(), kLanes);
    if (shared) {
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            atomicAdd(&dw[c], part[c]);
            atomicAdd(&db[c], part[C + c]);
        }
    }
}

// One thread per (b, h, t).
__global__ void heads_gather(float *dst, const float *src, long long n, int T, int NH, int hs,
                             int stride, int off)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = src[heads_offset((size_t)i, T, NH, hs, stride, off)];
}

__global__ void heads_scatter(float *dst, const float *src, long long n, int T, int NH, int hs,
                              int stride, int off, int add)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float *p = dst + heads_offset((size_t)i, T, NH, hs, stride, off);
        *p = (add ? *p : 0.0f) + src[i];
    }
}

__global__ void softmax_fwd(float *att, int rows, int T, float scale)
{
    long long r = warp_row();
    if (r < rows)
        causal_softmax_row_forward(att + (size_t)r * T, (int)(r % T), T, scale, lane(), kLanes);
}

__global__ void softmax_bwd(float *d, const float *att, int rows, int T, float scale)
{
    long long r = warp_row();
    if (r < rows)
        causal_softmax_row_backward(d + (size_t)r * T, att + (size_t)r * T, (int)(r % T), T,
                                    scale, lane(), kLanes);
}

__global__ void gelu_fwd(float *out, const float *inp, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = gelu_elem_forward(inp[i]);
}

__global__ void gelu_bwd(float *dinp, const float *inp, const float *dout, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dinp[i] += gelu_elem_backward(inp[i], dout[i]);
}

__global__ void residual_fwd(float *out, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a[i] + b[i];
}

__global__ void to_bf16(unsigned short *dst, const float *src, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
}

__global__ void bias_fill(float *out, const float *bias, int N, int OC)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)N * OC)
        out[i] = bias[i % OC];
}

__global__ void xent_fwd(float *probs, double *losses, const float *logits, const int *targets,
                         int N, int V)
{
    long long n = warp_row();
    if (n >= N)
        return;
    double loss = crossentropy_row_forward(probs + (size_t)n * V, logits + (size_t)n * V,
                                           targets[n], V, lane(), kLanes);
    if (lane() == 0)
        losses[n] = loss;
}

__global__ void xent_bwd(float *dlogits, const float *probs, const int *targets, int N, int V)
{
    long long n = warp_row();
    if (n < N)
        crossentropy_row_backward(dlogits + (size_t)n * V, probs + (size_t)n * V, targets[n], V,
                                  1.0f / (float)N, lane(), kLanes);
}

} // namespace

extern "C" int gpt2_cuda_encoder_forward(float *out, const int *tokens, const float *wte,
                                         const float *wpe, int B, int T, int C, void *stream)
{
    encoder_fwd<<<row_blocks((long long)B * T), kThreads, 0, as_stream(stream)>>>(out, tokens, wte,
                                                                               wpe, B * T, T, C);
    return launched();
}

extern "C" int gpt2_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout,
                                          const int *tokens, int B, int T, int C, void *stream)
{
    encoder_bwd<<<row_blocks((long long)B * T), kThreads, 0, as_stream(stream)>>>(dwte, dwpe, dout,
                                                                               tokens, B * T, T, C);
    return launched();
}

extern "C" int gpt2_cuda_layernorm_forward(float *out, float *mean, float *rstd,
                                           const float *inp, const float *w, const float *b,
                                           int N, int C, void *stream)
{
    layernorm_fwd<<<row_blocks(N), kThreads, 0, as_stream(stream)>>>(out, mean, rstd, inp, w, b, N,
                                                                  C);
    return launched();
}

extern "C" int gpt2_cuda_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                            const float *inp, const float *w, const float *mean,
                                            const float *rstd, int N, int C, void *stream)
{
    size_t shared = 2 * (size_t)C * sizeof(float);
    int use_shared = shared <= kSharedMax;
    unsigned nb = row_blocks(N) < kLnBackwardBlocks ? row_blocks(N) : kLnBackwardBlocks;
    layernorm_bwd<<<nb, kThreads, use_shared ? shared : 0, as_stream(stream)>>>(
        dinp, dw, db, dout, inp, w, mean, rstd, N, C, use_shared);
    return launched();
}

extern "C" int gpt2_cuda_heads_gather(float *dst, const float *src, int B, int T, int NH,
                                      int hs, int stride, int off, void *stream)
{
    long long n = (long long)B * NH * T * hs;
    heads_gather<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dst, src, n, T, NH, hs, stride,
                                                                 off);
    return launched();
}

extern "C" int gpt2_cuda_heads_scatter(float *dst, const float *src, int B, int T, int NH,
                                       int hs, int stride, int off, int add, void *stream)
{
    long long n = (long long)B * NH * T * hs;
    heads_scatter<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dst, src, n, T, NH, hs,
                                                                  stride, off, add);
    return launched();
}

extern "C" int gpt2_cuda_softmax_forward(float *att, int rows, int T, float scale, void *stream)
{
    softmax_fwd<<<row_blocks(rows), kThreads, 0, as_stream(stream)>>>(att, rows, T, scale);
    return launched();
}

extern "C" int gpt2_cuda_softmax_backward(float *d, const float *att, int rows, int T,
                                          float scale, void *stream)
{
    softmax_bwd<<<row_blocks(rows), kThreads, 0, as_stream(stream)>>>(d, att, rows, T, scale);
    return launched();
}

extern "C" int gpt2_cuda_to_bf16(unsigned short *dst, const float *src, long long n,
                                 void *stream)
{
    to_bf16<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dst, src, n);
    return launched();
}

extern "C" int gpt2_cuda_bias_fill(float *out, const float *bias, int N, int OC, void *stream)
{
    bias_fill<<<blocks((long long)N * OC), kThreads, 0, as_stream(stream)>>>(out, bias, N, OC);
    return launched();
}

extern "C" int gpt2_cuda_gelu_forward(float *out, const float *inp, int n, void *stream)
{
    gelu_fwd<<<blocks(n), kThreads, 0, as_stream(stream)>>>(out, inp, n);
    return launched();
}

extern "C" int gpt2_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, int n,
                                       void *stream)
{
    gelu_bwd<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dinp, inp, dout, n);
    return launched();
}

extern "C" int gpt2_cuda_residual_forward(float *out, const float *a, const float *b, int n,
                                          void *stream)
{
    residual_fwd<<<blocks(n), kThreads, 0, as_stream(stream)>>>(out, a, b, n);
    return launched();
}

extern "C" int gpt2_cuda_crossentropy_forward(float *probs, double *losses, const float *logits,
                                              const int *targets, int N, int V, void *stream)
{
    xent_fwd<<<row_blocks(N), kThreads, 0, as_stream(stream)>>>(probs, losses, logits, targets, N, V);
    return launched();
}

extern "C" int gpt2_cuda_crossentropy_backward(float *dlogits, const float *probs,
                                               const int *targets, int N, int V, void *stream)
{
    xent_bwd<<<row_blocks(N), kThreads, 0, as_stream(stream)>>>(dlogits, probs, targets, N, V);
    return launched();
}

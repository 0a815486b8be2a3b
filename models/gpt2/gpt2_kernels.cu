/* SPDX-License-Identifier: MIT */
// The GPT-2 kernels on the GPU, running the CPU kernels' math (gpt2_rows.h): a warp per row
// for the row kernels (lane l takes elements l, l + 32, ...: coalesced loads, the row's sums
// and maxima as shuffle butterflies), a thread per element for the element-wise ones.
// Gradients that rows share are summed in a fixed order, so that every run gives the same
// bits (a resumed run equals an uninterrupted one): a token's embedding gradient by a warp per
// 32 columns over the token's rows in row order (a stable sort of the tokens, CUB's), layernorm's
// weights through per-warp partial sums added in warp, then block order. Attention's row and
// element pieces sit around cuBLAS's batched GEMMs (gpt2_attention.h).
#include "gpt2_cuda.h"
#include "gpt2_rows.h"

#include <cub/device/device_radix_sort.cuh>
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

// A launch of nothing (n = 0) is an invalid configuration on a GPU (grid of 0 blocks): the
// wrappers return before it.
bool empty(long long n) { return n <= 0; }

// The key bits a sort of tokens in [0, V) needs (CUB sorts only those: fewer passes).
int token_bits(int V)
{
    int bits = 1;
    while (bits < 31 && (1ll << bits) < V)
        bits++;
    return bits;
}

// a warp per row
unsigned row_blocks(long long rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

__device__ __forceinline__ long long warp_row()
{
    return ((long long)blockIdx.x * blockDim.x + threadIdx.x) / kLanes;
}

__device__ __forceinline__ int lane() { return threadIdx.x % kLanes; }

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

int launched() { return static_cast<int>(cudaGetLastError()); }

template <typename A>
__global__ void encoder_fwd(A *out, const int *tok, const float *wte, const float *wpe, int BT,
                            int T, int C)
{
    long long r = warp_row();
    if (r < BT)
        encoder_row_forward(out + (size_t)r * C, wte + (size_t)tok[r] * C,
                            wpe + (size_t)(r % T) * C, C, lane(), kLanes);
}

__global__ void row_numbers(int *v, int n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = i;
}

// A warp per run of equal tokens in the sorted order (started by the run's first entry) and
// slice of 32 columns: the run's rows, ascending (the sort is stable), added in order into
// the token's row of dwte. Slices keep a long run (a frequent token) from resting on one warp.
template <typename A>
__global__ void encoder_bwd_tokens(float *dwte, const A *dout, const int *tok_sorted,
                                   const int *rows_sorted, int n, int C)
{
    int slices = (C + kLanes - 1) / kLanes;
    long long i = warp_row() / slices;
    int c0 = (int)(warp_row() % slices) * kLanes;
    if (i >= n || (i > 0 && tok_sorted[i] == tok_sorted[i - 1]))
        return;
    long long j = i + 1;
    while (j < n && tok_sorted[j] == tok_sorted[i])
        j++;
    int width = C - c0 < kLanes ? C - c0 : kLanes;
    encoder_token_backward(dwte + (size_t)tok_sorted[i] * C + c0, dout + c0, rows_sorted + i,
                           (int)(j - i), width, C, lane(), kLanes);
}

// A thread per element of dwpe: the B sequences' rows of its position, in order.
template <typename A>
__global__ void encoder_bwd_positions(float *dwpe, const A *dout, int B, int T, int C)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)T * C)
        dwpe[i] = encoder_position_backward(dwpe[i], dout, B, T, C, (int)(i / C), (int)(i % C));
}

template <typename A>
__global__ void layernorm_fwd(A *out, float *mean, float *rstd, const A *inp, const float *w,
                              const float *b, int N, int C)
{
    long long n = warp_row();
    if (n < N)
        layernorm_row_forward(out + (size_t)n * C, &mean[n], &rstd[n], inp + (size_t)n * C, w, b, C,
                              lane(), kLanes);
}

template <typename A>
__global__ void residual_layernorm_fwd(A *res, A *out, float *mean, float *rstd, const A *a,
                                       const A *b, const float *w, const float *bias, int N, int C)
{
    long long n = warp_row();
    size_t o = (size_t)n * C;
    if (n < N)
        residual_layernorm_row_forward(res + o, out + o, &mean[n], &rstd[n], a + o, b + o, w, bias,
                                       C, lane(), kLanes);
}

// Each warp takes rows n, n + the grid's warps, ... and adds their dw, db into a partial sum
// of its own (2C floats; its lanes own disjoint columns, so no element has two writers): in
// shared memory, or in warp_parts where that does not fit. The block then adds its warps'
// partials in warp order into its slot of block_parts, and ln_colsum adds the slots in block
// order into dw, db.
// max dynamic shared: kSharedMax (49152 bytes), ln_shared_bytes(C) when it fits, else 0
template <typename A>
__global__ void layernorm_bwd(A *dinp, const A *dout, const A *inp, const float *w,
                              const float *mean, const float *rstd, int N, int C, float *warp_parts,
                              float *block_parts)
{
    extern __shared__ float shared_parts[];
    size_t per = 2 * (size_t)C;
    float *parts = warp_parts ? warp_parts + (size_t)blockIdx.x * kWarps * per : shared_parts;
    float *mine = parts + (size_t)(threadIdx.x / kLanes) * per;
    for (size_t c = lane(); c < per; c += kLanes)
        mine[c] = 0.0f;
    __syncwarp(); /* a lane zeroes elements of db that another lane adds to (C % 32 != 0) */
    long long step = (long long)gridDim.x * kWarps;
    for (long long n = warp_row(); n < N; n += step)
        layernorm_row_backward(dinp + (size_t)n * C, mine, mine + C, dout + (size_t)n * C,
                               inp + (size_t)n * C, w, mean[n], rstd[n], C, lane(), kLanes);
    __syncthreads();
    for (size_t c = threadIdx.x; c < per; c += blockDim.x)
        block_parts[(size_t)blockIdx.x * per + c] = ordered_sum(parts + c, kWarps, per);
}

__global__ void ln_colsum(float *dw, float *db, const float *block_parts, int nb, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= 2 * C)
        return;
    float s = ordered_sum(block_parts + c, nb, 2 * (size_t)C);
    float *dst = c < C ? &dw[c] : &db[c - C];
    *dst += s;
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
        causal_softmax_row_backward(d + (size_t)r * T, att + (size_t)r * T, (int)(r % T), T, scale,
                                    lane(), kLanes);
}

template <typename A> __global__ void gelu_fwd(A *out, const A *inp, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        gelu_at_forward(out, inp, (size_t)i);
}

template <typename A> __global__ void gelu_bwd(A *dinp, const A *inp, const A *dout, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        gelu_at_backward(dinp, inp, dout, (size_t)i);
}

template <typename A> __global__ void residual_fwd(A *out, const A *a, const A *b, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        residual_at_forward(out, a, b, (size_t)i);
}

__global__ void to_bf16(unsigned short *dst, const float *src, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
}

template <typename A> __global__ void bias_fill(A *out, const float *bias, int N, int OC)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)N * OC)
        gpt2_act_st(&out[i], bias[i % OC]);
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

template <typename A>
static int encoder_forward(A *out, const int *tokens, const float *wte, const float *wpe, int B,
                           int T, int C, void *stream)
{
    if (empty((long long)B * T) || C <= 0)
        return 0;
    auto *encoder_fwd_a = encoder_fwd<A>; // (the stand-in's launch rewrite takes a plain name)
    encoder_fwd_a<<<row_blocks((long long)B * T), kThreads, 0, as_stream(stream)>>>(
        out, tokens, wte, wpe, B * T, T, C);
    return launched();
}

static size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

extern "C" int gpt2_cuda_encoder_backward_scratch(int B, int T, size_t *bytes)
{
    int n = B * T;
    size_t sort = 0;
    cudaError_t r =
        cub::DeviceRadixSort::SortPairs(nullptr, sort, (const int *)nullptr, (int *)nullptr,
                                        (const int *)nullptr, (int *)nullptr, n);
    *bytes = 3 * aligned(sizeof(int) * (size_t)n) + aligned(sort);
    return static_cast<int>(r);
}

template <typename A>
static int encoder_backward(float *dwte, float *dwpe, const A *dout, const int *tokens, int B,
                            int T, int C, int V, void *scratch, size_t scratch_bytes, void *stream)
{
    int n = B * T;
    if (n <= 0 || C <= 0)
        return 0;
    size_t ints = aligned(sizeof(int) * (size_t)n);
    if (scratch_bytes <= 3 * ints) /* smaller than gpt2_cuda_encoder_backward_scratch's */
        return static_cast<int>(cudaErrorInvalidValue);
    char *p = static_cast<char *>(scratch);
    int *rows = reinterpret_cast<int *>(p), *tok_sorted = reinterpret_cast<int *>(p + ints);
    int *rows_sorted = reinterpret_cast<int *>(p + 2 * ints);
    void *sort_tmp = p + 3 * ints;
    size_t sort_bytes = scratch_bytes > 3 * ints ? scratch_bytes - 3 * ints : 0;
    cudaStream_t s = as_stream(stream);
    row_numbers<<<blocks(n), kThreads, 0, s>>>(rows, n);
    cudaError_t r = cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, tokens, tok_sorted, rows,
                                                    rows_sorted, n, 0, token_bits(V), s);
    if (r != cudaSuccess)
        return static_cast<int>(r);
    long long warps = (long long)n * ((C + kLanes - 1) / kLanes);
    auto *encoder_bwd_tokens_a = encoder_bwd_tokens<A>;
    encoder_bwd_tokens_a<<<row_blocks(warps), kThreads, 0, s>>>(dwte, dout, tok_sorted, rows_sorted,
                                                                n, C);
    auto *encoder_bwd_positions_a = encoder_bwd_positions<A>;
    encoder_bwd_positions_a<<<blocks((long long)T * C), kThreads, 0, s>>>(dwpe, dout, B, T, C);
    return launched();
}

template <typename A>
static int layernorm_forward(A *out, float *mean, float *rstd, const A *inp, const float *w,
                             const float *b, int N, int C, void *stream)
{
    if (empty(N))
        return 0;
    auto *layernorm_fwd_a = layernorm_fwd<A>;
    layernorm_fwd_a<<<row_blocks(N), kThreads, 0, as_stream(stream)>>>(out, mean, rstd, inp, w, b,
                                                                       N, C);
    return launched();
}

template <typename A>
static int residual_layernorm_forward(A *res, A *out, float *mean, float *rstd, const A *a,
                                      const A *b, const float *w, const float *bias, int N, int C,
                                      void *stream)
{
    if (empty(N))
        return 0;
    auto *residual_layernorm_fwd_a = residual_layernorm_fwd<A>;
    residual_layernorm_fwd_a<<<row_blocks(N), kThreads, 0, as_stream(stream)>>>(
        res, out, mean, rstd, a, b, w, bias, N, C);
    return launched();
}

static unsigned ln_blocks(int N)
{
    return row_blocks(N) < kLnBackwardBlocks ? row_blocks(N) : kLnBackwardBlocks;
}

static size_t ln_shared_bytes(int C) { return (size_t)kWarps * 2 * (size_t)C * sizeof(float); }

extern "C" size_t gpt2_cuda_layernorm_backward_scratch(int N, int C)
{
    size_t parts = (size_t)ln_blocks(N) * 2 * (size_t)C;
    return ln_shared_bytes(C) <= kSharedMax ? parts : parts + parts * kWarps;
}

template <typename A>
static int layernorm_backward(A *dinp, float *dw, float *db, const A *dout, const A *inp,
                              const float *w, const float *mean, const float *rstd, int N, int C,
                              float *scratch, void *stream)
{
    if (N <= 0 || C <= 0)
        return 0;
    unsigned nb = ln_blocks(N);
    int use_shared = ln_shared_bytes(C) <= kSharedMax;
    float *block_parts = scratch;
    float *warp_parts = use_shared ? nullptr : scratch + (size_t)nb * 2 * C;
    cudaStream_t s = as_stream(stream);
    auto *layernorm_bwd_a = layernorm_bwd<A>;
    layernorm_bwd_a<<<nb, kThreads, use_shared ? ln_shared_bytes(C) : 0, s>>>(
        dinp, dout, inp, w, mean, rstd, N, C, warp_parts, block_parts);
    ln_colsum<<<blocks(2 * (long long)C), kThreads, 0, s>>>(dw, db, block_parts, (int)nb, C);
    return launched();
}

extern "C" int gpt2_cuda_heads_gather(float *dst, const float *src, int B, int T, int NH, int hs,
                                      int stride, int off, void *stream)
{
    long long n = (long long)B * NH * T * hs;
    if (empty(n))
        return 0;
    heads_gather<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dst, src, n, T, NH, hs, stride,
                                                                off);
    return launched();
}

extern "C" int gpt2_cuda_heads_scatter(float *dst, const float *src, int B, int T, int NH, int hs,
                                       int stride, int off, int add, void *stream)
{
    long long n = (long long)B * NH * T * hs;
    if (empty(n))
        return 0;
    heads_scatter<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dst, src, n, T, NH, hs, stride,
                                                                 off, add);
    return launched();
}

extern "C" int gpt2_cuda_softmax_forward(float *att, int rows, int T, float scale, void *stream)
{
    if (empty(rows))
        return 0;
    softmax_fwd<<<row_blocks(rows), kThreads, 0, as_stream(stream)>>>(att, rows, T, scale);
    return launched();
}

extern "C" int gpt2_cuda_softmax_backward(float *d, const float *att, int rows, int T, float scale,
                                          void *stream)
{
    if (empty(rows))
        return 0;
    softmax_bwd<<<row_blocks(rows), kThreads, 0, as_stream(stream)>>>(d, att, rows, T, scale);
    return launched();
}

extern "C" int gpt2_cuda_to_bf16(unsigned short *dst, const float *src, long long n, void *stream)
{
    if (empty(n))
        return 0;
    to_bf16<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dst, src, n);
    return launched();
}

template <typename A>
static int bias_fill_rows(A *out, const float *bias, int N, int OC, void *stream)
{
    if (empty((long long)N * OC))
        return 0;
    auto *bias_fill_a = bias_fill<A>;
    bias_fill_a<<<blocks((long long)N * OC), kThreads, 0, as_stream(stream)>>>(out, bias, N, OC);
    return launched();
}

extern "C" int gpt2_cuda_bias_fill(float *out, const float *bias, int N, int OC, void *stream)
{
    return bias_fill_rows(out, bias, N, OC, stream);
}

extern "C" int gpt2_cuda_bias_fill_bf16(unsigned short *out, const float *bias, int N, int OC,
                                        void *stream)
{
    return bias_fill_rows(out, bias, N, OC, stream);
}

template <typename A> static int gelu_forward(A *out, const A *inp, long long n, void *stream)
{
    if (empty(n))
        return 0;
    auto *gelu_fwd_a = gelu_fwd<A>;
    gelu_fwd_a<<<blocks(n), kThreads, 0, as_stream(stream)>>>(out, inp, n);
    return launched();
}

template <typename A>
static int gelu_backward(A *dinp, const A *inp, const A *dout, long long n, void *stream)
{
    if (empty(n))
        return 0;
    auto *gelu_bwd_a = gelu_bwd<A>;
    gelu_bwd_a<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dinp, inp, dout, n);
    return launched();
}

template <typename A>
static int residual_forward(A *out, const A *a, const A *b, long long n, void *stream)
{
    if (empty(n))
        return 0;
    auto *residual_fwd_a = residual_fwd<A>;
    residual_fwd_a<<<blocks(n), kThreads, 0, as_stream(stream)>>>(out, a, b, n);
    return launched();
}

extern "C" int gpt2_cuda_crossentropy_forward(float *probs, double *losses, const float *logits,
                                              const int *targets, int N, int V, void *stream)
{
    if (empty(N))
        return 0;
    xent_fwd<<<row_blocks(N), kThreads, 0, as_stream(stream)>>>(probs, losses, logits, targets, N,
                                                                V);
    return launched();
}

extern "C" int gpt2_cuda_crossentropy_backward(float *dlogits, const float *probs,
                                               const int *targets, int N, int V, void *stream)
{
    if (empty(N))
        return 0;
    xent_bwd<<<row_blocks(N), kThreads, 0, as_stream(stream)>>>(dlogits, probs, targets, N, V);
    return launched();
}

// ---- bf16 parameters and gradients (bf16.enabled) ----

__global__ void bf16_widen_k(float *dst, const unsigned short *src, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = gpt2_bf16_widen(src[i]);
}

__global__ void bf16_narrow_add_k(unsigned short *dst, const float *src, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        gpt2_bf16_narrow_add(&dst[i], src[i]);
}

extern "C" int gpt2_cuda_bf16_widen(float *dst, const unsigned short *src, long long n,
                                    void *stream)
{
    if (empty(n))
        return 0;
    bf16_widen_k<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dst, src, n);
    return launched();
}

extern "C" int gpt2_cuda_bf16_narrow_add(unsigned short *dst, const float *src, long long n,
                                         void *stream)
{
    if (empty(n))
        return 0;
    bf16_narrow_add_k<<<blocks(n), kThreads, 0, as_stream(stream)>>>(dst, src, n);
    return launched();
}

// ---- the entry points: fp32 activations, and bf16 ones (gpt2_cuda.h) ----

#define GPT2_CUDA_ACT_ENTRIES(A, SFX)                                                              \
    extern "C" int gpt2_cuda_encoder_forward##SFX(A *out, const int *tokens, const float *wte,     \
                                                  const float *wpe, int B, int T, int C,           \
                                                  void *stream)                                    \
    {                                                                                              \
        return encoder_forward(out, tokens, wte, wpe, B, T, C, stream);                            \
    }                                                                                              \
    extern "C" int gpt2_cuda_encoder_backward##SFX(                                                \
        float *dwte, float *dwpe, const A *dout, const int *tokens, int B, int T, int C, int V,    \
        void *scratch, size_t scratch_bytes, void *stream)                                         \
    {                                                                                              \
        return encoder_backward(dwte, dwpe, dout, tokens, B, T, C, V, scratch, scratch_bytes,      \
                                stream);                                                           \
    }                                                                                              \
    extern "C" int gpt2_cuda_layernorm_forward##SFX(A *out, float *mean, float *rstd,              \
                                                    const A *inp, const float *w, const float *b,  \
                                                    int N, int C, void *stream)                    \
    {                                                                                              \
        return layernorm_forward(out, mean, rstd, inp, w, b, N, C, stream);                        \
    }                                                                                              \
    extern "C" int gpt2_cuda_residual_layernorm_forward##SFX(                                      \
        A *res, A *out, float *mean, float *rstd, const A *a, const A *b, const float *w,          \
        const float *bias, int N, int C, void *stream)                                             \
    {                                                                                              \
        return residual_layernorm_forward(res, out, mean, rstd, a, b, w, bias, N, C, stream);      \
    }                                                                                              \
    extern "C" int gpt2_cuda_layernorm_backward##SFX(                                              \
        A *dinp, float *dw, float *db, const A *dout, const A *inp, const float *w,                \
        const float *mean, const float *rstd, int N, int C, float *scratch, void *stream)          \
    {                                                                                              \
        return layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C, scratch, stream);  \
    }                                                                                              \
    extern "C" int gpt2_cuda_gelu_forward##SFX(A *out, const A *inp, long long n, void *stream)    \
    {                                                                                              \
        return gelu_forward(out, inp, n, stream);                                                  \
    }                                                                                              \
    extern "C" int gpt2_cuda_gelu_backward##SFX(A *dinp, const A *inp, const A *dout, long long n, \
                                                void *stream)                                      \
    {                                                                                              \
        return gelu_backward(dinp, inp, dout, n, stream);                                          \
    }                                                                                              \
    extern "C" int gpt2_cuda_residual_forward##SFX(A *out, const A *a, const A *b, long long n,    \
                                                   void *stream)                                   \
    {                                                                                              \
        return residual_forward(out, a, b, n, stream);                                             \
    }

GPT2_CUDA_ACT_ENTRIES(float, )
GPT2_CUDA_ACT_ENTRIES(gpt2_bf16, _bf16)

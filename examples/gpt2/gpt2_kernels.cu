// The GPT-2 kernels on the GPU: one thread per row or element running the same math as the
// CPU kernels (gpt2_rows.h), gradients shared between rows added atomically. Written for
// correctness first (the math CI checks on the CPU); faster block-parallel versions can
// replace a kernel once a GPU test compares it with this one.
#include "gpt2_cuda.h"
#include "gpt2_rows.h"

#include <cuda_runtime.h>

namespace
{

constexpr int kThreads = 128;

unsigned blocks(long long n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

int launched() { return static_cast<int>(cudaGetLastError()); }

__global__ void encoder_fwd(float *out, const int *tok, const float *wte, const float *wpe,
                            int BT, int T, int C)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < BT)
        encoder_row_forward(out + (size_t)r * C, wte + (size_t)tok[r] * C,
                            wpe + (size_t)(r % T) * C, C);
}

__global__ void encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *tok, int BT,
                            int T, int C)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < BT)
        encoder_row_backward(dwte + (size_t)tok[r] * C, dwpe + (size_t)(r % T) * C,
                             dout + (size_t)r * C, C);
}

__global__ void layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N)
        layernorm_row_forward(out + (size_t)n * C, &mean[n], &rstd[n], inp + (size_t)n * C, w,
                              b, C);
}

__global__ void layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, const float *mean,
                              const float *rstd, int N, int C)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N)
        layernorm_row_backward(dinp + (size_t)n * C, dw, db, dout + (size_t)n * C,
                               inp + (size_t)n * C, w, mean[n], rstd[n], C);
}

// One thread per (b, h, t).
__global__ void attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C,
                              int NH)
{
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= (long long)B * NH * T)
        return;
    int t = (int)(r % T), h = (int)((r / T) % NH), b = (int)(r / ((long long)T * NH));
    int hs = C / NH;
    attention_row_forward(out + ((size_t)b * T + t) * C + h * hs,
                          att + (((size_t)b * NH + h) * T + t) * T, qkv + (size_t)b * T * 3 * C,
                          t, T, C, h, hs);
}

__global__ void attention_bwd(float *dqkv, const float *dout, const float *qkv,
                              const float *att, int B, int T, int C, int NH)
{
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= (long long)B * NH * T)
        return;
    int t = (int)(r % T), h = (int)((r / T) % NH), b = (int)(r / ((long long)T * NH));
    int hs = C / NH;
    attention_row_backward(dqkv + (size_t)b * T * 3 * C, dout + ((size_t)b * T + t) * C + h * hs,
                           qkv + (size_t)b * T * 3 * C, att + (((size_t)b * NH + h) * T + t) * T,
                           t, C, h, hs);
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

__global__ void bias_fill(float *out, const float *bias, int N, int OC)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)N * OC)
        out[i] = bias[i % OC];
}

__global__ void xent_fwd(float *probs, double *losses, const float *logits, const int *targets,
                         int N, int V)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N)
        losses[n] = crossentropy_row_forward(probs + (size_t)n * V, logits + (size_t)n * V,
                                             targets[n], V);
}

__global__ void xent_bwd(float *dlogits, const float *probs, const int *targets, int N, int V)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n < N)
        crossentropy_row_backward(dlogits + (size_t)n * V, probs + (size_t)n * V, targets[n], V,
                                  1.0f / (float)N);
}

} // namespace

extern "C" int gpt2_cuda_encoder_forward(float *out, const int *tokens, const float *wte,
                                         const float *wpe, int B, int T, int C, void *stream)
{
    encoder_fwd<<<blocks((long long)B * T), kThreads, 0, as_stream(stream)>>>(out, tokens, wte,
                                                                               wpe, B * T, T, C);
    return launched();
}

extern "C" int gpt2_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout,
                                          const int *tokens, int B, int T, int C, void *stream)
{
    encoder_bwd<<<blocks((long long)B * T), kThreads, 0, as_stream(stream)>>>(dwte, dwpe, dout,
                                                                               tokens, B * T, T, C);
    return launched();
}

extern "C" int gpt2_cuda_layernorm_forward(float *out, float *mean, float *rstd,
                                           const float *inp, const float *w, const float *b,
                                           int N, int C, void *stream)
{
    layernorm_fwd<<<blocks(N), kThreads, 0, as_stream(stream)>>>(out, mean, rstd, inp, w, b, N,
                                                                  C);
    return launched();
}

extern "C" int gpt2_cuda_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                            const float *inp, const float *w, const float *mean,
                                            const float *rstd, int N, int C, void *stream)
{
    layernorm_bwd<<<blocks(N), kThreads, 0, as_stream(stream)>>>(dinp, dw, db, dout, inp, w,
                                                                  mean, rstd, N, C);
    return launched();
}

extern "C" int gpt2_cuda_attention_forward(float *out, float *att, const float *qkv, int B,
                                           int T, int C, int NH, void *stream)
{
    attention_fwd<<<blocks((long long)B * NH * T), kThreads, 0, as_stream(stream)>>>(
        out, att, qkv, B, T, C, NH);
    return launched();
}

extern "C" int gpt2_cuda_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                            const float *att, int B, int T, int C, int NH,
                                            void *stream)
{
    attention_bwd<<<blocks((long long)B * NH * T), kThreads, 0, as_stream(stream)>>>(
        dqkv, dout, qkv, att, B, T, C, NH);
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
    xent_fwd<<<blocks(N), kThreads, 0, as_stream(stream)>>>(probs, losses, logits, targets, N, V);
    return launched();
}

extern "C" int gpt2_cuda_crossentropy_backward(float *dlogits, const float *probs,
                                               const int *targets, int N, int V, void *stream)
{
    xent_bwd<<<blocks(N), kThreads, 0, as_stream(stream)>>>(dlogits, probs, targets, N, V);
    return launched();
}

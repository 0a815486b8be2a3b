/* SPDX-License-Identifier: MIT */
/* The GPT-2 kernels on the GPU (gpt2_kernels.cu, built with CUDA): the same math as the CPU
 * kernels (gpt2_rows.h), a warp per row or a thread per element, queued on `stream` (a
 * cudaStream_t).
 * Pointers are device memory; shapes and accumulation rules as in gpt2_kernels.h (backward
 * kernels add into gradients; where rows share a gradient, in a fixed order, so a run repeats
 * bit for bit). Each returns the launch's cudaError_t as an int (0: queued). The matmuls go
 * through cuBLAS in the trainer. */
#ifndef ZT_GPT2_CUDA_H
#define ZT_GPT2_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

int gpt2_cuda_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                              int B, int T, int C, void *stream);
/* The encoder's backward takes device scratch of the size gpt2_cuda_encoder_backward_scratch
 * gives for B x T (it sorts the tokens, keeping row order: each token's rows are added in row
 * order, the CPU kernel's bits). */
int gpt2_cuda_encoder_backward_scratch(int B, int T, size_t *bytes);
int gpt2_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                               int B, int T, int C, int V, void *scratch, size_t scratch_bytes,
                               void *stream);
int gpt2_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                const float *w, const float *b, int N, int C, void *stream);
/* res = a + b and out = layernorm(res) in one kernel (a warp per row): the bits of
 * gpt2_cuda_residual_forward followed by gpt2_cuda_layernorm_forward, one pass less over
 * memory. */
int gpt2_cuda_residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
                                         const float *a, const float *b, const float *w,
                                         const float *bias, int N, int C, void *stream);
/* The layernorm backward takes gpt2_cuda_layernorm_backward_scratch(N, C) floats of device
 * scratch (its partial sums of dw, db). */
size_t gpt2_cuda_layernorm_backward_scratch(int N, int C);
int gpt2_cuda_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const float *w, const float *mean,
                                 const float *rstd, int N, int C, float *scratch, void *stream);
/* Attention's pieces around cuBLAS's batched GEMMs (gpt2_attention.h): heads gathered from
 * and scattered to rows (heads_offset), and the causal softmax of each row of T, forward and
 * backward (a warp per row). */
int gpt2_cuda_heads_gather(float *dst, const float *src, int B, int T, int NH, int hs, int stride,
                           int off, void *stream);
int gpt2_cuda_heads_scatter(float *dst, const float *src, int B, int T, int NH, int hs, int stride,
                            int off, int add, void *stream);
int gpt2_cuda_softmax_forward(float *att, int rows, int T, float scale, void *stream);
int gpt2_cuda_softmax_backward(float *d, const float *att, int rows, int T, float scale,
                               void *stream);
/* Fused causal attention (gpt2_attention.cu: tiles in shared memory, an online softmax,
 * nothing of T x T stored), for head sizes C / NH that gpt2_flash_head_size_ok accepts (else
 * cudaErrorInvalidValue, nothing queued). Forward: out[B,T,C] (overwritten) and lse[B,NH,T],
 * each row's logsumexp of its scaled scores, from qkv[B,T,3C]. Backward: dqkv[B,T,3C] += the
 * gradients through the attention of dout[B,T,C], from the forward's qkv, out and lse; it
 * takes gpt2_cuda_flash_backward_scratch floats of device scratch (each row's dout . out). */
int gpt2_cuda_flash_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                            void *stream);
size_t gpt2_cuda_flash_backward_scratch(int B, int T, int NH);
int gpt2_cuda_flash_backward(float *dqkv, const float *dout, const float *qkv, const float *out,
                             const float *lse, int B, int T, int C, int NH, float *scratch,
                             void *stream);
/* The same with qkv, out, dout and dqkv in bf16 (read widened, written rounded once: out
 * stored, dqkv added into); lse and the scratch stay fp32, as do the tiles and the math. */
int gpt2_cuda_flash_forward_bf16(unsigned short *out, float *lse, const unsigned short *qkv, int B,
                                 int T, int C, int NH, void *stream);
int gpt2_cuda_flash_backward_bf16(unsigned short *dqkv, const unsigned short *dout,
                                  const unsigned short *qkv, const unsigned short *out,
                                  const float *lse, int B, int T, int C, int NH, float *scratch,
                                  void *stream);
int gpt2_cuda_gelu_forward(float *out, const float *inp, long long n, void *stream);
int gpt2_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, long long n,
                            void *stream);
int gpt2_cuda_residual_forward(float *out, const float *a, const float *b, long long n,
                               void *stream);
/* bf16 activations (gpt2_ops' GPT2_BF16): the same kernels with every activation and
 * activation gradient (out, inp, res, a, b, dout, dinp) stored as bf16 (the 16 bits as
 * unsigned short), read widened to fp32 and written rounded to nearest even once; parameters,
 * their gradients and the layernorm statistics (mean, rstd) stay fp32, as does all arithmetic
 * (gpt2_rows_act.h, one source for both). Shapes, scratch and accumulation rules as above. */
int gpt2_cuda_encoder_forward_bf16(unsigned short *out, const int *tokens, const float *wte,
                                   const float *wpe, int B, int T, int C, void *stream);
int gpt2_cuda_encoder_backward_bf16(float *dwte, float *dwpe, const unsigned short *dout,
                                    const int *tokens, int B, int T, int C, int V, void *scratch,
                                    size_t scratch_bytes, void *stream);
int gpt2_cuda_layernorm_forward_bf16(unsigned short *out, float *mean, float *rstd,
                                     const unsigned short *inp, const float *w, const float *b,
                                     int N, int C, void *stream);
int gpt2_cuda_residual_layernorm_forward_bf16(unsigned short *res, unsigned short *out, float *mean,
                                              float *rstd, const unsigned short *a,
                                              const unsigned short *b, const float *w,
                                              const float *bias, int N, int C, void *stream);
int gpt2_cuda_layernorm_backward_bf16(unsigned short *dinp, float *dw, float *db,
                                      const unsigned short *dout, const unsigned short *inp,
                                      const float *w, const float *mean, const float *rstd, int N,
                                      int C, float *scratch, void *stream);
int gpt2_cuda_gelu_forward_bf16(unsigned short *out, const unsigned short *inp, long long n,
                                void *stream);
int gpt2_cuda_gelu_backward_bf16(unsigned short *dinp, const unsigned short *inp,
                                 const unsigned short *dout, long long n, void *stream);
int gpt2_cuda_residual_forward_bf16(unsigned short *out, const unsigned short *a,
                                    const unsigned short *b, long long n, void *stream);
/* dst = src rounded to bf16 (to nearest even; n elements), the bf16 matmuls' inputs. */
int gpt2_cuda_to_bf16(unsigned short *dst, const float *src, long long n, void *stream);
/* bf16 parameters (bf16.enabled): dst = src widened to fp32; dst = bf16(dst + src), rounded
 * to nearest even once (gpt2_rows.h's element functions, the CPU's bits) */
int gpt2_cuda_bf16_widen(float *dst, const unsigned short *src, long long n, void *stream);
int gpt2_cuda_bf16_narrow_add(unsigned short *dst, const float *src, long long n, void *stream);
/* out[n][o] = bias[o] for N rows of OC: the matmul's bias, put down before the GEMM adds. */
int gpt2_cuda_bias_fill(float *out, const float *bias, int N, int OC, void *stream);
/* ... into bf16 rows (bf16 activations: each bias value rounded to bf16) */
int gpt2_cuda_bias_fill_bf16(unsigned short *out, const float *bias, int N, int OC, void *stream);
/* probs = softmax(logits) per row; losses[n] = -log probs[n][targets[n]] (the caller sums
 * them in row order, as the CPU kernel does). */
int gpt2_cuda_crossentropy_forward(float *probs, double *losses, const float *logits,
                                   const int *targets, int N, int V, void *stream);
int gpt2_cuda_crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N,
                                    int V, void *stream);

#ifdef __cplusplus
}
#endif
#endif

/* SPDX-License-Identifier: MIT */
/* GPT-2 layer kernels on the CPU in fp32: forward/backward pairs. Shapes in comments use
 * B batch, T time, C channels, NH heads, OC output channels, V vocabulary; arrays are
 * row-major and owned by the caller. Backward functions ADD into parameter gradients and
 * into the input gradient (so residual branches accumulate), like llm.c's kernels. */
#ifndef ZT_GPT2_KERNELS_H
#define ZT_GPT2_KERNELS_H

/* The threads the matmuls use (OpenBLAS): the trainer sets them, so that the matmuls and
 * ztier's optimizer pool (which run one after the other) each take the cores once. */
void gpt2_set_threads(int n);

/* out[B,T,C] = wte[tok] + wpe[t] */
void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                     int T, int C);
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T,
                      int C);

/* out[N,C] = (inp - mean) * rstd * w + b; mean[N], rstd[N] saved for backward */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int N, int C);
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, const float *mean, const float *rstd, int N, int C);
/* res[N,C] = a + b, then out = layernorm(res) as layernorm_forward (the same bits as
 * residual_forward followed by layernorm_forward) */
void residual_layernorm_forward(float *res, float *out, float *mean, float *rstd, const float *a,
                                const float *b, const float *w, const float *bias, int N, int C);

/* out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC] (bias may be NULL) */
void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int C,
                    int OC);
/* dinp[N,C] += dout @ w; dw[OC,C] += dout^T @ inp; dbias[OC] += sum_n dout (if not NULL) */
void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                     const float *w, int N, int C, int OC);

/* Causal self-attention. qkv[B,T,3C] -> out[B,T,C]; att[B,NH,T,T] keeps the softmax. */
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B,
                        int T, int C, int NH);

/* tanh-approximated GELU over n elements */
void gelu_forward(float *out, const float *inp, long long n);
void gelu_backward(float *dinp, const float *inp, const float *dout, long long n);

/* out = a + b */
void residual_forward(float *out, const float *a, const float *b, long long n);

/* probs[N,V] = softmax(logits); returns the mean cross-entropy of targets[N];
 * dlogits[N,V] = (probs - onehot) / N (dlogits may alias probs). */
/* bf16 parameters (bf16.enabled; 16-bit values as unsigned short): dst[n] = src widened to
 * fp32 (exact); dst[n] = bf16(dst + src), rounded to nearest even once */
void bf16_widen(float *dst, const unsigned short *src, long long n);
void bf16_narrow_add(unsigned short *dst, const float *src, long long n);

float crossentropy_forward(float *probs, const float *logits, const int *targets, int N, int V);
void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N, int V);

#endif

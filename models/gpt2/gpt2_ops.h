/* SPDX-License-Identifier: MIT */
/* Where the GPT-2 model computes: its memory and kernels as a table, so the model code
 * (gpt2_model.c) is the same on the CPU (gpt2_ops_cpu: malloc, the OpenBLAS kernels) and on
 * a GPU (gpt2_ops_cuda.c: device memory, the CUDA kernels of gpt2_rows.h and cuBLAS, all
 * queued on one stream). Pointers handed to the kernels are in the ops' memory. */
#ifndef ZT_GPT2_OPS_H
#define ZT_GPT2_OPS_H

#include <stddef.h>

typedef struct gpt2_ops {
    void *ctx;
    void *(*alloc)(void *ctx, size_t bytes); /* NULL when out of memory */
    void (*free)(void *ctx, void *p);
    void (*upload)(void *ctx, void *dst, const void *host, size_t bytes);
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*zero)(void *ctx, void *p, size_t bytes);
    /* the kernels of gpt2_kernels.h */
    void (*encoder_forward)(void *ctx, float *out, const int *tokens, const float *wte,
                            const float *wpe, int B, int T, int C);
    /* tokens < V (the GPU sorts only the bits V needs) */
    void (*encoder_backward)(void *ctx, float *dwte, float *dwpe, const float *dout,
                             const int *tokens, int B, int T, int C, int V);
    void (*layernorm_forward)(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C);
    /* res = a + b, then out = layernorm(res) (the residual stream and the next layernorm in
     * one pass: the bits of the sum, then layernorm_forward) */
    void (*residual_layernorm_forward)(void *ctx, float *res, float *out, float *mean, float *rstd,
                                       const float *a, const float *b, const float *w,
                                       const float *bias, int N, int C);
    void (*layernorm_backward)(void *ctx, float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, int N, int C);
    void (*matmul_forward)(void *ctx, float *out, const float *inp, const float *w,
                           const float *bias, int N, int C, int OC);
    void (*matmul_backward)(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, int N, int C, int OC);
    /* The same with w the 16-bit (bf16) weights as ztier holds them, read by the GEMMs as they
     * are (no fp32 copy, no cast), and dw ztier's 16-bit gradient buffer: dw = bf16(dw + the
     * gradient accumulated in fp32), rounded once (dbias stays fp32). NULL where the matmuls do
     * not take bf16 inputs (the CPU; the GPU in fp32 or TF32). */
    void (*matmul_forward_w16)(void *ctx, float *out, const float *inp, const unsigned short *w,
                               const float *bias, int N, int C, int OC);
    void (*matmul_backward_w16)(void *ctx, float *dinp, unsigned short *dw, float *dbias,
                                const float *dout, const float *inp, const unsigned short *w, int N,
                                int C, int OC);
    /* The MLP's GELU fused into the GEMMs around it (cuBLASLt's epilogues, gpt2_matmul_lt.h);
     * NULL where the ops have none (the CPU: matmul_forward then gelu_forward, and
     * matmul_backward then gelu_backward). w is the 16-bit weights (as the _w16 matmuls take)
     * when w16, else fp32; dw the gradient of the same type.
     * matmul_gelu_forward: pre[N,OC] = inp @ w^T + bias (what matmul_forward writes) and
     * out = gelu of it (what gelu_forward writes from pre; in bf16 activations, the GELU of the
     * fp32 sum before pre is rounded, one rounding fewer). */
    void (*matmul_gelu_forward)(void *ctx, float *out, float *pre, const float *inp, const float *w,
                                int w16, const float *bias, int N, int C, int OC);
    /* The backward of the layer whose input inp is gelu(pre_in) [N,C]: dinp = (dout @ w) *
     * gelu'(pre_in), the gradient at pre_in, written (what matmul_backward into a zeroed
     * buffer, then gelu_backward into another, give); dw and dbias added to as
     * matmul_backward does (dbias fp32). */
    void (*matmul_dgelu_backward)(void *ctx, float *dinp, float *dw, float *dbias,
                                  const float *dout, const float *inp, const float *w, int w16,
                                  const float *pre_in, int N, int C, int OC);
    /* att: what the forward keeps for the backward, att_keep below (gpt2_attention.h) */
    void (*attention_forward)(void *ctx, float *out, float *att, const float *qkv, int B, int T,
                              int C, int NH);
    /* out: the forward's output (the fused backward reads it; the CPU's does not) */
    void (*attention_backward)(void *ctx, float *dqkv, const float *dout, const float *qkv,
                               const float *out, const float *att, int B, int T, int C, int NH);
    /* element-wise, over n elements (64-bit: a layer's activations pass 2^31 at scale) */
    void (*gelu_forward)(void *ctx, float *out, const float *inp, long long n);
    void (*gelu_backward)(void *ctx, float *dinp, const float *inp, const float *dout, long long n);
    /* returns the mean loss on the host (a GPU waits for it) */
    float (*crossentropy_forward)(void *ctx, float *probs, const float *logits, const int *targets,
                                  int N, int V);
    void (*crossentropy_backward)(void *ctx, float *dlogits, const float *probs, const int *targets,
                                  int N, int V);
    /* 0, or the first error any call met since the ops were made (a GPU's launch or
     * allocation failure); the model reports it */
    int (*status)(void *ctx);
    const char *(*status_text)(void *ctx); /* that error named ("" when none) */
    /* bf16 parameters (bf16.enabled; 16-bit values as unsigned short, in the ops' memory):
     * dst = src widened to fp32 for the fp32 kernels; dst = bf16(dst + src), a layer's fp32
     * gradient added into its 16-bit gradient buffer, rounded to nearest even once */
    void (*bf16_widen)(void *ctx, float *dst, const unsigned short *src, long long n);
    void (*bf16_narrow_add)(void *ctx, unsigned short *dst, const float *src, long long n);
    /* The LM head (tied to wte, fp32): fp32 logits[N,Vp] = inp @ wte^T from the activations,
     * and its backward (dinp += dlogits @ wte in the activations' type, dwte += in fp32); NULL:
     * matmul_forward / matmul_backward, whose activations are fp32 alike. */
    void (*logits_forward)(void *ctx, float *logits, const float *inp, const float *w, int N, int C,
                           int V);
    void (*logits_backward)(void *ctx, float *dinp, float *dw, const float *dlogits,
                            const float *inp, const float *w, int N, int C, int V);
    /* gpt2_att_keep: what att holds, so the model allocates gpt2_att_floats of it */
    int att_keep;
    /* Bytes of a stored activation: 4 (fp32), or 2 where the ops keep activations and their
     * gradients in bf16 (the GPU in GPT2_BF16): every pointer the ops' kernels take as an
     * activation (and matmul inputs and outputs but the logits) then addresses bf16 values;
     * layernorm's mean and rstd, attention's att, the logits and probabilities stay fp32. */
    int act_bytes;
} gpt2_ops;

/* The CPU: host memory and the kernels of gpt2_kernels.c. */
extern const gpt2_ops gpt2_ops_cpu;

/* The GPU's precision: fp32 with TF32 off (the checks), TF32 tensor cores, or bf16: the
 * activations and their gradients stored in bf16 (act_bytes 2; fp32 where numerics need it:
 * layernorm statistics, attention's logsumexp, the logits, probabilities and loss), the GEMMs
 * reading them as they are with fp32 weights rounded to bf16 on the way in, or bf16 weights as
 * ztier holds them (matmul_*_w16) read as they are and their gradients written in bf16; all
 * accumulation in fp32. bf16 needs the fused attention's head sizes (gpt2_flash_head_size_ok);
 * attention's batched GEMMs (other head sizes) stay fp32/TF32. */
typedef enum gpt2_precision { GPT2_FP32 = 0, GPT2_TF32, GPT2_BF16 } gpt2_precision;
/* "fp32", "tf32" or "bf16"; -1 for anything else. */
int gpt2_precision_parse(const char *s);

/* The GPU (built with CUDA): fills *out for work queued on `stream` (a cudaStream_t, e.g.
 * from zt_stream_create with the cuda backend) on GPU `device` (zt_runtime_device; -1: the
 * current one), which it makes the calling thread's current device (the ops launch from
 * it); its matmuls in precision p. 0, or -1 with a message in why. */
int gpt2_ops_cuda_create(gpt2_ops *out, void *stream, int device, gpt2_precision p, char *why,
                         size_t len);
/* 1 when the CUDA runtime finds a GPU (without making a context on one: each rank makes its
 * own on its GPU later); the first GPU's name goes to name. Else 0 and why: "no GPU found"
 * where there is none (no device, or no driver and no device node), else "no usable GPU: "
 * and the CUDA runtime's error. */
int gpt2_cuda_usable(char *name, size_t name_len, char *why, size_t len);
/* The current GPU's dense bf16 peak in FLOP/s (H100, H200, A100), 0 when unknown; its name
 * goes to name. */
double gpt2_cuda_bf16_peak(char *name, size_t len);
void gpt2_ops_cuda_destroy(gpt2_ops *ops);

#endif

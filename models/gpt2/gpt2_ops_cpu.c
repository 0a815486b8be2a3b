/* SPDX-License-Identifier: MIT */
/* gpt2_ops_cpu: host memory and the CPU kernels (gpt2_kernels.c). */
#include "gpt2_kernels.h"
#include "gpt2_ops.h"

#include <stdlib.h>
#include <string.h>

static void *cpu_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return malloc(bytes ? bytes : 1);
}
static void cpu_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}
static void cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    memcpy(dst, src, bytes);
}
static void cpu_zero(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    memset(p, 0, bytes);
}
int gpt2_precision_parse(const char *s)
{
    return !strcmp(s, "fp32")   ? GPT2_FP32
           : !strcmp(s, "tf32") ? GPT2_TF32
           : !strcmp(s, "bf16") ? GPT2_BF16
                                : -1;
}

static int cpu_status(void *ctx)
{
    (void)ctx;
    return 0;
}
static const char *cpu_status_text(void *ctx)
{
    (void)ctx;
    return "";
}

static void enc_f(void *ctx, float *out, const int *tok, const float *wte, const float *wpe, int B,
                  int T, int C)
{
    (void)ctx;
    encoder_forward(out, tok, wte, wpe, B, T, C);
}
static void enc_b(void *ctx, float *dwte, float *dwpe, const float *dout, const int *tok, int B,
                  int T, int C, int V)
{
    (void)ctx, (void)V;
    encoder_backward(dwte, dwpe, dout, tok, B, T, C);
}
static void ln_f(void *ctx, float *out, float *mean, float *rstd, const float *inp, const float *w,
                 const float *b, int N, int C)
{
    (void)ctx;
    layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}
static void res_ln_f(void *ctx, float *res, float *out, float *mean, float *rstd, const float *a,
                     const float *b, const float *w, const float *bias, int N, int C)
{
    (void)ctx;
    residual_layernorm_forward(res, out, mean, rstd, a, b, w, bias, N, C);
}
static void ln_b(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                 const float *w, const float *mean, const float *rstd, int N, int C)
{
    (void)ctx;
    layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}
static void mm_f(void *ctx, float *out, const float *inp, const float *w, const float *bias, int N,
                 int C, int OC)
{
    (void)ctx;
    matmul_forward(out, inp, w, bias, N, C, OC);
}
static void mm_b(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                 const float *inp, const float *w, int N, int C, int OC)
{
    (void)ctx;
    matmul_backward(dinp, dw, dbias, dout, inp, w, N, C, OC);
}
static void att_f(void *ctx, float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    (void)ctx;
    attention_forward(out, att, qkv, B, T, C, NH);
}
static void att_b(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                  const float *att, int B, int T, int C, int NH)
{
    (void)ctx, (void)out; /* the row kernels read the kept softmax */
    attention_backward(dqkv, dout, qkv, att, B, T, C, NH);
}
static void gelu_f(void *ctx, float *out, const float *inp, long long n)
{
    (void)ctx;
    gelu_forward(out, inp, n);
}
static void gelu_b(void *ctx, float *dinp, const float *inp, const float *dout, long long n)
{
    (void)ctx;
    gelu_backward(dinp, inp, dout, n);
}
static void widen_f(void *ctx, float *dst, const unsigned short *src, long long n)
{
    (void)ctx;
    bf16_widen(dst, src, n);
}
static void narrow_f(void *ctx, unsigned short *dst, const float *src, long long n)
{
    (void)ctx;
    bf16_narrow_add(dst, src, n);
}
static float xent_f(void *ctx, float *probs, const float *logits, const int *targets, int N, int V)
{
    (void)ctx;
    return crossentropy_forward(probs, logits, targets, N, V);
}
static void xent_b(void *ctx, float *dlogits, const float *probs, const int *targets, int N, int V)
{
    (void)ctx;
    crossentropy_backward(dlogits, probs, targets, N, V);
}

const gpt2_ops gpt2_ops_cpu = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .encoder_forward = enc_f,
    .encoder_backward = enc_b,
    .layernorm_forward = ln_f,
    .residual_layernorm_forward = res_ln_f,
    .layernorm_backward = ln_b,
    .matmul_forward = mm_f,
    .matmul_backward = mm_b,
    .attention_forward = att_f,
    .attention_backward = att_b,
    .gelu_forward = gelu_f,
    .gelu_backward = gelu_b,
    .bf16_widen = widen_f,
    .bf16_narrow_add = narrow_f,
    .crossentropy_forward = xent_f,
    .crossentropy_backward = xent_b,
    .status = cpu_status,
    .status_text = cpu_status_text,
    .att_keep = 0, /* GPT2_ATT_PROBS: the softmax, T x T per head */
    .act_bytes = 4,
};

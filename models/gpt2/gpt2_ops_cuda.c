/* SPDX-License-Identifier: MIT */
/* gpt2_ops on a GPU: device memory, the CUDA kernels of gpt2_kernels.cu and cuBLAS for the
 * matmuls, everything queued on one stream. Nothing here waits for the GPU except the loss
 * (crossentropy_forward copies the per-row losses back). The first error of any call is
 * kept for gpt2_model_status. Compiled with CUDA; not run on this project's CPU-only
 * machines (tests/gpt2/test_gpt2_cuda_train.c compares it with the CPU on a GPU). */
#include "gpt2_attention.h"
#include "gpt2_cuda.h"
#include "gpt2_matmul_lt.h"
#include "gpt2_ops.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A device buffer grown on demand. */
typedef struct dev_buf {
    void *p;
    size_t bytes;
} dev_buf;

/* A pinned buffer an upload copies through, and the event after its copy to the device. */
typedef struct staging {
    void *p;
    size_t bytes;
    cudaEvent_t copied;
} staging;

typedef struct cuda_ctx {
    cudaStream_t stream;
    cublasHandle_t blas;
    gpt2_lt *lt;    /* cuBLASLt: the matmuls with a GELU in their epilogue */
    double *losses; /* device: one per row of the last crossentropy_forward */
    double *host_losses;
    int cap;
    dev_buf ones;        /* 1.0f floats, for the bias's gradient as a GEMV */
    dev_buf att_scratch; /* attention's scratch (gpt2_attention_scratch_floats) */
    dev_buf ln_scratch;  /* layernorm backward's partial sums */
    dev_buf enc_scratch; /* the encoder backward's sort ... */
    int enc_rows;        /* ... sized for this many rows (B x T) */
    size_t enc_bytes;
    gpt2_precision precision;
    int act16;      /* GPT2_BF16: activations and their gradients stored in bf16 */
    dev_buf bf[3];  /* bf16 copies of a matmul's fp32 inputs (GPT2_BF16) */
    dev_buf ones16; /* bf16 ones, for the bias's gradient from bf16 gradients */
    staging up[2];  /* uploads take turns: each waits only for the one two uploads back */
    int up_next;
    int error;      /* the first error met: a cudaError_t, or CUBLAS_BASE + a cublasStatus_t */
    char what[160]; /* ... and its name */
} cuda_ctx;

#define CUBLAS_BASE 10000 /* cuBLAS statuses are kept above every cudaError_t */

static void keep(cuda_ctx *c, int err)
{
    if (!err || c->error)
        return;
    c->error = err;
    snprintf(c->what, sizeof c->what, "CUDA error %d (%s: %s)", err,
             cudaGetErrorName((cudaError_t)err), cudaGetErrorString((cudaError_t)err));
}

static void keep_blas(cuda_ctx *c, cublasStatus_t s)
{
    if (s == CUBLAS_STATUS_SUCCESS || c->error)
        return;
    c->error = CUBLAS_BASE + (int)s;
    snprintf(c->what, sizeof c->what, "cuBLAS status %d (%s)", (int)s, cublasGetStatusString(s));
}

/* A gpt2_matmul_lt status (a cublasStatus_t), named by its call. */
static void keep_lt(cuda_ctx *c, int st)
{
    if (!st || c->error)
        return;
    c->error = CUBLAS_BASE + st;
    snprintf(c->what, sizeof c->what, "%s", gpt2_lt_error(c->lt));
}

/* An allocation's status (cudaMalloc, cudaMallocHost), the runtime's last error cleared when
 * it was refused: the refusal is kept and reported by the caller, and a later launch (whose
 * check reads the last error) must not take it for its own failure. */
static int allocated(cudaError_t r)
{
    if (r != cudaSuccess)
        (void)cudaGetLastError();
    return (int)r;
}

static void *g_alloc(void *ctx, size_t bytes)
{
    void *p = NULL;
    int r = allocated(cudaMalloc(&p, bytes ? bytes : 1));
    keep(ctx, r);
    return r ? NULL : p;
}

static void g_free(void *ctx, void *p)
{
    cuda_ctx *c = ctx;
    cudaStreamSynchronize(c->stream); /* queued kernels may still use it */
    cudaFree(p);
}

/* The caller's bytes are copied into a pinned staging buffer before this returns, so the
 * caller may change them at once whatever memory they are in (an asynchronous copy straight
 * from pinned memory would read them later); the device copy then runs in stream order. */
static void g_upload(void *ctx, void *dst, const void *host, size_t bytes)
{
    cuda_ctx *c = ctx;
    staging *s = &c->up[c->up_next];
    c->up_next ^= 1;
    int r = s->copied ? (int)cudaEventSynchronize(s->copied) : 0; /* its last copy read it */
    if (!r && bytes > s->bytes) {
        cudaFreeHost(s->p);
        s->p = NULL, s->bytes = 0;
        r = allocated(cudaMallocHost(&s->p, bytes));
        s->bytes = r ? 0 : bytes;
    }
    if (!r && !s->copied)
        r = (int)cudaEventCreateWithFlags(&s->copied, cudaEventDisableTiming);
    if (!r) {
        memcpy(s->p, host, bytes);
        r = (int)cudaMemcpyAsync(dst, s->p, bytes, cudaMemcpyHostToDevice, c->stream);
    }
    if (!r)
        r = (int)cudaEventRecord(s->copied, c->stream);
    keep(c, r);
}

static void g_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    cuda_ctx *c = ctx;
    keep(c, (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

static void g_zero(void *ctx, void *p, size_t bytes)
{
    cuda_ctx *c = ctx;
    keep(c, (int)cudaMemsetAsync(p, 0, bytes, c->stream));
}

static int g_status(void *ctx) { return ((cuda_ctx *)ctx)->error; }
static const char *g_status_text(void *ctx) { return ((cuda_ctx *)ctx)->what; }

#define S(ctx) ((void *)((cuda_ctx *)(ctx))->stream)

/* An activation pointer as the bf16 array it addresses where the activations are bf16. */
#define A16(p) ((unsigned short *)(void *)(p))
#define CA16(p) ((const unsigned short *)(const void *)(p))
#define ACT16(ctx) (((cuda_ctx *)(ctx))->act16)

static void enc_f(void *ctx, float *out, const int *tok, const float *wte, const float *wpe, int B,
                  int T, int C)
{
    keep(ctx, ACT16(ctx) ? gpt2_cuda_encoder_forward_bf16(A16(out), tok, wte, wpe, B, T, C, S(ctx))
                         : gpt2_cuda_encoder_forward(out, tok, wte, wpe, B, T, C, S(ctx)));
}
static void *grow(cuda_ctx *c, dev_buf *b, size_t bytes);

static void enc_b(void *ctx, float *dwte, float *dwpe, const float *dout, const int *tok, int B,
                  int T, int C, int V)
{
    cuda_ctx *c = ctx;
    int r = 0;
    if (c->enc_rows != B * T) { /* the sort's size query, once per shape */
        r = gpt2_cuda_encoder_backward_scratch(B, T, &c->enc_bytes);
        c->enc_rows = r ? 0 : B * T;
    }
    void *scratch = r ? NULL : grow(c, &c->enc_scratch, c->enc_bytes);
    keep(c, r);
    if (scratch)
        keep(c, c->act16 ? gpt2_cuda_encoder_backward_bf16(dwte, dwpe, CA16(dout), tok, B, T, C, V,
                                                           scratch, c->enc_bytes, S(ctx))
                         : gpt2_cuda_encoder_backward(dwte, dwpe, dout, tok, B, T, C, V, scratch,
                                                      c->enc_bytes, S(ctx)));
}
static void ln_f(void *ctx, float *out, float *mean, float *rstd, const float *inp, const float *w,
                 const float *b, int N, int C)
{
    keep(ctx, ACT16(ctx) ? gpt2_cuda_layernorm_forward_bf16(A16(out), mean, rstd, CA16(inp), w, b,
                                                            N, C, S(ctx))
                         : gpt2_cuda_layernorm_forward(out, mean, rstd, inp, w, b, N, C, S(ctx)));
}
static void res_ln_f(void *ctx, float *res, float *out, float *mean, float *rstd, const float *a,
                     const float *b, const float *w, const float *bias, int N, int C)
{
    keep(ctx, ACT16(ctx)
                  ? gpt2_cuda_residual_layernorm_forward_bf16(
                        A16(res), A16(out), mean, rstd, CA16(a), CA16(b), w, bias, N, C, S(ctx))
                  : gpt2_cuda_residual_layernorm_forward(res, out, mean, rstd, a, b, w, bias, N, C,
                                                         S(ctx)));
}
static void ln_b(void *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                 const float *w, const float *mean, const float *rstd, int N, int C)
{
    cuda_ctx *c = ctx;
    float *scratch =
        grow(c, &c->ln_scratch, gpt2_cuda_layernorm_backward_scratch(N, C) * sizeof(float));
    if (scratch)
        keep(ctx, c->act16
                      ? gpt2_cuda_layernorm_backward_bf16(A16(dinp), dw, db, CA16(dout), CA16(inp),
                                                          w, mean, rstd, N, C, scratch, S(ctx))
                      : gpt2_cuda_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C,
                                                     scratch, S(ctx)));
}

/* b with room for at least `bytes` (grown once to the largest asked for: the host waits then,
 * as queued work may still use the old buffer); NULL with the error kept. */
static void *grow(cuda_ctx *c, dev_buf *b, size_t bytes)
{
    if (bytes <= b->bytes)
        return b->p;
    int r = (int)cudaStreamSynchronize(c->stream);
    if (!r)
        r = (int)cudaFree(b->p);
    b->p = NULL, b->bytes = 0;
    if (!r)
        r = allocated(cudaMalloc(&b->p, bytes));
    keep(c, r);
    b->bytes = r ? 0 : bytes;
    return r ? NULL : b->p;
}

/* A device vector of at least n ones of `size` bytes each (fp32 or bf16, *one the value's
 * bytes) in b. The copy is on the ops' stream and waited for: a plain cudaMemcpy would run
 * on the legacy stream, which the ops' non-blocking stream is not ordered after. */
static const void *ones_in(cuda_ctx *c, dev_buf *b, int n, size_t size, const void *one)
{
    size_t bytes = size * (size_t)n;
    if (bytes <= b->bytes)
        return b->p;
    char *h = malloc(bytes), *d = h ? grow(c, b, bytes) : NULL;
    if (!h)
        keep(c, (int)cudaErrorMemoryAllocation);
    for (int i = 0; d && i < n; i++)
        memcpy(h + (size_t)i * size, one, size);
    int r = d ? (int)cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, c->stream) : 0;
    if (d && !r)
        r = (int)cudaStreamSynchronize(c->stream); /* before h goes */
    free(h);
    keep(c, r);
    if (r)
        b->bytes = 0; /* not filled: filled again next time */
    return d && !r ? d : NULL;
}

static const float *ones(cuda_ctx *c, int n)
{
    const float one = 1.0f;
    return ones_in(c, &c->ones, n, sizeof one, &one);
}

static const unsigned short *ones16(cuda_ctx *c, int n)
{
    const unsigned short one = 0x3f80; /* 1.0 in bf16 */
    return ones_in(c, &c->ones16, n, sizeof one, &one);
}

/* A bf16 copy of n floats in scratch slot k (the fp32 weights and the fp32 logits' gradient
 * in GPT2_BF16; activations are bf16 already). */
static const unsigned short *bf16_of(cuda_ctx *c, int k, const float *src, size_t n)
{
    unsigned short *d = grow(c, &c->bf[k], n * sizeof(unsigned short));
    if (d)
        keep(c, gpt2_cuda_to_bf16(d, src, (long long)n, c->stream));
    return d;
}

/* Column-major C[m,n] (+)= op(A) op(B) with A, B bf16 and C of type ct (fp32, or bf16:
 * rounded once at the end), accumulated in fp32. */
static void gemm_bf16_to(cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                         int k, const unsigned short *A, int lda, const unsigned short *B, int ldb,
                         float beta, void *C, cudaDataType ct, int ldc)
{
    const float one = 1;
    keep_blas(c, cublasGemmEx(c->blas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF,
                              ldb, &beta, C, ct, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Row-major out[N,OC] = inp[N,C] @ w[OC,C]^T (+ bias): column-major out^T = w inp^T. The
 * bias goes down first, copied into every row (in full fp32: a rank-1 GEMM could round it to
 * TF32), then the GEMM adds with beta 1, as the CPU's matmul does. In GPT2_BF16 (here) the
 * GEMM reads bf16 (w16: ztier's 16-bit weights, or the fp32 weights cast; inp: the bf16
 * activations as stored, no cast) and accumulates in fp32; out is bf16, rounded once from the
 * sum with the bias, which went down in bf16 (rounded there too: within the bf16 tolerance),
 * or, with out32 (the logits), fp32. */
static void mm_f_bf16(cuda_ctx *c, float *out, int out32, const float *inp,
                      const unsigned short *w16, const float *bias, int N, int C, int OC)
{
    if (bias)
        keep(c, out32 ? gpt2_cuda_bias_fill(out, bias, N, OC, c->stream)
                      : gpt2_cuda_bias_fill_bf16(A16(out), bias, N, OC, c->stream));
    if (w16)
        gemm_bf16_to(c, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, w16, C, CA16(inp), C,
                     bias ? 1.0f : 0.0f, out, out32 ? CUDA_R_32F : CUDA_R_16BF, OC);
}

static void mm_f(void *ctx, float *out, const float *inp, const float *w, const float *bias, int N,
                 int C, int OC)
{
    cuda_ctx *c = ctx;
    const float one = 1, zero = 0;
    if (c->precision == GPT2_BF16) {
        mm_f_bf16(c, out, 0, inp, bf16_of(c, 0, w, (size_t)OC * C), bias, N, C, OC);
        return;
    }
    if (bias)
        keep(c, gpt2_cuda_bias_fill(out, bias, N, OC, c->stream));
    keep_blas(c, cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, w, C, inp, C,
                             bias ? &one : &zero, out, OC));
}

static void mm_f_w16(void *ctx, float *out, const float *inp, const unsigned short *w,
                     const float *bias, int N, int C, int OC)
{
    mm_f_bf16(ctx, out, 0, inp, w, bias, N, C, OC);
}

/* GPT2_BF16's tied LM head: fp32 logits from the bf16 activations and wte cast. */
static void logits_f(void *ctx, float *logits, const float *inp, const float *w, int N, int C,
                     int V)
{
    cuda_ctx *c = ctx;
    mm_f_bf16(c, logits, 1, inp, bf16_of(c, 0, w, (size_t)V * C), NULL, N, C, V);
}

/* dbias[OC] += the column sums of dout[N,OC] (as a GEMV with a vector of ones). */
static void bias_grad(cuda_ctx *c, float *dbias, const float *dout, int N, int OC)
{
    const float one = 1;
    const float *e = dbias ? ones(c, N) : NULL;
    if (dbias && e)
        keep_blas(c,
                  cublasSgemv(c->blas, CUBLAS_OP_N, OC, N, &one, dout, OC, e, 1, &one, dbias, 1));
}

/* In GPT2_BF16, from bf16 d16 (the output's gradient) and x16 (the input), accumulated in
 * fp32: dw[OC,C] (of type dwt: fp32, or bf16 rounded once) += d16^T @ x16; dbias (fp32) += the
 * column sums of d16 (a GEMM with a vector of bf16 ones: exact). */
static void dw_bf16(cuda_ctx *c, void *dw, cudaDataType dwt, float *dbias,
                    const unsigned short *d16, const unsigned short *x16, int N, int C, int OC)
{
    gemm_bf16_to(c, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, x16, C, d16, OC, 1.0f, dw, dwt, C);
    const unsigned short *e = dbias ? ones16(c, N) : NULL;
    if (e)
        gemm_bf16_to(c, CUBLAS_OP_N, CUBLAS_OP_N, OC, 1, N, d16, OC, e, N, 1.0f, dbias, CUDA_R_32F,
                     OC);
}

/* In GPT2_BF16, from all-bf16 inputs (w16 the weights): dinp[N,C] (bf16) += d16 @ w16,
 * rounded once, and dw_bf16. */
static void mm_b_bf16(cuda_ctx *c, float *dinp, void *dw, cudaDataType dwt, float *dbias,
                      const unsigned short *d16, const unsigned short *x16,
                      const unsigned short *w16, int N, int C, int OC)
{
    if (!w16 || !d16)
        return; /* a cast's scratch was refused: kept */
    gemm_bf16_to(c, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, w16, C, d16, OC, 1.0f, dinp, CUDA_R_16BF,
                 C);
    dw_bf16(c, dw, dwt, dbias, d16, x16, N, C, OC);
}

/* In fp32 (or TF32): dw[OC,C] += dout^T @ inp, dbias += the column sums of dout. */
static void dw_f32(cuda_ctx *c, float *dw, float *dbias, const float *dout, const float *inp, int N,
                   int C, int OC)
{
    const float one = 1;
    keep_blas(c, cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C, dout, OC,
                             &one, dw, C));
    bias_grad(c, dbias, dout, N, OC);
}

static void mm_b(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                 const float *inp, const float *w, int N, int C, int OC)
{
    cuda_ctx *c = ctx;
    const float one = 1;
    if (c->precision == GPT2_BF16) {
        mm_b_bf16(c, dinp, dw, CUDA_R_32F, dbias, CA16(dout), CA16(inp),
                  bf16_of(c, 0, w, (size_t)OC * C), N, C, OC);
        return;
    }
    keep_blas(c, cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, w, C, dout, OC,
                             &one, dinp, C));
    dw_f32(c, dw, dbias, dout, inp, N, C, OC);
}

static void mm_b_w16(void *ctx, float *dinp, unsigned short *dw, float *dbias, const float *dout,
                     const float *inp, const unsigned short *w, int N, int C, int OC)
{
    mm_b_bf16(ctx, dinp, dw, CUDA_R_16BF, dbias, CA16(dout), CA16(inp), w, N, C, OC);
}

/* GPT2_BF16's LM head backward: the fp32 logits' gradient cast to bf16 for the GEMMs (the
 * one activation-sized cast left), dinp in bf16, dwte in fp32. */
static void logits_b(void *ctx, float *dinp, float *dw, const float *dlogits, const float *inp,
                     const float *w, int N, int C, int V)
{
    cuda_ctx *c = ctx;
    const unsigned short *w16 = bf16_of(c, 0, w, (size_t)V * C);
    mm_b_bf16(c, dinp, dw, CUDA_R_32F, NULL, bf16_of(c, 2, dlogits, (size_t)N * V), CA16(inp), w16,
              N, C, V);
}

/* ---- the MLP's GELU in the GEMMs' epilogues (cuBLASLt, gpt2_matmul_lt.h) ---- */

/* The types of the fused matmuls: GPT2_BF16 reads and writes bf16 activations with the fp32
 * biases and their gradients as they are (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), so a bias is
 * no longer rounded to bf16 on the way; TF32 and fp32 are fp32 throughout, TF32 reading the
 * inputs as the cuBLAS handle's TF32 math mode does. */
static gpt2_lt_types lt_types(const cuda_ctx *c)
{
    gpt2_lt_dtype act = c->precision == GPT2_BF16 ? GPT2_LT_BF16 : GPT2_LT_F32;
    return (gpt2_lt_types){act, act, GPT2_LT_F32, c->precision == GPT2_TF32};
}

/* The weights as the fused GEMMs read them: as they are, or (fp32 in GPT2_BF16) cast to bf16
 * in scratch slot 0; NULL when that scratch was refused (kept). */
static const void *lt_weights(cuda_ctx *c, const float *w, int w16, size_t n)
{
    return c->precision == GPT2_BF16 && !w16 ? (const void *)bf16_of(c, 0, w, n) : w;
}

/* fc: pre = inp @ w^T + bias and out = gelu(pre) in one GEMM (_GELU_AUX_BIAS). */
static void mm_gelu_f(void *ctx, float *out, float *pre, const float *inp, const float *w, int w16,
                      const float *bias, int N, int C, int OC)
{
    cuda_ctx *c = ctx;
    gpt2_lt_types t = lt_types(c);
    const void *wm = lt_weights(c, w, w16, (size_t)OC * C);
    if (wm)
        keep_lt(c, gpt2_lt_forward(c->lt, &t, out, pre, inp, wm, bias, N, C, OC, 1));
}

/* fcproj's backward with GELU's: dinp = (dout @ w) * gelu'(pre_in) in one GEMM (_DGELU); dw
 * and dbias as matmul_backward adds them (cuBLASLt's _BGRADB writes the bias gradient, which
 * must add to what earlier micro-steps left there). */
static void mm_dgelu_b(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                       const float *inp, const float *w, int w16, const float *pre_in, int N, int C,
                       int OC)
{
    cuda_ctx *c = ctx;
    gpt2_lt_types t = lt_types(c);
    const void *wm = lt_weights(c, w, w16, (size_t)OC * C);
    if (!wm)
        return;
    keep_lt(c, gpt2_lt_backward(c->lt, &t, dinp, NULL, NULL, dout, inp, wm, pre_in, N, C, OC, 0));
    if (c->precision != GPT2_BF16)
        dw_f32(c, dw, dbias, dout, inp, N, C, OC);
    else
        dw_bf16(c, dw, w16 ? CUDA_R_16BF : CUDA_R_32F, dbias, CA16(dout), CA16(inp), N, C, OC);
}

/* ---- attention: fused (gpt2_attention.cu) for the head sizes it takes, else cuBLAS's
 * batched GEMMs around row kernels (gpt2_attention.h) ---- */

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T (as mm_f maps it). */
static void e_bmm(void *ctx, int ta, int tb, int m, int n, int k, const float *A, int lda,
                  long long sa, const float *B, int ldb, long long sb, float beta, float *C,
                  int ldc, long long sc, int batch)
{
    cuda_ctx *c = ctx;
    const float one = 1;
    keep_blas(c, cublasSgemmStridedBatched(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, B, ldb,
                                           sb, A, lda, sa, &beta, C, ldc, sc, batch));
}
static void e_gather(void *ctx, float *dst, const float *src, int B, int T, int NH, int hs,
                     int stride, int off)
{
    keep(ctx, gpt2_cuda_heads_gather(dst, src, B, T, NH, hs, stride, off, S(ctx)));
}
static void e_scatter(void *ctx, float *dst, const float *src, int B, int T, int NH, int hs,
                      int stride, int off, int add)
{
    keep(ctx, gpt2_cuda_heads_scatter(dst, src, B, T, NH, hs, stride, off, add, S(ctx)));
}
static void e_softmax_f(void *ctx, float *att, int rows, int T, float scale)
{
    keep(ctx, gpt2_cuda_softmax_forward(att, rows, T, scale, S(ctx)));
}
static void e_softmax_b(void *ctx, float *d, const float *att, int rows, int T, float scale)
{
    keep(ctx, gpt2_cuda_softmax_backward(d, att, rows, T, scale, S(ctx)));
}

/* The scratch of an attention pass. */
static float *att_scratch(cuda_ctx *c, int B, int T, int C, int NH)
{
    return grow(c, &c->att_scratch, gpt2_attention_scratch_floats(B, T, C, NH) * sizeof(float));
}

static gpt2_att_engine engine(cuda_ctx *c)
{
    return (gpt2_att_engine){c, e_bmm, e_gather, e_scatter, e_softmax_f, e_softmax_b};
}

/* The fused attention (gpt2_attention.cu) where it takes the head size: att holds each row's
 * logsumexp (att_keep GPT2_ATT_LSE); else the GEMM path above, att the softmax. */
static int fused(int C, int NH) { return C % NH == 0 && gpt2_flash_head_size_ok(C / NH); }

/* bf16 activations with a head size the fused attention does not take: kept as the ops'
 * error (the GEMM path is fp32). */
static int unfused16(cuda_ctx *c, int C, int NH)
{
    if (!c->act16 || fused(C, NH) || c->error)
        return c->act16 && !fused(C, NH);
    c->error = (int)cudaErrorInvalidValue;
    snprintf(c->what, sizeof c->what,
             "bf16 activations need the fused attention's head sizes (multiples of 16 up to 128), "
             "not %d: use --precision tf32",
             NH > 0 ? C / NH : C);
    return 1;
}

static void att_f(void *ctx, float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    if (unfused16(ctx, C, NH))
        return;
    if (ACT16(ctx)) {
        keep(ctx, gpt2_cuda_flash_forward_bf16(A16(out), att, CA16(qkv), B, T, C, NH, S(ctx)));
        return;
    }
    if (fused(C, NH)) {
        keep(ctx, gpt2_cuda_flash_forward(out, att, qkv, B, T, C, NH, S(ctx)));
        return;
    }
    float *scratch = att_scratch(ctx, B, T, C, NH);
    gpt2_att_engine e = engine(ctx);
    if (scratch) /* else kept: the step fails */
        gpt2_attention_forward(&e, scratch, out, att, qkv, B, T, C, NH);
}
static void att_b(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                  const float *att, int B, int T, int C, int NH)
{
    cuda_ctx *c = ctx;
    if (unfused16(c, C, NH))
        return;
    if (fused(C, NH)) {
        float *dsum =
            grow(c, &c->att_scratch, gpt2_cuda_flash_backward_scratch(B, T, NH) * sizeof(float));
        if (dsum && c->act16)
            keep(c, gpt2_cuda_flash_backward_bf16(A16(dqkv), CA16(dout), CA16(qkv), CA16(out), att,
                                                  B, T, C, NH, dsum, S(ctx)));
        else if (dsum)
            keep(c, gpt2_cuda_flash_backward(dqkv, dout, qkv, out, att, B, T, C, NH, dsum, S(ctx)));
        return;
    }
    float *scratch = att_scratch(ctx, B, T, C, NH);
    gpt2_att_engine e = engine(ctx);
    if (scratch)
        gpt2_attention_backward(&e, scratch, dqkv, dout, qkv, att, B, T, C, NH);
}
static void gelu_f(void *ctx, float *out, const float *inp, long long n)
{
    keep(ctx, ACT16(ctx) ? gpt2_cuda_gelu_forward_bf16(A16(out), CA16(inp), n, S(ctx))
                         : gpt2_cuda_gelu_forward(out, inp, n, S(ctx)));
}
static void gelu_b(void *ctx, float *dinp, const float *inp, const float *dout, long long n)
{
    keep(ctx, ACT16(ctx) ? gpt2_cuda_gelu_backward_bf16(A16(dinp), CA16(inp), CA16(dout), n, S(ctx))
                         : gpt2_cuda_gelu_backward(dinp, inp, dout, n, S(ctx)));
}

static void widen_f(void *ctx, float *dst, const unsigned short *src, long long n)
{
    keep(ctx, gpt2_cuda_bf16_widen(dst, src, n, S(ctx)));
}
static void narrow_f(void *ctx, unsigned short *dst, const float *src, long long n)
{
    keep(ctx, gpt2_cuda_bf16_narrow_add(dst, src, n, S(ctx)));
}

static float xent_f(void *ctx, float *probs, const float *logits, const int *targets, int N, int V)
{
    cuda_ctx *c = ctx;
    if (N > c->cap) { /* pinned: the losses' download is a DMA, not a staged copy */
        cudaFree(c->losses);
        cudaFreeHost(c->host_losses);
        c->losses = NULL, c->host_losses = NULL;
        keep(c, allocated(cudaMallocHost((void **)&c->host_losses, sizeof(double) * (size_t)N)));
        keep(c, allocated(cudaMalloc((void **)&c->losses, sizeof(double) * (size_t)N)));
        c->cap = c->losses && c->host_losses ? N : 0;
        if (!c->cap)
            return NAN;
    }
    keep(c, gpt2_cuda_crossentropy_forward(probs, c->losses, logits, targets, N, V, c->stream));
    keep(c, (int)cudaMemcpyAsync(c->host_losses, c->losses, sizeof(double) * (size_t)N,
                                 cudaMemcpyDeviceToHost, c->stream));
    keep(c, (int)cudaStreamSynchronize(c->stream));
    double loss = 0;
    for (int n = 0; n < N; n++) /* in row order, as the CPU kernel adds them */
        loss += c->host_losses[n];
    return (float)(loss / N);
}

static void xent_b(void *ctx, float *dlogits, const float *probs, const int *targets, int N, int V)
{
    keep(ctx, gpt2_cuda_crossentropy_backward(dlogits, probs, targets, N, V, S(ctx)));
}

int gpt2_ops_cuda_create(gpt2_ops *out, void *stream, int device, gpt2_precision p, char *why,
                         size_t len)
{
    cudaError_t r = device >= 0 ? cudaSetDevice(device) : cudaSuccess;
    if (r != cudaSuccess) {
        snprintf(why, len, "cudaSetDevice(%d): %s", device, cudaGetErrorString(r));
        return -1;
    }
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, len, "out of host memory");
        return -1;
    }
    c->stream = (cudaStream_t)stream;
    c->precision = p;
    c->act16 = p == GPT2_BF16;
    cublasStatus_t s = cublasCreate(&c->blas);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetStream(c->blas, c->stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetMathMode(c->blas,
                              p == GPT2_FP32 ? CUBLAS_DEFAULT_MATH : CUBLAS_TF32_TENSOR_OP_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, len, "cuBLAS: status %d (is a GPU usable?)", (int)s);
        if (c->blas)
            cublasDestroy(c->blas);
        free(c);
        return -1;
    }
    /* 32 MiB of workspace lets cuBLASLt pick its fast kernels on Hopper */
    if (gpt2_lt_create(&c->lt, c->stream, (size_t)32 << 20, why, len) != 0) {
        cublasDestroy(c->blas);
        free(c);
        return -1;
    }
    *out = (gpt2_ops){
        .ctx = c,
        .alloc = g_alloc,
        .free = g_free,
        .upload = g_upload,
        .copy = g_copy,
        .zero = g_zero,
        .encoder_forward = enc_f,
        .encoder_backward = enc_b,
        .layernorm_forward = ln_f,
        .residual_layernorm_forward = res_ln_f,
        .layernorm_backward = ln_b,
        .matmul_forward = mm_f,
        .matmul_backward = mm_b,
        .matmul_forward_w16 = p == GPT2_BF16 ? mm_f_w16 : NULL,
        .matmul_backward_w16 = p == GPT2_BF16 ? mm_b_w16 : NULL,
        .logits_forward = p == GPT2_BF16 ? logits_f : NULL,
        .logits_backward = p == GPT2_BF16 ? logits_b : NULL,
        .matmul_gelu_forward = mm_gelu_f,
        .matmul_dgelu_backward = mm_dgelu_b,
        .attention_forward = att_f,
        .attention_backward = att_b,
        .gelu_forward = gelu_f,
        .gelu_backward = gelu_b,
        .bf16_widen = widen_f,
        .bf16_narrow_add = narrow_f,
        .crossentropy_forward = xent_f,
        .crossentropy_backward = xent_b,
        .status = g_status,
        .status_text = g_status_text,
        .att_keep = GPT2_ATT_LSE,
        .act_bytes = p == GPT2_BF16 ? 2 : 4,
    };
    return 0;
}

void gpt2_ops_cuda_destroy(gpt2_ops *ops)
{
    cuda_ctx *c = ops->ctx;
    if (!c)
        return;
    cudaStreamSynchronize(c->stream);
    cudaFree(c->losses);
    cudaFree(c->ones.p);
    cudaFree(c->ones16.p);
    cudaFree(c->att_scratch.p);
    cudaFree(c->ln_scratch.p);
    cudaFree(c->enc_scratch.p);
    for (int k = 0; k < 3; k++)
        cudaFree(c->bf[k].p);
    cudaFreeHost(c->host_losses);
    for (int k = 0; k < 2; k++) {
        cudaFreeHost(c->up[k].p);
        if (c->up[k].copied)
            cudaEventDestroy(c->up[k].copied);
    }
    gpt2_lt_destroy(c->lt);
    cublasDestroy(c->blas);
    free(c);
    ops->ctx = NULL;
}

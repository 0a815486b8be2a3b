/* SPDX-License-Identifier: MIT */
/* The GPT-2 layers' matmuls through cuBLASLt, with the bias and GELU fused into the GEMM's
 * epilogue: forward out = gelu(inp @ w^T + bias) writing the pre-GELU values for the backward
 * (CUBLASLT_EPILOGUE_GELU_AUX_BIAS), or out = inp @ w^T + bias (_BIAS); backward dinp = (dout @
 * w) * gelu'(pre) (_DGELU: the gradient of the pre-GELU input of the layer whose input was
 * gelu(pre)), dw (+)= dout^T @ inp with dbias = the column sums of dout (_BGRADB). Row-major
 * tensors as the GPT-2 ops lay them out (llm.c's convention): inp [N, C], w [OC, C], bias [OC],
 * out and pre [N, OC]. A call's element types are a gpt2_lt_types: fp32 throughout, or bf16
 * inputs with bf16 (or fp32) outputs and an fp32 or bf16 bias (bias gradient); the pre-GELU
 * values are always of the output's type (cuBLASLt's GELU aux). The GEMM accumulates in fp32
 * (CUBLAS_COMPUTE_32F; _FAST_TF32 when asked, fp32 inputs read as TF32) and rounds once to a
 * bf16 output; the bias is added in fp32 before that rounding (an fp32 bias is not rounded to
 * bf16 on the way). The GELU is the tanh approximation (gpt2_rows.h's
 * gelu_elem_forward, llm.c's). Calls are queued on the stream given at create; none waits for
 * the device. On the CPU stand-in (ZT_CUDA_FAKE) cudasim/src/cublaslt.cc computes them. */
#ifndef ZT_GPT2_MATMUL_LT_H
#define ZT_GPT2_MATMUL_LT_H

#include <stddef.h>

typedef enum gpt2_lt_dtype { GPT2_LT_F32 = 0, GPT2_LT_BF16 = 1 } gpt2_lt_dtype;

/* The element types of a call: ab of A and B (inp, w, dout), d of C and D (out, dinp, dw) and
 * of the pre-GELU values, bias of the bias and the bias gradient
 * (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE). cuBLASLt takes fp32 throughout, or bf16 ab with bf16
 * or fp32 d, the bias of d's type or fp32; tf32 (fp32 only) reads A and B as TF32. Any other
 * combination fails with CUBLAS_STATUS_NOT_SUPPORTED (the stand-in refuses it as a GPU
 * does). */
typedef struct gpt2_lt_types {
    gpt2_lt_dtype ab, d, bias;
    int tf32;
} gpt2_lt_types;

typedef struct gpt2_lt gpt2_lt;

/* A cuBLASLt handle whose calls go on `stream` (a cudaStream_t; NULL: the default stream) with
 * a device workspace of workspace_bytes (0: none; 32 MiB lets cuBLASLt pick its fast kernels
 * on Hopper). 0, or a cuBLAS/CUDA status with the message in msg. */
int gpt2_lt_create(gpt2_lt **out, void *stream, size_t workspace_bytes, char *msg, size_t len);
void gpt2_lt_destroy(gpt2_lt *lt);

/* The first failure's message ("" when none): which call, which status. */
const char *gpt2_lt_error(const gpt2_lt *lt);

/* out[N, OC] = inp[N, C] @ w[OC, C]^T + bias[OC] (bias NULL: none); with gelu, out = gelu of
 * that and pre[N, OC] = the value before the GELU (pre NULL: not kept). 0 or a cublasStatus_t
 * (kept for gpt2_lt_error). */
int gpt2_lt_forward(gpt2_lt *lt, const gpt2_lt_types *t, void *out, void *pre, const void *inp,
                    const void *w, const void *bias, int N, int C, int OC, int gelu);

/* The backward of gpt2_lt_forward without GELU, for the layer whose input inp was gelu(pre_in)
 * when pre_in is given:
 *  - dinp[N, C] = dout[N, OC] @ w[OC, C], times gelu'(pre_in[N, C]) when pre_in is not NULL
 *    (the gradient of the pre-GELU values); written, not added (dinp NULL: skipped);
 *  - dw[OC, C] = dout^T @ inp[N, C], added to dw when accumulate (dw NULL: skipped);
 *  - dbias[OC] = the sums of dout over N, written (not added: where gradients accumulate over
 *    micro-steps, pass a scratch and add it); only with dw (the same GEMM's epilogue).
 * 0 or a cublasStatus_t. */
int gpt2_lt_backward(gpt2_lt *lt, const gpt2_lt_types *t, void *dinp, void *dw, void *dbias,
                     const void *dout, const void *inp, const void *w, const void *pre_in, int N,
                     int C, int OC, int accumulate);

#endif

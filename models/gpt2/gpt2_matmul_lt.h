/* SPDX-License-Identifier: MIT */
/* The GPT-2 layers' matmuls through cuBLASLt, with the bias and GELU fused into the GEMM's
 * epilogue: forward out = gelu(inp @ w^T + bias) writing the pre-GELU values for the backward
 * (CUBLASLT_EPILOGUE_GELU_AUX_BIAS), or out = inp @ w^T + bias (_BIAS); backward dinp = (dout @
 * w) * gelu'(pre) (_DGELU: the gradient of the pre-GELU input of the layer whose input was
 * gelu(pre)), dw (+)= dout^T @ inp with dbias = the column sums of dout (_BGRADB). Row-major
 * tensors as the GPT-2 ops lay them out (llm.c's convention): inp [N, C], w [OC, C], bias [OC],
 * out and pre [N, OC]. Every tensor of a call has one element type, fp32 or bf16 (the bias,
 * pre-GELU values and gradients too); the GEMM accumulates in fp32 (CUBLAS_COMPUTE_32F, no
 * TF32) and rounds once to a bf16 output. The GELU is the tanh approximation (gpt2_rows.h's
 * gelu_elem_forward, llm.c's). Calls are queued on the stream given at create; none waits for
 * the device. On the CPU stand-in (ZT_CUDA_FAKE) cudasim/src/cublaslt.cc computes them. */
#ifndef ZT_GPT2_MATMUL_LT_H
#define ZT_GPT2_MATMUL_LT_H

#include <stddef.h>

typedef enum gpt2_lt_dtype { GPT2_LT_F32 = 0, GPT2_LT_BF16 = 1 } gpt2_lt_dtype;

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
int gpt2_lt_forward(gpt2_lt *lt, gpt2_lt_dtype t, void *out, void *pre, const void *inp,
                    const void *w, const void *bias, int N, int C, int OC, int gelu);

/* The backward of gpt2_lt_forward without GELU, for the layer whose input inp was gelu(pre_in)
 * when pre_in is given:
 *  - dinp[N, C] = dout[N, OC] @ w[OC, C], times gelu'(pre_in[N, C]) when pre_in is not NULL
 *    (the gradient of the pre-GELU values); written, not added (dinp NULL: skipped);
 *  - dw[OC, C] = dout^T @ inp[N, C], added to dw when accumulate (dw NULL: skipped);
 *  - dbias[OC] = the sums of dout over N, written (not added: where gradients accumulate over
 *    micro-steps, pass a scratch and add it); only with dw (the same GEMM's epilogue).
 * 0 or a cublasStatus_t. */
int gpt2_lt_backward(gpt2_lt *lt, gpt2_lt_dtype t, void *dinp, void *dw, void *dbias,
                     const void *dout, const void *inp, const void *w, const void *pre_in, int N,
                     int C, int OC, int accumulate);

#endif

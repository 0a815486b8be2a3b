/* SPDX-License-Identifier: MIT */
/* The GPT-2 matmuls with cuBLASLt epilogues (gpt2_matmul_lt.h). A row-major [rows, cols]
 * tensor is a column-major [cols, rows] matrix, so each call is the column-major GEMM
 * D[m, n] = op(A)[m, k] op(B)[k, n] the GPT-2 ops make with cuBLAS (gpt2_ops_cuda.c):
 *  forward  D = out [OC, N]  = op(w [C, OC]) = w^T, times inp [C, N]
 *  dinp     D = dinp [C, N]  = w [C, OC] times dout [OC, N]
 *  dw       D = dw [C, OC]   = inp [C, N] times op(dout [OC, N]) = dout^T
 * (column-major shapes), so the bias runs along D's rows (forward: _BIAS), the pre-GELU values
 * have D's shape (aux, leading dimension OC or C), and dbias runs along dw's GEMM's columns, a
 * sum over its k = N (_BGRADB). */
#include "gpt2_matmul_lt.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct gpt2_lt {
    cublasLtHandle_t handle;
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
    char error[256];
};

static cudaDataType type_of(gpt2_lt_dtype t)
{
    return t == GPT2_LT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Keeps the first failure's message; returns s. */
static int keep(gpt2_lt *lt, const char *what, cublasStatus_t s)
{
    if (s != CUBLAS_STATUS_SUCCESS && !lt->error[0])
        snprintf(lt->error, sizeof lt->error, "%s: cuBLASLt status %d (%s)", what, (int)s,
                 cublasLtGetStatusString(s));
    return (int)s;
}

int gpt2_lt_create(gpt2_lt **out, void *stream, size_t workspace_bytes, char *msg, size_t len)
{
    gpt2_lt *lt = calloc(1, sizeof *lt);
    *out = NULL;
    if (!lt) {
        snprintf(msg, len, "out of host memory for the cuBLASLt context");
        return (int)CUBLAS_STATUS_ALLOC_FAILED;
    }
    lt->stream = (cudaStream_t)stream;
    cublasStatus_t s = cublasLtCreate(&lt->handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(msg, len, "cublasLtCreate: status %d (%s)", (int)s, cublasLtGetStatusString(s));
        free(lt);
        return (int)s;
    }
    if (workspace_bytes) {
        cudaError_t e = cudaMalloc(&lt->workspace, workspace_bytes);
        if (e != cudaSuccess) {
            snprintf(msg, len, "the cuBLASLt workspace of %zu bytes: %s", workspace_bytes,
                     cudaGetErrorString(e));
            cublasLtDestroy(lt->handle);
            free(lt);
            return (int)e;
        }
        lt->workspace_bytes = workspace_bytes;
    }
    *out = lt;
    return 0;
}

void gpt2_lt_destroy(gpt2_lt *lt)
{
    if (!lt)
        return;
    cudaFree(lt->workspace);
    cublasLtDestroy(lt->handle);
    free(lt);
}

const char *gpt2_lt_error(const gpt2_lt *lt) { return lt->error; }

/* One column-major operand: rows x cols, leading dimension rows. */
typedef struct operand {
    const void *p;
    int rows, cols;
    cublasOperation_t op;
} operand;

/* What an epilogue reads or writes besides D. */
typedef struct epilogue {
    cublasLtEpilogue_t kind;
    const void *bias; /* the bias, or the bias gradient's destination */
    const void *aux;  /* pre-GELU values, leading dimension aux_ld */
    int64_t aux_ld;
} epilogue;

static cublasStatus_t set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v,
                          size_t n)
{
    return cublasLtMatmulDescSetAttribute(d, a, v, n);
}

/* The descriptor of D = op(A) op(B) with the epilogue e, its bias of type bias_type. */
static cublasStatus_t describe(cublasLtMatmulDesc_t d, const operand *a, const operand *b,
                               const epilogue *e, cudaDataType bias_type)
{
    int32_t bt = (int32_t)bias_type;
    cublasStatus_t s = set(d, CUBLASLT_MATMUL_DESC_TRANSA, &a->op, sizeof a->op);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = set(d, CUBLASLT_MATMUL_DESC_TRANSB, &b->op, sizeof b->op);
    if (s == CUBLAS_STATUS_SUCCESS && e->kind != CUBLASLT_EPILOGUE_DEFAULT)
        s = set(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e->kind, sizeof e->kind);
    if (s == CUBLAS_STATUS_SUCCESS && e->bias)
        s = set(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e->bias, sizeof e->bias);
    if (s == CUBLAS_STATUS_SUCCESS && e->bias)
        s = set(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    if (s == CUBLAS_STATUS_SUCCESS && e->aux)
        s = set(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e->aux, sizeof e->aux);
    if (s == CUBLAS_STATUS_SUCCESS && e->aux)
        s = set(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &e->aux_ld, sizeof e->aux_ld);
    return s;
}

/* D[m, n] = op(A) op(B) (+ D when accumulate), then the epilogue; the types t's. */
static int gemm(gpt2_lt *lt, const char *what, const gpt2_lt_types *t, const operand *a,
                const operand *b, void *D, int m, int n, int accumulate, const epilogue *e)
{
    cudaDataType tab = type_of(t->ab), td = type_of(t->d);
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasStatus_t s = cublasLtMatmulDescCreate(
        &desc, t->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = describe(desc, a, b, e, type_of(t->bias));
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&la, tab, (uint64_t)a->rows, (uint64_t)a->cols, a->rows);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lb, tab, (uint64_t)b->rows, (uint64_t)b->cols, b->rows);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&ld, td, (uint64_t)m, (uint64_t)n, m);
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmul(lt->handle, desc, &one, a->p, la, b->p, lb, &beta, D, ld, D, ld, NULL,
                           lt->workspace, lt->workspace_bytes, lt->stream);
    if (ld)
        cublasLtMatrixLayoutDestroy(ld);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (desc)
        cublasLtMatmulDescDestroy(desc);
    return keep(lt, what, s);
}

static cublasLtEpilogue_t forward_epilogue(int bias, int gelu, int pre)
{
    if (!gelu)
        return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (pre)
        return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
}

int gpt2_lt_forward(gpt2_lt *lt, const gpt2_lt_types *t, void *out, void *pre, const void *inp,
                    const void *w, const void *bias, int N, int C, int OC, int gelu)
{
    operand a = {w, C, OC, CUBLAS_OP_T}, b = {inp, C, N, CUBLAS_OP_N};
    epilogue e = {forward_epilogue(bias != NULL, gelu, pre != NULL), bias, gelu ? pre : NULL, OC};
    return gemm(lt, "the fused matmul forward", t, &a, &b, out, OC, N, 0, &e);
}

int gpt2_lt_backward(gpt2_lt *lt, const gpt2_lt_types *t, void *dinp, void *dw, void *dbias,
                     const void *dout, const void *inp, const void *w, const void *pre_in, int N,
                     int C, int OC, int accumulate)
{
    int st = 0;
    if (dinp) {
        operand a = {w, C, OC, CUBLAS_OP_N}, b = {dout, OC, N, CUBLAS_OP_N};
        epilogue e = {pre_in ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, NULL, pre_in,
                      C};
        st = gemm(lt, "the matmul backward (dinp)", t, &a, &b, dinp, C, N, 0, &e);
    }
    if (dw && st == 0) {
        operand a = {inp, C, N, CUBLAS_OP_N}, b = {dout, OC, N, CUBLAS_OP_T};
        epilogue e = {dbias ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT, dbias, NULL, 0};
        st = gemm(lt, "the matmul backward (dw, dbias)", t, &a, &b, dw, C, OC, accumulate, &e);
    }
    return st;
}

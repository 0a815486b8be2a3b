/* SPDX-License-Identifier: MIT */
/* libztier-gpt2-cuda.so's entry point (gpt2_cuda_module.h): the CUDA ops and a cuBLAS SGEMM. */
#include "gpt2_cuda_module.h"

#include <cublas_v2.h>

static void *blas_create(void *stream)
{
    cublasHandle_t h = NULL;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
        return NULL;
    if (cublasSetStream(h, (cudaStream_t)stream) != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h);
        return NULL;
    }
    return h;
}

static int blas_sgemm(void *blas, int ta, int tb, int m, int n, int k, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    return cublasSgemm((cublasHandle_t)blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                       tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, lda, B, ldb, &beta, C,
                       ldc) == CUBLAS_STATUS_SUCCESS
               ? 0
               : -1;
}

static void blas_destroy(void *blas)
{
    if (blas)
        cublasDestroy((cublasHandle_t)blas);
}

const gpt2_cuda_module *ztier_gpt2_cuda_module_v1(void)
{
    static const gpt2_cuda_module m = {
        GPT2_CUDA_MODULE_ABI, gpt2_ops_cuda_create, gpt2_ops_cuda_destroy,
        blas_create,          blas_sgemm,           blas_destroy};
    return &m;
}

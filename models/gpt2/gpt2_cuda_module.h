/* SPDX-License-Identifier: MIT */
/* The GPT-2 CUDA ops as a module: libztier-gpt2-cuda.so holds gpt2_ops_cuda.c, its kernels
 * and cuBLAS/cuBLASLt, and a program that links gpt2_cuda_load.c instead opens it with dlopen
 * the first time it creates the CUDA ops. cuBLAS and cuBLASLt cost every process that links
 * them 0.07-0.12 s and 210 MB of resident memory at start (docs/benchmarks.md): a CPU run of
 * the trainer, and every `ztier` command, no longer pays that. The tests link the ops
 * directly (zt_gpt2_cuda). */
#ifndef GPT2_CUDA_MODULE_H
#define GPT2_CUDA_MODULE_H

#include "gpt2_ops.h"

#include <stdint.h>

/* Bumped whenever the table below or gpt2_ops changes shape: the loader refuses a module of
 * another value. */
#define GPT2_CUDA_MODULE_ABI 1

typedef struct gpt2_cuda_module {
    uint32_t abi;
    int (*ops_create)(gpt2_ops *out, void *stream, int device, gpt2_precision p, char *why,
                      size_t len);
    void (*ops_destroy)(gpt2_ops *ops);
    /* A cuBLAS handle on stream (a cudaStream_t); NULL on failure. */
    void *(*blas_create)(void *stream);
    /* C = alpha op(A) op(B) + beta C, column-major, on the handle's stream (cublasSgemm;
       ta, tb: 0 none, 1 transposed). 0, or -1. */
    int (*blas_sgemm)(void *blas, int ta, int tb, int m, int n, int k, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc);
    void (*blas_destroy)(void *blas);
} gpt2_cuda_module;

/* The module's one entry point (the build hides every other symbol). */
__attribute__((visibility("default"))) const gpt2_cuda_module *ztier_gpt2_cuda_module_v1(void);

/* The module, opened on first use (thread-safe): $ZT_GPT2_CUDA_MODULE, else beside the
 * program or in ../lib (an install), else where the build wrote it. NULL with why filled
 * (the paths tried and dlerror's text). */
const gpt2_cuda_module *gpt2_cuda_module_get(char *why, size_t len);

/* cuBLAS through the module (`ztier bench prefetch --backend cuda`'s matmuls). */
void *gpt2_cuda_blas_create(void *stream, char *why, size_t len);
int gpt2_cuda_blas_sgemm(void *blas, int ta, int tb, int m, int n, int k, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc);
void gpt2_cuda_blas_destroy(void *blas);

#endif

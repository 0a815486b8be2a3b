/* SPDX-License-Identifier: MIT */
/* C-callable launchers of the CUDA kernels the cuda device backend needs. Each queues its
 * kernel on `stream` (a cudaStream_t, on the calling thread's current device) and returns
 * the launch's cudaError_t as an int (0 = queued; errors while running show up at the next
 * synchronisation). All pointers are device memory; n counts elements. */
#ifndef ZT_RUNTIME_CUDA_KERNELS_H
#define ZT_RUNTIME_CUDA_KERNELS_H

#include "ztier.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = (dst_type)src[i]; bf16 and fp16 rounded to nearest even. */
int zt_cuda_cast(void *dst, zt_dtype dst_type, const void *src, zt_dtype src_type, size_t n,
                 void *stream);
/* x[i] *= alpha, computed in fp32. */
int zt_cuda_scale(void *x, zt_dtype type, float alpha, size_t n, void *stream);
/* *flag = 1 if any element is inf or nan (flag is device memory, left untouched otherwise). */
int zt_cuda_nonfinite(const void *x, zt_dtype type, size_t n, int *flag, void *stream);

/* ZeRO++ block quantization with the same definition (and bits) as core/quant.h:
 * one CUDA block per quantization block of `block` >= 1 elements, scale = max|x| / 127,
 * values rounded to nearest even. x is fp32/bf16/fp16; q holds n bytes, scales one float
 * per block. cudaErrorInvalidValue for block < 1. */
int zt_cuda_quant8(const void *x, zt_dtype type, size_t n, int block, signed char *q, float *scales,
                   void *stream);
/* out[i] = q[i] * scale of its block, written as `type`; cudaErrorInvalidValue for block < 1 */
int zt_cuda_dequant8(const signed char *q, const float *scales, size_t n, int block, void *out,
                     zt_dtype type, void *stream);

/* qgZ's int4: scales (max|x| / 7 per block), then q[(n + 1) / 2] packed (core/quant_elem.h);
 * and acc[i] += value[i] * scale of its block. The bits of core/quant.h's kernels. */
int zt_cuda_quant4(const float *x, size_t n, int block, unsigned char *q, float *scales,
                   void *stream);
int zt_cuda_dequant4_add(const unsigned char *q, const float *scales, size_t n, int block,
                         float *acc, void *stream);

/* acc[i] += (float)src[i] */
int zt_cuda_accumulate(float *acc, const void *src, zt_dtype src_type, size_t n, void *stream);
/* out[0] += sum of (x[i] * scale)^2 over finite products (double), out[1] += non-finite count;
 * parts: ZT_SUMSQ_SCRATCH_DOUBLES doubles for the blocks' partial sums, which are combined
 * in a fixed order (the same bits every run) */
int zt_cuda_sumsq(const float *x, size_t n, float scale, double *out, double *parts, void *stream);

/* The fused Adam/AdamW step (optimizer/adam.h) over n elements: master, m, v updated in
 * place, param_out (or NULL) receives the master rounded to param_dtype; the count of
 * non-finite scaled gradients is added to *nonfinite (device memory). Bitwise equal to the
 * CPU's scalar reference (the shared zt_adam_elem); a NaN's payload may differ. */
typedef struct zt_adam_consts zt_adam_consts;
int zt_cuda_adam(const zt_adam_consts *c, float *master, float *m, float *v, const void *grad,
                 zt_dtype grad_dtype, void *param_out, zt_dtype param_dtype, size_t n,
                 unsigned long long *nonfinite, void *stream);

#ifdef __cplusplus
}
#endif
#endif

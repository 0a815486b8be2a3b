/* C-callable launchers of the CUDA kernels the cuda device backend needs. Each queues its
 * kernel on `stream` (a cudaStream_t) and returns the launch's cudaError_t as an int. */
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

#ifdef __cplusplus
}
#endif
#endif

/* SPDX-License-Identifier: MIT */
/* One element of the fused Adam/AdamW update (the formulas are in optimizer/adam.h), written
 * once and compiled twice: by the C compiler for the scalar reference
 * (optimizer/adam_scalar.c, which CI tests bitwise against the SIMD kernels and against
 * double precision) and by nvcc for the cuda backend's kernel (device/
 * cuda_kernels.cu), where ZT_HD makes it __host__ __device__. It lives in core/ because both
 * the optimizer and the device backends use it.
 * Both builds must not contract other multiplies and adds into FMAs (-ffp-contract=off,
 * nvcc --fmad=false): every rounding is the one written here. */
#ifndef ZT_CORE_ADAM_ELEM_H
#define ZT_CORE_ADAM_ELEM_H

#ifdef __CUDACC__
#define ZT_HD __host__ __device__
#else
#define ZT_HD
#include <math.h>
#endif

/* Constants derived once per call from the hyper-parameters (zt_adam_consts_init). */
typedef struct zt_adam_consts {
    float beta1, beta2, one_minus_beta1, one_minus_beta2;
    float step_size, inv_sqrt_bc2, eps, decay, l2, grad_scale;
    int bf16_insn; /* AVX-512 kernel: round the bf16 copy with vcvtneps2bf16 (AVX512_BF16) */
} zt_adam_consts;

/* Updates *p, *m, *v with the raw gradient element; returns the scaled gradient (for the
 * non-finite count). */
static inline ZT_HD float zt_adam_elem(const zt_adam_consts *c, float grad, float *p, float *m,
                                       float *v)
{
    float g = grad * c->grad_scale;
    float gl = fmaf(c->l2, *p, g);
    float mm = fmaf(c->beta1, *m, c->one_minus_beta1 * gl);
    float vv = fmaf(c->beta2, *v, c->one_minus_beta2 * (gl * gl));
    float denom = fmaf(sqrtf(vv), c->inv_sqrt_bc2, c->eps);
    float pp = fmaf(-c->decay, *p, *p);
    *p = fmaf(-c->step_size, mm / denom, pp);
    *m = mm;
    *v = vv;
    return g;
}

#endif

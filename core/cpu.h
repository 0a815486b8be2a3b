/* SPDX-License-Identifier: MIT */
/* The instruction-set extensions of the CPU this process runs on, for the run-time choice
 * of SIMD kernels (Adam, quantization, conversions). */
#ifndef ZT_CORE_CPU_H
#define ZT_CORE_CPU_H

typedef enum zt_cpu_feature {
    ZT_CPU_AVX2_FMA_F16C, /* AVX2 with FMA and F16C */
    ZT_CPU_AVX512,        /* AVX-512 F, BW, VL, DQ */
    ZT_CPU_AVX512_BF16    /* AVX512_BF16 (vcvtneps2bf16) */
} zt_cpu_feature;

/* 1 when the CPU has the feature. */
int zt_cpu_has(zt_cpu_feature f);

#endif

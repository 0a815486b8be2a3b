/* SPDX-License-Identifier: MIT */
/* The per-element steps of ZeRO++ block quantization (core/quant.h), written once and
 * compiled twice: by the C compiler for the CPU's scalar reference (which CI tests bitwise
 * against the AVX2/AVX-512 kernels) and by nvcc for the cuda backend's kernels, where ZT_HD
 * makes them __host__ __device__. A block's scale is max|x| / 127 (int8) or / 7 (int4);
 * values are x * (1 / scale) rounded to nearest even and clamped; int4 values are packed
 * two per byte, element 2i in the low nibble. int4 carries gradients: a NaN counts as an
 * infinite magnitude in its block's max, so a block holding a NaN or an inf gets an
 * infinite scale, its values code 0 (a NaN product codes 0 too) and it dequantizes to NaN
 * throughout: a non-finite gradient is never quantized away, and the step's non-finite check
 * sees it after the reduction. */
#ifndef ZT_CORE_QUANT_ELEM_H
#define ZT_CORE_QUANT_ELEM_H

#include "core/adam_elem.h" /* ZT_HD */

#include <stdint.h>

/* 1 / scale, or 0 for a block of zeros (which then quantizes to zeros). */
static inline ZT_HD float zt_quant_inv(float scale) { return scale > 0 ? 1.0f / scale : 0.0f; }

static inline ZT_HD int8_t zt_quant8_value(float x, float inv)
{
    float v = nearbyintf(x * inv);
    return (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
}

/* |x| as an int4 block's max takes it (see the top). */
static inline ZT_HD float zt_quant4_abs(float x)
{
    float a = fabsf(x);
    return a == a ? a : INFINITY;
}

/* The 4-bit two's complement code of x (its low nibble); clamped before the conversion to
 * int, which is undefined for NaN and inf (x86 and GPUs differ there): NaN codes 0. */
static inline ZT_HD uint8_t zt_quant4_code(float x, float inv)
{
    float v = nearbyintf(x * inv);
    v = v > 7.0f ? 7.0f : v < -7.0f ? -7.0f : v == v ? v : 0.0f;
    return (uint8_t)((int)v & 0xf);
}

/* Packs element i's code (low nibble of byte i / 2 for even i, high for odd). Elements go in
 * increasing order: an even element starts its byte, so nothing needs zeroing first. */
static inline ZT_HD void zt_quant4_put(uint8_t *q, int64_t i, uint8_t code)
{
    q[i / 2] = (uint8_t)(i & 1 ? q[i / 2] | code << 4 : code);
}

/* Element i's value from its packed byte. */
static inline ZT_HD int zt_quant4_value(uint8_t byte, int64_t i)
{
    int v = (byte >> (4 * (i & 1))) & 0xf;
    return v >= 8 ? v - 16 : v; /* sign-extend the nibble */
}

#endif

/* SPDX-License-Identifier: MIT */
/* fp32 <-> bf16 / fp16 conversions on bit patterns (uint16_t holds a bf16 or fp16 value).
 * These scalar functions are the reference the SIMD kernels are tested against, and they
 * give the same bits as the x86 instructions (F16C vcvtps2ph/vcvtph2ps with round to nearest
 * even; AVX512_BF16 vcvtneps2bf16 except that it flushes subnormals, which these keep):
 *  - fp32 -> bf16: round to nearest even; a NaN stays NaN with the quiet bit set and the top
 *    of its payload kept; infinities stay; subnormals round like any other value.
 *  - fp32 -> fp16: IEEE 754 round to nearest even: overflow to inf, fp16 subnormals produced
 *    exactly, NaN quieted (sign | 0x7e00 | top 9 payload bits).
 *  - bf16/fp16 -> fp32: exact; an fp16 NaN comes back quieted.
 * Integer arithmetic only: independent of the MXCSR rounding mode and DAZ/FTZ. */
#ifndef ZT_CORE_CONVERT_H
#define ZT_CORE_CONVERT_H

#include "core/export.h"
#include "ztier.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Bytes of one element. */
static inline size_t zt_dtype_size(zt_dtype t) { return t == ZT_F32 ? 4 : 2; }

static inline uint32_t zt_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float zt_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float zt_bf16_to_f32(uint16_t h) { return zt_f32_from_bits((uint32_t)h << 16); }

static inline uint16_t zt_f32_to_bf16(float f)
{
    uint32_t u = zt_f32_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* carries into the exponent */
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

static inline float zt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or NaN (quieted) */
        return zt_f32_from_bits(sign | 0x7f800000u | (man ? 0x400000u | (man << 13) : 0));
    if (exp != 0)
        return zt_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    if (man == 0)
        return zt_f32_from_bits(sign);
    int shift = __builtin_clz(man) - 21; /* moves the leading 1 to bit 10 */
    return zt_f32_from_bits(sign | ((uint32_t)(113 - shift) << 23) |
                            (((man << shift) & 0x3ffu) << 13));
}

static inline uint16_t zt_f32_to_f16(float f)
{
    uint32_t u = zt_f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x1ffu));
    if (a >= 0x477ff000u) /* >= 65520 (halfway above the largest half): inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* a normal half (>= 2^-14): rebias, round the 13 dropped bits */
        uint32_t r = a - 0x38000000u;
        return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    uint32_t exp = a >> 23, shift = 126u - exp; /* half subnormal = mantissa >> shift */
    if (shift > 24)
        return (uint16_t)sign; /* below a quarter of the smallest subnormal */
    uint32_t man = (a & 0x7fffffu) | 0x800000u, h = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    h += rem > half || (rem == half && (h & 1u));
    return (uint16_t)(sign | h);
}

/* Element i of an array of type t, widened to fp32 (exact). */
static inline float zt_load_f32(const void *p, zt_dtype t, size_t i)
{
    if (t == ZT_BF16)
        return zt_bf16_to_f32(((const uint16_t *)p)[i]);
    if (t == ZT_F16)
        return zt_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

/* Stores x rounded to type t as element i of the array p. */
static inline void zt_store_f32(void *p, zt_dtype t, size_t i, float x)
{
    if (t == ZT_BF16)
        ((uint16_t *)p)[i] = zt_f32_to_bf16(x);
    else if (t == ZT_F16)
        ((uint16_t *)p)[i] = zt_f32_to_f16(x);
    else
        ((float *)p)[i] = x;
}

/* dst[i] = (dst_type)src[i] for n elements, with the rounding above. dst and src must not
 * overlap unless the types are equal (then it is a memmove). Synchronous, no allocation. */
ZT_MODULE_API void zt_convert_array(void *dst, zt_dtype dst_type, const void *src,
                                    zt_dtype src_type, size_t n);
/* x[i] *= alpha for n elements, computed in fp32 and rounded back for 16-bit types. */
void zt_scale_array(void *x, zt_dtype type, float alpha, size_t n);

#endif

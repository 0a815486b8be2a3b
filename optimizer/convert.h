/* fp32 <-> bf16 / fp16 conversions, round to nearest even. The scalar functions are the
 * reference the SIMD kernels are tested against. bf16 NaNs stay NaN (quieted); fp16 follows
 * IEEE 754 (overflow to inf, subnormals kept). */
#ifndef ZT_OPTIMIZER_CONVERT_H
#define ZT_OPTIMIZER_CONVERT_H

#include "ztier.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float zt_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t zt_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it NaN whatever the payload */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float zt_f16_to_f32(uint16_t h)
{
    _Float16 x;
    memcpy(&x, &h, sizeof x);
    return (float)x;
}

static inline uint16_t zt_f32_to_f16(float f)
{
    _Float16 x = (_Float16)f;
    uint16_t h;
    memcpy(&h, &x, sizeof h);
    return h;
}

/* dst[i] = (dst_type)src[i] for n elements; dst and src must not overlap unless equal types. */
void zt_convert_array(void *dst, zt_dtype dst_type, const void *src, zt_dtype src_type, size_t n);
/* x[i] *= alpha (computed in fp32, rounded back for 16-bit types). */
void zt_scale_array(void *x, zt_dtype type, float alpha, size_t n);

#endif

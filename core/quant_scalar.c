/* SPDX-License-Identifier: MIT */
/* Scalar reference block quantization (see quant.h), and the run-time choice of variant. */
#include "core/quant.h"
#include "core/cpu.h"
#include "core/convert.h"
#include "core/quant_elem.h"

#include <math.h>

static float load(const void *x, zt_dtype dt, int64_t i)
{
    if (dt == ZT_BF16)
        return zt_bf16_to_f32(((const uint16_t *)x)[i]);
    if (dt == ZT_F16)
        return zt_f16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

static void store(void *out, zt_dtype dt, int64_t i, float v)
{
    if (dt == ZT_BF16)
        ((uint16_t *)out)[i] = zt_f32_to_bf16(v);
    else if (dt == ZT_F16)
        ((uint16_t *)out)[i] = zt_f32_to_f16(v);
    else
        ((float *)out)[i] = v;
}

static float block_scale(const void *x, zt_dtype dt, int64_t lo, int64_t hi, float levels)
{
    float m = 0.0f;
    for (int64_t i = lo; i < hi; i++)
        m = fmaxf(m, fabsf(load(x, dt, i)));
    return m / levels;
}

void zt_quant8_scalar(const void *x, zt_dtype dt, int64_t n, int block, int8_t *q, float *scales)
{
    for (int64_t b = 0; b * block < n; b++) {
        int64_t lo = b * block, hi = lo + block < n ? lo + block : n;
        float s = block_scale(x, dt, lo, hi, 127.0f), inv = zt_quant_inv(s);
        scales[b] = s;
        for (int64_t i = lo; i < hi; i++)
            q[i] = zt_quant8_value(load(x, dt, i), inv);
    }
}

void zt_dequant8_scalar(const int8_t *q, const float *scales, int64_t n, int block, void *out,
                        zt_dtype dt)
{
    for (int64_t i = 0; i < n; i++)
        store(out, dt, i, (float)q[i] * scales[i / block]);
}

void zt_dequant8_add_scalar(const int8_t *q, const float *scales, int64_t n, int block, float *acc)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += (float)q[i] * scales[i / block];
}

void zt_quant4(const float *x, int64_t n, int block, uint8_t *q, float *scales)
{
    zt_quant_variant v = zt_quant_variant_best();
    (v == ZT_QUANT_AVX512 ? zt_quant4_avx512
     : v == ZT_QUANT_AVX2 ? zt_quant4_avx2
                          : zt_quant4_scalar)(x, n, block, q, scales);
}

void zt_dequant4_add(const uint8_t *q, const float *scales, int64_t n, int block, float *acc)
{
    zt_quant_variant v = zt_quant_variant_best();
    (v == ZT_QUANT_AVX512 ? zt_dequant4_add_avx512
     : v == ZT_QUANT_AVX2 ? zt_dequant4_add_avx2
                          : zt_dequant4_add_scalar)(q, scales, n, block, acc);
}

void zt_quant4_scalar(const float *x, int64_t n, int block, uint8_t *q, float *scales)
{
    for (int64_t b = 0; b * block < n; b++) {
        int64_t lo = b * block, hi = lo + block < n ? lo + block : n;
        float m = 0.0f;
        for (int64_t i = lo; i < hi; i++)
            m = fmaxf(m, zt_quant4_abs(x[i]));
        float s = m / 7.0f, inv = zt_quant_inv(s);
        scales[b] = s;
        for (int64_t i = lo; i < hi; i++)
            zt_quant4_put(q, i, zt_quant4_code(x[i], inv));
    }
}

void zt_dequant4_add_scalar(const uint8_t *q, const float *scales, int64_t n, int block, float *acc)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += (float)zt_quant4_value(q[i / 2], i) * scales[i / block];
}

int zt_quant_variant_supported(zt_quant_variant v)
{
    if (v == ZT_QUANT_AVX2)
        return zt_cpu_has(ZT_CPU_AVX2_FMA_F16C);
    return v == ZT_QUANT_SCALAR || zt_cpu_has(ZT_CPU_AVX512);
}

zt_quant_variant zt_quant_variant_best(void)
{
    return zt_quant_variant_supported(ZT_QUANT_AVX512) ? ZT_QUANT_AVX512 : ZT_QUANT_SCALAR;
}

const char *zt_quant_variant_name(zt_quant_variant v)
{
    return v == ZT_QUANT_AVX512 ? "avx512" : v == ZT_QUANT_AVX2 ? "avx2" : "scalar";
}

typedef struct quant_kernels {
    void (*quant)(const void *, zt_dtype, int64_t, int, int8_t *, float *);
    void (*dequant)(const int8_t *, const float *, int64_t, int, void *, zt_dtype);
    void (*dequant_add)(const int8_t *, const float *, int64_t, int, float *);
} quant_kernels;

static const quant_kernels kernels[] = {
    {zt_quant8_scalar, zt_dequant8_scalar, zt_dequant8_add_scalar},
    {zt_quant8_avx2, zt_dequant8_avx2, zt_dequant8_add_avx2},
    {zt_quant8_avx512, zt_dequant8_avx512, zt_dequant8_add_avx512},
};

void zt_quant8(zt_quant_variant v, const void *x, zt_dtype dt, int64_t n, int block, int8_t *q,
               float *scales)
{
    kernels[v].quant(x, dt, n, block, q, scales);
}

void zt_dequant8(zt_quant_variant v, const int8_t *q, const float *scales, int64_t n, int block,
                 void *out, zt_dtype dt)
{
    kernels[v].dequant(q, scales, n, block, out, dt);
}

void zt_dequant8_add(zt_quant_variant v, const int8_t *q, const float *scales, int64_t n, int block,
                     float *acc)
{
    kernels[v].dequant_add(q, scales, n, block, acc);
}

#include "optimizer/convert.h"

static float load(const void *p, zt_dtype t, size_t i)
{
    switch (t) {
    case ZT_BF16:
        return zt_bf16_to_f32(((const uint16_t *)p)[i]);
    case ZT_F16:
        return zt_f16_to_f32(((const uint16_t *)p)[i]);
    default:
        return ((const float *)p)[i];
    }
}

static void store(void *p, zt_dtype t, size_t i, float x)
{
    switch (t) {
    case ZT_BF16:
        ((uint16_t *)p)[i] = zt_f32_to_bf16(x);
        break;
    case ZT_F16:
        ((uint16_t *)p)[i] = zt_f32_to_f16(x);
        break;
    default:
        ((float *)p)[i] = x;
    }
}

void zt_convert_array(void *dst, zt_dtype dst_type, const void *src, zt_dtype src_type, size_t n)
{
    if (dst_type == src_type) {
        if (dst != src)
            memmove(dst, src, n * (dst_type == ZT_F32 ? 4 : 2));
        return;
    }
    for (size_t i = 0; i < n; i++)
        store(dst, dst_type, i, load(src, src_type, i));
}

void zt_scale_array(void *x, zt_dtype type, float alpha, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store(x, type, i, load(x, type, i) * alpha);
}

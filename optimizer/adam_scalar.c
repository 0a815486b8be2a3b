/* The scalar reference Adam/AdamW kernel: the definition the SIMD variants are tested
 * against (see adam.h for the update). */
#include "optimizer/adam.h"
#include "optimizer/convert.h"

#include <float.h>
#include <math.h>

static float load_grad(const void *g, zt_dtype t, int64_t i)
{
    if (t == ZT_BF16)
        return zt_bf16_to_f32(((const uint16_t *)g)[i]);
    if (t == ZT_F16)
        return zt_f16_to_f32(((const uint16_t *)g)[i]);
    return ((const float *)g)[i];
}

static void store_param(void *out, zt_dtype t, int64_t i, float p)
{
    if (t == ZT_BF16)
        ((uint16_t *)out)[i] = zt_f32_to_bf16(p);
    else if (t == ZT_F16)
        ((uint16_t *)out)[i] = zt_f32_to_f16(p);
    else
        ((float *)out)[i] = p;
}

int64_t zt_adam_step_scalar(const zt_adam_consts *c, const zt_adam_tensors *t)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < t->n; i++) {
        float p = t->master[i];
        float g = load_grad(t->grad, t->grad_dtype, i) * c->grad_scale;
        bad += !(fabsf(g) <= FLT_MAX);
        g = g + c->l2 * p;
        float m = c->beta1 * t->m[i] + c->one_minus_beta1 * g;
        float v = c->beta2 * t->v[i] + c->one_minus_beta2 * (g * g);
        float denom = sqrtf(v) * c->inv_sqrt_bc2 + c->eps;
        p = p - c->decay * p;
        p = p - c->step_size * (m / denom);
        t->master[i] = p;
        t->m[i] = m;
        t->v[i] = v;
        if (t->param_out)
            store_param(t->param_out, t->param_dtype, i, p);
    }
    return bad;
}

double zt_grad_sumsq_scalar(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad)
{
    double sum = 0.0;
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        float g = load_grad(grad, dt, i) * scale;
        if (!(fabsf(g) <= FLT_MAX))
            nonfinite++;
        else
            sum += (double)g * (double)g;
    }
    *bad = nonfinite;
    return sum;
}

/* The scalar reference Adam/AdamW kernel: the definition the SIMD variants are tested
 * against. It performs the vector kernels' operations one element at a time, fmaf() where
 * they use an FMA instruction, so all variants agree bitwise (see adam.h). This file is
 * compiled with -ffp-contract=off: the compiler must not fuse any other multiply and add. */
#include "optimizer/adam.h"
#include "core/convert.h"

#include <float.h>
#include <math.h>

int64_t zt_adam_step_scalar(const zt_adam_consts *c, const zt_adam_tensors *t)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < t->n; i++) {
        float p = t->master[i];
        float g = zt_load_f32(t->grad, t->grad_dtype, (size_t)i) * c->grad_scale;
        bad += !(fabsf(g) <= FLT_MAX);
        g = fmaf(c->l2, p, g);
        float m = fmaf(c->beta1, t->m[i], c->one_minus_beta1 * g);
        float v = fmaf(c->beta2, t->v[i], c->one_minus_beta2 * (g * g));
        float denom = fmaf(sqrtf(v), c->inv_sqrt_bc2, c->eps);
        p = fmaf(-c->decay, p, p);
        p = fmaf(-c->step_size, m / denom, p);
        t->master[i] = p;
        t->m[i] = m;
        t->v[i] = v;
        if (t->param_out)
            zt_store_f32(t->param_out, t->param_dtype, (size_t)i, p);
    }
    return bad;
}

double zt_grad_sumsq_scalar(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad)
{
    double sum = 0.0;
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        float g = zt_load_f32(grad, dt, (size_t)i) * scale;
        if (!(fabsf(g) <= FLT_MAX))
            nonfinite++;
        else
            sum += (double)g * (double)g;
    }
    *bad = nonfinite;
    return sum;
}

/* SPDX-License-Identifier: MIT */
/* The scalar reference Adam/AdamW kernel: the definition the SIMD variants and the CUDA
 * kernel are tested against. Its per-element update (adam_elem.h, shared with the CUDA
 * kernel) performs the vector kernels' operations one element at a time, fmaf() where they
 * use an FMA instruction, so all variants agree bitwise (see adam.h). This file is compiled
 * with -ffp-contract=off: the compiler must not fuse any other multiply and add. */
#include "optimizer/adam.h"
#include "core/convert.h"

#include <float.h>
#include <math.h>

int64_t zt_adam_step_scalar(const zt_adam_consts *c, const zt_adam_tensors *t)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < t->n; i++) {
        float p = t->master[i], m = t->m[i], v = t->v[i];
        float g = zt_adam_elem(c, zt_load_f32(t->grad, t->grad_dtype, (size_t)i), &p, &m, &v);
        bad += !(fabsf(g) <= FLT_MAX);
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

zt_adam_tensors zt_adam_tensors_slice(const zt_adam_tensors *t, int64_t first, int64_t count)
{
    size_t gsz = t->grad_dtype == ZT_F32 ? 4 : 2, psz = t->param_dtype == ZT_F32 ? 4 : 2;
    zt_adam_tensors r = *t;
    r.master += first, r.m += first, r.v += first;
    r.grad = (const char *)t->grad + (size_t)first * gsz;
    r.param_out = t->param_out ? (char *)t->param_out + (size_t)first * psz : NULL;
    r.n = count;
    return r;
}

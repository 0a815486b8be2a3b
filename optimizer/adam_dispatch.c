/* SPDX-License-Identifier: MIT */
/* Run-time choice of the Adam kernel, the per-call constants, and the serial entry points. */
#include "optimizer/adam.h"
#include "core/cpu.h"

#include <math.h>
#include <string.h>

void zt_adam_consts_init(zt_adam_consts *c, const zt_adam_hparams *h)
{
    double t = (double)(h->step > 0 ? h->step : 1);
    double bc1 = 1.0 - pow((double)h->beta1, t), bc2 = 1.0 - pow((double)h->beta2, t);
    c->beta1 = h->beta1;
    c->beta2 = h->beta2;
    c->one_minus_beta1 = 1.0f - h->beta1;
    c->one_minus_beta2 = 1.0f - h->beta2;
    c->step_size = (float)((double)h->lr / bc1);
    c->inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    c->eps = h->eps;
    c->decay = h->adamw ? h->lr * h->weight_decay : 0.0f;
    c->l2 = h->adamw ? 0.0f : h->weight_decay;
    c->grad_scale = h->grad_scale;
    c->bf16_insn = zt_cpu_has(ZT_CPU_AVX512_BF16);
}

int zt_adam_variant_supported(zt_adam_variant v)
{
    switch (v) {
    case ZT_ADAM_SCALAR:
        return 1;
    case ZT_ADAM_AVX2:
        return zt_cpu_has(ZT_CPU_AVX2_FMA_F16C);
    case ZT_ADAM_AVX512:
        return zt_cpu_has(ZT_CPU_AVX512);
    }
    return 0;
}

zt_adam_variant zt_adam_variant_best(void)
{
    if (zt_adam_variant_supported(ZT_ADAM_AVX512))
        return ZT_ADAM_AVX512;
    return zt_adam_variant_supported(ZT_ADAM_AVX2) ? ZT_ADAM_AVX2 : ZT_ADAM_SCALAR;
}

static const char *const names[] = {"scalar", "avx2", "avx512"};

const char *zt_adam_variant_name(zt_adam_variant v)
{
    return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "unknown";
}

int zt_adam_variant_parse(const char *name, zt_adam_variant *out)
{
    if (!name || !strcmp(name, "auto")) {
        *out = zt_adam_variant_best();
        return 0;
    }
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i]) && zt_adam_variant_supported((zt_adam_variant)i)) {
            *out = (zt_adam_variant)i;
            return 0;
        }
    return -1;
}

int64_t zt_adam_step_consts(zt_adam_variant v, const zt_adam_consts *c, const zt_adam_tensors *t)
{
    switch (v) {
    case ZT_ADAM_AVX512:
        return zt_adam_step_avx512(c, t);
    case ZT_ADAM_AVX2:
        return zt_adam_step_avx2(c, t);
    default:
        return zt_adam_step_scalar(c, t);
    }
}

int64_t zt_adam_step(zt_adam_variant v, const zt_adam_hparams *h, const zt_adam_tensors *t)
{
    zt_adam_consts c;
    zt_adam_consts_init(&c, h);
    return zt_adam_step_consts(v, &c, t);
}

double zt_grad_sumsq(zt_adam_variant v, const void *grad, zt_dtype dt, int64_t n, float scale,
                     int64_t *nonfinite)
{
    switch (v) {
    case ZT_ADAM_AVX512:
        return zt_grad_sumsq_avx512(grad, dt, n, scale, nonfinite);
    case ZT_ADAM_AVX2:
        return zt_grad_sumsq_avx2(grad, dt, n, scale, nonfinite);
    default:
        return zt_grad_sumsq_scalar(grad, dt, n, scale, nonfinite);
    }
}

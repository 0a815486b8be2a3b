/* Run-time choice of the Adam kernel and the thread-parallel step. */
#include "optimizer/adam.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* Elements per work item: 64 Ki fp32 = 256 KiB per stream, a multiple of every vector width
 * so chunk boundaries never split a vector (results equal the single-threaded pass). */
#define ADAM_CHUNK (64 * 1024)

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
}

int zt_adam_variant_supported(zt_adam_variant v)
{
    __builtin_cpu_init();
    switch (v) {
    case ZT_ADAM_SCALAR:
        return 1;
    case ZT_ADAM_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case ZT_ADAM_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
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
    return (unsigned)v < 3 ? names[v] : "unknown";
}

int zt_adam_variant_parse(const char *name, zt_adam_variant *out)
{
    if (!name || !strcmp(name, "auto")) {
        *out = zt_adam_variant_best();
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, names[i]) && zt_adam_variant_supported((zt_adam_variant)i)) {
            *out = (zt_adam_variant)i;
            return 0;
        }
    return -1;
}

static int64_t run_kernel(zt_adam_variant v, const zt_adam_consts *c, const zt_adam_tensors *t)
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
    return run_kernel(v, &c, t);
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

typedef struct parallel_ctx {
    zt_adam_variant variant;
    zt_adam_consts consts;
    const zt_adam_tensors *t;
    atomic_llong bad;
} parallel_ctx;

static void adam_chunk(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    parallel_ctx *ctx = arg;
    const zt_adam_tensors *t = ctx->t;
    size_t gsz = t->grad_dtype == ZT_F32 ? 4 : 2, psz = t->param_dtype == ZT_F32 ? 4 : 2;
    zt_adam_tensors part = *t;
    part.master += begin, part.m += begin, part.v += begin;
    part.grad = (const char *)t->grad + (size_t)begin * gsz;
    part.param_out = t->param_out ? (char *)t->param_out + (size_t)begin * psz : NULL;
    part.n = end - begin;
    atomic_fetch_add(&ctx->bad, run_kernel(ctx->variant, &ctx->consts, &part));
}

int64_t zt_adam_step_parallel(zt_threadpool *pool, zt_adam_variant v, const zt_adam_hparams *h,
                              const zt_adam_tensors *t)
{
    parallel_ctx ctx = {.variant = v, .t = t};
    atomic_init(&ctx.bad, 0);
    zt_adam_consts_init(&ctx.consts, h);
    zt_threadpool_run(pool, t->n, ADAM_CHUNK, adam_chunk, &ctx);
    return atomic_load(&ctx.bad);
}

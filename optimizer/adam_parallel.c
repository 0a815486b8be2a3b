/* SPDX-License-Identifier: MIT */
/* The Adam step split over a thread pool. Work items are ZT_ADAM_CHUNK elements (256 KiB of
 * each fp32 stream: large enough that the hardware prefetchers run at full speed, small enough
 * that two threads finish together), a multiple of every vector width, so chunks start on
 * the same alignment as the whole shard. Every variant computes each element alone, so the
 * result is bitwise that of the serial pass. */
#include "optimizer/adam.h"

#include "core/convert.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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
    zt_adam_tensors part = zt_adam_tensors_slice(ctx->t, begin, end - begin);
    int64_t bad = zt_adam_step_consts(ctx->variant, &ctx->consts, &part);
    if (bad)
        atomic_fetch_add_explicit(&ctx->bad, bad, memory_order_relaxed);
}

/* The gradient-norm pass: one partial sum per chunk, added in chunk order, so the result is
 * the same for any number of threads. */
typedef struct sumsq_ctx {
    zt_adam_variant variant;
    const void *grad;
    zt_dtype dt;
    float scale;
    double *partial;    /* per chunk */
    int64_t *nonfinite; /* per chunk */
} sumsq_ctx;

static void sumsq_chunk(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    sumsq_ctx *c = arg;
    int64_t k = begin / ZT_ADAM_CHUNK;
    const char *g = (const char *)c->grad + (size_t)begin * zt_dtype_size(c->dt);
    c->partial[k] = zt_grad_sumsq(c->variant, g, c->dt, end - begin, c->scale, &c->nonfinite[k]);
}

double zt_grad_sumsq_parallel(zt_threadpool *pool, zt_adam_variant v, const void *grad, zt_dtype dt,
                              int64_t n, float scale, int64_t *nonfinite)
{
    int64_t chunks = (n + ZT_ADAM_CHUNK - 1) / ZT_ADAM_CHUNK;
    double stack_partial[64];
    int64_t stack_bad[64];
    double *partial = chunks <= 64 ? stack_partial : malloc((size_t)chunks * sizeof(double));
    int64_t *bad = chunks <= 64 ? stack_bad : malloc((size_t)chunks * sizeof(int64_t));
    if (chunks < 2 || !partial || !bad) { /* one pass on this thread */
        if (chunks > 64)
            free(partial), free(bad);
        return zt_grad_sumsq(v, grad, dt, n, scale, nonfinite);
    }
    sumsq_ctx c = {v, grad, dt, scale, partial, bad};
    if (pool)
        zt_threadpool_run(pool, n, ZT_ADAM_CHUNK, sumsq_chunk, &c);
    else /* the same chunks in order: the same bits without a pool */
        for (int64_t b = 0; b < n; b += ZT_ADAM_CHUNK)
            sumsq_chunk(&c, b, b + ZT_ADAM_CHUNK < n ? b + ZT_ADAM_CHUNK : n, 0);
    double sum = 0;
    *nonfinite = 0;
    for (int64_t k = 0; k < chunks; k++)
        sum += partial[k], *nonfinite += bad[k];
    if (chunks > 64)
        free(partial), free(bad);
    return sum;
}

/* acc += grad in chunks; with a norm wanted, each chunk's sum of squares is taken right after
 * its addition, while the chunk is still in cache, and the partials are added in chunk
 * order (as zt_grad_sumsq_parallel does). */
typedef struct accumulate_ctx {
    zt_adam_variant variant;
    void *acc;
    zt_dtype acc_dt;
    const void *grad;
    zt_dtype dt;
    float scale;
    int want;
    double *partial;
    int64_t *nonfinite;
    int overwrite;
} accumulate_ctx;

static void accumulate_chunk(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    accumulate_ctx *c = arg;
    int64_t n = end - begin;
    void *chunk = (char *)c->acc + (size_t)begin * zt_dtype_size(c->acc_dt);
    if (c->acc_dt == ZT_F32 && c->dt == ZT_F32 && c->overwrite) {
        float *acc = chunk; /* 0 + g, not g: -0 becomes +0 as in a sum */
        const float *g = (const float *)c->grad + begin;
        for (int64_t i = 0; i < n; i++)
            acc[i] = 0.0f + g[i];
    } else if (c->acc_dt == ZT_F32 && c->dt == ZT_F32) {
        float *acc = chunk;
        const float *g = (const float *)c->grad + begin;
        for (int64_t i = 0; i < n; i++)
            acc[i] += g[i];
    } else if (c->acc_dt == ZT_F32) {
        float *acc = chunk;
        for (int64_t i = 0; i < n; i++)
            acc[i] =
                (c->overwrite ? 0.0f : acc[i]) + zt_load_f32(c->grad, c->dt, (size_t)(begin + i));
    } else { /* a bf16 accumulator: each sum computed in fp32, rounded once; the widening
              * and rounding go through the SIMD conversions, a cache-sized piece at a time */
        uint16_t *acc = chunk;
        float sum[2048], wide[2048];
        for (int64_t lo = 0; lo < n; lo += 2048) {
            size_t k = (size_t)(n - lo < 2048 ? n - lo : 2048);
            const void *src = (const char *)c->grad + (size_t)(begin + lo) * zt_dtype_size(c->dt);
            const float *g = src;
            if (c->dt != ZT_F32) /* 16-bit gradients widened first */
                zt_convert_array(wide, ZT_F32, src, c->dt, k), g = wide;
            if (c->overwrite)
                memset(sum, 0, k * sizeof(float));
            else
                zt_convert_array(sum, ZT_F32, acc + lo, ZT_BF16, k);
            for (size_t i = 0; i < k; i++)
                sum[i] += g[i];
            zt_convert_array(acc + lo, ZT_BF16, sum, ZT_F32, k);
        }
    }
    if (c->want) {
        int64_t k = begin / ZT_ADAM_CHUNK;
        c->partial[k] = zt_grad_sumsq(c->variant, chunk, c->acc_dt, n, c->scale, &c->nonfinite[k]);
    }
}

double zt_grad_accumulate(zt_threadpool *pool, zt_adam_variant v, void *acc, zt_dtype acc_dt,
                          const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *nonfinite,
                          int overwrite)
{
    int64_t chunks = (n + ZT_ADAM_CHUNK - 1) / ZT_ADAM_CHUNK;
    int want = nonfinite != NULL;
    double *partial = want ? malloc((size_t)(chunks ? chunks : 1) * sizeof(double)) : NULL;
    int64_t *bad = want ? malloc((size_t)(chunks ? chunks : 1) * sizeof(int64_t)) : NULL;
    if (want && (!partial || !bad)) { /* no room for the partials: two passes */
        free(partial), free(bad);
        zt_grad_accumulate(pool, v, acc, acc_dt, grad, dt, n, scale, NULL, overwrite);
        return zt_grad_sumsq_parallel(pool, v, acc, acc_dt, n, scale, nonfinite);
    }
    accumulate_ctx c = {v, acc, acc_dt, grad, dt, scale, want, partial, bad, overwrite};
    if (pool)
        zt_threadpool_run(pool, n, ZT_ADAM_CHUNK, accumulate_chunk, &c);
    else
        for (int64_t b = 0; b < n; b += ZT_ADAM_CHUNK)
            accumulate_chunk(&c, b, b + ZT_ADAM_CHUNK < n ? b + ZT_ADAM_CHUNK : n, 0);
    double sum = 0;
    if (want) {
        *nonfinite = 0;
        for (int64_t k = 0; k < chunks; k++)
            sum += partial[k], *nonfinite += bad[k];
    }
    free(partial), free(bad);
    return sum;
}

int64_t zt_adam_step_parallel(zt_threadpool *pool, zt_adam_variant v, const zt_adam_hparams *h,
                              const zt_adam_tensors *t)
{
    parallel_ctx ctx = {.variant = v, .t = t};
    atomic_init(&ctx.bad, 0);
    zt_adam_consts_init(&ctx.consts, h);
    if (!pool)
        return zt_adam_step_consts(v, &ctx.consts, t);
    zt_threadpool_run(pool, t->n, ZT_ADAM_CHUNK, adam_chunk, &ctx);
    return atomic_load(&ctx.bad);
}

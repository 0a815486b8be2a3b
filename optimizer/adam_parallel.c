/* The Adam step split over a thread pool. Work items are ZT_ADAM_CHUNK elements (256 KiB of
 * each fp32 stream: large enough that the hardware prefetchers run at full speed, small enough
 * that two threads finish together), a multiple of every vector width, so chunks start on
 * the same alignment as the whole shard. Every variant computes each element alone, so the
 * result is bitwise that of the serial pass. */
#include "optimizer/adam.h"

#include <stdatomic.h>

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

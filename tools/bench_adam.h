/* SPDX-License-Identifier: MIT */
/* The fused CPU Adam step over buffers laid out as the runtime's host tier lays out shards
 * (bench_adam.c), shared by `ztier bench adam` and `ztier bench profile`. */
#ifndef ZT_TOOLS_BENCH_ADAM_H
#define ZT_TOOLS_BENCH_ADAM_H

#include "core/threadpool.h"
#include "optimizer/adam.h"
#include "tiers/host_tier.h"

#include <stdint.h>

typedef struct adam_bench {
    int64_t n;
    float *master, *m, *v, *grad;
    uint16_t *out;
    zt_dtype grad_dtype;
    int copy;          /* write the bf16 parameter copy */
    zt_host_tier host; /* the buffers are laid out as the runtime's host tier lays out shards */
} adam_bench;

/* Allocates b->n elements of each buffer (n, grad_dtype and copy set by the caller) and fills
 * them on the pool's threads in the step's chunks; 0, or -1 when out of memory
 * (bench_adam_free frees what was made). */
int bench_adam_alloc(adam_bench *b, zt_threadpool *pool);
/* One fused Adam step (optimizer step number `step`) over the pool: its seconds. */
double bench_adam_pass(adam_bench *b, zt_threadpool *pool, zt_adam_variant var, int64_t step);
/* Gives the buffers back (the NULL ones are skipped); the caller keeps going without them. */
void bench_adam_free(adam_bench *b);

#endif

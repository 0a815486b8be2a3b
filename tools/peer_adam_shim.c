/* SPDX-License-Identifier: MIT */
/* ztier's CPU Adam as a loadable module for bench/peer_adam.py: the script loads it with
 * ctypes and times ztier's kernel on the peers' own tensors, in the peers' process,
 * interleaved with them, so that no process-to-process difference in memory bandwidth enters
 * the comparison. A benchmark aid, not part of the library's API. */
#include "core/threadpool.h"
#include "optimizer/adam.h"

#define SHIM_API __attribute__((visibility("default")))

/* A pool of `threads` (the caller counts as one); NULL when it cannot be made. */
SHIM_API void *zt_peer_pool(int threads)
{
    zt_threadpool *pool = NULL;
    zt_error err = {0};
    return zt_threadpool_create(threads, -1, &pool, &err) == ZT_OK ? pool : NULL;
}

SHIM_API void zt_peer_pool_free(void *pool) { zt_threadpool_destroy(pool); }

/* One AdamW step of n fp32 parameters updated in place (the peers' work: no copy), as
 * `ztier bench adam --param-copy none` runs it; returns the count of non-finite gradients. */
SHIM_API long long zt_peer_adamw(void *pool, float *param, const float *grad, float *m, float *v,
                                 long long n, long long step, float lr, float beta1, float beta2,
                                 float eps, float weight_decay)
{
    zt_adam_variant variant;
    zt_adam_variant_parse(NULL, &variant); /* the best the CPU has, as the runtime picks */
    zt_adam_hparams h = {lr, beta1, beta2, eps, weight_decay, 1, step, 1.0f};
    zt_adam_tensors t = {param, m, v, grad, ZT_F32, NULL, ZT_BF16, n};
    return zt_adam_step_parallel(pool, variant, &h, &t);
}

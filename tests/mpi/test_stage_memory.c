/* SPDX-License-Identifier: MIT */
/* Device memory on 2 ranks, stages 1 and 3 (host backend, whose "device" memory is this
 * process's): the memory the backend held at most, in use or cached for reuse, is what
 * zt_stats.device_bytes_peak counts, and `ztier estimate`'s peak (zt_rt_estimate, the same
 * replay) is within 15% of it. Stage 1's step-end all-gather of the replicas takes buffers of
 * sizes nothing else asks for; the backend's cache, bounded by the budget, kept the backward's
 * gradient and bucket buffers beside them, uncounted (a model's size and more per rank). */
#include "ref_mlp.h"
#include "runtime/estimate.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mlp_dims dims = {256, 1024, 64, 32};
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

static zt_runtime *created(int stage, minimal_model *m)
{
    zt_runtime *rt = NULL;
    zt_status st = zt_runtime_create(NULL, ref_mlp_config(&hp, "none", "cpu", 1, "", ""), &rt);
    if (st == ZT_OK)
        st = zt_config_set_int(rt, "zero_optimization.stage", stage);
    if (st == ZT_OK && minimal_register(rt, &dims, 42, m))
        st = ZT_ERR_INTERNAL;
    if (st != ZT_OK) {
        fprintf(stderr, "WRONG: stage %d: %s\n", stage, zt_last_error(rt));
        zt_runtime_destroy(rt);
        return NULL;
    }
    return rt;
}

static int check(int stage)
{
    minimal_model m;
    zt_runtime *rt = created(stage, &m);
    if (!rt)
        return 1;
    int rank = 0, world = 1;
    zt_runtime_rank(rt, &rank, &world);
    zt_estimate e;
    zt_status st = zt_rt_estimate(rt, world, (uint64_t)rt->cfg.hbm_capacity, NULL, 0, 3, &e);
    zt_runtime_destroy(rt);
    rt = st == ZT_OK ? created(stage, &m) : NULL;
    if (!rt)
        return 1;
    st = zt_runtime_commit(rt);
    zt_stats stats = ZT_STATS_INIT;
    if (st == ZT_OK)
        st = ref_mlp_train_ranks(rt, &m, 3, &stats);
    uint64_t held = rt->device.dev->bytes_held_peak;
    if (st != ZT_OK)
        fprintf(stderr, "WRONG: stage %d: %s\n", stage, zt_last_error(rt));
    zt_runtime_destroy(rt);
    if (st != ZT_OK)
        return 1;
    double ratio = (double)e.device_peak / (double)held;
    int ok = held <= stats.device_bytes_peak && ratio >= 0.85 && ratio <= 1.15;
    printf("rank %d, stage %d: the backend held at most %llu bytes, zt_stats counts %llu, "
           "the estimate %llu (%.3f of held) %s\n",
           rank, stage, (unsigned long long)held, (unsigned long long)stats.device_bytes_peak,
           (unsigned long long)e.device_peak, ratio, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}

int main(void)
{
    int bad = check(1);
    bad += check(3);
    return bad ? 1 : 0;
}

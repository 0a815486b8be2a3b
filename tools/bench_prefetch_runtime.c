/* SPDX-License-Identifier: MIT */
/* The runtime both versions of `ztier bench prefetch` train (bench_prefetch.c on the CPU,
 * bench_prefetch_cuda.c on the GPU). */
#include "tools/bench_prefetch.h"

#include "ztier.h"

#include <stdio.h>
#include <string.h>

zt_runtime *bench_prefetch_runtime(int layers, int hidden, const char *offload, const char *nvme,
                                   const char *extra_zero, const char *extra_ztier)
{
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\"%s%s%s},"
             " \"offload_optimizer\": {\"device\": \"cpu\"}%s},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}},"
             " \"ztier\": {\"hbm_capacity\": %zu%s}}",
             offload, nvme ? ", \"nvme_path\": \"" : "", nvme ? nvme : "", nvme ? "\"" : "",
             extra_zero,
             /* room for the prefetch window: a few layers' parameters and gradients */
             (size_t)hidden * (size_t)hidden * 4 * 8, extra_ztier);
    zt_runtime *rt = NULL;
    zt_status st = zt_runtime_create(NULL, cfg, &rt);
    for (int l = 0; st == ZT_OK && l < layers; l++) {
        char name[32];
        int id, pid;
        snprintf(name, sizeof name, "layer%d", l);
        int64_t shape[2] = {hidden, hidden};
        zt_init init = {ZT_INIT_NORMAL, 0.0f, 0.02f, 1, NULL, NULL};
        st = zt_layer_add(rt, name, &id);
        if (st == ZT_OK)
            st = zt_param_add(rt, id, strcat(name, ".w"), shape, 2, &init, &pid);
    }
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    if (st != ZT_OK) {
        fprintf(stderr, "ztier bench prefetch: %s\n", zt_last_error(rt));
        zt_runtime_destroy(rt);
        return NULL;
    }
    return rt;
}

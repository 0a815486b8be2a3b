/* SPDX-License-Identifier: MIT */
/* The smallest complete embedding of ztier: a 3-layer MLP trained on a synthetic
 * regression task through the per-layer API, printing the loss of every step.
 *
 *   zt_minimal [--config ds_config.json] [--nvme DIR] [--steps N] [--accum K] [--stream]
 *
 * --stream computes every layer on a stream (zt_fetch_async / zt_release_async; on the host
 * backend the layers' work runs as host functions on a zt_stream_create stream), the way a
 * CUDA trainer drives ztier; the losses are the same.
 * Without --config it trains with parameters and optimizer state offloaded to host memory
 * (or, with --nvme DIR, to NVMe swap files in DIR) and a device budget smaller than the
 * model state, set from code with zt_config_set. Every 10 steps it prints the loss of a
 * held-out batch, computed with ZT_INFERENCE fetches (no gradients, prefetching
 * undisturbed). */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A batch the training loop never reaches, for the held-out loss. */
#define EVAL_BATCH 1000000000

/* The built-in configuration, set key by key (the same checks as a config file). */
static zt_status configure(zt_runtime *rt, const char *nvme)
{
    const char *settings[][2] = {
        {"zero_optimization.offload_param.device", nvme ? "nvme" : "cpu"},
        {"zero_optimization.offload_optimizer.device", nvme ? "nvme" : "cpu"},
        /* the layers are small: without this they would all stay resident (persistent) */
        {"zero_optimization.stage3_param_persistence_threshold", "0"},
        {"optimizer.type", "AdamW"},
        {"optimizer.params.lr", "0.003"},
        {"optimizer.params.weight_decay", "0"},
        {"gradient_clipping", "1.0"},
        {"ztier.hbm_capacity", "1M"},
    };
    zt_status st = ZT_OK;
    for (size_t i = 0; st == ZT_OK && i < sizeof settings / sizeof settings[0]; i++)
        if (settings[i][1])
            st = zt_config_set(rt, settings[i][0], settings[i][1]);
    /* the user's folder is text, never parsed as JSON: "1234" or "null" is a folder */
    if (st == ZT_OK && nvme)
        st = zt_config_set_string(rt, "zero_optimization.offload_param.nvme_path", nvme);
    if (st == ZT_OK && nvme)
        st = zt_config_set_string(rt, "zero_optimization.offload_optimizer.nvme_path", nvme);
    return st;
}

static int fail(zt_runtime *rt, zt_status st, const char *what)
{
    fprintf(stderr, "zt_minimal: %s failed: %s: %s\n", what, zt_status_string(st),
            zt_last_error(rt));
    if (st == ZT_ERR_UNSUPPORTED && !*zt_last_error(rt))
        fprintf(stderr, "zt_minimal: this example computes in fp32; disable bf16/fp16\n");
    zt_runtime_destroy(rt);
    return 1;
}

int main(int argc, char **argv)
{
    const char *config_path = NULL, *nvme = NULL;
    int steps = 30, accum = 1, on_stream = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config_path = argv[++i];
        else if (!strcmp(argv[i], "--nvme") && i + 1 < argc)
            nvme = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--accum") && i + 1 < argc)
            accum = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stream"))
            on_stream = 1;
        else {
            fprintf(stderr, "usage: zt_minimal [--config FILE] [--nvme DIR] [--steps N] "
                            "[--accum K] [--stream]\n");
            return 2;
        }
    }
    zt_options opts = ZT_OPTIONS_INIT; /* the runtime reads --config and names its errors */
    opts.config_path = config_path;
    zt_runtime *rt = NULL;
    zt_status st = zt_runtime_create(&opts, NULL, &rt);
    if (st != ZT_OK)
        return fail(rt, st, "zt_runtime_create");
    if (!config_path && (st = configure(rt, nvme)) != ZT_OK)
        return fail(rt, st, "zt_config_set");
    int rank = 0, world = 1;
    zt_runtime_rank(rt, &rank, &world);
    mlp_dims dims = {32, 256, 8, 64};
    minimal_model model;
    if ((st = minimal_register(rt, &dims, 1234, &model)) != ZT_OK)
        return fail(rt, st, "registering the model");
    if ((st = zt_runtime_commit(rt)) != ZT_OK)
        return fail(rt, st, "zt_runtime_commit");
    void *stream = NULL;
    if (on_stream && (st = zt_stream_create(rt, &stream)) != ZT_OK)
        return fail(rt, st, "zt_stream_create");
    int rows = dims.batch / world;
    for (int s = 0; s < steps; s++) {
        float loss = 0.0f, sum = 0.0f;
        for (int k = 0; k < accum; k++) {
            int64_t batch = (int64_t)s * accum + k;
            st = stream
                     ? minimal_micro_step_on(rt, &model, stream, batch, rank * rows, rows, 0, &loss)
                     : minimal_micro_step(rt, &model, batch, rank * rows, rows, &loss);
            if (st != ZT_OK)
                return fail(rt, st, "training micro-step");
            sum += loss;
        }
        zt_step_args args = ZT_STEP_ARGS_INIT;
        zt_step_info info = ZT_STEP_INFO_INIT;
        if ((st = zt_step(rt, &args, &info)) != ZT_OK)
            return fail(rt, st, "zt_step");
        if (rank == 0)
            printf("step %3d  loss %.6f  grad_norm %.4f%s\n", s + 1, sum / (float)accum,
                   (double)info.grad_norm, info.skipped ? "  (skipped)" : "");
        if ((s + 1) % 10 == 0) {
            if ((st = minimal_evaluate(rt, &model, EVAL_BATCH, rank * rows, rows, &loss)))
                return fail(rt, st, "evaluation");
            if (rank == 0)
                printf("          held-out loss %.6f (rank 0's rows)\n", loss);
        }
    }
    zt_stats stats = ZT_STATS_INIT;
    zt_stats_get(rt, &stats);
    if (rank == 0)
        printf("device peak %llu of %llu bytes, host peak %llu bytes, NVMe %llu bytes "
               "(read %llu, written %llu), %llu fetches, %llu prefetched, %llu host waits\n",
               (unsigned long long)stats.device_bytes_peak,
               (unsigned long long)stats.device_bytes_capacity,
               (unsigned long long)stats.host_bytes_peak, (unsigned long long)stats.nvme_bytes_peak,
               (unsigned long long)stats.nvme_read_bytes,
               (unsigned long long)stats.nvme_write_bytes, (unsigned long long)stats.fetches,
               (unsigned long long)stats.prefetch_hits, (unsigned long long)stats.host_syncs);
    zt_runtime_destroy(rt);
    return 0;
}

/* The smallest complete embedding of ztier: a 3-layer MLP trained on a synthetic
 * regression task through the per-layer API, printing the loss of every step.
 *
 *   zt_minimal [--config ds_config.json] [--nvme DIR] [--steps N] [--accum K]
 *
 * Without --config it trains with parameters and optimizer state offloaded to host memory
 * (or, with --nvme DIR, to NVMe swap files in DIR) and a device budget smaller than the
 * model state. */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The built-in config; %s are the offload device and the nvme_path member. */
static const char *default_config =
    "{\n"
    "  \"zero_optimization\": {\"stage\": 3,\n"
    "    \"offload_param\": {\"device\": \"%s\"%s},\n"
    "    \"offload_optimizer\": {\"device\": \"%s\"%s}},\n"
    "  \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"weight_decay\": 0.0}},\n"
    "  \"gradient_clipping\": 1.0,\n"
    "  \"ztier\": {\"device_backend\": \"host\", \"hbm_capacity\": \"1M\"}\n"
    "}\n";

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
    int steps = 30, accum = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config_path = argv[++i];
        else if (!strcmp(argv[i], "--nvme") && i + 1 < argc)
            nvme = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--accum") && i + 1 < argc)
            accum = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: zt_minimal [--config FILE] [--nvme DIR] [--steps N] "
                            "[--accum K]\n");
            return 2;
        }
    }
    char builtin[2048], path_member[1200] = "";
    if (nvme)
        snprintf(path_member, sizeof path_member, ", \"nvme_path\": \"%s\"", nvme);
    snprintf(builtin, sizeof builtin, default_config, nvme ? "nvme" : "cpu", path_member,
             nvme ? "nvme" : "cpu", path_member);
    zt_options opts = ZT_OPTIONS_INIT; /* the runtime reads --config and names its errors */
    opts.config_path = config_path;
    zt_runtime *rt = NULL;
    zt_status st = zt_runtime_create(&opts, config_path ? NULL : builtin, &rt);
    if (st != ZT_OK)
        return fail(rt, st, "zt_runtime_create");
    int rank = 0, world = 1;
    zt_runtime_rank(rt, &rank, &world);
    mlp_dims dims = {32, 256, 8, 64};
    minimal_model model;
    if ((st = minimal_register(rt, &dims, 1234, &model)) != ZT_OK)
        return fail(rt, st, "registering the model");
    if ((st = zt_runtime_commit(rt)) != ZT_OK)
        return fail(rt, st, "zt_runtime_commit");
    int rows = dims.batch / world;
    for (int s = 0; s < steps; s++) {
        float loss = 0.0f, sum = 0.0f;
        for (int k = 0; k < accum; k++) {
            st = minimal_micro_step(rt, &model, (int64_t)s * accum + k, rank * rows, rows, &loss);
            if (st != ZT_OK)
                return fail(rt, st, "training micro-step");
            sum += loss;
        }
        zt_step_args args = ZT_STEP_ARGS_INIT;
        zt_step_info info;
        if ((st = zt_step(rt, &args, &info)) != ZT_OK)
            return fail(rt, st, "zt_step");
        if (rank == 0)
            printf("step %3d  loss %.6f  grad_norm %.4f%s\n", s + 1, sum / (float)accum,
                   (double)info.grad_norm, info.skipped ? "  (skipped)" : "");
    }
    zt_stats stats = ZT_STATS_INIT;
    zt_stats_get(rt, &stats);
    if (rank == 0)
        printf("device peak %llu of %llu bytes, host peak %llu bytes, NVMe %llu bytes "
               "(read %llu, written %llu), %llu fetches, %llu prefetched\n",
               (unsigned long long)stats.device_bytes_peak,
               (unsigned long long)stats.device_bytes_capacity,
               (unsigned long long)stats.host_bytes_peak,
               (unsigned long long)stats.nvme_bytes_peak,
               (unsigned long long)stats.nvme_read_bytes,
               (unsigned long long)stats.nvme_write_bytes, (unsigned long long)stats.fetches,
               (unsigned long long)stats.prefetch_hits);
    zt_runtime_destroy(rt);
    return 0;
}

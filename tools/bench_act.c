/* SPDX-License-Identifier: MIT */
/* `ztier bench act`: the GPT-2 step with full activation checkpointing, each block's input
 * kept by the model (full), in ztier's store in pinned host memory (full+host) and on NVMe
 * (full+nvme), side by side with interleaved steps; the parameters and the optimizer state
 * stay in memory in all three, so the activations are the only difference. Reports the
 * median steps, their ratios to full, the bytes the store moves per step and what they need
 * of the folder's measured bandwidth, and the time loads waited for their bytes. --backend
 * cuda computes on the GPU (the CUDA ops on a stream of ztier's cuda backend, bf16 matmuls;
 * the checkpoints handed over with zt_act_*_async). */
#include "dataloader.h"
#include "gpt2_kernels.h"
#include "gpt2_ops.h"
#include "gpt2_ztier.h"
#include "tools/bench_common.h"
#include "tools/bench_disk.h"
#include "tools/bench_gpt2.h"
#include "tools/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_STEPS 16
#define N_RUNS 3

static const char *const run_names[N_RUNS] = {"full", "full+host", "full+nvme"};
static const char *const homes[N_RUNS] = {"none", "cpu", "nvme"};

typedef struct act_run {
    zt_runtime *rt;
    gpt2_ztier g;
    gpt2_ops ops;
    int cuda_ops; /* ops are the CUDA ops (destroyed with the run) */
    gpt2_model *model;
    double step_s[MAX_STEPS];
    zt_stats s0, s1;
} act_run;

/* The ops the model computes with: the CPU's, or (gpu) the CUDA ops on a stream of the run's
 * runtime, which the activation calls then order against. */
static int open_ops(act_run *r, int gpu)
{
    r->ops = gpt2_ops_cpu;
    if (!gpu)
        return 0;
#ifdef ZT_HAVE_GPT2_CUDA
    char why[256] = "";
    int device = -1;
    if (zt_stream_create(r->rt, &r->g.stream) != ZT_OK ||
        zt_runtime_device(r->rt, &device) != ZT_OK ||
        gpt2_ops_cuda_create(&r->ops, r->g.stream, device, GPT2_BF16, why, sizeof why) != 0) {
        r->ops = gpt2_ops_cpu;
        return fprintf(stderr, "ztier bench act: %s%s\n", why, zt_last_error(r->rt)), -1;
    }
    r->cuda_ops = 1;
    return 0;
#else
    return fprintf(stderr, "ztier bench act: --backend cuda needs a build with CUDA\n"), -1;
#endif
}

static int open_act_run(act_run *r, int k, const gpt2_config *c, int B, int T, const char *nvme,
                        int threads, int gpu)
{
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"none\"},"
             " \"offload_optimizer\": {\"device\": \"cpu\"}},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}},"
             " \"activation_checkpointing\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
             " \"ztier\": {\"device_backend\": \"%s\", \"comm_backend\": \"single\","
             " \"hbm_capacity\": \"16G\", \"optimizer_threads\": %d}}",
             homes[k], nvme, gpu ? "cuda" : "host", threads);
    memset(r, 0, sizeof *r);
    r->s0.struct_size = r->s1.struct_size = sizeof(zt_stats);
    int policy = k ? GPT2_FULL_OFFLOAD : GPT2_FULL;
    if (zt_runtime_create(NULL, cfg, &r->rt) != ZT_OK ||
        gpt2_ztier_register(&r->g, r->rt, c, 1) != ZT_OK ||
        (k && gpt2_ztier_register_acts(&r->g, B, T) != ZT_OK) || zt_runtime_commit(r->rt) != ZT_OK)
        return fprintf(stderr, "ztier bench act: %s: %s\n", run_names[k], zt_last_error(r->rt)), -1;
    if (open_ops(r, gpu) != 0)
        return -1;
    r->model = gpt2_model_create_on(c, B, T, &r->ops, policy);
    if (!r->model)
        return fprintf(stderr, "ztier bench act: out of memory for the activations of %d x %d\n", B,
                       T),
               -1;
    gpt2_act_store store = gpt2_ztier_act_store(&r->g);
    if (k)
        gpt2_model_set_store(r->model, &store);
    return 0;
}

static void close_act_run(act_run *r)
{
    gpt2_model_destroy(r->model);
#ifdef ZT_HAVE_GPT2_CUDA
    if (r->cuda_ops)
        gpt2_ops_cuda_destroy(&r->ops);
#endif
    gpt2_ztier_free(&r->g);
    zt_runtime_destroy(r->rt);
}

int cmd_bench_act(int argc, char **argv)
{
    static const char *const known[] = {"config",    "batch",   "seq",     "steps", "text",
                                        "nvme-path", "threads", "backend", NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return 2;
    const char *v, *name = (v = bench_arg(argc, argv, "config")) ? v : "d12";
    const char *nvme = (v = bench_arg(argc, argv, "nvme-path")) ? v : ".";
    const char *text = (v = bench_arg(argc, argv, "text")) ? v : "/usr/share/common-licenses/GPL-3";
    int B = 4, T = 256, steps = 3;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cores > 0 ? (int)cores : 1;
    gpt2_config c;
    if (bench_int_arg(argc, argv, "ztier bench act", "batch", 1, 1 << 20, &B) ||
        bench_int_arg(argc, argv, "ztier bench act", "seq", 2, 1 << 20, &T) ||
        bench_int_arg(argc, argv, "ztier bench act", "steps", 1, MAX_STEPS, &steps) ||
        bench_int_arg(argc, argv, "ztier bench act", "threads", 1, 4096, &threads))
        return 2;
    const char *backend = (v = bench_arg(argc, argv, "backend")) ? v : "host";
    if (strcmp(backend, "host") && strcmp(backend, "cuda"))
        return fprintf(stderr, "ztier bench act: --backend host|cuda\n"), 2;
    int gpu = !strcmp(backend, "cuda");
    if (gpt2_config_named(name, 0, &c) != 0)
        return fprintf(stderr, "ztier bench act: --config " GPT2_CONFIG_HELP "\n"), 2;
    if (T > c.max_seq)
        return fprintf(stderr, "ztier bench act: --seq %d is longer than %s's context (%d)\n", T,
                       name, c.max_seq),
               2;
    token_data d;
    char err[512];
    if (tokens_load_text(text, &d, err, sizeof err) != 0)
        return fprintf(stderr, "ztier bench act: %s\n", err), 1;
    gpt2_set_threads(threads);
    act_run runs[N_RUNS];
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    int rc = 0, opened = 0;
    for (; opened < N_RUNS && rc == 0; opened++)
        rc = open_act_run(&runs[opened], opened, &c, B, T, nvme, threads, gpu);
    for (int k = 0; k < N_RUNS && rc == 0; k++) /* warm-up */
        rc = bench_gpt2_step("ztier bench act", &runs[k].g, runs[k].model, &d, 0, B, T, in, tg) < 0;
    for (int k = 0; k < N_RUNS && rc == 0; k++)
        zt_stats_get(runs[k].rt, &runs[k].s0);
    for (int i = 0; i < steps && rc == 0; i++) /* interleaved: full, host, nvme, full, ... */
        for (int k = 0; k < N_RUNS && rc == 0; k++)
            rc = (runs[k].step_s[i] = bench_gpt2_step("ztier bench act", &runs[k].g, runs[k].model,
                                                      &d, i + 1, B, T, in, tg)) < 0;
    for (int k = 0; k < N_RUNS && rc == 0; k++)
        zt_stats_get(runs[k].rt, &runs[k].s1);
    double med[N_RUNS] = {0}, rbw = 1, wbw = 1;
    size_t ckpt = gpt2_checkpoint_bytes(&c, B, T);
    for (int k = 0; k < opened; k++) {
        if (rc == 0)
            med[k] = bench_median(runs[k].step_s, steps);
        close_act_run(&runs[k]); /* the swap files go before the disk is probed */
    }
    if (rc == 0 && bench_disk_bandwidth(nvme, 512u << 20, &rbw, &wbw) != 0)
        rc = 1;
    if (rc == 0) {
        double moved = (double)ckpt * c.layers; /* written and read back per step */
        printf("ztier bench act: %s (%.1fM parameters) on the %s, batch %d x %d tokens, full "
               "activation checkpointing, %d interleaved steps, %d threads; each block's input "
               "%.1f MB, %.1f MB a step\n",
               name, (double)gpt2_num_params(&c) / 1e6, gpu ? "GPU" : "CPU", B, T, steps, threads,
               ckpt / 1e6, moved / 1e6);
        for (int k = 0; k < N_RUNS; k++) {
            const zt_stats *a = &runs[k].s0, *b = &runs[k].s1;
            printf("  %-10s step %8.3f s (x%.3f)", run_names[k], med[k], med[k] / med[0]);
            if (k)
                printf("  loads waited %.3f s a step, %.1f of %d read ahead; store's device peak "
                       "%.1f MB",
                       (b->act_wait_s - a->act_wait_s) / steps,
                       (double)(b->act_prefetch_hits - a->act_prefetch_hits) / steps, c.layers,
                       b->act_device_peak_bytes / 1e6);
            printf("\n");
        }
        printf("  NVMe per step: %.1f MB written and read; at '%s''s measured %.2f GB/s write, "
               "%.2f GB/s read that is %.3f s, against a step of %.3f s\n",
               moved / 1e6, nvme, wbw / 1e9, rbw / 1e9, moved / wbw + moved / rbw, med[0]);
        if (bench_flag(argc, argv, "json"))
            printf("{\"config\":\"%s\",\"batch\":%d,\"seq\":%d,\"full_s\":%.4f,\"host_s\":%.4f,"
                   "\"nvme_s\":%.4f,\"host_ratio\":%.4f,\"nvme_ratio\":%.4f,\"bytes_per_step\":%."
                   "0f,\"disk_write_bps\":%.0f,\"disk_read_bps\":%.0f}\n",
                   name, B, T, med[0], med[1], med[2], med[1] / med[0], med[2] / med[0], moved, wbw,
                   rbw);
    }
    tokens_free(&d);
    free(in), free(tg);
    return rc;
}

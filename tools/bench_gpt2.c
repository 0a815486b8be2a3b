/* SPDX-License-Identifier: MIT */
/* `ztier bench gpt2`: GPT-2 training step time with everything in memory (resident) against
 * the same model with its optimizer state (or also its parameters) on NVMe, interleaved
 * (resident, offloaded, ...), and the floor max(compute, NVMe bytes / measured bandwidth):
 * compute is the resident step, the bandwidth is what the offloaded run's transfers achieved. */
#include "dataloader.h"
#include "gpt2_kernels.h"
#include "gpt2_ops.h"
#include "gpt2_ztier.h"
#include "tools/bench_common.h"
#include "tools/commands.h"
#include "tools/bench_disk.h"
#include "tools/bench_gpt2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_STEPS 16

typedef struct run {
    zt_runtime *rt;
    gpt2_ztier g;
    gpt2_model *model;
} run;

/* hbm: ztier.hbm_capacity (the host backend's device budget); threads: the optimizer
 * pool's, the same as the matmuls' (one budget, as zt_gpt2 --threads). */
static int open_run(run *r, const gpt2_config *c, int B, int T, const char *offload,
                    const char *nvme, const char *overlap, const char *hbm, int threads, int stage)
{
    char cfg[2048];
    /* stage 0 keeps the optimizer state where the parameters are: the resident run's */
    const char *resident_optim = stage == 0 ? "none" : "cpu";
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"stage\": %d, \"offload_param\": {\"device\": \"%s\", "
             "\"nvme_path\": \"%s\"}, \"offload_optimizer\": {\"device\": \"%s\", "
             "\"nvme_path\": \"%s\"}},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}},"
             " \"ztier\": {\"hbm_capacity\": \"%s\", \"overlap_step\": \"%s\","
             " \"optimizer_threads\": %d}}",
             stage,
             !strcmp(offload, "all")          ? "nvme"
             : !strcmp(offload, "params-cpu") ? "cpu"
                                              : "none",
             nvme, strcmp(offload, "none") ? "nvme" : resident_optim, nvme, hbm, overlap, threads);
    memset(r, 0, sizeof *r);
    if (zt_runtime_create(NULL, cfg, &r->rt) != ZT_OK ||
        gpt2_ztier_register(&r->g, r->rt, c, 1) != ZT_OK || zt_runtime_commit(r->rt) != ZT_OK) {
        fprintf(stderr, "ztier bench gpt2: %s\n", zt_last_error(r->rt));
        return -1;
    }
    r->model = gpt2_model_create(c, B, T);
    if (!r->model)
        fprintf(stderr, "ztier bench gpt2: out of memory for the activations of batch %d x %d\n", B,
                T);
    return r->model ? 0 : -1;
}

static void close_run(run *r)
{
    gpt2_model_destroy(r->model);
    gpt2_ztier_free(&r->g);
    zt_runtime_destroy(r->rt);
}

double bench_gpt2_step(const char *cmd, gpt2_ztier *g, gpt2_model *model, const token_data *d,
                       int64_t step, int B, int T, int *in, int *tg)
{
    gpt2_source src = gpt2_ztier_source(g);
    float loss;
    tokens_batch(d, step, B, T, 0, B, in, tg);
    double t0 = bench_now();
    if (gpt2_forward(model, &src, in, tg, &loss) || gpt2_backward(model, &src, NULL) ||
        gpt2_model_status(model) || zt_step(g->rt, NULL, NULL) != ZT_OK) {
        fprintf(stderr, "%s: %s%s%s\n", cmd, gpt2_ztier_error(g),
                gpt2_model_status(model) ? "; on the GPU: " : "", gpt2_model_status_text(model));
        return -1;
    }
    return bench_now() - t0;
}

static double step_once(run *r, const token_data *d, int64_t step, int B, int T, int *in, int *tg)
{
    return bench_gpt2_step("ztier bench gpt2", &r->g, r->model, d, step, B, T, in, tg);
}

int cmd_bench_gpt2(int argc, char **argv)
{
    static const char *const known[] = {
        "config",  "batch",        "seq", "steps",   "nvme-path", "offload",    "text",
        "backend", "overlap-step", "hbm", "threads", "precision", "zero-stage", NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return 2;
    const char *v, *name = (v = bench_arg(argc, argv, "config")) ? v : "d12";
    const char *nvme = (v = bench_arg(argc, argv, "nvme-path")) ? v : ".";
    const char *offload = (v = bench_arg(argc, argv, "offload")) ? v : "optimizer";
    const char *overlap = (v = bench_arg(argc, argv, "overlap-step")) ? v : "auto";
    const char *hbm = bench_arg(argc, argv, "hbm"); /* the offloaded run's device budget */
    uint64_t hbm_bytes = 0;
    if (hbm && (bench_parse_size(hbm, &hbm_bytes) || hbm_bytes < (1u << 20)))
        return fprintf(stderr,
                       "ztier bench gpt2: --hbm '%s' is not a size of 1M or more "
                       "(e.g. 8G)\n",
                       hbm),
               2;
    const char *text = (v = bench_arg(argc, argv, "text")) ? v : "/usr/share/common-licenses/GPL-3";
    int B = (v = bench_arg(argc, argv, "batch")) ? atoi(v) : 4;
    int T = (v = bench_arg(argc, argv, "seq")) ? atoi(v) : 64;
    int steps = (v = bench_arg(argc, argv, "steps")) ? atoi(v) : 3;
    /* one thread budget for the matmuls and the optimizer pool, as zt_gpt2 --threads */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = (v = bench_arg(argc, argv, "threads")) ? atoi(v) : cores > 0 ? (int)cores : 1;
    if (threads < 1)
        return fprintf(stderr, "ztier bench gpt2: --threads must be >= 1\n"), 2;
    int stage = 3; /* zero_optimization.stage of both runs */
    if (bench_int_arg(argc, argv, "ztier bench gpt2", "zero-stage", 0, 3, &stage) != 0)
        return 2;
    gpt2_config c;
    token_data d;
    char err[512];
    if (gpt2_config_named(name, 0, &c) || B < 1 || T < 2 || steps < 1 || steps > MAX_STEPS ||
        (strcmp(offload, "optimizer") && strcmp(offload, "all") && strcmp(offload, "params-cpu")) ||
        (strcmp(overlap, "auto") && strcmp(overlap, "on") && strcmp(overlap, "off"))) {
        fprintf(
            stderr,
            "ztier bench gpt2: --config " GPT2_CONFIG_NAMES ", --steps 1..16, "
            "--offload optimizer|params-cpu|all, --overlap-step auto|on|off, --zero-stage 0-3\n");
        return 2;
    }
    if (T > c.max_seq)
        return fprintf(stderr,
                       "ztier bench gpt2: --seq %d is longer than %s's context of %d "
                       "tokens: use --seq %d or less\n",
                       T, name, c.max_seq, c.max_seq),
               2;
    const char *backend = (v = bench_arg(argc, argv, "backend")) ? v : "host";
    if (strcmp(backend, "host") && strcmp(backend, "cuda"))
        return fprintf(stderr, "ztier bench gpt2: --backend host|cuda\n"), 2;
    if (!strcmp(backend, "cuda") && !strcmp(offload, "params-cpu"))
        return fprintf(stderr, "ztier bench gpt2: --offload params-cpu is for the host backend; "
                               "with --backend cuda, --offload all puts the parameters and the "
                               "optimizer state in pinned host memory\n"),
               2;
    if (tokens_load_text(text, &d, err, sizeof err) != 0)
        return fprintf(stderr, "ztier bench gpt2: %s\n", err), 1;
    if (!strcmp(backend, "cuda")) {
#ifdef ZT_HAVE_GPT2_CUDA
        const char *precision = (v = bench_arg(argc, argv, "precision")) ? v : "bf16";
        int rc = gpt2_precision_parse(precision) < 0
                     ? (fprintf(stderr, "ztier bench gpt2: --precision bf16|tf32|fp32\n"), 2)
                     : bench_gpt2_cuda(&c, name, B, T, steps, offload, overlap, hbm,
                                       gpt2_precision_parse(precision), stage, &d,
                                       bench_flag(argc, argv, "json"));
#else
        fprintf(stderr, "ztier bench gpt2: --backend cuda needs a build with CUDA\n");
        int rc = 2;
#endif
        tokens_free(&d);
        return rc;
    }
    run res, off;
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    gpt2_set_threads(threads);
    if (open_run(&res, &c, B, T, "none", nvme, "auto", "16G", threads, stage) ||
        open_run(&off, &c, B, T, offload, nvme, overlap, hbm ? hbm : "16G", threads, stage)) {
        tokens_free(&d);
        return 1;
    }
    step_once(&res, &d, 0, B, T, in, tg), step_once(&off, &d, 0, B, T, in, tg); /* warm-up */
    zt_stats s0 = ZT_STATS_INIT, s1 = ZT_STATS_INIT, r0 = ZT_STATS_INIT, r1 = ZT_STATS_INIT;
    zt_stats_get(off.rt, &s0);
    zt_stats_get(res.rt, &r0);
    double rt_s[MAX_STEPS], ot_s[MAX_STEPS];
    for (int i = 0; i < steps; i++) {
        rt_s[i] = step_once(&res, &d, i + 1, B, T, in, tg);
        ot_s[i] = step_once(&off, &d, i + 1, B, T, in, tg);
    }
    zt_stats_get(off.rt, &s1);
    zt_stats_get(res.rt, &r1);
    double resident = bench_median(rt_s, steps), offloaded = bench_median(ot_s, steps);
    double rb = (double)(s1.nvme_read_bytes - s0.nvme_read_bytes) / steps;
    double wb = (double)(s1.nvme_write_bytes - s0.nvme_write_bytes) / steps;
    double rbw = 1, wbw = 1;
    close_run(&off); /* free its swap before probing the disk */
    if (bench_disk_bandwidth(nvme, 512u << 20, &rbw, &wbw) != 0) {
        close_run(&res);
        tokens_free(&d);
        free(in), free(tg);
        return 1;
    }
    double io = rb / rbw + wb / wbw, floor_s = resident > io ? resident : io;
    printf("ztier bench gpt2: %s (%.1fM parameters), batch %d x %d tokens, %s on NVMe in '%s', "
           "%d interleaved steps, %d threads (matmuls and optimizer)\n",
           name, (double)gpt2_num_params(&c) / 1e6, B, T,
           !strcmp(offload, "all")          ? "parameters and optimizer state"
           : !strcmp(offload, "params-cpu") ? "optimizer state (m, v; the parameters' home in "
                                              "host memory is the master)"
                                            : "optimizer state",
           nvme, steps, threads);
    printf("  resident step      %8.3f s  (%.0f tokens/s)\n", resident, B * T / resident);
    printf("  offloaded step     %8.3f s  (%.0f tokens/s)\n", offloaded, B * T / offloaded);
    printf("  NVMe per step      %8.2f GB read, %.2f GB written; at the folder's measured "
           "%.2f / %.2f GB/s that is %.3f s\n",
           rb / 1e9, wb / 1e9, rbw / 1e9, wbw / 1e9, io);
    printf("  per step            zt_step %.3f s (resident %.3f s); updates run by later calls "
           "%.3f s (%.1f layers)\n",
           (s1.step_s - s0.step_s) / steps, (r1.step_s - r0.step_s) / steps,
           (s1.overlapped_update_s - s0.overlapped_update_s) / steps,
           (double)(s1.overlapped_updates - s0.overlapped_updates) / steps);
    printf("  floor max(compute, I/O) %.3f s; offloaded / resident %.3f; offloaded / floor %.3f\n",
           floor_s, offloaded / resident, offloaded / floor_s);
    if (bench_flag(argc, argv, "json"))
        printf("{\"config\":\"%s\",\"batch\":%d,\"seq\":%d,\"offload\":\"%s\",\"resident_step_s\":%"
               ".4f,"
               "\"offload_step_s\":%.4f,\"ratio\":%.4f,\"floor_s\":%.4f,\"ratio_vs_floor\":%.4f,"
               "\"tokens_per_s\":%.1f}\n",
               name, B, T, offload, resident, offloaded, offloaded / resident, floor_s,
               offloaded / floor_s, B * T / offloaded);
    close_run(&res);
    tokens_free(&d);
    free(in), free(tg);
    return 0;
}

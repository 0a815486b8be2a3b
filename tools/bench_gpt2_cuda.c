/* SPDX-License-Identifier: MIT */
/* `ztier bench gpt2 --backend cuda`: GPT-2 steps on the GPU (the CUDA ops: kernels of
 * gpt2_rows.h and cuBLAS with TF32, on a stream of ztier's cuda backend), resident
 * (parameters and the optimizer in device memory) against offloaded (parameters in pinned
 * host memory with --offload all, the optimizer on the CPU), interleaved. Prints tokens/s,
 * model FLOPs utilization against the GPU's dense bf16 peak (6 N per token for the weights
 * plus 6 L T C for attention, forward and backward) and the share of the step spent waiting
 * (the offloaded step over the resident one). Built with CUDA; not run on this project's
 * machines without a GPU. */
#include "dataloader.h"
#include "gpt2_ops.h"
#include "gpt2_ztier.h"
#include "tools/bench_common.h"
#include "tools/bench_gpt2.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpu_run {
    zt_runtime *rt;
    gpt2_ztier g;
    gpt2_ops ops;
    gpt2_model *model;
} gpu_run;

/* hbm: ztier.hbm_capacity, or NULL for all free device memory. */
static int open_gpu_run(gpu_run *r, const gpt2_config *c, int B, int T, const char *params,
                        const char *optimizer, const char *overlap, const char *hbm, int precision,
                        int stage)
{
    char cfg[1024], why[256] = "", budget[64] = "";
    if (hbm)
        snprintf(budget, sizeof budget, ", \"hbm_capacity\": \"%s\"", hbm);
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"stage\": %d, \"offload_param\": {\"device\": \"%s\"},"
             " \"offload_optimizer\": {\"device\": \"%s\"}},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}},"
             " \"ztier\": {\"device_backend\": \"cuda\", \"comm_backend\": \"single\","
             " \"overlap_step\": \"%s\"%s}}",
             stage, params, optimizer, overlap, budget);
    memset(r, 0, sizeof *r);
    if (zt_runtime_create(NULL, cfg, &r->rt) != ZT_OK ||
        gpt2_ztier_register(&r->g, r->rt, c, 1) != ZT_OK || zt_runtime_commit(r->rt) != ZT_OK ||
        zt_stream_create(r->rt, &r->g.stream) != ZT_OK) {
        fprintf(stderr, "ztier bench gpt2: %s\n", zt_last_error(r->rt));
        return -1;
    }
    int device = -1;
    if (zt_runtime_device(r->rt, &device) != ZT_OK ||
        gpt2_ops_cuda_create(&r->ops, r->g.stream, device, (gpt2_precision)precision, why,
                             sizeof why) != 0)
        return fprintf(stderr, "ztier bench gpt2: %s\n", why), -1;
    if (!(r->model = gpt2_model_create_on(c, B, T, &r->ops, 0)))
        return fprintf(stderr,
                       "ztier bench gpt2: no device memory for the activations of %d x %d tokens "
                       "(%.1f GiB, beside ztier's budget; the resident and the offloaded run "
                       "each hold theirs): give a smaller --batch or --seq\n",
                       B, T,
                       gpt2_activation_bytes_as(c, B, T, 0, r->ops.att_keep, r->ops.act_bytes,
                                                r->ops.matmul_dgelu_backward != NULL) /
                           1073741824.0),
               -1;
    return 0;
}

static void close_gpu_run(gpu_run *r)
{
    gpt2_model_destroy(r->model);
    if (r->ops.ctx)
        gpt2_ops_cuda_destroy(&r->ops);
    gpt2_ztier_free(&r->g);
    zt_runtime_destroy(r->rt);
}

static double gpu_step(gpu_run *r, const token_data *d, int64_t step, int B, int T, int *in,
                       int *tg)
{
    return bench_gpt2_step("ztier bench gpt2", &r->g, r->model, d, step, B, T, in, tg);
}

int bench_gpt2_cuda(const gpt2_config *c, const char *name, int B, int T, int steps,
                    const char *offload, const char *overlap, const char *hbm, int precision,
                    int stage, const token_data *d, int json)
{
    gpu_run res, off;
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    int all = !strcmp(offload, "all");
    if (!in || !tg || open_gpu_run(&res, c, B, T, "none", "none", "auto", NULL, precision, stage) ||
        open_gpu_run(&off, c, B, T, all ? "cpu" : "none", "cpu", overlap, hbm, precision, stage)) {
        free(in), free(tg);
        return 1;
    }
    gpu_step(&res, d, 0, B, T, in, tg), gpu_step(&off, d, 0, B, T, in, tg); /* warm-up */
    double rt_s[16], ot_s[16];
    for (int i = 0; i < steps; i++) {
        rt_s[i] = gpu_step(&res, d, i + 1, B, T, in, tg);
        ot_s[i] = gpu_step(&off, d, i + 1, B, T, in, tg);
    }
    double resident = bench_median(rt_s, steps), offloaded = bench_median(ot_s, steps);
    double flops_per_token = gpt2_flops_per_token(c, T);
    char gpu[256] = "unknown GPU";
    double peak = gpt2_cuda_bf16_peak(gpu, sizeof gpu);
    double mfu_res = peak > 0 ? flops_per_token * B * T / resident / peak : 0;
    double mfu_off = peak > 0 ? flops_per_token * B * T / offloaded / peak : 0;
    printf("ztier bench gpt2: %s (%.1fM parameters) on %s, batch %d x %d tokens, offloaded: %s "
           "in host memory, device budget %s, %d interleaved steps\n",
           name, (double)gpt2_num_params(c) / 1e6, gpu, B, T,
           all ? "parameters and optimizer state" : "optimizer state",
           hbm ? hbm : "all free memory", steps);
    printf("  resident step   %8.3f s  (%.0f tokens/s, MFU %.3f of the bf16 dense peak; the "
           "matmuls run in %s)\n",
           resident, B * T / resident, mfu_res,
           precision == GPT2_BF16   ? "bf16"
           : precision == GPT2_TF32 ? "TF32"
                                    : "fp32");
    printf("  offloaded step  %8.3f s  (%.0f tokens/s, MFU %.3f)\n", offloaded, B * T / offloaded,
           mfu_off);
    printf("  offloaded / resident %.3f; waiting share of the offloaded step %.3f\n",
           offloaded / resident, 1 - resident / offloaded);
    if (json)
        printf("{\"backend\":\"cuda\",\"config\":\"%s\",\"batch\":%d,\"seq\":%d,\"offload\":\"%s\","
               "\"resident_step_s\":%.4f,\"offload_step_s\":%.4f,\"ratio\":%.4f,"
               "\"mfu_resident\":%.4f,\"mfu_offloaded\":%.4f,\"stall_share\":%.4f,"
               "\"tokens_per_s\":%.1f}\n",
               name, B, T, offload, resident, offloaded, offloaded / resident, mfu_res, mfu_off,
               1 - resident / offloaded, B * T / offloaded);
    close_gpu_run(&off);
    close_gpu_run(&res);
    free(in), free(tg);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/* 16-bit gradients summed over ranks in 16 bits (run under mpirun, 2 ranks; the MPI backend's
 * bf16 sum op, the same path reduce.c takes to NCCL's ncclBfloat16): with bf16.enabled the
 * reduce-scatters carry 2 B per element (zt_stats.reduced_bytes, and comm_bytes_* drop by 2 B
 * per element against communication_data_type "fp32"), ZeRO-3 and stage 2 alike; stage 1
 * reduces its own fp32 sums of the micro-steps, 4 B per element, as documented. The weights
 * after STEPS steps stay within 1e-3 of the fp32-summed run: on 2 ranks each sum is rounded to
 * bf16 once (relative error <= 2^-8 of the sum itself), which moves Adam's normalised update
 * by at most about 2 x 2^-8 of lr per step (STEPS x 0.01 x 2^-7 = 2.3e-4), plus one bf16
 * rounding of a weight of about 0.05 (2^-12). */
#include "comm/comm.h"

#include "vec_layers.h"
#include "ztier.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { LAYERS = 2, N = 4096, STEPS = 3, WORLD = 2 };

typedef struct result {
    uint64_t reduced, sent;
    float w[LAYERS * N];
} result;

/* STEPS steps of `accum` micro-steps at ZeRO `stage` (3: parameters on the CPU), the gradients
 * summed over ranks in `comm` ("auto" or "fp32"). */
static void train(int stage, int accum, const char *comm, result *out)
{
    char cfg[640];
    snprintf(cfg, sizeof cfg,
             "{\"bf16\": {\"enabled\": true}, \"communication_data_type\": \"%s\", "
             "\"gradient_accumulation_steps\": %d, \"zero_optimization\": {\"stage\": %d, %s"
             "\"offload_optimizer\": {\"device\": \"cpu\"}, "
             "\"stage3_param_persistence_threshold\": 0}, \"optimizer\": {\"type\": \"AdamW\", "
             "\"params\": {\"lr\": 0.01}}}",
             comm, accum, stage, stage == 3 ? "\"offload_param\": {\"device\": \"cpu\"}, " : "");
    int ids[LAYERS], p[LAYERS];
    char err[512];
    zt_runtime *rt = vec_layers_runtime(cfg, LAYERS, N, 5u, ids, p, err, sizeof err);
    if (!rt)
        printf("rank %d: %s\n", rank, err);
    require(rt != NULL, "the runtime", NULL);
    zt_stats before = ZT_STATS_INIT, after = ZT_STATS_INIT;
    zt_stats_get(rt, &before);
    for (int s = 0; s < STEPS; s++) {
        for (int a = 0; a < accum; a++)
            vec_layers_bf16_micro_step(rt, ids, LAYERS, N, 3 * s + a);
        require(zt_step(rt, NULL, NULL) == ZT_OK, "step", rt);
    }
    zt_stats_get(rt, &after);
    out->reduced = after.reduced_bytes - before.reduced_bytes;
    out->sent = after.comm_bytes_intra + after.comm_bytes_inter - before.comm_bytes_intra -
                before.comm_bytes_inter;
    for (int l = 0; l < LAYERS; l++)
        require(zt_param_read(rt, p[l], out->w + (size_t)l * N, N) == ZT_OK, "read", rt);
    zt_runtime_destroy(rt);
}

/* Bytes per element the reductions of `accum` micro-steps a step carried. */
static double per_element(const result *r, int reductions_per_step)
{
    return (double)r->reduced / ((double)STEPS * reductions_per_step * LAYERS * N);
}

static float max_diff(const result *a, const result *b)
{
    float d = 0;
    for (size_t i = 0; i < (size_t)LAYERS * N; i++)
        d = fmaxf(d, fabsf(a->w[i] - b->w[i]));
    return d;
}

int main(void)
{
    if (zt_launcher_world_size() != WORLD) {
        fprintf(stderr, "run under mpirun with %d ranks\n", WORLD);
        return 77;
    }
    rank = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0");
    static result s3, s3_fp32, s2, s1;
    train(3, 1, "auto", &s3);
    train(3, 1, "fp32", &s3_fp32);
    train(2, 2, "auto", &s2);
    train(1, 2, "auto", &s1);
    /* each layer's shard, as laid out: 16-element rows over the ranks */
    uint64_t shard = (uint64_t)(N + 16 * WORLD - 1) / (16 * WORLD) * 16;
    uint64_t saved = (uint64_t)STEPS * LAYERS * shard * 2 * (WORLD - 1); /* 2 B less each */
    float d = max_diff(&s3, &s3_fp32);
    printf("rank %d: bytes per reduced element: ZeRO-3 %.3f (fp32 wire %.3f), stage 2 %.3f, "
           "stage 1 %.3f; sent %llu against %llu with the fp32 wire (%llu less, want %llu); "
           "weights within %.3g of the fp32-summed run\n",
           rank, per_element(&s3, 1), per_element(&s3_fp32, 1), per_element(&s2, 2),
           per_element(&s1, 1), (unsigned long long)s3.sent, (unsigned long long)s3_fp32.sent,
           (unsigned long long)(s3_fp32.sent - s3.sent), (unsigned long long)saved, (double)d);
    /* reduced_bytes counts the padded layer (<= 16 x ranks elements more than N) */
    double pad = 1.0 + 16.0 * WORLD / N;
    require(per_element(&s3, 1) >= 2 && per_element(&s3, 1) <= 2 * pad,
            "ZeRO-3 bf16 reductions must move 2 B per element", NULL);
    require(per_element(&s3_fp32, 1) >= 4 && per_element(&s3_fp32, 1) <= 4 * pad,
            "communication_data_type fp32 must move 4 B per element", NULL);
    require(per_element(&s2, 2) >= 2 && per_element(&s2, 2) <= 2 * pad,
            "stage 2 bf16 reductions must move 2 B per element", NULL);
    require(per_element(&s1, 1) >= 4 && per_element(&s1, 1) <= 4 * pad,
            "stage 1 reduces its fp32 sums: 4 B per element", NULL);
    require(s3_fp32.sent - s3.sent == saved, "comm bytes must drop by 2 B per element", NULL);
    require(d <= 1e-3f, "the weights differ from the fp32-summed run by more than 1e-3", NULL);
    printf("rank %d: ok\n", rank);
    return 0;
}

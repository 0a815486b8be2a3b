/* SPDX-License-Identifier: MIT */
/* Gradient buckets where one rank has no room for their buffers (run under mpirun, 2 ranks):
 * rank 1's device budget holds a layer's gradients but not the step's bucket buffer (sized for
 * the three layers' gradients in fp32; the bf16 releases are summed in bf16 either way). Every rank must then reduce that step's releases one by one (no
 * rank issues a bucket the other does not), train on, and end with the weights, bit for bit,
 * of the same training where both ranks have room and pack the layers into buckets. */
#include "comm/comm.h"

#include "vec_layers.h"
#include "ztier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 3, N = 1 << 16, STEPS = 2 }; /* bf16: 128 KiB per layer, 768 KiB packed */

/* Trains STEPS steps on the given device budget per rank; returns the buckets issued and
 * writes the weights to w. */
static uint64_t train(const char *budget, float *w)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"offload_param\": "
             "{\"device\": \"cpu\"}, \"offload_optimizer\": {\"device\": \"cpu\"}, "
             "\"stage3_param_persistence_threshold\": 0}, \"optimizer\": {\"type\": \"AdamW\", "
             "\"params\": {\"lr\": 0.01}}, \"ztier\": {\"hbm_capacity\": \"%s\"}}",
             budget);
    int ids[LAYERS], p[LAYERS];
    char err[512];
    zt_runtime *rt = vec_layers_runtime(cfg, LAYERS, N, 3u, ids, p, err, sizeof err);
    if (!rt)
        printf("rank %d: %s\n", rank, err);
    require(rt != NULL, "the runtime", NULL);
    for (int s = 0; s < STEPS; s++) {
        vec_layers_bf16_micro_step(rt, ids, LAYERS, N, s);
        require(zt_step(rt, NULL, NULL) == ZT_OK, "step", rt);
    }
    for (int l = 0; l < LAYERS; l++)
        require(zt_param_read(rt, p[l], w + (size_t)l * N, N) == ZT_OK, "read", rt);
    zt_stats st = ZT_STATS_INIT;
    zt_stats_get(rt, &st);
    zt_runtime_destroy(rt);
    return st.reduce_buckets;
}

int main(void)
{
    if (zt_launcher_world_size() != 2) {
        fprintf(stderr, "run under mpirun with 2 ranks\n");
        return 77;
    }
    setenv("ZT_COMM_TIMEOUT", "20", 1);
    rank = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0");
    static float tight[LAYERS * N], ample[LAYERS * N];
    /* rank 1: the held gradients (384 KiB) and a layer's gathered parameters fit 1 MiB; with
     * the bucket buffer (768 KiB) they do not */
    uint64_t buckets_tight = train(rank == 1 ? "1M" : "16M", tight);
    uint64_t buckets_ample = train("16M", ample);
    printf("rank %d: %llu gradient buckets with rank 1 short of room, %llu with room on both; "
           "weights %s\n",
           rank, (unsigned long long)buckets_tight, (unsigned long long)buckets_ample,
           memcmp(tight, ample, sizeof ample) ? "DIFFER" : "bitwise equal");
    require(buckets_tight == 0, "a rank packed a bucket the other could not", NULL);
    require(buckets_ample == STEPS, "one bucket per step with room", NULL);
    require(!memcmp(tight, ample, sizeof ample), "the weights differ", NULL);
    printf("rank %d: ok\n", rank);
    return 0;
}

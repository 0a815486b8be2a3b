/* SPDX-License-Identifier: MIT */
/* Gradient reductions complete behind later layers (run under mpirun, 2 ranks): rank 1
 * sleeps DELAY seconds before each of its LAYERS backward releases. Rank 0's releases must
 * return without waiting for rank 1 (their collectives stay in flight until zt_step): its
 * backward pass takes less than one DELAY, where a release that waited for its collective
 * would take about LAYERS x DELAY. zt_step then waits for them, and the weights after two
 * steps equal, bit for bit, those of the same training without the delay. With
 * zero_optimization.overlap_comm false each release completes its collective: rank 0's
 * backward pass then waits for rank 1's releases (about LAYERS x DELAY), same weights. */
#include "comm/comm.h"

#include "vec_layers.h"
#include "ztier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { LAYERS = 4, N = 4096, STEPS = 2 };
#define DELAY 0.5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Trains STEPS steps; rank 1 sleeps delay s before each backward release. Returns rank 0's
 * longest backward pass (fetches and releases) and writes the weights to w. */
static double train(double delay, int overlap, float *w)
{
    /* persistent layers: no gathers, so rank 0's backward fetches never wait for rank 1;
     * reduce_bucket_size 1: each release's collective is issued by the release itself */
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"reduce_bucket_size\": 1, \"overlap_comm\": %s, "
             "\"offload_param\": {\"device\": \"cpu\"}, "
             "\"offload_optimizer\": {\"device\": \"cpu\"}, "
             "\"stage3_param_persistence_threshold\": 1000000}, "
             "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}}}",
             overlap ? "true" : "false");
    int ids[LAYERS], p[LAYERS];
    char err[512];
    zt_runtime *rt = vec_layers_runtime(cfg, LAYERS, N, 7u, ids, p, err, sizeof err);
    if (!rt)
        printf("rank %d: %s\n", rank, err);
    require(rt != NULL, "the runtime", NULL);
    float first[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        static float w0[N];
        require(zt_param_read(rt, p[l], w0, N) == ZT_OK, "read", rt);
        first[l] = w0[0];
    }
    double longest = 0;
    for (int s = 0; s < STEPS; s++) {
        zt_layer_view v;
        for (int l = 0; l < LAYERS; l++) {
            require(zt_fetch(rt, ids[l], ZT_FORWARD, &v) == ZT_OK, "fetch", rt);
            require(zt_release(rt, ids[l], ZT_FORWARD) == ZT_OK, "release", rt);
        }
        double t0 = now_s();
        for (int l = LAYERS - 1; l >= 0; l--) {
            require(zt_fetch(rt, ids[l], ZT_BACKWARD, &v) == ZT_OK, "fetch", rt);
            float *g = v.params[0].grad;
            const float *x = v.params[0].data;
            for (int i = 0; i < N; i++) /* differs by rank, layer, step and weight */
                g[i] = x[i] * (float)(rank + 1) + 1e-3f * (float)((i + 3 * l + s) % 11 - 5);
            if (rank == 1 && delay > 0)
                usleep((useconds_t)(delay * 1e6));
            require(zt_release(rt, ids[l], ZT_BACKWARD) == ZT_OK, "release", rt);
        }
        double dt = now_s() - t0;
        longest = dt > longest ? dt : longest;
        require(zt_step(rt, NULL, NULL) == ZT_OK, "step", rt);
    }
    for (int l = 0; l < LAYERS; l++) {
        require(zt_param_read(rt, p[l], w + (size_t)l * N, N) == ZT_OK, "read", rt);
        require(w[(size_t)l * N] != first[l], "a layer's weights did not change", NULL);
    }
    zt_runtime_destroy(rt);
    return longest;
}

int main(void)
{
    if (zt_launcher_world_size() != 2) {
        fprintf(stderr, "run under mpirun with 2 ranks\n");
        return 77;
    }
    rank = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0");
    static float delayed[LAYERS * N], plain[LAYERS * N], unlapped[LAYERS * N];
    double backward = train(DELAY, 1, delayed);
    train(0, 1, plain);
    double waiting = train(DELAY, 0, unlapped);
    printf("rank %d: backward pass %.3f s with rank 1 sleeping %.1f s before each of %d "
           "releases; %.3f s with overlap_comm false\n",
           rank, backward, DELAY, LAYERS, waiting);
    if (rank == 0) {
        require(backward < DELAY, "the releases waited for rank 1", NULL);
        require(waiting > (LAYERS - 0.5) * DELAY,
                "with overlap_comm false the releases did not wait for their collectives", NULL);
    }
    require(!memcmp(delayed, plain, sizeof plain), "weights differ from the run without delay",
            NULL);
    require(!memcmp(unlapped, plain, sizeof plain),
            "weights with overlap_comm false differ from the run without delay", NULL);
    printf("rank %d: ok\n", rank);
    return 0;
}

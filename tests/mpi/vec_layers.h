/* SPDX-License-Identifier: MIT */
/* The model of the MPI tests that time or count reductions, and how they fail: one program
 * per test, so the rank and require() live here. */
#ifndef ZT_TESTS_MPI_VEC_LAYERS_H
#define ZT_TESTS_MPI_VEC_LAYERS_H

#include "ztier.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank; /* this process's, set by main */

/* Ends the rank with what failed (mpirun then ends the job). */
static inline void require(int ok, const char *what, zt_runtime *rt)
{
    if (!ok) {
        printf("rank %d: FAILED: %s%s%s\n", rank, what, rt ? ": " : "",
               rt ? zt_last_error(rt) : "");
        exit(1);
    }
}

/* A runtime of `layers` layers of one 1-D parameter of n elements each ("l0", "l1", ...;
 * normal(0, 0.02) values, seeded seed + layer), committed; NULL with the runtime's message in
 * err when a call fails. */
static inline zt_runtime *vec_layers_runtime(const char *cfg, int layers, int64_t n, unsigned seed,
                                             int *ids, int *params, char *err, size_t len)
{
    zt_runtime *rt = NULL;
    int ok = zt_runtime_create(NULL, cfg, &rt) == ZT_OK;
    for (int l = 0; ok && l < layers; l++) {
        char name[16];
        int64_t shape[1] = {n};
        zt_init init = {.kind = ZT_INIT_NORMAL, .a = 0.0f, .b = 0.02f, .seed = seed + (unsigned)l};
        snprintf(name, sizeof name, "l%d", l);
        ok = zt_layer_add(rt, name, &ids[l]) == ZT_OK &&
             zt_param_add(rt, ids[l], name, shape, 1, &init, &params[l]) == ZT_OK;
    }
    ok = ok && zt_runtime_commit(rt) == ZT_OK;
    if (!ok) {
        snprintf(err, len, "%s", zt_last_error(rt));
        zt_runtime_destroy(rt);
        return NULL;
    }
    return rt;
}

/* One bf16 micro-step on a vec_layers_runtime: every layer fetched and released forward,
 * then backward in reverse with its gradients set to values that differ by rank, layer, salt
 * (the step and micro-step) and element (multiples of 0.01 in [-0.11, 0.11], truncated to
 * bf16). Ends the rank when a call fails. */
static inline void vec_layers_bf16_micro_step(zt_runtime *rt, const int *ids, int layers, int64_t n,
                                              int salt)
{
    zt_layer_view v;
    for (int l = 0; l < layers; l++) {
        require(zt_fetch(rt, ids[l], ZT_FORWARD, &v) == ZT_OK, "fetch", rt);
        require(zt_release(rt, ids[l], ZT_FORWARD) == ZT_OK, "release", rt);
    }
    for (int l = layers - 1; l >= 0; l--) {
        require(zt_fetch(rt, ids[l], ZT_BACKWARD, &v) == ZT_OK, "backward fetch", rt);
        uint16_t *g = v.params[0].grad;
        for (int64_t i = 0; i < n; i++) {
            float x = 1e-2f * (float)((i * (rank + 2) + 5 * l + salt) % 23 - 11);
            uint32_t b;
            memcpy(&b, &x, 4);
            g[i] = (uint16_t)(b >> 16);
        }
        require(zt_release(rt, ids[l], ZT_BACKWARD) == ZT_OK, "backward release", rt);
    }
}

#endif

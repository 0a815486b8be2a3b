/* SPDX-License-Identifier: MIT */
/* The model of the MPI tests that time or count reductions, and how they fail: one program
 * per test, so the rank and require() live here. */
#ifndef ZT_TESTS_MPI_VEC_LAYERS_H
#define ZT_TESTS_MPI_VEC_LAYERS_H

#include "ztier.h"

#include <stdio.h>
#include <stdlib.h>

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

#endif

/* SPDX-License-Identifier: MIT */
/* Every weight and bias of the minimal model read back through zt_param_read, for tests that
 * compare two runs. */
#ifndef ZT_TESTS_MLP_WEIGHTS_H
#define ZT_TESTS_MLP_WEIGHTS_H

#include "train.h"

typedef struct mlp_weights {
    float *w[2 * MLP_LAYERS]; /* weight, bias of each layer */
    int64_t n[2 * MLP_LAYERS];
} mlp_weights;

/* ZT_OK, or the status of the read that failed (what was read is freed). */
zt_status mlp_weights_read(zt_runtime *rt, const minimal_model *m, mlp_weights *out);
/* The same for Adam's m or v (zt_param_read_state), or the master. */
zt_status mlp_weights_read_state(zt_runtime *rt, const minimal_model *m, zt_param_state state,
                                 mlp_weights *out);
void mlp_weights_free(mlp_weights *w);
/* 0 when bitwise equal, else the largest |a - b| / max(|b|, 1e-3). */
double mlp_weights_max_rel_diff(const mlp_weights *a, const mlp_weights *b);

/* For cmocka tests; each fails the running test with the runtime's message on an error. */
void mlp_weights_read_or_fail(zt_runtime *rt, const minimal_model *m, mlp_weights *out);
/* Fails unless a and b are bitwise equal; what names the comparison. */
void mlp_weights_assert_same(const mlp_weights *a, const mlp_weights *b, const char *what);

#endif

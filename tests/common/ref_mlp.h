/* SPDX-License-Identifier: MIT */
/* An independent in-memory trainer for the minimal example's MLP: its own parameter arrays
 * and its own AdamW with global-norm clipping, written without the runtime. Tests start it
 * from the runtime's initial values (read back with zt_param_read) and compare after N
 * steps. Gradients of a step are averaged over `accum` micro-batches of the global batch. */
#ifndef ZT_TESTS_REF_MLP_H
#define ZT_TESTS_REF_MLP_H

#include "train.h"

#define REF_TENSORS (2 * MLP_LAYERS)

typedef struct ref_hparams {
    float lr, beta1, beta2, eps, weight_decay, clip;
} ref_hparams;

typedef struct ref_tensor {
    int64_t n;
    float *p, *g, *m, *v;
} ref_tensor;

typedef struct ref_mlp {
    mlp_dims d;
    ref_hparams h;
    ref_tensor t[REF_TENSORS]; /* fc1.weight, fc1.bias, fc2.weight, ... */
    int steps;
} ref_mlp;

/* Copies the runtime's current parameters (a collective under MPI: call on every rank). */
int ref_mlp_init(ref_mlp *r, zt_runtime *rt, const minimal_model *m, const ref_hparams *h);
/* One optimizer step over micro-batches [first_batch, first_batch + accum) of the global
 * batch; returns the mean loss. */
float ref_mlp_step(ref_mlp *r, int64_t first_batch, int accum);
/* Largest relative L2 error between the runtime's parameters and the reference's. */
double ref_mlp_max_rel_error(const ref_mlp *r, zt_runtime *rt, const minimal_model *m);
void ref_mlp_free(ref_mlp *r);

/* `steps` optimizer steps of one micro-step each through the runtime, every rank computing
 * its rows of the global batch, then the counters into *stats (a collective under MPI). The
 * first failure's status. */
zt_status ref_mlp_train_ranks(zt_runtime *rt, const minimal_model *m, int steps, zt_stats *stats);

/* A config JSON for the same hyper-parameters with the given placements and extra
 * "zero_optimization" / "ztier" members (may be ""). Every layer is sharded (persistence
 * threshold 0) unless extra_zero sets the threshold again. Returns a static buffer. */
const char *ref_mlp_config(const ref_hparams *h, const char *param_dev, const char *opt_dev,
                           int accum, const char *extra_zero, const char *extra_ztier);

#endif

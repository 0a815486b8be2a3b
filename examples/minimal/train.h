/* SPDX-License-Identifier: MIT */
/* The minimal example's model registered with ztier and one training micro-step driven
 * through the per-layer API (fetch, compute, release). Uses only ztier.h. */
#ifndef ZT_EXAMPLE_TRAIN_H
#define ZT_EXAMPLE_TRAIN_H

#include "mlp.h"
#include "ztier.h"

#define MLP_LAYERS 3

typedef struct minimal_model {
    mlp_dims d;             /* batch = global batch size */
    int layer[MLP_LAYERS];  /* ztier layer ids */
    int weight[MLP_LAYERS]; /* parameter ids, W [out, in] */
    int bias[MLP_LAYERS];   /* parameter ids, b [out] */
    int n_in[MLP_LAYERS], n_out[MLP_LAYERS];
} minimal_model;

/* Registers layers fc1..fc3 with normal(0, 1/sqrt(fan_in)) weights and zero biases. */
zt_status minimal_register(zt_runtime *rt, const mlp_dims *d, uint64_t seed, minimal_model *m);

/* Forward and backward of rows [row0, row0 + rows) of global batch `step`; gradients are
 * accumulated by ztier. *loss receives the mean loss over those rows. */
zt_status minimal_micro_step(zt_runtime *rt, const minimal_model *m, int64_t step, int row0,
                             int rows, float *loss);

/* minimal_micro_step with every layer's compute queued on `stream` (from zt_stream_create:
 * host functions on the host backend) between zt_fetch_async and zt_release_async; the host
 * waits for the stream once, at the end, for the loss. delay_us > 0 makes each layer's work
 * sleep first (a slow device, for tests). */
zt_status minimal_micro_step_on(zt_runtime *rt, const minimal_model *m, void *stream, int64_t step,
                                int row0, int rows, int delay_us, float *loss);

/* The same in two halves: queue returns once every layer's work is queued and every fetch
 * and release made (the host does not wait for the stream); finish waits for the stream and
 * gives the loss. finish is called once per queue, also after a failed queue. */
typedef struct minimal_stream_step minimal_stream_step;
zt_status minimal_micro_step_queue(zt_runtime *rt, const minimal_model *m, void *stream,
                                   int64_t step, int row0, int rows, int delay_us,
                                   minimal_stream_step **out);
zt_status minimal_micro_step_finish(zt_runtime *rt, void *stream, minimal_stream_step *q,
                                    float *loss);

/* The loss of rows [row0, row0 + rows) of batch `batch` without gradients: a forward with
 * ZT_INFERENCE fetches, which may run between or inside training steps without disturbing
 * the recorded layer order. */
zt_status minimal_evaluate(zt_runtime *rt, const minimal_model *m, int64_t batch, int row0,
                           int rows, float *loss);

#endif

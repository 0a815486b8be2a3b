/* SPDX-License-Identifier: MIT */
/* A small MLP (dense+tanh, dense+tanh, dense) on a synthetic regression task: the model
 * code the minimal example trains through ztier. Pure functions over caller-owned arrays;
 * shapes in comments are [rows, cols], row-major. */
#ifndef ZT_EXAMPLE_MLP_H
#define ZT_EXAMPLE_MLP_H

#include <stdint.h>

typedef struct mlp_dims {
    int in, hidden, out, batch;
} mlp_dims;

/* out[B,O] = in[B,I] @ W[O,I]^T + b[O] */
void dense_forward(const float *in, const float *w, const float *b, float *out, int batch, int n_in,
                   int n_out);
/* dw[O,I] += dout^T @ in; db[O] += sum_b dout; din[B,I] = dout @ W (din may be NULL) */
void dense_backward(const float *in, const float *w, const float *dout, float *dw, float *db,
                    float *din, int batch, int n_in, int n_out);
void tanh_forward(float *x, int64_t n);                   /* in place */
void tanh_backward(const float *y, float *dy, int64_t n); /* dy *= 1 - y^2 */
/* 0.5 * mean((y - t)^2); dy = (y - t) / n */
float mse_loss(const float *y, const float *t, float *dy, int64_t n);

/* Deterministic batch `step` of the task: x uniform in [-1, 1), t = teacher(x). */
void make_batch(const mlp_dims *d, int64_t step, float *x, float *t);

#endif

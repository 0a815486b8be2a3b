/* SPDX-License-Identifier: MIT */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

zt_status minimal_register(zt_runtime *rt, const mlp_dims *d, uint64_t seed, minimal_model *m)
{
    memset(m, 0, sizeof *m);
    m->d = *d;
    int sizes[MLP_LAYERS + 1] = {d->in, d->hidden, d->hidden, d->out};
    for (int l = 0; l < MLP_LAYERS; l++) {
        char name[32];
        m->n_in[l] = sizes[l];
        m->n_out[l] = sizes[l + 1];
        snprintf(name, sizeof name, "fc%d", l + 1);
        zt_status st = zt_layer_add(rt, name, &m->layer[l]);
        if (st != ZT_OK)
            return st;
        int64_t wshape[2] = {sizes[l + 1], sizes[l]}, bshape[1] = {sizes[l + 1]};
        zt_init winit = {ZT_INIT_NORMAL, 0.0f, 1.0f / sqrtf((float)sizes[l]), seed, NULL, NULL};
        snprintf(name, sizeof name, "fc%d.weight", l + 1);
        st = zt_param_add(rt, m->layer[l], name, wshape, 2, &winit, &m->weight[l]);
        snprintf(name, sizeof name, "fc%d.bias", l + 1);
        if (st == ZT_OK)
            st = zt_param_add(rt, m->layer[l], name, bshape, 1, NULL, &m->bias[l]);
        if (st != ZT_OK)
            return st;
    }
    return ZT_OK;
}

/* Activations of one micro-step: acts[0] is the input, acts[l+1] the output of layer l. */
typedef struct activations {
    float *acts[MLP_LAYERS + 1];
    float *grad_in, *grad_out;
    float *target;
} activations;

static void free_acts(activations *a)
{
    for (int l = 0; l <= MLP_LAYERS; l++)
        free(a->acts[l]);
    free(a->grad_in);
    free(a->grad_out);
    free(a->target);
}

static int alloc_acts(const minimal_model *m, int rows, activations *a)
{
    memset(a, 0, sizeof *a);
    int widest = m->d.in > m->d.hidden ? m->d.in : m->d.hidden;
    widest = widest > m->d.out ? widest : m->d.out;
    a->acts[0] = malloc(sizeof(float) * (size_t)m->d.batch * (size_t)m->d.in);
    for (int l = 0; l < MLP_LAYERS; l++)
        a->acts[l + 1] = malloc(sizeof(float) * (size_t)rows * (size_t)m->n_out[l]);
    a->grad_in = malloc(sizeof(float) * (size_t)rows * (size_t)widest);
    a->grad_out = malloc(sizeof(float) * (size_t)rows * (size_t)widest);
    a->target = malloc(sizeof(float) * (size_t)m->d.batch * (size_t)m->d.out);
    int ok = a->grad_in && a->grad_out && a->target;
    for (int l = 0; l <= MLP_LAYERS; l++)
        ok = ok && a->acts[l];
    return ok ? 0 : -1;
}

/* pass: ZT_FORWARD in training, ZT_INFERENCE for an evaluation. */
static zt_status forward(zt_runtime *rt, const minimal_model *m, activations *a, int rows,
                         zt_pass pass)
{
    for (int l = 0; l < MLP_LAYERS; l++) {
        zt_layer_view v;
        zt_status st = zt_fetch(rt, m->layer[l], pass, &v);
        if (st != ZT_OK)
            return st;
        if (v.params[0].dtype != ZT_F32) {
            zt_release(rt, m->layer[l], pass);
            return ZT_ERR_UNSUPPORTED; /* this example computes in fp32 */
        }
        dense_forward(a->acts[l], v.params[0].data, v.params[1].data, a->acts[l + 1], rows,
                      m->n_in[l], m->n_out[l]);
        if (l < MLP_LAYERS - 1)
            tanh_forward(a->acts[l + 1], (int64_t)rows * m->n_out[l]);
        st = zt_release(rt, m->layer[l], pass);
        if (st != ZT_OK)
            return st;
    }
    return ZT_OK;
}

/* a->grad_out holds dLoss/d(output of the last layer) on entry. */
static zt_status backward(zt_runtime *rt, const minimal_model *m, activations *a, int rows)
{
    for (int l = MLP_LAYERS - 1; l >= 0; l--) {
        zt_layer_view v;
        zt_status st = zt_fetch(rt, m->layer[l], ZT_BACKWARD, &v);
        if (st != ZT_OK)
            return st;
        if (l < MLP_LAYERS - 1)
            tanh_backward(a->acts[l + 1], a->grad_out, (int64_t)rows * m->n_out[l]);
        dense_backward(a->acts[l], v.params[0].data, a->grad_out, v.params[0].grad,
                       v.params[1].grad, l > 0 ? a->grad_in : NULL, rows, m->n_in[l], m->n_out[l]);
        st = zt_release(rt, m->layer[l], ZT_BACKWARD);
        if (st != ZT_OK)
            return st;
        float *t = a->grad_in;
        a->grad_in = a->grad_out;
        a->grad_out = t;
    }
    return ZT_OK;
}

/* Forward (and with `train`, backward) of rows [row0, row0 + rows) of batch `step`. */
static zt_status run_batch(zt_runtime *rt, const minimal_model *m, int64_t step, int row0, int rows,
                           int train, float *loss)
{
    activations a;
    if (alloc_acts(m, rows, &a) != 0) {
        free_acts(&a);
        return ZT_ERR_NOMEM;
    }
    make_batch(&m->d, step, a.acts[0], a.target);
    /* this rank's rows of the global batch */
    memmove(a.acts[0], a.acts[0] + (size_t)row0 * m->d.in, sizeof(float) * (size_t)rows * m->d.in);
    const float *target = a.target + (size_t)row0 * m->d.out;
    zt_status st = forward(rt, m, &a, rows, train ? ZT_FORWARD : ZT_INFERENCE);
    if (st == ZT_OK) {
        *loss = mse_loss(a.acts[MLP_LAYERS], target, a.grad_out, (int64_t)rows * m->d.out);
        if (train)
            st = backward(rt, m, &a, rows);
    }
    free_acts(&a);
    return st;
}

zt_status minimal_micro_step(zt_runtime *rt, const minimal_model *m, int64_t step, int row0,
                             int rows, float *loss)
{
    return run_batch(rt, m, step, row0, rows, 1, loss);
}

zt_status minimal_evaluate(zt_runtime *rt, const minimal_model *m, int64_t batch, int row0,
                           int rows, float *loss)
{
    return run_batch(rt, m, batch, row0, rows, 0, loss);
}

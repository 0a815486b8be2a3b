/* SPDX-License-Identifier: MIT */
/* The minimal model's micro-step on a stream: the way a trainer that computes on a device
 * stream uses ztier. Each layer's compute is queued on the stream (here as host functions,
 * the host device backend's "kernels"; a CUDA trainer would launch kernels on its
 * cudaStream_t) between zt_fetch_async and zt_release_async, and the host never waits for
 * the stream inside the layer loop; it synchronizes once at the end for the loss. */
#include "train.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct stream_step {
    const minimal_model *m;
    int rows, delay_us;
    float *acts[MLP_LAYERS + 1];
    float *grad_in, *grad_out;
    float *target;
    float loss;
} stream_step;

/* One layer's work; the pointers are taken at fetch time (a later fetch of the same layer
 * refills the views while this task may still wait on the stream). */
typedef struct layer_task {
    stream_step *s;
    int layer;
    const float *w, *b;
    float *dw, *db;
} layer_task;

static void forward_task(void *arg)
{
    layer_task *t = arg;
    stream_step *s = t->s;
    int l = t->layer;
    if (s->delay_us)
        usleep((useconds_t)s->delay_us);
    dense_forward(s->acts[l], t->w, t->b, s->acts[l + 1], s->rows, s->m->n_in[l], s->m->n_out[l]);
    if (l < MLP_LAYERS - 1)
        tanh_forward(s->acts[l + 1], (int64_t)s->rows * s->m->n_out[l]);
}

static void loss_task(void *arg)
{
    stream_step *s = arg;
    s->loss = mse_loss(s->acts[MLP_LAYERS], s->target, s->grad_out, (int64_t)s->rows * s->m->d.out);
}

static void backward_task(void *arg)
{
    layer_task *t = arg;
    stream_step *s = t->s;
    int l = t->layer;
    if (s->delay_us)
        usleep((useconds_t)s->delay_us);
    if (l < MLP_LAYERS - 1)
        tanh_backward(s->acts[l + 1], s->grad_out, (int64_t)s->rows * s->m->n_out[l]);
    dense_backward(s->acts[l], t->w, s->grad_out, t->dw, t->db, l > 0 ? s->grad_in : NULL, s->rows,
                   s->m->n_in[l], s->m->n_out[l]);
    float *g = s->grad_in;
    s->grad_in = s->grad_out;
    s->grad_out = g;
}

static void free_step(stream_step *s)
{
    for (int l = 0; l <= MLP_LAYERS; l++)
        free(s->acts[l]);
    free(s->grad_in), free(s->grad_out), free(s->target);
}

static int alloc_step(stream_step *s, const minimal_model *m, int rows)
{
    const mlp_dims *d = &m->d;
    int widest = d->in > d->hidden ? d->in : d->hidden;
    widest = widest > d->out ? widest : d->out;
    s->acts[0] = malloc(sizeof(float) * (size_t)d->batch * (size_t)d->in);
    for (int l = 0; l < MLP_LAYERS; l++)
        s->acts[l + 1] = malloc(sizeof(float) * (size_t)rows * (size_t)m->n_out[l]);
    s->grad_in = malloc(sizeof(float) * (size_t)rows * (size_t)widest);
    s->grad_out = malloc(sizeof(float) * (size_t)rows * (size_t)widest);
    s->target = malloc(sizeof(float) * (size_t)d->batch * (size_t)d->out);
    int ok = s->grad_in && s->grad_out && s->target;
    for (int l = 0; l <= MLP_LAYERS; l++)
        ok = ok && s->acts[l];
    return ok ? 0 : -1;
}

/* Fetch, queue the layer's task, release: all stream-ordered. */
static zt_status run_layer(zt_runtime *rt, void *stream, layer_task *t, zt_pass pass)
{
    zt_layer_view v;
    int id = t->s->m->layer[t->layer];
    zt_status st = zt_fetch_async(rt, id, pass, stream, &v);
    if (st != ZT_OK)
        return st;
    if (v.params[0].dtype != ZT_F32) {
        zt_release_async(rt, id, pass, stream);
        return ZT_ERR_UNSUPPORTED; /* this example computes in fp32 */
    }
    t->w = v.params[0].data, t->b = v.params[1].data;
    t->dw = v.params[0].grad, t->db = v.params[1].grad;
    st = zt_stream_launch(rt, stream, pass == ZT_BACKWARD ? backward_task : forward_task, t);
    zt_status rel = zt_release_async(rt, id, pass, stream);
    return st != ZT_OK ? st : rel;
}

struct minimal_stream_step {
    stream_step s;
    layer_task fwd[MLP_LAYERS], bwd[MLP_LAYERS];
};

zt_status minimal_micro_step_queue(zt_runtime *rt, const minimal_model *m, void *stream,
                                   int64_t step, int row0, int rows, int delay_us,
                                   minimal_stream_step **out)
{
    minimal_stream_step *q = calloc(1, sizeof *q);
    *out = q;
    if (!q)
        return ZT_ERR_NOMEM;
    stream_step *s = &q->s;
    *s = (stream_step){m, rows, delay_us, {0}, NULL, NULL, NULL, 0};
    if (alloc_step(s, m, rows) != 0)
        return ZT_ERR_NOMEM;
    make_batch(&m->d, step, s->acts[0], s->target);
    memmove(s->acts[0], s->acts[0] + (size_t)row0 * m->d.in,
            sizeof(float) * (size_t)rows * m->d.in);
    memmove(s->target, s->target + (size_t)row0 * m->d.out,
            sizeof(float) * (size_t)rows * m->d.out);
    zt_status st = ZT_OK;
    for (int l = 0; st == ZT_OK && l < MLP_LAYERS; l++) {
        q->fwd[l] = (layer_task){s, l, NULL, NULL, NULL, NULL};
        st = run_layer(rt, stream, &q->fwd[l], ZT_FORWARD);
    }
    if (st == ZT_OK)
        st = zt_stream_launch(rt, stream, loss_task, s);
    for (int l = MLP_LAYERS - 1; st == ZT_OK && l >= 0; l--) {
        q->bwd[l] = (layer_task){s, l, NULL, NULL, NULL, NULL};
        st = run_layer(rt, stream, &q->bwd[l], ZT_BACKWARD);
    }
    return st;
}

zt_status minimal_micro_step_finish(zt_runtime *rt, void *stream, minimal_stream_step *q,
                                    float *loss)
{
    if (!q)
        return ZT_OK;
    /* the tasks read q: they finish before it goes away */
    zt_status st = zt_stream_synchronize(rt, stream);
    *loss = q->s.loss;
    free_step(&q->s);
    free(q);
    return st;
}

zt_status minimal_micro_step_on(zt_runtime *rt, const minimal_model *m, void *stream, int64_t step,
                                int row0, int rows, int delay_us, float *loss)
{
    minimal_stream_step *q = NULL;
    zt_status st = minimal_micro_step_queue(rt, m, stream, step, row0, rows, delay_us, &q);
    zt_status fin = minimal_micro_step_finish(rt, stream, q, loss);
    return st != ZT_OK ? st : fin;
}

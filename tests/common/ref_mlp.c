/* SPDX-License-Identifier: MIT */
#include "ref_mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int param_id(const minimal_model *m, int k)
{
    return k % 2 ? m->bias[k / 2] : m->weight[k / 2];
}

int ref_mlp_init(ref_mlp *r, zt_runtime *rt, const minimal_model *m, const ref_hparams *h)
{
    memset(r, 0, sizeof *r);
    r->d = m->d;
    r->h = *h;
    for (int k = 0; k < REF_TENSORS; k++) {
        int l = k / 2;
        ref_tensor *x = &r->t[k];
        x->n = k % 2 ? m->n_out[l] : (int64_t)m->n_in[l] * m->n_out[l];
        x->p = calloc((size_t)x->n, sizeof(float));
        x->g = calloc((size_t)x->n, sizeof(float));
        x->m = calloc((size_t)x->n, sizeof(float));
        x->v = calloc((size_t)x->n, sizeof(float));
        if (zt_param_read(rt, param_id(m, k), x->p, x->n) != ZT_OK)
            return -1;
    }
    return 0;
}

static void adamw(ref_mlp *r)
{
    const ref_hparams *h = &r->h;
    double sumsq = 0.0;
    for (int k = 0; k < REF_TENSORS; k++)
        for (int64_t i = 0; i < r->t[k].n; i++)
            sumsq += (double)r->t[k].g[i] * r->t[k].g[i];
    float norm = (float)sqrt(sumsq);
    float coef = h->clip > 0 && norm > h->clip ? h->clip / (norm + 1e-6f) : 1.0f;
    int step = ++r->steps;
    /* the documented update (optimizer/adam.h): bias corrections folded into the step size
     * and the denominator, computed in double */
    float step_size = (float)(h->lr / (1.0 - pow(h->beta1, step)));
    float inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(h->beta2, step)));
    for (int k = 0; k < REF_TENSORS; k++) {
        ref_tensor *t = &r->t[k];
        for (int64_t i = 0; i < t->n; i++) {
            float g = t->g[i] * coef;
            t->m[i] = h->beta1 * t->m[i] + (1.0f - h->beta1) * g;
            t->v[i] = h->beta2 * t->v[i] + (1.0f - h->beta2) * (g * g);
            t->p[i] -= h->lr * h->weight_decay * t->p[i];
            t->p[i] -= step_size * (t->m[i] / (sqrtf(t->v[i]) * inv_sqrt_bc2 + h->eps));
            t->g[i] = 0.0f;
        }
    }
}

/* Forward and backward of one whole batch, adding gradients * scale into t[].g. */
static float micro_batch(ref_mlp *r, int64_t batch, float scale)
{
    const mlp_dims *d = &r->d;
    int sizes[MLP_LAYERS + 1] = {d->in, d->hidden, d->hidden, d->out};
    int widest = d->in > d->hidden ? d->in : d->hidden, B = d->batch;
    size_t wide = (size_t)B * (size_t)(widest > d->out ? widest : d->out);
    float *acts[MLP_LAYERS + 1], *gin = malloc(wide * sizeof(float)),
                                 *gout = malloc(wide * sizeof(float));
    float *target = malloc(sizeof(float) * (size_t)B * (size_t)d->out);
    for (int l = 0; l <= MLP_LAYERS; l++)
        acts[l] = malloc(wide * sizeof(float));
    make_batch(d, batch, acts[0], target);
    for (int l = 0; l < MLP_LAYERS; l++) {
        dense_forward(acts[l], r->t[2 * l].p, r->t[2 * l + 1].p, acts[l + 1], B, sizes[l],
                      sizes[l + 1]);
        if (l < MLP_LAYERS - 1)
            tanh_forward(acts[l + 1], (int64_t)B * sizes[l + 1]);
    }
    float loss = mse_loss(acts[MLP_LAYERS], target, gout, (int64_t)B * d->out);
    for (int64_t i = 0; i < (int64_t)B * d->out; i++)
        gout[i] *= scale;
    for (int l = MLP_LAYERS - 1; l >= 0; l--) {
        if (l < MLP_LAYERS - 1)
            tanh_backward(acts[l + 1], gout, (int64_t)B * sizes[l + 1]);
        dense_backward(acts[l], r->t[2 * l].p, gout, r->t[2 * l].g, r->t[2 * l + 1].g,
                       l > 0 ? gin : NULL, B, sizes[l], sizes[l + 1]);
        float *tmp = gin;
        gin = gout, gout = tmp;
    }
    for (int l = 0; l <= MLP_LAYERS; l++)
        free(acts[l]);
    free(gin), free(gout), free(target);
    return loss;
}

float ref_mlp_step(ref_mlp *r, int64_t first_batch, int accum)
{
    float loss = 0.0f;
    for (int k = 0; k < accum; k++)
        loss += micro_batch(r, first_batch + k, 1.0f / (float)accum);
    adamw(r);
    return loss / (float)accum;
}

double ref_mlp_max_rel_error(const ref_mlp *r, zt_runtime *rt, const minimal_model *m)
{
    double worst = 0.0;
    for (int k = 0; k < REF_TENSORS; k++) {
        const ref_tensor *t = &r->t[k];
        float *got = malloc(sizeof(float) * (size_t)t->n);
        if (zt_param_read(rt, param_id(m, k), got, t->n) != ZT_OK) {
            free(got);
            return INFINITY;
        }
        double num = 0, den = 0;
        for (int64_t i = 0; i < t->n; i++) {
            num += ((double)got[i] - t->p[i]) * ((double)got[i] - t->p[i]);
            den += (double)t->p[i] * t->p[i];
        }
        double e = sqrt(num / (den > 0 ? den : 1e-30));
        worst = e > worst ? e : worst;
        free(got);
    }
    return worst;
}

void ref_mlp_free(ref_mlp *r)
{
    for (int k = 0; k < REF_TENSORS; k++)
        free(r->t[k].p), free(r->t[k].g), free(r->t[k].m), free(r->t[k].v);
}

const char *ref_mlp_config(const ref_hparams *h, const char *param_dev, const char *opt_dev,
                           int accum, const char *extra_zero, const char *extra_ztier)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\"},"
             " \"offload_optimizer\": {\"device\": \"%s\"},"
             " \"stage3_param_persistence_threshold\": 0%s},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": %.9g, \"betas\": [%.9g, "
             "%.9g], \"eps\": %.9g, \"weight_decay\": %.9g}},"
             " \"gradient_clipping\": %.9g, \"gradient_accumulation_steps\": %d,"
             " \"ztier\": {\"hbm_capacity\": \"64M\"%s}}",
             param_dev, opt_dev, extra_zero, (double)h->lr, (double)h->beta1, (double)h->beta2,
             (double)h->eps, (double)h->weight_decay, (double)h->clip, accum, extra_ztier);
    return buf;
}

zt_status ref_mlp_train_ranks(zt_runtime *rt, const minimal_model *m, int steps, zt_stats *stats)
{
    int rank = 0, world = 1;
    zt_status st = zt_runtime_rank(rt, &rank, &world);
    int rows = m->d.batch / (world > 0 ? world : 1);
    for (int s = 0; s < steps && st == ZT_OK; s++) {
        float loss;
        st = minimal_micro_step(rt, m, s, rank * rows, rows, &loss);
        if (st == ZT_OK)
            st = zt_step(rt, NULL, NULL);
    }
    return st == ZT_OK ? zt_stats_get(rt, stats) : st;
}

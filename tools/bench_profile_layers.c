/* SPDX-License-Identifier: MIT */
/* The model's layers for `ztier bench profile`: whole training micro-steps of the GPT-2 model
 * (gpt2_forward, then gpt2_backward) on the profile's ops, with a parameter source that waits
 * for the ops' work at every get and put of a layer and gives the time since the last one to
 * the innermost layer held (the model holds the embedding through the whole backward, and the
 * blocks inside it). So each call a training step makes is timed as `ztier plan` models it:
 * the use between a layer's fetch and its release.
 *
 * Kinds: "embed" (the token and position embedding), "block" (one transformer block: the
 * median over the blocks), "ln_f" (the final layernorm), "head" (the tied embedding as the
 * output matmul; backward with the cross-entropy's gradient, which runs inside it), "loss"
 * (forward: the token upload and the cross-entropy, outside every layer). FLOPs counted: a
 * block 2 N 12 C^2 + 2 B T^2 C forward (its weights' matmuls and causal attention), twice that
 * backward; the head 2 N C Vp, twice backward; the rest 0. */
#include "tools/bench_common.h"
#include "tools/bench_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYERS_SHARE 0.15 /* of the budget */
#define MAX_REPS 10

enum { EMBED, BLOCK, LN_F, HEAD, LOSS, NKIND };
static const char *const kind_name[NKIND] = {"embed", "block", "ln_f", "head", "loss"};

typedef struct layer_mem {
    int n;
    float *p[GPT2_BLOCK_PARAMS], *g[GPT2_BLOCK_PARAMS];
} layer_mem;

/* The source: parameters in the ops' memory, and the timing of the calls. */
typedef struct timed_source {
    const profile_ops *o;
    const gpt2_config *c;
    layer_mem *mem;      /* per layer */
    int stack[4], depth; /* the layers held */
    int backward, seen_other;
    double last;
    double sum[2][NKIND]; /* this micro-step's seconds per pass and kind (but blocks) */
    double *block_s[2];   /* each block's seconds, per pass */
    int n_block[2], max_block;
} timed_source;

/* A held layer's kind now: layer 0 is the embedding in its first use forward and its last
 * backward (after the other layers), else the head. */
static int kind_of(const timed_source *s, int layer)
{
    if (layer == 0)
        return s->seen_other == s->backward ? EMBED : HEAD;
    return layer == s->c->layers + 1 ? LN_F : BLOCK;
}

/* The time since the last event goes to the innermost layer held (or "loss" when none); a
 * block's to its own slot. */
static void mark(timed_source *s)
{
    profile_ops_sync(s->o);
    double now = bench_now(), dt = now - s->last;
    int pass = s->backward, kind = s->depth ? kind_of(s, s->stack[s->depth - 1]) : LOSS;
    s->last = now;
    if (kind != BLOCK)
        s->sum[pass][kind] += dt;
    else if (s->n_block[pass] < s->max_block)
        s->block_s[pass][s->n_block[pass]] += dt;
}

static int src_get(void *ctx, int layer, int backward, float **params, float **grads)
{
    timed_source *s = ctx;
    mark(s);                     /* in the pass so far: the forward's tail is the loss */
    if (backward != s->backward) /* the backward starts */
        s->backward = backward, s->seen_other = 0;
    int kind = kind_of(s, layer);
    if (s->depth == 4)
        return -1;
    if (layer != 0)
        s->seen_other = 1;
    if (kind == BLOCK && s->n_block[backward] < s->max_block)
        s->block_s[backward][s->n_block[backward]] = 0; /* its slot, from zero */
    s->stack[s->depth++] = layer;
    for (int k = 0; k < s->mem[layer].n; k++) {
        params[k] = s->mem[layer].p[k];
        if (grads)
            grads[k] = s->mem[layer].g[k];
    }
    return 0;
}

static int src_put(void *ctx, int layer, int backward)
{
    timed_source *s = ctx;
    (void)layer, (void)backward;
    mark(s);
    if (s->depth && kind_of(s, s->stack[s->depth - 1]) == BLOCK)
        s->n_block[s->backward]++;
    s->depth -= s->depth > 0;
    return 0;
}

static int alloc_layers(timed_source *s, int n_layers)
{
    for (int l = 0; l < n_layers; l++) {
        layer_mem *m = &s->mem[l];
        m->n = gpt2_layer_param_count(s->c, l);
        for (int k = 0; k < m->n; k++) {
            gpt2_param_info info;
            gpt2_param_info_get(s->c, l, k, &info);
            size_t numel = (size_t)info.shape[0] * (size_t)(info.ndim > 1 ? info.shape[1] : 1);
            m->p[k] = profile_ops_alloc(s->o, numel, (uint32_t)(l * 64 + k + 100));
            m->g[k] = s->o->ops->alloc(s->o->ops->ctx, numel * sizeof(float));
            if (!m->p[k] || !m->g[k])
                return -1;
            s->o->ops->zero(s->o->ops->ctx, m->g[k], numel * sizeof(float));
        }
    }
    return 0;
}

static void free_layers(timed_source *s, int n_layers)
{
    for (int l = 0; s->mem && l < n_layers; l++)
        for (int k = 0; k < s->mem[l].n; k++) {
            if (s->mem[l].p[k])
                s->o->ops->free(s->o->ops->ctx, s->mem[l].p[k]);
            if (s->mem[l].g[k])
                s->o->ops->free(s->o->ops->ctx, s->mem[l].g[k]);
        }
    free(s->mem);
}

/* One micro-step; the kinds' seconds go to per[pass][kind] (blocks: the median block). */
static int micro_step(timed_source *s, gpt2_model *m, const int *tokens, double per[2][NKIND])
{
    gpt2_source src = {src_get, src_put, s, NULL};
    float loss;
    memset(s->sum, 0, sizeof s->sum);
    s->n_block[0] = s->n_block[1] = 0, s->depth = 0, s->backward = 0, s->seen_other = 0;
    profile_ops_sync(s->o);
    s->last = bench_now();
    if (gpt2_forward(m, &src, tokens, tokens, &loss) || gpt2_backward(m, &src, NULL))
        return fprintf(stderr, PROFILE_CMD ": a micro-step of the model failed\n"), -1;
    mark(s); /* the forward's tail (the loss) and anything after the last put */
    for (int pass = 0; pass < 2; pass++) {
        memcpy(per[pass], s->sum[pass], sizeof s->sum[pass]);
        per[pass][BLOCK] = s->n_block[pass] ? bench_median(s->block_s[pass], s->n_block[pass]) : 0;
    }
    return profile_ops_failed(s->o) ? -1 : 0;
}

static void add_entries(profile *p, const gpt2_config *c, int B, int T, const profile_ops *o,
                        double per[][2][NKIND], int reps)
{
    double N = (double)B * T, C = c->channels;
    const double fwd_flops[NKIND] = {0, 2 * N * 12 * C * C + 2.0 * B * T * T * C, 0,
                                     2 * N * C * c->padded_vocab, 0};
    char src[320];
    snprintf(src, sizeof src,
             "measured: %s, whole micro-steps of the model (gpt2_forward, gpt2_backward), each "
             "layer's part from its get to its put (waiting for the ops at both), median of %d "
             "after a warm-up",
             o->how, reps);
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < NKIND; k++) {
            if (k == LOSS && pass == 1)
                continue; /* the backward has nothing outside a layer */
            double v[MAX_REPS];
            for (int r = 0; r < reps; r++)
                v[r] = per[r][pass][k];
            json_t *e = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:s}", "op",
                                  pass ? "layer_backward" : "layer_forward", "layer", kind_name[k],
                                  "B", B, "T", T, "C", c->channels, "NH", c->heads, "seconds",
                                  bench_median(v, reps), "flops", fwd_flops[k] * (pass ? 2 : 1),
                                  "source", src);
            if (e)
                json_array_append_new(p->compute, e);
        }
}

int profile_layers(profile *p, const gpt2_config *c, int B, int T, const profile_ops *o)
{
    int n_layers = gpt2_layer_count(c), rc = -1, reps = 0;
    timed_source s = {.o = o, .c = c, .max_block = c->layers};
    s.mem = calloc((size_t)n_layers, sizeof *s.mem);
    s.block_s[0] = calloc((size_t)c->layers + 1, sizeof(double));
    s.block_s[1] = calloc((size_t)c->layers + 1, sizeof(double));
    int *tokens = malloc(sizeof(int) * (size_t)B * T);
    gpt2_model *m = NULL;
    double per[MAX_REPS][2][NKIND];
    if (!s.mem || !s.block_s[0] || !s.block_s[1] || !tokens || alloc_layers(&s, n_layers) ||
        !(m = gpt2_model_create_on(c, B, T, o->ops, GPT2_KEEP_ALL))) {
        fprintf(stderr,
                PROFILE_CMD ": no memory for the %d-layer model's parameters and activations at "
                            "%d x %d tokens (%s): give a smaller --batch or --seq\n",
                c->layers, B, T, o->how);
        goto out;
    }
    for (int i = 0; i < B * T; i++)
        tokens[i] = (int)((unsigned)(i * 7919 + 13) % (unsigned)c->vocab);
    if (micro_step(&s, m, tokens, per[0]) != 0) /* warm-up */
        goto out;
    double t0 = bench_now();
    while (profile_more(p, reps, 2, MAX_REPS, LAYERS_SHARE, t0))
        if (micro_step(&s, m, tokens, per[reps++]) != 0)
            goto out;
    add_entries(p, c, B, T, o, per, reps);
    rc = 0;
out:
    gpt2_model_destroy(m);
    free_layers(&s, n_layers);
    free(s.block_s[0]), free(s.block_s[1]), free(tokens);
    return rc;
}

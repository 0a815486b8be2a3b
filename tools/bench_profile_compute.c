/* SPDX-License-Identifier: MIT */
/* The model's compute for `ztier bench profile`: the kernels of a GPT-2 layer through its ops
 * table (gpt2_ops.h: the CPU ops, or the CUDA ops), at the model's shapes, each timed to the
 * end of its work (sync), medians over repetitions.
 *   GEMMs (N = B x T rows): the layer's qkv (C -> 3C), attention projection (C -> C), MLP
 *   (C -> 4C, 4C -> C) and the head (C -> Vp); forward 2 N C OC FLOPs, backward (dX and dW)
 *   4 N C OC. gemm_flops_per_s is the median of the rates of all of them. The same GEMMs
 *   again at every other micro-batch d x T rows, d dividing B: the micro-batches `ztier plan
 *   --search` tries for a step of B rows, whose matmuls the plan then takes from these entries
 *   (plan_compute.h) rather than from the one rate.
 *   Causal attention at B, T, C, NH: forward 2 B T^2 C FLOPs (QK^T and AV, half the square),
 *   backward twice that: 6 B T^2 C in all (the count MFU figures use).
 *   Element-wise passes, bytes read and written per element: GELU forward 8 and backward 12
 *   over N x 4C, layernorm 8 and residual + layernorm 16 over N x C (the per-row mean and
 *   rstd left out); elementwise_bytes_per_s is their median. */
#include "tools/bench_common.h"
#include "tools/bench_profile.h"
#include "gpt2_attention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPUTE_SHARE 0.20 /* of the budget, for all of the kernels */
#define MAX_REPS 15

/* The buffers, in the ops' memory, sized for the largest shape. */
typedef struct bufs {
    float *inp, *out, *w, *bias, *dinp, *dw, *dbias, *att, *a, *b, *mean, *rstd;
} bufs;

typedef struct timer {
    profile *p;
    const profile_ops *o;
    double t0; /* the phase's start */
    int shapes;
} timer;

void profile_ops_sync(const profile_ops *o)
{
    if (o->sync)
        o->sync(o->sync_arg);
}

int profile_ops_failed(const profile_ops *o)
{
    if (!o->ops->status || o->ops->status(o->ops->ctx) == 0)
        return 0;
    fprintf(stderr, PROFILE_CMD ": the %s failed: %s\n", o->how,
            o->ops->status_text ? o->ops->status_text(o->ops->ctx) : "(no text)");
    return 1;
}

float *profile_ops_alloc(const profile_ops *o, size_t n, uint32_t seed)
{
    float *host = malloc(n * sizeof(float)), *dev = o->ops->alloc(o->ops->ctx, n * sizeof(float));
    if (host && dev) {
        uint32_t x = seed * 2654435761u + 1;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            host[i] = (float)(x >> 8) / 16777216.0f * 0.1f - 0.05f;
        }
        o->ops->upload(o->ops->ctx, dev, host, n * sizeof(float));
    } else if (dev) {
        o->ops->free(o->ops->ctx, dev), dev = NULL;
    }
    free(host);
    return dev;
}

static int bufs_alloc(bufs *b, const profile_ops *o, const gpt2_config *c, int B, int T)
{
    size_t N = (size_t)B * T, C = (size_t)c->channels, Vp = (size_t)c->padded_vocab;
    size_t oc = Vp > 4 * C ? Vp : 4 * C; /* the widest output */
    size_t att = gpt2_att_floats(o->ops->att_keep, B, T, c->channels, c->heads);
    memset(b, 0, sizeof *b);
    b->inp = profile_ops_alloc(o, N * 4 * C, 1), b->out = profile_ops_alloc(o, N * oc, 2);
    b->w = profile_ops_alloc(o, C * oc, 3); /* C x OC, or 4C x C */
    b->bias = profile_ops_alloc(o, oc, 4), b->dinp = profile_ops_alloc(o, N * 4 * C, 5);
    b->dw = profile_ops_alloc(o, C * oc, 6);
    b->dbias = profile_ops_alloc(o, oc, 7), b->att = profile_ops_alloc(o, att ? att : 1, 8);
    b->a = profile_ops_alloc(o, N * 4 * C, 9), b->b = profile_ops_alloc(o, N * 4 * C, 10);
    b->mean = profile_ops_alloc(o, N, 11), b->rstd = profile_ops_alloc(o, N, 12);
    float **all = (float **)b;
    for (size_t i = 0; i < sizeof *b / sizeof(float *); i++)
        if (!all[i])
            return -1;
    return 0;
}

static void bufs_free(bufs *b, const profile_ops *o)
{
    float **all = (float **)b;
    for (size_t i = 0; i < sizeof *b / sizeof(float *); i++)
        if (all[i])
            o->ops->free(o->ops->ctx, all[i]);
}

/* One kernel call of a kind (enum below) at a shape. */
enum kind { GEMM_FWD, GEMM_BWD, ATT_FWD, ATT_BWD, GELU_FWD, GELU_BWD, LN_FWD, RES_LN_FWD };

typedef struct call {
    enum kind kind;
    int N, C, OC; /* GEMM: N x C times C x OC; element-wise: N x C elements */
    int B, T, NH; /* attention */
} call;

static void run_call(const bufs *b, const profile_ops *o, const call *k)
{
    const gpt2_ops *ops = o->ops;
    void *ctx = ops->ctx;
    long long n = (long long)k->N * k->C;
    switch (k->kind) {
    case GEMM_FWD:
        ops->matmul_forward(ctx, b->out, b->inp, b->w, b->bias, k->N, k->C, k->OC);
        break;
    case GEMM_BWD:
        ops->matmul_backward(ctx, b->dinp, b->dw, b->dbias, b->out, b->inp, b->w, k->N, k->C,
                             k->OC);
        break;
    case ATT_FWD: /* qkv: inp (B T 3C), out: out (B T C) */
        ops->attention_forward(ctx, b->out, b->att, b->inp, k->B, k->T, k->C, k->NH);
        break;
    case ATT_BWD:
        ops->attention_backward(ctx, b->dinp, b->a, b->inp, b->out, b->att, k->B, k->T, k->C,
                                k->NH);
        break;
    case GELU_FWD:
        ops->gelu_forward(ctx, b->out, b->inp, n);
        break;
    case GELU_BWD:
        ops->gelu_backward(ctx, b->dinp, b->inp, b->a, n);
        break;
    case LN_FWD:
        ops->layernorm_forward(ctx, b->out, b->mean, b->rstd, b->inp, b->w, b->bias, k->N, k->C);
        break;
    case RES_LN_FWD:
        ops->residual_layernorm_forward(ctx, b->dinp, b->out, b->mean, b->rstd, b->a, b->b, b->w,
                                        b->bias, k->N, k->C);
        break;
    }
}

/* The median seconds of k (after one warm-up call); -1 when the ops failed. */
static double time_call(timer *t, const bufs *b, const call *k)
{
    double s[MAX_REPS];
    int n = 0;
    run_call(b, t->o, k);
    profile_ops_sync(t->o);
    /* every shape gets its part of the phase's share: later shapes are not starved */
    double share = COMPUTE_SHARE / (t->shapes > 0 ? t->shapes : 1);
    double t0 = bench_now();
    while (profile_more(t->p, n, 2, MAX_REPS, share, t0)) {
        double a = bench_now();
        run_call(b, t->o, k);
        profile_ops_sync(t->o);
        s[n++] = bench_now() - a;
    }
    return profile_ops_failed(t->o) ? -1 : bench_median(s, n);
}

static void add_entry(timer *t, const char *op, const call *k, double seconds, double flops,
                      const char *pass)
{
    json_t *e = k->kind <= GEMM_BWD ? json_pack("{s:s, s:s, s:i, s:i, s:i}", "op", op, "pass", pass,
                                                "m", k->N, "n", k->OC, "k", k->C)
                                    : json_pack("{s:s, s:i, s:i, s:i, s:i}", "op", op, "B", k->B,
                                                "T", k->T, "C", k->C, "NH", k->NH);
    if (!e)
        return;
    char src[256];
    snprintf(src, sizeof src, "measured: %s, median of repetitions after a warm-up", t->o->how);
    json_object_set_new(e, "seconds", json_real(seconds));
    json_object_set_new(e, "flops", json_real(flops));
    json_object_set_new(e, "source", json_string(src));
    json_array_append_new(t->p->compute, e);
}

/* The GEMMs at N rows; the rates into rate[] (NULL: entries only). */
static int gemms(timer *t, const bufs *b, const gpt2_config *c, int N, double *rate, int *n_rate)
{
    const int C = c->channels,
              shapes[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, c->padded_vocab}};
    for (int i = 0; i < 5; i++)
        for (int pass = 0; pass < 2; pass++) {
            call k = {pass ? GEMM_BWD : GEMM_FWD, N, shapes[i][0], shapes[i][1], 0, 0, 0};
            double s = time_call(t, b, &k);
            if (s < 0)
                return -1;
            double flops = (pass ? 4.0 : 2.0) * N * (double)k.C * k.OC;
            if (rate)
                rate[(*n_rate)++] = flops / s;
            add_entry(t, "gemm", &k, s, flops, pass ? "backward" : "forward");
        }
    return 0;
}

static int elementwise(timer *t, const bufs *b, int N, int C, double *rate)
{
    const call k[4] = {{GELU_FWD, N, 4 * C, 0, 0, 0, 0},
                       {GELU_BWD, N, 4 * C, 0, 0, 0, 0},
                       {LN_FWD, N, C, 0, 0, 0, 0},
                       {RES_LN_FWD, N, C, 0, 0, 0, 0}};
    const double bytes_per_elem[4] = {8, 12, 8, 16};
    for (int i = 0; i < 4; i++) {
        double s = time_call(t, b, &k[i]);
        if (s < 0)
            return -1;
        rate[i] = bytes_per_elem[i] * (double)k[i].N * k[i].C / s;
    }
    return 0;
}

/* The micro-batches below B that divide it: the other m the GEMMs are measured at. */
static int smaller_divisors(int B)
{
    int n = 0;
    for (int d = 1; d < B; d++)
        n += B % d == 0;
    return n;
}

int profile_compute(profile *p, const gpt2_config *c, int B, int T, const profile_ops *o)
{
    bufs b;
    int N = B * T, C = c->channels, n_rate = 0;
    timer t = {p, o, bench_now(), 10 * (1 + smaller_divisors(B)) + 2 + 4};
    if (bufs_alloc(&b, o, c, B, T) != 0) {
        bufs_free(&b, o);
        fprintf(stderr,
                PROFILE_CMD ": no memory for the compute of %d x %d tokens at C %d (%s): give a "
                            "smaller --batch or --seq\n",
                B, T, C, o->how);
        return -1;
    }
    double gemm[10], ew[4];
    int rc = gemms(&t, &b, c, N, gemm, &n_rate);
    for (int d = B - 1; d >= 1 && !rc; d--) /* the buffers hold the largest, N rows */
        if (B % d == 0)
            rc = gemms(&t, &b, c, d * T, NULL, NULL);
    call fwd = {ATT_FWD, 0, C, 0, B, T, c->heads}, bwd = fwd;
    bwd.kind = ATT_BWD;
    double fs = rc ? -1 : time_call(&t, &b, &fwd), bs = fs < 0 ? -1 : time_call(&t, &b, &bwd);
    rc = rc || fs < 0 || bs < 0 ? -1 : elementwise(&t, &b, N, C, ew);
    bufs_free(&b, o);
    if (rc)
        return -1;
    double att_flops = 6.0 * B * (double)T * T * C;
    call att = fwd;
    add_entry(&t, "attention", &att, fs + bs, att_flops, NULL);
    json_t *last = json_array_get(p->compute, json_array_size(p->compute) - 1);
    json_object_set_new(last, "forward_s", json_real(fs));
    json_object_set_new(last, "backward_s", json_real(bs));
    profile_rate(p, "gemm_flops_per_s", bench_median(gemm, n_rate), "FLOP/s",
                 "%s, the median over the GEMMs of a layer and the head at N %d, C %d, "
                 "Vp %d (forward 2NCK, backward 4NCK FLOPs)",
                 o->how, N, C, c->padded_vocab);
    profile_rate(p, "attention_flops_per_s", att_flops / (fs + bs), "FLOP/s",
                 "%s, causal attention forward + backward at B %d T %d C %d NH %d (6 B T^2 C "
                 "FLOPs)",
                 o->how, B, T, C, c->heads);
    profile_rate(p, "elementwise_bytes_per_s", bench_median(ew, 4), "B/s",
                 "%s, the median of GELU forward/backward over N x 4C and layernorm, residual + "
                 "layernorm over N x C (bytes read + written)",
                 o->how);
    return 0;
}

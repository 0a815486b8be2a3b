/* SPDX-License-Identifier: MIT */
/* GPT-2 gradients and driving:
 *  - the fp32 forward/backward of the tiny config (kernels called on plain arrays) against
 *    central finite differences of an independent double-precision forward written here
 *    (plain loops, no BLAS), 20 entries of every parameter tensor;
 *  - the layer order of one micro-step: forward fetch/release per layer, the embedding
 *    fetched again for the tied LM head, and held through the whole backward pass;
 *  - through the runtime: the gradients ztier accumulates equal the plain-array ones
 *    (recovered from one Adam step), with the layers resident and with them sharded and
 *    offloaded; fp16 parameters are refused with a message; training on a repeated batch
 *    lowers the loss. */
#include "gpt2_model.h"
#include "gpt2_ops.h"
#include "gpt2_ztier.h"
#include "rt_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define B 2
#define T 8
#define SAMPLES 20 /* entries checked per tensor */

typedef struct plain {
    gpt2_config c;
    int n_layers;
    float *p[64][GPT2_BLOCK_PARAMS], *g[64][GPT2_BLOCK_PARAMS];
    int64_t n[64][GPT2_BLOCK_PARAMS];
} plain;

static int plain_get(void *ctx, int layer, int backward, float **params, float **grads)
{
    plain *s = ctx;
    for (int k = 0; k < gpt2_layer_param_count(&s->c, layer); k++) {
        params[k] = s->p[layer][k];
        if (backward)
            grads[k] = s->g[layer][k];
    }
    return 0;
}

static int plain_put(void *ctx, int layer, int backward)
{
    (void)ctx, (void)layer, (void)backward;
    return 0;
}

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53;
}

static void init_plain(plain *s)
{
    s->n_layers = gpt2_layer_count(&s->c);
    for (int l = 0; l < s->n_layers; l++)
        for (int k = 0; k < gpt2_layer_param_count(&s->c, l); k++) {
            gpt2_param_info pi;
            gpt2_param_info_get(&s->c, l, k, &pi);
            int64_t n = pi.shape[0] * (pi.ndim == 2 ? pi.shape[1] : 1);
            s->n[l][k] = n;
            s->p[l][k] = malloc(sizeof(float) * (size_t)n);
            s->g[l][k] = calloc((size_t)n, sizeof(float));
            for (int64_t i = 0; i < n; i++) /* random, so biases and norms get gradients too */
                s->p[l][k][i] = (float)((urand() - 0.5) * (pi.init_std < 0 ? 0.4 : 0.3) +
                                        (pi.init_std < 0 ? 1.0 : 0.0));
        }
}

/* ---- the double-precision reference forward ---- */

typedef struct dctx {
    const gpt2_config *c;
    double *p[64][GPT2_BLOCK_PARAMS];
} dctx;

static void d_layernorm(double *out, const double *x, const double *w, const double *b, int C)
{
    double m = 0, v = 0;
    for (int i = 0; i < C; i++)
        m += x[i];
    m /= C;
    for (int i = 0; i < C; i++)
        v += (x[i] - m) * (x[i] - m);
    double r = 1.0 / sqrt(v / C + 1e-5);
    for (int i = 0; i < C; i++)
        out[i] = (x[i] - m) * r * w[i] + b[i];
}

/* out[OC] = w[OC,IC] @ in[IC] + bias */
static void d_linear(double *out, const double *in, const double *w, const double *bias, int IC,
                     int OC)
{
    for (int o = 0; o < OC; o++) {
        double acc = bias ? bias[o] : 0;
        for (int i = 0; i < IC; i++)
            acc += w[(size_t)o * IC + i] * in[i];
        out[o] = acc;
    }
}

static double d_loss(const dctx *d, const int *tok, const int *tgt)
{
    const gpt2_config *c = d->c;
    int C = c->channels, NH = c->heads, hs = C / NH, V = c->padded_vocab, L = c->layers;
    static double x[B * T][256], ln[B * T][256], qkv[B * T][768], y[B * T][256], h[B * T][1024],
        tmp[1024];
    for (int n = 0; n < B * T; n++)
        for (int i = 0; i < C; i++)
            x[n][i] = d->p[0][0][(size_t)tok[n] * C + i] + d->p[0][1][(size_t)(n % T) * C + i];
    for (int l = 1; l <= L; l++) {
        double *const *p = d->p[l];
        for (int n = 0; n < B * T; n++) {
            d_layernorm(ln[n], x[n], p[P_LN1W], p[P_LN1B], C);
            d_linear(qkv[n], ln[n], p[P_QKVW], p[P_QKVB], C, 3 * C);
        }
        for (int b = 0; b < B; b++)
            for (int hd = 0; hd < NH; hd++)
                for (int t = 0; t < T; t++) {
                    double att[T], mx = -1e300, sum = 0;
                    for (int s = 0; s <= t; s++) {
                        double dot = 0;
                        for (int i = 0; i < hs; i++)
                            dot += qkv[b * T + t][hd * hs + i] * qkv[b * T + s][C + hd * hs + i];
                        att[s] = dot / sqrt((double)hs);
                        mx = fmax(mx, att[s]);
                    }
                    for (int s = 0; s <= t; s++)
                        sum += (att[s] = exp(att[s] - mx));
                    for (int i = 0; i < hs; i++) {
                        double acc = 0;
                        for (int s = 0; s <= t; s++)
                            acc += att[s] / sum * qkv[b * T + s][2 * C + hd * hs + i];
                        y[b * T + t][hd * hs + i] = acc;
                    }
                }
        for (int n = 0; n < B * T; n++) {
            d_linear(tmp, y[n], p[P_ATTW], p[P_ATTB], C, C);
            for (int i = 0; i < C; i++)
                x[n][i] += tmp[i];
            d_layernorm(ln[n], x[n], p[P_LN2W], p[P_LN2B], C);
            d_linear(h[n], ln[n], p[P_FCW], p[P_FCB], C, 4 * C);
            for (int i = 0; i < 4 * C; i++) {
                double v = h[n][i];
                h[n][i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
            }
            d_linear(tmp, h[n], p[P_PROJW], p[P_PROJB], 4 * C, C);
            for (int i = 0; i < C; i++)
                x[n][i] += tmp[i];
        }
    }
    double loss = 0;
    for (int n = 0; n < B * T; n++) {
        d_layernorm(ln[n], x[n], d->p[L + 1][0], d->p[L + 1][1], C);
        double logits[1024], mx = -1e300, sum = 0;
        d_linear(logits, ln[n], d->p[0][0], NULL, C, V);
        for (int v = 0; v < V; v++)
            mx = fmax(mx, logits[v]);
        for (int v = 0; v < V; v++)
            sum += exp(logits[v] - mx);
        loss -= logits[tgt[n]] - mx - log(sum);
    }
    return loss / (B * T);
}

static void test_gradients_match_finite_differences(void **state)
{
    (void)state;
    plain s;
    memset(&s, 0, sizeof s);
    assert_int_equal(gpt2_config_named("tiny", 64, &s.c), 0);
    init_plain(&s);
    int tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (int)(urand() * 60), tgt[i] = (int)(urand() * 60);
    gpt2_model *m = gpt2_model_create(&s.c, B, T);
    assert_non_null(m);
    gpt2_source src = {plain_get, plain_put, &s, NULL};
    float loss;
    assert_int_equal(gpt2_forward(m, &src, tok, tgt, &loss), 0);
    assert_int_equal(gpt2_backward(m, &src, NULL), 0);
    dctx d = {&s.c, {{0}}};
    for (int l = 0; l < s.n_layers; l++)
        for (int k = 0; k < gpt2_layer_param_count(&s.c, l); k++) {
            d.p[l][k] = malloc(sizeof(double) * (size_t)s.n[l][k]);
            for (int64_t i = 0; i < s.n[l][k]; i++)
                d.p[l][k][i] = s.p[l][k][i];
        }
    double ref = d_loss(&d, tok, tgt);
    assert_true(fabs(ref - loss) < 1e-4 * fabs(ref)); /* the forward agrees */
    int checked = 0;
    for (int l = 0; l < s.n_layers; l++)
        for (int k = 0; k < gpt2_layer_param_count(&s.c, l); k++) {
            gpt2_param_info pi;
            gpt2_param_info_get(&s.c, l, k, &pi);
            for (int j = 0; j < SAMPLES; j++) {
                int64_t i = (int64_t)(urand() * (double)s.n[l][k]);
                if (l == 0 && k == 0) /* wte: a row of a token that occurs */
                    i = (int64_t)tok[j % (B * T)] * s.c.channels + j;
                /* eps: the truncation error (eps^2 times the third derivative, ~1e-10) and
                 * the rounding of the double loss (~1e-16 / eps) stay far below the error
                 * of the fp32 analytic gradient that is being checked */
                double keep = d.p[l][k][i], eps = 1e-5;
                d.p[l][k][i] = keep + eps;
                double up = d_loss(&d, tok, tgt);
                d.p[l][k][i] = keep - eps;
                double down = d_loss(&d, tok, tgt);
                d.p[l][k][i] = keep;
                double fd = (up - down) / (2 * eps), an = s.g[l][k][i];
                if (fabs(an - fd) > 2e-3 * fmax(fabs(fd), fabs(an)) + 2e-6)
                    fail_msg("%s[%lld]: analytic %.8g, finite difference %.8g", pi.name,
                             (long long)i, an, fd);
                checked++;
            }
        }
    printf("checked %d gradient entries over %d tensors; loss %.6f (double %.6f)\n", checked,
           checked / SAMPLES, (double)loss, ref);
    for (int l = 0; l < s.n_layers; l++)
        for (int k = 0; k < gpt2_layer_param_count(&s.c, l); k++)
            free(s.p[l][k]), free(s.g[l][k]), free(d.p[l][k]);
    gpt2_model_destroy(m);
}

/* The activation checkpointing policies: selective (layernorm and GELU outputs recomputed in
 * backward) and full (each block's forward run again in backward from its kept input) give
 * the same loss and every gradient bit for bit, in less activation memory, by the counts. */
static void test_policies_are_bitwise_and_smaller(void **state)
{
    (void)state;
    plain s[3];
    float loss[3];
    size_t bytes[3];
    int tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (i * 7) % 60, tgt[i] = (i * 3 + 1) % 60;
    for (int r = 0; r < 3; r++) {
        memset(&s[r], 0, sizeof s[r]);
        assert_int_equal(gpt2_config_named("tiny", 64, &s[r].c), 0);
        rng = 12345; /* the same parameters for all */
        init_plain(&s[r]);
        gpt2_model *m = gpt2_model_create_on(&s[r].c, B, T, &gpt2_ops_cpu, r);
        assert_non_null(m);
        bytes[r] = gpt2_model_activation_bytes(m);
        gpt2_source src = {plain_get, plain_put, &s[r], NULL};
        assert_int_equal(gpt2_forward(m, &src, tok, tgt, &loss[r]), 0);
        assert_int_equal(gpt2_backward(m, &src, NULL), 0);
        gpt2_model_destroy(m);
    }
    for (int r = 1; r < 3; r++) {
        assert_memory_equal(&loss[0], &loss[r], sizeof loss[0]);
        for (int l = 0; l < s[0].n_layers; l++)
            for (int k = 0; k < gpt2_layer_param_count(&s[0].c, l); k++)
                assert_memory_equal(s[0].g[l][k], s[r].g[l][k],
                                    sizeof(float) * (size_t)s[0].n[l][k]);
    }
    /* selective: per layer two [B,T,C] and one [B,T,4C] fewer, but one [B,T,C] and one
     * [B,T,4C] shared: 6C per layer less, C + 4C more */
    size_t C = (size_t)s[0].c.channels, BT = (size_t)B * T, L = (size_t)s[0].c.layers;
    assert_int_equal(bytes[0] - bytes[1], sizeof(float) * BT * (6 * C * L - 5 * C));
    /* full: one block's tensors shared, each block's output its own */
    size_t per_layer = 18 * BT * C + 4 * BT + (size_t)B * s[0].c.heads * T * T;
    assert_int_equal(bytes[0] - bytes[2], sizeof(float) * ((L - 1) * per_layer - L * BT * C));
    for (int r = 0; r < 3; r++)
        for (int l = 0; l < s[r].n_layers; l++)
            for (int k = 0; k < gpt2_layer_param_count(&s[r].c, l); k++)
                free(s[r].p[l][k]), free(s[r].g[l][k]);
}

/* ---- the layer order of one micro-step ---- */

typedef struct recorder {
    plain *inner;
    char log[1024];
    int held[64][2];            /* fetches minus releases per layer and pass */
    int embed_held_in_backward; /* stays 1 while embed (backward) is held at every block */
} recorder;

static int rec_get(void *ctx, int layer, int backward, float **params, float **grads)
{
    recorder *r = ctx;
    size_t n = strlen(r->log);
    snprintf(r->log + n, sizeof r->log - n, "%s+%d%s", n ? " " : "", layer, backward ? "b" : "");
    r->held[layer][backward]++;
    if (backward && layer >= 1 && layer <= r->inner->c.layers && r->held[0][1] != 1)
        r->embed_held_in_backward = 0;
    return plain_get(r->inner, layer, backward, params, grads);
}

static int rec_put(void *ctx, int layer, int backward)
{
    recorder *r = ctx;
    size_t n = strlen(r->log);
    snprintf(r->log + n, sizeof r->log - n, " -%d%s", layer, backward ? "b" : "");
    r->held[layer][backward]--;
    return 0;
}

static void free_plain(plain *s)
{
    for (int l = 0; l < s->n_layers; l++)
        for (int k = 0; k < gpt2_layer_param_count(&s->c, l); k++)
            free(s->p[l][k]), free(s->g[l][k]);
}

static void test_layer_order_with_tied_head(void **state)
{
    (void)state;
    plain s;
    memset(&s, 0, sizeof s);
    assert_int_equal(gpt2_config_named("tiny", 64, &s.c), 0);
    init_plain(&s);
    recorder r = {&s, "", {{0}}, 1};
    gpt2_source src = {rec_get, rec_put, &r, NULL};
    int tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = i % 64, tgt[i] = (i + 1) % 64;
    gpt2_model *m = gpt2_model_create(&s.c, B, T);
    assert_non_null(m);
    float loss;
    assert_int_equal(gpt2_forward(m, &src, tok, tgt, &loss), 0);
    /* layers: 0 embed, 1..2 the blocks h.0 h.1, 3 ln_f; +get -put, b = backward */
    assert_string_equal(r.log, "+0 -0 +1 -1 +2 -2 +3 -3 +0 -0");
    r.log[0] = '\0';
    assert_int_equal(gpt2_backward(m, &src, NULL), 0);
    assert_string_equal(r.log, "+0b +3b -3b +2b -2b +1b -1b -0b");
    assert_int_equal(r.embed_held_in_backward, 1);
    /* the order the sizing code replays is the order the model calls */
    gpt2_call calls[64];
    int n = gpt2_micro_step_calls(&s.c, calls, 64);
    char want[1024] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(want);
        snprintf(want + len, sizeof want - len, "%s%c%d%s", len ? " " : "",
                 calls[i].release ? '-' : '+', calls[i].layer, calls[i].backward ? "b" : "");
    }
    assert_string_equal(want, "+0 -0 +1 -1 +2 -2 +3 -3 +0 -0 +0b +3b -3b +2b -2b +1b -1b -0b");
    assert_int_equal(n, 4 * 4 + 2);
    for (int l = 0; l < 4; l++)
        assert_true(r.held[l][0] == 0 && r.held[l][1] == 0);
    gpt2_model_destroy(m);
    free_plain(&s);
}

/* ---- through the runtime ---- */

typedef struct tiny_gpt2 {
    gpt2_ztier *g;
    gpt2_config c;
} tiny_gpt2;

static zt_status register_tiny(zt_runtime *rt, void *model)
{
    tiny_gpt2 *t = model;
    return gpt2_ztier_register(t->g, rt, &t->c, 1234);
}

static zt_runtime *runtime_with_tiny(const char *config, gpt2_ztier *g)
{
    tiny_gpt2 t = {g, {0}};
    assert_int_equal(gpt2_config_named("tiny", 64, &t.c), 0);
    return rt_fixture_make(NULL, config, register_tiny, &t);
}

/* Reads every parameter of the runtime into plain arrays (gradients zeroed). */
static void read_params(gpt2_ztier *g, plain *s)
{
    memset(s, 0, sizeof *s);
    s->c = g->c;
    s->n_layers = gpt2_layer_count(&s->c);
    for (int l = 0; l < s->n_layers; l++)
        for (int k = 0; k < gpt2_layer_param_count(&s->c, l); k++) {
            gpt2_param_info pi;
            gpt2_param_info_get(&s->c, l, k, &pi);
            s->n[l][k] = pi.shape[0] * (pi.ndim == 2 ? pi.shape[1] : 1);
            s->p[l][k] = malloc(sizeof(float) * (size_t)s->n[l][k]);
            s->g[l][k] = calloc((size_t)s->n[l][k], sizeof(float));
            assert_int_equal(zt_param_read(g->rt, g->param_ids[l][k], s->p[l][k], s->n[l][k]),
                             ZT_OK);
        }
}

static void make_batch(int *tok, int *tgt)
{
    for (int i = 0; i < B * T; i++)
        tok[i] = (int)(urand() * 64), tgt[i] = (int)(urand() * 64);
}

/* With Adam's eps = 1 and no weight decay or clipping, the first step moves each parameter by
 * -lr * g / (|g| + 1) (m_hat = g, sqrt(v_hat) = |g|), so u = -delta / lr gives the gradient
 * back: g = u / (1 - |u|). A large lr keeps delta far above the rounding of p. */
#define ADAM_PROBE_LR 1000.0
#define ADAM_PROBE                                                                \
    "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 1000, \"eps\": 1, " \
    "\"betas\": [0.9, 0.999], \"weight_decay\": 0}}"

static void check_runtime_gradients(const char *config)
{
    gpt2_ztier g;
    zt_runtime *rt = runtime_with_tiny(config, &g);
    plain before, after;
    read_params(&g, &before);
    int tok[B * T], tgt[B * T];
    make_batch(tok, tgt);
    gpt2_model *m = gpt2_model_create(&g.c, B, T);
    assert_non_null(m);
    gpt2_source zsrc = gpt2_ztier_source(&g), psrc = {plain_get, plain_put, &before, NULL};
    float zloss, ploss;
    assert_int_equal(gpt2_forward(m, &zsrc, tok, tgt, &zloss), 0);
    assert_int_equal(gpt2_backward(m, &zsrc, NULL), 0);
    zt_step_info info = ZT_STEP_INFO_INIT;
    assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
    assert_int_equal(info.skipped, 0);
    read_params(&g, &after);
    assert_int_equal(gpt2_forward(m, &psrc, tok, tgt, &ploss), 0);
    assert_int_equal(gpt2_backward(m, &psrc, NULL), 0);
    assert_true(fabsf(zloss - ploss) <= 1e-6f * fabsf(ploss));
    for (int l = 0; l < before.n_layers; l++)
        for (int k = 0; k < gpt2_layer_param_count(&g.c, l); k++) {
            double gmax = 0;
            for (int64_t i = 0; i < before.n[l][k]; i++)
                gmax = fmax(gmax, fabs(before.g[l][k][i]));
            assert_true(gmax > 0); /* every tensor gets a gradient */
            for (int64_t i = 0; i < before.n[l][k]; i++) {
                double u = -((double)after.p[l][k][i] - before.p[l][k][i]) / ADAM_PROBE_LR;
                double grt = u / (1 - fabs(u)), gp = before.g[l][k][i];
                if (fabs(grt - gp) > 1e-3 * fabs(gp) + 1e-5 * gmax) {
                    gpt2_param_info pi;
                    gpt2_param_info_get(&g.c, l, k, &pi);
                    fail_msg("%s[%lld]: gradient through ztier %.8g, on plain arrays %.8g", pi.name,
                             (long long)i, grt, gp);
                }
            }
        }
    free_plain(&before), free_plain(&after);
    gpt2_model_destroy(m);
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
}

static void test_runtime_gradients_equal_plain_resident(void **state)
{
    (void)state;
    check_runtime_gradients("{" ADAM_PROBE ", \"ztier\": {\"hbm_capacity\": \"64M\"}}");
}

static void test_runtime_gradients_equal_plain_offloaded(void **state)
{
    (void)state;
    check_runtime_gradients("{" ADAM_PROBE ", \"zero_optimization\": {\"stage\": 3, "
                            "\"stage3_param_persistence_threshold\": 0, "
                            "\"offload_param\": {\"device\": \"cpu\"}, "
                            "\"offload_optimizer\": {\"device\": \"cpu\"}}, "
                            "\"ztier\": {\"hbm_capacity\": \"1M\"}}");
}

static void test_fp16_parameters_are_refused_with_a_message(void **state)
{
    (void)state;
    gpt2_ztier g;
    zt_runtime *rt = runtime_with_tiny("{\"fp16\": {\"enabled\": true}}", &g);
    gpt2_model *m = gpt2_model_create(&g.c, B, T);
    gpt2_source src = gpt2_ztier_source(&g);
    int tok[B * T], tgt[B * T];
    make_batch(tok, tgt);
    float loss;
    assert_int_equal(gpt2_forward(m, &src, tok, tgt, &loss), ZT_ERR_UNSUPPORTED);
    const char *msg = gpt2_ztier_error(&g);
    if (!strstr(msg, "layer embed: parameter wte is fp16"))
        fail_msg("unexpected message: %s", msg);
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK); /* no layer was left held */
    gpt2_model_destroy(m);
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
}

static void test_training_lowers_the_loss(void **state)
{
    (void)state;
    gpt2_ztier g;
    zt_runtime *rt = runtime_with_tiny(
        "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0}},"
        " \"ztier\": {\"hbm_capacity\": \"64M\"}}",
        &g);
    gpt2_model *m = gpt2_model_create(&g.c, B, T);
    gpt2_source src = gpt2_ztier_source(&g);
    int tok[B * T], tgt[B * T];
    make_batch(tok, tgt);
    float first = 0, loss = 0;
    for (int step = 0; step < 30; step++) {
        assert_int_equal(gpt2_forward(m, &src, tok, tgt, &loss), 0);
        assert_int_equal(gpt2_backward(m, &src, NULL), 0);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
        first = step == 0 ? loss : first;
    }
    printf("repeated batch: loss %.4f -> %.4f after 30 steps\n", (double)first, (double)loss);
    assert_true(first > 3.5f);        /* about ln(64) at the start */
    assert_true(loss < 0.3f * first); /* it memorises the batch */
    gpt2_model_destroy(m);
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_match_finite_differences),
        cmocka_unit_test(test_layer_order_with_tied_head),
        cmocka_unit_test(test_policies_are_bitwise_and_smaller),
        cmocka_unit_test(test_runtime_gradients_equal_plain_resident),
        cmocka_unit_test(test_runtime_gradients_equal_plain_offloaded),
        cmocka_unit_test(test_fp16_parameters_are_refused_with_a_message),
        cmocka_unit_test(test_training_lowers_the_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* GPT-2 gradients: the fp32 forward/backward of the tiny config against central finite
 * differences of an independent double-precision forward written here (plain loops), on
 * every parameter tensor. */
#include "gpt2_model.h"

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
    static double x[B * T][256], ln[B * T][256], qkv[B * T][768], y[B * T][256],
        h[B * T][1024], tmp[1024];
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
    gpt2_source src = {plain_get, plain_put, &s};
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
            for (int j = 0; j < 12; j++) {
                int64_t i = (int64_t)(urand() * (double)s.n[l][k]);
                if (l == 0 && k == 0) /* wte: a row of a token that occurs */
                    i = (int64_t)tok[j % (B * T)] * s.c.channels + j;
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
           checked / 12, (double)loss, ref);
    for (int l = 0; l < s.n_layers; l++)
        for (int k = 0; k < gpt2_layer_param_count(&s.c, l); k++)
            free(s.p[l][k]), free(s.g[l][k]), free(d.p[l][k]);
    gpt2_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_match_finite_differences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

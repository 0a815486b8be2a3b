#include "gpt2_kernels.h"

#include <cblas.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                     int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *te = wte + (size_t)tokens[b * T + t] * C, *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] = te[c] + pe[c];
        }
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B,
                      int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *te = dwte + (size_t)tokens[b * T + t] * C, *pe = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                te[c] += d[c];
                pe[c] += d[c];
            }
        }
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= (float)C;
        for (int c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m);
        float s = 1.0f / sqrtf(v / (float)C + 1e-5f);
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++)
            o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *x = inp + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - mean[n]) * rstd[n], dnorm = w[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= (float)C;
        dnorm_norm_mean /= (float)C;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - mean[n]) * rstd[n], dnorm = w[c] * d[c];
            db[c] += d[c];
            dw[c] += norm * d[c];
            dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[n];
        }
    }
}

void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N,
                    int C, int OC)
{
    if (bias)
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * OC, bias, sizeof(float) * (size_t)OC);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C,
                bias ? 1.0f : 0.0f, out, OC);
}

void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                     const float *w, int N, int C, int OC)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C, 1.0f,
                dinp, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                dw, C);
    if (dbias)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++)
                dbias[o] += dout[(size_t)n * OC + o];
}

void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float *a = att + (((size_t)b * NH + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const float *k = qkv + ((size_t)b * T + s) * 3 * C + C + h * hs;
                    float dot = 0;
                    for (int i = 0; i < hs; i++)
                        dot += q[i] * k[i];
                    a[s] = dot * scale;
                    maxv = fmaxf(maxv, a[s]);
                }
                float sum = 0;
                for (int s = 0; s <= t; s++)
                    sum += (a[s] = expf(a[s] - maxv));
                for (int s = 0; s < T; s++)
                    a[s] = s <= t ? a[s] / sum : 0.0f;
                float *o = out + ((size_t)b * T + t) * C + h * hs;
                memset(o, 0, sizeof(float) * (size_t)hs);
                for (int s = 0; s <= t; s++) {
                    const float *v = qkv + ((size_t)b * T + s) * 3 * C + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++)
                        o[i] += a[s] * v[i];
                }
            }
}

void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                        int B, int T, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                const float *d = dout + ((size_t)b * T + t) * C + h * hs;
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float datt[T > 0 ? T : 1], dot_sum = 0;
                for (int s = 0; s <= t; s++) { /* through out = att @ v */
                    const float *v = qkv + ((size_t)b * T + s) * 3 * C + 2 * C + h * hs;
                    float *dv = dqkv + ((size_t)b * T + s) * 3 * C + 2 * C + h * hs;
                    datt[s] = 0;
                    for (int i = 0; i < hs; i++) {
                        datt[s] += d[i] * v[i];
                        dv[i] += a[s] * d[i];
                    }
                    dot_sum += datt[s] * a[s];
                }
                for (int s = 0; s <= t; s++) { /* through the softmax and q.k scaling */
                    float dpre = a[s] * (datt[s] - dot_sum) * scale;
                    const float *k = qkv + ((size_t)b * T + s) * 3 * C + C + h * hs;
                    float *dk = dqkv + ((size_t)b * T + s) * 3 * C + C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += dpre * k[i];
                        dk[i] += dpre * q[i];
                    }
                }
            }
}

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */

void gelu_forward(float *out, const float *inp, int n)
{
    for (int i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, int n)
{
    for (int i = 0; i < n; i++) {
        float x = inp[i], u = GELU_K * (x + 0.044715f * x * x * x), th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3 * 0.044715f * x * x);
        dinp[i] += local * dout[i];
    }
}

void residual_forward(float *out, const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

float crossentropy_forward(float *probs, const float *logits, const int *targets, int N, int V)
{
    double loss = 0;
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++)
            maxv = fmaxf(maxv, l[v]);
        double sum = 0;
        for (int v = 0; v < V; v++)
            sum += (p[v] = expf(l[v] - maxv));
        for (int v = 0; v < V; v++)
            p[v] = (float)(p[v] / sum);
        loss -= log(fmax((double)p[targets[n]], 1e-30));
    }
    return (float)(loss / N);
}

void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N, int V)
{
    float inv = 1.0f / (float)N;
    for (int n = 0; n < N; n++)
        for (int v = 0; v < V; v++) {
            float p = probs[(size_t)n * V + v];
            dlogits[(size_t)n * V + v] = (p - (v == targets[n] ? 1.0f : 0.0f)) * inv;
        }
}

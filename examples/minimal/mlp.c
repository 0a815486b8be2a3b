/* SPDX-License-Identifier: MIT */
#include "mlp.h"

#include <math.h>
#include <stddef.h>

void dense_forward(const float *in, const float *w, const float *b, float *out, int batch, int n_in,
                   int n_out)
{
    for (int r = 0; r < batch; r++)
        for (int o = 0; o < n_out; o++) {
            float acc = b[o];
            for (int i = 0; i < n_in; i++)
                acc += w[(size_t)o * n_in + i] * in[(size_t)r * n_in + i];
            out[(size_t)r * n_out + o] = acc;
        }
}

void dense_backward(const float *in, const float *w, const float *dout, float *dw, float *db,
                    float *din, int batch, int n_in, int n_out)
{
    for (int r = 0; r < batch; r++)
        for (int o = 0; o < n_out; o++) {
            float g = dout[(size_t)r * n_out + o];
            db[o] += g;
            for (int i = 0; i < n_in; i++)
                dw[(size_t)o * n_in + i] += g * in[(size_t)r * n_in + i];
        }
    if (!din)
        return;
    for (int r = 0; r < batch; r++)
        for (int i = 0; i < n_in; i++) {
            float acc = 0.0f;
            for (int o = 0; o < n_out; o++)
                acc += dout[(size_t)r * n_out + o] * w[(size_t)o * n_in + i];
            din[(size_t)r * n_in + i] = acc;
        }
}

void tanh_forward(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = tanhf(x[i]);
}

void tanh_backward(const float *y, float *dy, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dy[i] *= 1.0f - y[i] * y[i];
}

float mse_loss(const float *y, const float *t, float *dy, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = y[i] - t[i];
        sum += 0.5 * (double)e * e;
        dy[i] = e / (float)n;
    }
    return (float)(sum / (double)n);
}

static float hash_uniform(uint64_t k)
{
    k += 0x9e3779b97f4a7c15ull;
    k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ull;
    k = (k ^ (k >> 27)) * 0x94d049bb133111ebull;
    k ^= k >> 31;
    return (float)((double)(k >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

void make_batch(const mlp_dims *d, int64_t step, float *x, float *t)
{
    for (int r = 0; r < d->batch; r++) {
        uint64_t row = (uint64_t)step * (uint64_t)d->batch + (uint64_t)r;
        for (int i = 0; i < d->in; i++)
            x[(size_t)r * d->in + i] = hash_uniform(row * 1000003u + (uint64_t)i);
        for (int k = 0; k < d->out; k++) {
            float acc = 0.0f;
            for (int i = 0; i < d->in; i++)
                acc += sinf(1.7f * x[(size_t)r * d->in + i] * (float)(1 + (i + k) % 3));
            t[(size_t)r * d->out + k] = 0.3f * acc / (float)d->in;
        }
    }
}

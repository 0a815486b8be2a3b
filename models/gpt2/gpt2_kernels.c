/* SPDX-License-Identifier: MIT */
/* The CPU kernels: loops over rows and elements of the shared math (gpt2_rows.h, which the
 * CUDA kernels compile too), and the matmuls through OpenBLAS. */
#include "gpt2_kernels.h"
#include "gpt2_rows.h"

#include <cblas.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

void gpt2_set_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                     int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            encoder_row_forward(out + ((size_t)b * T + t) * C, wte + (size_t)tokens[b * T + t] * C,
                                wpe + (size_t)t * C, C, 0, 1);
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T,
                      int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            encoder_row_backward(dwte + (size_t)tokens[b * T + t] * C, dwpe + (size_t)t * C,
                                 dout + ((size_t)b * T + t) * C, C, 0, 1);
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int N, int C)
{
    for (int n = 0; n < N; n++)
        layernorm_row_forward(out + (size_t)n * C, &mean[n], &rstd[n], inp + (size_t)n * C, w, b, C,
                              0, 1);
}

void residual_layernorm_forward(float *res, float *out, float *mean, float *rstd, const float *a,
                                const float *b, const float *w, const float *bias, int N, int C)
{
    for (int n = 0; n < N; n++) {
        size_t o = (size_t)n * C;
        residual_layernorm_row_forward(res + o, out + o, &mean[n], &rstd[n], a + o, b + o, w, bias,
                                       C, 0, 1);
    }
}

void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++)
        layernorm_row_backward(dinp + (size_t)n * C, dw, db, dout + (size_t)n * C,
                               inp + (size_t)n * C, w, mean[n], rstd[n], C, 0, 1);
}

void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int C,
                    int OC)
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
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw,
                C);
    if (dbias)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++)
                dbias[o] += dout[(size_t)n * OC + o];
}

void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                attention_row_forward(out + ((size_t)b * T + t) * C + h * hs,
                                      att + (((size_t)b * NH + h) * T + t) * T,
                                      qkv + (size_t)b * T * 3 * C, t, T, C, h, hs);
}

void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B,
                        int T, int C, int NH)
{
    int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                attention_row_backward(dqkv + (size_t)b * T * 3 * C,
                                       dout + ((size_t)b * T + t) * C + h * hs,
                                       qkv + (size_t)b * T * 3 * C,
                                       att + (((size_t)b * NH + h) * T + t) * T, t, C, h, hs);
}

void gelu_forward(float *out, const float *inp, long long n)
{
    for (long long i = 0; i < n; i++)
        out[i] = gelu_elem_forward(inp[i]);
}

void gelu_backward(float *dinp, const float *inp, const float *dout, long long n)
{
    for (long long i = 0; i < n; i++)
        dinp[i] += gelu_elem_backward(inp[i], dout[i]);
}

void residual_forward(float *out, const float *a, const float *b, long long n)
{
    for (long long i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

float crossentropy_forward(float *probs, const float *logits, const int *targets, int N, int V)
{
    double loss = 0;
    for (int n = 0; n < N; n++)
        loss += crossentropy_row_forward(probs + (size_t)n * V, logits + (size_t)n * V, targets[n],
                                         V, 0, 1);
    return (float)(loss / N);
}

void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N, int V)
{
    float inv = 1.0f / (float)N;
    for (int n = 0; n < N; n++)
        crossentropy_row_backward(dlogits + (size_t)n * V, probs + (size_t)n * V, targets[n], V,
                                  inv, 0, 1);
}

void bf16_widen(float *dst, const unsigned short *src, long long n)
{
    for (long long i = 0; i < n; i++)
        dst[i] = gpt2_bf16_widen(src[i]);
}

void bf16_narrow_add(unsigned short *dst, const float *src, long long n)
{
    for (long long i = 0; i < n; i++)
        gpt2_bf16_narrow_add(&dst[i], src[i]);
}

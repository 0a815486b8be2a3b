/* SPDX-License-Identifier: MIT */
/* The attention decomposition of gpt2_attention.h, over an engine. */
#include "gpt2_attention.h"

#include <math.h>

int gpt2_flash_head_size_ok(int hs) { return hs >= 16 && hs <= 128 && hs % 16 == 0; }

size_t gpt2_att_floats(int keep, int B, int T, int C, int NH)
{
    size_t rows = (size_t)B * NH * T;
    int fused = keep == GPT2_ATT_LSE && NH > 0 && C % NH == 0 && gpt2_flash_head_size_ok(C / NH);
    return fused ? rows : rows * T;
}

size_t gpt2_attention_scratch_floats(int B, int T, int C, int NH)
{
    return 7 * (size_t)B * T * C + (size_t)B * NH * T * T;
}

/* q, k, v of every head from qkv's rows of 3C. */
static void split_qkv(const gpt2_att_engine *e, float *q, float *k, float *v, const float *qkv,
                      int B, int T, int C, int NH)
{
    int hs = C / NH;
    e->gather(e->ctx, q, qkv, B, T, NH, hs, 3 * C, 0);
    e->gather(e->ctx, k, qkv, B, T, NH, hs, 3 * C, C);
    e->gather(e->ctx, v, qkv, B, T, NH, hs, 3 * C, 2 * C);
}

void gpt2_attention_forward(const gpt2_att_engine *e, float *scratch, float *out, float *att,
                            const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH, heads = B * NH;
    size_t n = (size_t)B * T * C;
    long long th = (long long)T * hs, tt = (long long)T * T;
    float *q = scratch, *k = q + n, *v = k + n, *y = v + n;
    split_qkv(e, q, k, v, qkv, B, T, C, NH);
    e->bmm(e->ctx, 0, 1, T, T, hs, q, hs, th, k, hs, th, 0.0f, att, T, tt, heads); /* q k^T */
    e->softmax_forward(e->ctx, att, heads * T, T, 1.0f / sqrtf((float)hs));
    e->bmm(e->ctx, 0, 0, T, hs, T, att, T, tt, v, hs, th, 0.0f, y, hs, th, heads); /* att v */
    e->scatter(e->ctx, out, y, B, T, NH, hs, C, 0, 0);
}

void gpt2_attention_backward(const gpt2_att_engine *e, float *scratch, float *dqkv,
                             const float *dout, const float *qkv, const float *att, int B, int T,
                             int C, int NH)
{
    int hs = C / NH, heads = B * NH;
    size_t n = (size_t)B * T * C;
    long long th = (long long)T * hs, tt = (long long)T * T;
    float *q = scratch, *k = q + n, *v = k + n, *dy = v + n;
    float *dq = dy + n, *dk = dq + n, *dv = dk + n, *datt = dv + n;
    split_qkv(e, q, k, v, qkv, B, T, C, NH);
    e->gather(e->ctx, dy, dout, B, T, NH, hs, C, 0);
    e->bmm(e->ctx, 0, 1, T, T, hs, dy, hs, th, v, hs, th, 0.0f, datt, T, tt, heads); /* dy v^T */
    e->bmm(e->ctx, 1, 0, T, hs, T, att, T, tt, dy, hs, th, 0.0f, dv, hs, th, heads); /* att^T dy */
    e->softmax_backward(e->ctx, datt, att, heads * T, T, 1.0f / sqrtf((float)hs));
    e->bmm(e->ctx, 0, 0, T, hs, T, datt, T, tt, k, hs, th, 0.0f, dq, hs, th, heads); /* dpre k */
    e->bmm(e->ctx, 1, 0, T, hs, T, datt, T, tt, q, hs, th, 0.0f, dk, hs, th, heads); /* dpre^T q */
    e->scatter(e->ctx, dqkv, dq, B, T, NH, hs, 3 * C, 0, 1);
    e->scatter(e->ctx, dqkv, dk, B, T, NH, hs, 3 * C, C, 1);
    e->scatter(e->ctx, dqkv, dv, B, T, NH, hs, 3 * C, 2 * C, 1);
}

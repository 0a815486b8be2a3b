/* SPDX-License-Identifier: MIT */
/* The row and element functions of gpt2_rows.h that read or write activations, written once
 * over the activation type and included by gpt2_rows.h twice (no include guard, on purpose):
 * GPT2_ACT is the stored type (float or gpt2_bf16), GPT2_LD / GPT2_ST read and write one
 * element as fp32, GPT2_FN names the instance. Parameters (te, pe, w, b), their gradients
 * (dte, dw, db) and the layernorm statistics (mean, rstd) are fp32 in both; all arithmetic is
 * fp32. For float, GPT2_LD(p) is *p and GPT2_ST(p, v) is *p = v: the same operations in the
 * same order as before the split, the same bits. For bf16, a value stored is rounded once and
 * what later math reads is what was stored (the residual's sum below). */
#if !defined(GPT2_ACT) || !defined(GPT2_LD) || !defined(GPT2_ST) || !defined(GPT2_FN)
#error "gpt2_rows_act.h is included by gpt2_rows.h only"
#endif

/* one element as fp32 (C++ overloads: a kernel template reads either type alike) */
static inline GPT2_HD float GPT2_FN(gpt2_act_ld)(const GPT2_ACT *p) { return GPT2_LD(p); }
static inline GPT2_HD void GPT2_FN(gpt2_act_st)(GPT2_ACT *p, float v) { GPT2_ST(p, v); }

/* ---- encoder: one (b, t) row ---- */
static inline GPT2_HD void GPT2_FN(encoder_row_forward)(GPT2_ACT *o, const float *te,
                                                        const float *pe, int C, int lane, int lanes)
{
    for (int c = lane; c < C; c += lanes)
        GPT2_ST(&o[c], te[c] + pe[c]);
}

/* The GPU's encoder backward in a fixed order (so that a run repeats bit for bit, and a
 * resumed run equals an uninterrupted one): the rows of one token, listed in rows[0..n) in
 * ascending order, are added into the token's gradient row column by column in that order,
 * and each position's gradient gets the B sequences' rows in order. Each element sees the
 * CPU kernel's additions in the CPU kernel's order, so the results are its bits too. */
static inline GPT2_HD void GPT2_FN(encoder_token_backward)(float *dte, const GPT2_ACT *d,
                                                           const int *rows, int n, int width, int C,
                                                           int lane, int lanes)
{
    /* columns [0, width) of rows of C (the GPU takes a row in slices of a warp's width) */
    for (int c = lane; c < width; c += lanes) {
        float acc = dte[c];
        for (int k = 0; k < n; k++)
            acc += GPT2_LD(&d[(size_t)rows[k] * C + c]);
        dte[c] = acc;
    }
}

/* acc + element c of position t's row in each of the B sequences, in sequence order */
static inline GPT2_HD float GPT2_FN(encoder_position_backward)(float acc, const GPT2_ACT *d, int B,
                                                               int T, int C, int t, int c)
{
    for (int b = 0; b < B; b++)
        acc += GPT2_LD(&d[((size_t)b * T + t) * C + c]);
    return acc;
}

/* ---- layernorm: one row of C (lane 0 stores its mean and rstd) ---- */
/* The row from its lane's sum of x (x[lane] + x[lane + lanes] + ..., in that order) on. */
static inline GPT2_HD void GPT2_FN(layernorm_row_from_sum)(GPT2_ACT *o, float *mean, float *rstd,
                                                           const GPT2_ACT *x, const float *w,
                                                           const float *b, float m, int C, int lane,
                                                           int lanes)
{
    float v = 0;
    m = GPT2_LANES_SUMF(m, lanes) / (float)C;
    for (int c = lane; c < C; c += lanes) {
        float xc = GPT2_LD(&x[c]);
        v += (xc - m) * (xc - m);
    }
    v = GPT2_LANES_SUMF(v, lanes);
    float s = 1.0f / sqrtf(v / (float)C + 1e-5f);
    for (int c = lane; c < C; c += lanes)
        GPT2_ST(&o[c], (GPT2_LD(&x[c]) - m) * s * w[c] + b[c]);
    if (lane == 0) {
        *mean = m;
        *rstd = s;
    }
}

static inline GPT2_HD void GPT2_FN(layernorm_row_forward)(GPT2_ACT *o, float *mean, float *rstd,
                                                          const GPT2_ACT *x, const float *w,
                                                          const float *b, int C, int lane,
                                                          int lanes)
{
    float m = 0;
    for (int c = lane; c < C; c += lanes)
        m += GPT2_LD(&x[c]);
    GPT2_FN(layernorm_row_from_sum)(o, mean, rstd, x, w, b, m, C, lane, lanes);
}

/* res = a + b, then the layernorm of res, in one pass less over memory: the mean's sum is
 * taken from the sums as they are stored (each lane reads back only what it stored, so in
 * bf16 the statistics are those of the rounded residual the next layer reads). The same
 * operations in the same order as the residual and then layernorm_row_forward: the same
 * bits. */
static inline GPT2_HD void GPT2_FN(residual_layernorm_row_forward)(
    GPT2_ACT *res, GPT2_ACT *o, float *mean, float *rstd, const GPT2_ACT *a, const GPT2_ACT *b,
    const float *w, const float *bias, int C, int lane, int lanes)
{
    float m = 0;
    for (int c = lane; c < C; c += lanes) {
        GPT2_ST(&res[c], GPT2_LD(&a[c]) + GPT2_LD(&b[c]));
        m += GPT2_LD(&res[c]);
    }
    GPT2_FN(layernorm_row_from_sum)(o, mean, rstd, res, w, bias, m, C, lane, lanes);
}

/* dx += the gradient through the row (rounded once where dx is bf16); dw, db (fp32) += the
 * weights' */
static inline GPT2_HD void GPT2_FN(layernorm_row_backward)(GPT2_ACT *dx, float *dw, float *db,
                                                           const GPT2_ACT *d, const GPT2_ACT *x,
                                                           const float *w, float mean, float rstd,
                                                           int C, int lane, int lanes)
{
    float dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = lane; c < C; c += lanes) {
        float dc = GPT2_LD(&d[c]);
        float norm = (GPT2_LD(&x[c]) - mean) * rstd, dnorm = w[c] * dc;
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean = GPT2_LANES_SUMF(dnorm_mean, lanes) / (float)C;
    dnorm_norm_mean = GPT2_LANES_SUMF(dnorm_norm_mean, lanes) / (float)C;
    for (int c = lane; c < C; c += lanes) { /* dw, db: column c is this lane's alone */
        float dc = GPT2_LD(&d[c]);
        float norm = (GPT2_LD(&x[c]) - mean) * rstd, dnorm = w[c] * dc;
        db[c] += dc;
        dw[c] += norm * dc;
        GPT2_ST(&dx[c], GPT2_LD(&dx[c]) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd);
    }
}

/* ---- element-wise: element i (gelu_elem_* of gpt2_rows.h on stored values) ---- */
static inline GPT2_HD void GPT2_FN(gelu_at_forward)(GPT2_ACT *out, const GPT2_ACT *inp, size_t i)
{
    GPT2_ST(&out[i], gelu_elem_forward(GPT2_LD(&inp[i])));
}

/* dinp[i] += gelu'(inp[i]) dout[i] */
static inline GPT2_HD void GPT2_FN(gelu_at_backward)(GPT2_ACT *dinp, const GPT2_ACT *inp,
                                                     const GPT2_ACT *dout, size_t i)
{
    GPT2_ST(&dinp[i], GPT2_LD(&dinp[i]) + gelu_elem_backward(GPT2_LD(&inp[i]), GPT2_LD(&dout[i])));
}

static inline GPT2_HD void GPT2_FN(residual_at_forward)(GPT2_ACT *out, const GPT2_ACT *a,
                                                        const GPT2_ACT *b, size_t i)
{
    GPT2_ST(&out[i], GPT2_LD(&a[i]) + GPT2_LD(&b[i]));
}

#undef GPT2_ACT
#undef GPT2_LD
#undef GPT2_ST
#undef GPT2_FN

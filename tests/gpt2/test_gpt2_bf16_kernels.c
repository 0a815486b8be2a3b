/* SPDX-License-Identifier: MIT */
/* The GPT-2 CUDA kernels with bf16 activations (gpt2_cuda.h's *_bf16: the encoder forward and
 * backward, layernorm forward, the fused residual + layernorm forward, layernorm backward,
 * GELU forward and backward, the residual; the fused attention forward and backward) against references computed here in double from
 * the same bf16 inputs, on odd shapes (rows of C = 75: longer than a warp and no multiple of
 * it; N = 39 rows).
 *
 * Tolerance: every bf16 result is rounded once from an fp32 value, at most half a bf16 ulp
 * (8 significant bits: 2^-8 relative); fp32 arithmetic adds far less. A result passes within
 * 2^-7 relative (|got - want| <= 2^-7 (|want| + 0.01); the floor covers results that cancel
 * near zero);
 * the fp32 results (layernorm's mean and rstd, the weight gradients) within 1e-4. The one
 * rounding the reference shares with the kernels is the residual's: the stored bf16 residual
 * is what the next layer reads, so its layernorm is the layernorm of that rounded sum (as in
 * llm.c's fused residual kernel). Exits 77 (skipped) where no GPU is visible. */
#include "test_rand.h"
#include "gpt2_cuda.h"
#include "gpt2_rows.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 3, T = 13, C = 75, V = 29, N = B * T };

#define BF16_TOL (1.0 / 128)
#define BF16_FLOOR 0.01
#define F32_TOL 1e-4

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static int failures;

/* device arrays, released at the end */
static void *dev_kept[64];
static int n_dev_kept;

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    if (n_dev_kept == 64 || cudaMalloc(&d, bytes) != cudaSuccess ||
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        exit(1);
    return dev_kept[n_dev_kept++] = d;
}

static void copy_back(void *h, const void *dev, size_t bytes)
{
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("copy back failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        exit(1);
    }
}

/* n random values in [lo, hi) rounded to bf16 (host) */
static gpt2_bf16 *rand_bf16(size_t n, float lo, float hi)
{
    float *f = test_rand_floats(&rs, n, lo, hi);
    gpt2_bf16 *h = malloc(n * sizeof *h);
    if (!f || !h)
        exit(1);
    for (size_t i = 0; i < n; i++)
        h[i] = gpt2_bf16_round(f[i]);
    free(f);
    return h;
}

static double bf(gpt2_bf16 h) { return gpt2_bf16_widen(h); }

static void verdict(const char *what, double worst, double tol)
{
    printf("%-34s max scaled difference %.3g (tolerance %.3g)\n", what, worst, tol);
    if (!(worst <= tol))
        failures++;
}

/* the device's n values (bf16, else fp32) against want: bf16 within BF16_TOL, fp32 within
 * F32_TOL */
static void check_as(const char *what, const double *want, const void *dev, size_t n, int bf16)
{
    size_t size = bf16 ? sizeof(gpt2_bf16) : sizeof(float);
    void *got = malloc(n * size);
    if (!got)
        exit(1);
    copy_back(got, dev, n * size);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double g = bf16 ? bf(((const gpt2_bf16 *)got)[i]) : ((const float *)got)[i];
        double d = fabs(g - want[i]) / (fabs(want[i]) + BF16_FLOOR);
        worst = d > worst ? d : worst;
    }
    free(got);
    verdict(what, worst, bf16 ? BF16_TOL : F32_TOL);
}

static void check_bf16(const char *what, const double *want, const void *dev, size_t n)
{
    check_as(what, want, dev, n, 1);
}

static void check_f32(const char *what, const double *want, const void *dev, size_t n)
{
    check_as(what, want, dev, n, 0);
}

static void launched(const char *what, int rc)
{
    if (rc) {
        printf("%s: launch failed: %s\n", what, cudaGetErrorString((cudaError_t)rc));
        failures++;
    }
}

static double gelu(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double gelu_grad(double x)
{
    double k = sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * 0.044715 * x * x);
}

/* the layernorm of row x (doubles): o, mean, rstd */
static void ln_ref(double *o, double *mean, double *rstd, const double *x, const float *w,
                   const float *b)
{
    double m = 0, v = 0;
    for (int c = 0; c < C; c++)
        m += x[c];
    m /= C;
    for (int c = 0; c < C; c++)
        v += (x[c] - m) * (x[c] - m);
    double s = 1 / sqrt(v / C + 1e-5);
    for (int c = 0; c < C; c++)
        o[c] = (x[c] - m) * s * w[c] + b[c];
    *mean = m, *rstd = s;
}

static void test_encoder(const int *tok, const int *dtok)
{
    float *wte = test_rand_floats(&rs, V * C, -1, 1), *wpe = test_rand_floats(&rs, T * C, -1, 1);
    float *dwte = test_rand_floats(&rs, V * C, -1, 1), *dwpe = test_rand_floats(&rs, T * C, -1, 1);
    gpt2_bf16 *d = rand_bf16(N * C, -1, 1), *out = rand_bf16(N * C, -1, 1);
    double *want = malloc(sizeof(double) * (N > V ? N : V) * C);
    if (!wte || !wpe || !dwte || !dwpe || !want)
        exit(1);
    void *g_wte = dev_copy(wte, V * C * 4), *g_wpe = dev_copy(wpe, T * C * 4);
    void *g_out = dev_copy(out, N * C * 2), *g_d = dev_copy(d, N * C * 2);
    void *g_dwte = dev_copy(dwte, V * C * 4), *g_dwpe = dev_copy(dwpe, T * C * 4);
    launched("encoder forward",
             gpt2_cuda_encoder_forward_bf16(g_out, dtok, g_wte, g_wpe, B, T, C, NULL));
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            want[n * C + c] = (double)wte[tok[n] * C + c] + wpe[(n % T) * C + c];
    check_bf16("encoder forward bf16", want, g_out, N * C);

    size_t bytes = 0;
    launched("encoder scratch", gpt2_cuda_encoder_backward_scratch(B, T, &bytes));
    void *scratch = NULL;
    if (cudaMalloc(&scratch, bytes) != cudaSuccess)
        exit(1);
    dev_kept[n_dev_kept++] = scratch;
    launched("encoder backward", gpt2_cuda_encoder_backward_bf16(g_dwte, g_dwpe, g_d, dtok, B, T, C,
                                                                 V, scratch, bytes, NULL));
    for (int i = 0; i < V * C; i++)
        want[i] = dwte[i];
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            want[tok[n] * C + c] += bf(d[n * C + c]);
    check_f32("encoder backward bf16: dwte", want, g_dwte, V * C);
    for (int i = 0; i < T * C; i++)
        want[i] = dwpe[i];
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            want[(n % T) * C + c] += bf(d[n * C + c]);
    check_f32("encoder backward bf16: dwpe", want, g_dwpe, T * C);
    free(wte), free(wpe), free(dwte), free(dwpe), free(d), free(out), free(want);
}

/* layernorm forward, residual + layernorm forward and layernorm backward */
static void test_layernorm(void)
{
    float *w = test_rand_floats(&rs, C, 0.5f, 1.5f), *b = test_rand_floats(&rs, C, -0.5f, 0.5f);
    gpt2_bf16 *x = rand_bf16(N * C, -2, 3), *a = rand_bf16(N * C, -2, 2);
    gpt2_bf16 *bb = rand_bf16(N * C, -1, 1), *d = rand_bf16(N * C, -1, 1);
    gpt2_bf16 *dx0 = rand_bf16(N * C, -1, 1);
    size_t nc = (size_t)N * C;
    double *xr = malloc(sizeof(double) * nc), *o = malloc(sizeof(double) * nc);
    double *res = malloc(sizeof(double) * nc), *dx = malloc(sizeof(double) * nc);
    double mean[N], rstd[N], dw[C] = {0}, db[C] = {0};
    float mean_f[N], rstd_f[N];
    if (!w || !b || !xr || !o || !res || !dx)
        exit(1);
    void *g_w = dev_copy(w, C * 4), *g_b = dev_copy(b, C * 4), *g_x = dev_copy(x, nc * 2);
    void *g_out = dev_copy(dx0, nc * 2), *g_res = dev_copy(dx0, nc * 2);
    void *g_mean = dev_copy(mean_f, sizeof mean_f), *g_rstd = dev_copy(rstd_f, sizeof rstd_f);

    launched("layernorm forward",
             gpt2_cuda_layernorm_forward_bf16(g_out, g_mean, g_rstd, g_x, g_w, g_b, N, C, NULL));
    for (size_t i = 0; i < nc; i++)
        xr[i] = bf(x[i]);
    for (int n = 0; n < N; n++)
        ln_ref(o + n * C, &mean[n], &rstd[n], xr + n * C, w, b);
    check_bf16("layernorm forward bf16: out", o, g_out, nc);
    check_f32("layernorm forward bf16: mean", mean, g_mean, N);
    check_f32("layernorm forward bf16: rstd", rstd, g_rstd, N);

    void *g_a = dev_copy(a, nc * 2), *g_bb = dev_copy(bb, nc * 2);
    launched("residual layernorm forward",
             gpt2_cuda_residual_layernorm_forward_bf16(g_res, g_out, g_mean, g_rstd, g_a, g_bb, g_w,
                                                       g_b, N, C, NULL));
    for (size_t i = 0; i < nc; i++) /* the residual as stored: rounded to bf16 once */
        res[i] = bf(gpt2_bf16_round((float)(bf(a[i]) + bf(bb[i]))));
    for (int n = 0; n < N; n++)
        ln_ref(o + n * C, &mean[n], &rstd[n], res + n * C, w, b);
    check_bf16("residual layernorm bf16: res", res, g_res, nc);
    check_bf16("residual layernorm bf16: out", o, g_out, nc);
    check_f32("residual layernorm bf16: mean", mean, g_mean, N);
    check_f32("residual layernorm bf16: rstd", rstd, g_rstd, N);

    /* backward of the plain layernorm of x, from the statistics the kernel computed */
    launched("layernorm forward",
             gpt2_cuda_layernorm_forward_bf16(g_out, g_mean, g_rstd, g_x, g_w, g_b, N, C, NULL));
    copy_back(mean_f, g_mean, sizeof mean_f);
    copy_back(rstd_f, g_rstd, sizeof rstd_f);
    float *dw0 = test_rand_floats(&rs, C, -1, 1), *db0 = test_rand_floats(&rs, C, -1, 1);
    float *scratch = malloc(gpt2_cuda_layernorm_backward_scratch(N, C) * sizeof(float));
    if (!dw0 || !db0 || !scratch)
        exit(1);
    void *g_dx = dev_copy(dx0, nc * 2), *g_d = dev_copy(d, nc * 2);
    void *g_dw = dev_copy(dw0, C * 4), *g_db = dev_copy(db0, C * 4);
    void *g_scratch = dev_copy(scratch, gpt2_cuda_layernorm_backward_scratch(N, C) * 4);
    launched("layernorm backward",
             gpt2_cuda_layernorm_backward_bf16(g_dx, g_dw, g_db, g_d, g_x, g_w, g_mean, g_rstd, N,
                                               C, g_scratch, NULL));
    for (int c = 0; c < C; c++)
        dw[c] = dw0[c], db[c] = db0[c];
    for (int n = 0; n < N; n++) {
        double m1 = 0, m2 = 0;
        for (int c = 0; c < C; c++) {
            double norm = (xr[n * C + c] - mean_f[n]) * rstd_f[n], dn = w[c] * bf(d[n * C + c]);
            m1 += dn, m2 += dn * norm;
        }
        m1 /= C, m2 /= C;
        for (int c = 0; c < C; c++) {
            double norm = (xr[n * C + c] - mean_f[n]) * rstd_f[n], dc = bf(d[n * C + c]);
            dx[n * C + c] = bf(dx0[n * C + c]) + (w[c] * dc - m1 - norm * m2) * rstd_f[n];
            dw[c] += norm * dc, db[c] += dc;
        }
    }
    check_bf16("layernorm backward bf16: dinp", dx, g_dx, nc);
    check_f32("layernorm backward bf16: dw", dw, g_dw, C);
    check_f32("layernorm backward bf16: db", db, g_db, C);
    free(w), free(b), free(x), free(a), free(bb), free(d), free(dx0), free(xr), free(o);
    free(res), free(dx), free(dw0), free(db0), free(scratch);
}

/* GELU forward and backward, the residual: element-wise over 4C columns */
static void test_elementwise(void)
{
    size_t n = (size_t)N * 4 * C;
    gpt2_bf16 *x = rand_bf16(n, -4, 4), *dout = rand_bf16(n, -1, 1), *dinp = rand_bf16(n, -1, 1);
    gpt2_bf16 *y = rand_bf16(n, -1, 1);
    double *want = malloc(sizeof(double) * n);
    if (!want)
        exit(1);
    void *g_x = dev_copy(x, n * 2), *g_out = dev_copy(y, n * 2), *g_y = dev_copy(y, n * 2);
    void *g_dout = dev_copy(dout, n * 2), *g_dinp = dev_copy(dinp, n * 2);
    launched("gelu forward", gpt2_cuda_gelu_forward_bf16(g_out, g_x, (long long)n, NULL));
    for (size_t i = 0; i < n; i++)
        want[i] = gelu(bf(x[i]));
    check_bf16("gelu forward bf16", want, g_out, n);
    launched("gelu backward",
             gpt2_cuda_gelu_backward_bf16(g_dinp, g_x, g_dout, (long long)n, NULL));
    for (size_t i = 0; i < n; i++)
        want[i] = bf(dinp[i]) + gelu_grad(bf(x[i])) * bf(dout[i]);
    check_bf16("gelu backward bf16 (dinp +=)", want, g_dinp, n);
    launched("residual forward",
             gpt2_cuda_residual_forward_bf16(g_out, g_x, g_y, (long long)n, NULL));
    for (size_t i = 0; i < n; i++)
        want[i] = bf(x[i]) + bf(y[i]);
    check_bf16("residual forward bf16", want, g_out, n);
    free(x), free(dout), free(dinp), free(y), free(want);
}

/* The fused attention with bf16 qkv, out, dout and dqkv against attention in double: heads of
 * 16 (3 of them), T = 45 (no multiple of the tiles). The backward's D_r = dout_r . out_r is the
 * reference's from the out the forward stored (its input, as the kernel reads it). */
enum { AT = 45, AH = 3, AHS = 16, AC = AH * AHS };

static void attention_ref(double *out, double *lse, double *dqkv, const gpt2_bf16 *qkv,
                          const gpt2_bf16 *dout, const gpt2_bf16 *out_stored)
{
    double scale = 1 / sqrt((double)AHS), p[AT];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < AH; h++)
            for (int t = 0; t < AT; t++) {
                const gpt2_bf16 *q = qkv + ((size_t)b * AT + t) * 3 * AC + h * AHS;
                double mx = -INFINITY, sum = 0, D = 0, dq[AHS] = {0};
                for (int j = 0; j <= t; j++) {
                    const gpt2_bf16 *k = qkv + ((size_t)b * AT + j) * 3 * AC + AC + h * AHS;
                    double dot = 0;
                    for (int d = 0; d < AHS; d++)
                        dot += bf(q[d]) * bf(k[d]);
                    p[j] = dot * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j <= t; j++)
                    sum += (p[j] = exp(p[j] - mx));
                size_t row = ((size_t)b * AT + t) * AC + h * AHS;
                lse[((size_t)b * AH + h) * AT + t] = mx + log(sum);
                for (int d = 0; d < AHS; d++) {
                    out[row + d] = 0;
                    for (int j = 0; j <= t; j++)
                        out[row + d] +=
                            p[j] / sum *
                            bf(qkv[((size_t)b * AT + j) * 3 * AC + 2 * AC + h * AHS + d]);
                    D += bf(dout[row + d]) * bf(out_stored[row + d]);
                }
                for (int j = 0; j <= t; j++) {
                    size_t kj = ((size_t)b * AT + j) * 3 * AC + h * AHS;
                    double pj = p[j] / sum, dp = 0;
                    for (int d = 0; d < AHS; d++) {
                        dp += bf(dout[row + d]) * bf(qkv[kj + 2 * AC + d]);
                        dqkv[kj + 2 * AC + d] += pj * bf(dout[row + d]);
                    }
                    double ds = pj * (dp - D) * scale;
                    for (int d = 0; d < AHS; d++) {
                        dq[d] += ds * bf(qkv[kj + AC + d]);
                        dqkv[kj + AC + d] += ds * bf(q[d]);
                    }
                }
                for (int d = 0; d < AHS; d++)
                    dqkv[((size_t)b * AT + t) * 3 * AC + h * AHS + d] += dq[d];
            }
}

static void test_attention(void)
{
    size_t nq = (size_t)B * AT * 3 * AC, no = (size_t)B * AT * AC, nl = (size_t)B * AH * AT;
    gpt2_bf16 *qkv = rand_bf16(nq, -1, 1), *dout = rand_bf16(no, -1, 1);
    gpt2_bf16 *zero = calloc(nq, sizeof *zero), *out_stored = malloc(no * sizeof *out_stored);
    double *out = malloc(no * sizeof *out), *lse = malloc(nl * sizeof *lse);
    double *dqkv = calloc(nq, sizeof *dqkv);
    float *scratch = calloc(gpt2_cuda_flash_backward_scratch(B, AT, AH), sizeof *scratch);
    if (!zero || !out_stored || !out || !lse || !dqkv || !scratch)
        exit(1);
    void *g_qkv = dev_copy(qkv, nq * 2), *g_dout = dev_copy(dout, no * 2);
    void *g_out = dev_copy(zero, no * 2), *g_dqkv = dev_copy(zero, nq * 2);
    void *g_lse = dev_copy(scratch, nl * 4);
    void *g_scratch = dev_copy(scratch, gpt2_cuda_flash_backward_scratch(B, AT, AH) * 4);
    launched("flash forward",
             gpt2_cuda_flash_forward_bf16(g_out, g_lse, g_qkv, B, AT, AC, AH, NULL));
    launched("flash backward", gpt2_cuda_flash_backward_bf16(g_dqkv, g_dout, g_qkv, g_out, g_lse, B,
                                                             AT, AC, AH, g_scratch, NULL));
    copy_back(out_stored, g_out, no * 2);
    attention_ref(out, lse, dqkv, qkv, dout, out_stored);
    check_bf16("flash attention forward bf16: out", out, g_out, no);
    check_f32("flash attention forward bf16: lse", lse, g_lse, nl);
    check_bf16("flash attention backward bf16: dqkv", dqkv, g_dqkv, nq);
    free(qkv), free(dout), free(zero), free(out_stored), free(out), free(lse), free(dqkv);
    free(scratch);
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no GPU visible: skipping\n");
        return 77;
    }
    int tok[N];
    for (int i = 0; i < N; i++) /* tokens repeat: runs of rows per token */
        tok[i] = (i * 7) % 11;
    int *dtok = dev_copy(tok, sizeof tok);
    test_encoder(tok, dtok);
    test_layernorm();
    test_elementwise();
    test_attention();
    while (n_dev_kept)
        cudaFree(dev_kept[--n_dev_kept]);
    printf(failures ? "FAILED: %d\n" : "all bf16 kernels within tolerance\n", failures);
    return failures != 0;
}

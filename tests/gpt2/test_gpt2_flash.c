/* SPDX-License-Identifier: MIT */
/* The fused causal attention (models/gpt2/gpt2_attention.cu) against a double-precision
 * reference written here from the definition (scores, softmax over positions <= t, their
 * gradients), and beside it the present CPU attention (gpt2_kernels.c's row kernels, fp32):
 * out, the logsumexp it keeps instead of the T x T softmax, and dq, dk, dv added into a dqkv
 * that already holds values. Lengths that are not multiples of the tiles (1, 7, 19, 33, 40,
 * 65, 100) and one that is (64), 1 to 25 heads, head sizes 16, 32, 48, 64, 80 and 128 (48 and
 * 80: not powers of two). Tolerance: the largest difference at most 1e-5 of the array's
 * largest magnitude (fp32 sums in another order: about 1e-6 here, as for the CPU's row
 * kernels, printed beside), far inside bf16's 2^-8. Also: unsupported head sizes are refused (cudaErrorInvalidValue,
 * nothing written); the CUDA ops take the fused path where the head size allows and keep
 * the GEMM path (att the softmax) where not; the backward repeats bit for bit (no atomics).
 * Exits 77 (skipped) where no GPU is visible; CI runs it on the stand-in. */
#include "test_rand.h"
#include "gpt2_attention.h"
#include "gpt2_cuda.h"
#include "gpt2_kernels.h"
#include "gpt2_ops.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static uint64_t rs = 0x9e3779b97f4a7c15ull;

static const double kTol = 1e-5;

static float *dev_of(const float *h, size_t n)
{
    void *d = NULL;
    if (cudaMalloc(&d, n * sizeof(float) + 1) != cudaSuccess ||
        (h && cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess))
        exit(1);
    return d;
}

static float *host_of(const float *d, size_t n)
{
    float *h = malloc(n * sizeof(float) + 1);
    if (!h || cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("copy back failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        exit(1);
    }
    return h;
}

/* The reference: double, from the definition. qkv [B,T,3C]; out [B,T,C]; lse [B,NH,T];
 * dqkv [B,T,3C] += the gradients for dout. */
typedef struct ref {
    double *out, *lse, *dqkv;
} ref;

static ref reference(const float *qkv, const float *dout, const float *dqkv0, int B, int T, int C,
                     int NH)
{
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    ref r = {calloc((size_t)B * T * C, sizeof(double)), calloc((size_t)B * NH * T, sizeof(double)),
             calloc((size_t)B * T * 3 * C, sizeof(double))};
    double *p = calloc((size_t)T, sizeof(double)), *dp = calloc((size_t)T, sizeof(double));
    if (!r.out || !r.lse || !r.dqkv || !p || !dp)
        exit(1);
    for (size_t i = 0; i < (size_t)B * T * 3 * C; i++)
        r.dqkv[i] = dqkv0[i];
#define Q(b, t, h, i) ((double)qkv[((size_t)(b)*T + (t)) * 3 * C + (h)*hs + (i)])
#define K(b, t, h, i) ((double)qkv[((size_t)(b)*T + (t)) * 3 * C + C + (h)*hs + (i)])
#define V(b, t, h, i) ((double)qkv[((size_t)(b)*T + (t)) * 3 * C + 2 * C + (h)*hs + (i)])
#define DO(b, t, h, i) ((double)dout[((size_t)(b)*T + (t)) * C + (h)*hs + (i)])
#define DQKV(b, t, part, h, i) r.dqkv[((size_t)(b)*T + (t)) * 3 * C + (part)*C + (h)*hs + (i)]
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0, dsum = 0;
                for (int s = 0; s <= t; s++) {
                    double x = 0;
                    for (int i = 0; i < hs; i++)
                        x += Q(b, t, h, i) * K(b, s, h, i);
                    p[s] = x * scale;
                    mx = fmax(mx, p[s]);
                }
                for (int s = 0; s <= t; s++)
                    sum += (p[s] = exp(p[s] - mx));
                r.lse[((size_t)b * NH + h) * T + t] = mx + log(sum);
                for (int s = 0; s <= t; s++) {
                    p[s] /= sum;
                    dp[s] = 0;
                    for (int i = 0; i < hs; i++) {
                        r.out[((size_t)b * T + t) * C + h * hs + i] += p[s] * V(b, s, h, i);
                        dp[s] += DO(b, t, h, i) * V(b, s, h, i);
                        DQKV(b, s, 2, h, i) += p[s] * DO(b, t, h, i); /* dv */
                    }
                    dsum += p[s] * dp[s];
                }
                for (int s = 0; s <= t; s++) {
                    double dpre = p[s] * (dp[s] - dsum) * scale; /* of the unscaled score */
                    for (int i = 0; i < hs; i++) {
                        DQKV(b, t, 0, h, i) += dpre * K(b, s, h, i);
                        DQKV(b, s, 1, h, i) += dpre * Q(b, t, h, i);
                    }
                }
            }
#undef Q
#undef K
#undef V
#undef DO
#undef DQKV
    free(p);
    free(dp);
    return r;
}

static void ref_free(ref *r)
{
    free(r->out);
    free(r->lse);
    free(r->dqkv);
}

/* max |got - want| / max |want| */
static double rel_max(const float *got, const double *want, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)got[i] - want[i]));
        m = fmax(m, fabs(want[i]));
    }
    return m > 0 ? d / m : d;
}

static void judge(const char *what, const char *shape, const float *got, const float *cpu,
                  const double *want, size_t n)
{
    double g = rel_max(got, want, n);
    printf("  %-5s %-30s GPU %.2e", what, shape, g);
    if (cpu)
        printf("  (CPU row kernels %.2e)", rel_max(cpu, want, n));
    printf("%s\n", g <= kTol ? "" : "  FAIL");
    failures += !(g <= kTol);
}

/* One shape: the fused kernels straight, against the reference and the CPU kernels. q is
 * drawn `spread` times wider than k and v, so that some softmax rows are sharp (the online
 * maximum matters). */
static void check_shape(int B, int T, int NH, int hs, float spread, void *stream)
{
    int C = NH * hs;
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, nrows = (size_t)B * NH * T;
    float *qkv = test_rand_floats(&rs, nqkv, -1.0f, 1.0f);
    for (size_t i = 0; i < nqkv; i++)
        if (i % (3 * (size_t)C) < (size_t)C)
            qkv[i] *= spread;
    float *dout = test_rand_floats(&rs, nout, -1.0f, 1.0f);
    float *dqkv0 = test_rand_floats(&rs, nqkv, -0.5f, 0.5f); /* the backward adds to it */
    ref r = reference(qkv, dout, dqkv0, B, T, C, NH);

    float *g_qkv = dev_of(qkv, nqkv), *g_dout = dev_of(dout, nout), *g_out = dev_of(NULL, nout);
    float *g_lse = dev_of(NULL, nrows), *g_dqkv = dev_of(dqkv0, nqkv);
    float *g_scratch = dev_of(NULL, gpt2_cuda_flash_backward_scratch(B, T, NH));
    int rc = gpt2_cuda_flash_forward(g_out, g_lse, g_qkv, B, T, C, NH, stream);
    if (!rc)
        rc = gpt2_cuda_flash_backward(g_dqkv, g_dout, g_qkv, g_out, g_lse, B, T, C, NH, g_scratch,
                                      stream);
    char shape[64];
    snprintf(shape, sizeof shape, "B %d T %3d NH %2d hs %3d q x%g", B, T, NH, hs, (double)spread);
    if (rc) {
        printf("  %s: launch failed: %s\n", shape, cudaGetErrorString((cudaError_t)rc));
        failures++;
    }
    float *out = host_of(g_out, nout), *lse = host_of(g_lse, nrows), *dqkv = host_of(g_dqkv, nqkv);

    /* the present CPU attention, fp32 */
    float *c_out = calloc(nout, sizeof(float)), *c_att = calloc(nrows * T, sizeof(float));
    float *c_dqkv = malloc(nqkv * sizeof(float));
    if (!c_out || !c_att || !c_dqkv)
        exit(1);
    memcpy(c_dqkv, dqkv0, nqkv * sizeof(float));
    attention_forward(c_out, c_att, qkv, B, T, C, NH);
    attention_backward(c_dqkv, dout, qkv, c_att, B, T, C, NH);

    judge("out", shape, out, c_out, r.out, nout);
    judge("lse", shape, lse, NULL, r.lse, nrows);
    judge("dqkv", shape, dqkv, c_dqkv, r.dqkv, nqkv);

    /* again: the same bits (every gradient element has one writer, in a fixed order) */
    float *first = dqkv;
    cudaMemcpy(g_dqkv, dqkv0, nqkv * sizeof(float), cudaMemcpyHostToDevice);
    gpt2_cuda_flash_backward(g_dqkv, g_dout, g_qkv, g_out, g_lse, B, T, C, NH, g_scratch, stream);
    float *again = host_of(g_dqkv, nqkv);
    if (memcmp(first, again, nqkv * sizeof(float))) {
        printf("  dqkv  %s: a second backward gave other bits\n", shape);
        failures++;
    }
    free(again);
    free(c_out), free(c_att), free(c_dqkv);
    free(out), free(lse), free(dqkv);
    cudaFree(g_qkv), cudaFree(g_dout), cudaFree(g_out), cudaFree(g_lse), cudaFree(g_dqkv);
    cudaFree(g_scratch);
    ref_free(&r);
    free(qkv), free(dout), free(dqkv0);
}

/* Head sizes the kernels do not take: refused before anything is queued, out untouched. */
static void check_refusals(void *stream)
{
    static const int bad[] = {8, 40, 72, 144, 1};
    float sentinel = 12345.0f;
    float *g_out = dev_of(&sentinel, 1), *g_any = dev_of(NULL, 4096);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int hs = bad[k], NH = 2, C = NH * hs;
        if (gpt2_flash_head_size_ok(hs)) {
            printf("head size %d accepted\n", hs);
            failures++;
        }
        int f = gpt2_cuda_flash_forward(g_out, g_any, g_any, 1, 1, C, NH, stream);
        int b =
            gpt2_cuda_flash_backward(g_any, g_any, g_any, g_out, g_any, 1, 1, C, NH, g_any, stream);
        if (f != (int)cudaErrorInvalidValue || b != (int)cudaErrorInvalidValue) {
            printf("head size %d: forward %d, backward %d, not cudaErrorInvalidValue\n", hs, f, b);
            failures++;
        }
    }
    if (gpt2_cuda_flash_forward(g_out, g_any, g_any, 1, 1, 33, 2, stream) == 0) /* C % NH */
        printf("C 33 in 2 heads accepted\n"), failures++;
    float *back = host_of(g_out, 1);
    if (*back != sentinel)
        printf("a refused call wrote its output\n"), failures++;
    for (int hs = 16; hs <= 128; hs += 16)
        failures += !gpt2_flash_head_size_ok(hs);
    free(back);
    cudaFree(g_out), cudaFree(g_any);
    printf("unsupported head sizes refused\n");
}

/* Through the CUDA ops, as the model calls them: a head size of 16 (the tiny model's) takes the
 * fused path, att the logsumexp; one of 8 the GEMM path, att the softmax. att is sized by
 * gpt2_att_floats with the ops' att_keep, as the model allocates it. */
static void check_ops(void *stream)
{
    gpt2_ops ops;
    char why[256];
    if (gpt2_ops_cuda_create(&ops, stream, -1, GPT2_FP32, why, sizeof why) != 0) {
        printf("GPU ops: %s\n", why);
        failures++;
        return;
    }
    if (ops.att_keep != GPT2_ATT_LSE)
        printf("the CUDA ops' att_keep is %d\n", ops.att_keep), failures++;
    const int B = 2, T = 23;
    for (int k = 0; k < 2; k++) {
        int NH = 4, hs = k ? 8 : 16, C = NH * hs;
        size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C;
        size_t natt = gpt2_att_floats(ops.att_keep, B, T, C, NH);
        size_t want_att = (size_t)B * NH * T * (k ? T : 1);
        if (natt != want_att)
            printf("hs %d: att of %zu floats, not %zu\n", hs, natt, want_att), failures++;
        float *qkv = test_rand_floats(&rs, nqkv, -1.0f, 1.0f);
        float *dout = test_rand_floats(&rs, nout, -1.0f, 1.0f);
        float *zero = calloc(nqkv, sizeof(float));
        if (!zero)
            exit(1);
        ref r = reference(qkv, dout, zero, B, T, C, NH);
        float *g_qkv = dev_of(qkv, nqkv), *g_dout = dev_of(dout, nout);
        float *g_out = dev_of(NULL, nout), *g_att = dev_of(NULL, natt),
              *g_dqkv = dev_of(zero, nqkv);
        ops.attention_forward(ops.ctx, g_out, g_att, g_qkv, B, T, C, NH);
        ops.attention_backward(ops.ctx, g_dqkv, g_dout, g_qkv, g_out, g_att, B, T, C, NH);
        float *out = host_of(g_out, nout), *att = host_of(g_att, natt);
        float *dqkv = host_of(g_dqkv, nqkv);
        const char *shape = k ? "ops, hs 8 (GEMM path)" : "ops, hs 16 (fused)";
        judge("out", shape, out, NULL, r.out, nout);
        judge("dqkv", shape, dqkv, NULL, r.dqkv, nqkv);
        if (!k) {
            judge("lse", shape, att, NULL, r.lse, natt);
        } else { /* the softmax: each row sums to 1 up to t, zeros after */
            double worst = 0;
            for (size_t row = 0; row < natt / T; row++) {
                int t = (int)(row % T);
                double sum = 0;
                for (int s = 0; s < T; s++)
                    sum += att[row * T + s],
                        worst = fmax(worst, s > t ? fabs(att[row * T + s]) : 0);
                worst = fmax(worst, fabs(sum - 1));
            }
            printf("  att   %-30s softmax rows off by %.2e\n", shape, worst);
            failures += !(worst <= 1e-5);
        }
        if (ops.status(ops.ctx))
            printf("ops: %s\n", ops.status_text(ops.ctx)), failures++;
        free(out), free(att), free(dqkv), free(qkv), free(dout), free(zero);
        cudaFree(g_qkv), cudaFree(g_dout), cudaFree(g_out), cudaFree(g_att), cudaFree(g_dqkv);
        ref_free(&r);
    }
    gpt2_ops_cuda_destroy(&ops);
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no GPU visible: skipping\n");
        return 77;
    }
    void *stream = NULL;
    printf("largest difference / largest magnitude (tolerance %g):\n", kTol);
    /* B, T, NH, hs, q's spread */
    static const struct {
        int B, T, NH, hs;
        float spread;
    } shapes[] = {
        {1, 1, 1, 64, 1},   {2, 7, 25, 64, 1},  {1, 7, 25, 16, 8},
        {2, 65, 3, 48, 4},  {1, 100, 2, 64, 8}, {1, 64, 1, 32, 1},
        {1, 33, 1, 128, 4}, {1, 19, 2, 80, 1},  {2, 40, 4, 16, 1},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        check_shape(shapes[k].B, shapes[k].T, shapes[k].NH, shapes[k].hs, shapes[k].spread, stream);
    check_refusals(stream);
    check_ops(stream);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("a kernel failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        failures++;
    }
    printf("%d failures\n", failures);
    return failures != 0;
}

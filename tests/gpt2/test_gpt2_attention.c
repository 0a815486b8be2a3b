/* SPDX-License-Identifier: MIT */
/* Attention as batched GEMMs (gpt2_attention.c, what the CUDA ops run with cuBLAS) on a CPU
 * engine (cblas GEMMs and the row and element math of gpt2_rows.h) against the row kernels of
 * gpt2_kernels.c, which are checked against finite differences: the output, the softmax and
 * the qkv gradient (added into a gradient that is not zero) agree to float rounding, for an
 * odd sequence length, several heads and batch elements. */
#include "test_rand.h"
#include "gpt2_attention.h"
#include "gpt2_kernels.h"
#include "gpt2_rows.h"

#include <cblas.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

/* ---- the CPU engine ---- */

static void cpu_bmm(void *ctx, int ta, int tb, int m, int n, int k, const float *A, int lda,
                    long long sa, const float *B, int ldb, long long sb, float beta, float *C,
                    int ldc, long long sc, int batch)
{
    (void)ctx;
    for (int b = 0; b < batch; b++)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, 1.0f, A + b * sa, lda, B + b * sb, ldb, beta, C + b * sc, ldc);
}

static void cpu_gather(void *ctx, float *dst, const float *src, int B, int T, int NH, int hs,
                       int stride, int off)
{
    (void)ctx;
    for (size_t i = 0; i < (size_t)B * NH * T * hs; i++)
        dst[i] = src[heads_offset(i, T, NH, hs, stride, off)];
}

static void cpu_scatter(void *ctx, float *dst, const float *src, int B, int T, int NH, int hs,
                        int stride, int off, int add)
{
    (void)ctx;
    for (size_t i = 0; i < (size_t)B * NH * T * hs; i++) {
        float *p = dst + heads_offset(i, T, NH, hs, stride, off);
        *p = (add ? *p : 0.0f) + src[i];
    }
}

static void cpu_softmax_f(void *ctx, float *att, int rows, int T, float scale)
{
    (void)ctx;
    for (int r = 0; r < rows; r++)
        causal_softmax_row_forward(att + (size_t)r * T, r % T, T, scale, 0, 1);
}

static void cpu_softmax_b(void *ctx, float *d, const float *att, int rows, int T, float scale)
{
    (void)ctx;
    for (int r = 0; r < rows; r++)
        causal_softmax_row_backward(d + (size_t)r * T, att + (size_t)r * T, r % T, T, scale, 0, 1);
}

static const gpt2_att_engine cpu_engine = {NULL,        cpu_bmm,       cpu_gather,
                                           cpu_scatter, cpu_softmax_f, cpu_softmax_b};

/* ---- the check ---- */

enum { B = 2, T = 17, C = 48, NH = 4 };

static uint64_t rs = 0x2545f4914f6cdd1dull;
static float frand(void) { return test_rand_float(&rs, -1.0f, 1.0f); }

static void check(const char *what, const float *want, const float *got, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= 2e-5 * fabs((double)want[i]) + 2e-6))
            fail_msg("%s[%zu]: %g, the row kernels %g", what, i, (double)got[i], (double)want[i]);
    }
}

static void test_gemm_attention_equals_row_kernels(void **state)
{
    (void)state;
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    float *qkv = malloc(nqkv * sizeof(float)), *dout = malloc(nout * sizeof(float));
    float *out1 = malloc(nout * sizeof(float)), *out2 = malloc(nout * sizeof(float));
    float *att1 = malloc(natt * sizeof(float)), *att2 = malloc(natt * sizeof(float));
    float *d1 = malloc(nqkv * sizeof(float)), *d2 = malloc(nqkv * sizeof(float));
    float *scratch = malloc(gpt2_attention_scratch_floats(B, T, C, NH) * sizeof(float));
    for (size_t i = 0; i < nqkv; i++)
        qkv[i] = frand(), d1[i] = d2[i] = 0.5f * frand(); /* gradients add to what is there */
    for (size_t i = 0; i < nout; i++)
        dout[i] = frand(), out2[i] = 1e9f; /* the output is overwritten */
    for (size_t i = 0; i < natt; i++)
        att2[i] = 1e9f;
    attention_forward(out1, att1, qkv, B, T, C, NH);
    gpt2_attention_forward(&cpu_engine, scratch, out2, att2, qkv, B, T, C, NH);
    check("att", att1, att2, natt);
    check("out", out1, out2, nout);
    attention_backward(d1, dout, qkv, att1, B, T, C, NH);
    gpt2_attention_backward(&cpu_engine, scratch, d2, dout, qkv, att1, B, T, C, NH);
    check("dqkv", d1, d2, nqkv);
    free(qkv), free(dout), free(out1), free(out2), free(att1), free(att2), free(d1), free(d2);
    free(scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_attention_equals_row_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

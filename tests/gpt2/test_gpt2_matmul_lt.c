/* SPDX-License-Identifier: MIT */
/* gpt2_matmul_lt (the GPT-2 matmuls with cuBLASLt's bias/GELU epilogues) against a scalar
 * double reference of the same math, for fp32 and bf16 tensors and shapes that are multiples
 * of nothing (N, C, OC odd or prime):
 *  forward  pre = inp @ w^T + bias, out = gelu(pre) (tanh approximation), and without GELU;
 *  backward dinp = (dout @ w) * gelu'(pre_in), dinp = dout @ w, dw = dout^T @ inp added to
 *           the dw there, dbias = the sums of dout over the rows.
 * Each in the type combinations the GPT-2 ops use (gpt2_lt_types): fp32 throughout, fp32 read
 * as TF32, bf16 throughout, bf16 inputs and outputs with an fp32 bias and bias gradient (the
 * bf16 trainer's: CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), and bf16 inputs with fp32 outputs.
 * The reference takes the very inputs the module gets (bf16 ones widened exactly; an fp32
 * bias as it is) and computes in double. Tolerances: fp32 results within 1e-5 x (|ref| + the
 * sum of the products' magnitudes) (fp32 accumulation in another order, tanhf), TF32 within
 * 2^-10 x that sum more (each input rounded to 11 significant bits errs by 2^-11, a product
 * by twice that); bf16 results, rounded once to bf16 from an fp32 value, within 2^-8 x |ref|
 * plus the same fp32 term (rounding to nearest with bf16's 8 significant bits errs by at most
 * 2^-8 relative; the GELU of an fp32 pre-value, not of its bf16 copy, is rounded).
 * On the stand-in (ZT_CUDA_FAKE) what cuBLASLt does not list is refused loudly:
 * CUBLAS_STATUS_NOT_SUPPORTED (fp32 inputs with a bf16 output, a bf16 bias with an fp32
 * output, TF32 from bf16, an aux type other than the output's). Exits 77 (skipped) where no
 * GPU is visible. */
#include "gpt2_matmul_lt.h"
#include "test_rand.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static uint64_t rs = 0x9e3779b97f4a7c15ull;

static float bf16_round(float x) /* to nearest even, as the module's inputs are made */
{
    uint32_t b;
    memcpy(&b, &x, 4);
    b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &b, 4);
    return x;
}

/* n random values in [-1, 1), rounded to bf16 when t is (so that both sides see them). */
static float *values(size_t n, gpt2_lt_dtype t, float scale)
{
    float *p = test_rand_floats(&rs, n, -scale, scale);
    for (size_t i = 0; t == GPT2_LT_BF16 && i < n; i++)
        p[i] = bf16_round(p[i]);
    return p;
}

static size_t esize(gpt2_lt_dtype t) { return t == GPT2_LT_BF16 ? 2 : 4; }

static void *to_device(const float *h, size_t n, gpt2_lt_dtype t)
{
    void *d = NULL;
    size_t bytes = n * esize(t);
    void *staged = malloc(bytes ? bytes : 1);
    for (size_t i = 0; t == GPT2_LT_BF16 && i < n; i++) {
        uint32_t b;
        memcpy(&b, &h[i], 4);
        ((uint16_t *)staged)[i] = (uint16_t)(b >> 16); /* exact: already bf16 values */
    }
    if (t == GPT2_LT_F32)
        memcpy(staged, h, bytes);
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess ||
        cudaMemcpy(d, staged, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        exit(1);
    free(staged);
    return d;
}

static float *from_device(const void *d, size_t n, gpt2_lt_dtype t)
{
    size_t bytes = n * esize(t);
    void *staged = malloc(bytes ? bytes : 1);
    float *h = malloc((n ? n : 1) * sizeof(float));
    if (cudaMemcpy(staged, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        if (t == GPT2_LT_F32) {
            h[i] = ((float *)staged)[i];
            continue;
        }
        uint32_t b = (uint32_t)((uint16_t *)staged)[i] << 16;
        memcpy(&h[i], &b, 4);
    }
    free(staged);
    return h;
}

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double dgelu_ref(double x)
{
    double k = sqrt(2.0 / M_PI), th = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3 * 0.044715 * x * x);
}

/* The combination's name in the lines printed. */
static const char *name_of(const gpt2_lt_types *t)
{
    static char buf[64];
    static const char *n[] = {"fp32", "bf16"};
    snprintf(buf, sizeof buf, "%s%s->%s bias %s", n[t->ab], t->tf32 ? "(tf32)" : "", n[t->d],
             n[t->bias]);
    return buf;
}

/* got (of type t: the output's, or the bias's for a bias gradient) against ref (n values,
 * mag[i]: the sum of the magnitudes behind ref[i]); 1 when within. */
static int close_to(const char *what, const float *got, const double *ref, const double *mag,
                    size_t n, const gpt2_lt_types *ty, gpt2_lt_dtype t)
{
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double tol = 1e-5 * (fabs(ref[i]) + mag[i]) +
                     (t == GPT2_LT_BF16 ? 0x1p-8 * fabs(ref[i]) : 0) +
                     (ty->tf32 ? 0x1p-10 * mag[i] : 0);
        double excess = fabs(got[i] - ref[i]) / (tol > 0 ? tol : 1e-30);
        if (excess > worst)
            worst = excess, at = i;
    }
    int ok = worst <= 1.0;
    printf("%-44s %s: %s (worst %.3g of the tolerance, element %zu: %.7g against %.7g)\n", what,
           name_of(ty), ok ? "ok" : "FAILED", worst, at, (double)got[at], ref[at]);
    failures += !ok;
    return ok;
}

/* The forward on one shape, with and without GELU; bias present. */
static void check_forward(gpt2_lt *lt, const gpt2_lt_types *t, int N, int C, int OC, int gelu)
{
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *inp = values(ni, t->ab, 1.0f), *w = values(nw, t->ab, 0.5f);
    float *bias = values((size_t)OC, t->bias, 1.0f);
    void *d_inp = to_device(inp, ni, t->ab), *d_w = to_device(w, nw, t->ab);
    void *d_bias = to_device(bias, (size_t)OC, t->bias);
    float *zero = calloc(no, sizeof(float));
    void *d_out = to_device(zero, no, t->d), *d_pre = to_device(zero, no, t->d);
    int st = gpt2_lt_forward(lt, t, d_out, gelu ? d_pre : NULL, d_inp, d_w, d_bias, N, C, OC, gelu);
    if (st != 0 || cudaDeviceSynchronize() != cudaSuccess) {
        printf("forward: status %d: %s\n", st, gpt2_lt_error(lt));
        failures++;
        return;
    }
    double *ref_pre = malloc(no * sizeof(double)), *ref_out = malloc(no * sizeof(double));
    double *mag = malloc(no * sizeof(double)), *mag_out = malloc(no * sizeof(double));
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias[o], m = fabs(bias[o]);
            for (int c = 0; c < C; c++) {
                double p = (double)inp[(size_t)n * C + c] * w[(size_t)o * C + c];
                s += p, m += fabs(p);
            }
            size_t i = (size_t)n * OC + o;
            ref_pre[i] = s, mag[i] = m;
            ref_out[i] = gelu ? gelu_ref(s) : s;
            mag_out[i] = gelu ? m * (fabs(dgelu_ref(s)) + 1.0) : m; /* the GELU's slope on it */
        }
    float *out = from_device(d_out, no, t->d), *pre = from_device(d_pre, no, t->d);
    char what[96];
    snprintf(what, sizeof what, "forward %s, N %d C %d OC %d", gelu ? "bias+GELU" : "bias", N, C,
             OC);
    close_to(what, out, ref_out, mag_out, no, t, t->d);
    if (gelu) {
        snprintf(what, sizeof what, "forward pre-GELU, N %d C %d OC %d", N, C, OC);
        close_to(what, pre, ref_pre, mag, no, t, t->d);
    }
    free(inp), free(w), free(bias), free(zero), free(out), free(pre);
    free(ref_pre), free(ref_out), free(mag), free(mag_out);
    cudaFree(d_inp), cudaFree(d_w), cudaFree(d_bias), cudaFree(d_out), cudaFree(d_pre);
}

/* The backward on one shape: dinp with or without DGELU; dw added to what dw holds; dbias. */
static void check_backward(gpt2_lt *lt, const gpt2_lt_types *t, int N, int C, int OC, int dgelu)
{
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *inp = values(ni, t->ab, 1.0f), *w = values(nw, t->ab, 0.5f);
    float *dout = values(no, t->ab, 1.0f);
    float *pre_in = values(ni, t->d, 2.0f), *dw0 = values(nw, t->d, 0.25f);
    float *zero = calloc(ni > (size_t)OC ? ni : (size_t)OC, sizeof(float));
    void *d_inp = to_device(inp, ni, t->ab), *d_w = to_device(w, nw, t->ab),
         *d_dout = to_device(dout, no, t->ab);
    void *d_pre = to_device(pre_in, ni, t->d), *d_dw = to_device(dw0, nw, t->d);
    void *d_dinp = to_device(zero, ni, t->d), *d_dbias = to_device(zero, (size_t)OC, t->bias);
    int st = gpt2_lt_backward(lt, t, d_dinp, d_dw, d_dbias, d_dout, d_inp, d_w,
                              dgelu ? d_pre : NULL, N, C, OC, 1);
    if (st != 0 || cudaDeviceSynchronize() != cudaSuccess) {
        printf("backward: status %d: %s\n", st, gpt2_lt_error(lt));
        failures++;
        return;
    }
    double *rdi = malloc(ni * sizeof(double)), *mdi = malloc(ni * sizeof(double));
    double *rdw = malloc(nw * sizeof(double)), *mdw = malloc(nw * sizeof(double));
    double *rdb = malloc((size_t)OC * sizeof(double)), *mdb = malloc((size_t)OC * sizeof(double));
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0, m = 0;
            for (int o = 0; o < OC; o++) {
                double p = (double)dout[(size_t)n * OC + o] * w[(size_t)o * C + c];
                s += p, m += fabs(p);
            }
            double g = dgelu ? dgelu_ref(pre_in[(size_t)n * C + c]) : 1.0;
            rdi[(size_t)n * C + c] = s * g, mdi[(size_t)n * C + c] = m * fabs(g);
        }
    for (int o = 0; o < OC; o++) {
        double b = 0, mb = 0;
        for (int n = 0; n < N; n++)
            b += dout[(size_t)n * OC + o], mb += fabs(dout[(size_t)n * OC + o]);
        rdb[o] = b, mdb[o] = mb;
        for (int c = 0; c < C; c++) {
            double s = dw0[(size_t)o * C + c], m = fabs(s);
            for (int n = 0; n < N; n++) {
                double p = (double)dout[(size_t)n * OC + o] * inp[(size_t)n * C + c];
                s += p, m += fabs(p);
            }
            rdw[(size_t)o * C + c] = s, mdw[(size_t)o * C + c] = m;
        }
    }
    float *dinp = from_device(d_dinp, ni, t->d), *dw = from_device(d_dw, nw, t->d);
    float *dbias = from_device(d_dbias, (size_t)OC, t->bias);
    char what[96];
    snprintf(what, sizeof what, "backward dinp%s, N %d C %d OC %d", dgelu ? " x gelu'" : "", N, C,
             OC);
    close_to(what, dinp, rdi, mdi, ni, t, t->d);
    snprintf(what, sizeof what, "backward dw (added), N %d C %d OC %d", N, C, OC);
    close_to(what, dw, rdw, mdw, nw, t, t->d);
    snprintf(what, sizeof what, "backward dbias, N %d C %d OC %d", N, C, OC);
    close_to(what, dbias, rdb, mdb, (size_t)OC, t, t->bias);
    free(inp), free(w), free(dout), free(pre_in), free(dw0), free(zero);
    free(rdi), free(mdi), free(rdw), free(mdw), free(rdb), free(mdb), free(dinp), free(dw),
        free(dbias);
    cudaFree(d_inp), cudaFree(d_w), cudaFree(d_dout), cudaFree(d_pre), cudaFree(d_dw);
    cudaFree(d_dinp), cudaFree(d_dbias);
}

#ifdef ZT_CUDA_FAKE
/* One forward (bias+GELU, aux kept; 2 x 2 x 2) in the types t, or with the aux's type set to
 * aux_type (>= 0) on the descriptor: the cuBLAS status. */
static int forward_status(gpt2_lt *lt, const gpt2_lt_types *t, int aux_type)
{
    void *b[5] = {NULL};
    for (int k = 0; k < 5; k++)
        if (cudaMalloc(&b[k], 64) != cudaSuccess || cudaMemset(b[k], 0, 64) != cudaSuccess)
            exit(1);
    int st;
    if (aux_type < 0) {
        st = gpt2_lt_forward(lt, t, b[0], b[1], b[2], b[3], b[4], 2, 2, 2, 1);
    } else { /* what the wrapper never sets: by hand, all fp32 */
        cublasLtHandle_t h = NULL;
        cublasLtMatmulDesc_t d = NULL;
        cublasLtMatrixLayout_t l = NULL;
        cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_GELU_AUX;
        int64_t ld = 2;
        int32_t at = aux_type;
        float one = 1, zero = 0;
        st = cublasLtCreate(&h) | cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F) |
             cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 2, 2, 2);
        st |= cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e) |
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &b[1],
                                             sizeof b[1]) |
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                             sizeof ld) |
              cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at,
                                             sizeof at);
        if (st == 0)
            st = cublasLtMatmul(h, d, &one, b[2], l, b[3], l, &zero, b[0], l, b[0], l, NULL, NULL,
                                0, NULL);
        cublasLtMatrixLayoutDestroy(l), cublasLtMatmulDescDestroy(d), cublasLtDestroy(h);
    }
    cudaDeviceSynchronize();
    for (int k = 0; k < 5; k++)
        cudaFree(b[k]);
    return st;
}

/* The type combinations cuBLASLt does not list are refused, not computed some other way; the
 * ones the GPT-2 ops use are taken. 1 when so. */
static int check_type_refusals(gpt2_lt *lt)
{
    const int no = CUBLAS_STATUS_NOT_SUPPORTED;
    int ok =
        forward_status(lt, &(gpt2_lt_types){GPT2_LT_F32, GPT2_LT_BF16, GPT2_LT_F32, 0}, -1) == no;
    ok &= forward_status(lt, &(gpt2_lt_types){GPT2_LT_F32, GPT2_LT_F32, GPT2_LT_BF16, 0}, -1) == no;
    ok &=
        forward_status(lt, &(gpt2_lt_types){GPT2_LT_BF16, GPT2_LT_BF16, GPT2_LT_F32, 1}, -1) == no;
    ok &= forward_status(lt, NULL, CUDA_R_16BF) == no;
    ok &= forward_status(lt, NULL, CUDA_R_32F) == 0;
    ok &= forward_status(lt, &(gpt2_lt_types){GPT2_LT_BF16, GPT2_LT_BF16, GPT2_LT_F32, 0}, -1) == 0;
    return ok;
}

/* What the stand-in does not model is refused, never computed some other way. */
static void check_refusals(gpt2_lt *lt)
{
    cublasLtMatmulDesc_t d = NULL;
    int ok =
        cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_16F, CUDA_R_32F) == CUBLAS_STATUS_NOT_SUPPORTED;
    ok &= cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
    cublasLtEpilogue_t relu = CUBLASLT_EPILOGUE_RELU_BIAS;
    ok &= cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu) ==
          CUBLAS_STATUS_NOT_SUPPORTED;
    int32_t fast = 1;
    ok &= cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast) ==
          CUBLAS_STATUS_NOT_SUPPORTED;
    cublasLtMatmulDescDestroy(d);
    cublasLtMatrixLayout_t l = NULL;
    ok &= cublasLtMatrixLayoutCreate(&l, CUDA_R_16F, 4, 4, 4) == CUBLAS_STATUS_NOT_SUPPORTED;
    ok &= cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 4, 4) == CUBLAS_STATUS_SUCCESS;
    int32_t batch = 3;
    ok &= cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                           sizeof batch) == CUBLAS_STATUS_NOT_SUPPORTED;
    cublasLtMatrixLayoutDestroy(l);
    printf("the stand-in refuses fp16 compute, fp16, ReLU, fast accumulation and batches: %s\n",
           ok ? "ok" : "FAILED");
    failures += !ok;
    ok = check_type_refusals(lt);
    printf("the stand-in refuses fp32 A/B into bf16 D, a bf16 bias with fp32 D, TF32 from bf16, "
           "a bf16 GELU aux with fp32 D: %s\n",
           ok ? "ok" : "FAILED");
    failures += !ok;
}
#endif

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no GPU visible: skipped\n");
        return 77;
    }
    gpt2_lt *lt = NULL;
    char msg[256];
    if (gpt2_lt_create(&lt, NULL, 1 << 20, msg, sizeof msg) != 0) {
        printf("gpt2_lt_create: %s\n", msg);
        return 1;
    }
    static const int shapes[][3] = {{7, 5, 13}, {1, 3, 1}, {17, 33, 11}};
    static const gpt2_lt_types types[] = {
        {GPT2_LT_F32, GPT2_LT_F32, GPT2_LT_F32, 0},    {GPT2_LT_F32, GPT2_LT_F32, GPT2_LT_F32, 1},
        {GPT2_LT_BF16, GPT2_LT_BF16, GPT2_LT_BF16, 0}, {GPT2_LT_BF16, GPT2_LT_BF16, GPT2_LT_F32, 0},
        {GPT2_LT_BF16, GPT2_LT_F32, GPT2_LT_F32, 0},
    };
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int *sh = shapes[s];
            check_forward(lt, &types[k], sh[0], sh[1], sh[2], 1);
            check_forward(lt, &types[k], sh[0], sh[1], sh[2], 0);
            check_backward(lt, &types[k], sh[0], sh[1], sh[2], 1);
            check_backward(lt, &types[k], sh[0], sh[1], sh[2], 0);
        }
#ifdef ZT_CUDA_FAKE
    check_refusals(lt);
#endif
    gpt2_lt_destroy(lt);
    printf("%s\n", failures ? "FAILED" : "all ok");
    return failures ? 1 : 0;
}

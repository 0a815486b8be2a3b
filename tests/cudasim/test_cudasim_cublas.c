/* SPDX-License-Identifier: MIT */
/* The stand-in's cuBLAS (cudasim/src/cublas.cc): every call ztier's CUDA code makes against a
 * column-major reference in double, with leading dimensions larger than the matrices and
 * every transpose; bf16 inputs widened exactly; TF32 math rounding the inputs to 10 mantissa
 * bits (the reference computed from the rounded inputs agrees, the unrounded one does not);
 * the argument checks; a host matrix named as a finding. */
#include "cudasim.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static cublasHandle_t blas;
static cudaStream_t stream;
static uint64_t rng = 12345;

static float uniform(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffff) / 32768.0f - 1.0f;
}

static float *host_randoms(size_t n)
{
    float *h = malloc(n * sizeof(float));
    assert_non_null(h);
    for (size_t i = 0; i < n; i++)
        h[i] = uniform();
    return h;
}

static void *dev_of(const void *h, size_t bytes)
{
    void *d = NULL;
    assert_int_equal(cudaMalloc(&d, bytes), cudaSuccess);
    assert_int_equal(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static void back(void *h, const void *d, size_t bytes)
{
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    assert_int_equal(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

static float tf32(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    b = (b + 0x1000u) & ~0x1fffu;
    memcpy(&x, &b, 4);
    return x;
}

/* Column-major element (i, j) of op(X), X stored with leading dimension ld. */
static float at(const float *x, int ld, int t, int i, int j)
{
    return t ? x[j + i * ld] : x[i + j * ld];
}

/* C = alpha op(A) op(B) + beta C in double; `round` applies TF32 rounding to A and B. */
static void ref_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, const float *C0, double *C, int ldc,
                     int round)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                float a = at(A, lda, ta, i, p), b = at(B, ldb, tb, p, j);
                s += (double)(round ? tf32(a) : a) * (round ? tf32(b) : b);
            }
            C[i + j * ldc] = alpha * s + beta * (double)C0[i + j * ldc];
        }
}

static double worst(const float *got, const double *want, int m, int n, int ldc)
{
    double w = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double d = fabs(got[i + j * ldc] - want[i + j * ldc]) / (fabs(want[i + j * ldc]) + 1);
            w = d > w ? d : w;
        }
    return w;
}

static int setup(void **state)
{
    (void)state;
    cudasim_set_abort_on_finding(0);
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, stream))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
    return 0;
}

static void test_sgemm_every_transpose(void **state)
{
    (void)state;
    const int m = 37, n = 29, k = 41, lda = 50, ldb = 60, ldc = 45;
    float *A = host_randoms((size_t)lda * 50), *B = host_randoms((size_t)ldb * 50);
    float *C0 = host_randoms((size_t)ldc * n), *C = malloc(sizeof(float) * ldc * n);
    double *want = malloc(sizeof(double) * ldc * n);
    float *dA = dev_of(A, sizeof(float) * lda * 50), *dB = dev_of(B, sizeof(float) * ldb * 50);
    float *dC = dev_of(C0, sizeof(float) * ldc * n);
    const float alpha = 0.75f, beta = -0.5f;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            assert_int_equal(cudaMemcpy(dC, C0, sizeof(float) * ldc * n, cudaMemcpyHostToDevice),
                             cudaSuccess);
            assert_int_equal(cublasSgemm(blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                         tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, dA, lda,
                                         dB, ldb, &beta, dC, ldc),
                             CUBLAS_STATUS_SUCCESS);
            back(C, dC, sizeof(float) * ldc * n);
            ref_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C0, want, ldc, 0);
            assert_true(worst(C, want, m, n, ldc) < 1e-5);
        }
    free(A), free(B), free(C0), free(C), free(want);
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
    assert_int_equal(cudasim_findings(), 0);
}

static void test_tf32_rounds_the_inputs(void **state)
{
    (void)state;
    const int m = 16, n = 16, k = 64;
    float *A = host_randoms(m * k), *B = host_randoms(k * n), *C0 = calloc(m * n, 4);
    float *C = malloc(sizeof(float) * m * n);
    double *exact = malloc(sizeof(double) * m * n), *rounded = malloc(sizeof(double) * m * n);
    float *dA = dev_of(A, 4 * m * k), *dB = dev_of(B, 4 * k * n), *dC = dev_of(C0, 4 * m * n);
    const float one = 1, zero = 0;
    assert_int_equal(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, m, dB, k, &zero, dC, m),
        CUBLAS_STATUS_SUCCESS);
    back(C, dC, 4 * m * n);
    ref_gemm(0, 0, m, n, k, 1, A, m, B, k, 0, C0, exact, m, 0);
    ref_gemm(0, 0, m, n, k, 1, A, m, B, k, 0, C0, rounded, m, 1);
    assert_true(worst(C, rounded, m, n, m) < 1e-5);
    assert_true(worst(C, exact, m, n, m) > 1e-4); /* TF32's precision, as on a GPU */
    assert_int_equal(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS);
    free(A), free(B), free(C0), free(C), free(exact), free(rounded);
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
}

static uint16_t bf16_bits(float x) /* truncation: exactly representable inputs below */
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return (uint16_t)(b >> 16);
}

static float bf16_value(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float x;
    memcpy(&x, &b, 4);
    return x;
}

/* n random bf16 values: their bits in h, their values in f */
static void bf16_randoms(uint16_t *h, float *f, int n)
{
    for (int i = 0; i < n; i++)
        h[i] = bf16_bits(uniform()), f[i] = bf16_value(h[i]);
}

static void test_gemm_ex_bf16_and_batched(void **state)
{
    (void)state;
    enum { M = 8, NN = 6, K = 10, BATCH = 3 };
    uint16_t A16[M * K], B16[K * NN];
    float A[M * K], B[K * NN], C0[M * NN] = {0}, C[M * NN];
    double want[M * NN];
    bf16_randoms(A16, A, M * K);
    bf16_randoms(B16, B, K * NN);
    void *dA = dev_of(A16, sizeof A16), *dB = dev_of(B16, sizeof B16);
    float *dC = dev_of(C0, sizeof C0);
    const float one = 1, zero = 0;
    assert_int_equal(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, dA, CUDA_R_16BF,
                                  M, dB, CUDA_R_16BF, K, &zero, dC, CUDA_R_32F, M,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_SUCCESS);
    back(C, dC, sizeof C);
    ref_gemm(0, 0, M, NN, K, 1, A, M, B, K, 0, C0, want, M, 0);
    assert_true(worst(C, want, M, NN, M) < 1e-6);
    /* batched: each batch's A, B, C a stride apart */
    float *bA = host_randoms(BATCH * M * K), *bB = host_randoms(BATCH * K * NN);
    float *bC = calloc(BATCH * M * NN, 4);
    float *dbA = dev_of(bA, 4 * BATCH * M * K), *dbB = dev_of(bB, 4 * BATCH * K * NN);
    float *dbC = dev_of(bC, 4 * BATCH * M * NN);
    assert_int_equal(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, dbA,
                                               M, M * K, dbB, K, K * NN, &zero, dbC, M, M * NN,
                                               BATCH),
                     CUBLAS_STATUS_SUCCESS);
    back(bC, dbC, 4 * BATCH * M * NN);
    for (int b = 0; b < BATCH; b++) {
        ref_gemm(0, 0, M, NN, K, 1, bA + b * M * K, M, bB + b * K * NN, K, 0, C0, want, M, 0);
        assert_true(worst(bC + b * M * NN, want, M, NN, M) < 1e-5);
    }
    free(bA), free(bB), free(bC);
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dbA), cudaFree(dbB), cudaFree(dbC);
}

/* The bf16 value nearest x (ties to even), from its two bf16 neighbours. */
static double bf16_nearest(double x)
{
    float f = (float)x;
    uint16_t lo = bf16_bits(f); /* truncation: toward zero */
    double a = bf16_value(lo), b = bf16_value((uint16_t)(lo + 1));
    return fabs(x - a) < fabs(x - b) || (fabs(x - a) == fabs(x - b) && !(lo & 1)) ? a : b;
}

/* GemmEx into a bf16 C (bf16 A and B; the GPT-2 ops' weight gradients straight into ztier's
 * 16-bit buffers): C = bf16(A B + C), the sum in fp32, rounded once to nearest even: the bf16
 * nearest a double reference, up to fp32's error in the sum; with ldc > m the rows between
 * columns are untouched. fp32 inputs with a bf16 C are refused, as cuBLAS does. */
static void test_gemm_ex_bf16_output(void **state)
{
    (void)state;
    enum { M = 7, NN = 5, K = 33, LDC = M + 2 };
    uint16_t A16[M * K], B16[K * NN], C16[LDC * NN], got16[LDC * NN];
    float A[M * K], B[K * NN], C0[LDC * NN];
    double want[LDC * NN];
    bf16_randoms(A16, A, M * K);
    bf16_randoms(B16, B, K * NN);
    bf16_randoms(C16, C0, LDC * NN);
    void *dA = dev_of(A16, sizeof A16), *dB = dev_of(B16, sizeof B16);
    void *dC = dev_of(C16, sizeof C16);
    const float one = 1;
    assert_int_equal(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, dA, CUDA_R_16BF,
                                  M, dB, CUDA_R_16BF, K, &one, dC, CUDA_R_16BF, LDC,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_SUCCESS);
    back(got16, dC, sizeof got16);
    ref_gemm(0, 0, M, NN, K, 1, A, M, B, K, 1, C0, want, LDC, 0);
    for (int j = 0; j < NN; j++)
        for (int i = 0; i < LDC; i++) {
            double g = bf16_value(got16[i + j * LDC]), w = want[i + j * LDC];
            if (i < M) /* the bf16 nearest the sum (up to fp32's error in the sum) */
                assert_true(fabs(g - w) <= fabs(bf16_nearest(w) - w) + 1e-5);
            else
                assert_int_equal(got16[i + j * LDC], C16[i + j * LDC]);
        }
    assert_int_equal(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, M, NN, K, &one, dA, CUDA_R_32F, M,
                                  dB, CUDA_R_32F, K, &one, dC, CUDA_R_16BF, LDC, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_NOT_SUPPORTED);
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
}

static void test_level1_and_2(void **state)
{
    (void)state;
    enum { M = 9, NN = 7 };
    float *A = host_randoms(M * NN), x[NN], y[M], y0[M], out[M];
    for (int i = 0; i < NN; i++)
        x[i] = uniform();
    for (int i = 0; i < M; i++)
        y0[i] = uniform();
    float *dA = dev_of(A, sizeof(float) * M * NN), *dx = dev_of(x, sizeof x);
    float *dy = dev_of(y0, sizeof y0);
    const float alpha = 2, beta = 0.5f, three = 3;
    assert_int_equal(cublasSgemv(blas, CUBLAS_OP_N, M, NN, &alpha, dA, M, dx, 1, &beta, dy, 1),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSscal(blas, M, &three, dy, 1), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSaxpy(blas, NN, &alpha, dx, 1, dy, 1), CUBLAS_STATUS_SUCCESS);
    back(out, dy, sizeof out);
    for (int i = 0; i < M; i++) {
        double s = 0;
        for (int j = 0; j < NN; j++)
            s += (double)A[i + j * M] * x[j];
        y[i] = (float)(3.0 * (alpha * s + beta * y0[i]) + (i < NN ? alpha * x[i] : 0));
        assert_true(fabs(out[i] - y[i]) < 1e-5 * (fabs(y[i]) + 1));
    }
    free(A);
    cudaFree(dA), cudaFree(dx), cudaFree(dy);
}

static void test_bad_arguments_and_host_matrices(void **state)
{
    (void)state;
    float *d = NULL, host[64] = {0};
    const float one = 1;
    assert_int_equal(cudaMalloc((void **)&d, 256), cudaSuccess);
    assert_int_equal(
        cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, d, 4, d, 8, &one, d, 8),
        CUBLAS_STATUS_INVALID_VALUE); /* lda < m */
    assert_int_equal(
        cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, -1, 8, 8, &one, d, 8, d, 8, &one, d, 8),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cudasim_findings(), 0);
    assert_int_not_equal(
        cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, host, 8, d, 8, &one, d, 8),
        CUBLAS_STATUS_SUCCESS);
    assert_non_null(strstr(cudasim_last_finding(), "cublasSgemm"));
    cudasim_reset_findings();
    cudaFree(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm_every_transpose),
        cmocka_unit_test(test_tf32_rounds_the_inputs),
        cmocka_unit_test(test_gemm_ex_bf16_and_batched),
        cmocka_unit_test(test_gemm_ex_bf16_output),
        cmocka_unit_test(test_level1_and_2),
        cmocka_unit_test(test_bad_arguments_and_host_matrices),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: MIT */
// The cuBLAS calls ztier's CUDA code makes, on the stand-in: each queued on the handle's
// stream and computed by OpenBLAS, with its exact byte ranges checked like any device work
// (every matrix must be memory of the handle's device). With a TF32 math mode the GEMMs'
// fp32 inputs are first rounded to TF32 (10 mantissa bits, to nearest, ties away: the
// tensor cores' cvt.rna), so tests see the precision a GPU's TF32 GEMM has; bf16 inputs of
// cublasGemmEx are widened exactly. Accumulation order differs from cuBLAS's, as between any
// two BLAS libraries.
#include "internal.h"

#include <cblas.h>
#include <cublas_v2.h>

#include <cstring>

using namespace cudasim;

struct cublasContext {
    cudaStream_t stream = nullptr;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    int device = 0;
};

namespace
{

float tf32(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7f800000u) != 0x7f800000u) // finite: round to nearest, ties away, 10 bits
        b = (b + 0x1000u) & ~0x1fffu;
    memcpy(&x, &b, 4);
    return x;
}

float bf16_to_float(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float x;
    memcpy(&x, &b, 4);
    return x;
}

// x rounded to bf16, to nearest even (NaN stays NaN, quiet), as the GPU's GEMM epilogue does.
uint16_t float_to_bf16(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((b >> 16) | 0x40u);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

// Bytes a column-major rows x cols matrix with leading dimension ld spans.
size_t span(int rows, int cols, int ld, size_t elem)
{
    return rows > 0 && cols > 0 ? ((size_t)ld * (size_t)(cols - 1) + (size_t)rows) * elem : 0;
}

bool use_tf32(const cublasContext *h) { return h->math == CUBLAS_TF32_TENSOR_OP_MATH; }

// The matrix as fp32 the GEMM takes: a copy rounded to TF32, or widened from bf16.
std::vector<float> as_input(const void *p, size_t elems, bool bf16, bool round)
{
    std::vector<float> v(elems);
    for (size_t i = 0; i < elems; i++) {
        float x = bf16 ? bf16_to_float(static_cast<const uint16_t *>(p)[i])
                       : static_cast<const float *>(p)[i];
        v[i] = round ? tf32(x) : x;
    }
    return v;
}

// Queues `work` on the handle's stream after checking that every range is memory of the
// handle's device.
cublasStatus_t queue(cublasContext *h, const char *what, std::vector<Access> acc,
                     std::function<void()> work)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    std::vector<Access> nonempty;
    for (const Access &a : acc)
        if (a.bytes)
            nonempty.push_back(a);
    cudaError_t r = device_work(h->stream, what, std::move(nonempty), std::move(work));
    return r == cudaSuccess             ? CUBLAS_STATUS_SUCCESS
           : r == cudaErrorInvalidValue ? CUBLAS_STATUS_INVALID_VALUE
                                        : CUBLAS_STATUS_EXECUTION_FAILED;
}

CBLAS_TRANSPOSE tr(cublasOperation_t op) { return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; }

bool op_ok(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T; }

// C[m,n] = alpha op(A) op(B) + beta C, column-major, after the dimension checks cuBLAS makes;
// with c16 C is bf16: read widened, the sum taken in fp32 and rounded once to nearest even.
cublasStatus_t gemm(cublasContext *h, const char *what, cublasOperation_t ta, cublasOperation_t tb,
                    int m, int n, int k, float alpha, const void *A, int lda, const void *B,
                    int ldb, float beta, void *C, int ldc, bool bf16, long long sa, long long sb,
                    long long sc, int batch, bool c16 = false)
{
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (!op_ok(ta) || !op_ok(tb) || m < 0 || n < 0 || k < 0 || batch < 0 ||
        lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    size_t es = bf16 ? 2 : 4;
    size_t a_bytes = span(ar, ac, lda, es), b_bytes = span(br, bc, ldb, es);
    size_t ec = c16 ? 2 : 4, c_bytes = span(m, n, ldc, ec);
    auto last = [&](long long stride, size_t bytes, size_t elem) {
        return batch > 0 ? (size_t)stride * (size_t)(batch - 1) * elem + bytes : 0;
    };
    bool round = use_tf32(h) && !bf16;
    return queue(h, what,
                 {{A, k ? last(sa, a_bytes, es) : 0, false},
                  {B, k ? last(sb, b_bytes, es) : 0, false},
                  {C, last(sc, c_bytes, ec), true}},
                 [=] {
                     for (int b = 0; b < batch; b++) {
                         const char *pa = static_cast<const char *>(A) + (size_t)b * sa * es;
                         const char *pb = static_cast<const char *>(B) + (size_t)b * sb * es;
                         char *pc = static_cast<char *>(C) + (size_t)b * sc * ec;
                         std::vector<float> fa = as_input(pa, a_bytes / es, bf16, round);
                         std::vector<float> fb = as_input(pb, b_bytes / es, bf16, round);
                         std::vector<float> fc =
                             c16 ? as_input(pc, c_bytes / 2, true, false) : std::vector<float>();
                         float *out = c16 ? fc.data() : reinterpret_cast<float *>(pc);
                         cblas_sgemm(CblasColMajor, tr(ta), tr(tb), m, n, k, alpha, fa.data(), lda,
                                     fb.data(), ldb, beta, out, ldc);
                         for (size_t i = 0; c16 && i < c_bytes / 2; i++)
                             reinterpret_cast<uint16_t *>(pc)[i] = float_to_bf16(fc[i]);
                     }
                 });
}

} // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *handle = new cublasContext;
    cudaGetDevice(&(*handle)->device);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    if (!handle || !mode)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *mode = handle->math;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS:
        return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "the functionality requested is not supported";
    default:
        return "an internal operation failed";
    }
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc)
{
    if (!alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    return gemm(h, "cublasSgemm", ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc, false, 0,
                0, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta,
                                         float *C, int ldc, long long sc, int batch)
{
    if (!alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    return gemm(h, "cublasSgemmStridedBatched", ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C,
                ldc, false, sa, sb, sc, batch);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    (void)algo;
    bool bf16 = at == CUDA_R_16BF && bt == CUDA_R_16BF;
    bool f32 = at == CUDA_R_32F && bt == CUDA_R_32F;
    // C in fp32, or in bf16 from bf16 inputs
    if (!(ct == CUDA_R_32F || (ct == CUDA_R_16BF && bf16)) || !(bf16 || f32) ||
        (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    return gemm(h, "cublasGemmEx", ta, tb, m, n, k, *static_cast<const float *>(alpha), A, lda, B,
                ldb, *static_cast<const float *>(beta), C, ldc, bf16, 0, 0, 0, 1,
                ct == CUDA_R_16BF);
}

cublasStatus_t cublasSgemv_v2(cublasHandle_t h, cublasOperation_t trans, int m, int n,
                              const float *alpha, const float *A, int lda, const float *x, int incx,
                              const float *beta, float *y, int incy)
{
    if (!op_ok(trans) || m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx == 0 || incy == 0 ||
        !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    int xl = trans == CUBLAS_OP_N ? n : m, yl = trans == CUBLAS_OP_N ? m : n;
    size_t xb = xl ? ((size_t)(xl - 1) * (size_t)abs(incx) + 1) * 4 : 0;
    size_t yb = yl ? ((size_t)(yl - 1) * (size_t)abs(incy) + 1) * 4 : 0;
    float a = *alpha, b = *beta;
    return queue(
        h, "cublasSgemv", {{A, span(m, n, lda, 4), false}, {x, xb, false}, {y, yb, true}},
        [=] { cblas_sgemv(CblasColMajor, tr(trans), m, n, a, A, lda, x, incx, b, y, incy); });
}

cublasStatus_t cublasSaxpy_v2(cublasHandle_t h, int n, const float *alpha, const float *x, int incx,
                              float *y, int incy)
{
    if (n < 0 || incx == 0 || incy == 0 || !alpha)
        return CUBLAS_STATUS_INVALID_VALUE;
    size_t xb = n ? ((size_t)(n - 1) * (size_t)abs(incx) + 1) * 4 : 0;
    size_t yb = n ? ((size_t)(n - 1) * (size_t)abs(incy) + 1) * 4 : 0;
    float a = *alpha;
    return queue(h, "cublasSaxpy", {{x, xb, false}, {y, yb, true}},
                 [=] { cblas_saxpy(n, a, x, incx, y, incy); });
}

cublasStatus_t cublasSscal_v2(cublasHandle_t h, int n, const float *alpha, float *x, int incx)
{
    if (n < 0 || incx <= 0 || !alpha)
        return CUBLAS_STATUS_INVALID_VALUE;
    size_t xb = n ? ((size_t)(n - 1) * (size_t)incx + 1) * 4 : 0;
    float a = *alpha;
    return queue(h, "cublasSscal", {{x, xb, true}}, [=] { cblas_sscal(n, a, x, incx); });
}

} // extern "C"

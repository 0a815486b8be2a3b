/* SPDX-License-Identifier: MIT */
// The cuBLASLt subset ztier's GPT-2 ops use, on the stand-in: cublasLtMatmul with the bias,
// GELU (tanh approximation, as cuBLASLt's and llm.c's) and bias-gradient epilogues, with fp32
// scale, column-major layouts without batches, and the type combinations cuBLASLt lists for
// them: CUBLAS_COMPUTE_32F with fp32 A/B and C/D, or bf16 A/B and bf16 or fp32 C/D;
// CUBLAS_COMPUTE_32F_FAST_TF32 with fp32 A/B/C/D (the inputs rounded to TF32 first, as
// cublas.cc's TF32 GEMMs); the bias (and bias gradient) of D's type, or fp32 with a bf16 D
// (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE); the GELU aux of D's type. Each matmul is queued on the
// given stream with its exact byte ranges checked like any device work and computed by OpenBLAS
// on fp32 copies (bf16 widened exactly), then the epilogue per element in fp32, rounded once to
// a bf16 output. Anything else (another compute type, type combination, order, batch, epilogue
// or attribute) returns CUBLAS_STATUS_NOT_SUPPORTED with a note on stderr naming it, so a
// caller never gets a silently different result.
#include "internal.h"

#include <cblas.h>
#include <cublasLt.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <new>

using namespace cudasim;

struct cublasLtContext {
}; // the stream comes with each call

namespace
{

struct Layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
};

struct Desc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    void *bias = nullptr;
    int32_t bias_type = -1; // -1: D's type
    void *aux = nullptr;
    int64_t aux_ld = 0;
    int32_t aux_type = -1; // -1: D's type
};

static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t));

Layout *layout_of(cublasLtMatrixLayout_t l) { return reinterpret_cast<Layout *>(l); }
Desc *desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<Desc *>(d); }

cublasStatus_t unsupported(const char *call, const char *what, long long value)
{
    note("%s: %s %lld is not modelled by the stand-in (CUBLAS_STATUS_NOT_SUPPORTED)", call, what,
         value);
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

bool known_type(cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

// Matmuls queued so far, by epilogue (the modelled ones are below 1024): cudasim_lt_matmuls.
std::atomic<unsigned long long> g_matmuls[1024];

// fp32 rounded to TF32 (10 mantissa bits, to nearest, ties away), as cublas.cc's TF32 GEMMs.
float tf32(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7f800000u) != 0x7f800000u)
        b = (b + 0x1000u) & ~0x1fffu;
    memcpy(&x, &b, 4);
    return x;
}
size_t elem_size(cudaDataType t) { return t == CUDA_R_16BF ? 2 : 4; }

float load(const void *p, cudaDataType t, size_t i)
{
    if (t == CUDA_R_32F)
        return static_cast<const float *>(p)[i];
    uint32_t b = uint32_t(static_cast<const uint16_t *>(p)[i]) << 16;
    float x;
    memcpy(&x, &b, 4);
    return x;
}

// fp32 -> bf16, round to nearest even (a NaN stays NaN), as the GPU's cvt.rn.bf16.f32.
void store(void *p, cudaDataType t, size_t i, float x)
{
    if (t == CUDA_R_32F) {
        static_cast<float *>(p)[i] = x;
        return;
    }
    uint32_t b;
    memcpy(&b, &x, 4);
    uint16_t h = (b & 0x7fffffffu) > 0x7f800000u ? uint16_t((b >> 16) | 0x40u)
                                                 : uint16_t((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
    static_cast<uint16_t *>(p)[i] = h;
}

constexpr float kGeluK = 0.7978845608028654f; // sqrt(2 / pi)

float gelu(float x) { return 0.5f * x * (1.0f + tanhf(kGeluK * (x + 0.044715f * x * x * x))); }

// d gelu(x) / dx
float dgelu(float x)
{
    float th = tanhf(kGeluK * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) +
           0.5f * x * (1.0f - th * th) * kGeluK * (1.0f + 3 * 0.044715f * x * x);
}

// Bytes a column-major rows x cols matrix with leading dimension ld spans.
size_t span(uint64_t rows, uint64_t cols, int64_t ld, size_t elem)
{
    return rows && cols ? (size_t(ld) * size_t(cols - 1) + size_t(rows)) * elem : 0;
}

// The whole matrix widened to fp32 (the span, column by column), rounded to TF32 when round.
std::vector<float> widen(const void *p, const Layout &l, bool round)
{
    size_t n = span(l.rows, l.cols, l.ld, 1);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = round ? tf32(load(p, l.type, i)) : load(p, l.type, i);
    return v;
}

bool has(cublasLtEpilogue_t e, int bits) { return (int(e) & bits) == bits; }

// The epilogues modelled, and what each reads and writes besides D.
struct Epi {
    bool bias = false;    // D += bias[row]
    bool gelu = false;    // D = gelu(D), pre-GELU to aux when aux_out
    bool aux_out = false; // GELU_AUX*
    bool dgelu = false;   // D *= gelu'(aux[row, col]) (aux read)
    bool bgrad = false;   // DGELU_BGRAD: bias[row] = sum over cols of D
    bool bgrad_b = false; // BGRADB: bias[col] = sum over k of op(B)[k, col]
};

bool epilogue_of(cublasLtEpilogue_t e, Epi *out)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
        return *out = Epi{}, true;
    case CUBLASLT_EPILOGUE_BIAS:
        return *out = Epi{.bias = true}, true;
    case CUBLASLT_EPILOGUE_GELU:
        return *out = Epi{.gelu = true}, true;
    case CUBLASLT_EPILOGUE_GELU_BIAS:
        return *out = Epi{.bias = true, .gelu = true}, true;
    case CUBLASLT_EPILOGUE_GELU_AUX:
        return *out = Epi{.gelu = true, .aux_out = true}, true;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
        return *out = Epi{.bias = true, .gelu = true, .aux_out = true}, true;
    case CUBLASLT_EPILOGUE_DGELU:
        return *out = Epi{.dgelu = true}, true;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
        return *out = Epi{.dgelu = true, .bgrad = true}, true;
    case CUBLASLT_EPILOGUE_BGRADB:
        return *out = Epi{.bgrad_b = true}, true;
    default:
        return false;
    }
}

// Everything a matmul needs once checked, copied for the stream's thread.
struct Matmul {
    Desc d;
    Epi epi;
    Layout a, b, c, dl;
    int m, n, k;
    float alpha, beta;
    const void *A, *B, *C;
    void *D;
    cudaDataType bias_type, aux_type;
};

void run(const Matmul &w)
{
    bool round = w.d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    std::vector<float> fa = widen(w.A, w.a, round), fb = widen(w.B, w.b, round);
    std::vector<float> acc(size_t(w.m) * size_t(w.n), 0.0f);
    if (w.k > 0)
        cblas_sgemm(CblasColMajor, w.d.ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                    w.d.tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, w.m, w.n, w.k, w.alpha,
                    fa.data(), int(w.a.ld), fb.data(), int(w.b.ld), 0.0f, acc.data(), w.m);
    std::vector<double> bsum(w.epi.bgrad ? size_t(w.m) : 0, 0.0);
    for (int j = 0; j < w.n; j++)
        for (int i = 0; i < w.m; i++) {
            float x = acc[size_t(j) * size_t(w.m) + size_t(i)];
            if (w.beta != 0.0f)
                x += w.beta * load(w.C, w.c.type, size_t(j) * size_t(w.c.ld) + size_t(i));
            if (w.epi.bias)
                x += load(w.d.bias, w.bias_type, size_t(i));
            size_t ax = size_t(j) * size_t(w.d.aux_ld) + size_t(i);
            if (w.epi.aux_out)
                store(w.d.aux, w.aux_type, ax, x);
            if (w.epi.gelu)
                x = gelu(x);
            if (w.epi.dgelu)
                x *= dgelu(load(w.d.aux, w.aux_type, ax));
            if (w.epi.bgrad)
                bsum[size_t(i)] += x;
            store(w.D, w.dl.type, size_t(j) * size_t(w.dl.ld) + size_t(i), x);
        }
    for (int i = 0; i < int(bsum.size()); i++)
        store(w.d.bias, w.bias_type, size_t(i), float(bsum[size_t(i)]));
    if (w.epi.bgrad_b) // sum over k of op(B)[k, col]
        for (int j = 0; j < w.n; j++) {
            double s = 0;
            for (int q = 0; q < w.k; q++)
                s += w.d.tb == CUBLAS_OP_N ? fb[size_t(j) * size_t(w.b.ld) + size_t(q)]
                                           : fb[size_t(q) * size_t(w.b.ld) + size_t(j)];
            store(w.d.bias, w.bias_type, size_t(j), float(s));
        }
}

// The shape checks cuBLASLt makes: op(A) m x k, op(B) k x n, C and D m x n, each ld >= rows.
cublasStatus_t shapes(const Desc &d, const Layout &a, const Layout &b, const Layout &c,
                      const Layout &dl, int *m, int *n, int *k)
{
    uint64_t ar = d.ta == CUBLAS_OP_N ? a.rows : a.cols, ac = d.ta == CUBLAS_OP_N ? a.cols : a.rows;
    uint64_t br = d.tb == CUBLAS_OP_N ? b.rows : b.cols, bc = d.tb == CUBLAS_OP_N ? b.cols : b.rows;
    for (const Layout *l : {&a, &b, &c, &dl})
        if (l->ld < int64_t(l->rows > 1 ? l->rows : 1) || l->rows > INT32_MAX ||
            l->cols > INT32_MAX)
            return CUBLAS_STATUS_INVALID_VALUE;
    if (ac != br || dl.rows != ar || dl.cols != bc || c.rows != dl.rows || c.cols != dl.cols)
        return CUBLAS_STATUS_INVALID_VALUE;
    *m = int(ar), *n = int(bc), *k = int(ac);
    return CUBLAS_STATUS_SUCCESS;
}

// The type combinations cuBLASLt lists for these epilogues (see the top); w's bias and aux
// types resolved (-1: D's).
cublasStatus_t types(Matmul *w)
{
    const char *call = "cublasLtMatmul";
    if (w->a.type != w->b.type)
        return unsupported(call, "B's type differing from A's, B's type", w->b.type);
    if (w->c.type != w->dl.type)
        return unsupported(call, "C's type differing from D's, C's type", w->c.type);
    if (w->a.type == CUDA_R_32F && w->dl.type != CUDA_R_32F)
        return unsupported(call, "fp32 A and B with D's type", w->dl.type);
    if (w->d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 && w->a.type != CUDA_R_32F)
        return unsupported(call, "CUBLAS_COMPUTE_32F_FAST_TF32 with A's type", w->a.type);
    w->bias_type = w->d.bias_type < 0 ? w->dl.type : cudaDataType(w->d.bias_type);
    w->aux_type = w->d.aux_type < 0 ? w->dl.type : cudaDataType(w->d.aux_type);
    // a bias of D's type, or fp32 with a 16-bit D; a bf16 bias with an fp32 D is not listed
    if (w->bias_type != w->dl.type && w->bias_type != CUDA_R_32F)
        return unsupported(call, "a bias data type other than D's or fp32:", w->d.bias_type);
    // the GELU input matrix is of D's type (only fp8 kernels take another)
    if (w->aux_type != w->dl.type)
        return unsupported(call, "an aux data type other than D's:", w->d.aux_type);
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

unsigned long long cudasim_lt_matmuls(int epilogue)
{
    unsigned long long n = 0;
    for (int e = 0; e < 1024; e++)
        n += epilogue < 0 || e == epilogue ? g_matmuls[e].load() : 0;
    return n;
}

// As cublasCreate: a device to run on is required.
cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle)
{
    int count = 0;
    bool device = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
    if (handle && device)
        *handle = new cublasLtContext;
    return !handle  ? CUBLAS_STATUS_INVALID_VALUE
           : device ? CUBLAS_STATUS_SUCCESS
                    : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle)
{
    cublasStatus_t s = handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return s;
}

const char *cublasLtGetStatusString(cublasStatus_t s) { return cublasGetStatusString(s); }

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *out, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!known_type(type))
        return unsupported("cublasLtMatrixLayoutCreate", "data type", type);
    auto *o = new cublasLtMatrixLayoutOpaque_t{};
    new (o) Layout{type, rows, cols, ld};
    *out = o;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}

// Only what the defaults are already: column order, one matrix.
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t size)
{
    if (!l || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    int64_t v = 0;
    memcpy(&v, buf, size < sizeof v ? size : sizeof v);
    if ((attr == CUBLASLT_MATRIX_LAYOUT_ORDER && v == CUBLASLT_ORDER_COL) ||
        (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && v == 1))
        return CUBLAS_STATUS_SUCCESS;
    return unsupported("cublasLtMatrixLayoutSetAttribute", "attribute (value)",
                       (long long)attr * 1000 + v);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *out, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
        return unsupported("cublasLtMatmulDescCreate", "compute type", compute);
    if (scale != CUDA_R_32F)
        return unsupported("cublasLtMatmulDescCreate", "scale type", scale);
    auto *o = new cublasLtMatmulDescOpaque_t{};
    Desc *d = new (o) Desc{};
    d->compute = compute, d->scale = scale;
    *out = o;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t size)
{
    if (!desc || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    Desc *d = desc_of(desc);
    auto get = [&](auto *field) {
        if (size != sizeof *field)
            return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(field, buf, size);
        return CUBLAS_STATUS_SUCCESS;
    };
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
        return get(&d->ta);
    case CUBLASLT_MATMUL_DESC_TRANSB:
        return get(&d->tb);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
        cublasLtEpilogue_t e;
        Epi epi;
        if (cublasStatus_t s = get(&e); s != CUBLAS_STATUS_SUCCESS)
            return s;
        if (!epilogue_of(e, &epi))
            return unsupported("cublasLtMatmulDescSetAttribute", "epilogue", e);
        d->epilogue = e;
        return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        return get(&d->bias);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        return get(&d->bias_type);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
        return get(&d->aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
        return get(&d->aux_ld);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
        return get(&d->aux_type);
    default:
        return unsupported("cublasLtMatmulDescSetAttribute", "attribute", attr);
    }
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream)
{
    (void)algo, (void)workspace, (void)workspace_bytes; // the stand-in needs no workspace
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!desc || !alpha || !beta || !Adesc || !Bdesc || !Cdesc || !Ddesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    Matmul w{};
    w.d = *desc_of(desc);
    w.a = *layout_of(Adesc), w.b = *layout_of(Bdesc), w.c = *layout_of(Cdesc),
    w.dl = *layout_of(Ddesc);
    epilogue_of(w.d.epilogue, &w.epi);
    if (cublasStatus_t s = types(&w); s != CUBLAS_STATUS_SUCCESS)
        return s;
    if (cublasStatus_t s = shapes(w.d, w.a, w.b, w.c, w.dl, &w.m, &w.n, &w.k);
        s != CUBLAS_STATUS_SUCCESS)
        return s;
    bool uses_bias = w.epi.bias || w.epi.bgrad || w.epi.bgrad_b;
    bool uses_aux = w.epi.aux_out || w.epi.dgelu;
    if ((uses_bias && !w.d.bias) || (uses_aux && (!w.d.aux || w.d.aux_ld < w.m)))
        return CUBLAS_STATUS_INVALID_VALUE;
    w.alpha = *static_cast<const float *>(alpha), w.beta = *static_cast<const float *>(beta);
    w.A = A, w.B = B, w.C = C, w.D = D;
    size_t es = elem_size(w.a.type), ds = elem_size(w.dl.type);
    size_t bias_n = w.epi.bgrad_b ? size_t(w.n) : size_t(w.m);
    std::vector<Access> acc = {{A, w.k ? span(w.a.rows, w.a.cols, w.a.ld, es) : 0, false},
                               {B, w.k ? span(w.b.rows, w.b.cols, w.b.ld, es) : 0, false},
                               {D, span(w.dl.rows, w.dl.cols, w.dl.ld, ds), true}};
    if (w.beta != 0.0f)
        acc.push_back({C, span(w.c.rows, w.c.cols, w.c.ld, ds), false});
    if (uses_bias)
        acc.push_back({w.d.bias, bias_n * elem_size(w.bias_type), !w.epi.bias});
    if (uses_aux)
        acc.push_back({w.d.aux,
                       span(uint64_t(w.m), uint64_t(w.n), w.d.aux_ld, elem_size(w.aux_type)),
                       w.epi.aux_out});
    std::vector<Access> nonempty;
    for (const Access &a : acc)
        if (a.bytes)
            nonempty.push_back(a);
    cudaError_t r = device_work(stream, "cublasLtMatmul", std::move(nonempty), [w] { run(w); });
    if (r == cudaSuccess)
        g_matmuls[int(w.d.epilogue) & 1023]++;
    return r == cudaSuccess             ? CUBLAS_STATUS_SUCCESS
           : r == cudaErrorInvalidValue ? CUBLAS_STATUS_INVALID_VALUE
                                        : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // extern "C"

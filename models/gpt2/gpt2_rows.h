/* SPDX-License-Identifier: MIT */
/* The GPT-2 kernels' math, written once per row or element and compiled twice: by the C
 * compiler for the CPU kernels (gpt2_kernels.c loops over rows and calls these — so the
 * trainer's finite-difference and end-to-end tests check this math in CI), and by nvcc for
 * the CUDA kernels (gpt2_kernels.cu), where GPT2_HD makes them __host__ __device__ and
 * GPT2_ADD is an atomic add on the GPU (for the CPU's row functions whose rows share a
 * gradient; the GPU's kernels do not call them). Where the GPU adds into shared partial sums
 * (layernorm's per warp), each element has one writer and a plain add, so every sum keeps
 * one order and a run repeats bit for bit (encoder_token_backward and ordered_sum below are
 * the GPU's ordered sums).
 *
 * A row function takes (lane, lanes): lane l of `lanes` handles the elements l, l + lanes,
 * ... of the row, and the lanes' partial sums and maxima meet in GPT2_LANES_SUMF/_SUMD/_MAXF,
 * which every lane calls alike and which return the total to every lane. The CPU calls
 * with (0, 1), where they return their argument: every loop then keeps the CPU kernels'
 * order of operations, so the CPU results are those of the kernels before this split, bit
 * for bit. The GPU calls with a warp per row (lanes 32), where they are shuffle butterflies;
 * tests/gpt2/test_gpt2_lanes.c runs the same functions with 32 threads as the lanes and
 * butterflies of the same order, so CI checks the split too. Arrays are row-major fp32;
 * shapes as in gpt2_kernels.h. */
#ifndef ZT_GPT2_ROWS_H
#define ZT_GPT2_ROWS_H

#ifdef __CUDACC__
#define GPT2_HD __host__ __device__
#ifdef __CUDA_ARCH__
#define GPT2_ADD(p, v) atomicAdd((p), (v))
#else
#define GPT2_ADD(p, v) (*(p) += (v))
#endif
#else
#define GPT2_HD
#define GPT2_ADD(p, v) (*(p) += (v))
#include <math.h>
#endif

#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
/* a warp's lanes: every lane ends with the same total (butterfly, offsets 16 .. 1); the
 * lanes' loads and stores before it are seen by every lane after it (__syncwarp) */
static __device__ __forceinline__ float gpt2_warp_sumf(float v)
{
    __syncwarp();
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ double gpt2_warp_sumd(double v)
{
    __syncwarp();
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float gpt2_warp_maxf(float v)
{
    __syncwarp();
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* lanes is the same on every lane of a warp; a call with one lane (a thread per row) has
 * nothing to meet */
#define GPT2_LANES_SUMF(x, lanes) ((lanes) > 1 ? gpt2_warp_sumf(x) : (x))
#define GPT2_LANES_SUMD(x, lanes) ((lanes) > 1 ? gpt2_warp_sumd(x) : (x))
#define GPT2_LANES_MAXF(x, lanes) ((lanes) > 1 ? gpt2_warp_maxf(x) : (x))
#elif !defined(GPT2_LANES_SUMF) /* one lane (a test may define lanes of its own) */
#define GPT2_LANES_SUMF(x, lanes) (x)
#define GPT2_LANES_SUMD(x, lanes) (x)
#define GPT2_LANES_MAXF(x, lanes) (x)
#endif

#include <stddef.h>

#define GPT2_GELU_K 0.7978845608028654f /* sqrt(2 / pi) */

/* ---- encoder: one (b, t) row ---- */
static inline GPT2_HD void encoder_row_backward(float *dte, float *dpe, const float *d, int C,
                                                int lane, int lanes)
{
    for (int c = lane; c < C; c += lanes) {
        GPT2_ADD(&dte[c], d[c]);
        GPT2_ADD(&dpe[c], d[c]);
    }
}

/* parts[0] + parts[stride] + ... + parts[(n - 1) * stride], added in that order: partial sums
 * combined in a fixed order (the GPU's layernorm weight gradients) */
static inline GPT2_HD float ordered_sum(const float *parts, int n, size_t stride)
{
    float s = 0.0f;
    for (int k = 0; k < n; k++)
        s += parts[(size_t)k * stride];
    return s;
}

/* ---- element-wise ---- */
static inline GPT2_HD float gelu_elem_forward(float x)
{
    return 0.5f * x * (1.0f + tanhf(GPT2_GELU_K * (x + 0.044715f * x * x * x)));
}

/* d(gelu)/dx at x, times dout */
static inline GPT2_HD float gelu_elem_backward(float x, float dout)
{
    float u = GPT2_GELU_K * (x + 0.044715f * x * x * x), th = tanhf(u);
    float sech2 = 1.0f - th * th;
    float local =
        0.5f * (1.0f + th) + 0.5f * x * sech2 * GPT2_GELU_K * (1.0f + 3 * 0.044715f * x * x);
    return local * dout;
}

/* ---- bf16 parameters and gradients (bf16.enabled): one element ---- */
/* The fp32 kernels compute from bf16 parameters widened (exactly) into fp32 scratch, and a
 * layer's fp32 gradient is added into its bf16 gradient buffer, rounded to nearest even
 * once (NaN stays NaN, quiet). Bits, not intrinsics: the CPU and the GPU round alike. */
static inline GPT2_HD float gpt2_bf16_widen(unsigned short h)
{
    union {
        unsigned int u;
        float f;
    } v;
    v.u = (unsigned int)h << 16;
    return v.f;
}

static inline GPT2_HD unsigned short gpt2_bf16_round(float f)
{
    union {
        unsigned int u;
        float f;
    } v;
    v.f = f;
    if ((v.u & 0x7fffffffu) > 0x7f800000u)
        return (unsigned short)((v.u >> 16) | 0x40u);
    return (unsigned short)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

static inline GPT2_HD void gpt2_bf16_narrow_add(unsigned short *dst, float g)
{
    *dst = gpt2_bf16_round(gpt2_bf16_widen(*dst) + g);
}

/* ---- activations in fp32 or bf16 (GPT2_BF16 activations on the GPU) ----
 * Read and written through gpt2_ld_* / gpt2_st_*: fp32 arrays as they are, bf16 ones (gpt2_bf16,
 * the 16 bits as unsigned short) widened on the way in and rounded to nearest even on the way
 * out; all arithmetic stays fp32 and the statistics (mean, rstd) stay fp32 arrays. The row
 * functions that read or write activations are written once, in gpt2_rows_act.h, and
 * instantiated twice: for float (the names below, the fp32 kernels' bits unchanged) and for
 * gpt2_bf16 (in C with the suffix _bf16; in C++ (nvcc) as overloads of the same names, so a
 * kernel template over the activation type calls one name). */
typedef unsigned short gpt2_bf16;
static inline GPT2_HD float gpt2_ld_f32(const float *p) { return *p; }
static inline GPT2_HD void gpt2_st_f32(float *p, float v) { *p = v; }
static inline GPT2_HD float gpt2_ld_bf16(const gpt2_bf16 *p) { return gpt2_bf16_widen(*p); }
static inline GPT2_HD void gpt2_st_bf16(gpt2_bf16 *p, float v) { *p = gpt2_bf16_round(v); }

#define GPT2_ACT float
#define GPT2_LD gpt2_ld_f32
#define GPT2_ST gpt2_st_f32
#define GPT2_FN(name) name
#include "gpt2_rows_act.h"
#define GPT2_ACT gpt2_bf16
#define GPT2_LD gpt2_ld_bf16
#define GPT2_ST gpt2_st_bf16
#ifdef __cplusplus
#define GPT2_FN(name) name
#else
#define GPT2_FN(name) name##_bf16
#endif
#include "gpt2_rows_act.h"

/* ---- causal attention: one (b, h, t) row; qkv rows of 3C, head size hs ---- */
/* Row t of q.k scores in place: scaled, softmax over positions 0..t, zero after (the row
 * kernel below and the batched-GEMM attention of gpt2_attention.h share it). */
static inline GPT2_HD void causal_softmax_row_forward(float *a, int t, int T, float scale, int lane,
                                                      int lanes)
{
    float maxv = -INFINITY;
    for (int s = lane; s <= t; s += lanes) {
        a[s] = a[s] * scale;
        maxv = fmaxf(maxv, a[s]);
    }
    maxv = GPT2_LANES_MAXF(maxv, lanes);
    float sum = 0;
    for (int s = lane; s <= t; s += lanes)
        sum += (a[s] = expf(a[s] - maxv));
    sum = GPT2_LANES_SUMF(sum, lanes);
    for (int s = lane; s < T; s += lanes)
        a[s] = s <= t ? a[s] / sum : 0.0f;
}

static inline GPT2_HD void attention_row_forward(float *o, float *a, const float *qkv_b, int t,
                                                 int T, int C, int h, int hs)
{
    float scale = 1.0f / sqrtf((float)hs);
    const float *q = qkv_b + (size_t)t * 3 * C + h * hs;
    for (int s = 0; s <= t; s++) {
        const float *k = qkv_b + (size_t)s * 3 * C + C + h * hs;
        float dot = 0;
        for (int i = 0; i < hs; i++)
            dot += q[i] * k[i];
        a[s] = dot;
    }
    causal_softmax_row_forward(a, t, T, scale, 0, 1);
    for (int i = 0; i < hs; i++)
        o[i] = 0.0f;
    for (int s = 0; s <= t; s++) {
        const float *v = qkv_b + (size_t)s * 3 * C + 2 * C + h * hs;
        for (int i = 0; i < hs; i++)
            o[i] += a[s] * v[i];
    }
}

/* d: this row's output gradient; dqkv_b: the batch element's qkv gradient (its k and v rows
 * are shared with the other rows of the head). datt[s] = d . v_s is computed twice rather
 * than kept, so no scratch of T floats is needed. */
static inline GPT2_HD void attention_row_backward(float *dqkv_b, const float *d, const float *qkv_b,
                                                  const float *a, int t, int C, int h, int hs)
{
    float scale = 1.0f / sqrtf((float)hs);
    const float *q = qkv_b + (size_t)t * 3 * C + h * hs;
    float *dq = dqkv_b + (size_t)t * 3 * C + h * hs;
    float dot_sum = 0;
    for (int s = 0; s <= t; s++) { /* through out = att @ v */
        const float *v = qkv_b + (size_t)s * 3 * C + 2 * C + h * hs;
        float *dv = dqkv_b + (size_t)s * 3 * C + 2 * C + h * hs;
        float datt = 0;
        for (int i = 0; i < hs; i++) {
            datt += d[i] * v[i];
            GPT2_ADD(&dv[i], a[s] * d[i]);
        }
        dot_sum += datt * a[s];
    }
    for (int s = 0; s <= t; s++) { /* through the softmax and q.k scaling */
        const float *v = qkv_b + (size_t)s * 3 * C + 2 * C + h * hs;
        float datt = 0;
        for (int i = 0; i < hs; i++)
            datt += d[i] * v[i];
        float dpre = a[s] * (datt - dot_sum) * scale;
        const float *k = qkv_b + (size_t)s * 3 * C + C + h * hs;
        float *dk = dqkv_b + (size_t)s * 3 * C + C + h * hs;
        for (int i = 0; i < hs; i++) {
            dq[i] += dpre * k[i];
            GPT2_ADD(&dk[i], dpre * q[i]);
        }
    }
}

/* ---- attention as batched GEMMs (gpt2_attention.h): heads moved between [B, T, stride]
 * rows and [B, NH, T, hs] blocks, and the scaled causal softmax of one row of scores ---- */

/* Where element i of a [B, NH, T, hs] array sits in a [B, T, stride] one whose heads start at
 * column off. */
static inline GPT2_HD size_t heads_offset(size_t i, int T, int NH, int hs, int stride, int off)
{
    size_t d = i % (size_t)hs, t = (i / (size_t)hs) % (size_t)T;
    size_t h = (i / ((size_t)hs * T)) % (size_t)NH, b = i / ((size_t)hs * T * NH);
    return (b * (size_t)T + t) * (size_t)stride + (size_t)off + h * (size_t)hs + d;
}

/* Row t: d holds the gradient of the softmax a on entry and that of the unscaled scores on
 * return (attention_row_backward's dpre), zero after t. */
static inline GPT2_HD void causal_softmax_row_backward(float *d, const float *a, int t, int T,
                                                       float scale, int lane, int lanes)
{
    float dot_sum = 0;
    for (int s = lane; s <= t; s += lanes)
        dot_sum += d[s] * a[s];
    dot_sum = GPT2_LANES_SUMF(dot_sum, lanes);
    for (int s = lane; s < T; s += lanes)
        d[s] = s <= t ? a[s] * (d[s] - dot_sum) * scale : 0.0f;
}

/* ---- softmax + cross-entropy: one row of V ---- */
/* p = softmax(l) (p may be l); returns -log p[target] (in double, floored at 1e-30) to every
 * lane, which computes p[target] itself, as its owner lane does, from l[target] read before
 * any lane stores */
static inline GPT2_HD double crossentropy_row_forward(float *p, const float *l, int target, int V,
                                                      int lane, int lanes)
{
    float lt = l[target];
    float maxv = -INFINITY;
    for (int v = lane; v < V; v += lanes)
        maxv = fmaxf(maxv, l[v]);
    maxv = GPT2_LANES_MAXF(maxv, lanes);
    double sum = 0;
    for (int v = lane; v < V; v += lanes)
        sum += (p[v] = expf(l[v] - maxv));
    sum = GPT2_LANES_SUMD(sum, lanes);
    for (int v = lane; v < V; v += lanes)
        p[v] = (float)(p[v] / sum);
    float pt = expf(lt - maxv);
    return -log(fmax((double)(float)(pt / sum), 1e-30));
}

static inline GPT2_HD void crossentropy_row_backward(float *dl, const float *p, int target, int V,
                                                     float inv_n, int lane, int lanes)
{
    for (int v = lane; v < V; v += lanes)
        dl[v] = (p[v] - (v == target ? 1.0f : 0.0f)) * inv_n;
}

#endif

/* SPDX-License-Identifier: MIT */
/* Causal self-attention as batched GEMMs around row kernels, the way a GPU computes it fast
 * (the row kernels of gpt2_kernels.c do O(T) serial work per row instead):
 *   forward:  q, k, v = the heads of qkv as [B, NH, T, hs]; att = softmax(q k^T / sqrt(hs))
 *             causal, per row; y = att v; out = y back as [B, T, C].
 *   backward: dy = dout as [B, NH, T, hs]; datt = dy v^T; dv = att^T dy; dpre = the softmax's
 *             backward of datt; dq = dpre k; dk = dpre^T q; dq, dk, dv added into dqkv.
 * Written once over an engine (the GEMMs and the row and element kernels), which the CUDA
 * ops implement with cuBLAS and CUDA kernels of gpt2_rows.h's math, and a CPU engine (cblas
 * and the same rows) in tests/gpt2/test_gpt2_attention.c, which checks this decomposition
 * against the row kernels in CI. */
#ifndef ZT_GPT2_ATTENTION_H
#define ZT_GPT2_ATTENTION_H

#include <stddef.h>

/* What attention's forward keeps in att for its backward (the ops' att_keep, gpt2_ops.h):
 *   GPT2_ATT_PROBS: the softmax, [B,NH,T,T] (the CPU's row kernels, the GEMM path below);
 *   GPT2_ATT_LSE:   each row's logsumexp, [B,NH,T], where the fused attention of
 *                   gpt2_attention.cu takes the head size (gpt2_flash_head_size_ok), else the
 *                   softmax as GPT2_ATT_PROBS (the GPU's ops). */
typedef enum gpt2_att_keep { GPT2_ATT_PROBS = 0, GPT2_ATT_LSE = 1 } gpt2_att_keep;

/* 1 for the head sizes the fused attention runs: multiples of 16 from 16 to 128 (its tiles'
 * thread layout and shared memory). */
int gpt2_flash_head_size_ok(int hs);
/* Floats of att a forward with that keep leaves for [B, T], C channels in NH heads. */
size_t gpt2_att_floats(int keep, int B, int T, int C, int NH);

typedef struct gpt2_att_engine {
    void *ctx;
    /* For b < batch: C_b = op(A_b) op(B_b) + beta C_b, row-major, op(X) = X^T where tX; op(A)
     * is m x k, op(B) k x n, C m x n; A_b = A + b * sa (elements), and so on. */
    void (*bmm)(void *ctx, int ta, int tb, int m, int n, int k, const float *A, int lda,
                long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                long long sc, int batch);
    /* dst[i] = src[heads_offset(i, ...)] for the B * NH * T * hs elements of dst */
    void (*gather)(void *ctx, float *dst, const float *src, int B, int T, int NH, int hs,
                   int stride, int off);
    /* dst[heads_offset(i, ...)] = (add ? dst[...] : 0) + src[i] */
    void (*scatter)(void *ctx, float *dst, const float *src, int B, int T, int NH, int hs,
                    int stride, int off, int add);
    /* every row r of rows rows of T: causal_softmax_row_forward(att + r T, r % T, ...) */
    void (*softmax_forward)(void *ctx, float *att, int rows, int T, float scale);
    /* causal_softmax_row_backward on every row, d in place */
    void (*softmax_backward)(void *ctx, float *d, const float *att, int rows, int T, float scale);
} gpt2_att_engine;

/* Floats of scratch either pass takes. */
size_t gpt2_attention_scratch_floats(int B, int T, int C, int NH);

/* qkv[B,T,3C] -> out[B,T,C] (overwritten); att[B,NH,T,T] keeps the softmax. */
void gpt2_attention_forward(const gpt2_att_engine *e, float *scratch, float *out, float *att,
                            const float *qkv, int B, int T, int C, int NH);
/* dqkv[B,T,3C] += the gradients through the attention of dout[B,T,C]. */
void gpt2_attention_backward(const gpt2_att_engine *e, float *scratch, float *dqkv,
                             const float *dout, const float *qkv, const float *att, int B, int T,
                             int C, int NH);

#endif

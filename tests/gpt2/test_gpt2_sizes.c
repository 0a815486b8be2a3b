/* SPDX-License-Identifier: MIT */
/* The model's element counts at a scale where a layer's activations pass 2^31 elements
 * (B x T x 4C = 8 x 1024 x 4 x 65536 = 2^31): the counts it hands the element-wise ops are
 * exact 64-bit products, not 32-bit ones that wrap (the GPU's kernels index with them). The
 * ops here only record what they are asked to do: no memory of that size is ever touched. */
#include "gpt2_attention.h"
#include "gpt2_model.h"
#include "gpt2_ops.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

enum { B = 8, T = 1024, C = 65536 };

static long long gelu_f_n, gelu_b_n, res_ln_rows, res_ln_cols;
static char fake[64]; /* every "allocation" points here: nothing is read or written */

static void *m_alloc(void *ctx, size_t bytes) { return (void)ctx, (void)bytes, fake; }
static void m_free(void *ctx, void *p) { (void)ctx, (void)p; }
static void m_upload(void *ctx, void *d, const void *h, size_t n)
{
    (void)ctx, (void)d, (void)h, (void)n;
}
static void m_copy(void *ctx, void *d, const void *s, size_t n)
{
    (void)ctx, (void)d, (void)s, (void)n;
}
static void m_zero(void *ctx, void *p, size_t n) { (void)ctx, (void)p, (void)n; }
static void m_enc_f(void *ctx, float *o, const int *t, const float *a, const float *b, int B_,
                    int T_, int C_)
{
    (void)ctx, (void)o, (void)t, (void)a, (void)b, (void)B_, (void)T_, (void)C_;
}
static void m_enc_b(void *ctx, float *a, float *b, const float *d, const int *t, int B_, int T_,
                    int C_, int V)
{
    (void)ctx, (void)a, (void)b, (void)d, (void)t, (void)B_, (void)T_, (void)C_, (void)V;
}
static void m_ln_f(void *ctx, float *o, float *m, float *r, const float *i, const float *w,
                   const float *b, int N, int C_)
{
    (void)ctx, (void)o, (void)m, (void)r, (void)i, (void)w, (void)b, (void)N, (void)C_;
}
static void m_ln_b(void *ctx, float *di, float *dw, float *db, const float *d, const float *i,
                   const float *w, const float *m, const float *r, int N, int C_)
{
    (void)ctx, (void)di, (void)dw, (void)db, (void)d, (void)i, (void)w, (void)m, (void)r;
    (void)N, (void)C_;
}
static void m_mm_f(void *ctx, float *o, const float *i, const float *w, const float *b, int N,
                   int C_, int OC)
{
    (void)ctx, (void)o, (void)i, (void)w, (void)b, (void)N, (void)C_, (void)OC;
}
static void m_mm_b(void *ctx, float *di, float *dw, float *db, const float *d, const float *i,
                   const float *w, int N, int C_, int OC)
{
    (void)ctx, (void)di, (void)dw, (void)db, (void)d, (void)i, (void)w, (void)N, (void)C_;
    (void)OC;
}
static void m_att_f(void *ctx, float *o, float *a, const float *q, int B_, int T_, int C_, int NH)
{
    (void)ctx, (void)o, (void)a, (void)q, (void)B_, (void)T_, (void)C_, (void)NH;
}
static void m_att_b(void *ctx, float *dq, const float *d, const float *q, const float *o,
                    const float *a, int B_, int T_, int C_, int NH)
{
    (void)ctx, (void)dq, (void)d, (void)q, (void)o, (void)a, (void)B_, (void)T_, (void)C_;
    (void)NH;
}
static void m_gelu_f(void *ctx, float *o, const float *i, long long n)
{
    (void)ctx, (void)o, (void)i;
    gelu_f_n = n;
}
static void m_gelu_b(void *ctx, float *di, const float *i, const float *d, long long n)
{
    (void)ctx, (void)di, (void)i, (void)d;
    gelu_b_n = n;
}
static void m_res_ln_f(void *ctx, float *res, float *o, float *m, float *r, const float *a,
                       const float *b, const float *w, const float *bias, int N, int C_)
{
    (void)ctx, (void)res, (void)o, (void)m, (void)r, (void)a, (void)b, (void)w, (void)bias;
    res_ln_rows = N, res_ln_cols = C_;
}
static float m_xent_f(void *ctx, float *p, const float *l, const int *t, int N, int V)
{
    (void)ctx, (void)p, (void)l, (void)t, (void)N, (void)V;
    return 1.0f;
}
static void m_xent_b(void *ctx, float *d, const float *p, const int *t, int N, int V)
{
    (void)ctx, (void)d, (void)p, (void)t, (void)N, (void)V;
}
static int m_status(void *ctx) { return (void)ctx, 0; }
static const char *m_status_text(void *ctx) { return (void)ctx, ""; }

static int src_get(void *ctx, int layer, int backward, float **params, float **grads)
{
    (void)backward;
    for (int k = 0; k < gpt2_layer_param_count(ctx, layer); k++) {
        params[k] = (float *)fake;
        if (grads)
            grads[k] = (float *)fake;
    }
    return 0;
}
static int src_put(void *ctx, int layer, int backward)
{
    return (void)ctx, (void)layer, (void)backward, 0;
}

static void test_element_counts_are_64_bit(void **state)
{
    (void)state;
    const gpt2_ops ops = {.alloc = m_alloc,
                          .free = m_free,
                          .upload = m_upload,
                          .copy = m_copy,
                          .zero = m_zero,
                          .encoder_forward = m_enc_f,
                          .encoder_backward = m_enc_b,
                          .layernorm_forward = m_ln_f,
                          .residual_layernorm_forward = m_res_ln_f,
                          .layernorm_backward = m_ln_b,
                          .matmul_forward = m_mm_f,
                          .matmul_backward = m_mm_b,
                          .attention_forward = m_att_f,
                          .attention_backward = m_att_b,
                          .gelu_forward = m_gelu_f,
                          .gelu_backward = m_gelu_b,
                          .crossentropy_forward = m_xent_f,
                          .crossentropy_backward = m_xent_b,
                          .status = m_status,
                          .status_text = m_status_text};
    gpt2_config c = {256, 256, T, 1, 1, C};
    gpt2_model *m = gpt2_model_create_on(&c, B, T, &ops, 0);
    assert_non_null(m);
    static int tokens[B * T], targets[B * T];
    gpt2_source src = {src_get, src_put, &c, NULL};
    float loss = 0;
    assert_int_equal(gpt2_forward(m, &src, tokens, targets, &loss), 0);
    assert_int_equal(gpt2_backward(m, &src, NULL), 0);
    const long long n = (long long)B * T * 4 * C; /* 2^31 */
    assert_true(gelu_f_n == n);
    assert_true(gelu_b_n == n);
    /* the residual stream: rows of C, each row's offset a 64-bit product in the kernel */
    assert_true(res_ln_rows == (long long)B * T && res_ln_cols == C);
    gpt2_model_destroy(m);
}

/* gpt2_activation_bytes (what `ztier bench gpt2` names when the device lacks the memory)
 * against the tensors counted by hand, and against a model of that shape. */
static void test_activation_bytes_match_the_model(void **state)
{
    (void)state;
    gpt2_config c = {250, 256, 64, 3, 4, 32};
    const size_t b = 2, t = 16, bt = b * t, ch = 32, att = b * 4 * t * t, vp = c.padded_vocab;
    const size_t per_layer = 18 * bt * ch + 4 * bt + att;
    const size_t rest =
        ch * bt + (ch * bt + 2 * bt) + bt * vp + 4 * bt * ch + 3 * bt * ch + 8 * bt * ch;
    assert_int_equal(gpt2_activation_bytes(&c, 2, 16, 0), 4 * (3 * per_layer + rest));
    for (int policy = GPT2_KEEP_ALL; policy <= GPT2_FULL_OFFLOAD; policy++) {
        gpt2_model *m = gpt2_model_create_on(&c, 2, 16, &gpt2_ops_cpu, policy);
        assert_non_null(m);
        assert_int_equal(gpt2_activation_bytes(&c, 2, 16, policy), gpt2_model_activation_bytes(m));
        gpt2_model_destroy(m);
    }
    /* full: one block's tensors and the 3 blocks' outputs */
    assert_int_equal(gpt2_activation_bytes(&c, 2, 16, GPT2_FULL),
                     4 * (per_layer + 3 * bt * ch + rest));
    assert_true(gpt2_activation_bytes(&c, 2, 16, GPT2_FULL) <
                gpt2_activation_bytes(&c, 2, 16, GPT2_SELECTIVE));
    assert_true(gpt2_activation_bytes(&c, 2, 16, GPT2_SELECTIVE) <
                gpt2_activation_bytes(&c, 2, 16, GPT2_KEEP_ALL));
    /* full with the inputs in a store: one block's tensors and two outputs, alternating; each
     * block hands over its input, [B,T,C] */
    assert_int_equal(gpt2_activation_bytes(&c, 2, 16, GPT2_FULL_OFFLOAD),
                     4 * (per_layer + 2 * bt * ch + rest));
    assert_int_equal(gpt2_checkpoint_bytes(&c, 2, 16), 4 * bt * ch);
    assert_null(gpt2_model_create_on(&c, 2, 16, &gpt2_ops_cpu, GPT2_FULL_OFFLOAD + 1));
}

/* On ops whose attention keeps each row's logsumexp (the GPU's fused attention: att_keep
 * GPT2_ATT_LSE), a block's att is [B,NH,T], not [B,NH,T,T]: counted by hand, and what a model
 * on such ops allocates, for every policy. Heads of 8 (which the fused kernels do not take)
 * keep the softmax on those ops too. */
static void test_activation_bytes_with_fused_attention(void **state)
{
    (void)state;
    gpt2_config c = {250, 256, 64, 3, 4, 64}; /* heads of 16 */
    const size_t b = 2, t = 16, bt = b * t, ch = 64, vp = c.padded_vocab;
    const size_t rest =
        ch * bt + (ch * bt + 2 * bt) + bt * vp + 4 * bt * ch + 3 * bt * ch + 8 * bt * ch;
    const size_t lse = b * 4 * t, probs = b * 4 * t * t;
    assert_int_equal(gpt2_activation_bytes_on(&c, 2, 16, 0, GPT2_ATT_LSE),
                     4 * (3 * (18 * bt * ch + 4 * bt + lse) + rest));
    assert_int_equal(gpt2_activation_bytes_on(&c, 2, 16, 0, GPT2_ATT_PROBS),
                     4 * (3 * (18 * bt * ch + 4 * bt + probs) + rest));
    assert_int_equal(gpt2_activation_bytes(&c, 2, 16, 0),
                     gpt2_activation_bytes_on(&c, 2, 16, 0, GPT2_ATT_PROBS));
    gpt2_ops ops = gpt2_ops_cpu; /* only its allocation is used */
    ops.att_keep = GPT2_ATT_LSE;
    for (int policy = GPT2_KEEP_ALL; policy <= GPT2_FULL_OFFLOAD; policy++) {
        gpt2_model *m = gpt2_model_create_on(&c, 2, 16, &ops, policy);
        assert_non_null(m);
        assert_int_equal(gpt2_activation_bytes_on(&c, 2, 16, policy, GPT2_ATT_LSE),
                         gpt2_model_activation_bytes(m));
        gpt2_model_destroy(m);
    }
    gpt2_config small_heads = c;
    small_heads.channels = 32; /* heads of 8 */
    assert_int_equal(gpt2_activation_bytes_on(&small_heads, 2, 16, 0, GPT2_ATT_LSE),
                     gpt2_activation_bytes(&small_heads, 2, 16, 0));
}

/* On ops whose activations are bf16 (act_bytes 2: the GPU in GPT2_BF16), every activation
 * and activation gradient takes 2 bytes and the layernorm statistics, the logsumexp and the
 * logits 4, each tensor starting on 16 bytes (all of these sizes are multiples of 16 here):
 * counted by hand, what a model on such ops allocates for every policy, and each block's
 * checkpoint in 16 bits. */
static void test_activation_bytes_in_bf16(void **state)
{
    (void)state;
    gpt2_config c = {250, 256, 64, 3, 4, 64}; /* heads of 16: the fused attention */
    const size_t b = 2, t = 16, bt = b * t, ch = 64, vp = c.padded_vocab, lse = b * 4 * t;
    const size_t per_layer = 2 * 18 * bt * ch + 4 * (4 * bt + lse);
    const size_t rest = 2 * (ch * bt + ch * bt + 15 * bt * ch) + 4 * (2 * bt + bt * vp);
    assert_int_equal(gpt2_activation_bytes_as(&c, 2, 16, 0, GPT2_ATT_LSE, 2, 0),
                     3 * per_layer + rest);
    assert_int_equal(gpt2_activation_bytes_as(&c, 2, 16, GPT2_FULL, GPT2_ATT_LSE, 2, 0),
                     per_layer + 3 * 2 * bt * ch + rest);
    assert_int_equal(gpt2_activation_bytes_as(&c, 2, 16, 0, GPT2_ATT_LSE, 4, 0),
                     gpt2_activation_bytes_on(&c, 2, 16, 0, GPT2_ATT_LSE));
    assert_int_equal(gpt2_checkpoint_bytes_as(&c, 2, 16, 2), 2 * bt * ch);
    gpt2_ops ops = gpt2_ops_cpu; /* only its allocation is used */
    ops.att_keep = GPT2_ATT_LSE, ops.act_bytes = 2;
    for (int policy = GPT2_KEEP_ALL; policy <= GPT2_FULL_OFFLOAD; policy++) {
        gpt2_model *m = gpt2_model_create_on(&c, 2, 16, &ops, policy);
        assert_non_null(m);
        assert_int_equal(gpt2_activation_bytes_as(&c, 2, 16, policy, GPT2_ATT_LSE, 2, 0),
                         gpt2_model_activation_bytes(m));
        assert_int_equal(gpt2_model_checkpoint_bytes(m), 2 * bt * ch);
        gpt2_model_destroy(m);
    }
}

static void never_called(void *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                         const float *gelu, const float *w, int w16, const float *pre, int N, int C,
                         int OC)
{
    (void)ctx, (void)dinp, (void)dw, (void)dbias, (void)dout, (void)gelu, (void)w, (void)w16;
    (void)pre, (void)N, (void)C, (void)OC;
    fail_msg("only the model's allocation is used here");
}

/* Ops whose fcproj backward applies GELU's derivative in its GEMM (the GPU's DGELU epilogue)
 * need no gradient at GELU's output: the model holds one B x T x 4C tensor fewer, for every
 * policy, in fp32 and in 16 bits; the count agrees with what such a model allocates. */
static void test_activation_bytes_with_fused_dgelu(void **state)
{
    (void)state;
    gpt2_config c = {250, 256, 64, 3, 4, 64};
    const size_t bt = 2 * 16, ch = 64;
    for (int act = 2; act <= 4; act += 2)
        for (int policy = GPT2_KEEP_ALL; policy <= GPT2_FULL_OFFLOAD; policy++) {
            size_t unfused = gpt2_activation_bytes_as(&c, 2, 16, policy, GPT2_ATT_LSE, act, 0);
            size_t fused = gpt2_activation_bytes_as(&c, 2, 16, policy, GPT2_ATT_LSE, act, 1);
            assert_int_equal(unfused - fused, (size_t)act * bt * 4 * ch);
            gpt2_ops ops = gpt2_ops_cpu;
            ops.att_keep = GPT2_ATT_LSE, ops.act_bytes = act;
            ops.matmul_dgelu_backward = never_called;
            gpt2_model *m = gpt2_model_create_on(&c, 2, 16, &ops, policy);
            assert_non_null(m);
            assert_int_equal(gpt2_model_activation_bytes(m), fused);
            gpt2_model_destroy(m);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_element_counts_are_64_bit),
                                       cmocka_unit_test(test_activation_bytes_match_the_model),
                                       cmocka_unit_test(test_activation_bytes_with_fused_attention),
                                       cmocka_unit_test(test_activation_bytes_in_bf16),
                                       cmocka_unit_test(test_activation_bytes_with_fused_dgelu)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

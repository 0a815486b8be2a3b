/* SPDX-License-Identifier: MIT */
/* GPT-2 on the CPU in fp32, driven layer by layer. The model never owns its parameters: a
 * gpt2_source hands out each layer's parameter (and, in backward, gradient) pointers right
 * before the layer runs and takes them back after — ztier's fetch/release in the trainer,
 * plain arrays in the tests. Layers: 0 = "embed" (wte [Vp,C], wpe [maxT,C]), 1..L = the
 * blocks "h.<i>", L+1 = "ln_f". The LM head is tied to wte: the embedding layer is fetched
 * again for the logits and held through the whole backward pass. */
#ifndef ZT_GPT2_MODEL_H
#define ZT_GPT2_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct gpt2_config {
    int vocab;        /* V: token ids that may occur (50257 for GPT-2's BPE, 256 for bytes) */
    int padded_vocab; /* Vp: rows of wte, V rounded up to a multiple of 64 (50257 -> 50304) */
    int max_seq;      /* maxT: rows of wpe; a run may use any sequence length up to it */
    int layers, heads, channels; /* L, NH, C */
} gpt2_config;

/* Named shapes: "tiny" (L2 NH2 C32, maxT 16; the tests use it with V 64), "d12" (124M:
 * L12 NH12 C768), "d24" (350M: L24 NH16 C1024), "d36" (774M: L36 NH20 C1280), "d48" (1558M:
 * L48 NH25 C1600), the last four with maxT 1024; and "d<L>c<C>" for any other GPT-2 shape:
 * L layers of C channels (a multiple of 64) in heads of 64, maxT 1024 (e.g. "d40c3072",
 * 4.7B). vocab overrides V (256: byte-level text); vocab <= 0 keeps GPT-2's 50257. Returns -1
 * for an unknown name. */
int gpt2_config_named(const char *name, int vocab, gpt2_config *out);
/* The names gpt2_config_named takes, for usage lines, and what to tell of an unknown one. */
#define GPT2_CONFIG_NAMES "tiny|d12|d24|d36|d48|d<L>c<C>"
#define GPT2_CONFIG_HELP \
    "tiny, d12, d24, d36, d48, or d<L>c<C>: L layers of C channels, C a multiple of 64"
int64_t gpt2_num_params(const gpt2_config *c);
/* Training FLOPs per token at sequence length T (forward and backward): 6 N for the weights
 * plus 6 L T C for attention, the count MFU figures use. */
double gpt2_flops_per_token(const gpt2_config *c, int T);

#define GPT2_BLOCK_PARAMS 12
/* Parameters of a block, in registration order. */
enum {
    P_LN1W,
    P_LN1B,
    P_QKVW,
    P_QKVB,
    P_ATTW,
    P_ATTB,
    P_LN2W,
    P_LN2B,
    P_FCW,
    P_FCB,
    P_PROJW,
    P_PROJB
};

/* Name, shape and init of parameter k of layer l (see the layer numbering above). */
typedef struct gpt2_param_info {
    char name[64];
    int ndim;
    int64_t shape[2];
    float init_std; /* < 0: constant -init_std (layernorm weights = 1); 0: zeros */
} gpt2_param_info;
int gpt2_layer_param_count(const gpt2_config *c, int layer);
void gpt2_param_info_get(const gpt2_config *c, int layer, int k, gpt2_param_info *out);
int gpt2_layer_count(const gpt2_config *c); /* L + 2 */
void gpt2_layer_name(const gpt2_config *c, int layer, char *out, size_t len);

/* Hands out a layer's parameters (and gradients when backward) as arrays of pointers
 * in registration order; put ends the use. Both return 0 or an error code. weights16 (may be
 * NULL: never) says, after get, whether the layer's four weight matrices (a block's qkv,
 * attention projection, fc and projection weights) were handed out as 16-bit bf16 arrays (cast
 * to float *), and in backward their gradients as 16-bit arrays too, for the ops'
 * matmul_*_w16. */
typedef struct gpt2_source {
    int (*get)(void *ctx, int layer, int backward, float **params, float **grads);
    int (*put)(void *ctx, int layer, int backward);
    void *ctx;
    int (*weights16)(void *ctx, int layer);
} gpt2_source;

/* Activations and gradient scratch for one batch shape [B,T]: one allocation carved into
 * shape-commented tensors (see gpt2_model.c), owned by the model, never by ztier. */
typedef struct gpt2_model gpt2_model;

/* NULL when out of memory or the shape is invalid (B < 1, T < 1, T > maxT, C % NH != 0).
 * The model computes on the CPU; gpt2_model_create_on takes where (gpt2_ops.h: the CPU or a
 * GPU stream). The source then hands out parameters in that memory. */
gpt2_model *gpt2_model_create(const gpt2_config *c, int B, int T);
struct gpt2_ops;
/* Which activations each block keeps from forward to backward (its activation checkpointing
 * policy); every policy gives the same results, bit for bit:
 *   GPT2_KEEP_ALL:  every tensor its backward reads;
 *   GPT2_SELECTIVE: no layernorm or GELU outputs (recomputed in backward from the block's
 *                   input, mean and rstd, and the GELU's input: cheap, and 6 [B,T,C] a block);
 *   GPT2_FULL:      only the block's output (the next block's input); backward runs the
 *                   block's forward again into one shared set of tensors first;
 *   GPT2_FULL_OFFLOAD: GPT2_FULL with each block's input handed to an activation store
 *                   (gpt2_model_set_store: ztier's zt_act_*, which keeps it in host memory or
 *                   on NVMe) after the block's forward and asked back before its backward;
 *                   the model keeps two block outputs, alternating. */
typedef enum gpt2_policy {
    GPT2_KEEP_ALL = 0,
    GPT2_SELECTIVE = 1,
    GPT2_FULL = 2,
    GPT2_FULL_OFFLOAD = 3
} gpt2_policy;

/* Where GPT2_FULL_OFFLOAD keeps each block's input between its forward and its backward.
 * save: after block `layer`'s forward (x may be overwritten by the model's next work, which
 * the store orders itself after); load: before its backward, *x the bytes in the model's
 * memory until free, after the backward. 0 or an error code (returned by forward/backward). */
typedef struct gpt2_act_store {
    int (*save)(void *ctx, int layer, const float *x, size_t bytes);
    int (*load)(void *ctx, int layer, const float **x);
    int (*free)(void *ctx, int layer);
    void *ctx;
} gpt2_act_store;
/* "none", "selective", "full" -> the policy; -1 for anything else. */
int gpt2_policy_parse(const char *name);
gpt2_model *gpt2_model_create_on(const gpt2_config *c, int B, int T, const struct gpt2_ops *ops,
                                 int policy);
/* GPT2_FULL_OFFLOAD: the store the blocks' inputs go to (before the first forward). */
void gpt2_model_set_store(gpt2_model *m, const gpt2_act_store *store);
/* Bytes of one block's checkpoint (its input, [B,T,C] activations of act_bytes each: 4, or 2
 * for the GPU's bf16 activations, the ops' act_bytes): what each block hands to the store
 * under GPT2_FULL_OFFLOAD; _model_: the model's. */
size_t gpt2_checkpoint_bytes_as(const gpt2_config *c, int B, int T, int act_bytes);
size_t gpt2_checkpoint_bytes(const gpt2_config *c, int B, int T); /* fp32: act_bytes 4 */
size_t gpt2_model_checkpoint_bytes(const gpt2_model *m);
/* Bytes of activations and gradient scratch a model of that shape allocates on the CPU's ops
 * (0 when out of memory to count them); _on: on ops whose att_keep is att_keep (gpt2_att_keep,
 * gpt2_attention.h: GPT2_ATT_LSE for the GPU's, whose fused attention keeps T floats per row
 * of each head instead of T x T). */
size_t gpt2_activation_bytes(const gpt2_config *c, int B, int T, int policy);
size_t gpt2_activation_bytes_on(const gpt2_config *c, int B, int T, int policy, int att_keep);
/* ... with activations of act_bytes each (the ops' act_bytes: 2 for the GPU in GPT2_BF16,
 * whose activations and their gradients are bf16; the statistics and logits stay fp32), on
 * ops with (fused_dgelu 1) or without a matmul_dgelu_backward: the GPU's fused GEMM writes
 * GELU's input gradient directly, so the model holds no B x T x 4C gradient at its output. */
size_t gpt2_activation_bytes_as(const gpt2_config *c, int B, int T, int policy, int att_keep,
                                int act_bytes, int fused_dgelu);
/* Bytes of activations and gradient scratch the model holds. */
size_t gpt2_model_activation_bytes(const gpt2_model *m);
/* 0, or the first error the ops met (a GPU launch or allocation failure). */
int gpt2_model_status(const gpt2_model *m);
/* That error named, e.g. "cuBLAS status 13 (...)" ("" when none). */
const char *gpt2_model_status_text(const gpt2_model *m);
void gpt2_model_destroy(gpt2_model *m);

/* Forward over tokens[B,T] with targets[B,T]; *loss = mean cross-entropy. Returns 0 or the
 * source's error code. */
int gpt2_forward(gpt2_model *m, const gpt2_source *src, const int *tokens, const int *targets,
                 float *loss);
/* Backward of the last forward, adding parameter gradients through the source. `progress`
 * (may be NULL) is called with the layer about to run. */
int gpt2_backward(gpt2_model *m, const gpt2_source *src, void (*progress)(int layer, int total));

/* One call a micro-step (gpt2_forward, then gpt2_backward) makes on its source: get
 * (release 0) or put (release 1) of a layer for the forward or backward pass. */
typedef struct gpt2_call {
    int layer, backward, release;
} gpt2_call;

/* The calls of one micro-step, in order, without running it (for sizing a run): writes at
 * most max to out and returns how many there are (4 * gpt2_layer_count(c) + 2). */
int gpt2_micro_step_calls(const gpt2_config *c, gpt2_call *out, int max);

#endif

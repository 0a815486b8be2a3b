/* SPDX-License-Identifier: MIT */
/* The profile's exact-shape compute entries (`compute`, docs/plan.md "The machine profile") as
 * `ztier plan` uses them: the seconds measured for a GPT-2 layer (or a block's attention) at the
 * model's shape, which replace the time the GEMM and attention rates give. */
#ifndef ZT_TOOLS_PLAN_EXACT_H
#define ZT_TOOLS_PLAN_EXACT_H

#include <jansson.h>
#include <stddef.h>

typedef enum plan_kind {
    PLAN_EMBED,     /* the embeddings' lookup (layer "embed") */
    PLAN_BLOCK,     /* one transformer block ("block") */
    PLAN_LN_F,      /* the final layernorm ("ln_f") */
    PLAN_HEAD,      /* the tied embedding as the output matmul ("head") */
    PLAN_LOSS,      /* the token upload and cross-entropy ("loss", forward only) */
    PLAN_ATTENTION, /* a block's causal attention (op "attention") */
    PLAN_NKIND
} plan_kind;

/* s[kind][pass]: seconds per use, pass 0 forward, 1 backward; < 0 where the profile has no
 * entry at the shape. from[kind][pass]: {B, T} of the entry at another shape that s was scaled
 * from (embed, ln_f and loss only, below), {0, 0} where the entry is at the shape; scale: the
 * step's tokens over that entry's. */
typedef struct plan_exact {
    double s[PLAN_NKIND][2];
    int from[PLAN_NKIND][2][2];
    double scale[PLAN_NKIND][2];
    int found; /* entries matched */
} plan_exact;

/* Fills x from the profile's `compute` array (NULL: none) with the entries at batch rows B,
 * sequence T, channels C and heads NH (entries at other shapes, and ops other than
 * layer_forward, layer_backward and attention, are left out). A matching entry without positive
 * seconds is an error naming it. Returns 0 or -1 with the message in err. */
int plan_exact_read(json_t *compute, int B, int T, int C, int NH, plan_exact *x, char *err,
                    size_t len);

/* Where the embed, ln_f and loss layers have no entry at the shape (another micro-batch than the
 * profile's, `--search`'s splits), fills them from the profile's entries of that layer and pass
 * at the same C and NH but another B x T, scaled by the tokens (B T over the entry's): the
 * embeddings' lookup, the final layernorm and the cross-entropy each do the same work per
 * token, so their time is linear in the tokens (per-call overheads aside). Of several such
 * entries the one with the nearest token count (ties: the larger). Entries without positive
 * seconds are left out. The block, head and attention are not scaled: their matmuls follow the
 * GEMM entries' rates, which change with the shape. */
void plan_exact_scale(json_t *compute, int B, int T, int C, int NH, plan_exact *x);

/* The embed, ln_f and loss entries used, for `ztier plan`'s output. plan_exact_text: one line,
 * "layers from: embed forward: the entry at 4 x 64 (0.000274 s) ..., loss forward: the entry
 * at 4 x 64 scaled per token (x0.5: 0.0325 s)"; 0 when none is used (buf untouched).
 * plan_exact_json: {"embed_forward" | "embed_backward" | "ln_f_forward" | "ln_f_backward" |
 * "loss_forward": {"source": "layer" | "layer_scaled", "seconds" (per use), "from": [B, T] |
 * null, "scale" (tokens over the entry's; 1 at the shape), "text"}} for the entries used (a new
 * reference; NULL when out of memory). */
int plan_exact_text(const plan_exact *x, char *buf, size_t len);
json_t *plan_exact_json(const plan_exact *x);

#endif

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
 * entry at the shape. */
typedef struct plan_exact {
    double s[PLAN_NKIND][2];
    int found; /* entries matched */
} plan_exact;

/* Fills x from the profile's `compute` array (NULL: none) with the entries at batch rows B,
 * sequence T, channels C and heads NH (entries at other shapes, and ops other than
 * layer_forward, layer_backward and attention, are left out). A matching entry without positive
 * seconds is an error naming it. Returns 0 or -1 with the message in err. */
int plan_exact_read(json_t *compute, int B, int T, int C, int NH, plan_exact *x, char *err,
                    size_t len);

#endif

/* SPDX-License-Identifier: MIT */
/* The profile's GEMM entries (`"op": "gemm"` in `compute`, docs/plan.md "The machine profile")
 * as `ztier plan` uses them where no exact layer entry applies (plan_exact.h): a GPT-2 block's
 * four matmuls and the LM head take the seconds measured at their (m, n, k), so a layer's
 * compute follows its shapes (wide matmuls run nearer the peak, a small micro-batch's further
 * from it) instead of one gemm_flops_per_s for every matmul.
 *
 * One GEMM m x k times k x n in a pass (forward: 2 m n k FLOPs; backward, dX and dW: 4 m n k):
 *   - an entry at exactly (m, n, k, pass): its seconds;
 *   - else entries at (n, k, pass) on both sides of m: the FLOP rate interpolated linearly in
 *     log m between the two nearest, the seconds the FLOPs over that rate;
 *   - else entries at (n, k, pass) on one side only: the nearest one's rate (clamped: a larger
 *     m than measured runs at least as fast on the same kernels, a smaller one may run slower,
 *     and the output says it was clamped);
 *   - else the profile's gemm_flops_per_s, and the output says so. */
#ifndef ZT_TOOLS_PLAN_COMPUTE_H
#define ZT_TOOLS_PLAN_COMPUTE_H

#include <jansson.h>
#include <stddef.h>

/* Where a layer's matmul seconds came from, best first. */
typedef enum plan_src {
    PLAN_SRC_LAYER,        /* an exact layer entry (plan_exact.h) held the whole layer */
    PLAN_SRC_GEMM_EXACT,   /* GEMM entries at exactly the shape */
    PLAN_SRC_GEMM_INTERP,  /* a rate interpolated between entries at two m */
    PLAN_SRC_GEMM_CLAMPED, /* the rate of the entry at the nearest m, all on one side */
    PLAN_SRC_RATE,         /* gemm_flops_per_s: no entry at the (n, k) */
    PLAN_SRC_NONE          /* not computed (no such layer in the step) */
} plan_src;

/* One GEMM's (or a layer's matmuls') seconds and where they came from: for the GEMM entries,
 * the m asked for and the measured m used (lo == hi for exact or clamped). */
typedef struct plan_mm {
    double s;
    plan_src src;
    int m, lo, hi;
} plan_mm;

typedef struct plan_gemm_pt {
    int m, n, k, pass; /* pass: 0 forward, 1 backward */
    double s;
} plan_gemm_pt;

/* The profile's GEMM entries and the rate they fall back to. */
typedef struct plan_gemms {
    plan_gemm_pt *pt;
    int n;
    double rate; /* gemm_flops_per_s */
} plan_gemms;

/* Reads the `"op": "gemm"` entries of compute (NULL or no such entries: none) into g; rate is
 * the fallback. An entry without positive integer m, n, k, positive seconds, or a "pass" of
 * "forward" or "backward" is an error naming it. Returns 0, or -1 with the message in err.
 * Free g with plan_gemms_free (also after a failure). */
int plan_gemms_read(json_t *compute, double rate, plan_gemms *g, char *err, size_t len);
void plan_gemms_free(plan_gemms *g);

/* The seconds of one GEMM at (m, n, k) in pass (the rules above). */
plan_mm plan_gemm_time(const plan_gemms *g, int m, int n, int k, int pass);

/* A GPT-2 block's parameter matmuls at m rows, C channels (qkv C->3C, the attention's
 * projection C->C, the MLP C->4C and 4C->C): their seconds summed, the source the worst of
 * the four's. With no entry at any of the four shapes: rate_s (what the caller's rate gives)
 * and PLAN_SRC_RATE, so a profile without GEMM entries predicts what it did before. */
plan_mm plan_block_matmuls(const plan_gemms *g, int m, int C, int pass, double rate_s);

/* The LM head's matmul (C -> Vp) at m rows; with no entry at its shape, rate_s. */
plan_mm plan_head_matmul(const plan_gemms *g, int m, int C, int Vp, int pass, double rate_s);

/* The source in words, e.g. "GEMM entries at m 128 (interpolated between m 64 and 256)". */
void plan_mm_describe(const plan_mm *x, char *buf, size_t len);

/* The sources of a GPT-2 step's matmuls, for `ztier plan`'s output: mm[0] the block, mm[1]
 * the head, each [pass] (0 forward, 1 backward; PLAN_SRC_NONE where the step has no such
 * use). plan_mm_text: one line, "matmuls: block forward ..., backward ...; head ...";
 * plan_mm_json: {"block_forward": {"source": "layer" | "gemm" | "gemm_interpolated" |
 * "gemm_clamped" | "rate", "m", "from_m": [lo, hi] | null, "seconds": per use (for "layer" the
 * exact entry's, which holds the whole layer), "text"}, ...} (a new reference; NULL when out of
 * memory). */
void plan_mm_text(const plan_mm mm[2][2], char *buf, size_t len);
json_t *plan_mm_json(const plan_mm mm[2][2]);

#endif

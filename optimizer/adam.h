/* SPDX-License-Identifier: MIT */
/* The fused CPU Adam/AdamW step over one fp32 shard, in one pass over memory:
 * read master, m, v and the gradient (fp32, bf16 or fp16); write master, m, v and the
 * working-dtype parameter copy. Variants: a scalar reference, AVX2+FMA+F16C, AVX-512, chosen
 * at run time from the CPU (one binary for every x86-64; each variant file is compiled with
 * its own instruction-set flags).
 *
 * The update, per element, as every variant computes it (fma = one rounding):
 *   g  = grad * grad_scale                      (folds 1/loss_scale, clipping, averaging)
 *   g  = fma(l2, p, g)                          l2 = weight_decay in Adam mode, else 0
 *   m  = fma(beta1, m, (1 - beta1) * g)
 *   v  = fma(beta2, v, (1 - beta2) * (g * g))
 *   d  = fma(sqrt(v), inv_sqrt_bc2, eps)        = sqrt(vhat) + eps
 *   p  = fma(-decay, p, p)                      decay = lr * weight_decay in AdamW mode, else 0
 *   p  = fma(-step_size, m / d, p)              = p - lr * mhat / (sqrt(vhat) + eps)
 * The constants are computed once per call (zt_adam_consts_init): step_size =
 * lr / (1 - beta1^step) and inv_sqrt_bc2 = 1 / sqrt(1 - beta2^step) in double (pow, sqrt),
 * each rounded once to float; 1 - beta1, 1 - beta2 and lr * weight_decay in float.
 * Since sqrt and division are correctly rounded and the scalar reference calls fmaf()
 * where the vector kernels use FMA instructions (and is compiled with -ffp-contract=off),
 * every variant gives bitwise identical master, m, v and parameter copy for every input;
 * only the payload of a NaN may differ. The thread-parallel step equals the serial one.
 *
 * The copy-out rounds the updated master to the parameter dtype: bf16 round-to-nearest-even
 * (NaN kept NaN, quiet bit set; subnormals kept), fp16 IEEE round-to-nearest-even (overflow
 * to inf, subnormals kept), fp32 a copy. Non-finite values of g (after grad_scale) are
 * counted, not skipped: the step driver checks for them before any update is made (with
 * zt_grad_sumsq), the count is a second guard.
 *
 * None of these functions allocate or keep pointers; all are synchronous. */
#ifndef ZT_OPTIMIZER_ADAM_H
#define ZT_OPTIMIZER_ADAM_H

#include "core/threadpool.h"
#include "core/adam_elem.h"
#include "ztier.h"

#include <stdint.h>

typedef struct zt_adam_hparams {
    float lr, beta1, beta2, eps, weight_decay;
    int adamw;        /* 1: decoupled decay (AdamW); 0: L2 added to the gradient (Adam) */
    int64_t step;     /* 1-based, for bias correction (values < 1 are taken as 1) */
    float grad_scale; /* multiplies every gradient element first */
} zt_adam_hparams;

/* One shard, owned by the caller. master, m, v (fp32) are updated in place; grad is read
 * only; param_out (n elements of param_dtype) receives the rounded master, or is NULL.
 * Any alignment works; 64-byte alignment is fastest. The arrays must not overlap. */
typedef struct zt_adam_tensors {
    float *master, *m, *v;
    const void *grad;
    zt_dtype grad_dtype;
    void *param_out;
    zt_dtype param_dtype;
    int64_t n;
} zt_adam_tensors;

typedef enum zt_adam_variant { ZT_ADAM_SCALAR = 0, ZT_ADAM_AVX2, ZT_ADAM_AVX512 } zt_adam_variant;

/* One fused pass over t->n elements with kernel v (which this CPU must support: take it from
 * zt_adam_variant_best or _parse). Returns the number of non-finite gradient elements. */
int64_t zt_adam_step(zt_adam_variant v, const zt_adam_hparams *h, const zt_adam_tensors *t);

/* The same pass split over a thread pool (NULL: the calling thread alone) in chunks of
 * ZT_ADAM_CHUNK elements; blocks until done. Bitwise equal to zt_adam_step; returns the
 * summed non-finite count. */
#define ZT_ADAM_CHUNK (64 * 1024)
int64_t zt_adam_step_parallel(zt_threadpool *pool, zt_adam_variant v, const zt_adam_hparams *h,
                              const zt_adam_tensors *t);

/* Sum over i of (grad[i] * scale)^2 in double, skipping non-finite products, whose count goes
 * to *nonfinite (required). The order of the additions differs between variants, so sums
 * agree to double rounding, not bitwise. */
double zt_grad_sumsq(zt_adam_variant v, const void *grad, zt_dtype dt, int64_t n, float scale,
                     int64_t *nonfinite);

/* zt_grad_sumsq split over a thread pool (NULL: this thread) in ZT_ADAM_CHUNK chunks whose
 * partial sums are added in chunk order: the same result for every thread count, with or
 * without a pool. */
double zt_grad_sumsq_parallel(zt_threadpool *pool, zt_adam_variant v, const void *grad, zt_dtype dt,
                              int64_t n, float scale, int64_t *nonfinite);

/* acc[i] += grad[i] (grad fp32, bf16 or fp16; acc fp32, or bf16: the sum in fp32 rounded
 * once to nearest even) for n elements over the pool (NULL: this thread). With nonfinite
 * non-NULL it also returns zt_grad_sumsq_parallel(acc) — the same bits — computed chunk by
 * chunk right after each chunk's addition (the gradient-norm pass folded into the last
 * accumulation); else returns 0. With overwrite, acc[i] = 0 + grad[i] without reading acc
 * (a step's first micro-step: the same bits as adding to zeros, one stream fewer). */
double zt_grad_accumulate(zt_threadpool *pool, zt_adam_variant v, void *acc, zt_dtype acc_dt,
                          const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *nonfinite,
                          int overwrite);

/* The fastest variant this CPU supports. */
zt_adam_variant zt_adam_variant_best(void);
/* 1 if this CPU can run variant v. */
int zt_adam_variant_supported(zt_adam_variant v);
/* "scalar", "avx2", "avx512"; a static string. */
const char *zt_adam_variant_name(zt_adam_variant v);
/* "auto" (or NULL: the best), "scalar", "avx2", "avx512". Returns 0, or -1 if the name is
 * unknown or this CPU lacks the instruction set; *out is untouched then. */
int zt_adam_variant_parse(const char *name, zt_adam_variant *out);

/* ---- internal: the per-variant kernels (optimizer/adam_<variant>.c) and their inputs ---- */

/* zt_adam_consts: the constants derived once per call from the hyper-parameters, defined
 * with the per-element update they feed (adam_elem.h). */

/* Fills c from h; bf16_insn is set when the CPU has AVX512_BF16. */
void zt_adam_consts_init(zt_adam_consts *c, const zt_adam_hparams *h);

int64_t zt_adam_step_scalar(const zt_adam_consts *c, const zt_adam_tensors *t);
int64_t zt_adam_step_avx2(const zt_adam_consts *c, const zt_adam_tensors *t);
int64_t zt_adam_step_avx512(const zt_adam_consts *c, const zt_adam_tensors *t);
double zt_grad_sumsq_scalar(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad);
double zt_grad_sumsq_avx2(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad);
double zt_grad_sumsq_avx512(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad);

/* The kernel of variant v, given constants (used by zt_adam_step and the parallel step). */
int64_t zt_adam_step_consts(zt_adam_variant v, const zt_adam_consts *c, const zt_adam_tensors *t);

/* t advanced by `first` elements and cut to `count` (grad and param_out by their dtypes). */
zt_adam_tensors zt_adam_tensors_slice(const zt_adam_tensors *t, int64_t first, int64_t count);

#endif

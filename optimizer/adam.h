/* The fused CPU Adam/AdamW step over one fp32 shard, in one pass over memory:
 * read master, m, v and the gradient (fp32, bf16 or fp16); write master, m, v and the
 * working-dtype parameter copy. Variants: a scalar reference, AVX2+FMA, AVX-512, chosen at
 * run time from the CPU (one binary for every x86-64).
 *
 * The update, per element (all variants, up to float rounding and FMA contraction):
 *   g  = grad * grad_scale                     (folds 1/loss_scale, clipping, averaging)
 *   g += weight_decay * p                      (Adam mode only: L2 into the gradient)
 *   m  = beta1 * m + (1 - beta1) * g
 *   v  = beta2 * v + (1 - beta2) * g * g
 *   p -= (lr * weight_decay) * p               (AdamW mode only: decoupled decay)
 *   p -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps)
 * with step_size = lr / (1 - beta1^step) and inv_sqrt_bc2 = 1 / sqrt(1 - beta2^step),
 * computed once per call in double. Non-finite values of g are counted (not skipped): the
 * step driver checks for them before any update is made, this count is a second guard. */
#ifndef ZT_OPTIMIZER_ADAM_H
#define ZT_OPTIMIZER_ADAM_H

#include "runtime/threadpool.h"
#include "ztier.h"

#include <stdint.h>

typedef struct zt_adam_hparams {
    float lr, beta1, beta2, eps, weight_decay;
    int adamw;        /* 1: decoupled decay (AdamW); 0: L2 added to the gradient (Adam) */
    int64_t step;     /* 1-based, for bias correction */
    float grad_scale; /* multiplies every gradient element first */
} zt_adam_hparams;

typedef struct zt_adam_tensors {
    float *master, *m, *v;
    const void *grad;
    zt_dtype grad_dtype;
    void *param_out; /* may be NULL */
    zt_dtype param_dtype;
    int64_t n;
} zt_adam_tensors;

typedef enum zt_adam_variant { ZT_ADAM_SCALAR = 0, ZT_ADAM_AVX2, ZT_ADAM_AVX512 } zt_adam_variant;

/* Constants derived once per call from the hyper-parameters. */
typedef struct zt_adam_consts {
    float beta1, beta2, one_minus_beta1, one_minus_beta2;
    float step_size, inv_sqrt_bc2, eps, decay, l2, grad_scale;
} zt_adam_consts;

void zt_adam_consts_init(zt_adam_consts *c, const zt_adam_hparams *h);

/* One fused pass; returns the number of non-finite gradient elements seen. */
int64_t zt_adam_step(zt_adam_variant v, const zt_adam_hparams *h, const zt_adam_tensors *t);
/* The same split over a thread pool in cache-friendly chunks; the result is bitwise equal
 * to zt_adam_step with the same variant. */
int64_t zt_adam_step_parallel(zt_threadpool *pool, zt_adam_variant v, const zt_adam_hparams *h,
                              const zt_adam_tensors *t);

/* Sum of squares (in double) of grad * scale, and the count of non-finite elements. */
double zt_grad_sumsq(zt_adam_variant v, const void *grad, zt_dtype dt, int64_t n, float scale,
                     int64_t *nonfinite);

zt_adam_variant zt_adam_variant_best(void);
int zt_adam_variant_supported(zt_adam_variant v);
const char *zt_adam_variant_name(zt_adam_variant v);
/* "auto", "scalar", "avx2", "avx512"; -1 if unknown or this CPU lacks it. */
int zt_adam_variant_parse(const char *name, zt_adam_variant *out);

/* The per-variant kernels (optimizer/adam_<variant>.c). */
int64_t zt_adam_step_scalar(const zt_adam_consts *c, const zt_adam_tensors *t);
int64_t zt_adam_step_avx2(const zt_adam_consts *c, const zt_adam_tensors *t);
int64_t zt_adam_step_avx512(const zt_adam_consts *c, const zt_adam_tensors *t);
double zt_grad_sumsq_scalar(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad);
double zt_grad_sumsq_avx2(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad);
double zt_grad_sumsq_avx512(const void *grad, zt_dtype dt, int64_t n, float scale, int64_t *bad);

#endif

/* SPDX-License-Identifier: MIT */
/* `ztier bench profile` (bench_profile.c): the machine profile of docs/plan.md, "The machine profile", measured
 * phase by phase. The phases in other files fill the same profile through these calls. */
#ifndef ZT_TOOLS_BENCH_PROFILE_H
#define ZT_TOOLS_BENCH_PROFILE_H

#include "comm/comm.h"
#include "gpt2_model.h"
#include "gpt2_ops.h"

#include <jansson.h>

#define PROFILE_CMD "ztier bench profile"

typedef struct profile {
    json_t *rates;   /* the "rates" object */
    json_t *compute; /* the "compute" list */
    zt_comm *comm;   /* the ranks (single when not launched by mpirun) */
    int rank, world;
    int local_rank, local_size; /* among the ranks on this machine: which GPU is this rank's */
    double seconds;             /* the time budget of the whole run */
    double scale;               /* transfer sizes: seconds / 120, at least 1/64, at most 1 */
    int progress;               /* print a line per phase on stderr (zt_progress_wanted) */
} profile;

/* Adds rates.<name> = {value, unit, source: "measured: <fmt ...>"}; returns the rate's object
 * for extra keys (NULL when out of memory, which writing the file reports). */
json_t *profile_rate(profile *p, const char *name, double value, const char *unit, const char *fmt,
                     ...) __attribute__((format(printf, 5, 6)));

/* Repetitions of a phase's measurement: at least min_reps, then more while the phase's share
 * of the budget (share of p->seconds, counted from t0) lasts, at most max_reps. */
int profile_more(const profile *p, int done, int min_reps, int max_reps, double share, double t0);

/* The model's compute on ops (the CPU ops, or the CUDA ops on their stream): GEMMs of each
 * shape of the GPT-2 layer and head forward and backward, causal attention forward and
 * backward, and element-wise passes, at batch B x T tokens. sync waits for the ops' queued
 * work (NULL: they are synchronous). how names the ops for "source". Fills
 * gemm_flops_per_s, attention_flops_per_s, elementwise_bytes_per_s and the compute list.
 * 0, or -1 after a message. */
typedef struct profile_ops {
    const gpt2_ops *ops;
    void (*sync)(void *arg);
    void *sync_arg;
    const char *how;
} profile_ops;
int profile_compute(profile *p, const gpt2_config *c, int B, int T, const profile_ops *ops);

/* The model's layers (bench_profile_layers.c): whole training micro-steps of the model
 * (gpt2_forward, gpt2_backward) on ops, each layer's part timed; the compute list's
 * layer_forward and layer_backward entries. 0, or -1 after a message. */
int profile_layers(profile *p, const gpt2_config *c, int B, int T, const profile_ops *ops);

/* Helpers of both (bench_profile_compute.c): waits for the ops' queued work; 1 after a
 * message when the ops met an error; n floats of ops memory filled with a pseudo-random
 * [-0.05, 0.05) from seed, uploaded in one piece (NULL when out of memory). */
void profile_ops_sync(const profile_ops *o);
int profile_ops_failed(const profile_ops *o);
float *profile_ops_alloc(const profile_ops *o, size_t n, uint32_t seed);

/* Under mpirun (world > 1): all-gather and reduce-scatter bus bandwidth and latency of the
 * comm backend over host memory. 0, or -1 after a message. */
int profile_comm(profile *p);

#ifdef ZT_HAVE_GPT2_CUDA
/* bench_profile_cuda.c: the CUDA ops on a stream of their own on GPU `device` (-1: the
 * current one; the stand-in with cudasim), bf16 matmuls as `ztier bench gpt2` runs them. 0,
 * or -1 after a message. */
typedef struct profile_cuda {
    gpt2_ops ops;
    void *stream;
} profile_cuda;
int profile_cuda_open(profile_cuda *c, int device);
void profile_cuda_sync(void *stream);
void profile_cuda_close(profile_cuda *c);
#endif

#endif

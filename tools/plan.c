/* SPDX-License-Identifier: MIT */
/* `ztier plan`: the predicted time of one training step from a machine profile
 * (docs/plan.md, the profile: profile-schema v1).
 *
 *   ztier plan <estimate's model arguments> [--checkpoint-activations none|selective|full]
 *              --profile machine.json [--json]
 *
 * The model is registered and replayed as `ztier estimate` does (tools/estimate_model.h); one
 * micro-step's recorded fetches and releases become tasks of the step model
 * (runtime/stepmodel.h), each rule following what the runtime does (docs/plan.md, "How it
 * works"): a fetch moves a layer (NVMe read, copy in, all-gather) once per step while the
 * device budget holds it; the use between fetch and release is compute (the parameters'
 * matmuls, a GPT-2 block's attention, the activation policy's recompute); a backward release
 * reduce-scatters and copies the gradients out; the optimizer reads, updates and writes each
 * layer's state (at the layer's next fetch with overlap_step), on the compute's cores on a
 * host backend. Each stage of a fetch's gather (the NVMe read, the copy in, the all-gather)
 * starts when the call that issued it is made, which the replay says
 * (zt_rt_prefetch_issues: the runtime's window, stage3_prefetch_bucket_size ahead within
 * stage3_max_live_parameters): the fetch itself with no window, else an earlier fetch. */
#include "runtime/runtime.h"
#include "runtime/stepmodel.h"
#include "core/convert.h"
#include "gpt2_model.h"
#include "optimizer/nvme_step.h"
#include "tools/bench_common.h"
#include "tools/commands.h"
#include "tools/estimate_model.h"
#include "tools/plan_compute.h"
#include "tools/plan_exact.h"
#include "tools/plan_search.h"
#include "tools/plan_svg.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_STEPS \
    3 /* steps simulated back to back; the last one is reported (steady state:
                         with overlap_step a layer's update runs until the next step fetches it) */

typedef struct rates {
    double copy, nvme_read, nvme_write, adam, adam_device, gemm, attention, allgather,
        reduce_scatter, ag_lat, rs_lat;
    double elementwise; /* 0: not in the profile (the elementwise passes ride in the GEMM rate) */
    int host;           /* machine.backend "host": the "device" is the CPU, its compute, copies and
                       the CPU optimizer share the same cores */
    double cores;       /* machine.cores (0: not given) */
    double threads;     /* machine.threads: the thread budget the compute and Adam rates were
                       measured at (0: not given) */
    double fresh;       /* host_fresh_bytes_per_s: writing into new pages (0: not in the profile) */
    double peak;        /* machine.gpu_peak_flops on a cuda profile, for MFU (0: not given) */
    json_t *compute;    /* the profile's exact-shape `compute` entries (plan_exact.h), or NULL */
} rates;

static int rate(json_t *r, const char *name, double *out, char *err, size_t len)
{
    json_t *v = json_object_get(json_object_get(r, name), "value");
    if (!json_is_number(v) || json_number_value(v) <= 0)
        return snprintf(err, len,
                        "the profile has no positive rates.%s.value: measure it with `ztier "
                        "bench profile`, or write it by hand (docs/plan.md)",
                        name),
               -1;
    *out = json_number_value(v);
    return 0;
}

/* An optional rate: its value, or `dflt` when the profile does not have it. */
static double rate_or(json_t *r, const char *name, double dflt)
{
    json_t *v = json_object_get(json_object_get(r, name), "value");
    return json_is_number(v) && json_number_value(v) > 0 ? json_number_value(v) : dflt;
}

static int read_profile(const char *path, int world, rates *rt, char *err, size_t len)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return snprintf(err, len, "cannot read the profile %s: %s (line %d)", path, je.text,
                        je.line),
               -1;
    json_t *r = json_object_get(root, "rates"), *mach = json_object_get(root, "machine");
    const char *backend = json_string_value(json_object_get(mach, "backend"));
    memset(rt, 0, sizeof *rt);
    rt->host = !backend || strcmp(backend, "cuda") != 0;
    json_t *c = json_object_get(mach, "cores"), *t = json_object_get(mach, "threads");
    rt->cores = json_is_number(c) ? json_number_value(c) : 0;
    rt->threads = json_is_number(t) ? json_number_value(t) : 0;
    int rc = rate(r, rt->host ? "host_memcpy_bytes_per_s" : "h2d_bytes_per_s", &rt->copy, err, len);
    rc = rc ? rc : rate(r, "nvme_read_bytes_per_s", &rt->nvme_read, err, len);
    rc = rc ? rc : rate(r, "nvme_write_bytes_per_s", &rt->nvme_write, err, len);
    rc = rc ? rc : rate(r, "adam_params_per_s", &rt->adam, err, len);
    rc = rc ? rc : rate(r, "gemm_flops_per_s", &rt->gemm, err, len);
    rt->attention = rate_or(r, "attention_flops_per_s", rt->gemm);
    rt->adam_device = rate_or(r, "adam_device_params_per_s", rt->adam);
    rt->elementwise = rate_or(r, "elementwise_bytes_per_s", 0);
    rt->fresh = rate_or(r, "host_fresh_bytes_per_s", 0);
    json_t *peak = json_object_get(mach, "gpu_peak_flops");
    rt->peak = !rt->host && json_is_number(peak) && json_number_value(peak) > 0
                   ? json_number_value(peak)
                   : 0;
    json_t *compute = json_object_get(root, "compute");
    if (json_is_array(compute))
        rt->compute = json_incref(compute);
    if (!rc && world > 1) {
        rc = rate(r, "allgather_bytes_per_s", &rt->allgather, err, len);
        rc = rc ? rc : rate(r, "reduce_scatter_bytes_per_s", &rt->reduce_scatter, err, len);
        rt->ag_lat = rate_or(r, "allgather_latency_s", 0);
        rt->rs_lat = rate_or(r, "reduce_scatter_latency_s", rt->ag_lat);
    }
    json_decref(root);
    return rc;
}

/* What the compute of a GPT-2 --config counts beyond its parameters' matmuls. */
typedef struct shape {
    int gpt2; /* a GPT-2 --config with --batch/--seq: the rest is known */
    gpt2_config c;
    double rows, seq; /* per rank */
    int policy;       /* GPT2_KEEP_ALL | GPT2_SELECTIVE | GPT2_FULL */
    int act_home;     /* full with the blocks' inputs in ztier's store: 1 host, 2 NVMe, else 0 */
    int act_staged;   /* the store's staging buffers: the last saves come back without a read */
} shape;

/* The step's tasks from one micro-step's events (see the file comment). */
typedef struct builder {
    zt_stepmodel sm;
    const zt_runtime *rt;
    const zt_plan *plan;
    rates r;
    shape sh;
    double tokens;    /* per rank per micro-step */
    plan_exact ex;    /* the profile's compute entries at the model's shape (all < 0: none) */
    plan_gemms gm;    /* the profile's GEMM entries (plan_compute.h) */
    plan_mm mm[2][2]; /* where the block's [0] and the head's [1] matmuls came from, per pass */
    int fresh_grads;  /* the backward's gradient buffers and the step-end gather's are new pages
                        each step (host backend, replicated layers on more than one rank) */
    int *zeroed;      /* per layer: the step its gradient buffer was last zeroed (-1: never) */
    int last_refresh; /* the latest update's replica refresh (stages 1-2), -1: none */
    double share;     /* the rank's share of the profile's compute and Adam rates (CPU cores it
                      gets over the threads the rates were measured at, at most 1) */
    int world, overlap;
    int step;          /* the step being built */
    int *ready, *used; /* per layer: its fetch chain's last task, its compute task */
    int *updated;      /* per layer: the previous step's update of it (-1: none) */
    int *uses;         /* per layer: its uses in this micro-step's pass so far (tied layers) */
    int *act_saved;    /* per layer: the task that saved its activation checkpoint (-1: none) */
    int n_saved;       /* checkpoints saved in this micro-step so far */
    int last_compute;  /* the latest compute task */
    int blocking;      /* a collective the caller's next compute waits for (-1: none) */
    /* the prefetch window: per call of the step (micro-step * events + event), the stages of
       its fetch's gather and the call each was issued at (zt_rt_prefetch_issues), and the
       compute task the caller finished before making that call; call_end: before the step's
       first call (zt_step's window) */
    zt_est_issue *issue;
    int *call_after, call, call_end;
    int *pending; /* per layer: its update waits for its next fetch (overlap_step) */
    /* the NVMe optimizer step's sub-groups (nvme_update): the next one's number in the step
       (zt_nvme_step numbers them from 0 each step), the step's count, and per buffer set
       (sub-group mod sets) the last one's update as the caller returns from it (Adam, or the
       working copy's store after it) and its write-back (-1: none) */
    int sub_next, sub_count;
    int sub_adam[ZT_NVME_STEP_MAX_SETS], sub_wrote[ZT_NVME_STEP_MAX_SETS];
    /* zt_nvme_step_preread: the reads of the next update's first sub-groups (n_pre of them),
       started at the first backward fetch of step pre_step (-1: none yet); sub_pre: how many
       the update in progress found read */
    int pre_read[ZT_NVME_STEP_MAX_SETS], n_pre, pre_step, sub_pre;
    int pre_copy[ZT_NVME_STEP_MAX_SETS]; /* the pre-read sub-groups' master copies (-1: none) */
    int *upd_caller;    /* per layer: the last update of the fetch that updated it (overlap_step;
                           -1: none) */
    int home_store;     /* the latest update's synchronous store of the working copy to its NVMe
                           home, or of a sub-group's new master into the parameters in device
                           memory (-1: none) */
    double io_bytes[2]; /* NVMe bytes read and written in the step being built */
    char bound[1024];   /* the critical path in words (zt_sm_bound) */
} builder;

static double layer_bytes(const builder *b, const zt_layer *l)
{
    return (double)l->flat_numel * (double)zt_dtype_size(b->rt->reg.dtype);
}

static int update(builder *b, int i);
static int nvme_preread(builder *b, int caller);

static int add(builder *b, zt_sm_res res, double s, int *deps, int nd, const char *fmt, int layer)
{
    char w[ZT_SM_WHAT];
    snprintf(w, sizeof w, fmt, b->rt->reg.layers[layer].name);
    int t = zt_sm_add(&b->sm, res, s, deps, nd, w);
    return t < 0 ? -2 : t; /* -2: failed (a dep of -2 fails the next add too); -1: no task */
}

/* A ring collective's time for `bytes` gathered (or reduced) over the ranks: each rank sends
 * and receives (world - 1) / world of them at the profile's bus bandwidth. */
static double collective_s(const builder *b, double bytes, double bw, double lat)
{
    return lat + bytes * (b->world - 1) / b->world / bw;
}

/* When stage k of this fetch's gather can start: after the compute the caller finished before
 * the call that issued it (the window's move after an earlier fetch, zt_step's at the step
 * before, or this fetch itself when nothing issued it). */
static int issued_after(const builder *b, int k)
{
    int at = b->issue[b->call].at[k];
    if (at == ZT_EST_STEP_START)
        return b->call_end;
    return at >= 0 && at < b->call ? b->call_after[at] : b->last_compute;
}

/* Whether stage k of this fetch's gather is issued by the fetch itself (no earlier call
 * issued it): it then starts after the updates the fetch ran first (overlap_step). */
static int issued_here(const builder *b, int k)
{
    int at = b->issue[b->call].at[k];
    return at != ZT_EST_STEP_START && !(at >= 0 && at < b->call);
}

/* overlap_step: the updates a fetch runs before its gather (zt_rt_fetch): a forward fetch
 * those of the layers up to the next one in the step's order (its state was read while the
 * caller computed this layer's predecessor; once updated, the window may prefetch it), a
 * backward fetch the rest of the step (zt_rt_step_complete); strictly in layer order. Returns
 * the last one's task (the caller waits for it), -1: none ran, -2: failed. */
static int run_pending(builder *b, const zt_est_event *ev)
{
    int nl = b->rt->reg.n_layers, last = -1;
    int through = ev->pass == ZT_BACKWARD ? nl - 1 : ev->layer + 1 < nl ? ev->layer + 1 : ev->layer;
    int first = -1;
    for (int i = 0; i <= through; i++)
        if (b->pending[i]) {
            b->pending[i] = 0;
            first = first < 0 ? i : first;
            if ((last = b->updated[i] = update(b, i)) < -1)
                return -2;
        }
    for (int i = first; first >= 0 && i <= through; i++)
        b->upd_caller[i] = last;
    return last;
}

static int on_fetch(builder *b, const zt_est_event *ev)
{
    const zt_layer *l = &b->rt->reg.layers[ev->layer];
    double bytes = layer_bytes(b, l);
    int caller = run_pending(b, ev); /* overlap_step: the caller's updates before the gather */
    if (caller < -1 || (ev->pass == ZT_BACKWARD && (caller = nvme_preread(b, caller)) < -1))
        return -1;
    /* a prefetch of a layer the step has not updated is declined (zt_rt_param_home_ready):
       its read starts once the fetch that updated it has returned from all its updates */
    int upd = b->upd_caller[ev->layer] >= 0 ? b->upd_caller[ev->layer] : b->updated[ev->layer];
    int dep[3] = {-1, upd, -1};
    int nvme = b->plan->param_tier == ZT_TIER_NVME; /* stages: read, copy, all-gather */
    int t = -1;
    /* Whether the fetch moves the layer: the replay started a gather for it since the layer's
     * last fetch. A copy the prefetcher keeps at its release (zt_sched_keep: its next use
     * within stage3_max_reuse_distance, the gathered elements within
     * stage3_max_live_parameters) and the budget does not evict is found there by the
     * backward fetch, or the tied layer's second, which then moves nothing. */
    int moves = !l->persistent && !l->replicated && b->issue[b->call].at[0] != ZT_EST_NOT_ISSUED;
    if (moves) {
        if (nvme) {
            dep[0] = issued_after(b, 0);
            dep[2] = issued_here(b, 0) ? caller : -1;
            dep[1] = t = add(b, ZT_SM_NVME, bytes / b->world / b->r.nvme_read, dep, 3,
                             "NVMe read of %s", ev->layer);
            b->io_bytes[0] += bytes / b->world;
        }
        if (b->plan->param_tier != ZT_TIER_DEVICE) {
            dep[0] = issued_after(b, nvme);
            dep[2] = issued_here(b, nvme) ? caller : -1;
            dep[1] = t =
                add(b, ZT_SM_H2D, bytes / b->world / b->r.copy, dep, 3, "copy-in of %s", ev->layer);
        }
        if (b->world > 1) {
            dep[0] = issued_after(b, nvme + 1);
            dep[2] = issued_here(b, nvme + 1) ? caller : -1;
            dep[1] = t = add(b, ZT_SM_NET, collective_s(b, bytes, b->r.allgather, b->r.ag_lat), dep,
                             3, "all-gather of %s", ev->layer);
        }
    }
    /* nothing moved (or nothing to move: the parameters on the device, one rank): the use
       waits for the layer's update */
    b->ready[ev->layer] = moves && t != -1 ? t : dep[1];
    if (caller >= 0 && t < -1)
        return -1;
    if (caller >= 0) { /* the use waits for the updates the fetch ran, too */
        int join[2] = {b->ready[ev->layer], caller};
        if ((t = b->ready[ev->layer] = add(b, ZT_SM_COMPUTE, 0, join, 2,
                                           "updates before the fetch of %s", ev->layer)) < -1)
            return -1;
    }
    if (ev->pass == ZT_BACKWARD && b->fresh_grads && l->replicated &&
        b->zeroed[ev->layer] != b->step) {
        /* the gradient buffer the backward fetch allocates and zeroes (the caller waits) */
        b->zeroed[ev->layer] = b->step;
        t = b->ready[ev->layer] = add(b, ZT_SM_COMPUTE, bytes / b->r.fresh, &b->ready[ev->layer], 1,
                                      "zeroing new gradient pages of %s", ev->layer);
    }
    return t < -1 ? -1 : 0;
}

/* The compute seconds (at the full rate) of one use of layer `li` in `pass`, and in *recompute
 * what the activation policy runs again before a block's backward. Blocks of a GPT-2 --config
 * add causal attention (QK^T and AV over the lower triangle) and, when the profile has
 * elementwise_bytes_per_s, their elementwise passes (fp32 bytes read and written per token:
 * two layernorms 2·2C, GELU 2·4C, two residual adds 2·3C; backward twice that). Selective
 * recomputes the layernorms and GELU, full the whole forward. */
/* The profile's exact-shape seconds of `kind` in `pass` (plan_exact.h), else `from_rates`. */
static double exact_or(const builder *b, plan_kind kind, zt_pass pass, double from_rates)
{
    double s = b->ex.s[kind][pass == ZT_BACKWARD];
    return s >= 0 ? s : from_rates;
}

/* A GPT-2 block's (head 0) or the LM head's (1) matmul seconds in pass: the profile's GEMM
 * entries at the use's shape (plan_compute.h), else rate_s (gemm_flops_per_s); the source
 * noted for the output (an exact layer entry, where there is one, holds the whole layer). */
static double matmuls(builder *b, int head, zt_pass pass, double rate_s)
{
    int bwd = pass == ZT_BACKWARD, m = (int)(b->tokens + 0.5), C = b->sh.c.channels;
    plan_mm x = head ? plan_head_matmul(&b->gm, m, C, b->sh.c.padded_vocab, bwd, rate_s)
                     : plan_block_matmuls(&b->gm, m, C, bwd, rate_s);
    b->mm[head][bwd] = x;
    double layer = b->ex.s[head ? PLAN_HEAD : PLAN_BLOCK][bwd];
    if (layer >= 0) /* the output names the entry that holds the whole layer, and its seconds */
        b->mm[head][bwd].src = PLAN_SRC_LAYER, b->mm[head][bwd].s = layer;
    return x.s;
}

static double use_seconds(builder *b, int li, zt_pass pass, double *recompute)
{
    const zt_layer *l = &b->rt->reg.layers[li];
    double mult = pass == ZT_BACKWARD ? 2 : 1; /* backward: the input's and the weights' grads */
    *recompute = 0;
    if (l->tied_after >= 0) {
        /* a tied embedding is a lookup at one use and a matmul at the other (the LM head:
         * forward its second use, backward its first); the matmul holds its FLOPs, and the
         * head's forward is followed by the loss, which no layer holds */
        int use = b->uses[li]++;
        int lookup = pass == ZT_BACKWARD ? use > 0 : use == 0;
        if (lookup)
            return exact_or(b, PLAN_EMBED, pass, 0);
        double n =
            b->sh.gpt2 ? (double)b->sh.c.padded_vocab * b->sh.c.channels : (double)l->flat_numel;
        double mm = mult * 2 * n * b->tokens / b->r.gemm;
        return exact_or(b, PLAN_HEAD, pass, b->sh.gpt2 ? matmuls(b, 1, pass, mm) : mm) +
               (pass == ZT_BACKWARD ? 0 : exact_or(b, PLAN_LOSS, pass, 0));
    }
    double f = 2 * (double)l->flat_numel * b->tokens / b->r.gemm;
    if (b->sh.gpt2 && li == b->sh.c.layers + 1)
        return exact_or(b, PLAN_LN_F, pass, mult * f);
    if (!(b->sh.gpt2 && li >= 1 && li <= b->sh.c.layers))
        return mult * f;
    double C = b->sh.c.channels, tok = b->sh.rows * b->sh.seq;
    double att = 2 * b->sh.rows * b->sh.seq * b->sh.seq * C / b->r.attention;
    double att_f = exact_or(b, PLAN_ATTENTION, ZT_FORWARD, att);
    double att_b = exact_or(b, PLAN_ATTENTION, ZT_BACKWARD, 2 * att);
    double ew = b->r.elementwise > 0 ? 4 * (4 + 8 + 6) * C * tok / b->r.elementwise : 0;
    double mm_f = matmuls(b, 0, ZT_FORWARD, f);
    double fwd = exact_or(b, PLAN_BLOCK, ZT_FORWARD, mm_f + att_f + ew);
    if (pass == ZT_BACKWARD && b->sh.policy == GPT2_FULL)
        *recompute = fwd;
    else if (pass == ZT_BACKWARD && b->sh.policy == GPT2_SELECTIVE && ew > 0)
        *recompute = ew * (4 + 8) / (4 + 8 + 6); /* the layernorms and GELU */
    return pass == ZT_BACKWARD
               ? exact_or(b, PLAN_BLOCK, pass, matmuls(b, 0, pass, 2 * f) + 2 * ew + att_b)
               : fwd;
}

/* Full policy with the blocks' inputs in ztier's store: the save after a block's forward
 * (a copy out; on NVMe also a write), and the load before its backward (the read, unless the
 * input is still in a staging buffer, then the copy in). Returns the load's last task. */
static int act_transfer(builder *b, int li, zt_pass pass, int after)
{
    double bytes = b->sh.rows * b->sh.seq * b->sh.c.channels * 4; /* fp32 block input */
    int t = after;
    if (pass != ZT_BACKWARD) {
        t = add(b, ZT_SM_D2H, bytes / b->r.copy, &t, 1, "checkpoint of %s out", li);
        if (t > -2 && b->sh.act_home == 2) {
            t = add(b, ZT_SM_NVME_WRITE, bytes / b->r.nvme_write, &t, 1, "checkpoint of %s written",
                    li);
            b->io_bytes[1] += bytes;
        }
        b->act_saved[li] = b->n_saved++;
        return t;
    }
    int dep[2] = {t, -1};
    if (b->sh.act_home == 2 && b->act_saved[li] < b->n_saved - b->sh.act_staged) {
        b->io_bytes[0] += bytes;
        dep[1] = add(b, ZT_SM_NVME, bytes / b->r.nvme_read, dep, 1, "checkpoint of %s read", li);
    }
    return dep[1] < -1 ? -2
                       : add(b, ZT_SM_H2D, bytes / b->r.copy, dep, 2, "checkpoint of %s in", li);
}

static int on_release(builder *b, const zt_est_event *ev)
{
    const zt_layer *l = &b->rt->reg.layers[ev->layer];
    double recompute;
    double s = use_seconds(b, ev->layer, ev->pass, &recompute) / b->share;
    int block = b->sh.gpt2 && ev->layer >= 1 && ev->layer <= b->sh.c.layers;
    /* the caller waits for the layer, its checkpoint, and a reduction its last release
       completed before returning (overlap_comm off) */
    int deps[3] = {b->ready[ev->layer], -1, b->blocking};
    b->blocking = -1;
    if (block && b->sh.act_home && b->sh.policy == GPT2_FULL && ev->pass == ZT_BACKWARD)
        deps[1] = act_transfer(b, ev->layer, ev->pass, b->last_compute);
    if (recompute > 0)
        deps[0] =
            add(b, ZT_SM_COMPUTE, recompute / b->share, deps, 3, "recompute of %s", ev->layer);
    int c = deps[0] < -1 || deps[1] < -1
                ? -2
                : add(b, ZT_SM_COMPUTE, s, deps, 3,
                      ev->pass == ZT_BACKWARD ? "backward of %s" : "forward of %s", ev->layer);
    if (c < -1)
        return -1;
    b->used[ev->layer] = c;
    b->last_compute = c;
    if (block && b->sh.act_home && b->sh.policy == GPT2_FULL && ev->pass != ZT_BACKWARD)
        if (act_transfer(b, ev->layer, ev->pass, c) < -1)
            return -1;
    if (ev->pass != ZT_BACKWARD)
        return 0;
    /* the gradients: this rank's shard to the optimizer's side (reduce-scattered first on
     * more than one rank; fp32 sums) */
    double grad = (double)l->flat_numel * zt_dtype_size(b->rt->reg.dtype);
    int gi = c;
    if (gi > -2 && b->world > 1) {
        gi = add(b, ZT_SM_NET, collective_s(b, grad, b->r.reduce_scatter, b->r.rs_lat), &gi, 1,
                 "reduce-scatter of %s", ev->layer);
        if (!b->rt->cfg.overlap_comm) /* the release returns when its reduction is done */
            b->blocking = gi;
    }
    if (gi > -2 && !l->opt_device && b->plan->optim_tier != ZT_TIER_DEVICE)
        gi = add(b, ZT_SM_D2H, grad / b->world / b->r.copy, &gi, 1, "gradients out of %s",
                 ev->layer);
    b->ready[ev->layer] = gi; /* the optimizer waits for these */
    return gi < -1 ? -1 : 0;
}

/* Whether layer i's update is the NVMe step's (its state on NVMe). */
static int nvme_layer(const builder *b, int i)
{
    return !b->rt->reg.layers[i].opt_device && b->plan->optim_tier == ZT_TIER_NVME;
}

/* The NVMe step's sub-group elements (the plan's opt_buf_bytes; a shard's elements at most). */
static int64_t sub_group_elems(const builder *b, int64_t shard)
{
    int64_t per = (int64_t)(b->plan->opt_buf_bytes / sizeof(float));
    return per > 0 ? per : shard;
}

static int sets(const builder *b)
{
    int n = b->plan->opt_sets;
    return n < ZT_NVME_STEP_MIN_SETS   ? ZT_NVME_STEP_MIN_SETS
           : n > ZT_NVME_STEP_MAX_SETS ? ZT_NVME_STEP_MAX_SETS
                                       : n;
}

/* Bytes per element a sub-group of layer i reads and writes: master, m, v, or m and v where the
 * parameters' home is the master. */
static double state_bytes(const builder *b, int i)
{
    return zt_plan_master_is_param(b->plan, &b->rt->reg.layers[i]) ? 8 : 12;
}

/* Whether layer i's NVMe update takes its master from device memory, where its fp32
 * parameters are the master (nvme_step.c: each sub-group's master copied out as its read is
 * issued). Its new values then go back there (and a persistent layer's, whose master is in
 * host memory: zt_plan_master_to_device), synchronously after each sub-group's Adam. */
static int device_master(const builder *b, int i)
{
    return zt_plan_master_is_param(b->plan, &b->rt->reg.layers[i]) &&
           b->plan->param_tier == ZT_TIER_DEVICE;
}

/* The read of a sub-group of n elements of layer i into a buffer set, issued after the two
 * tasks in `issue`: its state from NVMe and, where the master is in device memory, its copy out
 * (*copy; else -1). Returns the read (-2: failed). */
static int sub_group_read(builder *b, int i, double n, int *issue, int *copy)
{
    double bytes = state_bytes(b, i) * n;
    *copy = device_master(b, i)
                ? add(b, ZT_SM_D2H, 4 * n / b->r.copy, issue, 2, "copy of %s's master out", i)
                : -1;
    b->io_bytes[0] += bytes;
    int rd = add(b, ZT_SM_NVME, bytes / b->r.nvme_read, issue, 2,
                 "NVMe read of %s's optimizer state", i);
    return *copy < -1 ? -2 : rd;
}

/* A new step's NVMe update (zt_nvme_step_begin): sub-groups numbered from 0, how many, and how
 * many of them the step's backward pre-read. */
static void nvme_step_begin(builder *b)
{
    b->sub_next = b->sub_count = 0;
    for (int i = 0; i < b->rt->reg.n_layers; i++) {
        int64_t elems = b->rt->reg.layers[i].shard_numel, per = sub_group_elems(b, elems);
        b->sub_count += nvme_layer(b, i) && per > 0 ? (int)((elems + per - 1) / per) : 0;
    }
    b->sub_pre = b->pre_step == b->step ? b->n_pre : 0;
}

/* zt_nvme_step_preread at the step's first backward fetch (zt_rt_fetch, after the updates the
 * fetch ran: `caller`): the caller waits for the last write-backs, then the reads of the next
 * update's first N sub-groups start. Returns what the fetch's caller waits for then (-2:
 * failed). */
static int nvme_preread(builder *b, int caller)
{
    int nl = b->rt->reg.n_layers, n_sets = sets(b), last = -1, k = 0;
    if (b->pre_step == b->step)
        return caller;
    b->pre_step = b->step;
    for (int s = 0; s < ZT_NVME_STEP_MAX_SETS; s++) /* one queue: the last added ends last */
        last = b->sub_wrote[s] > last ? b->sub_wrote[s] : last;
    int wait[2] = {caller, last};
    if (caller >= 0 && last >= 0)
        last = add(b, ZT_SM_COMPUTE, 0, wait, 2, "last write-backs before the fetch of %s", 0);
    else
        last = caller >= 0 ? caller : last;
    int issue[2] = {b->last_compute, last};
    for (int i = 0; i < nl && k < n_sets && last > -2; i++) {
        int64_t elems = b->rt->reg.layers[i].shard_numel, per = sub_group_elems(b, elems);
        for (int64_t begin = 0; nvme_layer(b, i) && begin < elems && k < n_sets; begin += per) {
            double n = (double)(elems - begin < per ? elems - begin : per);
            if ((b->pre_read[k] = sub_group_read(b, i, n, issue, &b->pre_copy[k])) < -1)
                return -2;
            k++;
        }
    }
    b->n_pre = k;
    return last;
}

/* Layer i's update with its state on NVMe, as zt_nvme_step runs it: the shard cut into
 * sub-groups (the plan's opt_buf_bytes, 16M elements at most), numbered across the step's
 * layers from 0, pipelined over the plan's N buffer sets. The first N were read at the step's
 * backward (nvme_preread); sub-group j's read (master, m, v, or m and v where the parameters'
 * home is the master; with that master in device memory, its copy out beside the read) is
 * issued when the caller starts sub-group j - N + 2 and waits for its set's previous
 * write-back (j - N); the caller runs Adam on j after its read, the previous sub-group and,
 * where it issued a read there (not for the pre-read ones nor the step's last N - 2), the
 * write-back of j - 2 (which it waits for to reuse that set); then, with fp32 parameters in
 * device memory, the synchronous copy of j's new master into them; after a shard's last
 * sub-group the working copy's synchronous store to its NVMe home (zt_home_store), then j's
 * write-back, left in flight. On the CPU's threads, which on a host backend are the compute's
 * cores. Returns the task the caller returns after (the layer's next use waits for it). */
static int nvme_update(builder *b, int i)
{
    const zt_layer *l = &b->rt->reg.layers[i];
    int64_t elems = l->shard_numel, per = sub_group_elems(b, elems);
    int n_sets = sets(b), master_param = zt_plan_master_is_param(b->plan, l);
    double state = state_bytes(b, i);
    zt_sm_res cpu = b->r.host ? ZT_SM_COMPUTE : ZT_SM_CPU_OPT;
    int a = -1;
    for (int64_t begin = 0; begin < elems; begin += per) {
        double n = (double)(elems - begin < per ? elems - begin : per);
        int j = b->sub_next++, slot = j % n_sets;
        /* read ahead by the backward, or issued as the caller starts j - N + 2, once it has
           returned from j - N + 1 (its store included) and j - N's write-back has ended */
        int issue[2] = {b->sub_wrote[slot], b->sub_adam[(j + 1) % n_sets]}, rd = -1, mo = -1;
        if (j < b->sub_pre)
            rd = b->pre_read[j], mo = b->pre_copy[j];
        else
            rd = sub_group_read(b, i, n, issue, &mo);
        /* the caller updates one sub-group after another; it waited for the last working
           copy's store, and for the write-back of j - 2 where it issued the read of j + N - 2
           (none for the pre-read ones and the step's last N - 2 sub-groups) */
        int ahead = j + n_sets - 2;
        int reuse = ahead >= b->sub_pre && ahead < b->sub_count
                        ? b->sub_wrote[(j - 2 + n_sets) % n_sets]
                        : -1;
        int deps[5] = {b->ready[i], rd, b->home_store, reuse, mo};
        a = rd < -1 ? -2 : add(b, cpu, n / (b->r.adam * b->share), deps, 5, "Adam of %s", i);
        /* the new master copied into the fp32 parameters in device memory, the caller waiting
           (its next sub-group's Adam too) */
        if (a > -2 && zt_plan_master_to_device(b->plan, l))
            a = b->home_store =
                add(b, ZT_SM_H2D, 4 * n / b->r.copy, &a, 1, "copy of %s's new parameters in", i);
        if (a < -1)
            return -2;
        int wr = a;
        if (begin + per >= elems && b->plan->param_tier == ZT_TIER_NVME && !master_param &&
            !l->persistent) {
            double p = (double)elems * zt_dtype_size(b->rt->reg.dtype);
            a = wr = b->home_store = add(b, ZT_SM_NVME_WRITE, p / b->r.nvme_write, &wr, 1,
                                         "NVMe write of %s's parameters", i);
            b->io_bytes[1] += p;
        }
        b->sub_adam[slot] = a; /* the caller returns from j */
        b->sub_wrote[slot] = wr = wr < -1 ? -2
                                          : add(b, ZT_SM_NVME_WRITE, state * n / b->r.nvme_write,
                                                &wr, 1, "NVMe write of %s's optimizer state", i);
        b->io_bytes[1] += state * n;
        if (wr < -1)
            return -2;
    }
    return a;
}

/* Layer i's update: with the state on NVMe its read (master, m, v, or m and v where the
 * parameters' home is the master), Adam, the write-back (and the new parameters to their NVMe
 * home); on the CPU's threads, which on a host backend are the compute's cores; stages 1-2
 * then copy the shard to the device and all-gather the replica. Returns the task the layer's
 * next use waits for. */
static int update(builder *b, int i)
{
    const zt_layer *l = &b->rt->reg.layers[i];
    double elems = (double)l->shard_numel;
    int dep = b->ready[i];
    int on_device = l->opt_device || b->plan->optim_tier == ZT_TIER_DEVICE;
    if (nvme_layer(b, i))
        return nvme_update(b, i);
    zt_sm_res cpu = b->r.host ? ZT_SM_COMPUTE : ZT_SM_CPU_OPT;
    double rate = on_device ? b->r.adam_device : b->r.adam * b->share;
    int a = add(b, on_device && !b->r.host ? ZT_SM_COMPUTE : cpu, elems / rate, &dep, 1,
                "Adam of %s", i);
    int done = a;
    if (a > -2 && l->replicated && !on_device) {
        /* the shard packed into the all-gather's send buffer, gathered into its receive buffer
           (both new pages each step where fresh_grads says so) and unpacked into the replica */
        double bytes = layer_bytes(b, l), fresh = b->fresh_grads ? b->r.fresh : 0;
        done = add(b, ZT_SM_H2D, bytes / b->world / (fresh > 0 ? fresh : b->r.copy), &done, 1,
                   "copy-in of %s", i);
        if (done > -2 && b->world > 1)
            done = add(b, ZT_SM_NET,
                       collective_s(b, bytes, b->r.allgather, b->r.ag_lat) +
                           (fresh > 0 ? bytes / fresh : 0),
                       &done, 1, "all-gather of %s", i);
        b->last_refresh = done;
    }
    return done;
}

/* PLAN_STEPS steps; step_end[s]: the last compute task of step s. With overlap_step a layer's
 * update runs at its first fetch of the next step (on_fetch), else all of them after the
 * step, and the next step waits for the whole update. */
static int build_steps(builder *b, const est_model *m, int micro_steps, int *step_end)
{
    int nl = b->rt->reg.n_layers, nc = m->n_events * micro_steps;
    int **arr[] = {&b->ready,     &b->used,    &b->updated, &b->uses,
                   &b->act_saved, &b->pending, &b->zeroed,  &b->upd_caller};
    for (size_t k = 0; k < sizeof arr / sizeof arr[0]; k++) {
        if (!(*arr[k] = malloc((size_t)nl * sizeof(int))))
            return -1;
        for (int i = 0; i < nl; i++)
            (*arr[k])[i] = arr[k] == &b->pending ? 0 : -1;
    }
    if (!(b->call_after = malloc((size_t)(nc > 0 ? nc : 1) * sizeof(int))))
        return -1;
    b->blocking = b->last_refresh = b->last_compute = b->call_end = b->home_store = -1;
    for (int k = 0; k < ZT_NVME_STEP_MAX_SETS; k++)
        b->sub_adam[k] = b->sub_wrote[k] = -1;
    b->pre_step = -1;
    for (int step = 0; step < PLAN_STEPS; step++) {
        b->step = step;
        b->io_bytes[0] = b->io_bytes[1] = 0;
        for (int s = 0; s < micro_steps; s++) {
            b->n_saved = 0;
            for (int i = 0; i < m->n_events; i++) {
                const zt_est_event *ev = &m->events[i];
                if (!ev->release && (i == 0 || m->events[i - 1].pass != ev->pass))
                    for (int l = 0; l < nl; l++)
                        b->uses[l] = 0; /* a new pass */
                b->call = s * m->n_events + i;
                b->call_after[b->call] = b->last_compute;
                if ((ev->release ? on_release(b, ev) : on_fetch(b, ev)) != 0)
                    return -1;
            }
        }
        step_end[step] = b->call_end = b->last_compute;
        nvme_step_begin(b);
        for (int i = 0; i < nl; i++) {
            if (b->overlap)
                b->pending[i] = 1, b->upd_caller[i] = -1;
            else if ((b->updated[i] = update(b, i)) < -1)
                return -1;
        }
        if (!b->overlap) { /* every layer waits for the whole update (zt_step returns after
                              the last layer's: the NVMe step after its last Adam, the last
                              write-back still in flight) and the replicas' refresh, one
                              all-gather issued at its end */
            int deps[2] = {nl > 0 ? b->updated[nl - 1] : b->sm.n - 1, b->last_refresh};
            int join = deps[0];
            if (b->last_refresh >= 0 &&
                (join = add(b, ZT_SM_COMPUTE, 0, deps, 2, "replicas refreshed (from %s)", 0)) < -1)
                return -1;
            for (int i = 0; i < nl; i++)
                b->updated[i] = join;
        }
    }
    return 0;
}

/* Model FLOPs utilization of the predicted step against the profile's gpu_peak_flops (a cuda
 * profile that has it; else 0): the FLOPs per token the trainer and `ztier bench gpt2` count
 * (gpt2_flops_per_token: 6 N plus attention; other models 6 N). */
static double mfu(const builder *b, const est_options *o, double tokens_step, double step)
{
    if (b->r.peak <= 0 || tokens_step <= 0 || step <= 0)
        return 0;
    double per_token = 0;
    if (b->sh.gpt2)
        per_token = gpt2_flops_per_token(&b->sh.c, o->seq);
    else
        for (int i = 0; i < b->rt->reg.n_layers; i++)
            per_token += 6.0 * (double)b->rt->reg.layers[i].flat_numel;
    return per_token * tokens_step / step / b->r.peak;
}

static void print_text(const builder *b, const zt_sm_result *r, double tokens_step, double u,
                       const char *path)
{
    printf("predicted step: %.4f s", r->step);
    if (tokens_step > 0)
        printf(", %.0f tokens/s", tokens_step / r->step);
    if (u > 0)
        printf(", MFU %.3f of the profile's gpu_peak_flops", u);
    printf("\nbusy share:");
    for (int i = 0; i < ZT_SM_NRES; i++)
        printf(" %s %.0f%%", zt_sm_res_name((zt_sm_res)i),
               r->step > 0 ? 100 * r->busy[i] / r->step : 0.0);
    printf("\ncompute stall: %.4f s (%.0f%%)\n%s\ncritical path: %s\n", r->stall,
           r->step > 0 ? 100 * r->stall / r->step : 0.0, b->bound, path);
    printf("NVMe per step: %.3f GB read, %.3f GB written\n", b->io_bytes[0] / 1e9,
           b->io_bytes[1] / 1e9);
    if (b->sh.gpt2) {
        char mm[1024];
        plan_mm_text(b->mm, mm, sizeof mm);
        printf("%s\n", mm);
        if (plan_exact_text(&b->ex, mm, sizeof mm)) /* embed, ln_f and loss entries used */
            printf("%s\n", mm);
    }
}

static void print_json(const builder *b, const zt_sm_result *r, double tokens_step, double u,
                       const char *path)
{
    json_t *busy = json_object();
    for (int i = 0; i < ZT_SM_NRES; i++)
        json_object_set_new(busy, zt_sm_res_name((zt_sm_res)i), json_real(r->busy[i]));
    json_t *o = json_pack("{s:f, s:f, s:o, s:f, s:s, s:s, s:f, s:f}", "step_s", r->step,
                          "tokens_per_s", tokens_step > 0 ? tokens_step / r->step : 0.0, "busy_s",
                          busy, "stall_s", r->stall, "bound", b->bound, "critical_path", path,
                          "nvme_read_bytes", b->io_bytes[0], "nvme_write_bytes", b->io_bytes[1]);
    if (o) /* MFU on a GPU profile with its peak, else null */
        json_object_set_new(o, "mfu", u > 0 ? json_real(u) : json_null());
    if (o) /* where each matmul's seconds came from (a GPT-2 --config; else null) */
        json_object_set_new(o, "matmul_source", b->sh.gpt2 ? plan_mm_json(b->mm) : json_null());
    if (o) /* the embed, ln_f and loss entries used (at the shape or scaled per token) */
        json_object_set_new(o, "layer_source", b->sh.gpt2 ? plan_exact_json(&b->ex) : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(o);
}

/* What the step model takes from the configuration and the model beyond the events and the
 * replay's window (window_issues): overlap_step, the rank's share of the cores, and for a GPT-2
 * --config its shape and activation policy. */
static int model_setup(builder *b, const est_options *o, const char *policy, char *err, size_t len)
{
    const zt_config *cfg = &b->rt->cfg;
    b->overlap = cfg->overlap_step == ZT_OVERLAP_ON ||
                 (cfg->overlap_step == ZT_OVERLAP_AUTO && b->plan->optim_tier == ZT_TIER_NVME);
    int per_node = o->ranks_per_node ? o->ranks_per_node : o->world;
    b->share = 1;
    if (b->r.host && b->r.cores > 0 && b->r.threads > 0 && b->r.cores / per_node < b->r.threads)
        b->share = b->r.cores / per_node / b->r.threads;
    shape *sh = &b->sh;
    sh->policy = GPT2_KEEP_ALL;
    if (policy && (sh->policy = gpt2_policy_parse(policy)) < 0)
        return snprintf(err, len,
                        "--checkpoint-activations '%s': use none, selective or full (the GPT-2 "
                        "trainer's policies)",
                        policy),
               -1;
    if (o->config && o->batch && gpt2_config_named(o->config, o->vocab, &sh->c) == 0) {
        sh->gpt2 = 1;
        sh->rows = (double)o->batch / o->world, sh->seq = o->seq;
    } else if (policy) {
        return snprintf(err, len,
                        "--checkpoint-activations is the GPT-2 trainer's policy: give a GPT-2 "
                        "--config with --batch and --seq, or leave it out"),
               -1;
    }
    for (int k = 0; k < PLAN_NKIND; k++)
        b->ex.s[k][0] = b->ex.s[k][1] = -1;
    for (int k = 0; k < 4; k++)
        b->mm[k / 2][k % 2].src = PLAN_SRC_NONE;
    if (plan_gemms_read(b->r.compute, b->r.gemm, &b->gm, err, len) != 0)
        return -1;
    if (sh->gpt2 && sh->rows == (int)sh->rows &&
        plan_exact_read(b->r.compute, (int)sh->rows, o->seq, sh->c.channels, sh->c.heads, &b->ex,
                        err, len) != 0)
        return -1;
    if (sh->gpt2 && sh->rows == (int)sh->rows) /* embed, ln_f, loss from another shape's */
        plan_exact_scale(b->r.compute, (int)sh->rows, o->seq, sh->c.channels, sh->c.heads, &b->ex);
    /* On a host backend the step-end all-gather of replicas (stages 1-2, more than one rank)
     * takes new send and receive buffers, and the host backend's cache, which holds no more
     * than the peak, gives up the backward's gradient buffers for them and them for the next
     * backward's: both are new pages every step (ZT_TRACE: memsets and packing copies at the
     * profile's host_fresh_bytes_per_s, not at the memcpy rate). */
    b->fresh_grads = b->r.host && b->r.fresh > 0 && o->world > 1;
    const char *home = "none";
    zt_act_home(b->rt, &home);
    if (sh->policy == GPT2_FULL && sh->gpt2)
        sh->act_home = !strcmp(home, "cpu") ? 1 : !strcmp(home, "nvme") ? 2 : 0;
    sh->act_staged = (int)cfg->act_offload.buffer_count;
    return 0;
}

/* When the prefetch window issues each fetch's gather and whether it moves anything: the
 * runtime's replay with the window's and the keeping's own rules (zt_sched_window,
 * zt_sched_keep) under the configuration's device budget, or with no limit where there is
 * none (cuda without hbm_capacity) or the steps do not fit it (a verdict est_estimate leaves to
 * its caller: then nothing is evicted). NULL with the cause in err when it fails. */
static zt_est_issue *window_issues(const est_model *m, const zt_estimate *e, int micro, char *err,
                                   size_t len)
{
    size_t n = (size_t)m->n_events * (size_t)micro;
    zt_est_issue *issue = malloc((n ? n : 1) * sizeof *issue);
    if (!issue)
        return snprintf(err, len, "out of memory building the step model"), NULL;
    uint64_t cap = e->device_capacity ? e->device_capacity : UINT64_MAX;
    zt_status st = zt_rt_prefetch_issues(m->rt, &e->plan, cap, m->events, m->n_events, PLAN_STEPS,
                                         micro, issue);
    if (st == ZT_ERR_DEVICE_NOMEM && cap != UINT64_MAX)
        st = zt_rt_prefetch_issues(m->rt, &e->plan, UINT64_MAX, m->events, m->n_events, PLAN_STEPS,
                                   micro, issue);
    if (st != ZT_OK) {
        snprintf(err, len, "replaying the prefetch window: %s", zt_last_error(m->rt));
        free(issue);
        return NULL;
    }
    return issue;
}

/* busy[res]: the seconds of each resource's tasks that fall within [t0, t1]. */
static void window_busy(const zt_stepmodel *sm, double t0, double t1, double busy[ZT_SM_NRES])
{
    for (int i = 0; i < ZT_SM_NRES; i++)
        busy[i] = 0;
    for (int i = 0; i < sm->n; i++) {
        double a = sm->task[i].start > t0 ? sm->task[i].start : t0;
        double e = sm->task[i].end < t1 ? sm->task[i].end : t1;
        busy[sm->task[i].res] += e > a ? e - a : 0;
    }
}

int cmd_plan(int argc, char **argv)
{
    static const char *const known[] = {"config",
                                        "vocab",
                                        "layers",
                                        "world",
                                        "ranks-per-node",
                                        "ds-config",
                                        "device-memory",
                                        "stage",
                                        "batch",
                                        "seq",
                                        "profile",
                                        "svg",
                                        "trace",
                                        "host-memory",
                                        "nvme-memory",
                                        "nvme-path",
                                        "checkpoint-activations",
                                        NULL};
    static const char *const flags[] = {"json", "search", NULL};
    est_options o;
    const char *profile = bench_arg(argc, argv, "profile");
    const char *svg = bench_arg(argc, argv, "svg"), *trace = bench_arg(argc, argv, "trace");
    if (trace && !profile && bench_check_args(argc, argv, known, flags) == 0) {
        char terr[1200]; /* a measured step alone: no model arguments needed */
        if (plan_picture(svg, trace, NULL, 0, 0, bench_flag(argc, argv, "json"), terr,
                         sizeof terr) == 0)
            return 0;
        fprintf(stderr, "ztier plan: %s\n", terr);
        return 1;
    }
    if (bench_check_args(argc, argv, known, flags) != 0 || est_parse(argc, argv, &o) != 0 ||
        !profile) {
        fprintf(stderr, "usage: ztier plan <the model arguments of ztier estimate> --profile "
                        "machine.json [--checkpoint-activations none|selective|full] [--json]\n"
                        "       [--svg step.svg] [--trace run.json]\n"
                        "       ztier plan --trace run.json [--svg step.svg] [--json]\n"
                        "       ztier plan <model arguments> --profile machine.json --search "
                        "[--host-memory SIZE] [--nvme-memory SIZE] [--nvme-path DIR] [--json]\n");
        return 2;
    }
    if (bench_flag(argc, argv, "search"))
        return plan_search(argc, argv, &o, profile);
    const char *policy = bench_arg(argc, argv, "checkpoint-activations");
    char err[1200];
    builder b = {0};
    est_model m = {0};
    zt_estimate e;
    int rc = read_profile(profile, o.world, &b.r, err, sizeof err);
    if (rc == 0)
        rc = est_estimate(&o, NULL, NULL, 0, &m, &e, err, sizeof err);
    /* a --layers file without an "order": the calls its registration declares, as the replay
       took them */
    if (rc == 0 && !m.events && !(m.events = zt_rt_registered_order(m.rt, &m.n_events))) {
        snprintf(err, sizeof err, "out of memory building the step model");
        rc = -1;
    }
    char path[2048] = "";
    zt_sm_result r;
    double tokens_step = 0;
    int step_end[PLAN_STEPS], micro = 1;
    if (rc == 0) {
        micro =
            m.rt->cfg.gradient_accumulation_steps > 0 ? m.rt->cfg.gradient_accumulation_steps : 1;
        b.rt = m.rt, b.plan = &e.plan, b.world = o.world;
        b.tokens = o.batch ? (double)o.batch / o.world * o.seq : 1;
        rc = model_setup(&b, &o, policy, err, sizeof err);
    }
    if (rc == 0) {
        tokens_step = o.batch ? (double)o.batch * o.seq * micro : 0;
        if (!(b.issue = window_issues(&m, &e, micro, err, sizeof err))) {
            rc = -1;
        } else if (build_steps(&b, &m, micro, step_end) != 0) {
            snprintf(err, sizeof err, "out of memory building the step model");
            rc = -1;
        }
    }
    if (rc == 0) {
        zt_sm_run(&b.sm, &r);
        /* the last step alone: from the end of the one before to its own end, each
           resource's busy time the part of its tasks within that window (as --svg draws it) */
        double t0 = b.sm.task[step_end[PLAN_STEPS - 2]].end;
        r.step = b.sm.task[step_end[PLAN_STEPS - 1]].end - t0;
        window_busy(&b.sm, t0, t0 + r.step, r.busy);
        r.last = step_end[PLAN_STEPS - 1];
        zt_sm_critical(&b.sm, &r, b.sm.task[step_end[PLAN_STEPS - 2]].end, path, sizeof path);
        zt_sm_bound(&b.sm, &r, b.sm.task[step_end[PLAN_STEPS - 2]].end, b.bound, sizeof b.bound);
        r.stall = r.step > r.busy[ZT_SM_COMPUTE] ? r.step - r.busy[ZT_SM_COMPUTE] : 0;

        double u = mfu(&b, &o, tokens_step, r.step);
        if (o.json)
            print_json(&b, &r, tokens_step, u, path);
        else
            print_text(&b, &r, tokens_step, u, path);
        if ((svg || trace) &&
            plan_picture(svg, trace, &b.sm, b.sm.task[step_end[PLAN_STEPS - 2]].end,
                         b.sm.task[step_end[PLAN_STEPS - 1]].end, o.json, err, sizeof err) != 0) {
            fprintf(stderr, "ztier plan: %s\n", err);
            rc = -1;
        }
    } else {
        fprintf(stderr, "ztier plan: %s\n", err);
    }
    zt_sm_free(&b.sm);
    free(b.ready), free(b.used), free(b.updated), free(b.call_after);
    free(b.uses), free(b.act_saved), free(b.pending), free(b.zeroed);
    free(b.upd_caller);
    free(b.issue);
    json_decref(b.r.compute);
    plan_gemms_free(&b.gm);
    if (m.rt)
        est_free_model(&m);
    return rc == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/* The replay behind zt_rt_estimate: a model of the device memory of each layer's gather
 * pipeline (gather.c), fetch and release (layer_exec.c) and step (step.c), driven by the
 * same trace and scheduler decisions as the runtime. What it models, per layer: the gathered
 * buffer (allocated when its gather starts, freed when dropped), qwZ's transfer buffers (from
 * its all-gather to its end), the gradient buffer of a backward pass, and what a release
 * takes for the sum over ranks: the fp32 copy of 16-bit gradients and qgZ's buffers; for
 * stages 1 and 2, the replicas are resident (in the plan), and qwZ's buffers of their gathers
 * or the buffers of a bucketed all-gather are held from the step that issues them to the
 * fetch of a layer in it; under several ranks, released gradients held in a reduction bucket
 * until it closes, and the step's bucket buffers from its first bucket to the step. Not
 * modelled: hpZ's secondary slices (ZeRO++), which the runtime only keeps where room is, and
 * the buffers of reductions left in flight (their gradients, freed as they complete). */
#include "runtime/estimate.h"
#include "runtime/config_batch.h"
#include "prefetch/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_layer {
    int64_t numel;
    int persistent;
    int gathered, stages_left; /* stages_left: window moves until ready (0: ready) */
    int holds[3];
    int grads;
    uint64_t qwz_bytes;    /* qwZ's transfer buffers (0: not used) */
    int qgz;               /* its gradients are reduced by qgZ */
    int qwz_held;          /* qwZ's buffers are allocated */
    int advancing;         /* its own allocation is being made: not evictable */
    int replicated;        /* stages 1 and 2: a resident replica, all-gathered after the step */
    int local;             /* stage 1: its micro-steps summed in resident fp32 (no widening) */
    int stale;             /* ... not gathered since the parameters last changed */
    int bucket_of;         /* in a bucketed all-gather: its first layer; else -1 */
    uint64_t bucket_bytes; /* the first layer of a bucket: its buffers */
    int held;              /* in the open reduction bucket: 1, 2 with its gradients */
    int local_count;       /* stage 1: micro-steps in its own sums */
    int at[ZT_EST_STAGES]; /* the call that issued each stage of its gather since its last fetch */
} sim_layer;

typedef struct sim {
    const zt_runtime *rt;
    zt_sched_limits lim;
    sim_layer *layers;
    zt_sched_layer *view;
    int n;
    zt_layer_order trace;
    uint64_t ds, current, peak, capacity, evictions;
    /* qgZ's buffers (runtime/reduce.c): made at the step's first qgZ release for the largest
     * layer (qgz_bytes, 0 without qgZ), held until the step */
    uint64_t qgz_bytes;
    int qgz_made;
    int world, nvme_params;
    int wide_sums;        /* 16-bit gradients widened for fp32 sums (communication_data_type) */
    int64_t bucket_elems; /* allgather_bucket_size; 0: no buckets (one rank, qwZ) */
    /* reduction buckets (runtime/reduce.c; several ranks): the open one's layers in release
     * order, its elements and kind; the step's bucket buffers (pack_bytes; made: tried) */
    int *open, n_open, open_allreduce;
    int64_t open_elems;
    uint64_t pack_bytes;
    int packs_made, packs_held;
    int micro_steps;            /* per step */
    char tight[ZT_ORDER_TIGHT]; /* a failed replay: where the budget ran out */
    /* zt_rt_prefetch_issues: the call being replayed (ZT_EST_STEP_START in zt_step) and, in
     * the last step, each fetch's stages (NULL: not recorded) */
    int call;
    zt_est_issue *issues;
} sim;

static int holds(const sim_layer *L) { return L->holds[0] + L->holds[1] + L->holds[2]; }

static const zt_sched_layer *snapshot(sim *s)
{
    for (int i = 0; i < s->n; i++) {
        const sim_layer *L = &s->layers[i];
        s->view[i] = (zt_sched_layer){L->numel, L->persistent, L->gathered,
                                      L->gathered && L->stages_left == 0, holds(L) + L->advancing};
    }
    return s->view;
}

/* The gather's stage k (0: its start) is issued by the call being replayed. */
static void issued(const sim *s, sim_layer *L, int k)
{
    if (k == 0)
        for (int i = 1; i < ZT_EST_STAGES; i++)
            L->at[i] = ZT_EST_NOT_ISSUED;
    if (k < ZT_EST_STAGES)
        L->at[k] = s->call;
}

static uint64_t gathered_bytes(const sim *s, const sim_layer *L)
{
    return L->persistent ? 0 : (uint64_t)L->numel * s->ds;
}

static void free_qwz(sim *s, sim_layer *L)
{
    if (L->qwz_held)
        s->current -= L->qwz_bytes;
    L->qwz_held = 0;
}

static void drop(sim *s, sim_layer *L)
{
    if (!L->gathered || L->persistent)
        return;
    free_qwz(s, L);
    s->current -= gathered_bytes(s, L);
    L->gathered = 0, L->stages_left = 0;
}

/* The bucket that layer `first` starts is done: its buffers go. */
static void end_bucket(sim *s, int first)
{
    s->current -= s->layers[first].bucket_bytes;
    s->layers[first].bucket_bytes = 0;
    for (int i = first; i < s->n && s->layers[i].bucket_of == first; i++)
        s->layers[i].bucket_of = -1;
}

/* A bucket still in flight ended to make room (the runtime's evictor does so), 1; else 0. */
static int end_any_bucket(sim *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->layers[i].bucket_bytes) {
            end_bucket(s, i);
            return 1;
        }
    return 0;
}

/* Device allocation; with `evict`, frees the unheld layer needed furthest away until the
 * bytes fit (zt_device_alloc_evicting). 0 when they cannot. */
static int alloc(sim *s, uint64_t bytes, int evict)
{
    while (s->current + bytes > s->capacity) {
        if (evict && end_any_bucket(s))
            continue;
        int victim = evict ? zt_sched_victim(&s->trace, snapshot(s), s->n) : -1;
        if (victim < 0)
            return 0;
        drop(s, &s->layers[victim]);
        s->evictions++;
    }
    s->current += bytes;
    if (s->current > s->peak)
        s->peak = s->current;
    return 1;
}

/* The gather is done: qwZ's buffers go. */
static void become_ready(sim *s, sim_layer *L)
{
    L->stages_left = 0;
    free_qwz(s, L);
}

/* One stage of the gather pipeline: the start allocates the full buffer; then READING (an
 * NVMe home), COPYING and COMM (several ranks, or an NVMe home) precede READY. qwZ's buffers
 * are allocated as COPYING moves to COMM (a prefetch without room waits in COPYING). */
static int advance(sim *s, sim_layer *L, int evict)
{
    if (L->persistent) {
        L->gathered = 1, L->stages_left = 0;
        return 1;
    }
    if (!L->gathered) {
        if (!alloc(s, gathered_bytes(s, L), evict))
            return 0;
        L->gathered = 1;
        /* a single rank's copied shard is ready at once (gather.c: nothing to gather) */
        L->stages_left = s->nvme_params ? 3 : s->world == 1 ? 1 : 2;
        issued(s, L, 0);
        return 1;
    }
    if (L->stages_left == 2 && L->qwz_bytes && !L->qwz_held) {
        L->advancing = 1;
        int ok = alloc(s, L->qwz_bytes, evict);
        L->advancing = 0;
        if (!ok)
            return 0;
        L->qwz_held = 1;
    }
    if (L->stages_left > 0) /* the next stage, counted from the start's */
        issued(s, L, (s->nvme_params ? 3 : s->world == 1 ? 1 : 2) - L->stages_left + 1);
    if (L->stages_left > 0 && --L->stages_left == 0)
        become_ready(s, L);
    return 1;
}

/* The gather's collective is in flight (COMM): the last stage, where there is a collective
 * (several ranks, or an NVMe home's staged shard). */
static int in_comm(const sim *s, const sim_layer *L)
{
    return L->gathered && L->stages_left == 1 && (s->world > 1 || s->nvme_params);
}

static void move_window(sim *s, int current)
{
    int ids[ZT_SCHED_LOOKAHEAD];
    int k =
        zt_sched_window(&s->lim, &s->trace, snapshot(s), s->n, current, ids, ZT_SCHED_LOOKAHEAD);
    for (int i = 0; i < k; i++)              /* a prefetch that does not fit is cancelled; one in */
        if (!in_comm(s, &s->layers[ids[i]])) /* flight is completed by its fetch */
            advance(s, &s->layers[ids[i]], 0);
}

static int fetch(sim *s, int id, zt_pass pass)
{
    sim_layer *L = &s->layers[id];
    int training = pass != ZT_INFERENCE;
    if (training) {
        int was_valid = s->trace.valid && !s->trace.deviated;
        if (zt_layer_order_observe(&s->trace, id, pass) == 0 && was_valid)
            for (int i = 0; i < s->n; i++) /* a changed order drops the window */
                if (i != id && !holds(&s->layers[i]))
                    drop(s, &s->layers[i]);
    }
    while (!(L->gathered && L->stages_left <= 1))
        if (!advance(s, L, 1))
            return 0;
    if (training && s->trace.valid && !s->trace.deviated)
        move_window(s, id);
    if (L->bucket_of >= 0) /* its bucket's all-gather completes */
        end_bucket(s, L->bucket_of);
    if (L->stale && L->qwz_bytes) { /* the replica's gather at its fetch, qwZ's buffers too */
        L->advancing = 1;
        int ok = alloc(s, L->qwz_bytes, 1);
        L->advancing = 0;
        if (!ok)
            return 0;
        L->qwz_held = 1;
    }
    L->stale = 0;
    become_ready(s, L);
    if (s->issues && s->call >= 0) /* what this fetch's gather was issued at; then none */
        memcpy(s->issues[s->call].at, L->at, sizeof L->at);
    for (int k = 0; k < ZT_EST_STAGES; k++)
        L->at[k] = ZT_EST_NOT_ISSUED;
    L->holds[pass]++;
    if (pass == ZT_BACKWARD && !L->grads) {
        if (!alloc(s, (uint64_t)L->numel * s->ds, 1))
            return 0;
        L->grads = 1;
    }
    return 1;
}

/* One held release summed on its own: 16-bit gradients widened first where the sums are fp32
 * (communication_data_type "fp32"). */
static int reduce_held(sim *s, int id)
{
    sim_layer *L = &s->layers[id];
    uint64_t wide = s->wide_sums && L->held == 2 ? (uint64_t)L->numel * 4 : 0;
    if (!alloc(s, wide, 1))
        return 0;
    s->current -= wide;
    if (L->held == 2)
        s->current -= (uint64_t)L->numel * s->ds;
    L->held = 0;
    return 1;
}

/* The open bucket's collective: packed into the step's bucket buffers (made at its first, if
 * they fit), its gradients freed; else, or alone, each release on its own. */
static int close_bucket(sim *s)
{
    int n = s->n_open;
    s->n_open = 0, s->open_elems = 0;
    if (n > 1 && !s->packs_made) {
        s->packs_made = 1;
        s->packs_held = alloc(s, s->pack_bytes, 1);
    }
    for (int i = 0; i < n; i++) {
        sim_layer *L = &s->layers[s->open[i]];
        if (n > 1 && s->packs_held) {
            s->current -= L->held == 2 ? (uint64_t)L->numel * s->ds : 0;
            L->held = 0;
        } else if (!reduce_held(s, s->open[i])) {
            return 0;
        }
    }
    return 1;
}

/* Layer id's gradients (its own: owned) held in the open bucket, closed first when the layer
 * would take it past reduce_bucket_size, when it holds the layer or the other kind of
 * collective's, and after when it reaches the size (runtime/reduce.c's hold). */
static int hold(sim *s, int id, int owned)
{
    sim_layer *L = &s->layers[id];
    int64_t size = s->rt->cfg.reduce_bucket_size;
    int allreduce = L->persistent && !L->replicated;
    if (s->n_open &&
        (L->held || s->open_allreduce != allreduce || s->open_elems + L->numel > size) &&
        !close_bucket(s))
        return 0;
    s->open[s->n_open++] = id;
    s->open_elems += L->numel;
    s->open_allreduce = allreduce;
    L->held = owned ? 2 : 1;
    return s->open_elems >= size ? close_bucket(s) : 1;
}

/* A backward pass ends: its gradients summed over ranks, held for a bucket (several ranks, no
 * qgZ; a stage-1 layer's own sums at the step's last micro-step), or at once: 16-bit ones
 * widened for qgZ or an fp32 sum, then qgZ's head and this release's slot, grown to this layer's (kept
 * until the step). */
static int release_grads(sim *s, int id)
{
    sim_layer *L = &s->layers[id];
    uint64_t grads = (uint64_t)L->numel * s->ds;
    L->grads = 0;
    if (s->pack_bytes && !L->qgz && !L->local)
        return hold(s, id, 1);
    if (L->local) { /* added to its own sums: those are held at the last micro-step */
        s->current -= grads;
        return ++L->local_count < s->micro_steps || (L->local_count = 0, hold(s, id, 0));
    }
    uint64_t wide =
        s->ds != 4 && s->world > 1 && (L->qgz || s->wide_sums) ? (uint64_t)L->numel * 4 : 0;
    if (!alloc(s, wide, 1))
        return 0;
    if (L->qgz && !s->qgz_made) {
        if (!alloc(s, s->qgz_bytes, 1))
            return 0;
        s->qgz_made = 1;
    }
    s->current -= wide + grads;
    return 1;
}

static int release(sim *s, int id, zt_pass pass)
{
    sim_layer *L = &s->layers[id];
    if (L->holds[pass] == 0)
        return -1; /* not fetched for that pass */
    L->holds[pass]--;
    if (pass == ZT_BACKWARD && L->holds[ZT_BACKWARD] == 0 && !release_grads(s, id))
        return 0;
    if (!holds(L) && !zt_sched_keep(&s->lim, &s->trace, snapshot(s), s->n, id))
        drop(s, L);
    return 1;
}

/* Consecutive stale replicas packed into all-gathers of at most bucket_elems partition
 * elements, each with its buffers (a partition's bytes and the ranks' of them) if they fit
 * without evicting (prefetch.c's bucket_replicas). */
static void bucket_replicas(sim *s)
{
    if (s->bucket_elems <= 0)
        return;
    for (int i = 0; i < s->n;) {
        int k = 0;
        int64_t elems = 0;
        while (i + k < s->n && s->layers[i + k].stale &&
               (k == 0 || elems + s->layers[i + k].numel / s->world <= s->bucket_elems))
            elems += s->layers[i + k++].numel / s->world;
        uint64_t bytes = (uint64_t)elems * s->ds * (uint64_t)(s->world + 1);
        if (k > 1 && alloc(s, bytes, 0)) {
            s->layers[i].bucket_bytes = bytes;
            for (int j = i; j < i + k; j++)
                s->layers[j].bucket_of = i, s->layers[j].stale = 0;
        }
        i += k > 0 ? k : 1;
    }
}

static int step(sim *s)
{
    if (!close_bucket(s)) /* the step's last bucket, then its buffers go */
        return 0;
    if (s->packs_held)
        s->current -= s->pack_bytes;
    s->packs_made = s->packs_held = 0;
    if (s->qgz_made)
        s->current -= s->qgz_bytes;
    s->qgz_made = 0;
    for (int i = 0; i < s->n; i++)
        if (!holds(&s->layers[i]))
            drop(s, &s->layers[i]);
    zt_layer_order_end_step(&s->trace);
    for (int i = 0; i < s->n; i++)
        s->layers[i].stale = s->layers[i].replicated;
    bucket_replicas(s);
    for (int i = 0; i < s->n; i++) { /* the other replicas' gathers, in layer order */
        sim_layer *L = &s->layers[i];
        if (!L->stale)
            continue;
        if (!L->qwz_bytes || alloc(s, L->qwz_bytes, 0)) /* none: left to the fetch */
            L->stale = 0, L->qwz_held = L->qwz_bytes > 0;
    }
    move_window(s, -1);
    return 1;
}

/* The call that found no room and the layers held then (besides its own). */
static void describe_tight(sim *s, const zt_est_event *e)
{
    static const char *const passes[] = {"forward", "backward", "inference"};
    const zt_layer *layers = s->rt->reg.layers;
    size_t len = sizeof s->tight;
    int at = snprintf(s->tight, len, "the %s %s of layer '%s'", passes[e->pass],
                      e->release ? "release" : "fetch", layers[e->layer].name);
    int listed = 0;
    for (int i = 0; i < s->n && at > 0 && (size_t)at < len; i++) {
        const sim_layer *L = &s->layers[i];
        if (i != e->layer && holds(L))
            at += snprintf(s->tight + at, len - (size_t)at, "%s'%s' (%s)",
                           listed++ ? ", " : " with ", layers[i].name,
                           passes[L->holds[ZT_BACKWARD]  ? ZT_BACKWARD
                                  : L->holds[ZT_FORWARD] ? ZT_FORWARD
                                                         : ZT_INFERENCE]);
    }
    if (at > 0 && (size_t)at < len)
        snprintf(s->tight + at, len - (size_t)at, listed ? " held" : " with no other layer held");
}

static zt_status replay(zt_runtime *rt, sim *s, const zt_est_event *ev, int n, int steps,
                        zt_est_issue *issues)
{
    for (int t = 0; t < steps; t++) {
        s->issues = t == steps - 1 ? issues : NULL; /* the last step, in steady state */
        for (int m = 0; m < s->micro_steps; m++)
            for (int i = 0; i < n; i++) {
                s->call = m * n + i;
                int ok = ev[i].release ? release(s, ev[i].layer, ev[i].pass)
                                       : fetch(s, ev[i].layer, ev[i].pass);
                if (ok < 0)
                    return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                                  "estimate: event %d releases layer '%s', which is not "
                                  "fetched for that pass",
                                  i, rt->reg.layers[ev[i].layer].name);
                if (ok == 0) {
                    describe_tight(s, &ev[i]);
                    return ZT_ERR(&rt->err, ZT_ERR_DEVICE_NOMEM,
                                  "estimate: event %d, %s, does not fit the device budget", i,
                                  s->tight);
                }
            }
        s->call = ZT_EST_STEP_START;
        if (!step(s)) {
            snprintf(s->tight, sizeof s->tight, "the step's last gradient bucket");
            return ZT_ERR(&rt->err, ZT_ERR_DEVICE_NOMEM,
                          "estimate: the step's last gradient bucket does not fit the device "
                          "budget");
        }
    }
    return ZT_OK;
}

static zt_status simulate_issues(zt_runtime *rt, const zt_plan *plan, uint64_t capacity,
                                 const zt_est_event *ev, int n, int steps, int micro_steps, sim *s,
                                 zt_est_issue *issues)
{
    memset(s, 0, sizeof *s);
    s->rt = rt;
    s->n = rt->reg.n_layers;
    s->micro_steps = micro_steps;
    s->lim =
        (zt_sched_limits){rt->cfg.stage3_prefetch_bucket_size, rt->cfg.stage3_max_live_parameters,
                          rt->cfg.stage3_max_reuse_distance};
    s->ds = zt_dtype_size(plan->dtype);
    s->world = plan->world;
    s->wide_sums = s->ds != 4 && zt_config_reduce_dtype(&rt->cfg, plan->dtype) == ZT_F32;
    s->nvme_params = plan->param_tier == ZT_TIER_NVME;
    /* an overlapped step leaves each update, and so the replica's gather, to its fetch */
    int overlapped = plan->optim_tier == ZT_TIER_NVME ? rt->cfg.overlap_step != ZT_OVERLAP_OFF
                                                      : plan->optim_tier == ZT_TIER_HOST &&
                                                            rt->cfg.overlap_step == ZT_OVERLAP_ON;
    s->bucket_elems = plan->world > 1 && !rt->cfg.zero_quantized_weights && !overlapped
                          ? rt->cfg.allgather_bucket_size
                          : 0;
    s->capacity = capacity;
    s->current = s->peak = plan->device_resident;
    int slots = 0;
    s->pack_bytes = (uint64_t)zt_plan_bucket_elems(rt, plan->world, &slots) * 4 * (uint64_t)slots;
    s->layers = calloc((size_t)s->n, sizeof *s->layers);
    s->view = calloc((size_t)s->n, sizeof *s->view);
    s->open = calloc((size_t)s->n + 1, sizeof *s->open);
    zt_status st = s->layers && s->view && s->open
                       ? ZT_OK
                       : ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory estimating");
    for (int i = 0; st == ZT_OK && i < s->n; i++) {
        const zt_layer *L = &rt->reg.layers[i];
        s->layers[i] = (sim_layer){.numel = L->flat_numel,
                                   .persistent = L->persistent || L->replicated,
                                   .replicated = L->replicated,
                                   .local = zt_plan_local_sums(rt, plan, L),
                                   .stale = L->replicated,
                                   .bucket_of = -1,
                                   .at = {ZT_EST_NOT_ISSUED, ZT_EST_NOT_ISSUED, ZT_EST_NOT_ISSUED},
                                   .qwz_bytes = zt_plan_qwz_bytes(rt, plan, L),
                                   .qgz = zt_plan_uses_qgz(rt, plan, L)};
    }
    s->qgz_bytes = zt_plan_qgz_bytes(rt, plan);
    if (st == ZT_OK)
        st = replay(rt, s, ev, n, steps, issues);
    free(s->layers), free(s->view), free(s->open);
    zt_layer_order_free(&s->trace);
    return st;
}

static zt_status simulate(zt_runtime *rt, const zt_plan *plan, uint64_t capacity,
                          const zt_est_event *ev, int n, int steps, int micro_steps, sim *s)
{
    return simulate_issues(rt, plan, capacity, ev, n, steps, micro_steps, s, NULL);
}

zt_status zt_rt_prefetch_issues(zt_runtime *rt, const zt_plan *plan, uint64_t capacity,
                                const zt_est_event *ev, int n, int steps, int micro_steps,
                                zt_est_issue *out)
{
    for (int i = 0; i < n * micro_steps; i++)
        for (int k = 0; k < ZT_EST_STAGES; k++)
            out[i].at[k] = ZT_EST_NOT_ISSUED;
    sim s;
    return simulate_issues(rt, plan, capacity, ev, n, steps, micro_steps, &s, out);
}

static void add(zt_est_event *ev, int *n, int layer, zt_pass pass, int release)
{
    ev[(*n)++] = (zt_est_event){layer, pass, release};
}

zt_est_event *zt_rt_registered_order(const zt_runtime *rt, int *n)
{
    int layers = rt->reg.n_layers;
    const zt_layer *L = rt->reg.layers;
    zt_est_event *ev = calloc(8 * (size_t)(layers ? layers : 1), sizeof *ev); /* ties: twice */
    *n = 0;
    for (int l = 0; ev && l < layers; l++) {
        add(ev, n, l, ZT_FORWARD, 0), add(ev, n, l, ZT_FORWARD, 1);
        for (int t = 0; t < layers; t++) /* the second use of layers tied after l */
            if (L[t].tied_after == l)
                add(ev, n, t, ZT_FORWARD, 0), add(ev, n, t, ZT_FORWARD, 1);
    }
    for (int l = layers - 1; ev && l >= 0; l--) {
        for (int t = 0; t < layers; t++) /* held from here to their own backward */
            if (L[t].tied_after == l)
                add(ev, n, t, ZT_BACKWARD, 0);
        if (L[l].tied_after < 0)
            add(ev, n, l, ZT_BACKWARD, 0);
        add(ev, n, l, ZT_BACKWARD, 1);
    }
    return ev;
}

zt_status zt_rt_order_need(zt_runtime *rt, const zt_plan *plan, const zt_est_event *ev, int n,
                           int steps, int micro_steps, zt_order_need *out)
{
    memset(out, 0, sizeof *out);
    sim s;
    zt_status st = simulate(rt, plan, UINT64_MAX, ev, n, steps, micro_steps, &s);
    if (st != ZT_OK)
        return st;
    out->window = s.peak;
    /* a bisection between the plan's minimum (a lower bound: one layer's backward pass) and
     * the unbounded peak (enough), replays being cheap */
    zt_error saved = rt->err;
    uint64_t lo = plan->device_min, hi = s.peak;
    if (simulate(rt, plan, lo, ev, n, steps, micro_steps, &s) == ZT_OK)
        hi = lo;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (simulate(rt, plan, mid, ev, n, steps, micro_steps, &s) == ZT_OK)
            hi = mid;
        else
            lo = mid;
    }
    out->min = hi;
    /* layers held together need more than the plan's minimum: say where a byte less fails */
    if (hi > plan->device_min &&
        simulate(rt, plan, hi - 1, ev, n, steps, micro_steps, &s) == ZT_ERR_DEVICE_NOMEM)
        memcpy(out->tight, s.tight, sizeof out->tight);
    rt->err = saved;
    return ZT_OK;
}

zt_status zt_rt_estimate(zt_runtime *rt, int world, uint64_t device_capacity,
                         const zt_est_event *events, int n, int steps, zt_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (rt->reg.n_layers == 0)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE, "estimate: no layers registered");
    zt_est_event *own = NULL;
    if (!events && !(events = own = zt_rt_registered_order(rt, &n)))
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory estimating");
    for (int i = 0; i < n; i++)
        if (events[i].layer < 0 || events[i].layer >= rt->reg.n_layers)
            return free(own),
                   ZT_ERR(&rt->err, ZT_ERR_ARGUMENT, "estimate: event %d names layer %d of %d", i,
                          events[i].layer, rt->reg.n_layers);
    zt_rt_resolve_model_autos(rt); /* the "auto" sizes commit would give */
    zt_plan_layout(rt, world);
    zt_plan_make(rt, world, &out->plan);
    out->device_capacity = device_capacity;
    /* the accumulation commit derives for `world` ranks (DeepSpeed's batch rules), not the
     * configured one: train_batch_size / (micro x world) where it is left out */
    zt_batch_sizes batch;
    zt_status st = zt_config_batch_sizes(&rt->cfg, world, &batch, &rt->err);
    if (st != ZT_OK)
        return free(own), st;
    int accum = batch.accumulation;
    zt_order_need need;
    st = zt_rt_order_need(rt, &out->plan, events, n, steps, accum, &need);
    zt_rt_act_estimate(rt, &out->act_layers, &out->act_home, &out->act_device_min,
                       &out->act_device_max);
    need.min += out->act_device_min;
    need.window += out->act_device_max;
    out->device_window = need.window;
    out->device_min_order = need.min;
    memcpy(out->tight, need.tight, sizeof out->tight);
    if (st == ZT_OK && device_capacity < need.min)
        st = ZT_ERR(&rt->err, ZT_ERR_DEVICE_NOMEM,
                    "estimate: the device budget of %llu bytes is below the %llu bytes these "
                    "steps need at least (%llu for layer '%s' in its backward pass alone%s%s)",
                    (unsigned long long)device_capacity, (unsigned long long)need.min,
                    (unsigned long long)out->plan.device_min, out->plan.device_min_layer,
                    need.tight[0] ? "; a byte less runs out at " : "", need.tight);
    sim s;
    if (st == ZT_OK)
        st = simulate(rt, &out->plan, device_capacity, events, n, steps, accum, &s);
    if (st == ZT_OK) {
        out->runs = 1;
        /* the store's read-ahead takes only free room */
        out->device_peak = s.peak + out->act_device_max < device_capacity
                               ? s.peak + out->act_device_max
                               : device_capacity;
        out->evictions = steps > 0 ? s.evictions / (uint64_t)steps : 0;
    }
    free(own);
    return st;
}

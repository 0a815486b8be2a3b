/* SPDX-License-Identifier: MIT */
#include "prefetch/prefetch.h"
#include "core/log.h"

#include <stdlib.h>

struct zt_prefetcher {
    zt_sched_limits lim;
    zt_gather_env *env;
    int n;
    zt_gather *gathers;
    int (*holds)[3];      /* per layer and pass */
    zt_sched_layer *view; /* the scheduler's view, refreshed before each decision */
    zt_layer_order trace;
    zt_prefetch_stats stats;
    int order_warned; /* the first change of order was a warning; later ones are info */
};

static int held(const zt_prefetcher *pf, int i)
{
    return pf->holds[i][ZT_FORWARD] + pf->holds[i][ZT_BACKWARD] + pf->holds[i][ZT_INFERENCE];
}

static const zt_sched_layer *snapshot(zt_prefetcher *pf)
{
    for (int i = 0; i < pf->n; i++) {
        const zt_gather *g = &pf->gathers[i];
        /* a layer in mid-advance counts as held: its own allocations cannot evict it */
        /* a replica is resident, like a persistent layer: never windowed, kept or evicted */
        pf->view[i] = (zt_sched_layer){g->flat_numel, g->persistent || g->replica != NULL,
                                       g->state != ZT_GATHER_NONE, g->state == ZT_GATHER_READY,
                                       held(pf, i) + g->advancing};
    }
    return pf->view;
}

/* hpZ's slices take only room that is free when they are kept, and give it back first: the
 * slice of the lowest layer (the last the backward pass gathers) that no gather reads now.
 * Gathered layers are then evicted as if the slices had never been kept, which is what
 * `ztier estimate` replays. 0 when there is none. */
static int evict_slice(zt_prefetcher *pf)
{
    for (int i = 0; i < pf->n; i++) {
        zt_gather *g = &pf->gathers[i];
        if (g->secondary && !g->from_secondary) {
            ZT_LOGD("prefetch", "dropping hpZ's slice of layer '%s' to make room", g->name);
            zt_gather_release_secondary(g, pf->env);
            pf->stats.slices_dropped++;
            return 1;
        }
    }
    return 0;
}

/* Completes the bucketed all-gather layer i is in (the buffers go), if any; a failure leaves
 * its layers to be gathered again (the error is the caller's, or logged with NULL). */
static zt_status finish_bucket(zt_prefetcher *pf, int i, zt_error *err)
{
    zt_gather_bucket *b = pf->gathers[i].bucket;
    if (!b)
        return ZT_OK;
    zt_error local = {0};
    zt_status st = zt_gather_bucket_finish(b, pf->env, err ? err : &local);
    if (st != ZT_OK && !err)
        ZT_LOGD("prefetch", "bucketed all-gather of replicas: %s", local.msg);
    return st;
}

static int finish_any_bucket(zt_prefetcher *pf)
{
    for (int i = 0; i < pf->n; i++)
        if (pf->gathers[i].bucket) {
            finish_bucket(pf, i, NULL);
            return 1;
        }
    return 0;
}

/* The device tier's evictor: memory held by work in flight (which the estimate counts as
 * free already), else an hpZ slice, else the unheld gathered layer needed furthest away. */
static int evict_one(void *user)
{
    zt_prefetcher *pf = user;
    if (pf->env->reclaim && pf->env->reclaim(pf->env->reclaim_ctx))
        return 1;
    if (finish_any_bucket(pf)) /* a bucket's buffers, freed at its first fetch anyway */
        return 1;
    if (evict_slice(pf))
        return 1;
    int victim = zt_sched_victim(&pf->trace, snapshot(pf), pf->n);
    if (victim < 0)
        return 0;
    ZT_LOGD("prefetch", "evicting gathered layer '%s' to make room", pf->gathers[victim].name);
    zt_gather_drop(&pf->gathers[victim], pf->env);
    pf->stats.evictions++;
    return 1;
}

zt_status zt_prefetcher_create(const zt_sched_limits *lim, zt_gather_env *env, int n_layers,
                               zt_prefetcher **out, zt_error *err)
{
    zt_prefetcher *pf = calloc(1, sizeof *pf);
    size_t n = (size_t)(n_layers > 0 ? n_layers : 1);
    if (pf) {
        pf->gathers = calloc(n, sizeof *pf->gathers);
        pf->holds = calloc(n, sizeof *pf->holds);
        pf->view = calloc(n, sizeof *pf->view);
    }
    if (!pf || !pf->gathers || !pf->holds || !pf->view) {
        if (pf)
            free(pf->gathers), free(pf->holds), free(pf->view);
        free(pf);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for the prefetcher of %d layers", n_layers);
    }
    pf->lim = *lim;
    pf->env = env;
    pf->n = n_layers;
    env->dtier->evict = evict_one;
    env->dtier->evict_user = pf;
    *out = pf;
    return ZT_OK;
}

void zt_prefetcher_destroy(zt_prefetcher *pf)
{
    if (!pf)
        return;
    while (finish_any_bucket(pf))
        ;
    for (int i = 0; i < pf->n; i++)
        zt_gather_fini(&pf->gathers[i], pf->env);
    if (pf->env->dtier->evict_user == pf)
        pf->env->dtier->evict = NULL, pf->env->dtier->evict_user = NULL;
    zt_layer_order_free(&pf->trace);
    free(pf->gathers), free(pf->holds), free(pf->view);
    free(pf);
}

zt_gather *zt_prefetcher_gather(zt_prefetcher *pf, int layer) { return &pf->gathers[layer]; }

/* Moves each layer of the window one stage on, but none whose collective is in flight: its
 * completion is waited for by its own fetch, so the window's later gathers are issued
 * without waiting for earlier ones and several stay in flight together (the comm backend
 * runs them at once). A failure only cancels that layer's prefetch: its own fetch redoes
 * the work and reports the error with its context. */
static void move_window(zt_prefetcher *pf, int current)
{
    int ids[ZT_SCHED_LOOKAHEAD];
    int k = zt_sched_window(&pf->lim, &pf->trace, snapshot(pf), pf->n, current, ids,
                            ZT_SCHED_LOOKAHEAD);
    for (int i = 0; i < k; i++) {
        zt_gather *g = &pf->gathers[ids[i]];
        if (g->state == ZT_GATHER_COMM)
            continue;
        zt_error err = {0};
        int needs_staging;
        if (zt_gather_advance(g, pf->env, 0, &needs_staging, &err) != ZT_OK)
            ZT_LOGD("prefetch", "prefetch of layer '%s' cancelled: %s", g->name, err.msg);
    }
}

/* replicas: the replicated layers' too (their parameters change), else only gathered
 * copies. */
static void drop_unheld(zt_prefetcher *pf, int except, int replicas)
{
    while (replicas && finish_any_bucket(pf))
        ;
    for (int i = 0; i < pf->n; i++) {
        zt_gather *g = &pf->gathers[i];
        if (i != except && !held(pf, i) && g->state != ZT_GATHER_NONE && (replicas || !g->replica))
            zt_gather_drop(g, pf->env);
    }
}

/* Checks a training fetch against the recorded order; a change drops the window. */
static void observe(zt_prefetcher *pf, int layer, zt_pass pass)
{
    int was_valid = pf->trace.valid && !pf->trace.deviated;
    if (zt_layer_order_observe(&pf->trace, layer, pass) != 0 || !was_valid)
        return;
    const char *name = pf->gathers[layer].name, *p = pass == ZT_FORWARD ? "forward" : "backward";
    if (!pf->order_warned)
        ZT_LOGW("prefetch",
                "layer order changed: fetch of '%s' (%s) at call %d of the step differs from the "
                "recorded order; prefetching pauses and the order is re-recorded this step. An "
                "evaluation pass fetches with ZT_INFERENCE, which is never recorded; later "
                "changes are logged at info level and counted in zt_stats.trace_deviations",
                name, p, pf->trace.next_n);
    else
        ZT_LOGI("prefetch",
                "layer order changed: fetch of '%s' (%s) at call %d of the step differs from the "
                "recorded order; re-recorded this step",
                name, p, pf->trace.next_n);
    pf->order_warned = 1;
    drop_unheld(pf, layer, 0);
}

/* An NVMe read of the fetched layer waits for a staging buffer: the read of another layer
 * that holds one moves on (each buffer is free again once its copy is done). */
static zt_status free_staging(zt_prefetcher *pf, const zt_gather *self, zt_error *err)
{
    for (int i = 0; i < pf->n; i++) {
        zt_gather *g = &pf->gathers[i];
        int needs;
        if (g != self && g->nvme_buf)
            return zt_gather_advance(g, pf->env, 1, &needs, err);
    }
    return ZT_ERR(err, ZT_ERR_INTERNAL, "no NVMe staging buffer for layer '%s'", self->name);
}

/* Brings the layer to COMM (its collective is issued before the window's) or READY. */
static zt_status start_gather(zt_prefetcher *pf, zt_gather *g, zt_error *err)
{
    zt_status st = ZT_OK;
    while (st == ZT_OK && g->state != ZT_GATHER_COMM && g->state != ZT_GATHER_READY) {
        int needs_staging = 0;
        st = zt_gather_advance(g, pf->env, 1, &needs_staging, err);
        if (st == ZT_OK && needs_staging)
            st = free_staging(pf, g, err);
    }
    return st;
}

zt_status zt_prefetcher_fetch(zt_prefetcher *pf, int layer, zt_pass pass, void **full,
                              zt_event **ready, zt_error *err)
{
    zt_gather *g = &pf->gathers[layer];
    int training = pass != ZT_INFERENCE;
    if (training)
        observe(pf, layer, pass);
    if (g->state != ZT_GATHER_NONE && !g->persistent)
        pf->stats.prefetch_hits++;
    zt_status st = finish_bucket(pf, layer, err);
    if (st == ZT_OK)
        st = start_gather(pf, g, err);
    if (st == ZT_OK && training && pf->trace.valid && !pf->trace.deviated)
        move_window(pf, layer);
    while (st == ZT_OK && g->state != ZT_GATHER_READY) {
        int needs_staging;
        st = zt_gather_advance(g, pf->env, 1, &needs_staging, err);
    }
    if (st != ZT_OK)
        return st;
    pf->holds[layer][pass]++;
    *full = g->buf;
    *ready = zt_gather_ready_event(g);
    return ZT_OK;
}

void zt_prefetcher_release(zt_prefetcher *pf, int layer, zt_pass pass)
{
    pf->holds[layer][pass]--;
    if (held(pf, layer) == 0 && !pf->gathers[layer].replica &&
        !zt_sched_keep(&pf->lim, &pf->trace, snapshot(pf), pf->n, layer))
        zt_gather_drop(&pf->gathers[layer], pf->env);
}

int zt_prefetcher_holds(const zt_prefetcher *pf, int layer, zt_pass pass)
{
    return pf->holds[layer][pass];
}

int zt_prefetcher_held(const zt_prefetcher *pf)
{
    int n = 0;
    for (int i = 0; i < pf->n; i++)
        n += held(pf, i);
    return n;
}

zt_status zt_prefetcher_alloc(zt_prefetcher *pf, size_t bytes, void **ptr, zt_error *err)
{
    return zt_device_tier_alloc(pf->env->dtier, bytes, 1, ptr, err);
}

void zt_prefetcher_invalidate(zt_prefetcher *pf)
{
    for (int i = 0; i < pf->n; i++) /* hpZ slices of the old parameters go too */
        if (pf->gathers[i].secondary && !pf->gathers[i].from_secondary)
            zt_gather_release_secondary(&pf->gathers[i], pf->env);
    drop_unheld(pf, -1, 1);
}

/* A replica the step left out of date whose partition is current (a layer whose home the
 * overlapped step has not updated yet is left to its fetch, which updates it first). */
static int stale_and_ready(zt_prefetcher *pf, int i)
{
    zt_gather *g = &pf->gathers[i];
    zt_gather_env *env = pf->env;
    return g->replica && g->state == ZT_GATHER_NONE &&
           (!env->home_ready || env->home_ready(env->home_ready_ctx, g->home, 0));
}

/* Consecutive stale replicas packed into all-gathers of at most env->bucket_elems partition
 * elements (several ranks, no qwZ); a run of one, or a bucket without room for its buffers,
 * is left to the per-layer gathers. */
static void bucket_replicas(zt_prefetcher *pf)
{
    zt_gather_env *env = pf->env;
    if (env->bucket_elems <= 0 || env->topo->size == 1 || env->qwz)
        return;
    for (int i = 0; i < pf->n;) {
        int k = 0;
        int64_t elems = 0;
        while (i + k < pf->n && stale_and_ready(pf, i + k) &&
               (k == 0 || elems + pf->gathers[i + k].shard_numel <= env->bucket_elems))
            elems += pf->gathers[i + k++].shard_numel;
        zt_error err = {0};
        int started = 0;
        if (k > 1 && zt_gather_bucket_start(&pf->gathers[i], k, env, &started, &err) != ZT_OK)
            ZT_LOGD("prefetch", "bucketed all-gather from '%s' left to the fetches: %s",
                    pf->gathers[i].name, err.msg);
        i += k > 0 ? k : 1;
    }
}

/* Stages 1 and 2: every replica the step left out of date is all-gathered now, ahead of the
 * next forward pass: buckets first, then for the rest every shard's copy into its replica
 * and every collective, so they run together. In layer order on every rank. */
static void refresh_replicas(zt_prefetcher *pf)
{
    bucket_replicas(pf);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < pf->n; i++) {
            zt_gather *g = &pf->gathers[i];
            if (!g->replica || g->state != (pass ? ZT_GATHER_COPYING : ZT_GATHER_NONE))
                continue;
            zt_error err = {0};
            int needs_staging;
            if (zt_gather_advance(g, pf->env, 0, &needs_staging, &err) != ZT_OK)
                ZT_LOGD("prefetch", "all-gather of replica '%s' left to its fetch: %s", g->name,
                        err.msg);
        }
}

void zt_prefetcher_step_done(zt_prefetcher *pf)
{
    zt_layer_order_end_step(&pf->trace);
    refresh_replicas(pf);
    move_window(pf, -1);
}

void zt_prefetcher_stats(const zt_prefetcher *pf, zt_prefetch_stats *out)
{
    *out = pf->stats;
    out->deviations = (uint64_t)pf->trace.deviations;
}

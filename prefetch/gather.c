/* SPDX-License-Identifier: MIT */
#include "prefetch/gather.h"
#include "core/convert.h"
#include "core/log.h"
#include "core/time.h"
#include "core/trace.h"

#include <stdio.h>
#include <stdlib.h>

static size_t dsize(const zt_gather_env *env) { return zt_dtype_size(env->dtype); }

static char *rank_slot(const zt_gather *g, const zt_gather_env *env)
{
    return (char *)g->buf + (size_t)env->topo->rank * (size_t)g->shard_numel * dsize(env);
}

static zt_comm *gather_comm(const zt_gather *g, const zt_gather_env *env)
{
    return g->from_secondary ? env->topo->intra : env->topo->world;
}

zt_status zt_gather_init(zt_gather *g, zt_gather_env *env, const char *name, int64_t flat_numel,
                         int64_t shard_numel, int persistent, const zt_home *home,
                         const zt_home *replica, zt_error *err)
{
    *g = (zt_gather){0};
    g->name = name;
    g->flat_numel = flat_numel;
    g->shard_numel = shard_numel;
    g->persistent = persistent;
    g->home = home;
    g->replica = replica;
    return zt_device_event_create(env->dev, &g->copied, err);
}

void zt_gather_fini(zt_gather *g, zt_gather_env *env)
{
    zt_gather_drop(g, env);
    zt_gather_release_secondary(g, env);
    if (g->copied)
        zt_device_event_destroy(env->dev, g->copied);
    g->copied = NULL;
}

static zt_status alloc_full(zt_gather *g, zt_gather_env *env, int demand, zt_error *err)
{
    size_t bytes = (size_t)g->flat_numel * dsize(env);
    if (g->replica) {
        g->buf = g->replica->ptr;
        return ZT_OK;
    }
    return zt_device_tier_alloc(env->dtier, bytes, demand, &g->buf, err);
}

/* NONE -> READING (NVMe home) or COPYING (host/device home, or hpZ's slices). */
static zt_status start(zt_gather *g, zt_gather_env *env, int demand, int *needs_staging,
                       zt_error *err)
{
    zt_status st = ZT_OK;
    if (g->secondary) { /* hpZ: everything comes from the node's slices */
        st = alloc_full(g, env, demand, err);
        if (st == ZT_OK)
            st = zt_device_event_record(env->dev, g->copied, env->stream, err);
        if (st == ZT_OK)
            g->state = ZT_GATHER_COPYING;
        return st;
    }
    if (g->home->kind == ZT_TIER_NVME) {
        if (!(g->nvme_buf = zt_staging_acquire(env->staging))) {
            *needs_staging = demand; /* a prefetch simply tries again at a later fetch */
            return ZT_OK;
        }
        st = alloc_full(g, env, demand, err);
        if (st == ZT_OK)
            st = zt_home_read_start(g->home, g->nvme_buf, &g->nvme_io, err);
        if (st == ZT_OK)
            g->state = ZT_GATHER_READING;
        return st;
    }
    zt_homes h = {.dev = env->dev, .stream = env->stream};
    st = alloc_full(g, env, demand, err);
    if (st == ZT_OK)
        st = zt_home_to_device(&h, g->home, rank_slot(g, env), err);
    if (st == ZT_OK)
        st = zt_device_event_record(env->dev, g->copied, env->stream, err);
    if (st == ZT_OK) {
        g->state = ZT_GATHER_COPYING;
        env->h2d_bytes += g->home->kind == ZT_TIER_DEVICE ? 0 : g->home->bytes;
    }
    return st;
}

/* READING -> COPYING: the shard is in the staging buffer; queue its copy to the device. */
static zt_status copy_staged(zt_gather *g, zt_gather_env *env, zt_error *err)
{
    zt_status st = zt_home_io_wait(g->home, &g->nvme_io, err);
    if (st == ZT_OK)
        st = zt_device_memcpy_async(env->dev, rank_slot(g, env), g->nvme_buf, g->home->bytes,
                                    ZT_COPY_H2D, env->stream, err);
    if (st == ZT_OK)
        st = zt_device_event_record(env->dev, g->copied, env->stream, err);
    if (st == ZT_OK) {
        g->state = ZT_GATHER_COPYING;
        env->h2d_bytes += g->home->bytes;
    }
    return st;
}

/* A single rank gathers nothing: the copied shard is the full layer. Unless a staging
 * buffer waits to be recycled, the layer is READY at once and its consumer orders itself
 * after the copy (zt_gather_ready_event) instead of the host waiting for it. */
static int nothing_to_gather(const zt_gather *g, const zt_gather_env *env)
{
    return env->topo->size == 1 && !g->secondary && !g->nvme_buf;
}

static int uses_qwz(const zt_gather *g, const zt_gather_env *env)
{
    return !g->secondary && env->qwz && env->topo->size > 1;
}

/* The plain all-gather over a communicator whose collectives run on the device (nccl): it
 * waits for the copy on the device, and the layer's readiness waits for it there too, with
 * no host wait (qwZ, hpZ and an NVMe home's staging buffer keep the host-ordered path). */
static int on_device(const zt_gather *g, const zt_gather_env *env)
{
    return zt_comm_device_ordered(env->topo->world) && !g->secondary && !g->nvme_buf &&
           !uses_qwz(g, env);
}

/* qwZ's transfer buffers, from the device tier. A prefetch (not a demand fetch) that finds no room
 * returns 0 and the layer waits in COPYING; its fetch allocates with eviction. */
static int alloc_qwz_scratch(zt_gather *g, zt_gather_env *env, int demand, zt_status *st,
                             zt_error *err)
{
    size_t bytes = zt_qwz_scratch_bytes(env->topo->size, g->shard_numel, env->quant_block);
    zt_error local = {0};
    *st = zt_device_tier_alloc(env->dtier, bytes, demand, &g->qwz_scratch, demand ? err : &local);
    if (*st == ZT_ERR_DEVICE_NOMEM && !demand) {
        g->qwz_scratch = NULL;
        *st = ZT_OK;
        return 0;
    }
    if (*st != ZT_OK) {
        g->qwz_scratch = NULL;
        zt_error_prefix(err, "qwZ's transfer buffers for layer '%s': ", g->name);
    }
    return *st == ZT_OK;
}

static void free_qwz_scratch(zt_gather *g, zt_gather_env *env)
{
    zt_device_tier_free(env->dtier, g->qwz_scratch);
    g->qwz_scratch = NULL;
}

/* COPYING -> COMM: the copy is done (its staging buffer is free again); all-gather. */
static zt_status issue_allgather(zt_gather *g, zt_gather_env *env, int demand, zt_error *err)
{
    zt_topology *t = env->topo;
    zt_status st = ZT_OK;
    if (nothing_to_gather(g, env)) {
        g->state = ZT_GATHER_READY;
        env->gathered_bytes += (uint64_t)g->flat_numel * dsize(env);
        return ZT_OK;
    }
    if (uses_qwz(g, env) && !alloc_qwz_scratch(g, env, demand, &st, err))
        return st; /* no room for a prefetch (ZT_OK), or the failure */
    if (on_device(g, env)) {
        st = zt_comm_wait_event(t->world, env->dev, g->copied, err);
    } else {
        env->host_syncs++;
        st = zt_device_event_synchronize(env->dev, g->copied, err);
    }
    if (st == ZT_OK && g->nvme_buf) {
        st = zt_staging_release(env->staging, g->nvme_buf, err);
        g->nvme_buf = NULL;
    }
    if (st == ZT_OK && g->secondary) {
        size_t part = (size_t)(g->flat_numel / t->node_size) * dsize(env);
        g->from_secondary = 1;
        st = zt_hpz_gather(t, g->secondary, g->buf, part, &g->req, err);
    } else if (st == ZT_OK && uses_qwz(g, env)) {
        st = zt_qwz_start(&g->qwz, t, rank_slot(g, env), env->dtype, g->shard_numel,
                          env->quant_block, g->qwz_scratch, env->stream, &g->req, err);
    } else if (st == ZT_OK) {
        zt_topology_count(t, (uint64_t)g->shard_numel * dsize(env));
        st = zt_comm_allgather(t->world, rank_slot(g, env), g->buf, (size_t)g->shard_numel,
                               zt_comm_dtype_of(env->dtype), &g->req, err);
    }
    if (st == ZT_OK)
        g->state = ZT_GATHER_COMM;
    return st;
}

/* hpZ: after a full gather, keep this rank's 1/node_size slice for the node-local gather of
 * the backward pass; with no room for it, that gather crosses nodes as usual. */
static void keep_secondary(zt_gather *g, zt_gather_env *env)
{
    zt_topology *t = env->topo;
    if (!env->hpz || !t->intra || g->persistent || g->secondary ||
        g->flat_numel % t->node_size != 0)
        return;
    size_t part = (size_t)(g->flat_numel / t->node_size) * dsize(env);
    zt_error ignored = {0};
    if (zt_device_tier_alloc(env->dtier, part, 0, &g->secondary, &ignored) != ZT_OK) {
        g->secondary = NULL;
        return;
    }
    env->host_syncs++;
    if (zt_device_copy_sync(env->dev, g->secondary, (char *)g->buf + part * (size_t)t->local_rank,
                            part, ZT_COPY_D2D, env->stream, &ignored) != ZT_OK)
        zt_gather_release_secondary(g, env);
}

/* The gathered layer is ready once env->stream has passed the collective: g->copied then
 * says so (what the fetch orders the caller after). */
static zt_status ready_on_device(zt_gather *g, zt_gather_env *env, zt_comm *c, zt_error *err)
{
    zt_status st = zt_comm_complete_on(c, &g->req, env->stream, err);
    return st == ZT_OK ? zt_device_event_record(env->dev, g->copied, env->stream, err) : st;
}

/* The host waits for an all-gather (of `what`): the time is communication the caller was
 * exposed to (zt_stats.comm_wait_s, a "comm" span on the caller's track). */
static zt_status wait_allgather(zt_gather_env *env, zt_comm *c, zt_comm_req *req, const char *what,
                                zt_error *err)
{
    double t0 = zt_now_s();
    zt_status st = zt_comm_wait(c, req, err);
    env->comm_wait_s += zt_now_s() - t0;
    zt_trace_span("comm", t0, "wait for the all-gather of %s", what);
    return st;
}

static zt_status finish_allgather(zt_gather *g, zt_gather_env *env, zt_error *err)
{
    zt_comm *c = gather_comm(g, env);
    zt_status st = on_device(g, env) ? ready_on_device(g, env, c, err)
                                     : wait_allgather(env, c, &g->req, g->name, err);
    if (st == ZT_OK && g->qwz.recv)
        st = zt_qwz_finish(&g->qwz, env->topo, g->buf, env->dtype, g->shard_numel, env->quant_block,
                           env->stream, err);
    if (st == ZT_OK)
        free_qwz_scratch(g, env);
    if (st == ZT_OK && g->from_secondary)
        zt_gather_release_secondary(g, env); /* used once: by the backward pass */
    else if (st == ZT_OK)
        keep_secondary(g, env);
    if (st == ZT_OK) {
        g->state = ZT_GATHER_READY;
        env->gathered_bytes += (uint64_t)g->flat_numel * dsize(env);
    }
    return st;
}

zt_status zt_gather_advance(zt_gather *g, zt_gather_env *env, int demand, int *needs_staging,
                            zt_error *err)
{
    zt_status st = ZT_OK;
    *needs_staging = 0;
    if (env->home_ready && (g->persistent || g->state == ZT_GATHER_NONE) &&
        !env->home_ready(env->home_ready_ctx, g->home, demand))
        return ZT_OK;    /* a prefetch: the layer's fetch brings it up to date first */
    if (g->persistent) { /* its full parameters are its home: nothing to move */
        g->buf = g->home->ptr;
        g->state = ZT_GATHER_READY;
        return ZT_OK;
    }
    g->advancing = 1;
    switch (g->state) {
    case ZT_GATHER_NONE:
        st = start(g, env, demand, needs_staging, err);
        break;
    case ZT_GATHER_READING:
        st = copy_staged(g, env, err);
        break;
    case ZT_GATHER_COPYING:
        st = issue_allgather(g, env, demand, err);
        break;
    case ZT_GATHER_COMM:
        st = finish_allgather(g, env, err);
        break;
    case ZT_GATHER_READY:
        break;
    }
    g->advancing = 0;
    if (st != ZT_OK)
        zt_gather_drop(g, env);
    return st;
}

zt_event *zt_gather_ready_event(const zt_gather *g) { return g->persistent ? NULL : g->copied; }

void zt_gather_drop(zt_gather *g, zt_gather_env *env)
{
    if (g->persistent)
        return; /* resident: the buffer is the parameters' home */
    if (g->nvme_io.pieces)
        zt_home_io_wait(g->home, &g->nvme_io, NULL);
    if (g->state == ZT_GATHER_COPYING || g->state == ZT_GATHER_NONE ||
        g->state == ZT_GATHER_READING)
        zt_device_stream_synchronize(env->dev, env->stream, NULL);

    if (g->state == ZT_GATHER_COMM && zt_comm_wait(gather_comm(g, env), &g->req, NULL) != ZT_OK) {
        /* the collective never completed (a peer stopped): it may still write to the
         * buffers, which stay allocated until the process ends (the runtime is beyond use) */
        g->buf = g->qwz_scratch = g->secondary = NULL;
        g->from_secondary = 0;
        g->qwz.send = g->qwz.recv = NULL;
        g->state = ZT_GATHER_NONE;
        return;
    }
    if (g->from_secondary) /* the slices were being gathered: they are consumed either way */
        zt_gather_release_secondary(g, env);
    g->qwz.send = g->qwz.recv = NULL; /* its collective is done or was never issued */
    free_qwz_scratch(g, env);
    if (g->nvme_buf) { /* a drop reports nothing: a refused release is logged */
        zt_error e = {0};
        if (zt_staging_release(env->staging, g->nvme_buf, &e) != ZT_OK)
            ZT_LOGE("prefetch", "%s", e.msg);
        g->nvme_buf = NULL;
    }
    /* a single rank's READY layer may still be receiving its copy: freed after it */
    zt_event *copy = g->state == ZT_GATHER_READY && g->buf ? g->copied : NULL;
    if (copy && !env->fenced_drops && zt_device_event_query(env->dev, copy) == 0) {
        env->host_syncs++;
        zt_device_event_synchronize(env->dev, copy, NULL);
    }
    if (!g->replica)
        zt_device_tier_free_after(env->dtier, g->buf, env->fenced_drops ? copy : NULL);
    g->buf = NULL;
    g->state = ZT_GATHER_NONE;
}

void zt_gather_release_secondary(zt_gather *g, zt_gather_env *env)
{
    zt_device_tier_free(env->dtier, g->secondary);
    g->secondary = NULL;
    g->from_secondary = 0;
}

/* ---- buckets: several replicas, one all-gather (stages 1 and 2) ---- */

zt_status zt_gather_bucket_start(zt_gather *g, int k, zt_gather_env *env, int *started,
                                 zt_error *err)
{
    zt_topology *t = env->topo;
    size_t ds = dsize(env);
    zt_gather_bucket *b = calloc(1, sizeof *b);
    *started = 0;
    if (!b)
        return ZT_OK; /* one by one, then */
    b->first = g, b->count = k;
    for (int i = 0; i < k; i++)
        b->elems += g[i].shard_numel;
    size_t send = (size_t)b->elems * ds;
    zt_error local = {0};
    if (zt_device_tier_alloc(env->dtier, send, 0, &b->send, &local) != ZT_OK ||
        zt_device_tier_alloc(env->dtier, send * (size_t)t->size, 0, &b->recv, &local) != ZT_OK) {
        zt_device_tier_free(env->dtier, b->send);
        free(b);
        return ZT_OK;
    }
    zt_status st = ZT_OK;
    size_t off = 0;
    for (int i = 0; st == ZT_OK && i < k; i++) { /* this rank's partitions, packed */
        st = zt_device_memcpy_async(env->dev, (char *)b->send + off, g[i].home->ptr,
                                    g[i].home->bytes, ZT_COPY_D2D, env->stream, err);
        off += g[i].home->bytes;
    }
    if (st == ZT_OK)
        st = zt_device_event_record(env->dev, g->copied, env->stream, err);
    if (st == ZT_OK && zt_comm_device_ordered(t->world)) {
        st = zt_comm_wait_event(t->world, env->dev, g->copied, err);
    } else if (st == ZT_OK) {
        env->host_syncs++;
        st = zt_device_event_synchronize(env->dev, g->copied, err);
    }
    if (st == ZT_OK) {
        zt_topology_count(t, send);
        st = zt_comm_allgather(t->world, b->send, b->recv, (size_t)b->elems,
                               zt_comm_dtype_of(env->dtype), &b->req, err);
    }
    if (st != ZT_OK) { /* nothing was issued: the copies are waited for above or fenced */
        zt_device_stream_synchronize(env->dev, env->stream, NULL);
        zt_device_tier_free(env->dtier, b->send);
        zt_device_tier_free(env->dtier, b->recv);
        free(b);
        return st;
    }
    for (int i = 0; i < k; i++) {
        g[i].buf = g[i].replica->ptr;
        g[i].bucket = b;
        g[i].state = ZT_GATHER_COMM;
    }
    env->buckets++;
    *started = 1;
    return ZT_OK;
}

/* Rank r's piece of every layer, from the rank's run of recv into each replica. */
static zt_status unpack(zt_gather_bucket *b, zt_gather_env *env, zt_error *err)
{
    size_t ds = dsize(env), off = 0;
    zt_status st = ZT_OK;
    for (int r = 0; r < env->topo->size; r++)
        for (int i = 0; st == ZT_OK && i < b->count; i++) {
            zt_gather *g = &b->first[i];
            size_t bytes = (size_t)g->shard_numel * ds;
            st = zt_device_memcpy_async(env->dev, (char *)g->buf + (size_t)r * bytes,
                                        (const char *)b->recv + off, bytes, ZT_COPY_D2D,
                                        env->stream, err);
            off += bytes;
        }
    return st;
}

zt_status zt_gather_bucket_finish(zt_gather_bucket *b, zt_gather_env *env, zt_error *err)
{
    zt_comm *c = env->topo->world;
    char what[160];
    snprintf(what, sizeof what, "%d replicas from %s", b->count, b->first->name);
    zt_status st = zt_comm_device_ordered(c) ? zt_comm_complete_on(c, &b->req, env->stream, err)
                                             : wait_allgather(env, c, &b->req, what, err);
    int completed = st == ZT_OK;
    if (st == ZT_OK)
        st = unpack(b, env, err);
    zt_event *done = b->first->copied;   /* every piece copied: the layers are ready after it */
    for (int i = 0; i < b->count; i++) { /* each layer's own event, after all the pieces */
        zt_gather *g = &b->first[i];
        if (st == ZT_OK)
            st = zt_device_event_record(env->dev, g->copied, env->stream, err);
        g->bucket = NULL;
    }
    for (int i = 0; i < b->count; i++) { /* all READY, or none after a failure */
        zt_gather *g = &b->first[i];
        g->state = st == ZT_OK ? ZT_GATHER_READY : ZT_GATHER_NONE;
        if (st == ZT_OK)
            env->gathered_bytes += (uint64_t)g->flat_numel * dsize(env);
        else
            g->buf = NULL;
    }
    if (completed && st != ZT_OK) /* the copies' end was not recorded: wait for them */
        zt_device_stream_synchronize(env->dev, env->stream, NULL);
    if (completed) { /* once the copies into send and out of recv (that stream) are done */
        zt_device_tier_free_after(env->dtier, b->send, st == ZT_OK ? done : NULL);
        zt_device_tier_free_after(env->dtier, b->recv, st == ZT_OK ? done : NULL);
    }
    free(b); /* a collective that never completed keeps its buffers: MPI may write them */
    return st;
}

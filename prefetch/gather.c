#include "prefetch/gather.h"
#include "prefetch/prefetch.h"
#include "core/log.h"
#include "runtime/zeropp.h"

static char *rank_slot(const zt_runtime *rt, const zt_layer *L)
{
    return (char *)L->gathered + (size_t)rt->rank * (size_t)L->shard_numel * zt_dtype_size(rt->dtype);
}

static zt_status alloc_gathered(zt_runtime *rt, zt_layer *L, int evict, zt_error *err)
{
    size_t bytes = (size_t)L->flat_numel * zt_dtype_size(rt->dtype);
    return evict ? zt_device_alloc_evicting(rt, bytes, &L->gathered, err)
                 : rt->dev->iface->alloc(rt->dev, bytes, &L->gathered, err);
}

/* The fetch path needs a staging buffer now: finish the reads of prefetched layers (each
 * frees one when its copy is queued) until one is free. */
static void *staging_for_fetch(zt_runtime *rt, zt_layer *self, zt_error *err)
{
    void *buf;
    while (!(buf = zt_pinned_acquire(rt->param_staging))) {
        zt_layer *holder = NULL;
        for (int i = 0; i < rt->n_layers && !holder; i++)
            if (&rt->layers[i] != self && rt->layers[i].nvme_buf)
                holder = &rt->layers[i];
        if (!holder || zt_gather_advance(rt, holder, 1, err) != ZT_OK)
            return NULL;
    }
    return buf;
}

/* NONE -> READING (NVMe home) or COPYING (host/device home). */
static zt_status start(zt_runtime *rt, zt_layer *L, int evict, zt_error *err)
{
    if (L->secondary) { /* hpZ: everything comes from the node's secondary slices */
        zt_status st = alloc_gathered(rt, L, evict, err);
        if (st == ZT_OK)
            st = rt->dev->iface->event_record(rt->dev, L->copied, rt->prefetch_stream, err);
        if (st == ZT_OK)
            L->gstate = ZT_GATHER_COPYING;
        return st;
    }
    if (L->param_home.kind == ZT_TIER_NVME) {
        L->nvme_buf = evict ? staging_for_fetch(rt, L, err) : zt_pinned_acquire(rt->param_staging);
        if (!L->nvme_buf)
            return evict ? ZT_ERR(err, ZT_ERR_INTERNAL, "no NVMe staging buffer for '%s'", L->name)
                         : ZT_OK; /* prefetch: try again at a later fetch */
        zt_status st = alloc_gathered(rt, L, evict, err);
        if (st == ZT_OK)
            st = zt_home_read_start(&L->param_home, L->nvme_buf, &L->nvme_io, err);
        if (st == ZT_OK)
            L->gstate = ZT_GATHER_READING;
        return st;
    }
    zt_status st = alloc_gathered(rt, L, evict, err);
    zt_homes h = rt->homes;
    h.stream = rt->prefetch_stream;
    if (st == ZT_OK)
        st = zt_home_to_device(&h, &L->param_home, rank_slot(rt, L), err);
    if (st == ZT_OK)
        st = rt->dev->iface->event_record(rt->dev, L->copied, rt->prefetch_stream, err);
    if (st == ZT_OK) {
        L->gstate = ZT_GATHER_COPYING;
        rt->stats.h2d_bytes += L->param_home.kind == ZT_TIER_DEVICE ? 0 : L->param_home.bytes;
    }
    return st;
}

/* READING -> COPYING: the shard is in the staging buffer; queue its copy to the device. */
static zt_status copy_staged(zt_runtime *rt, zt_layer *L, zt_error *err)
{
    zt_status st = zt_home_io_wait(&L->param_home, &L->nvme_io, err);
    if (st == ZT_OK)
        st = rt->dev->iface->memcpy_async(rt->dev, rank_slot(rt, L), L->nvme_buf,
                                          L->param_home.bytes, ZT_COPY_H2D, rt->prefetch_stream,
                                          err);
    if (st == ZT_OK)
        st = rt->dev->iface->event_record(rt->dev, L->copied, rt->prefetch_stream, err);
    if (st == ZT_OK) {
        L->gstate = ZT_GATHER_COPYING;
        rt->stats.h2d_bytes += L->param_home.bytes;
    }
    return st;
}

/* COPYING -> COMM: the copy is done (its staging buffer is free again); all-gather. */
static zt_status issue_allgather(zt_runtime *rt, zt_layer *L, zt_error *err)
{
    zt_status st = rt->dev->iface->event_synchronize(rt->dev, L->copied, err);
    if (st == ZT_OK && L->nvme_buf) {
        zt_pinned_release(rt->param_staging, L->nvme_buf);
        L->nvme_buf = NULL;
    }
    if (st == ZT_OK && L->secondary) {
        st = zt_hpz_issue(rt, L, err);
    } else if (st == ZT_OK && rt->cfg.zero_quantized_weights && rt->world > 1) {
        st = zt_qwz_start(rt, L, rank_slot(rt, L), err);
    } else if (st == ZT_OK) {
        zt_comm_count(rt, (uint64_t)L->shard_numel * zt_dtype_size(rt->dtype));
        st = rt->comm->iface->allgather(rt->comm, rank_slot(rt, L), L->gathered,
                                        (size_t)L->shard_numel, zt_comm_dtype_of(rt->dtype), &L->req,
                                        err);
    }
    if (st == ZT_OK)
        L->gstate = ZT_GATHER_COMM;
    return st;
}

static zt_status finish_allgather(zt_runtime *rt, zt_layer *L, zt_error *err)
{
    zt_comm *c = L->from_secondary ? rt->intra : rt->comm;
    zt_status st = c->iface->wait(c, &L->req, err);
    if (st == ZT_OK && L->qrecv)
        zt_qwz_finish(rt, L);
    if (st == ZT_OK && L->from_secondary)
        zt_hpz_release(rt, L); /* used once: by the backward pass */
    else if (st == ZT_OK)
        zt_hpz_keep(rt, L);
    if (st == ZT_OK) {
        L->gstate = ZT_GATHER_READY;
        rt->stats.gathered_bytes += (uint64_t)L->flat_numel * zt_dtype_size(rt->dtype);
    }
    return st;
}

zt_status zt_gather_advance(zt_runtime *rt, zt_layer *L, int evict, zt_error *err)
{
    zt_status st = ZT_OK;
    if (L->persistent) { /* its full parameters are its home: nothing to move */
        L->gathered = L->param_home.ptr;
        L->gstate = ZT_GATHER_READY;
        return ZT_OK;
    }
    switch (L->gstate) {
    case ZT_GATHER_NONE:
        st = start(rt, L, evict, err);
        break;
    case ZT_GATHER_READING:
        st = copy_staged(rt, L, err);
        break;
    case ZT_GATHER_COPYING:
        st = issue_allgather(rt, L, err);
        break;
    case ZT_GATHER_COMM:
        st = finish_allgather(rt, L, err);
        break;
    case ZT_GATHER_READY:
        break;
    }
    if (st != ZT_OK)
        zt_gather_drop(rt, L);
    return st;
}

zt_status zt_gather_complete(zt_runtime *rt, zt_layer *L, zt_error *err)
{
    zt_status st = ZT_OK;
    while (st == ZT_OK && L->gstate != ZT_GATHER_READY)
        st = zt_gather_advance(rt, L, 1, err);
    return st;
}

void zt_gather_drop(zt_runtime *rt, zt_layer *L)
{
    if (L->persistent)
        return; /* resident: the buffer is the parameters' home */
    if (L->nvme_io.pieces)
        zt_home_io_wait(&L->param_home, &L->nvme_io, NULL);
    if (L->gstate == ZT_GATHER_COPYING || L->gstate == ZT_GATHER_NONE ||
        L->gstate == ZT_GATHER_READING)
        rt->dev->iface->stream_synchronize(rt->dev, rt->prefetch_stream, NULL);
    if (L->gstate == ZT_GATHER_COMM) {
        zt_comm *c = L->from_secondary ? rt->intra : rt->comm;
        c->iface->wait(c, &L->req, NULL);
    }
    if (L->from_secondary) /* the slices were being gathered: they are consumed either way */
        zt_hpz_release(rt, L);
    zt_qwz_free(L);
    if (L->nvme_buf) {
        zt_pinned_release(rt->param_staging, L->nvme_buf);
        L->nvme_buf = NULL;
    }
    rt->dev->iface->free(rt->dev, L->gathered);
    L->gathered = NULL;
    L->gstate = ZT_GATHER_NONE;
}

#include "prefetch/gather.h"
#include "prefetch/prefetch.h"
#include "runtime/log.h"

static zt_comm_dtype comm_dtype(zt_dtype t)
{
    return t == ZT_F32 ? ZT_COMM_F32 : t == ZT_BF16 ? ZT_COMM_BF16 : ZT_COMM_F16;
}

static char *rank_slot(const zt_runtime *rt, const zt_layer *L)
{
    return (char *)L->gathered + (size_t)rt->rank * (size_t)L->shard_numel * zt_dtype_size(rt->dtype);
}

static zt_status start_copy(zt_runtime *rt, zt_layer *L, int evict, zt_error *err)
{
    zt_device *dev = rt->dev;
    size_t bytes = (size_t)L->flat_numel * zt_dtype_size(rt->dtype);
    zt_status st = evict ? zt_device_alloc_evicting(rt, bytes, &L->gathered, err)
                         : dev->iface->alloc(dev, bytes, &L->gathered, err);
    if (st != ZT_OK)
        return st;
    zt_homes h = rt->homes;
    h.stream = rt->prefetch_stream;
    st = zt_home_to_device(&h, &L->param_home, rank_slot(rt, L), rt->staging_lp, err);
    if (st == ZT_OK)
        st = dev->iface->event_record(dev, L->copied, rt->prefetch_stream, err);
    if (st == ZT_OK) {
        L->gstate = ZT_GATHER_COPYING;
        rt->stats.h2d_bytes += L->param_home.kind == ZT_TIER_DEVICE ? 0 : L->param_home.bytes;
    }
    return st;
}

static zt_status issue_allgather(zt_runtime *rt, zt_layer *L, zt_error *err)
{
    zt_status st = rt->dev->iface->event_synchronize(rt->dev, L->copied, err);
    if (st == ZT_OK)
        st = rt->comm->iface->allgather(rt->comm, rank_slot(rt, L), L->gathered,
                                        (size_t)L->shard_numel, comm_dtype(rt->dtype), &L->req,
                                        err);
    if (st == ZT_OK)
        L->gstate = ZT_GATHER_COMM;
    return st;
}

static zt_status finish_allgather(zt_runtime *rt, zt_layer *L, zt_error *err)
{
    zt_status st = rt->comm->iface->wait(rt->comm, &L->req, err);
    if (st == ZT_OK) {
        L->gstate = ZT_GATHER_READY;
        rt->stats.gathered_bytes += (uint64_t)L->flat_numel * zt_dtype_size(rt->dtype);
    }
    return st;
}

zt_status zt_gather_advance(zt_runtime *rt, zt_layer *L, int evict, zt_error *err)
{
    zt_status st = ZT_OK;
    switch (L->gstate) {
    case ZT_GATHER_NONE:
        st = start_copy(rt, L, evict, err);
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
    if (L->gstate == ZT_GATHER_COPYING || L->gstate == ZT_GATHER_NONE)
        rt->dev->iface->stream_synchronize(rt->dev, rt->prefetch_stream, NULL);
    if (L->gstate == ZT_GATHER_COMM)
        rt->comm->iface->wait(rt->comm, &L->req, NULL);
    rt->dev->iface->free(rt->dev, L->gathered);
    L->gathered = NULL;
    L->gstate = ZT_GATHER_NONE;
}

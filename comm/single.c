/* SPDX-License-Identifier: MIT */
/* The `single` comm backend: a world of one rank. Collectives are copies (or nothing when in
 * place) and complete immediately. */
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>

static void copy_if_needed(void *dst, const void *src, size_t bytes)
{
    if (dst != src && bytes)
        memmove(dst, src, bytes);
}

static zt_status single_allgather(zt_comm *c, const void *send, void *recv, size_t count,
                                  zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    (void)c, (void)err;
    copy_if_needed(recv, send, count * zt_comm_dtype_size(dt));
    req->done = 1;
    return ZT_OK;
}

static zt_status single_reduce_scatter(zt_comm *c, const void *send, void *recv, size_t count,
                                       zt_comm_dtype dt, zt_reduce_op op, zt_comm_req *req,
                                       zt_error *err)
{
    (void)op;
    return single_allgather(c, send, recv, count, dt, req, err);
}

static zt_status single_allreduce(zt_comm *c, const void *send, void *recv, size_t count,
                                  zt_comm_dtype dt, zt_reduce_op op, zt_comm_req *req,
                                  zt_error *err)
{
    (void)op;
    return single_allgather(c, send, recv, count, dt, req, err);
}

static zt_status single_broadcast(zt_comm *c, void *buf, size_t count, zt_comm_dtype dt, int root,
                                  zt_comm_req *req, zt_error *err)
{
    (void)c, (void)buf, (void)count, (void)dt;
    if (root != 0)
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "broadcast root %d outside a world of 1", root);
    req->done = 1;
    return ZT_OK;
}

static zt_status single_allgatherv(zt_comm *c, const void *send, void *recv, const size_t *counts,
                                   const size_t *displs, zt_comm_dtype dt, zt_comm_req *req,
                                   zt_error *err)
{
    (void)c, (void)err;
    size_t es = zt_comm_dtype_size(dt);
    copy_if_needed((char *)recv + displs[0] * es, send, counts[0] * es);
    req->done = 1;
    return ZT_OK;
}

static zt_status single_gatherv(zt_comm *c, const void *send, void *recv, const size_t *counts,
                                const size_t *displs, zt_comm_dtype dt, int root, zt_comm_req *req,
                                zt_error *err)
{
    (void)root; /* 0: checked by zt_comm_gatherv */
    return single_allgatherv(c, send, recv, counts, displs, dt, req, err);
}

static zt_status single_barrier(zt_comm *c, zt_comm_req *req, zt_error *err)
{
    (void)c, (void)err;
    req->done = 1;
    return ZT_OK;
}

static zt_status single_wait(zt_comm *c, zt_comm_req *req, zt_error *err)
{
    (void)c, (void)err;
    req->done = 1;
    return ZT_OK;
}

static int single_test(zt_comm *c, zt_comm_req *req)
{
    (void)c;
    return req->done ? 1 : 1;
}

static zt_status single_split(zt_comm *c, int color, int key, zt_comm **out, zt_error *err)
{
    (void)c, (void)color, (void)key;
    return zt_comm_single_create(out, err);
}

static void single_destroy(zt_comm *c) { free(c); }

static const zt_comm_iface single_iface = {
    /* .name = */ "single",
    /* .allgather = */ single_allgather,
    /* .reduce_scatter = */ single_reduce_scatter,
    /* .allreduce = */ single_allreduce,
    /* .alltoall = */ single_allgather,
    /* .broadcast = */ single_broadcast,
    /* .barrier = */ single_barrier,
    /* .wait = */ single_wait,
    /* .test = */ single_test,
    /* .split = */ single_split,
    /* .destroy = */ single_destroy,
    /* .wait_event = */ NULL, /* host memory: the host orders it */
    /* .complete_on = */ NULL,
    /* .node_id = */ NULL, /* one rank */
    /* .gatherv = */ single_gatherv,
    /* .allgatherv = */ single_allgatherv,
};

zt_status zt_comm_single_create(zt_comm **out, zt_error *err)
{
    zt_comm *c = calloc(1, sizeof *c);
    if (!c)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating the single communicator");
    c->iface = &single_iface;
    c->rank = 0;
    c->size = 1;
    *out = c;
    return ZT_OK;
}

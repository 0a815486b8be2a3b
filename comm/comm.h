/* SPDX-License-Identifier: MIT */
/* Comm backend interface: collectives over a communicator of ranks, each asynchronous with a
 * completion handle. `single` (world size 1) is always built; `mpi` and `nccl` when enabled.
 * Buffers are in the memory the backend works on (host memory for single/mpi, device memory
 * for nccl). Counts are elements of the given type per rank unless stated. Ordering: collectives
 * issued on one communicator complete in issue order on every rank; callers must issue the
 * same collectives in the same order on every rank. */
#ifndef ZT_RUNTIME_COMM_H
#define ZT_RUNTIME_COMM_H

#include "core/export.h"
#include "core/error.h"
#include "device/device.h"

#include <stddef.h>
#include <stdint.h>

typedef enum zt_comm_dtype {
    ZT_COMM_U8 = 0,
    ZT_COMM_F32,
    ZT_COMM_F64,
    ZT_COMM_I64,
    ZT_COMM_BF16,
    ZT_COMM_F16
} zt_comm_dtype;

typedef enum zt_reduce_op { ZT_REDUCE_SUM = 0, ZT_REDUCE_MAX } zt_reduce_op;

typedef struct zt_comm zt_comm;

/* A pending collective; filled by the issuing call, finished by wait(). */
typedef struct zt_comm_req {
    void *impl;
    int done;
} zt_comm_req;

typedef struct zt_comm_iface {
    const char *name;
    /* recv[r*count ..] = send of rank r; send may equal recv + rank*count (in place) */
    zt_status (*allgather)(zt_comm *c, const void *send, void *recv, size_t count, zt_comm_dtype dt,
                           zt_comm_req *req, zt_error *err);
    /* recv[0..count) = sum over ranks of send[rank*count ..]; send holds size*count */
    zt_status (*reduce_scatter)(zt_comm *c, const void *send, void *recv, size_t count,
                                zt_comm_dtype dt, zt_reduce_op op, zt_comm_req *req, zt_error *err);
    /* recv = op over ranks of send (count elements); send may equal recv */
    zt_status (*allreduce)(zt_comm *c, const void *send, void *recv, size_t count, zt_comm_dtype dt,
                           zt_reduce_op op, zt_comm_req *req, zt_error *err);
    /* block r of send goes to rank r; block q of recv comes from rank q (count per block) */
    zt_status (*alltoall)(zt_comm *c, const void *send, void *recv, size_t count, zt_comm_dtype dt,
                          zt_comm_req *req, zt_error *err);
    zt_status (*broadcast)(zt_comm *c, void *buf, size_t count, zt_comm_dtype dt, int root,
                           zt_comm_req *req, zt_error *err);
    zt_status (*barrier)(zt_comm *c, zt_comm_req *req, zt_error *err);
    zt_status (*wait)(zt_comm *c, zt_comm_req *req, zt_error *err);
    /* 1 done, 0 pending, < 0 error */
    int (*test)(zt_comm *c, zt_comm_req *req);
    /* ranks with equal color form a new communicator ordered by key */
    zt_status (*split)(zt_comm *c, int color, int key, zt_comm **out, zt_error *err);
    void (*destroy)(zt_comm *c);
    /* Optional, for backends whose collectives run on a device stream (nccl); NULL where the
     * host runs them. Later collectives on c run after `event` (the device backend's
     * zt_event *) on the device: the host need not wait for it first. */
    zt_status (*wait_event)(zt_comm *c, void *event, zt_error *err);
    /* Ends req without a host wait: work queued on `stream` (a zt_stream *) after this call
     * runs after the collective, on the device. */
    zt_status (*complete_on)(zt_comm *c, zt_comm_req *req, void *stream, zt_error *err);
    /* Optional (NULL: zt_comm_node_ids compares host names and machine ids). Collective over
     * c's ranks: *node = the lowest rank of c on this rank's node, as the backend knows nodes
     * (mpi: the ranks that share memory, MPI_Comm_split_type); *how says so, for messages. */
    zt_status (*node_id)(zt_comm *c, int *node, const char **how, zt_error *err);
    /* Blocks of unequal size, host memory: rank r's counts[r] elements (send) land at
     * recv + displs[r] elements on `root` only (gatherv; recv is not touched elsewhere and
     * may be NULL there) or on every rank (allgatherv). counts and displs (size entries, the
     * same on every rank) are read before the call returns; send and recv stay the caller's
     * until the request completes. NULL in a backend whose collectives take device memory
     * (nccl): its host communicator (zt_comm_host) takes host buffers. */
    zt_status (*gatherv)(zt_comm *c, const void *send, void *recv, const size_t *counts,
                         const size_t *displs, zt_comm_dtype dt, int root, zt_comm_req *req,
                         zt_error *err);
    zt_status (*allgatherv)(zt_comm *c, const void *send, void *recv, const size_t *counts,
                            const size_t *displs, zt_comm_dtype dt, zt_comm_req *req,
                            zt_error *err);
} zt_comm_iface;

struct zt_comm {
    const zt_comm_iface *iface;
    int rank;
    int size;
    /* The communicator for collectives over host memory (agreements, the norm's sums,
     * parameter reads, checkpoint names) over the same ranks in the same order: NULL means
     * this one (single, mpi); the nccl backend keeps its MPI bootstrap for it. */
    zt_comm *host;
};

/* The backend's slots, one wrapper each: callers never reach into the table. */
static inline zt_status zt_comm_allgather(zt_comm *c, const void *send, void *recv, size_t count,
                                          zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    return c->iface->allgather(c, send, recv, count, dt, req, err);
}
static inline zt_status zt_comm_reduce_scatter(zt_comm *c, const void *send, void *recv,
                                               size_t count, zt_comm_dtype dt, zt_reduce_op op,
                                               zt_comm_req *req, zt_error *err)
{
    return c->iface->reduce_scatter(c, send, recv, count, dt, op, req, err);
}
static inline zt_status zt_comm_allreduce(zt_comm *c, const void *send, void *recv, size_t count,
                                          zt_comm_dtype dt, zt_reduce_op op, zt_comm_req *req,
                                          zt_error *err)
{
    return c->iface->allreduce(c, send, recv, count, dt, op, req, err);
}
static inline zt_status zt_comm_alltoall(zt_comm *c, const void *send, void *recv, size_t count,
                                         zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    return c->iface->alltoall(c, send, recv, count, dt, req, err);
}
static inline zt_status zt_comm_broadcast(zt_comm *c, void *buf, size_t count, zt_comm_dtype dt,
                                          int root, zt_comm_req *req, zt_error *err)
{
    return c->iface->broadcast(c, buf, count, dt, root, req, err);
}
static inline zt_status zt_comm_barrier(zt_comm *c, zt_comm_req *req, zt_error *err)
{
    return c->iface->barrier(c, req, err);
}
static inline zt_status zt_comm_wait(zt_comm *c, zt_comm_req *req, zt_error *err)
{
    return c->iface->wait(c, req, err);
}
static inline int zt_comm_test(zt_comm *c, zt_comm_req *req) { return c->iface->test(c, req); }
static inline zt_status zt_comm_split(zt_comm *c, int color, int key, zt_comm **out, zt_error *err)
{
    return c->iface->split(c, color, key, out, err);
}
static inline void zt_comm_destroy(zt_comm *c) { c->iface->destroy(c); }
static inline zt_status zt_comm_gatherv(zt_comm *c, const void *send, void *recv,
                                        const size_t *counts, const size_t *displs,
                                        zt_comm_dtype dt, int root, zt_comm_req *req, zt_error *err)
{
    if (!c->iface->gatherv)
        return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                      "the %s comm backend gathers no host buffers; use its host communicator",
                      c->iface->name);
    if (root < 0 || root >= c->size)
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "gather root %d outside a world of %d", root, c->size);
    return c->iface->gatherv(c, send, recv, counts, displs, dt, root, req, err);
}
static inline zt_status zt_comm_allgatherv(zt_comm *c, const void *send, void *recv,
                                           const size_t *counts, const size_t *displs,
                                           zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    if (!c->iface->allgatherv)
        return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                      "the %s comm backend gathers no host buffers; use its host communicator",
                      c->iface->name);
    return c->iface->allgatherv(c, send, recv, counts, displs, dt, req, err);
}

/* 1 when c's collectives run on a device stream (nccl): ordered after device work by an
 * event, and device work after them, with no host wait (wait_event, complete_on). */
static inline int zt_comm_device_ordered(const zt_comm *c) { return c->iface->wait_event != NULL; }
/* Later collectives on c run after `event` (a zt_event of the device backend): on the device
 * where c is device-ordered, else once the host has waited for it on dev. */
static inline zt_status zt_comm_wait_event(zt_comm *c, zt_device *dev, zt_event *event,
                                           zt_error *err)
{
    if (!c->iface->wait_event)
        return zt_device_event_synchronize(dev, event, err);
    return c->iface->wait_event(c, event, err);
}
/* Work queued on `stream` after this call runs after req: on the device where c is
 * device-ordered, else req is waited for on the host now. */
static inline zt_status zt_comm_complete_on(zt_comm *c, zt_comm_req *req, zt_stream *stream,
                                            zt_error *err)
{
    if (!c->iface->complete_on)
        return zt_comm_wait(c, req, err);
    return c->iface->complete_on(c, req, stream, err);
}

/* The communicator that takes host-memory buffers for c's ranks. */
static inline zt_comm *zt_comm_host(zt_comm *c) { return c->host ? c->host : c; }

ZT_MODULE_API size_t zt_comm_dtype_size(zt_comm_dtype dt);

/* The comm dtype that carries elements of a zt_dtype. */
static inline zt_comm_dtype zt_comm_dtype_of(zt_dtype t)
{
    return t == ZT_F32 ? ZT_COMM_F32 : t == ZT_BF16 ? ZT_COMM_BF16 : ZT_COMM_F16;
}

/* The world communicator that joins the ranks at zt_runtime_create ("single", "mpi", "auto":
 * mpi when launched by mpirun with more than one rank, else single; "nccl": its MPI
 * bootstrap, which zt_comm_nccl_open turns into an NCCL communicator once the rank's GPU is
 * chosen). */
zt_status zt_comm_create(const char *backend, zt_comm **out, zt_error *err);

/* This rank's place among the ranks on its machine (the same host name and machine id):
 * local_rank of local_size. Collective over c's ranks; host memory. */
zt_status zt_comm_local_rank(zt_comm *c, int *local_rank, int *local_size, zt_error *err);

/* Every rank's node: node_id[r] (size entries, equal for ranks on one node) over the ranks of
 * zt_comm_host(c), the same table on every rank; *how says how the nodes were found (a static
 * string). The backend's node_id where it has one, else host names and machine ids.
 * Collective; host memory. */
zt_status zt_comm_node_ids(zt_comm *c, int64_t *node_id, const char **how, zt_error *err);

/* Collectives that did not complete: one rule for every caller. A wait that fails because a
 * peer stopped responding (the timeout, $ZT_COMM_TIMEOUT) leaves its collective inside the
 * backend (MPI's worker thread), where it may still complete later, when a frozen peer
 * resumes, and then read or write its buffers. So after a failed wait, while
 * zt_comm_pending(req), nothing the collective reads or writes may be freed, reused or left
 * on a stack: its buffers belong to the request from then on, which keeps them allocated
 * until the process ends (a deliberate leak, bounded: the runtime that saw the failure
 * stops, must be destroyed, and no process goes on with MPI after it). The backend frees
 * nothing of the caller's and writes its own results (node_id, split) into memory of its own
 * until a wait completes. Callers keep the rule in one of two ways:
 * - zt_comm_wait_keep below: the collective's buffers in one heap block the caller frees
 *   after the wait; the block is handed to the request (the pointer set to NULL) instead;
 * - the same test, zt_comm_pending, where buffers of other allocators are left alone (the
 *   gradient reductions of runtime/reduce.c; prefetch/gather.c leaves a gather's buffers
 *   after any failed wait, which covers it).
 * The *_sync helpers below run the collective on a heap block of their own (a copy of the
 * caller's buffers), so their callers may pass any memory, a stack variable included. */
static inline int zt_comm_pending(const zt_comm_req *req) { return req->impl != NULL; }

/* Waits for req; if its collective is still pending afterwards (the wait failed), *block, the
 * heap block holding every buffer the collective reads or writes, is handed to it: set to NULL
 * so that the caller's free() does nothing. Returns the wait's status. */
zt_status zt_comm_wait_keep(zt_comm *c, zt_comm_req *req, void **block, zt_error *err);

/* Issue + wait, for the synchronous call sites; host memory (on zt_comm_host(c)). */
zt_status zt_comm_allreduce_sync(zt_comm *c, void *buf, size_t count, zt_comm_dtype dt,
                                 zt_reduce_op op, zt_error *err);
zt_status zt_comm_allgather_sync(zt_comm *c, const void *send, void *recv, size_t count,
                                 zt_comm_dtype dt, zt_error *err);

/* Host memory (on zt_comm_host(c)), issue + wait: gatherv to root, or allgatherv when
 * root < 0 (see zt_comm_iface.gatherv). */
zt_status zt_comm_gatherv_sync(zt_comm *c, const void *send, void *recv, const size_t *counts,
                               const size_t *displs, zt_comm_dtype dt, int root, zt_error *err);

/* Host memory, issue + wait. */
zt_status zt_comm_broadcast_sync(zt_comm *c, void *buf, size_t count, zt_comm_dtype dt, int root,
                                 zt_error *err);

/* Collective: every rank contributes its status. Returns the local status if it failed,
 * ZT_ERR_COMM naming the first failing rank if another rank failed, else ZT_OK. */
ZT_MODULE_API zt_status zt_comm_agree(zt_comm *c, zt_status local, const char *what, zt_error *err);
/* zt_comm_agree that also says whether the statuses were exchanged (*exchanged = 1: this
 * rank saw every rank's status, the same ones every rank that saw them decided on; 0: the
 * collective itself failed here, and other ranks may still have seen them all). */
zt_status zt_comm_agree_exchanged(zt_comm *c, zt_status local, const char *what, int *exchanged,
                                  zt_error *err);

/* The number of ranks the launcher (mpirun, srun) started, 1 when not launched by one. */
int zt_launcher_world_size(void);

zt_status zt_comm_single_create(zt_comm **out, zt_error *err);

/* What the mpi and nccl modules (core/module.h: libztier-mpi.so, libztier-nccl.so in
 * libztier.so; linked in in libztier.a) give: the one of the two ways to make a communicator
 * the backend has; the other slot is NULL. */
typedef struct zt_comm_backend {
    /* mpi: the world communicator (initialises MPI unless the program did) */
    zt_status (*create)(zt_comm **out, zt_error *err);
    /* nccl: see zt_comm_nccl_open */
    zt_status (*open_device)(zt_comm *boot, int device, zt_comm **out, zt_error *err);
} zt_comm_backend;

#ifdef ZT_HAVE_MPI
/* The world communicator over MPI, from the mpi module (loaded on first use). */
zt_status zt_comm_mpi_create(zt_comm **out, zt_error *err);
#endif
#ifdef ZT_HAVE_NCCL
/* An NCCL communicator over boot's ranks on `device` (collective; every rank or none
 * succeeds), from the nccl module (loaded on first use). On success it owns boot (its host
 * communicator); on failure boot stays the caller's. */
zt_status zt_comm_nccl_open(zt_comm *boot, int device, zt_comm **out, zt_error *err);
#endif

#endif

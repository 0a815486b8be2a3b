/* SPDX-License-Identifier: MIT */
/* The `nccl` comm backend (device memory). Collectives run on the communicator's own CUDA
 * stream, on the rank's GPU (made current around every call: the runtime's threads may have
 * another current); a request is a CUDA event recorded after the collective. The runtime
 * opens it at commit, once the rank's GPU is chosen, over the MPI communicator it joined the
 * ranks with (zt_comm_nccl_open), which bootstraps the unique id. A collective can be
 * ordered on the GPU both ways: after a device event (wait_event: no host wait before it),
 * and before later work on a stream (complete_on: no host wait after it). Host waits poll
 * the event against a deadline
 * ($ZT_COMM_TIMEOUT seconds, default 600) and abort the communicator when it passes or when
 * NCCL reports an asynchronous error (a failed peer), so a dead peer becomes an error instead
 * of a hang: the abort ends the kernels still waiting for it. An aborted communicator is gone
 * (NCCL frees it) and every later call fails saying so.
 *
 * A collective NCCL accepted runs whatever happens after: a later CUDA call that fails
 * (recording its event, moving its result, ordering a stream after it) does not un-issue it.
 * The call then returns its error only once the collective has finished or the communicator
 * was aborted, so the caller may free the buffers an error hands back. Destroying the
 * communicator waits the same way (finished, or aborted at the deadline or on an error).
 * Making a communicator (open, split) is agreed over the host side: every rank keeps its new
 * one or none does, and no rank enters ncclCommSplit unless every rank will.
 *
 * The MPI bootstrap stays open as the communicator's host side (zt_comm_host): the runtime's agreements, the norm's sums, the
 * parameter reads and checkpoint names go over it in host memory, the same sequence of
 * collectives the MPI tests prove; the device buffers go over NCCL. On one GPU it runs with
 * world size 1 (MPI starts as a singleton without mpirun). Reductions take every type the
 * comm has, bf16 and fp16 as NCCL sums them: each step of its ring adds in fp32 and rounds to
 * 16 bits, so an element summed over n ranks is rounded n - 1 times (the runtime's 16-bit
 * gradients, unless communication_data_type "fp32" has it widen them first).
 *
 * This file is compiled and linked wherever CUDA and NCCL are present; it has never run on
 * this project's CPU-only machines. */
#include "comm/comm.h"
#include "core/time.h"
#include "core/log.h"
#include "core/module.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct nccl_comm {
    zt_comm base;
    ncclComm_t comm; /* NULL once aborted */
    cudaStream_t stream;
    int device;
    double timeout_s;
} nccl_comm;

/* The communicator's GPU current for a call; the caller's given back after. */
static int enter(const nccl_comm *c)
{
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess)
        prev = -1;
    if (prev != c->device)
        cudaSetDevice(c->device);
    return prev;
}

static void leave(const nccl_comm *c, int prev)
{
    if (prev >= 0 && prev != c->device)
        cudaSetDevice(prev);
}

/* Aborts the communicator (NCCL frees it; the kernels of its collectives in flight end) and
 * then waits for its stream: after this nothing queued on it touches a caller's buffer. */
static void abort_comm(nccl_comm *c)
{
    if (!c->comm)
        return;
    ncclCommAbort(c->comm);
    c->comm = NULL;
    cudaStreamSynchronize(c->stream);
}

static zt_status aborted(const nccl_comm *c, zt_error *err)
{
    return ZT_ERR(
        err, ZT_ERR_COMM,
        "rank %d: the NCCL communicator was aborted after a collective failed or timed out; "
        "destroy the runtime (every later collective fails)",
        c->base.rank);
}

static const zt_comm_iface nccl_iface;

static zt_status nccl_check(ncclResult_t r, const char *what, zt_error *err)
{
    if (r == ncclSuccess)
        return ZT_OK;
    return ZT_ERR(err, ZT_ERR_COMM, "%s failed: %s", what, ncclGetErrorString(r));
}

static zt_status cuda_check(cudaError_t r, const char *what, zt_error *err)
{
    if (r == cudaSuccess)
        return ZT_OK;
    return ZT_ERR(err, ZT_ERR_DEVICE, "%s failed: %s", what, cudaGetErrorString(r));
}

static int nccl_type(zt_comm_dtype dt, ncclDataType_t *out)
{
    switch (dt) {
    case ZT_COMM_U8:
        *out = ncclUint8;
        return 0;
    case ZT_COMM_F32:
        *out = ncclFloat32;
        return 0;
    case ZT_COMM_F64:
        *out = ncclFloat64;
        return 0;
    case ZT_COMM_I64:
        *out = ncclInt64;
        return 0;
    case ZT_COMM_BF16:
        *out = ncclBfloat16;
        return 0;
    case ZT_COMM_F16:
        *out = ncclFloat16;
        return 0;
    }
    return -1;
}

static zt_status reduce_type(zt_comm_dtype dt, ncclDataType_t *t, zt_error *err)
{
    if (nccl_type(dt, t) != 0)
        return ZT_ERR(err, ZT_ERR_INTERNAL, "nccl backend: no NCCL type for comm dtype %d",
                      (int)dt);
    return ZT_OK;
}

/* Until `ev` (NULL: everything queued on the comm stream) has completed, polled against the
 * deadline. An asynchronous NCCL error (a failed peer: the kernel would wait for it forever)
 * or the deadline aborts the communicator, which ends the collective; ZT_ERR_COMM then. */
static zt_status await(nccl_comm *c, cudaEvent_t ev, zt_error *err)
{
    double deadline = zt_now_s() + c->timeout_s;
    cudaError_t r;
    while ((r = ev ? cudaEventQuery(ev) : cudaStreamQuery(c->stream)) == cudaErrorNotReady) {
        ncclResult_t async = ncclSuccess;
        if (c->comm)
            ncclCommGetAsyncError(c->comm, &async);
        if (async != ncclSuccess) {
            char why[256];
            snprintf(why, sizeof why, "%s", ncclGetLastError(c->comm));
            abort_comm(c);
            return ZT_ERR(err, ZT_ERR_COMM,
                          "rank %d: a collective failed (asynchronous error: %s%s%s); another "
                          "rank has probably failed (the communicator was aborted; destroy the "
                          "runtime)",
                          c->base.rank, ncclGetErrorString(async), *why ? ": " : "", why);
        }
        if (zt_now_s() > deadline) {
            abort_comm(c);
            return ZT_ERR(err, ZT_ERR_COMM,
                          "rank %d: a collective did not complete within %.0f s; another rank has "
                          "probably failed (the communicator was aborted; destroy the runtime)",
                          c->base.rank, c->timeout_s);
        }
        usleep(50);
    }
    return cuda_check(r, "collective completion", err);
}

/* `st` failed after the collective was queued: it runs anyway, and an error tells the caller
 * its buffers are free again, so it must have finished (or been aborted) first. */
static zt_status settle(nccl_comm *c, zt_status st)
{
    zt_error werr = {0};
    if (await(c, NULL, &werr) != ZT_OK)
        ZT_LOGE("comm", "%s", werr.msg); /* the first error is the one returned */
    return st;
}

/* Records completion of everything queued so far on the comm stream into a new event.
 * `queued`: the collective was accepted by NCCL (then it is issued, whatever fails next). */
static zt_status finish(nccl_comm *c, zt_status st, int queued, zt_comm_req *req, zt_error *err)
{
    req->impl = NULL;
    req->done = 1;
    if (st != ZT_OK)
        return queued ? settle(c, st) : st;
    cudaEvent_t ev = NULL;
    st = cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags", err);
    if (st == ZT_OK)
        st = cuda_check(cudaEventRecord(ev, c->stream), "cudaEventRecord", err);
    if (st != ZT_OK) {
        if (ev)
            cudaEventDestroy(ev);
        return settle(c, st);
    }
    req->impl = ev;
    req->done = 0;
    return ZT_OK;
}

static zt_status nccl_allgather_on(zt_comm *base, const void *send, void *recv, size_t count,
                                   zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    ncclDataType_t t = ncclUint8;
    nccl_type(dt, &t);
    zt_status st =
        nccl_check(ncclAllGather(send, recv, count, t, c->comm, c->stream), "ncclAllGather", err);
    return finish(c, st, st == ZT_OK, req, err);
}

static zt_status nccl_reduce_scatter_on(zt_comm *base, const void *send, void *recv, size_t count,
                                        zt_comm_dtype dt, zt_reduce_op op, zt_comm_req *req,
                                        zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    ncclDataType_t t = ncclUint8;
    /* NCCL's in-place form puts this rank's block at send + rank*count; the runtime wants
     * it at recv, so reduce into that slot and move it when recv is elsewhere. */
    size_t block = count * zt_comm_dtype_size(dt);
    char *slot = (char *)send + (size_t)base->rank * block;
    zt_status st = reduce_type(dt, &t, err);
    if (st == ZT_OK)
        st = nccl_check(ncclReduceScatter(send, slot, count, t,
                                          op == ZT_REDUCE_MAX ? ncclMax : ncclSum, c->comm,
                                          c->stream),
                        "ncclReduceScatter", err);
    int queued = st == ZT_OK;
    if (st == ZT_OK && recv != slot)
        st = cuda_check(cudaMemcpyAsync(recv, slot, block, cudaMemcpyDeviceToDevice, c->stream),
                        "cudaMemcpyAsync", err);
    return finish(c, st, queued, req, err);
}

static zt_status nccl_allreduce_on(zt_comm *base, const void *send, void *recv, size_t count,
                                   zt_comm_dtype dt, zt_reduce_op op, zt_comm_req *req,
                                   zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    ncclDataType_t t = ncclUint8;
    zt_status st = reduce_type(dt, &t, err);
    if (st == ZT_OK)
        st = nccl_check(ncclAllReduce(send, recv, count, t, op == ZT_REDUCE_MAX ? ncclMax : ncclSum,
                                      c->comm, c->stream),
                        "ncclAllReduce", err);
    return finish(c, st, st == ZT_OK, req, err);
}

static zt_status nccl_alltoall_on(zt_comm *base, const void *send, void *recv, size_t count,
                                  zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    ncclDataType_t t = ncclUint8;
    nccl_type(dt, &t);
    size_t block = count * zt_comm_dtype_size(dt);
    zt_status st = nccl_check(ncclGroupStart(), "ncclGroupStart", err);
    for (int r = 0; st == ZT_OK && r < base->size; r++) {
        st = nccl_check(
            ncclSend((const char *)send + (size_t)r * block, count, t, r, c->comm, c->stream),
            "ncclSend", err);
        if (st == ZT_OK)
            st = nccl_check(
                ncclRecv((char *)recv + (size_t)r * block, count, t, r, c->comm, c->stream),
                "ncclRecv", err);
    }
    zt_status end = nccl_check(ncclGroupEnd(), "ncclGroupEnd", err);
    /* the sends and receives accepted before a failure may have been issued at the group's end */
    return finish(c, st != ZT_OK ? st : end, 1, req, err);
}

static zt_status nccl_broadcast_on(zt_comm *base, void *buf, size_t count, zt_comm_dtype dt,
                                   int root, zt_comm_req *req, zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    ncclDataType_t t = ncclUint8;
    nccl_type(dt, &t);
    zt_status st = nccl_check(ncclBroadcast(buf, buf, count, t, root, c->comm, c->stream),
                              "ncclBroadcast", err);
    return finish(c, st, st == ZT_OK, req, err);
}

/* A barrier is an all-reduce of one float in device memory. */
static zt_status nccl_barrier_on(zt_comm *base, zt_comm_req *req, zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    float *one = NULL;
    zt_status st = cuda_check(cudaMallocAsync((void **)&one, sizeof(float), c->stream),
                              "cudaMallocAsync", err);
    int queued = 0;
    if (st == ZT_OK) {
        st = nccl_check(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, c->comm, c->stream),
                        "ncclAllReduce (barrier)", err);
        queued = st == ZT_OK;
    }
    if (one)
        cudaFreeAsync(one, c->stream); /* in stream order: after the all-reduce */
    return finish(c, st, queued, req, err);
}

/* Each collective: refused once aborted, issued on the communicator's GPU. */
#define ON_DEVICE(c, err, call)     \
    do {                            \
        if (!(c)->comm)             \
            return aborted(c, err); \
        int prev_ = enter(c);       \
        zt_status st_ = (call);     \
        leave(c, prev_);            \
        return st_;                 \
    } while (0)

static zt_status nccl_allgather(zt_comm *base, const void *send, void *recv, size_t count,
                                zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    ON_DEVICE((nccl_comm *)base, err, nccl_allgather_on(base, send, recv, count, dt, req, err));
}

static zt_status nccl_reduce_scatter(zt_comm *base, const void *send, void *recv, size_t count,
                                     zt_comm_dtype dt, zt_reduce_op op, zt_comm_req *req,
                                     zt_error *err)
{
    ON_DEVICE((nccl_comm *)base, err,
              nccl_reduce_scatter_on(base, send, recv, count, dt, op, req, err));
}

static zt_status nccl_allreduce(zt_comm *base, const void *send, void *recv, size_t count,
                                zt_comm_dtype dt, zt_reduce_op op, zt_comm_req *req, zt_error *err)
{
    ON_DEVICE((nccl_comm *)base, err, nccl_allreduce_on(base, send, recv, count, dt, op, req, err));
}

static zt_status nccl_alltoall(zt_comm *base, const void *send, void *recv, size_t count,
                               zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    ON_DEVICE((nccl_comm *)base, err, nccl_alltoall_on(base, send, recv, count, dt, req, err));
}

static zt_status nccl_broadcast(zt_comm *base, void *buf, size_t count, zt_comm_dtype dt, int root,
                                zt_comm_req *req, zt_error *err)
{
    ON_DEVICE((nccl_comm *)base, err, nccl_broadcast_on(base, buf, count, dt, root, req, err));
}

static zt_status nccl_barrier(zt_comm *base, zt_comm_req *req, zt_error *err)
{
    ON_DEVICE((nccl_comm *)base, err, nccl_barrier_on(base, req, err));
}

/* Later collectives run after `event` (a cudaEvent_t) on the GPU: no host wait before them. */
static zt_status nccl_wait_event(zt_comm *base, void *event, zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    ON_DEVICE(c, err,
              cuda_check(cudaStreamWaitEvent(c->stream, (cudaEvent_t)event, 0),
                         "cudaStreamWaitEvent (comm stream)", err));
}

static void drop_event(zt_comm_req *req)
{
    if (req->impl)
        cudaEventDestroy((cudaEvent_t)req->impl); /* freed once it completes */
    req->impl = NULL;
    req->done = 1;
}

/* The request ends for the host; `stream` (a cudaStream_t) waits for it on the GPU. When it
 * cannot, the host waits for the collective instead, so work queued on `stream` after this
 * call still comes after it; the failure is reported all the same. */
static zt_status complete_on_stream(nccl_comm *c, zt_comm_req *req, void *stream, zt_error *err)
{
    zt_status st =
        req->impl ? cuda_check(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)req->impl, 0),
                               "cudaStreamWaitEvent (after a collective)", err)
                  : ZT_OK;
    if (st != ZT_OK) {
        zt_error werr = {0};
        if (await(c, (cudaEvent_t)req->impl, &werr) != ZT_OK)
            ZT_LOGE("comm", "%s", werr.msg);
    }
    drop_event(req);
    return st;
}

static zt_status nccl_complete_on(zt_comm *base, zt_comm_req *req, void *stream, zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    ON_DEVICE(c, err, complete_on_stream(c, req, stream, err));
}

static zt_status wait_host(nccl_comm *c, zt_comm_req *req, zt_error *err)
{
    zt_status st = await(c, (cudaEvent_t)req->impl, err);
    drop_event(req); /* completed, or ended by the abort */
    return st;
}

static zt_status nccl_wait(zt_comm *base, zt_comm_req *req, zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    if (!req->impl)
        return ZT_OK;
    if (!c->comm) { /* the abort ended it (its stream was synchronized after) */
        drop_event(req);
        return aborted(c, err);
    }
    ON_DEVICE(c, err, wait_host(c, req, err));
}

/* 1 done (the request's event is then freed), 0 pending, < 0 error. */
static int nccl_test(zt_comm *base, zt_comm_req *req)
{
    nccl_comm *c = (nccl_comm *)base;
    if (!req->impl)
        return 1;
    int prev = enter(c);
    cudaError_t r = cudaEventQuery((cudaEvent_t)req->impl);
    if (r == cudaSuccess)
        drop_event(req);
    leave(c, prev);
    return r == cudaSuccess ? 1 : r == cudaErrorNotReady ? 0 : -1;
}

static zt_status make_comm(ncclComm_t comm, zt_comm *host, int device, zt_comm **out,
                           zt_error *err);

static void destroy_device_side(nccl_comm *c);

/* make_comm, then agreed over `boot` (the ranks that made `comm` together): every rank keeps
 * its new communicator or none does. On failure every rank destroys `comm` (NCCL's destroy
 * is collective within a node) and the caller keeps `host`. */
static zt_status make_comm_agreed(ncclComm_t comm, zt_comm *host, int device, zt_comm *boot,
                                  const char *what, zt_comm **out, zt_error *err)
{
    zt_comm *made = NULL;
    zt_status st = make_comm(comm, host, device, &made, err);
    st = zt_comm_agree(boot, st, what, err);
    if (st == ZT_OK) {
        *out = made;
        return ZT_OK;
    }
    if (made) {
        destroy_device_side((nccl_comm *)made); /* destroys comm too */
        free(made);
    } else {
        ncclCommDestroy(comm);
    }
    return st;
}

/* The host communicator is split alike, so agreements stay over the same ranks. ncclCommSplit
 * returns only when every rank of c has called it, so the ranks agree that each has its
 * host side before any enters it: a rank that failed there would leave the others inside
 * for ever. */
static zt_status split_on(nccl_comm *c, int color, int key, zt_comm **out, zt_error *err)
{
    zt_comm *host = NULL;
    zt_status st = zt_comm_split(c->base.host, color, key, &host, err);
    st = zt_comm_agree(c->base.host, st, "splitting the host communicator", err);
    if (st == ZT_OK) {
        ncclComm_t sub = NULL;
        st = nccl_check(ncclCommSplit(c->comm, color, key, &sub, NULL), "ncclCommSplit", err);
        st = st == ZT_OK /* one agreement either way */
                 ? make_comm_agreed(sub, host, c->device, c->base.host, "ncclCommSplit", out, err)
                 : zt_comm_agree(c->base.host, st, "ncclCommSplit", err);
    }
    if (st != ZT_OK && host)
        zt_comm_destroy(host);
    return st;
}

static zt_status nccl_split(zt_comm *base, int color, int key, zt_comm **out, zt_error *err)
{
    nccl_comm *c = (nccl_comm *)base;
    ON_DEVICE(c, err, split_on(c, color, key, out, err));
}

/* The device side of a communicator: its collectives finished or aborted (a collective never
 * waited for, whose peer failed or hangs, ends at the error or the deadline instead of
 * holding destroy forever), then the NCCL communicator and the stream. Not the host side. */
static void destroy_device_side(nccl_comm *c)
{
    int prev = enter(c);
    zt_error werr = {0};
    if (c->comm && await(c, NULL, &werr) != ZT_OK)
        ZT_LOGW("comm", "destroying the NCCL communicator: %s", werr.msg);
    cudaStreamSynchronize(c->stream);
    if (c->comm) /* an aborted one is gone already */
        ncclCommDestroy(c->comm);
    cudaStreamDestroy(c->stream);
    leave(c, prev);
}

static void nccl_destroy(zt_comm *base)
{
    nccl_comm *c = (nccl_comm *)base;
    destroy_device_side(c);
    if (base->host)
        zt_comm_destroy(base->host);
    free(c);
}

static const zt_comm_iface nccl_iface = {
    /* .name = */ "nccl",
    /* .allgather = */ nccl_allgather,
    /* .reduce_scatter = */ nccl_reduce_scatter,
    /* .allreduce = */ nccl_allreduce,
    /* .alltoall = */ nccl_alltoall,
    /* .broadcast = */ nccl_broadcast,
    /* .barrier = */ nccl_barrier,
    /* .wait = */ nccl_wait,
    /* .test = */ nccl_test,
    /* .split = */ nccl_split,
    /* .destroy = */ nccl_destroy,
    /* .wait_event = */ nccl_wait_event,
    /* .complete_on = */ nccl_complete_on,
    /* .node_id = */ NULL, /* its host communicator's (MPI) finds the nodes */
    /* .gatherv = */ NULL, /* host buffers only: the MPI communicator in c->host */
    /* .allgatherv = */ NULL,
};

/* On success, owns comm and host (the MPI communicator for host-memory collectives); on
 * failure, the caller keeps both. The device is current. */
static zt_status make_comm(ncclComm_t comm, zt_comm *host, int device, zt_comm **out, zt_error *err)
{
    nccl_comm *c = calloc(1, sizeof *c);
    if (!c)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating an NCCL communicator");
    c->base.iface = &nccl_iface;
    c->base.host = host;
    c->comm = comm;
    c->device = device;
    ncclCommUserRank(comm, &c->base.rank);
    ncclCommCount(comm, &c->base.size);
    const char *t = getenv("ZT_COMM_TIMEOUT");
    c->timeout_s = t && atof(t) > 0 ? atof(t) : 600.0;
    zt_status st = cuda_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                              "cudaStreamCreate", err);
    if (st != ZT_OK) {
        free(c);
        return st;
    }
    *out = &c->base;
    return ZT_OK;
}

static zt_status open_on(zt_comm *boot, int device, zt_comm **out, zt_error *err)
{
    zt_status st = ZT_OK;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (boot->rank == 0)
        st = nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", err);
    zt_comm_req req = {0};
    st = zt_comm_agree(boot, st, "ncclGetUniqueId", err);
    if (st == ZT_OK)
        st = zt_comm_broadcast(boot, &id, sizeof id, ZT_COMM_U8, 0, &req, err);
    if (st == ZT_OK)
        st = zt_comm_wait(boot, &req, err);
    ncclComm_t comm = NULL;
    if (st == ZT_OK)
        st = nccl_check(ncclCommInitRank(&comm, boot->size, id, boot->rank), "ncclCommInitRank",
                        err);
    zt_status local = st;
    st = zt_comm_agree(boot, st, "ncclCommInitRank", err); /* every rank, or none, goes on */
    if (st == ZT_OK) /* the bootstrap stays in the new communicator: host-memory agreements */
        return make_comm_agreed(comm, boot, device, boot, "ncclCommInitRank", out, err);
    if (local == ZT_OK)
        ncclCommDestroy(comm);
    return st;
}

static zt_status nccl_open(zt_comm *boot, int device, zt_comm **out, zt_error *err)
{
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess)
        prev = -1;
    zt_status st = cuda_check(cudaSetDevice(device), "cudaSetDevice (the rank's GPU)", err);
    if (st == ZT_OK)
        st = open_on(boot, device, out, err);
    if (prev >= 0)
        cudaSetDevice(prev);
    return st;
}

/* The module's entry point (core/module.h): libztier-nccl.so in libztier.so, linked in in
 * libztier.a; zt_comm_nccl_open (comm.c) reaches nccl_open through it. */
static const zt_comm_backend nccl_backend = {/* .create = */ NULL, /* .open_device = */ nccl_open};
static const zt_module nccl_module = {ZT_MODULE_ABI, "nccl", &nccl_backend};
const zt_module *ztier_nccl_module_v1(void) { return &nccl_module; }

/* SPDX-License-Identifier: MIT */
/* The `mpi` comm backend (host memory). Each communicator runs its collectives as blocking
 * MPI calls on worker threads ("lanes"): progress never depends on the caller entering MPI
 * (MPI is initialised with MPI_THREAD_MULTIPLE).
 *
 * Several collectives in flight: a communicator whose members are on more than one host has
 * 4 lanes ($ZT_MPI_LANES sets the number for every communicator, 1-16), each an MPI
 * communicator of its own (lane 0 the communicator itself, the others MPI_Comm_dup's of it)
 * with its own worker thread; on one host, where a collective's latency is a memory copy, it
 * has 1. The k-th collective issued on the communicator runs on lane k mod lanes. MPI
 * requires every rank to issue the collectives of one MPI communicator in the same order:
 * each rank issues the same sequence (comm.h's rule for callers) and every rank counts the
 * same lanes (from the host names exchanged at creation), so the k-th collective lands on the
 * same lane everywhere, and each lane runs its own in issue order. Collectives on different
 * lanes proceed at the same time, so gathers issued ahead of use and reductions behind it do
 * not wait for each other's round trips. Each lane runs the same blocking MPI calls one thread
 * would (the same algorithms for the same sizes), so results are bitwise those of one lane.
 * Completion stays in issue order as the caller sees it: a wait returns once its collective
 * and every collective issued before it on the communicator are done.
 *
 * bf16/fp16 reductions move 16-bit values: user-defined MPI_Ops add two elements in fp32 and
 * round the sum to 16 bits (as NCCL's ring does at each step), so an element summed over n
 * ranks is rounded n - 1 times; they are non-commutative ops, so MPI combines in rank order
 * and every rank of an all-reduce gets the same bits. (The runtime widens 16-bit gradients to
 * fp32 first where communication_data_type "fp32" asks for exact sums.) A wait that exceeds the timeout ($ZT_COMM_TIMEOUT
 * seconds, default 600) returns ZT_ERR_COMM instead of hanging when a peer has failed.
 *
 * Exit after a peer stopped responding: a collective whose wait timed out stays inside MPI
 * in its worker thread, given up on ("abandoned"; so are collectives still queued when their
 * communicator is destroyed). While one is, nothing in the process blocks on the lost peer:
 * other waits fail at once instead of after one more timeout each, new communicators are
 * refused (MPI_Comm_dup), MPI_Comm_free is skipped (collective in the standard), and the
 * exit handler does not call MPI_Finalize, which would wait forever (it logs a warning).
 * A communicator whose collective timed out or failed stays failed (with the communicators
 * split from it): later collectives on it, and a wait retried for the given-up one, fail at
 * once with that first failure's message, even when the given-up collective ends after all.
 * So each rank that sees the failure returns ZT_ERR_COMM within one timeout and its process
 * exits with the program's status; the launcher then ends the job (Open MPI's mpirun kills
 * the remaining ranks, the stopped one included, and reports a process that exited without
 * finalising). MPI_Abort is not called: the library never ends the process itself, and it
 * would kill the other ranks before they report their own error. An abandoned collective
 * that completes after all (a late, not a dead, peer) no longer counts: MPI is then
 * finalised as usual. An application that initialised MPI itself finalises it itself, so
 * must not call MPI_Finalize after ztier reported a collective that did not complete. */
#include "core/convert.h"
#include "comm/comm.h"
#include "core/log.h"
#include "core/module.h"
#include "core/time.h"
#include "core/trace.h"

#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum mpi_op_kind {
    OP_ALLGATHER,
    OP_REDUCE_SCATTER,
    OP_ALLREDUCE,
    OP_ALLTOALL,
    OP_BCAST,
    OP_BARRIER,
    OP_SPLIT,
    OP_NODE_ID,
    OP_GATHERV,
    OP_ALLGATHERV
};

typedef struct mpi_op {
    enum mpi_op_kind kind;
    const void *send;
    void *recv;
    size_t count;
    zt_comm_dtype dt;
    zt_reduce_op rop;
    int root, color, key;
    /* Results the worker writes into the op itself, never into the caller's memory: the
     * waiting thread copies them out once the op completed (a wait that timed out leaves
     * them, and the op, to the worker; comm.h's rule on collectives that did not complete) */
    zt_comm **split_out, *split; /* OP_SPLIT */
    int *node_out, node;         /* OP_NODE_ID */
    int *vcounts, *vdispls;      /* gatherv/allgatherv: size entries each, owned by the op */
    /* completion */
    int done;
    int abandoned; /* given up on before it completed; counted in g_abandoned */
    zt_status status;
    char msg[ZT_ERROR_MSG_MAX];
    uint64_t seq; /* issue order on its communicator */
    struct mpi_op *next;
} mpi_op;

/* Who a member of a communicator is, for messages: its world rank and host name. */
typedef struct mpi_member {
    int world_rank;
    char host[64];
} mpi_member;

/* A failure shared by a communicator and those split from it (one family: every one of them
 * reaches the failed peer). Recorded once, by the first collective that timed out or ended
 * with an MPI error; never cleared: the runtime that saw it must be destroyed. */
typedef struct mpi_failure {
    atomic_int refs;   /* the family's communicators; the last one destroyed frees it */
    atomic_int failed; /* set after first is written; first never changes after */
    zt_error first;
} mpi_failure;

#define MPI_LANES_MAX 16

typedef struct mpi_comm mpi_comm;

/* One worker thread and the MPI communicator its collectives run on. */
typedef struct mpi_lane {
    mpi_comm *owner;
    MPI_Comm comm;
    pthread_t thread;
    pthread_cond_t work;
    mpi_op *head, *tail; /* queued and running, in issue order */
    char track[48];      /* the worker's name in the timeline trace */
} mpi_lane;

struct mpi_comm {
    zt_comm base;
    mpi_failure *failure;
    MPI_Comm comm;       /* lane 0's */
    mpi_member *members; /* [size], from the exchange at creation */
    pthread_mutex_t lock;
    pthread_cond_t done;
    mpi_lane lanes[MPI_LANES_MAX];
    int n_lanes;
    uint64_t next_seq;
    int stop;
    double timeout_s;
};

static const zt_comm_iface mpi_iface;

/* Collectives given up on (their wait timed out, or their communicator was destroyed with
 * them queued) that have not completed. While any remain, a peer has stopped responding and
 * MPI calls that synchronise with it (later collectives, MPI_Comm_free, MPI_Finalize) would
 * block: process-wide, because every communicator reaches that peer. */
static atomic_int g_abandoned;

/* Collectives that MPI ended with an error: a peer is gone (Open MPI's --enable-recovery), so
 * MPI_Comm_dup, MPI_Comm_free and MPI_Finalize could block on it too. */
static atomic_int g_errors;

static pthread_mutex_t g_failure_lock = PTHREAD_MUTEX_INITIALIZER;

/* Records e as c's family's failure unless one is recorded already, and wakes c's waiters
 * (c->lock not held). */
static void failure_record(mpi_comm *c, const zt_error *e)
{
    pthread_mutex_lock(&g_failure_lock);
    if (!atomic_load(&c->failure->failed)) {
        c->failure->first = *e;
        atomic_store(&c->failure->failed, 1);
    }
    pthread_mutex_unlock(&g_failure_lock);
    pthread_mutex_lock(&c->lock);
    pthread_cond_broadcast(&c->done);
    pthread_mutex_unlock(&c->lock);
}

/* Once c's family has failed: copies the first failure into err and returns 1. */
static int failure_get(const mpi_comm *c, zt_error *err)
{
    if (!atomic_load(&c->failure->failed))
        return 0;
    if (err)
        *err = c->failure->first;
    return 1;
}

/* Counts op as given up on, once (c->lock held). */
static void abandon(mpi_op *op)
{
    if (!op->abandoned) {
        op->abandoned = 1;
        atomic_fetch_add(&g_abandoned, 1);
    }
}

static MPI_Datatype mpi_type(zt_comm_dtype dt)
{
    switch (dt) {
    case ZT_COMM_F32:
        return MPI_FLOAT;
    case ZT_COMM_BF16: /* reduced by the ops of op16 */
    case ZT_COMM_F16:
        return MPI_UINT16_T;
    case ZT_COMM_F64:
        return MPI_DOUBLE;
    case ZT_COMM_I64:
        return MPI_INT64_T;
    default:
        return MPI_BYTE;
    }
}

static int is_16bit(zt_comm_dtype dt) { return dt == ZT_COMM_BF16 || dt == ZT_COMM_F16; }

/* inout[i] = in[i] op inout[i] for 16-bit elements of t: both widened exactly, added (or
 * compared) in fp32, the result rounded to nearest even once. */
static void combine16(const void *in, void *inout, int n, zt_dtype t, int max)
{
    for (int i = 0; i < n; i++) {
        float a = zt_load_f32(in, t, (size_t)i), b = zt_load_f32(inout, t, (size_t)i);
        zt_store_f32(inout, t, (size_t)i, max ? (a > b ? a : b) : a + b);
    }
}

static void sum_bf16(void *in, void *inout, int *n, MPI_Datatype *t)
{
    (void)t;
    combine16(in, inout, *n, ZT_BF16, 0);
}
static void sum_f16(void *in, void *inout, int *n, MPI_Datatype *t)
{
    (void)t;
    combine16(in, inout, *n, ZT_F16, 0);
}
static void max_bf16(void *in, void *inout, int *n, MPI_Datatype *t)
{
    (void)t;
    combine16(in, inout, *n, ZT_BF16, 1);
}
static void max_f16(void *in, void *inout, int *n, MPI_Datatype *t)
{
    (void)t;
    combine16(in, inout, *n, ZT_F16, 1);
}

/* The 16-bit ops, made once MPI is initialised (mpi_create): [bf16, fp16][sum, max]. */
static MPI_Op g_op16[2][2];
static int g_op16_rc = MPI_SUCCESS;
static pthread_once_t g_op16_once = PTHREAD_ONCE_INIT;

static void make_op16(void)
{
    MPI_User_function *fn[2][2] = {{sum_bf16, max_bf16}, {sum_f16, max_f16}};
    for (int t = 0; t < 2; t++)
        for (int m = 0; m < 2; m++)
            if (g_op16_rc == MPI_SUCCESS) /* non-commutative: combined in rank order */
                g_op16_rc = MPI_Op_create(fn[t][m], 0, &g_op16[t][m]);
}

static MPI_Op mpi_reduce_op(zt_comm_dtype dt, zt_reduce_op rop)
{
    if (is_16bit(dt))
        return g_op16[dt == ZT_COMM_F16][rop == ZT_REDUCE_MAX];
    return rop == ZT_REDUCE_MAX ? MPI_MAX : MPI_SUM;
}

static int set_error(mpi_op *op, int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return 0;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    op->status = ZT_ERR_COMM;
    snprintf(op->msg, sizeof op->msg, "%s failed: %s", what, text);
    return -1;
}

static zt_status make_comm(MPI_Comm comm, mpi_failure *family, zt_comm **out, zt_error *err);
static void mpi_destroy(zt_comm *base);

static void run_op(mpi_comm *c, MPI_Comm comm, mpi_op *op)
{
    MPI_Datatype t = mpi_type(op->dt);
    int n = (int)op->count;
    MPI_Op mop = mpi_reduce_op(op->dt, op->rop);
    switch (op->kind) {
    case OP_ALLGATHER: {
        const void *send = op->send == (char *)op->recv + op->count * zt_comm_dtype_size(op->dt) *
                                                              (size_t)c->base.rank
                               ? MPI_IN_PLACE
                               : op->send;
        set_error(op, MPI_Allgather(send, n, t, op->recv, n, t, comm), "MPI_Allgather");
        break;
    }
    case OP_REDUCE_SCATTER:
    case OP_ALLREDUCE:
        if (op->kind == OP_ALLREDUCE) {
            const void *send = op->send == op->recv ? MPI_IN_PLACE : op->send;
            set_error(op, MPI_Allreduce(send, op->recv, n, t, mop, comm), "MPI_Allreduce");
        } else {
            const void *send = op->send == op->recv ? MPI_IN_PLACE : op->send;
            set_error(op, MPI_Reduce_scatter_block(send, op->recv, n, t, mop, comm),
                      "MPI_Reduce_scatter_block");
        }
        break;
    case OP_ALLTOALL:
        set_error(op, MPI_Alltoall(op->send, n, t, op->recv, n, t, comm), "MPI_Alltoall");
        break;
    case OP_BCAST:
        set_error(op, MPI_Bcast(op->recv, n, t, op->root, comm), "MPI_Bcast");
        break;
    case OP_BARRIER:
        set_error(op, MPI_Barrier(comm), "MPI_Barrier");
        break;
    case OP_NODE_ID: { /* the lowest rank among those that share this rank's memory */
        MPI_Comm shm;
        if (set_error(
                op,
                MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, c->base.rank, MPI_INFO_NULL, &shm),
                "MPI_Comm_split_type"))
            break;
        op->node = c->base.rank;
        set_error(op, MPI_Allreduce(MPI_IN_PLACE, &op->node, 1, MPI_INT, MPI_MIN, shm),
                  "MPI_Allreduce");
        MPI_Comm_free(&shm);
        break;
    }
    case OP_GATHERV:
        set_error(op,
                  MPI_Gatherv(op->send, op->vcounts[c->base.rank], t, op->recv, op->vcounts,
                              op->vdispls, t, op->root, comm),
                  "MPI_Gatherv");
        break;
    case OP_ALLGATHERV:
        set_error(op,
                  MPI_Allgatherv(op->send, op->vcounts[c->base.rank], t, op->recv, op->vcounts,
                                 op->vdispls, t, comm),
                  "MPI_Allgatherv");
        break;
    case OP_SPLIT: {
        MPI_Comm sub;
        if (set_error(op, MPI_Comm_split(comm, op->color, op->key, &sub), "MPI_Comm_split"))
            break;
        zt_error err = {0};
        if (make_comm(sub, c->failure, &op->split, &err) != ZT_OK) {
            op->status = err.status;
            snprintf(op->msg, sizeof op->msg, "%.1000s", err.msg);
        }
        break;
    }
    }
}

static const char *op_name(enum mpi_op_kind k)
{
    static const char *const names[] = {"all-gather", "reduce-scatter", "all-reduce", "all-to-all",
                                        "broadcast",  "barrier",        "split",      "node id",
                                        "gather",     "all-gather (v)"};
    return names[k];
}

static void whoami(const mpi_comm *c, char *out, size_t cap);

/* The oldest collective issued on c that has not completed, or NULL (c->lock held). */
static const mpi_op *oldest_pending(const mpi_comm *c)
{
    const mpi_op *oldest = NULL;
    for (int i = 0; i < c->n_lanes; i++) {
        const mpi_op *h = c->lanes[i].head; /* a lane completes its own in order */
        if (h && (!oldest || h->seq < oldest->seq))
            oldest = h;
    }
    return oldest;
}

/* op and every collective issued before it are done (c->lock held). */
static int done_in_order(const mpi_comm *c, const mpi_op *op)
{
    const mpi_op *oldest = oldest_pending(c);
    return op->done && (!oldest || oldest->seq > op->seq);
}

/* A collective given up on, or issued after its family failed, is not started: it could
 * only wait for the lost peer, and MPI must not be handed buffers their owner may free. */
static int skip_op(mpi_comm *c, mpi_op *op)
{
    zt_error e = {0};
    if (!op->abandoned && !failure_get(c, &e))
        return 0;
    op->status = ZT_ERR_COMM;
    snprintf(op->msg, sizeof op->msg, "not started: %.1000s",
             e.msg[0] ? e.msg : "an earlier collective was given up on");
    return 1;
}

static void *worker(void *arg)
{
    mpi_lane *l = arg;
    mpi_comm *c = l->owner;
    snprintf(l->track, sizeof l->track, "mpi comm (%d ranks) lane %d", c->base.size,
             (int)(l - c->lanes));
    zt_trace_thread_name(l->track);
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!l->head && !c->stop)
            pthread_cond_wait(&l->work, &c->lock);
        if (!l->head)
            break;
        mpi_op *op = l->head;
        int skip = skip_op(c, op);
        pthread_mutex_unlock(&c->lock);
        double t0 = zt_now_s();
        if (!skip)
            run_op(c, l->comm, op);
        size_t count = op->vcounts ? (size_t)op->vcounts[c->base.rank] : op->count;
        if (!skip && op->status == ZT_ERR_COMM) { /* MPI failed it: later ones would too */
            zt_error e = {0};
            char me[96];
            whoami(c, me, sizeof me);
            ZT_ERR(&e, ZT_ERR_COMM, "%s: %s", me, op->msg);
            atomic_fetch_add(&g_errors, 1);
            failure_record(c, &e);
        }
        zt_trace_span("comm", t0, "%s %.2f MB", op_name(op->kind),
                      (double)(count * zt_comm_dtype_size(op->dt)) / 1e6);
        pthread_mutex_lock(&c->lock);
        l->head = op->next;
        if (!l->head)
            l->tail = NULL;
        op->done = 1;
        zt_comm *orphan = NULL;
        if (op->abandoned) { /* the peer came back after all */
            atomic_fetch_sub(&g_abandoned, 1);
            orphan = op->split, op->split = NULL; /* nobody takes it: a wait gave up on it */
        }
        pthread_cond_broadcast(&c->done);
        if (orphan) {
            pthread_mutex_unlock(&c->lock);
            mpi_destroy(orphan);
            pthread_mutex_lock(&c->lock);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* MPI counts elements in ints: a collective of more per rank is refused before it is issued
 * (it would move or sum the wrong elements, the count cut to 32 bits), with the fix. */
static zt_status check_count(const mpi_comm *c, const mpi_op *op, zt_error *err)
{
    if (op->count <= INT32_MAX)
        return ZT_OK;
    return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                  "%s of %zu elements of %zu bytes per rank (%d ranks): the MPI backend counts "
                  "elements in ints, at most %d per call; use a smaller partition or bucket "
                  "(e.g. more ranks per ZeRO++ hpZ group, a smaller reduce_bucket_size) so "
                  "that no rank's share is over 2^31 - 1 elements",
                  op_name(op->kind), op->count, zt_comm_dtype_size(op->dt), c->base.size,
                  INT32_MAX);
}

static zt_status submit(zt_comm *base, const mpi_op *tmpl, zt_comm_req *req, zt_error *err)
{
    mpi_comm *c = (mpi_comm *)base;
    if (failure_get(c, err)) /* not issued: it could only wait for the failed peer */
        return ZT_ERR_COMM;
    if (check_count(c, tmpl, err) != ZT_OK)
        return err ? err->status : ZT_ERR_UNSUPPORTED;
    mpi_op *op = malloc(sizeof *op);
    if (!op)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory queueing a collective");
    *op = *tmpl;
    op->done = 0;
    op->status = ZT_OK;
    op->msg[0] = '\0';
    op->next = NULL;
    pthread_mutex_lock(&c->lock);
    op->seq = c->next_seq++;
    /* the same lane on every rank: each issues the same sequence */
    mpi_lane *l = &c->lanes[op->seq % (uint64_t)c->n_lanes];
    if (l->tail)
        l->tail->next = op;
    else
        l->head = op;
    l->tail = op;
    pthread_cond_signal(&l->work);
    pthread_mutex_unlock(&c->lock);
    req->impl = op;
    req->done = 0;
    return ZT_OK;
}

/* "world rank 2 (host b)", and the communicator's rank where it is not the world's. */
static void whoami(const mpi_comm *c, char *out, size_t cap)
{
    const mpi_member *m = &c->members[c->base.rank];
    int n = snprintf(out, cap, "world rank %d (host %s)", m->world_rank, m->host);
    if (m->world_rank != c->base.rank && n > 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, ", rank %d of %d here", c->base.rank, c->base.size);
}

/* The ranks a collective waits for: the other members, by world rank and host. A blocked
 * collective does not say which of them is missing; with two members, that is the other. */
static void suspects(const mpi_comm *c, char *out, size_t cap)
{
    size_t used = (size_t)snprintf(out, cap, "%s", c->base.size > 2 ? "one of world ranks " : "");
    int shown = 0;
    for (int r = 0; r < c->base.size && used < cap; r++) {
        if (r == c->base.rank)
            continue;
        if (shown == 8) {
            snprintf(out + used, cap - used, ", ... (%d others)", c->base.size - 1);
            return;
        }
        const mpi_member *m = &c->members[r];
        int n = snprintf(out + used, cap - used, "%s%s%d (host %s)", shown ? ", " : "",
                         c->base.size > 2 ? "" : "world rank ", m->world_rank, m->host);
        used += n > 0 ? (size_t)n : 0;
        shown++;
    }
}

static zt_status mpi_wait(zt_comm *base, zt_comm_req *req, zt_error *err)
{
    mpi_comm *c = (mpi_comm *)base;
    mpi_op *op = req->impl;
    if (!op)
        return ZT_OK;
    const enum mpi_op_kind kind = op->kind; /* for messages: op may be freed below */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)c->timeout_s;
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    /* Once a collective of this communicator's family failed or was given up on, this one is
     * not waited for: it would only take one more timeout each (e.g. zt_step's agreement
     * after a timed-out reduction, or a retried wait for the given-up collective before its
     * buffer is freed) and a rank must report a stopped peer within one timeout. It returns
     * its result if it completed. So does one while a collective of another family is given
     * up on. */
    int after_abandoned = atomic_load(&g_abandoned) > op->abandoned;
    while (!done_in_order(c, op) && !after_abandoned && !atomic_load(&c->failure->failed) &&
           rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&c->done, &c->lock, &deadline);
    int done = done_in_order(c, op);
    zt_comm *orphan = NULL;
    if (!done) { /* what stays queued (its worker owns it); this runtime must be destroyed */
        for (int i = 0; i < c->n_lanes; i++)
            for (mpi_op *q = c->lanes[i].head; q; q = q->next)
                if (q->seq <= op->seq)
                    abandon(q);
        if (op->done) { /* only an earlier one is missing: op itself is the caller's again */
            orphan = op->split;
            free(op->vcounts);
            free(op);
            req->impl = NULL;
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (orphan) /* a split that completed, not handed out as the wait fails */
        mpi_destroy(orphan);
    if (!done && failure_get(c, err))
        return ZT_ERR_COMM;
    char me[96], peers[512];
    whoami(c, me, sizeof me);
    if (!done)
        suspects(c, peers, sizeof peers);
    if (!done && after_abandoned)
        return ZT_ERR(err, ZT_ERR_COMM,
                      "%s: a collective (%s) was not waited for because an earlier one never "
                      "completed; %s has probably failed or stopped (destroy this runtime; "
                      "raise ZT_COMM_TIMEOUT, now %.0f s, if it is just slow)",
                      me, op_name(kind), peers, c->timeout_s);
    if (!done) {
        zt_error mine = {0}, *e = err ? err : &mine;
        ZT_ERR(e, ZT_ERR_COMM,
               "%s: a collective (%s) did not complete within %.0f s; %s has probably failed or "
               "stopped (raise ZT_COMM_TIMEOUT if it is just slow)",
               me, op_name(kind), c->timeout_s, peers);
        failure_record(c, e); /* later waits and collectives fail at once with it */
        return ZT_ERR_COMM;
    }
    zt_status st = op->status;
    if (st != ZT_OK)
        ZT_ERR(err, st, "%s: %s", me, op->msg);
    if (st == ZT_OK && op->node_out)
        *op->node_out = op->node;
    if (st == ZT_OK && op->split_out)
        *op->split_out = op->split;
    free(op->vcounts);
    free(op);
    req->impl = NULL;
    req->done = 1;
    return st;
}

static int mpi_test(zt_comm *base, zt_comm_req *req)
{
    mpi_comm *c = (mpi_comm *)base;
    mpi_op *op = req->impl;
    if (!op)
        return 1;
    pthread_mutex_lock(&c->lock);
    int done = done_in_order(c, op);
    pthread_mutex_unlock(&c->lock);
    return done;
}

static zt_status mpi_allgather(zt_comm *c, const void *send, void *recv, size_t count,
                               zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    mpi_op op = {.kind = OP_ALLGATHER, .send = send, .recv = recv, .count = count, .dt = dt};
    return submit(c, &op, req, err);
}

static zt_status mpi_reduce_scatter(zt_comm *c, const void *send, void *recv, size_t count,
                                    zt_comm_dtype dt, zt_reduce_op rop, zt_comm_req *req,
                                    zt_error *err)
{
    mpi_op op = {.kind = OP_REDUCE_SCATTER,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .dt = dt,
                 .rop = rop};
    return submit(c, &op, req, err);
}

static zt_status mpi_allreduce(zt_comm *c, const void *send, void *recv, size_t count,
                               zt_comm_dtype dt, zt_reduce_op rop, zt_comm_req *req, zt_error *err)
{
    mpi_op op = {
        .kind = OP_ALLREDUCE, .send = send, .recv = recv, .count = count, .dt = dt, .rop = rop};
    return submit(c, &op, req, err);
}

static zt_status mpi_alltoall(zt_comm *c, const void *send, void *recv, size_t count,
                              zt_comm_dtype dt, zt_comm_req *req, zt_error *err)
{
    mpi_op op = {.kind = OP_ALLTOALL, .send = send, .recv = recv, .count = count, .dt = dt};
    return submit(c, &op, req, err);
}

static zt_status mpi_broadcast(zt_comm *c, void *buf, size_t count, zt_comm_dtype dt, int root,
                               zt_comm_req *req, zt_error *err)
{
    if (root < 0 || root >= c->size)
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "broadcast root %d outside a world of %d", root,
                      c->size);
    mpi_op op = {.kind = OP_BCAST, .recv = buf, .count = count, .dt = dt, .root = root};
    return submit(c, &op, req, err);
}

/* MPI counts and displacements are ints: blocks past 2^31 elements cannot be described. */
static zt_status submit_v(zt_comm *c, mpi_op *op, const size_t *counts, const size_t *displs,
                          zt_comm_req *req, zt_error *err)
{
    int n = c->size;
    for (int r = 0; r < n; r++)
        if (counts[r] > INT32_MAX || displs[r] > INT32_MAX)
            return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                          "%s of %zu elements at element %zu: MPI counts them in ints (at most "
                          "%d); split the tensor",
                          op_name(op->kind), counts[r], displs[r], INT32_MAX);
    op->vcounts = malloc(2 * (size_t)n * sizeof(int));
    if (!op->vcounts)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory queueing a collective");
    op->vdispls = op->vcounts + n;
    for (int r = 0; r < n; r++)
        op->vcounts[r] = (int)counts[r], op->vdispls[r] = (int)displs[r];
    zt_status st = submit(c, op, req, err);
    if (st != ZT_OK)
        free(op->vcounts);
    return st;
}

static zt_status mpi_gatherv(zt_comm *c, const void *send, void *recv, const size_t *counts,
                             const size_t *displs, zt_comm_dtype dt, int root, zt_comm_req *req,
                             zt_error *err)
{
    mpi_op op = {.kind = OP_GATHERV, .send = send, .recv = recv, .dt = dt, .root = root};
    return submit_v(c, &op, counts, displs, req, err);
}

static zt_status mpi_allgatherv(zt_comm *c, const void *send, void *recv, const size_t *counts,
                                const size_t *displs, zt_comm_dtype dt, zt_comm_req *req,
                                zt_error *err)
{
    mpi_op op = {.kind = OP_ALLGATHERV, .send = send, .recv = recv, .dt = dt};
    return submit_v(c, &op, counts, displs, req, err);
}

static zt_status mpi_barrier(zt_comm *c, zt_comm_req *req, zt_error *err)
{
    mpi_op op = {.kind = OP_BARRIER};
    return submit(c, &op, req, err);
}

static zt_status mpi_split(zt_comm *c, int color, int key, zt_comm **out, zt_error *err)
{
    mpi_op op = {.kind = OP_SPLIT, .color = color, .key = key, .split_out = out};
    zt_comm_req req = {0};
    zt_status st = submit(c, &op, &req, err);
    return st == ZT_OK ? mpi_wait(c, &req, err) : st;
}

static zt_status mpi_node_id(zt_comm *c, int *node, const char **how, zt_error *err)
{
    mpi_op op = {.kind = OP_NODE_ID, .node_out = node};
    zt_comm_req req = {0};
    *how = "found by MPI_Comm_split_type: the ranks that share memory";
    zt_status st = submit(c, &op, &req, err);
    return st == ZT_OK ? mpi_wait(c, &req, err) : st;
}

/* One communicator of the family gone; the last one frees the record. */
static void drop_family(mpi_failure *f)
{
    if (atomic_fetch_sub(&f->refs, 1) == 1)
        free(f);
}

/* Frees an MPI communicator of ztier's own, unless a peer stopped responding: MPI_Comm_free
 * is collective and could block on it (the handle goes away with the process then). */
static void free_comm(MPI_Comm *comm)
{
    if (*comm != MPI_COMM_WORLD && *comm != MPI_COMM_NULL && atomic_load(&g_abandoned) == 0 &&
        atomic_load(&g_errors) == 0)
        MPI_Comm_free(comm);
}

static void mpi_destroy(zt_comm *base)
{
    mpi_comm *c = (mpi_comm *)base;
    pthread_mutex_lock(&c->lock);
    int stuck = 0;
    for (int i = 0; i < c->n_lanes; i++)
        for (mpi_op *op = c->lanes[i].head; op; op = op->next, stuck++)
            abandon(op); /* nobody can wait for them any more */
    c->stop = 1;
    for (int i = 0; i < c->n_lanes; i++)
        pthread_cond_signal(&c->lanes[i].work);
    pthread_mutex_unlock(&c->lock);
    if (stuck) {
        /* A collective never completed (a peer failed): its thread cannot be joined, and
         * the communicator and the queue stay allocated for it until the process ends. */
        char me[96];
        whoami(c, me, sizeof me);
        ZT_LOGW("comm", "%s: leaving %d collective(s) that never completed", me, stuck);
        for (int i = 0; i < c->n_lanes; i++)
            pthread_detach(c->lanes[i].thread);
        return;
    }
    for (int i = 0; i < c->n_lanes; i++)
        pthread_join(c->lanes[i].thread, NULL);
    /* MPI_Comm_free is collective and could block on a peer that stopped responding; the
     * handles go away with the process then. */
    for (int i = 0; i < c->n_lanes; i++)
        free_comm(&c->lanes[i].comm);
    for (int i = 0; i < c->n_lanes; i++)
        pthread_cond_destroy(&c->lanes[i].work);
    drop_family(c->failure);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->done);
    free(c->members);
    free(c);
}

static const zt_comm_iface mpi_iface = {
    /* .name = */ "mpi",
    /* .allgather = */ mpi_allgather,
    /* .reduce_scatter = */ mpi_reduce_scatter,
    /* .allreduce = */ mpi_allreduce,
    /* .alltoall = */ mpi_alltoall,
    /* .broadcast = */ mpi_broadcast,
    /* .barrier = */ mpi_barrier,
    /* .wait = */ mpi_wait,
    /* .test = */ mpi_test,
    /* .split = */ mpi_split,
    /* .destroy = */ mpi_destroy,
    /* .wait_event = */ NULL, /* host memory: the host orders it */
    /* .complete_on = */ NULL,
    /* .node_id = */ mpi_node_id,
    /* .gatherv = */ mpi_gatherv,
    /* .allgatherv = */ mpi_allgatherv,
};

/* The number of lanes: $ZT_MPI_LANES (1-16), else 4 where the members are on more than one
 * host, 1 on one host. Every rank computes the same from the same environment and host names
 * (the launcher passes the environment on), as the lane of each collective depends on it. */
static int lanes_for(const mpi_comm *c)
{
    const char *v = getenv("ZT_MPI_LANES");
    if (v && *v) {
        char *end = NULL;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= 1 && n <= MPI_LANES_MAX)
            return (int)n;
        ZT_LOGW("comm", "ZT_MPI_LANES=%s is not a number from 1 to %d; using the default", v,
                MPI_LANES_MAX);
    }
    for (int r = 1; r < c->base.size; r++)
        if (strcmp(c->members[r].host, c->members[0].host) != 0)
            return 4;
    return 1;
}

/* Stops and joins the first n lanes' threads (none has work). */
static void stop_lanes(mpi_comm *c, int n)
{
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    for (int i = 0; i < n; i++)
        pthread_cond_signal(&c->lanes[i].work);
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < n; i++) {
        pthread_join(c->lanes[i].thread, NULL);
        pthread_cond_destroy(&c->lanes[i].work);
    }
}

/* Lane 0 runs on comm, the others on duplicates of it (collective: every member calls it). */
static int start_lanes(mpi_comm *c, MPI_Comm comm)
{
    c->lanes[0].comm = comm;
    for (int i = 1; i < c->n_lanes; i++) {
        if (MPI_Comm_dup(comm, &c->lanes[i].comm) != MPI_SUCCESS) {
            for (int k = 1; k < i; k++)
                MPI_Comm_free(&c->lanes[k].comm);
            return -1;
        }
        MPI_Comm_set_errhandler(c->lanes[i].comm, MPI_ERRORS_RETURN);
    }
    for (int i = 0; i < c->n_lanes; i++) {
        mpi_lane *l = &c->lanes[i];
        l->owner = c;
        pthread_cond_init(&l->work, NULL);
        if (pthread_create(&l->thread, NULL, worker, l) != 0) {
            pthread_cond_destroy(&l->work);
            stop_lanes(c, i);
            for (int k = 1; k < c->n_lanes; k++)
                MPI_Comm_free(&c->lanes[k].comm);
            return -1;
        }
    }
    return 0;
}

/* family: the failure record of the communicator comm was split from; NULL: a new family.
 * comm is the new communicator's (freed when it cannot be made). */
static zt_status make_comm(MPI_Comm comm, mpi_failure *family, zt_comm **out, zt_error *err)
{
    mpi_comm *c = calloc(1, sizeof *c);
    mpi_failure *f = family ? family : calloc(1, sizeof *f);
    if (!c || !f) {
        free(c);
        if (!family)
            free(f);
        free_comm(&comm);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating an MPI communicator");
    }
    atomic_fetch_add(&f->refs, 1);
    c->failure = f;
    c->base.iface = &mpi_iface;
    c->comm = comm;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &c->base.rank);
    MPI_Comm_size(comm, &c->base.size);
    /* who each member is, for messages that name a rank (collective: every member creates it) */
    c->members = calloc((size_t)c->base.size, sizeof *c->members);
    mpi_member me = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &me.world_rank);
    if (gethostname(me.host, sizeof me.host - 1) != 0)
        snprintf(me.host, sizeof me.host, "?");
    zt_status named = !c->members ? ZT_ERR_NOMEM
                      : MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, c->members, (int)sizeof me,
                                      MPI_BYTE, comm) != MPI_SUCCESS
                          ? ZT_ERR_COMM
                          : ZT_OK;
    if (named != ZT_OK) {
        free(c->members);
        drop_family(f);
        free(c);
        free_comm(&comm);
        return ZT_ERR(err, named,
                      "world rank %d (host %s): cannot exchange the ranks' names on a new "
                      "communicator (%s)",
                      me.world_rank, me.host,
                      named == ZT_ERR_NOMEM ? "out of memory" : "the exchange failed");
    }
    const char *t = getenv("ZT_COMM_TIMEOUT");
    c->timeout_s = t && atof(t) > 0 ? atof(t) : 600.0;
    c->n_lanes = lanes_for(c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->done, NULL);
    if (start_lanes(c, comm) != 0) {
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->done);
        free(c->members);
        drop_family(f);
        free(c);
        free_comm(&comm);
        return ZT_ERR(err, ZT_ERR_COMM,
                      "world rank %d (host %s): cannot start the MPI worker threads or "
                      "duplicate the communicator for them",
                      me.world_rank, me.host);
    }
    *out = &c->base;
    return ZT_OK;
}

static int world_rank(void)
{
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/* MPI is initialised once per process and finalised at exit, so several runtimes can be
 * created and destroyed in one program. Not when a collective was given up on: MPI_Finalize
 * would wait for the stopped peer forever (and must not run while a worker thread is still
 * inside a collective), so the process exits without it and the launcher ends the job. */
static void finalize_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return;
    int abandoned = atomic_load(&g_abandoned);
    if (abandoned || atomic_load(&g_errors)) {
        ZT_LOGW("comm",
                "rank %d: MPI is not finalised because a peer stopped responding (%d "
                "collective(s) never completed, %d ended with an MPI error); the launcher "
                "may report that this process exited without finalising",
                world_rank(), abandoned, atomic_load(&g_errors));
        return;
    }
    MPI_Finalize();
}

/* A peer that died leaves sockets whose next write raises SIGPIPE, which would end this
 * process before its collective reports the peer (Open MPI's TCP transport writes without
 * MSG_NOSIGNAL). Ignored, so the write fails and the collective returns its error, unless
 * the program handles or ignores SIGPIPE itself (then its choice stands). */
static void ignore_sigpipe(void)
{
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
        old.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);
}

/* Open MPI chooses its point-to-point layer (pml) by starting each candidate: UCX and
 * libfabric (pml cm) probe the machine's networks, 0.2 s of every rank's MPI_Init on a machine
 * without them (0.26 s against 0.06 s on 4 ranks: docs/benchmarks.md, "The resume's fixed
 * start"), where it then takes ob1 anyway. With every rank on this machine (Open MPI says so
 * before MPI_Init) ob1 over shared memory serves the job, so it is named at once; the user's
 * own OMPI_MCA_pml, or ZT_MPI_PML=auto, leaves the choice to Open MPI. */
static void prefer_local_pml(void)
{
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    const char *mode = getenv("ZT_MPI_PML");
    if (!local || !size || strcmp(local, size) != 0 || getenv("OMPI_MCA_pml") ||
        (mode && strcmp(mode, "auto") == 0))
        return;
    setenv("OMPI_MCA_pml", "ob1", 0);
    ZT_LOGI("comm",
            "all %s ranks on this machine: Open MPI's pml set to ob1 (shared memory), which "
            "skips probing UCX and libfabric at start; set OMPI_MCA_pml or ZT_MPI_PML=auto to "
            "choose otherwise",
            size);
}

static zt_status mpi_create(zt_comm **out, zt_error *err)
{
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        /* The progress thread blocks inside MPI; let it yield the core to compute threads
         * while it waits (the user's own setting wins). */
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        prefer_local_pml();
        ignore_sigpipe();
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return ZT_ERR(err, ZT_ERR_COMM, "MPI_Init_thread failed; is this run under mpirun?");
        atexit(finalize_at_exit);
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE)
        return ZT_ERR(err, ZT_ERR_COMM,
                      "MPI provides thread level %d; ztier's MPI backend needs "
                      "MPI_THREAD_MULTIPLE (call MPI_Init_thread with it, or let ztier "
                      "initialise MPI)",
                      provided);
    pthread_once(&g_op16_once, make_op16);
    if (g_op16_rc != MPI_SUCCESS)
        return ZT_ERR(err, ZT_ERR_COMM, "MPI_Op_create of the 16-bit sums failed (error %d)",
                      g_op16_rc);
    /* MPI_Comm_dup would wait for the stopped peer forever */
    if (atomic_load(&g_abandoned) || atomic_load(&g_errors))
        return ZT_ERR(err, ZT_ERR_COMM,
                      "rank %d: a collective of an earlier runtime never completed or failed "
                      "(another rank has probably failed or stopped), so MPI cannot be used "
                      "again in this process; end it and restart the job",
                      world_rank());
    MPI_Comm dup = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        return ZT_ERR(err, ZT_ERR_COMM,
                      "rank %d: MPI_Comm_dup of MPI_COMM_WORLD failed (%s); another rank has "
                      "probably failed: end the job and restart it",
                      world_rank(), text);
    }
    return make_comm(dup, NULL, out, err);
}

/* The module's entry point (core/module.h): libztier-mpi.so in libztier.so, linked in in
 * libztier.a; zt_comm_mpi_create (comm.c) reaches mpi_create through it. */
static const zt_comm_backend mpi_backend = {/* .create = */ mpi_create, /* .open_device = */ NULL};
static const zt_module mpi_module = {ZT_MODULE_ABI, "mpi", &mpi_backend};
const zt_module *ztier_mpi_module_v1(void) { return &mpi_module; }

/* SPDX-License-Identifier: MIT */
/* Backend selection and synchronous helpers shared by every comm backend. */
#include "comm/comm.h"
#include "core/log.h"
#include "core/module.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

size_t zt_comm_dtype_size(zt_comm_dtype dt)
{
    switch (dt) {
    case ZT_COMM_U8:
        return 1;
    case ZT_COMM_BF16:
    case ZT_COMM_F16:
        return 2;
    case ZT_COMM_F32:
        return 4;
    case ZT_COMM_F64:
    case ZT_COMM_I64:
        return 8;
    }
    return 1;
}

/* Launchers export the world size; a process started by mpirun/srun with more than one rank
 * must not silently train alone. */
int zt_launcher_world_size(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0)
            return atoi(v);
    }
    return 1;
}

#if defined(ZT_HAVE_MPI) && defined(ZT_HAVE_NCCL)
#define BUILT_COMMS "single, mpi, nccl"
#elif defined(ZT_HAVE_MPI)
#define BUILT_COMMS "single, mpi"
#else
#define BUILT_COMMS "single (mpi: install libopenmpi-dev and rebuild)"
#endif

/* A backend's module did not load: err (which says why) gets what selected it in front. */
static zt_status backend_missing(const char *what, zt_error *err)
{
    zt_error_prefix(err, "%s: ", what);
    return err ? err->status : ZT_ERR_UNSUPPORTED;
}

#ifdef ZT_HAVE_MPI
zt_status zt_comm_mpi_create(zt_comm **out, zt_error *err)
{
    const zt_module *m = zt_module_get("mpi", err);
    if (!m)
        return backend_missing("the mpi comm backend (ztier.comm_backend \"mpi\", \"nccl\", or "
                               "\"auto\" with several ranks)",
                               err);
    return ((const zt_comm_backend *)m->iface)->create(out, err);
}
#endif

#ifdef ZT_HAVE_NCCL
zt_status zt_comm_nccl_open(zt_comm *boot, int device, zt_comm **out, zt_error *err)
{
    const zt_module *m = zt_module_get("nccl", err);
    if (!m)
        return backend_missing("the nccl comm backend", err);
    return ((const zt_comm_backend *)m->iface)->open_device(boot, device, out, err);
}
#endif

zt_status zt_comm_create(const char *backend, zt_comm **out, zt_error *err)
{
    int launched = zt_launcher_world_size();
    if (strcmp(backend, "auto") == 0)
        backend = launched > 1 ? "mpi" : "single";
    if (strcmp(backend, "single") == 0) {
        if (launched > 1)
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "ztier.comm_backend is \"single\" but the launcher started %d ranks; "
                          "use \"mpi\" (or \"auto\")",
                          launched);
        return zt_comm_single_create(out, err);
    }
#ifdef ZT_HAVE_MPI
    if (strcmp(backend, "mpi") == 0)
        return zt_comm_mpi_create(out, err);
#endif
#ifdef ZT_HAVE_NCCL
    if (strcmp(backend, "nccl") == 0) {  /* its bootstrap; NCCL itself at commit, on the GPU */
        if (!zt_module_get("nccl", err)) /* a missing module fails now, not at commit */
            return backend_missing("ztier.comm_backend \"nccl\"", err);
        return zt_comm_mpi_create(out, err);
    }
#endif
    return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                  "comm backend \"%s\" is not available in this build (built: %s); "
                  "set ztier.comm_backend",
                  backend, BUILT_COMMS);
}

zt_status zt_comm_wait_keep(zt_comm *c, zt_comm_req *req, void **block, zt_error *err)
{
    zt_status st = zt_comm_wait(c, req, err);
    if (zt_comm_pending(req))
        *block = NULL; /* the collective's now, left allocated on purpose (comm.h) */
    return st;
}

/* The *_sync helpers' buffers: one heap block of their own that the collective reads and
 * writes (send bytes, then recv bytes), so that their callers may pass any memory, a stack
 * variable included (comm.h's rule on collectives that did not complete). */
typedef struct sync_box {
    char *send, *recv;
    void *block;
} sync_box;

static zt_status box_open(sync_box *b, const void *send, size_t send_bytes, size_t recv_bytes,
                          zt_error *err)
{
    b->block = malloc(send_bytes + recv_bytes + 1);
    if (!b->block)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory staging a collective's %zu bytes",
                      send_bytes + recv_bytes);
    b->send = b->block;
    b->recv = b->send + send_bytes;
    if (send_bytes)
        memcpy(b->send, send, send_bytes);
    return ZT_OK;
}

/* Waits for the collective issued (st == ZT_OK) on the box, copies its result to recv when it
 * succeeded, and frees the box unless the collective still holds it. */
static zt_status box_close(zt_comm *c, sync_box *b, zt_comm_req *req, zt_status st, void *recv,
                           size_t recv_bytes, zt_error *err)
{
    if (st == ZT_OK)
        st = zt_comm_wait_keep(c, req, &b->block, err);
    if (st == ZT_OK && recv_bytes)
        memcpy(recv, b->recv, recv_bytes);
    free(b->block);
    return st;
}

zt_status zt_comm_allreduce_sync(zt_comm *c, void *buf, size_t count, zt_comm_dtype dt,
                                 zt_reduce_op op, zt_error *err)
{
    zt_comm_req req = {0};
    c = zt_comm_host(c);
    size_t bytes = count * zt_comm_dtype_size(dt);
    sync_box b;
    zt_status st = box_open(&b, buf, bytes, 0, err);
    if (st != ZT_OK)
        return st;
    st = zt_comm_allreduce(c, b.send, b.send, count, dt, op, &req, err);
    b.recv = b.send; /* in place */
    return box_close(c, &b, &req, st, buf, bytes, err);
}

zt_status zt_comm_allgather_sync(zt_comm *c, const void *send, void *recv, size_t count,
                                 zt_comm_dtype dt, zt_error *err)
{
    zt_comm_req req = {0};
    c = zt_comm_host(c);
    size_t bytes = count * zt_comm_dtype_size(dt);
    sync_box b;
    zt_status st = box_open(&b, send, bytes, bytes * (size_t)c->size, err);
    if (st != ZT_OK)
        return st;
    st = zt_comm_allgather(c, b.send, b.recv, count, dt, &req, err);
    return box_close(c, &b, &req, st, recv, bytes * (size_t)c->size, err);
}

zt_status zt_comm_gatherv_sync(zt_comm *c, const void *send, void *recv, const size_t *counts,
                               const size_t *displs, zt_comm_dtype dt, int root, zt_error *err)
{
    zt_comm_req req = {0};
    c = zt_comm_host(c);
    size_t esize = zt_comm_dtype_size(dt), end = 0;
    for (int r = 0; r < c->size; r++)
        if (counts[r] && displs[r] + counts[r] > end)
            end = displs[r] + counts[r];
    int receives = root < 0 || root == c->rank;
    size_t send_bytes = counts[c->rank] * esize, recv_bytes = receives ? end * esize : 0;
    sync_box b;
    zt_status st = box_open(&b, send, send_bytes, recv_bytes, err);
    if (st != ZT_OK)
        return st;
    void *into = receives ? b.recv : NULL;
    st = root < 0 ? zt_comm_allgatherv(c, b.send, into, counts, displs, dt, &req, err)
                  : zt_comm_gatherv(c, b.send, into, counts, displs, dt, root, &req, err);
    if (st == ZT_OK)
        st = zt_comm_wait_keep(c, &req, &b.block, err);
    for (int r = 0; st == ZT_OK && receives && r < c->size; r++) /* the blocks only: */
        if (counts[r]) /* what lies between them stays the caller's */
            memcpy((char *)recv + displs[r] * esize, b.recv + displs[r] * esize, counts[r] * esize);
    free(b.block);
    return st;
}

zt_status zt_comm_broadcast_sync(zt_comm *c, void *buf, size_t count, zt_comm_dtype dt, int root,
                                 zt_error *err)
{
    zt_comm_req req = {0};
    c = zt_comm_host(c);
    size_t bytes = count * zt_comm_dtype_size(dt);
    sync_box b;
    zt_status st = box_open(&b, buf, bytes, 0, err);
    if (st != ZT_OK)
        return st;
    st = zt_comm_broadcast(c, b.send, count, dt, root, &req, err);
    b.recv = b.send;
    return box_close(c, &b, &req, st, buf, bytes, err);
}

zt_status zt_comm_agree(zt_comm *c, zt_status local, const char *what, zt_error *err)
{
    int exchanged;
    return zt_comm_agree_exchanged(c, local, what, &exchanged, err);
}

zt_status zt_comm_agree_exchanged(zt_comm *c, zt_status local, const char *what, int *exchanged,
                                  zt_error *err)
{
    *exchanged = 1;
    if (!c || c->size == 1)
        return local;
    *exchanged = 0;
    int64_t *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return local != ZT_OK ? local : ZT_ERR(err, ZT_ERR_NOMEM, "out of memory in %s", what);
    int64_t mine = local;
    zt_error comm_err = {0};
    zt_status st = zt_comm_allgather_sync(c, &mine, all, 1, ZT_COMM_I64, &comm_err);
    *exchanged = st == ZT_OK;
    int bad = -1;
    for (int r = 0; st == ZT_OK && r < c->size && bad < 0; r++)
        if (all[r] != ZT_OK)
            bad = r;
    int64_t other = bad >= 0 ? all[bad] : ZT_OK;
    free(all);
    if (local != ZT_OK)
        return local; /* this rank's own message stays */
    if (st != ZT_OK) {
        *err = comm_err;
        return st;
    }
    /* the status as it came: one that is none of ztier's means the ranks are out of step */
    int known = other > 0 && other < ZT_STATUS_COUNT;
    if (bad >= 0)
        return ZT_ERR(err, ZT_ERR_COMM,
                      "%s failed on rank %d of %d (status %lld: %s; see that rank's message); "
                      "every rank stops with an error",
                      what, bad, c->size, (long long)other,
                      known ? zt_status_string((zt_status)other)
                            : "not a ztier status, the ranks' collectives are out of step");
    return ZT_OK;
}

/* A machine's identity: its host name and, where there is one, its machine id (two
 * containers may share a host name). FNV-1a. */
static uint64_t machine_id(void)
{
    char buf[512] = "";
    gethostname(buf, 256);
    FILE *f = fopen("/etc/machine-id", "r");
    if (f) {
        size_t n = strlen(buf);
        if (!fgets(buf + n, (int)(sizeof buf - n), f))
            buf[n] = 0;
        fclose(f);
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = buf; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return h;
}

zt_status zt_comm_local_rank(zt_comm *c, int *local_rank, int *local_size, zt_error *err)
{
    *local_rank = 0, *local_size = 1;
    if (c->size == 1)
        return ZT_OK;
    uint64_t mine = machine_id(), *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory finding the ranks of this machine");
    zt_status st = zt_comm_allgather_sync(c, &mine, all, 1, ZT_COMM_I64, err);
    int before = 0, same = 0;
    for (int r = 0; st == ZT_OK && r < c->size; r++)
        if (all[r] == mine)
            before += r < zt_comm_host(c)->rank, same++;
    free(all);
    if (st == ZT_OK)
        *local_rank = before, *local_size = same;
    return st;
}

zt_status zt_comm_node_ids(zt_comm *c, int64_t *node_id, const char **how, zt_error *err)
{
    c = zt_comm_host(c);
    node_id[0] = 0;
    *how = "one rank";
    if (c->size == 1)
        return ZT_OK;
    int64_t mine = 0;
    zt_status st = ZT_OK;
    if (c->iface->node_id) {
        int node = 0;
        st = c->iface->node_id(c, &node, how, err);
        mine = node;
    } else {
        *how = "found by host name and machine id";
        mine = (int64_t)machine_id();
    }
    /* a rank whose backend failed must not leave the others in the exchange */
    st = zt_comm_agree(c, st, "finding the node of each rank", err);
    if (st == ZT_OK)
        st = zt_comm_allgather_sync(c, &mine, node_id, 1, ZT_COMM_I64, err);
    return st;
}

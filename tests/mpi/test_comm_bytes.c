/* SPDX-License-Identifier: MIT */
/* zt_stats.comm_bytes_intra / comm_bytes_inter against the MPI calls ztier makes, counted
 * here (the test binary's MPI_Allgather, MPI_Reduce_scatter_block and MPI_Allreduce wrap
 * PMPI's) and classified by the model api/ztier.h documents: each call's payload per peer
 * times the peers on this rank's node (intra) and on other nodes (inter); an all-reduce, the
 * ring's 2 (n-1)/n of its buffer split in the same proportion. Small control exchanges (a
 * status, the gradient norm's two sums: under 64 bytes) are not counted by either. Four ranks
 * on forced node layouts (ZT_TEST_NODE_OF): 2+2 consecutive and `--map-by node` (0,1,0,1),
 * stage 3 with one layer replicated (its gradients all-reduced). And zt_stats_format names the
 * counters as that model, not as bytes sent across nodes (what the links carry differs). */
#include "ref_mlp.h"
#include "runtime/runtime.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mlp_dims dims = {16, 48, 4, 48};
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

/* ---- the MPI calls, counted ---- */

static int node_of[64]; /* the forced layout, parsed from ZT_TEST_NODE_OF */
static unsigned long long seen_intra, seen_inter, seen_allreduce; /* counted; all-reduce calls */

/* Counts `per_peer` bytes to every other rank of a world-sized communicator (fraction: an
 * all-reduce's share, num/den of it). */
static void count(MPI_Comm comm, unsigned long long bytes, unsigned long long num,
                  unsigned long long den)
{
    int size, world, rank;
    MPI_Comm_size(comm, &size);
    PMPI_Comm_size(MPI_COMM_WORLD, &world);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (size != world || world > 64 || bytes < 64)
        return; /* a node or cross-node group, or a control message */
    unsigned long long same = 0, other = 0;
    for (int r = 0; r < world; r++)
        if (r != rank)
            *(node_of[r] == node_of[rank] ? &same : &other) += 1;
    __atomic_fetch_add(&seen_intra, bytes * same * num / den, __ATOMIC_RELAXED);
    __atomic_fetch_add(&seen_inter, bytes * other * num / den, __ATOMIC_RELAXED);
}

static unsigned long long type_bytes(MPI_Datatype t, int n)
{
    int s = 0;
    MPI_Type_size(t, &s);
    return (unsigned long long)s * (unsigned long long)n;
}

int MPI_Allgather(const void *send, int scount, MPI_Datatype stype, void *recv, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    count(comm, type_bytes(stype, scount), 1, 1); /* its part to every peer */
    return PMPI_Allgather(send, scount, stype, recv, rcount, rtype, comm);
}

int MPI_Reduce_scatter_block(const void *send, void *recv, int rcount, MPI_Datatype t, MPI_Op op,
                             MPI_Comm comm)
{
    count(comm, type_bytes(t, rcount), 1, 1); /* each peer's part of the sum to that peer */
    return PMPI_Reduce_scatter_block(send, recv, rcount, t, op, comm);
}

int MPI_Allreduce(const void *send, void *recv, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    int size;
    MPI_Comm_size(comm, &size);
    /* the ring: 2 (size-1)/size of the buffer, split over the size-1 peers */
    if (type_bytes(t, n) >= 64)
        __atomic_fetch_add(&seen_allreduce, 1, __ATOMIC_RELAXED);
    count(comm, type_bytes(t, n), 2, (unsigned long long)size);
    return PMPI_Allreduce(send, recv, n, t, op, comm);
}

/* ---- a run ---- */

static int run(const char *layout, int rank)
{
    setenv("ZT_TEST_NODE_OF", layout, 1);
    for (int r = 0; r < 64; r++)
        node_of[r] = 0;
    const char *p = layout;
    for (int r = 0; r < 64 && *p; r++) {
        node_of[r] = atoi(p);
        p = strchr(p, ',') ? strchr(p, ',') + 1 : "";
    }
    zt_runtime *rt = NULL;
    minimal_model m;
    const char *zero = ", \"stage3_max_reuse_distance\": 0";
    zt_status st = zt_runtime_create(NULL, ref_mlp_config(&hp, "cpu", "cpu", 1, zero, ""), &rt);
    /* fc3 (208 elements, aligned) is replicated: its gradients are all-reduced */
    if (st == ZT_OK)
        st = zt_config_set_int(rt, "zero_optimization.stage3_param_persistence_threshold", 300);
    if (st == ZT_OK && minimal_register(rt, &dims, 42, &m))
        st = ZT_ERR_INTERNAL;
    __atomic_store_n(&seen_intra, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&seen_inter, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&seen_allreduce, 0, __ATOMIC_RELAXED);
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    zt_stats stats = ZT_STATS_INIT;
    if (st == ZT_OK)
        st = ref_mlp_train_ranks(rt, &m, 4, &stats);
    if (st != ZT_OK)
        fprintf(stderr, "WRONG: rank %d, layout %s: %s\n", rank, layout, zt_last_error(rt));
    zt_runtime_destroy(rt); /* every collective issued has run */
    if (st != ZT_OK)
        return 1;
    unsigned long long intra = __atomic_load_n(&seen_intra, __ATOMIC_RELAXED),
                       inter = __atomic_load_n(&seen_inter, __ATOMIC_RELAXED);
    unsigned long long allreduces = __atomic_load_n(&seen_allreduce, __ATOMIC_RELAXED);
    int ok = stats.comm_bytes_intra == intra && stats.comm_bytes_inter == inter && inter > 0 &&
             allreduces > 0;
    printf("rank %d, nodes %s: zt_stats intra %llu inter %llu; the MPI calls by the model: intra "
           "%llu inter %llu (%llu all-reduces) %s\n",
           rank, layout, (unsigned long long)stats.comm_bytes_intra,
           (unsigned long long)stats.comm_bytes_inter, intra, inter, allreduces,
           ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}

/* What zt_stats_format says the counters are: the model, not bytes sent on the links. */
static int described_as_model(int rank)
{
    static char text[16384];
    zt_stats s = ZT_STATS_INIT;
    int n = zt_stats_format(&s, ZT_STATS_TEXT, text, sizeof text);
    if (n < 0 || n >= (int)sizeof text)
        return 1;
    const char *line = strstr(text, "comm_bytes_inter");
    const char *end = line ? strchr(line, '\n') : NULL;
    int ok = line && end && (size_t)(end - line) < 400;
    char shown[400] = "";
    if (ok)
        memcpy(shown, line, (size_t)(end - line));
    ok = ok && strstr(shown, "model") && !strstr(shown, "sent by this rank across nodes");
    if (rank == 0)
        printf("zt_stats_format: \"%s\" %s\n", shown, ok ? "ok" : "WRONG: not named as a model");
    return ok ? 0 : 1;
}

int main(void)
{
    int rank = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0");
    int bad = described_as_model(rank);
    bad += run("0,0,1,1", rank);
    bad += run("0,1,0,1", rank);
    return bad ? 1 : 0;
}

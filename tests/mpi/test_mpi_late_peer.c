/* SPDX-License-Identifier: MIT */
/* A peer stopped past the timeout and then resumed (comm.h's rule on collectives that did not
 * complete): rank 1 stops itself (SIGSTOP; a child it forked sends SIGCONT after
 * LATE_S seconds, over twice $ZT_COMM_TIMEOUT) just before one collective, which rank 0 has
 * entered. Rank 0 must get ZT_ERR_COMM within the timeout and go on with its buffers given
 * back or freed; when rank 1 resumes it runs the same collective, which then completes inside
 * rank 0's MPI worker thread, with whatever rank 0 handed to it. Nothing it reads or writes
 * may have been freed or left on a stack: under AddressSanitizer (with
 * detect_stack_use_after_return) any such access is reported and ends rank 0. Rank 0 waits
 * until rank 1 has marked the collective done (a file in <dir>), then destroys its
 * communicator and exits 75 (EX_TEMPFAIL, the trainer's status for a lost peer); rank 1
 * exits 0. late_peer.sh runs it and checks both.
 *   test_mpi_late_peer <wait|agree|sync|gatherv|local_rank|node_id|split|release> <dir>
 * Sites: "wait", mpi_wait given up while an earlier collective (on another lane:
 * ZT_MPI_LANES=2) is missing; "agree", zt_comm_agree; "sync", zt_comm_allreduce_sync into a
 * heap buffer the caller frees after the failure; "gatherv", zt_comm_gatherv_sync likewise;
 * "local_rank", zt_comm_local_rank; "node_id", the backend's node id (zt_comm_node_ids);
 * "split", zt_comm_split into a stack variable.
 * "release", a gradient reduction of ZeRO stage 2 without overlap_comm (the bucket summed at
 * once, runtime/reduce.c): rank 1 stops inside MPI_Reduce_scatter_block (this program's
 * own, which wraps PMPI's), rank 0's micro-step or zt_step fails and it destroys its runtime.
 *   test_mpi_late_peer count
 * A collective of over 2^31 - 1 elements per rank is refused (ZT_ERR_UNSUPPORTED, nothing
 * issued) on every rank, not cut to 32 bits (2^32 + 1 elements would move one). */
#include "comm/comm.h"
#include "rank_check.h"
#include "ref_mlp.h"

#include <mpi.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LATE_EXIT 75

static double late_s(void)
{
    const char *t = getenv("ZT_COMM_TIMEOUT");
    return 2.5 * (t && atof(t) > 0 ? atof(t) : 600.0);
}

static const char *g_site = "";
static char g_mark[4096]; /* <dir>/late-done: rank 1's late collective completed */

static void mark_done(void)
{
    FILE *f = fopen(g_mark, "w");
    if (f)
        fclose(f);
}

static void stop_for(double secs);

/* The MPI backend's reduce-scatter (comm/mpi.c calls it; linked in, so this program's own
 * definition is the one it reaches): rank 1 stops on entering its first one in the "release"
 * site, as if it froze there, then goes on with PMPI's. */
int MPI_Reduce_scatter_block(const void *send, void *recv, int count, MPI_Datatype t, MPI_Op op,
                             MPI_Comm comm)
{
    static int stopped;
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (strcmp(g_site, "release") || rank != 1 || stopped++)
        return PMPI_Reduce_scatter_block(send, recv, count, t, op, comm);
    stop_for(late_s());
    int rc = PMPI_Reduce_scatter_block(send, recv, count, t, op, comm);
    printf("rank 1: release after resuming -> %s (its reduce-scatter)\n",
           rc == MPI_SUCCESS ? "ZT_OK" : "an MPI error");
    fflush(stdout);
    mark_done();
    return rc;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Stops this process until a child sends SIGCONT after `secs` seconds. */
static void stop_for(double secs)
{
    fflush(stdout);
    pid_t parent = getpid(), child = fork();
    if (child == 0) {
        struct timespec t = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
        while (nanosleep(&t, &t) != 0)
            ;
        kill(parent, SIGCONT);
        _exit(0);
    }
    raise(SIGSTOP);
    printf("rank 1: resumed\n");
    fflush(stdout);
}

/* The "release" site, both ranks: one micro-step of ZeRO stage 2, its gradients summed at
 * once (overlap_comm off), then the runtime destroyed. */
static zt_status release_site(zt_error *err)
{
    const mlp_dims dims = {16, 48, 4, 48};
    const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};
    zt_runtime *rt = NULL;
    minimal_model m;
    int rank = 0, world = 1;
    zt_status st = zt_runtime_create(
        NULL, ref_mlp_config(&hp, "none", "cpu", 1, ", \"stage\": 2, \"overlap_comm\": false", ""),
        &rt);
    if (st == ZT_OK && (st = minimal_register(rt, &dims, 42, &m)) == ZT_OK &&
        (st = zt_runtime_commit(rt)) == ZT_OK &&
        (st = zt_runtime_rank(rt, &rank, &world)) == ZT_OK) {
        float loss;
        int rows = dims.batch / world;
        st = minimal_micro_step(rt, &m, 0, rank * rows, rows, &loss);
        if (st == ZT_OK) /* the step's last bucket is summed here */
            st = zt_step(rt, NULL, NULL);
    }
    if (st != ZT_OK)
        ZT_ERR(err, st, "%s", zt_last_error(rt));
    zt_runtime_destroy(rt); /* frees what the reduction did not keep */
    return st;
}

/* Rank 0's side of each site, in a frame of its own that is gone when the collective ends. */
static __attribute__((noinline)) zt_status site(zt_comm *c, const char *what, zt_error *err)
{
    zt_status st = ZT_OK;
    if (strcmp(what, "wait") == 0) {
        /* lane 0: an all-reduce rank 1 has not entered; lane 1: a broadcast from rank 0,
         * which completes here without rank 1 (sent eagerly) */
        static double a[4], b[4];
        static zt_comm_req ra, rb;
        st = zt_comm_allreduce(c, a, a, 4, ZT_COMM_F64, ZT_REDUCE_SUM, &ra, err);
        if (st == ZT_OK)
            st = zt_comm_broadcast(c, b, 4, ZT_COMM_F64, 0, &rb, err);
        return st == ZT_OK ? zt_comm_wait(c, &rb, err) : st;
    }
    if (strcmp(what, "agree") == 0)
        return zt_comm_agree(c, ZT_OK, "the late peer's test", err);
    if (strcmp(what, "sync") == 0) {
        double *buf = calloc(64, sizeof *buf);
        st = zt_comm_allreduce_sync(c, buf, 64, ZT_COMM_F64, ZT_REDUCE_SUM, err);
        free(buf); /* the caller's again, whatever the call returned */
        return st;
    }
    if (strcmp(what, "gatherv") == 0) {
        size_t counts[2] = {16, 16}, displs[2] = {0, 16};
        float *own = calloc(16, sizeof *own), *all = calloc(32, sizeof *all);
        st = zt_comm_gatherv_sync(c, own, all, counts, displs, ZT_COMM_F32, 0, err);
        free(own), free(all);
        return st;
    }
    if (strcmp(what, "local_rank") == 0) {
        int local_rank = -1, local_size = -1;
        return zt_comm_local_rank(c, &local_rank, &local_size, err);
    }
    if (strcmp(what, "node_id") == 0) {
        int64_t ids[2] = {-1, -1};
        const char *how = NULL;
        return zt_comm_node_ids(c, ids, &how, err);
    }
    if (strcmp(what, "release") == 0)
        return release_site(err);
    if (strcmp(what, "split") == 0) {
        zt_comm *sub = NULL;
        st = zt_comm_split(c, 0, c->rank, &sub, err);
        if (st == ZT_OK)
            zt_comm_destroy(sub);
        return st;
    }
    return ZT_ERR(err, ZT_ERR_ARGUMENT, "unknown site '%s'", what);
}

/* Rank 1's side after it resumed: the one collective rank 0 left in flight. */
static zt_status late_side(zt_comm *c, const char *what, zt_error *err)
{
    zt_comm_req ra = {0}, rb = {0};
    if (strcmp(what, "wait") == 0) {
        double a[4] = {0}, b[4] = {0};
        zt_status st = zt_comm_allreduce(c, a, a, 4, ZT_COMM_F64, ZT_REDUCE_SUM, &ra, err);
        if (st == ZT_OK)
            st = zt_comm_broadcast(c, b, 4, ZT_COMM_F64, 0, &rb, err);
        if (st == ZT_OK)
            st = zt_comm_wait(c, &ra, err);
        return st == ZT_OK ? zt_comm_wait(c, &rb, err) : st;
    }
    if (strcmp(what, "split") == 0) {
        zt_comm *sub = NULL;
        zt_status st = zt_comm_split(c, 0, c->rank, &sub, err);
        if (st == ZT_OK)
            zt_comm_destroy(sub);
        return st;
    }
    if (strcmp(what, "node_id") == 0) { /* the backend's part only: rank 0 issued no more */
        int node = -1;
        const char *how = NULL;
        return c->iface->node_id(c, &node, &how, err);
    }
    return site(c, what, err); /* one collective each, the same on both ranks */
}

static const char *name(zt_status st)
{
    return st == ZT_OK ? "ZT_OK" : st == ZT_ERR_COMM ? "ZT_ERR_COMM" : zt_status_string(st);
}

static int huge_count(zt_comm *c)
{
    /* 2^32 + 1 elements per rank: a count cut to an int would be 1 */
    size_t count = ((size_t)1 << 32) + 1;
    unsigned char send[8] = {0}, recv[64] = {0};
    zt_comm_req req = {0};
    zt_error err = {0};
    zt_status st = zt_comm_allgather(c, send, recv, count, ZT_COMM_U8, &req, &err);
    if (st == ZT_OK)
        zt_comm_wait(c, &req, &err);
    CHECK(st == ZT_ERR_UNSUPPORTED && strstr(err.msg, "4294967297"),
          "an all-gather of 2^32 + 1 bytes per rank: %s (%s), not refused", zt_status_string(st),
          err.msg);
    double d[2] = {0};
    st =
        zt_comm_allreduce(c, d, d, ((size_t)INT32_MAX) + 1, ZT_COMM_F64, ZT_REDUCE_SUM, &req, &err);
    if (st == ZT_OK)
        zt_comm_wait(c, &req, &err);
    CHECK(st == ZT_ERR_UNSUPPORTED, "an all-reduce of 2^31 elements: %s (%s), not refused",
          zt_status_string(st), err.msg);
    /* the communicator still works: nothing was issued */
    CHECK(zt_comm_allreduce_sync(c, d, 2, ZT_COMM_F64, ZT_REDUCE_SUM, &err) == ZT_OK,
          "an all-reduce after the refusals: %s", err.msg);
    printf("rank %d: counts over 2^31 - 1 refused: %s\n", c->rank, err.msg);
    return failures ? 1 : 0;
}

/* Rank 0's process id, in <dir>/rank0.pid, so that rank 1 can outlive it (both ranks run on
 * this machine). */
static void note_pid(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank0.pid", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
}

/* Waits (at most 30 s) until rank 0's process is gone, then half a second for the launcher
 * to take its status. */
static void wait_until_gone(const char *dir)
{
    char path[4096];
    long pid = 0;
    snprintf(path, sizeof path, "%s/rank0.pid", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    for (int i = 0; pid > 0 && i < 600 && kill((pid_t)pid, 0) == 0; i++)
        usleep(50000);
    usleep(500000);
}

int main(int argc, char **argv)
{
    zt_comm *c = NULL;
    zt_error err = {0};
    if (argc < 2 || zt_comm_create("mpi", &c, &err) != ZT_OK) {
        fprintf(stderr, "usage: test_mpi_late_peer <site> <dir> | count (%s)\n", err.msg);
        return 1;
    }
    if (strcmp(argv[1], "count") == 0) {
        int rc = huge_count(c);
        zt_comm_destroy(c);
        return rc;
    }
    if (argc < 3 || c->size != 2) {
        fprintf(stderr, "a site needs 2 ranks and a folder\n");
        return 1;
    }
    snprintf(g_mark, sizeof g_mark, "%s/late-done", argv[2]);
    const char *mark = g_mark;
    g_site = argv[1];
    if (c->rank == 0)
        note_pid(argv[2]);
    if (c->rank == 1 && !strcmp(argv[1], "release")) { /* stops inside the reduction */
        zt_status st = release_site(&err);             /* its collectives after that one time out */
        printf("rank 1: the rest of the micro-step -> %s\n", name(st));
        fflush(stdout);
        struct stat sb; /* its reduce-scatter may still be finishing: that comes first */
        for (int i = 0; i < 400 && stat(g_mark, &sb) != 0; i++)
            usleep(50000);
        /* rank 0 exits first (and the launcher with its status): MPI is not finalised here,
         * as a collective of this rank was given up on, and the launcher reports the first
         * process that ends */
        wait_until_gone(argv[2]);
        return 0;
    }
    if (c->rank == 1) {
        stop_for(late_s());
        zt_status st = late_side(c, argv[1], &err);
        printf("rank 1: %s after resuming -> %s %s\n", argv[1], name(st), err.msg);
        fflush(stdout);
        mark_done();
        zt_comm_destroy(c);
        return st == ZT_OK ? 0 : 1;
    }
    double t0 = now_s();
    zt_status st = site(c, argv[1], &err);
    printf("rank 0: %s -> %s after %.2f s: %s [%s]\n", argv[1], name(st), now_s() - t0, err.msg,
           st == ZT_ERR_COMM ? "as expected" : "WRONG");
    fflush(stdout);
    struct stat sb;
    for (int i = 0; i < 400 && stat(mark, &sb) != 0; i++) /* the late completion, here */
        usleep(50000);
    usleep(300000); /* rank 0's worker ends its collective once rank 1's has */
    zt_comm_destroy(c);
    printf("rank 0: exiting %d\n", st == ZT_ERR_COMM ? LATE_EXIT : 1);
    fflush(stdout);
    /* "release": rank 1 gave up on its later collectives and never finalises MPI, so a
     * finalise here would wait for it in Open MPI's fence until the launcher ends the job */
    if (!strcmp(argv[1], "release"))
        _exit(st == ZT_ERR_COMM ? LATE_EXIT : 1);
    return st == ZT_ERR_COMM ? LATE_EXIT : 1;
}

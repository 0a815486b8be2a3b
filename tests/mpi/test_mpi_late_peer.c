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
 *   test_mpi_late_peer <wait|agree|sync|gatherv|local_rank|node_id|split> <dir>
 * Sites: "wait", mpi_wait given up while an earlier collective (on another lane:
 * ZT_MPI_LANES=2) is missing; "agree", zt_comm_agree; "sync", zt_comm_allreduce_sync into a
 * heap buffer the caller frees after the failure; "gatherv", zt_comm_gatherv_sync likewise;
 * "local_rank", zt_comm_local_rank; "node_id", the backend's node id (zt_comm_node_ids);
 * "split", zt_comm_split into a stack variable.
 *   test_mpi_late_peer count
 * A collective of over 2^31 - 1 elements per rank is refused (ZT_ERR_UNSUPPORTED, nothing
 * issued) on every rank, not cut to 32 bits (2^32 + 1 elements would move one). */
#include "comm/comm.h"
#include "rank_check.h"

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
    char mark[4096];
    snprintf(mark, sizeof mark, "%s/late-done", argv[2]);
    if (c->rank == 1) {
        stop_for(late_s());
        zt_status st = late_side(c, argv[1], &err);
        printf("rank 1: %s after resuming -> %s %s\n", argv[1], name(st), err.msg);
        fflush(stdout);
        FILE *f = fopen(mark, "w");
        if (f)
            fclose(f);
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
    return st == ZT_ERR_COMM ? LATE_EXIT : 1;
}

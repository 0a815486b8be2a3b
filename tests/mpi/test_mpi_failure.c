/* SPDX-License-Identifier: MIT */
/* A rank that fails makes every rank return an error instead of hanging: rank 1 gets an
 * invalid config; every rank's zt_runtime_create must fail, rank 1 with the config error,
 * the others with ZT_ERR_COMM naming rank 1. Then a short collective timeout turns a peer
 * that stops participating into an error on the waiting ranks, which names the waiting rank
 * and the ranks waited for by world rank and host name: over the world, and over a
 * sub-communicator (the odd and the even ranks) whose ranks are not the world's. */
#include "comm/comm.h"

#include "ztier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int check_create_failure(int rank)
{
    const char *good = "{\"ztier\": {\"hbm_capacity\": \"16M\"}}";
    const char *bad = "{\"zero_optimization\": {\"stage\": 4}}";
    zt_runtime *rt = NULL;
    zt_status st = zt_runtime_create(NULL, rank == 1 ? bad : good, &rt);
    const char *msg = zt_last_error(rt);
    int ok = rank == 1 ? st == ZT_ERR_CONFIG && strstr(msg, "zero_optimization.stage")
                       : st == ZT_ERR_COMM && strstr(msg, "rank 1");
    printf("rank %d: create -> %s: %s [%s]\n", rank, zt_status_string(st), msg,
           ok ? "as expected" : "WRONG");
    zt_runtime_destroy(rt);
    return ok;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The sub-communicator's rank 0 (world: the whole world, else the ranks of rank's parity)
 * joins a collective late: the others must give up with an error after the timeout instead of
 * hanging, name themselves and the late rank by world rank and host. From then on their
 * communicator has failed: a wait retried for the given-up collective and a new collective
 * fail at once (not after one more timeout each) with the first failure's message; once the
 * late rank has joined, the given-up collective's wait returns its result. */
static int check_timeout(int rank, int world)
{
    zt_comm *w = NULL, *c = NULL;
    zt_error err = {0};
    if (zt_comm_create("mpi", &w, &err) != ZT_OK)
        return 0;
    if (!world && zt_comm_split(w, rank % 2, rank, &c, &err) != ZT_OK)
        return zt_comm_destroy(w), 0;
    if (world)
        c = w;
    char host[64] = "", me[160], late[160];
    gethostname(host, sizeof host - 1);
    int late_rank = world ? 0 : rank % 2;
    if (world)
        snprintf(me, sizeof me, "world rank %d (host %s):", rank, host);
    else
        snprintf(me, sizeof me, "world rank %d (host %s), rank %d of %d here:", rank, host, c->rank,
                 c->size);
    snprintf(late, sizeof late,
             c->size > 2 ? "one of world ranks %d (host %s)" : "world rank %d (host %s)", late_rank,
             host);
    double x = 1.0;
    zt_comm_req req = {0};
    if (c->rank == 0)
        sleep(5); /* the others time out after 3 s */
    zt_status st = zt_comm_allreduce(c, &x, &x, 1, ZT_COMM_F64, ZT_REDUCE_SUM, &req, &err);
    if (st == ZT_OK)
        st = zt_comm_wait(c, &req, &err);
    int ok = c->rank == 0 ? st == ZT_OK
                          : st == ZT_ERR_COMM && strstr(err.msg, "did not complete within") &&
                                strstr(err.msg, me) == err.msg && strstr(err.msg, late);
    printf("rank %d: late peer%s -> %s [%s]\n", rank, world ? "" : " (sub-communicator)",
           st == ZT_OK ? "completed" : err.msg, ok ? "as expected" : "WRONG");
    if (c->rank != 0) {
        char first[ZT_ERROR_MSG_MAX];
        snprintf(first, sizeof first, "%s", err.msg);
        double t0 = now_s();
        zt_error again = {0}, next = {0};
        zt_status retried = zt_comm_wait(c, &req, &again); /* the late rank is still asleep */
        zt_comm_req barrier = {0};
        zt_status later = zt_comm_barrier(c, &barrier, &next);
        if (later == ZT_OK)
            later = zt_comm_wait(c, &barrier, &next);
        double took = now_s() - t0;
        int fast = retried == ZT_ERR_COMM && !strcmp(again.msg, first) && later == ZT_ERR_COMM &&
                   !strcmp(next.msg, first) && took < 1.0;
        printf("rank %d: retried wait -> %s, a new collective -> %s, after %.2f s [%s]\n", rank,
               zt_status_string(retried), zt_status_string(later), took,
               fast ? "as expected" : "WRONG");
        ok = ok && fast;
        for (int i = 0; i < 400 && !zt_comm_test(c, &req); i++) /* it joins at 5 s */
            usleep(25000);
        ok = ok && zt_comm_wait(c, &req, &err) == ZT_OK;
    }
    ok = ok && x == (double)c->size;
    if (c != w)
        zt_comm_destroy(c);
    zt_comm_destroy(w);
    return ok;
}

int main(void)
{
    if (zt_launcher_world_size() < 2) {
        fprintf(stderr, "run under mpirun with 2 or more ranks\n");
        return 77;
    }
    setenv("ZT_COMM_TIMEOUT", "3", 1);
    int rank = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0");
    int ok = check_create_failure(rank);
    ok = ok && check_timeout(rank, 1);
    ok = ok && check_timeout(rank, 0);
    return ok ? 0 : 1;
}

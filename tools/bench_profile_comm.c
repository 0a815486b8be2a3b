/* SPDX-License-Identifier: MIT */
/* The comm backend's collectives for `ztier bench profile` under mpirun: all-gather and
 * reduce-scatter over host memory (the buffers the mpi backend takes), every rank at once.
 * Bus bandwidth as nccl-tests counts it: the bytes of the whole gathered (or reduced) buffer
 * times (world - 1) / world over the time, which is what each rank's link carries in a ring;
 * latency: the median time of a collective of 8 bytes per rank. Every rank runs the same
 * number of repetitions (collectives must match); each time is the slowest rank's (the
 * collective ends for all when it ends for the last). */
#include "tools/bench_common.h"
#include "tools/bench_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMM_REPS 7
#define LAT_REPS 21

enum { ALLGATHER, REDUCE_SCATTER };

/* One collective of `count` elements per rank; seconds, the slowest rank's; -1 on error. */
static double one(profile *p, int op, void *send, void *recv, size_t count, zt_comm_dtype dt)
{
    zt_error err = {0};
    zt_comm_req req = {0};
    double t0 = bench_now();
    zt_status st = op == ALLGATHER ? zt_comm_allgather(p->comm, send, recv, count, dt, &req, &err)
                                   : zt_comm_reduce_scatter(p->comm, send, recv, count, dt,
                                                            ZT_REDUCE_SUM, &req, &err);
    if (st == ZT_OK)
        st = zt_comm_wait(p->comm, &req, &err);
    double t = bench_now() - t0;
    if (st == ZT_OK)
        st = zt_comm_allreduce_sync(p->comm, &t, 1, ZT_COMM_F64, ZT_REDUCE_MAX, &err);
    if (st != ZT_OK) {
        fprintf(stderr, PROFILE_CMD ": rank %d: %s\n", p->rank, err.msg);
        return -1;
    }
    return t;
}

/* The median over reps of op on count elements per rank (after a warm-up); -1 on error. */
static double median_of(profile *p, int op, void *send, void *recv, size_t count, int reps)
{
    double t[LAT_REPS];
    zt_comm_dtype dt = op == ALLGATHER ? ZT_COMM_U8 : ZT_COMM_F32;
    if (one(p, op, send, recv, count, dt) < 0)
        return -1;
    for (int i = 0; i < reps; i++)
        if ((t[i] = one(p, op, send, recv, count, dt)) < 0)
            return -1;
    return bench_median(t, reps);
}

int profile_comm(profile *p)
{
    const int w = p->world;
    /* the whole buffer: 64 MiB at the full budget, at least 1 MiB, a multiple of 4 w */
    size_t total = (size_t)(64.0 * 1048576 * p->scale);
    total = total < (1u << 20) ? 1u << 20 : total;
    total -= total % (4 * (size_t)w);
    char *send = malloc(total), *recv = malloc(total);
    if (!send || !recv) {
        free(send), free(recv);
        fprintf(stderr, PROFILE_CMD ": out of memory for the collectives' %zu bytes\n", total);
        return -1;
    }
    memset(send, 1, total), memset(recv, 0, total);
    /* all-gather: each rank sends total / w bytes; reduce-scatter: each sends total bytes of
     * fp32 and keeps its total / w */
    double ag = median_of(p, ALLGATHER, send, recv, total / w, COMM_REPS);
    double rs = ag < 0 ? -1 : median_of(p, REDUCE_SCATTER, send, recv, total / 4 / w, COMM_REPS);
    double ag_lat = rs < 0 ? -1 : median_of(p, ALLGATHER, send, recv, 8, LAT_REPS);
    double rs_lat = ag_lat < 0 ? -1 : median_of(p, REDUCE_SCATTER, send, recv, 2, LAT_REPS);
    free(send), free(recv);
    if (rs_lat < 0)
        return -1;
    const char *be = p->comm->iface->name;
    double bus = (double)total * (w - 1) / w;
    json_t *r[4];
    r[0] = profile_rate(p, "allgather_bytes_per_s", bus / ag, "B/s",
                        "%s all-gather of %zu bytes in all over %d ranks, host memory, the "
                        "median of %d (the slowest rank's time), bus bandwidth: bytes x "
                        "(world - 1) / world",
                        be, total, w, COMM_REPS);
    r[1] = profile_rate(p, "reduce_scatter_bytes_per_s", bus / rs, "B/s",
                        "%s reduce-scatter (fp32 sum) of %zu bytes in all over %d ranks, host "
                        "memory, the median of %d (the slowest rank's time), bus bandwidth: "
                        "bytes x (world - 1) / world",
                        be, total, w, COMM_REPS);
    r[2] = profile_rate(p, "allgather_latency_s", ag_lat, "s",
                        "%s all-gather of 8 bytes per rank over %d ranks, the median of %d", be, w,
                        LAT_REPS);
    r[3] = profile_rate(p, "reduce_scatter_latency_s", rs_lat, "s",
                        "%s reduce-scatter of 2 fp32 per rank over %d ranks, the median of %d", be,
                        w, LAT_REPS);
    for (int i = 0; i < 4; i++)
        if (r[i])
            json_object_set_new(r[i], "world", json_integer(w));
    return 0;
}

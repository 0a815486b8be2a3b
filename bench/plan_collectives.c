/* SPDX-License-Identifier: MIT */
/* The collectives' rates for bench/plan.sh's profile, as ztier's MPI backend calls them
 * (comm/mpi.c: MPI_Allgather, MPI_Reduce_scatter_block of floats): the median time of `reps`
 * calls of each on `bytes` gathered (reduced) per call, printed as JSON with the bus bandwidth
 * (bytes * (world - 1) / world / s) and the latency of an 8-byte call. Replaced by `ztier bench
 * profile` under mpirun.
 *   mpicc -O2 bench/plan_collectives.c -o plan_collectives
 *   mpirun -np 2 ./plan_collectives [bytes] [reps] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median seconds of reps calls of op (0: all-gather, 1: reduce-scatter) on n floats in all */
static double time_op(int op, float *send, float *recv, int n, int world, int reps)
{
    double t[64];
    int per = n / world;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (op == 0)
            MPI_Allgather(send, per, MPI_FLOAT, recv, per, MPI_FLOAT, MPI_COMM_WORLD);
        else
            MPI_Reduce_scatter_block(send, recv, per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double s = MPI_Wtime() - t0;
        MPI_Allreduce(&s, &t[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); /* the slowest rank */
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    return t[reps / 2];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    long bytes = argc > 1 ? atol(argv[1]) : 64L << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    if (reps < 1 || reps > 64)
        reps = 7;
    int n = (int)(bytes / 4 / world * world);
    float *send = calloc((size_t)n, 4), *recv = calloc((size_t)n, 4);
    if (!send || !recv) {
        fprintf(stderr, "plan_collectives: out of memory for %ld bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double ag = time_op(0, send, recv, n, world, reps), rs = time_op(1, send, recv, n, world, reps);
    double lag = time_op(0, send, recv, 2 * world, world, reps);
    double lrs = time_op(1, send, recv, 2 * world, world, reps);
    double bus = (double)n * 4 * (world - 1) / world;
    if (rank == 0)
        printf("{\"world\": %d, \"bytes\": %ld, \"allgather_bytes_per_s\": %.6g, "
               "\"reduce_scatter_bytes_per_s\": %.6g, \"allgather_latency_s\": %.3g, "
               "\"reduce_scatter_latency_s\": %.3g}\n",
               world, (long)n * 4, bus / ag, bus / rs, lag, lrs);
    free(send), free(recv);
    MPI_Finalize();
    return 0;
}

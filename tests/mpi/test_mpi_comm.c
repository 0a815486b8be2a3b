/* SPDX-License-Identifier: MIT */
/* The mpi comm backend under mpirun: every collective against values each rank can compute
 * on its own, 16-bit reductions carried out in fp32, splitting, and the bounded wait; the
 * node of each rank (one machine: one node, node id 0, the lowest rank); an agreement names
 * another rank's status as it came, one that is none of ztier's too; gathers of unequal
 * blocks (some empty, 16-bit moved as bits) to each root and to every rank. */
#include "core/convert.h"
#include "comm/comm.h"
#include "rank_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float value(int rank, size_t i) { return (float)(rank + 1) * 0.5f + (float)(i % 97); }

static void check_allgather(zt_comm *c, size_t count)
{
    int n = c->size, r = c->rank;
    float *buf = calloc(count * (size_t)n, sizeof(float));
    for (size_t i = 0; i < count; i++)
        buf[(size_t)r * count + i] = value(r, i);
    zt_error err = {0};
    /* in place: this rank's block already sits at its slot */
    CHECK(zt_comm_allgather_sync(c, buf + (size_t)r * count, buf, count, ZT_COMM_F32, &err) ==
              ZT_OK,
          "allgather: %s", err.msg);
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++)
            CHECK(buf[(size_t)q * count + i] == value(q, i), "allgather block %d elem %zu", q, i);
    free(buf);
}

static void check_reduce_scatter(zt_comm *c, size_t count)
{
    int n = c->size, r = c->rank;
    float *send = malloc(count * (size_t)n * sizeof(float));
    for (size_t i = 0; i < count * (size_t)n; i++)
        send[i] = value(r, i);
    zt_comm_req req = {0};
    zt_error err = {0};
    CHECK(zt_comm_reduce_scatter(c, send, send, count, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err) ==
              ZT_OK,
          "reduce_scatter issue");
    CHECK(zt_comm_wait(c, &req, &err) == ZT_OK, "reduce_scatter: %s", err.msg);
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int q = 0; q < n; q++)
            want += value(q, (size_t)r * count + i);
        CHECK(send[i] == want, "reduce_scatter elem %zu: %g != %g", i, (double)send[i],
              (double)want);
    }
    free(send);
}

/* 16-bit sums move 16-bit values and round each add over ranks to 16 bits (as NCCL's ring):
 * over n ranks the result is within (n - 1) u sum |x| of the exact sum (u, the unit roundoff:
 * 2^-8 for bf16, 2^-11 for fp16, per rounding, first order), and the same bits on every rank
 * (the ops combine in rank order). The inputs make partial sums that lose bits in bf16; the
 * bound and the agreement are what is checked. */
static void check_16bit_allreduce_rounded(zt_comm *c, zt_dtype t)
{
    enum { N = 33 };
    zt_comm_dtype ct = t == ZT_BF16 ? ZT_COMM_BF16 : ZT_COMM_F16;
    const char *name = t == ZT_BF16 ? "bf16" : "fp16";
    double u = t == ZT_BF16 ? 0x1p-8 : 0x1p-11;
    float x[N];
    uint16_t h[N], out[N];
    for (int i = 0; i < N; i++)
        x[i] = 1.0f + (float)(c->rank + 1) * 0.00390625f * (float)(i % 5);
    zt_convert_array(h, t, x, ZT_F32, N);
    zt_comm_req req = {0};
    zt_error err = {0};
    CHECK(zt_comm_allreduce(c, h, out, N, ct, ZT_REDUCE_SUM, &req, &err) == ZT_OK,
          "%s allreduce issue", name);
    CHECK(zt_comm_wait(c, &req, &err) == ZT_OK, "%s allreduce: %s", name, err.msg);
    uint16_t *all = malloc(sizeof(uint16_t) * N * (size_t)c->size);
    CHECK(all && zt_comm_allgather_sync(c, out, all, N, ct, &err) == ZT_OK,
          "gathering the sums: %s", err.msg);
    for (int i = 0; i < N; i++) {
        double exact = 0, mag = 0;
        for (int q = 0; q < c->size; q++) {
            float xi = 1.0f + (float)(q + 1) * 0.00390625f * (float)(i % 5), back;
            uint16_t hq;
            zt_convert_array(&hq, t, &xi, ZT_F32, 1);
            zt_convert_array(&back, ZT_F32, &hq, t, 1);
            exact += back, mag += back < 0 ? -back : back;
        }
        float got;
        zt_convert_array(&got, ZT_F32, &out[i], t, 1);
        double bound = (c->size - 1) * u * mag;
        CHECK(got - exact <= bound && exact - got <= bound,
              "%s allreduce elem %d: %.8g, exact %.8g, beyond the bound %.3g", name, i, (double)got,
              exact, bound);
        for (int q = 0; q < c->size; q++)
            CHECK(all[(size_t)q * N + (size_t)i] == out[i],
                  "%s allreduce elem %d: rank %d has %04x, this rank %04x", name, i, q,
                  all[(size_t)q * N + (size_t)i], out[i]);
    }
    free(all);
}

static void check_alltoall_bcast_split(zt_comm *c)
{
    int n = c->size, r = c->rank;
    int64_t *send = malloc(sizeof(int64_t) * (size_t)n),
            *recv = malloc(sizeof(int64_t) * (size_t)n);
    for (int q = 0; q < n; q++)
        send[q] = r * 100 + q;
    zt_comm_req req = {0};
    zt_error err = {0};
    zt_comm_alltoall(c, send, recv, 1, ZT_COMM_I64, &req, &err);
    CHECK(zt_comm_wait(c, &req, &err) == ZT_OK, "alltoall: %s", err.msg);
    for (int q = 0; q < n; q++)
        CHECK(recv[q] == q * 100 + r, "alltoall from %d", q);
    double v = r == n - 1 ? 42.5 : 0.0;
    zt_comm_broadcast(c, &v, 1, ZT_COMM_F64, n - 1, &req, &err);
    CHECK(zt_comm_wait(c, &req, &err) == ZT_OK && v == 42.5, "broadcast");
    zt_comm *half = NULL;
    CHECK(zt_comm_split(c, r % 2, r, &half, &err) == ZT_OK, "split: %s", err.msg);
    if (half) {
        CHECK(half->size == (n + 1 - r % 2) / 2, "split size %d", half->size);
        double s = 1.0;
        CHECK(zt_comm_allreduce_sync(half, &s, 1, ZT_COMM_F64, ZT_REDUCE_SUM, &err) == ZT_OK &&
                  s == half->size,
              "allreduce on the split communicator");
        zt_comm_destroy(half);
    }
    free(send), free(recv);
}

static void check_node_ids_and_agree(zt_comm *c)
{
    int n = c->size, r = c->rank;
    int64_t *ids = calloc((size_t)n, sizeof *ids);
    const char *how = NULL;
    zt_error err = {0};
    CHECK(zt_comm_node_ids(c, ids, &how, &err) == ZT_OK, "node ids: %s", err.msg);
    for (int q = 0; q < n; q++)
        CHECK(ids[q] == 0, "rank %d's node id %lld (one machine: 0, its lowest rank)", q,
              (long long)ids[q]);
    CHECK(how && strstr(how, "MPI_Comm_split_type"), "found by: %s", how ? how : "(none)");
    free(ids);
    /* the last rank reports a status that is no zt_status (as garbage from a mismatched
     * collective would): the others print it as it came */
    zt_status mine = r == n - 1 ? (zt_status)1000 : ZT_OK;
    zt_status st = zt_comm_agree(c, mine, "the check", &err);
    char want[128];
    snprintf(want, sizeof want,
             "the check failed on rank %d of %d (status 1000: not a ztier status", n - 1, n);
    CHECK(r == n - 1 ? st == mine : st == ZT_ERR_COMM && strstr(err.msg, want), "agreement: %s",
          err.msg);
    mine = r == 0 ? ZT_ERR_IO : ZT_OK;
    st = zt_comm_agree(c, mine, "the check", &err);
    snprintf(want, sizeof want, "(status %d: %s;", (int)ZT_ERR_IO, zt_status_string(ZT_ERR_IO));
    CHECK(r == 0 ? st == mine : st == ZT_ERR_COMM && strstr(err.msg, want), "agreement: %s",
          err.msg);
}

/* Rank q sends q * 3 + (q == 1 ? 0 : 5) elements (rank 1 none), placed in reverse rank order
 * with a gap: to each root in turn (nothing lands elsewhere) and to every rank. bf16 data are
 * moved bit for bit (patterns that are NaNs as floats included). */
static void check_gatherv(zt_comm *c)
{
    int n = c->size, r = c->rank;
    size_t *counts = calloc(2 * (size_t)n, sizeof *counts), *displs = counts + n, total = 0;
    for (int q = n - 1; q >= 0; q--) {
        counts[q] = q == 1 ? 0 : (size_t)q * 3 + 5;
        displs[q] = total + 2;
        total += counts[q] + 2;
    }
    uint16_t *send = malloc((counts[r] + 1) * sizeof *send);
    uint16_t *recv = malloc(total * sizeof *recv);
    for (size_t i = 0; i < counts[r]; i++)
        send[i] = (uint16_t)(0x7fc0u + (unsigned)r * 256u + (unsigned)i);
    zt_error err = {0};
    for (int root = -1; root < n; root++) {
        for (size_t i = 0; i < total; i++)
            recv[i] = 0xdead;
        CHECK(zt_comm_gatherv_sync(c, send, recv, counts, displs, ZT_COMM_BF16, root, &err) ==
                  ZT_OK,
              "gatherv to %d: %s", root, err.msg);
        int bad = 0;
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < counts[q]; i++) {
                uint16_t want = root < 0 || root == r
                                    ? (uint16_t)(0x7fc0u + (unsigned)q * 256u + (unsigned)i)
                                    : 0xdead;
                bad += recv[displs[q] + i] != want;
            }
        for (int q = 0; q < n; q++) /* the gaps stay untouched */
            bad += recv[displs[q] - 2] != 0xdead || recv[displs[q] - 1] != 0xdead;
        CHECK(bad == 0, "gatherv to %d: %d elements wrong on rank %d", root, bad, r);
    }
    zt_comm_req req = {0};
    CHECK(zt_comm_gatherv(c, send, recv, counts, displs, ZT_COMM_BF16, n, &req, &err) ==
                  ZT_ERR_ARGUMENT &&
              strstr(err.msg, "outside a world"),
          "gatherv to root %d: %s", n, err.msg);
    free(send), free(recv), free(counts);
}

int main(void)
{
    zt_comm *c = NULL;
    zt_error err = {0};
    if (zt_comm_create("auto", &c, &err) != ZT_OK) {
        fprintf(stderr, "cannot create the communicator: %s\n", err.msg);
        return 1;
    }
    if (c->size < 2) {
        fprintf(stderr, "run under mpirun with 2 or more ranks\n");
        zt_comm_destroy(c);
        return 77;
    }
    check_allgather(c, 1);
    check_allgather(c, 1000);
    check_reduce_scatter(c, 1);
    check_reduce_scatter(c, 4099);
    check_16bit_allreduce_rounded(c, ZT_BF16);
    check_16bit_allreduce_rounded(c, ZT_F16);
    check_alltoall_bcast_split(c);
    check_node_ids_and_agree(c);
    check_gatherv(c);
    double total = failures;
    zt_comm_allreduce_sync(c, &total, 1, ZT_COMM_F64, ZT_REDUCE_SUM, &err);
    if (c->rank == 0)
        printf("mpi comm: %d ranks, %s\n", c->size, total == 0 ? "all checks passed" : "FAILED");
    zt_comm_destroy(c);
    return total == 0 ? 0 : 1;
}

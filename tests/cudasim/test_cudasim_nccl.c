/* SPDX-License-Identifier: MIT */
/* The stand-in's NCCL (cudasim/src/nccl.cc) with two ranks as threads, each on a device of
 * its own (ZT_CUDASIM_DEVICES=2): every collective ztier uses against values computed here,
 * the alltoall as grouped sends and receives, a split; two ranks on one device refused as
 * NCCL refuses them; a collective that hangs ended by ncclCommAbort with an asynchronous
 * error; a communicator used after it was aborted, and a buffer of the wrong device, named. */
#include "cudasim.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { RANKS = 2, N = 1000 };

typedef struct rank_run {
    int rank, device;
    ncclUniqueId id;
    ncclResult_t init, result;
    float got_sum[N], got_max[N], got_gather[RANKS * N], got_scatter[N / RANKS], got_bcast[N];
    float got_a2a[RANKS * 16];
    int split_rank, split_size;
    int pending_at_abort; /* the hung collective was pending, with no error yet */
    int destroy_refused;  /* a destroy after the abort was refused, as a finding */
    char why[256];        /* ncclGetLastError after a failed init */
} rank_run;

/* The rank's GPU current, its communicator joined; ncclSuccess or the failure. */
static ncclResult_t join(rank_run *r, ncclComm_t *comm)
{
    cudaSetDevice(r->device);
    r->init = ncclCommInitRank(comm, RANKS, r->id, r->rank);
    return r->init;
}

/* rank r's element i */
static float value(int r, int i) { return (float)((i * 7 + r * 13) % 101) - 50.0f; }

static float *dev_of(const float *h, size_t n)
{
    float *d = NULL;
    if (cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess)
        return NULL;
    if (h)
        cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}

static void *collectives(void *arg)
{
    rank_run *r = arg;
    ncclComm_t comm;
    if (join(r, &comm) != ncclSuccess)
        return NULL;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float mine[N], a2a[RANKS * 16];
    for (int i = 0; i < N; i++)
        mine[i] = value(r->rank, i);
    for (int i = 0; i < RANKS * 16; i++)
        a2a[i] = (float)(r->rank * 1000 + i);
    float *d_in = dev_of(mine, N), *d_sum = dev_of(NULL, N), *d_max = dev_of(NULL, N);
    float *d_gather = dev_of(NULL, RANKS * N), *d_scatter = dev_of(NULL, N / RANKS);
    float *d_bcast = dev_of(mine, N), *d_a2a = dev_of(a2a, RANKS * 16);
    float *d_a2a_out = dev_of(NULL, RANKS * 16);
    ncclResult_t rc = ncclAllReduce(d_in, d_sum, N, ncclFloat32, ncclSum, comm, s);
    if (rc == ncclSuccess)
        rc = ncclAllReduce(d_in, d_max, N, ncclFloat32, ncclMax, comm, s);
    if (rc == ncclSuccess)
        rc = ncclAllGather(d_in, d_gather, N, ncclFloat32, comm, s);
    if (rc == ncclSuccess)
        rc = ncclReduceScatter(d_in, d_scatter, N / RANKS, ncclFloat32, ncclSum, comm, s);
    if (rc == ncclSuccess)
        rc = ncclBroadcast(d_bcast, d_bcast, N, ncclFloat32, 1, comm, s);
    if (rc == ncclSuccess) { /* alltoall: block p of mine to rank p */
        ncclGroupStart();
        for (int p = 0; p < RANKS; p++) {
            ncclSend(d_a2a + p * 16, 16, ncclFloat32, p, comm, s);
            ncclRecv(d_a2a_out + p * 16, 16, ncclFloat32, p, comm, s);
        }
        rc = ncclGroupEnd();
    }
    cudaStreamSynchronize(s);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    r->result = rc != ncclSuccess ? rc : async;
    cudaMemcpy(r->got_sum, d_sum, sizeof r->got_sum, cudaMemcpyDeviceToHost);
    cudaMemcpy(r->got_max, d_max, sizeof r->got_max, cudaMemcpyDeviceToHost);
    cudaMemcpy(r->got_gather, d_gather, sizeof r->got_gather, cudaMemcpyDeviceToHost);
    cudaMemcpy(r->got_scatter, d_scatter, sizeof r->got_scatter, cudaMemcpyDeviceToHost);
    cudaMemcpy(r->got_bcast, d_bcast, sizeof r->got_bcast, cudaMemcpyDeviceToHost);
    cudaMemcpy(r->got_a2a, d_a2a_out, sizeof r->got_a2a, cudaMemcpyDeviceToHost);
    ncclComm_t sub; /* each rank alone: colors differ */
    if (ncclCommSplit(comm, r->rank, 0, &sub, NULL) == ncclSuccess) {
        ncclCommUserRank(sub, &r->split_rank);
        ncclCommCount(sub, &r->split_size);
        ncclCommDestroy(sub);
    }
    float *ptrs[] = {d_in, d_sum, d_max, d_gather, d_scatter, d_bcast, d_a2a, d_a2a_out};
    for (size_t k = 0; k < sizeof ptrs / sizeof ptrs[0]; k++)
        cudaFree(ptrs[k]);
    cudaStreamDestroy(s);
    ncclCommDestroy(comm);
    return NULL;
}

/* fn on each rank, as threads; the ranks on GPUs `devices` (NULL: 0 and 1). */
static rank_run *run_ranks(const int *devices, void *(*fn)(void *))
{
    static rank_run runs[RANKS];
    static const int own[RANKS] = {0, 1};
    devices = devices ? devices : own;
    ncclUniqueId id;
    assert_int_equal(ncclGetUniqueId(&id), ncclSuccess);
    pthread_t t[RANKS];
    for (int r = 0; r < RANKS; r++) {
        memset(&runs[r], 0, sizeof runs[r]);
        runs[r].rank = r, runs[r].device = devices[r], runs[r].id = id;
        pthread_create(&t[r], NULL, fn, &runs[r]);
    }
    for (int r = 0; r < RANKS; r++)
        pthread_join(t[r], NULL);
    return runs;
}

static void test_collectives_match_the_references(void **state)
{
    (void)state;
    rank_run *runs = run_ranks(NULL, collectives);
    for (int r = 0; r < RANKS; r++) {
        rank_run *x = &runs[r];
        assert_int_equal(x->init, ncclSuccess);
        assert_int_equal(x->result, ncclSuccess);
        for (int i = 0; i < N; i++) {
            assert_true(x->got_sum[i] == value(0, i) + value(1, i));
            float a = value(0, i), b = value(1, i);
            assert_true(x->got_max[i] == (a > b ? a : b));
            assert_true(x->got_bcast[i] == value(1, i));
            for (int q = 0; q < RANKS; q++)
                assert_true(x->got_gather[q * N + i] == value(q, i));
        }
        for (int i = 0; i < N / RANKS; i++) {
            int at = r * (N / RANKS) + i;
            assert_true(x->got_scatter[i] == value(0, at) + value(1, at));
        }
        for (int q = 0; q < RANKS; q++) /* from rank q: its block r */
            for (int k = 0; k < 16; k++)
                assert_true(x->got_a2a[q * 16 + k] == (float)(q * 1000 + r * 16 + k));
        assert_int_equal(x->split_rank, 0);
        assert_int_equal(x->split_size, 1);
    }
    assert_int_equal(cudasim_findings(), 0);
}

static void *init_only(void *arg)
{
    rank_run *r = arg;
    ncclComm_t comm;
    if (join(r, &comm) == ncclSuccess)
        ncclCommDestroy(comm);
    else
        snprintf(r->why, sizeof r->why, "%s", ncclGetLastError(NULL));
    return NULL;
}

static void test_two_ranks_on_one_device_are_refused(void **state)
{
    (void)state;
    const int same[RANKS] = {0, 0};
    rank_run *runs = run_ranks(same, init_only);
    for (int r = 0; r < RANKS; r++) {
        assert_int_not_equal(runs[r].init, ncclSuccess);
        assert_non_null(strstr(runs[r].why, "device 0"));
    }
}

/* Rank 1 never takes part in the collective that rank 0 queues (cudasim_hang makes it never
 * finish, as a dead peer's would): the abort ends it with an asynchronous error. */
static void *hang_then_abort(void *arg)
{
    rank_run *r = arg;
    ncclComm_t comm;
    if (join(r, &comm) != ncclSuccess || r->rank == 1) {
        if (r->init == ncclSuccess)
            ncclCommDestroy(comm);
        return NULL;
    }
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *d = dev_of(NULL, 16);
    cudaEvent_t done;
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudasim_hang_collective_after(1);
    r->result = ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, comm, s);
    cudaEventRecord(done, s);
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    int pending = cudaEventQuery(done) == cudaErrorNotReady;
    ncclResult_t before = ncclSuccess;
    ncclCommGetAsyncError(comm, &before);
    ncclCommAbort(comm);
    cudaEventSynchronize(done);
    r->pending_at_abort = pending && before == ncclSuccess;
    cudaEventDestroy(done);
    cudaFree(d);
    cudaStreamDestroy(s);
    /* the handle is gone after an abort: using it again is a finding */
    cudasim_reset_findings();
    ncclResult_t again = ncclCommDestroy(comm);
    r->destroy_refused = again != ncclSuccess && cudasim_findings() == 1;
    return NULL;
}

static void test_hung_collective_ends_at_abort(void **state)
{
    (void)state;
    rank_run *runs = run_ranks(NULL, hang_then_abort);
    assert_int_equal(runs[0].init, ncclSuccess);
    assert_int_equal(runs[0].result, ncclSuccess); /* queued fine */
    assert_int_equal(runs[0].pending_at_abort, 1);
    assert_int_equal(runs[0].destroy_refused, 1);
    assert_non_null(strstr(cudasim_last_finding(), "ncclCommDestroy"));
    cudasim_reset_findings();
}

static void *wrong_device_buffer(void *arg)
{
    rank_run *r = arg;
    ncclComm_t comm;
    if (join(r, &comm) != ncclSuccess)
        return NULL;
    float *other = NULL;
    cudaSetDevice(1 - r->device);
    cudaMalloc((void **)&other, 64);
    cudaSetDevice(r->device);
    if (r->rank == 0)
        r->result = ncclAllReduce(other, other, 16, ncclFloat32, ncclSum, comm, NULL);
    cudaFree(other);
    ncclCommDestroy(comm);
    return NULL;
}

static void test_buffer_of_another_device_is_named(void **state)
{
    (void)state;
    rank_run *runs = run_ranks(NULL, wrong_device_buffer);
    assert_int_not_equal(runs[0].result, ncclSuccess);
    assert_non_null(strstr(cudasim_last_finding(), "ncclAllReduce"));
    assert_non_null(strstr(cudasim_last_finding(), "not memory of device 0"));
    cudasim_reset_findings();
}

int main(void)
{
    cudasim_set_abort_on_finding(0);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
        printf("needs ZT_CUDASIM_DEVICES=2\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_match_the_references),
        cmocka_unit_test(test_two_ranks_on_one_device_are_refused),
        cmocka_unit_test(test_hung_collective_ends_at_abort),
        cmocka_unit_test(test_buffer_of_another_device_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

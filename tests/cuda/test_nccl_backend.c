/* SPDX-License-Identifier: MIT */
/* The nccl comm backend on one rank (MPI as a singleton): every collective of device memory
 * against the values sent, a split, a request finished by polling frees what it holds,
 * and (on the stand-in, which can make a collective hang) a collective that never completes
 * times out with an error, aborts the communicator, every later call says so, and the
 * communicator's destruction does not touch the aborted NCCL handle again. Gathers of
 * unequal blocks take host memory: the nccl communicator refuses them, its host communicator
 * (zt_comm_host, the MPI bootstrap) carries them.
 * On the stand-in, the error paths of a collective that may still run: a peer that fails
 * (NCCL's asynchronous error) or hangs aborts the communicator so that neither a wait nor a
 * destroy waits for ever, also with the collective never waited for; a CUDA call that fails
 * after NCCL queued the collective returns only once the collective has finished, so its
 * buffers can be freed (the stand-in reports a free not ordered after it). Under mpirun with
 * 2 ranks (test_nccl_backend_2ranks): a split that fails on one rank, before or after
 * ncclCommSplit, fails on every rank, and none waits inside ncclCommSplit; so does an open
 * whose communicator one rank cannot make.
 * Exits 77 (skipped) where no GPU is visible. */
#include "comm/comm.h"
#include "core/time.h"

#include <cuda_runtime_api.h>
#ifdef ZT_CUDA_FAKE
#include "cudasim.h"
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each rank on its own GPU (the stand-in refuses two members on one device). */
static zt_comm *open_nccl(void)
{
    zt_error err = {0};
    zt_comm *boot = NULL, *c = NULL;
    if (zt_comm_create("nccl", &boot, &err) != ZT_OK) /* the MPI bootstrap */
        fail_msg("bootstrap: %s", err.msg);
    int size = boot->size;
    if (zt_comm_nccl_open(boot, boot->rank, &c, &err) != ZT_OK)
        fail_msg("zt_comm_nccl_open: %s", err.msg);
    assert_string_equal(c->iface->name, "nccl");
    assert_int_equal(c->size, size);
    assert_int_equal(cudaSetDevice(c->rank), cudaSuccess); /* the test's buffers on it */
    return c;
}

static float *device_floats(const float *h, size_t n)
{
    float *d = NULL;
    assert_int_equal(cudaMalloc((void **)&d, n * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static void test_collectives_and_polled_requests(void **state)
{
    (void)state;
    zt_comm *c = open_nccl();
    zt_error err = {0};
    float h[64], got[64];
    for (int i = 0; i < 64; i++)
        h[i] = (float)i - 20.0f;
    float *d = device_floats(h, 64), *out = device_floats(h, 64);
#ifdef ZT_CUDA_FAKE
    int events = cudasim_live_events();
#endif
    zt_comm_req req = {0};
    assert_int_equal(zt_comm_allreduce(c, d, out, 64, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err),
                     ZT_OK);
    assert_int_equal(zt_comm_wait(c, &req, &err), ZT_OK);
    assert_int_equal(zt_comm_allgather(c, d, out, 64, ZT_COMM_F32, &req, &err), ZT_OK);
    while (zt_comm_test(c, &req) == 0) {
    }
    assert_int_equal(zt_comm_test(c, &req), 1); /* done stays done */
#ifdef ZT_CUDA_FAKE
    assert_int_equal(cudasim_live_events(), events); /* the polled request's event is freed */
#endif
    assert_int_equal(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(got, h, sizeof h);
    /* the rest, each a copy on one rank: all-to-all, broadcast, reduce-scatter, barrier */
    float *zeros = device_floats((float[64]){0}, 64);
    assert_int_equal(zt_comm_alltoall(c, d, zeros, 64, ZT_COMM_F32, &req, &err), ZT_OK);
    assert_int_equal(zt_comm_wait(c, &req, &err), ZT_OK);
    assert_int_equal(zt_comm_broadcast(c, zeros, 64, ZT_COMM_F32, 0, &req, &err), ZT_OK);
    assert_int_equal(zt_comm_wait(c, &req, &err), ZT_OK);
    assert_int_equal(
        zt_comm_reduce_scatter(c, zeros, out, 64, ZT_COMM_F32, ZT_REDUCE_MAX, &req, &err), ZT_OK);
    assert_int_equal(zt_comm_wait(c, &req, &err), ZT_OK);
    assert_int_equal(zt_comm_barrier(c, &req, &err), ZT_OK);
    assert_int_equal(zt_comm_wait(c, &req, &err), ZT_OK);
    assert_int_equal(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(got, h, sizeof h);
    /* 16-bit data is reduced too (the runtime's 16-bit gradients): on one rank the sum is
     * the input, bit for bit */
    assert_int_equal(zt_comm_allreduce(c, d, out, 8, ZT_COMM_BF16, ZT_REDUCE_SUM, &req, &err),
                     ZT_OK);
    assert_int_equal(zt_comm_wait(c, &req, &err), ZT_OK);
    uint16_t in16[8], out16[8];
    assert_int_equal(cudaMemcpy(in16, d, sizeof in16, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(cudaMemcpy(out16, out, sizeof out16, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(out16, in16, sizeof in16);
    zt_comm *sub = NULL;
    assert_int_equal(zt_comm_split(c, 0, 0, &sub, &err), ZT_OK);
    assert_int_equal(sub->size, 1);
    assert_int_equal(zt_comm_allreduce(sub, d, out, 64, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err),
                     ZT_OK);
    assert_int_equal(zt_comm_wait(sub, &req, &err), ZT_OK);
    zt_comm_destroy(sub);
    cudaFree(d), cudaFree(out), cudaFree(zeros);
    zt_comm_destroy(c);
}

#ifdef ZT_CUDA_FAKE
static void test_timeout_aborts_once(void **state)
{
    (void)state;
    setenv("ZT_COMM_TIMEOUT", "1", 1);
    zt_comm *c = open_nccl();
    zt_error err = {0};
    float h[16] = {0};
    float *d = device_floats(h, 16);
    zt_comm_req req = {0};
    cudasim_hang_collective_after(1);
    assert_int_equal(zt_comm_allreduce(c, d, d, 16, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err), ZT_OK);
    assert_int_equal(zt_comm_wait(c, &req, &err), ZT_ERR_COMM);
    assert_non_null(strstr(err.msg, "did not complete within 1 s"));
    assert_int_equal(zt_comm_allreduce(c, d, d, 16, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err),
                     ZT_ERR_COMM);
    assert_non_null(strstr(err.msg, "aborted"));
    cudasim_set_abort_on_finding(0);
    zt_comm_destroy(c); /* must not destroy the aborted NCCL handle again */
    assert_int_equal(cudasim_findings(), 0);
    cudaFree(d);
    unsetenv("ZT_COMM_TIMEOUT");
}

/* A destroy, or a wait, that would hang is killed: the test fails instead of ctest's timeout. */
static void hang_guard(unsigned seconds) { alarm(seconds); }

/* A peer fails while the collective's kernel waits for its data: NCCL reports it through
 * ncclCommGetAsyncError and the kernel ends only when the communicator is aborted. The wait
 * fails with ZT_ERR_COMM, the communicator is aborted (later calls say so), and destroying it
 * returns at once instead of synchronizing a stream that never drains. */
static void test_async_error_aborts(void **state)
{
    (void)state;
    setenv("ZT_COMM_TIMEOUT", "60", 1); /* the error, not the timeout, must end it */
    zt_comm *c = open_nccl();
    zt_error err = {0};
    float *d = device_floats((float[16]){0}, 16);
    zt_comm_req req = {0};
    cudasim_nccl_error_after(1);
    assert_int_equal(zt_comm_allreduce(c, d, d, 16, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err), ZT_OK);
    hang_guard(10);
    double t0 = zt_now_s();
    assert_int_equal(zt_comm_wait(c, &req, &err), ZT_ERR_COMM);
    assert_non_null(strstr(err.msg, "asynchronous error"));
    assert_non_null(strstr(err.msg, "aborted"));
    assert_int_equal(zt_comm_allreduce(c, d, d, 16, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err),
                     ZT_ERR_COMM);
    assert_non_null(strstr(err.msg, "aborted"));
    zt_comm_destroy(c);
    assert_true(zt_now_s() - t0 < 5.0);
    alarm(0);
    cudaFree(d);
    unsetenv("ZT_COMM_TIMEOUT");
}

/* Destroyed with a collective in flight that never completes: a hung peer (aborted after
 * $ZT_COMM_TIMEOUT) and a failed one (aborted at once, seeing the asynchronous error). */
static void test_destroy_with_a_collective_in_flight(void **state)
{
    (void)state;
    setenv("ZT_COMM_TIMEOUT", "1", 1);
    for (int failed_peer = 0; failed_peer <= 1; failed_peer++) {
        zt_comm *c = open_nccl();
        zt_error err = {0};
        float *d = device_floats((float[16]){0}, 16);
        zt_comm_req req = {0};
        if (failed_peer)
            cudasim_nccl_error_after(1);
        else
            cudasim_hang_collective_after(1);
        assert_int_equal(zt_comm_allreduce(c, d, d, 16, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err),
                         ZT_OK);
        hang_guard(10);
        double t0 = zt_now_s();
        zt_comm_destroy(c); /* the request is never waited for */
        double took = zt_now_s() - t0;
        alarm(0);
        assert_true(took < (failed_peer ? 0.9 : 5.0));
        cudaFree(d);
    }
    unsetenv("ZT_COMM_TIMEOUT");
}

/* A collective is queued, then a CUDA call after it fails. The collective still runs: the
 * call returns only once it has finished, so the caller may free its buffers (a free on
 * another stream is then ordered after it: the stand-in reports an unordered one). */
static void free_after_failed_call(const char *call, int reduce_scatter)
{
    zt_comm *c = open_nccl();
    zt_error err = {0};
    float h[16];
    for (int i = 0; i < 16; i++)
        h[i] = (float)i;
    float *send = device_floats(h, 16), *recv = device_floats(h, 16);
    cudaStream_t other;
    assert_int_equal(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    int events = cudasim_live_events();
    zt_comm_req req = {0};
    cudasim_set_abort_on_finding(0);
    cudasim_reset_findings();
    cudasim_fail_call(call, 1);
    zt_status st =
        reduce_scatter
            ? zt_comm_reduce_scatter(c, send, recv, 16, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err)
            : zt_comm_allreduce(c, send, recv, 16, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err);
    cudasim_fail_call(NULL, 0);
    assert_int_equal(st, ZT_ERR_DEVICE);
    assert_int_equal(zt_comm_test(c, &req), 1); /* nothing left to wait for */
    assert_int_equal(cudaFreeAsync(send, other), cudaSuccess);
    assert_int_equal(cudaFreeAsync(recv, other), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(other), cudaSuccess);
    if (cudasim_findings() != 0)
        fail_msg("after a failed %s: %s", call, cudasim_last_finding());
    assert_int_equal(cudasim_live_events(), events); /* an event made for it is freed */
    assert_non_null(strstr(err.msg, call));          /* the error names the call */
    cudasim_set_abort_on_finding(1);
    cudaStreamDestroy(other);
    zt_comm_destroy(c);
}

static void test_a_queued_collective_stays_issued(void **state)
{
    (void)state;
    free_after_failed_call("cudaEventCreateWithFlags", 0);
    free_after_failed_call("cudaEventRecord", 0);
    free_after_failed_call("cudaMemcpyAsync", 1); /* reduce-scatter's move to recv */
}

/* complete_on: the stream that should wait for the collective cannot (cudaStreamWaitEvent
 * fails). The error is reported, and the host waits for the collective instead, so work on
 * that stream after the call (here the free) is still ordered after it. */
static void test_complete_on_a_failed_stream_wait(void **state)
{
    (void)state;
    zt_comm *c = open_nccl();
    zt_error err = {0};
    float *d = device_floats((float[16]){0}, 16), *out = device_floats((float[16]){0}, 16);
    cudaStream_t other;
    assert_int_equal(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    zt_comm_req req = {0};
    assert_int_equal(zt_comm_allreduce(c, d, out, 16, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err),
                     ZT_OK);
    cudasim_set_abort_on_finding(0);
    cudasim_reset_findings();
    cudasim_fail_call("cudaStreamWaitEvent", 1);
    zt_status st = zt_comm_complete_on(c, &req, (zt_stream *)other, &err);
    cudasim_fail_call(NULL, 0);
    assert_int_equal(st, ZT_ERR_DEVICE);
    assert_non_null(strstr(err.msg, "cudaStreamWaitEvent"));
    assert_int_equal(cudaFreeAsync(d, other), cudaSuccess);
    assert_int_equal(cudaFreeAsync(out, other), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(other), cudaSuccess);
    if (cudasim_findings() != 0)
        fail_msg("after a failed cudaStreamWaitEvent: %s", cudasim_last_finding());
    cudasim_set_abort_on_finding(1);
    cudaStreamDestroy(other);
    zt_comm_destroy(c);
}

/* ---- under mpirun, 2 ranks (test_nccl_backend_2ranks) ---- */

/* The host side of rank 1's split fails after MPI's split itself went well (as a failed
 * allocation would): its host communicator's split is wrapped for one call. */
static const zt_comm_iface *real_host_iface;
static zt_comm_iface failing_split_iface;

static zt_status failing_split(zt_comm *h, int color, int key, zt_comm **out, zt_error *err)
{
    zt_comm *made = NULL;
    if (real_host_iface->split(h, color, key, &made, err) == ZT_OK)
        zt_comm_destroy(made);
    h->iface = real_host_iface;
    *out = NULL;
    snprintf(err->msg, sizeof err->msg, "host split failed (injected)");
    return ZT_ERR_NOMEM;
}

/* A split that works on every rank: the sum over the new communicator. */
static void split_works(zt_comm *c)
{
    zt_error err = {0};
    zt_comm *sub = NULL;
    assert_int_equal(zt_comm_split(c, 0, c->rank, &sub, &err), ZT_OK);
    float *d = device_floats((float[4]){1, 2, 3, 4}, 4);
    zt_comm_req req = {0};
    assert_int_equal(zt_comm_allreduce(sub, d, d, 4, ZT_COMM_F32, ZT_REDUCE_SUM, &req, &err),
                     ZT_OK);
    assert_int_equal(zt_comm_wait(sub, &req, &err), ZT_OK);
    float got[4], want[4] = {2, 4, 6, 8};
    assert_int_equal(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(got, want, sizeof want);
    cudaFree(d);
    zt_comm_destroy(sub);
}

/* One rank's split fails before ncclCommSplit (its host side) or after it (making the
 * communicator: no stream). Every rank returns an error, none waits inside ncclCommSplit for
 * the failed one, none keeps a communicator the other lacks, and the next split works. */
static void test_split_fails_on_every_rank(void **state)
{
    (void)state;
    for (int where = 0; where < 2; where++) {
        zt_comm *c = open_nccl();
        assert_int_equal(c->size, 2);
        zt_error err = {0};
        if (c->rank == 1 && where == 0) {
            real_host_iface = c->host->iface;
            failing_split_iface = *real_host_iface;
            failing_split_iface.split = failing_split;
            c->host->iface = &failing_split_iface;
        }
        if (c->rank == 1 && where == 1)
            cudasim_fail_call("cudaStreamCreateWithFlags", 1);
        zt_comm *sub = NULL;
        hang_guard(20); /* the stand-in's ncclCommSplit waits 60 s for a missing rank */
        zt_status st = zt_comm_split(c, 0, c->rank, &sub, &err);
        alarm(0);
        cudasim_fail_call(NULL, 0);
        if (st == ZT_OK)
            fail_msg("rank %d: the split succeeded while rank 1's failed (%s)", c->rank,
                     where ? "making the communicator" : "the host side");
        assert_null(sub);
        split_works(c);
        zt_comm_destroy(c);
    }
}

/* Opening: rank 1 cannot make its communicator after ncclCommInitRank went well on both. Both
 * fail (neither keeps a communicator the other lacks) and keep their bootstrap. */
static void test_open_fails_on_every_rank(void **state)
{
    (void)state;
    zt_error err = {0};
    zt_comm *boot = NULL, *c = NULL;
    assert_int_equal(zt_comm_create("nccl", &boot, &err), ZT_OK);
    if (boot->rank == 1)
        cudasim_fail_call("cudaStreamCreateWithFlags", 1);
    hang_guard(20);
    zt_status st = zt_comm_nccl_open(boot, boot->rank, &c, &err);
    alarm(0);
    cudasim_fail_call(NULL, 0);
    if (st == ZT_OK)
        fail_msg("rank %d: the open succeeded while rank 1's failed", boot->rank);
    assert_null(c);
    zt_comm_destroy(boot);
}
#endif

static void test_gatherv_goes_to_the_host_communicator(void **state)
{
    (void)state;
    zt_comm *c = open_nccl();
    zt_error err = {0};
    float send[2] = {4.0f, 5.0f}, recv[4] = {0, 0, 0, 0};
    size_t counts[1] = {2}, displs[1] = {1};
    zt_comm_req req = {0};
    assert_int_equal(zt_comm_gatherv(c, send, recv, counts, displs, ZT_COMM_F32, 0, &req, &err),
                     ZT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "host communicator"));
    assert_int_equal(zt_comm_gatherv_sync(c, send, recv, counts, displs, ZT_COMM_F32, 0, &err),
                     ZT_OK);
    float want[4] = {0, 4.0f, 5.0f, 0};
    assert_memory_equal(recv, want, sizeof want);
    zt_comm_destroy(c);
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no GPU visible: skipping the nccl backend test\n");
        return 77;
    }
    if (getenv("ZT_TEST_FILTER")) /* one test by name (a hang ends the process) */
        cmocka_set_test_filter(getenv("ZT_TEST_FILTER"));
    /* under mpirun: the tests of several ranks (one GPU each) */
    zt_error err = {0};
    zt_comm *boot = NULL;
    if (zt_comm_create("nccl", &boot, &err) != ZT_OK) {
        printf("bootstrap: %s\n", err.msg);
        return 1;
    }
    int ranks = boot->size;
    zt_comm_destroy(boot);
#ifdef ZT_CUDA_FAKE
    const struct CMUnitTest multi[] = {
        cmocka_unit_test(test_split_fails_on_every_rank),
        cmocka_unit_test(test_open_fails_on_every_rank),
    };
    if (ranks > 1)
        return cmocka_run_group_tests(multi, NULL, NULL);
#else
    if (ranks > 1) {
        printf("several ranks: the tests of several ranks run on the stand-in only\n");
        return 77;
    }
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_and_polled_requests),
        cmocka_unit_test(test_gatherv_goes_to_the_host_communicator),
#ifdef ZT_CUDA_FAKE
        cmocka_unit_test(test_timeout_aborts_once),
        cmocka_unit_test(test_async_error_aborts),
        cmocka_unit_test(test_destroy_with_a_collective_in_flight),
        cmocka_unit_test(test_a_queued_collective_stays_issued),
        cmocka_unit_test(test_complete_on_a_failed_stream_wait),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

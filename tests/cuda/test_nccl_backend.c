/* SPDX-License-Identifier: MIT */
/* The nccl comm backend on one rank (MPI as a singleton): every collective of device memory
 * against the values sent, a split, a request finished by polling frees what it holds,
 * and (on the stand-in, which can make a collective hang) a collective that never completes
 * times out with an error, aborts the communicator, every later call says so, and the
 * communicator's destruction does not touch the aborted NCCL handle again. Gathers of
 * unequal blocks take host memory: the nccl communicator refuses them, its host communicator
 * (zt_comm_host, the MPI bootstrap) carries them.
 * Exits 77 (skipped) where no GPU is visible. */
#include "comm/comm.h"

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

static zt_comm *open_nccl(void)
{
    zt_error err = {0};
    zt_comm *boot = NULL, *c = NULL;
    if (zt_comm_create("nccl", &boot, &err) != ZT_OK) /* the MPI bootstrap */
        fail_msg("bootstrap: %s", err.msg);
    if (zt_comm_nccl_open(boot, 0, &c, &err) != ZT_OK)
        fail_msg("zt_comm_nccl_open: %s", err.msg);
    assert_string_equal(c->iface->name, "nccl");
    assert_int_equal(c->size, 1);
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
    /* 16-bit data is moved, never reduced: the runtime widens it first */
    assert_int_equal(zt_comm_allreduce(c, d, out, 8, ZT_COMM_BF16, ZT_REDUCE_SUM, &req, &err),
                     ZT_ERR_INTERNAL);
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
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_and_polled_requests),
        cmocka_unit_test(test_gatherv_goes_to_the_host_communicator),
#ifdef ZT_CUDA_FAKE
        cmocka_unit_test(test_timeout_aborts_once),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

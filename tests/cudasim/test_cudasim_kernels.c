/* SPDX-License-Identifier: MIT */
/* The stand-in's kernels (cudasim/src/grid.cc, cudasim/shim): indices, warp shuffles, block
 * reductions, atomics and dynamic shared memory against CPU references; the launch limits
 * CUDA enforces; and the bugs a GPU would not report, each found and named: a removed bounds
 * check, a removed __syncthreads, a read of __shared__ memory nobody wrote, barrier
 * divergence, a shuffle waiting for lanes that exited, a host pointer passed to a kernel. */
#include "sim_kernels.h"
#include "sim_test.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static cudaStream_t stream;

static void *dev_from(const void *host, size_t bytes)
{
    void *d = NULL;
    assert_int_equal(cudaMalloc(&d, bytes), cudaSuccess);
    if (host)
        assert_int_equal(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static void to_host(void *host, const void *dev, size_t bytes)
{
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    assert_int_equal(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

static int setup(void **state)
{
    (void)state;
    cudasim_set_abort_on_finding(0);
    return cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cudaStreamDestroy(stream);
    return 0;
}

static void test_indices_cover_a_3d_grid(void **state)
{
    (void)state;
    enum { GX = 3, GY = 2, GZ = 2, BX = 8, BY = 4, BZ = 2, N = GX * GY * GZ * BX * BY * BZ };
    unsigned *d = dev_from(NULL, N * sizeof(unsigned)), h[N];
    assert_int_equal(sim_indices(d, GX, GY, GZ, BX, BY, BZ, stream), cudaSuccess);
    to_host(h, d, sizeof h);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(h[i], i);
    cudaFree(d);
    assert_int_equal(cudasim_findings(), 0);
}

static void test_warp_shuffles_match_the_lanes(void **state)
{
    (void)state;
    enum { N = 256 };
    float v[N], sum[N], bcast[N], down[N];
    for (int i = 0; i < N; i++)
        v[i] = (float)((i * 37) % 101) - 50.0f;
    float *dv = dev_from(v, sizeof v), *ds = dev_from(NULL, sizeof v);
    float *db = dev_from(NULL, sizeof v), *dd = dev_from(NULL, sizeof v);
    assert_int_equal(sim_warp_ops(dv, ds, db, dd, N, stream), cudaSuccess);
    to_host(sum, ds, sizeof sum);
    to_host(bcast, db, sizeof bcast);
    to_host(down, dd, sizeof down);
    for (int w = 0; w < N / 32; w++) {
        float want = 0; /* integers: any order gives the same sum */
        for (int l = 0; l < 32; l++)
            want += v[w * 32 + l];
        for (int l = 0; l < 32; l++) {
            int i = w * 32 + l;
            assert_true(sum[i] == want);
            assert_true(bcast[i] == v[w * 32 + 5]);
            assert_true(down[i] == (l < 31 ? v[i + 1] : v[i]));
        }
    }
    cudaFree(dv), cudaFree(ds), cudaFree(db), cudaFree(dd);
    assert_int_equal(cudasim_findings(), 0);
}

static void test_block_reduction_and_atomics(void **state)
{
    (void)state;
    enum { BLOCKS = 37 };
    static float x[BLOCKS * 256];
    float out[BLOCKS];
    for (int i = 0; i < BLOCKS * 256; i++)
        x[i] = (float)(i % 17);
    float *dx = dev_from(x, sizeof x), *dout = dev_from(NULL, sizeof out);
    unsigned long long zero = 0, count = 0, *dc = dev_from(&zero, sizeof zero);
    assert_int_equal(sim_block_sum(dx, dout, BLOCKS, stream), cudaSuccess);
    assert_int_equal(sim_count(dc, BLOCKS, stream), cudaSuccess);
    to_host(out, dout, sizeof out);
    to_host(&count, dc, sizeof count);
    for (int b = 0; b < BLOCKS; b++) {
        double want = 0;
        for (int k = 0; k < 256; k++)
            want += x[b * 256 + k];
        assert_true(out[b] == (float)want);
    }
    assert_int_equal(count, BLOCKS * 128);
    cudaFree(dx), cudaFree(dout), cudaFree(dc);
    assert_int_equal(cudasim_findings(), 0);
}

static void test_dynamic_shared_memory_and_its_limit(void **state)
{
    (void)state;
    float *d = dev_from(NULL, 64 * 1024), h[1024];
    assert_int_equal(sim_dynamic_shared(d, 2, 64, 4096, stream), cudaSuccess);
    to_host(h, d, 4096);
    for (int k = 0; k < 1024; k++)
        assert_true(h[k] == (float)k);
    /* more than 48 KiB needs the opt-in attribute, as on a GPU */
    assert_int_equal(sim_dynamic_shared(d, 1, 64, 64 * 1024, stream), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaSuccess); /* taken by the launch's status */
    assert_int_equal(sim_dynamic_shared_opt_in(64 * 1024), cudaSuccess);
    assert_int_equal(sim_dynamic_shared(d, 1, 64, 64 * 1024, stream), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    cudaFree(d);
    assert_int_equal(cudasim_findings(), 0);
}

static void test_launch_limits_are_errors(void **state)
{
    (void)state;
    unsigned *d = dev_from(NULL, 4096);
    assert_int_equal(sim_indices(d, 0, 1, 1, 32, 1, 1, stream), cudaErrorInvalidConfiguration);
    assert_int_equal(sim_indices(d, 1, 1, 1, 1025, 1, 1, stream), cudaErrorInvalidConfiguration);
    assert_int_equal(sim_indices(d, 1, 1, 1, 32, 32, 2, stream), cudaErrorInvalidConfiguration);
    assert_int_equal(sim_indices(d, 1, 1, 1, 1, 1, 65, stream), cudaErrorInvalidConfiguration);
    cudaFree(d);
    assert_int_equal(cudasim_findings(), 0);
}

/* ---- the bugs ---------------------------------------------------------------------------- */

static void test_missing_bounds_check_is_named(void **state)
{
    (void)state;
    enum { N = 1000 }; /* blocks of 128: 24 threads past the end */
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    float *dx = dev_from(x, sizeof x), *dy = dev_from(NULL, sizeof x);
    assert_int_equal(sim_twice(dy, dx, N, stream), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    assert_int_equal(cudasim_findings(), 0);
    assert_int_equal(sim_twice_no_guard(dy, dx, N, stream), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(stream), cudaSuccess);
    expect_finding("kernel twice_no_guard", "outside device memory");
    cudaFree(dx), cudaFree(dy);
}

static void test_missing_barrier_is_named(void **state)
{
    (void)state;
    SKIP_RACE_UNDER_TSAN();
    static float x[4 * 256];
    float out[4];
    for (int i = 0; i < 4 * 256; i++)
        x[i] = 1.0f;
    float *dx = dev_from(x, sizeof x), *dout = dev_from(NULL, sizeof out);
    assert_int_equal(sim_block_sum_no_barrier(dx, dout, 4, stream), cudaSuccess);
    to_host(out, dout, sizeof out);
    expect_finding("block_sum_no_barrier", "__shared__ part[");
    cudaFree(dx), cudaFree(dout);
}

static void test_uninitialised_shared_read_is_named(void **state)
{
    (void)state;
    static float x[256];
    float out[1];
    memset(x, 0, sizeof x);
    float *dx = dev_from(x, sizeof x), *dout = dev_from(NULL, sizeof out);
    assert_int_equal(sim_block_sum_uninitialised(dx, dout, 1, stream), cudaSuccess);
    to_host(out, dout, sizeof out);
    expect_finding("block_sum_uninitialised", "part[300]");
    cudaFree(dx), cudaFree(dout);
}

static void test_barrier_divergence_is_named(void **state)
{
    (void)state;
    float *d = dev_from(NULL, 128 * sizeof(float));
    /* the launch's status may already be the kernel's own failure (sticky, as on a GPU) */
    int launched = sim_divergent_barrier(d, 100, stream);
    assert_true(launched == cudaSuccess || launched == cudaErrorLaunchFailure);
    cudaStreamSynchronize(stream);
    expect_finding("divergent_barrier", "barrier divergence");
    assert_int_equal(cudaGetLastError(), cudaErrorLaunchFailure); /* sticky, as on a GPU */
    assert_int_equal(cudaGetLastError(), cudaErrorLaunchFailure);
    assert_int_equal(cudaDeviceReset(), cudaSuccess); /* frees d too */
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

static void test_shuffle_with_exited_lanes_is_named(void **state)
{
    (void)state;
    float *d = dev_from(NULL, 32 * sizeof(float));
    /* the launch's status may already be the kernel's own failure (sticky, as on a GPU) */
    int launched = sim_shuffle_after_exit(d, 20, stream);
    assert_true(launched == cudaSuccess || launched == cudaErrorLaunchFailure);
    cudaStreamSynchronize(stream);
    expect_finding("shuffle_after_exit", "warp operation");
    assert_int_equal(cudaDeviceReset(), cudaSuccess);
}

static void test_host_pointer_argument_is_named(void **state)
{
    (void)state;
    static float host[256];
    float *dy = dev_from(NULL, sizeof host);
    assert_int_equal(sim_twice(dy, host, 256, stream), cudaErrorIllegalAddress);
    expect_finding("kernel twice", "argument 1");
    assert_int_equal(cudaMalloc((void **)&dy, 4), cudaErrorIllegalAddress); /* sticky */
    assert_int_equal(cudaDeviceReset(), cudaSuccess);
}

int main(void)
{
    /* the last three leave the device with a sticky error, as a GPU context is then lost:
     * each resets it (cudaDeviceReset) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_indices_cover_a_3d_grid),
        cmocka_unit_test(test_warp_shuffles_match_the_lanes),
        cmocka_unit_test(test_block_reduction_and_atomics),
        cmocka_unit_test(test_dynamic_shared_memory_and_its_limit),
        cmocka_unit_test(test_launch_limits_are_errors),
        cmocka_unit_test(test_missing_bounds_check_is_named),
        cmocka_unit_test(test_missing_barrier_is_named),
        cmocka_unit_test(test_uninitialised_shared_read_is_named),
        cmocka_unit_test(test_host_pointer_argument_is_named),
        cmocka_unit_test(test_shuffle_with_exited_lanes_is_named),
        cmocka_unit_test(test_barrier_divergence_is_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

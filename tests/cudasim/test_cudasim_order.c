/* SPDX-License-Identifier: MIT */
/* The stand-in's ordering (cudasim/src/stream.cc, hostpages.cc, api_*.cc): what CUDA orders
 * and what it does not. Streams, events, the NULL stream, pools, the last-error rules and
 * fault injection against what CUDA specifies; and the ordering bugs a GPU would not report,
 * each found and named: a free with no event wait after another stream's kernel, two
 * streams writing one buffer, a host read of a device-to-host copy's destination and a host
 * write of a host-to-device copy's source before the host has seen the copy complete, an
 * API call inside a host-function callback. */
#include "sim_kernels.h"
#include "sim_test.h"

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static cudaStream_t s1, s2;

static float *dev_floats(size_t n)
{
    float *d = NULL;
    assert_int_equal(cudaMalloc((void **)&d, n * sizeof(float)), cudaSuccess);
    return d;
}

static int setup(void **state)
{
    (void)state;
    cudasim_set_abort_on_finding(0);
    if (cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) != cudaSuccess)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
    return 0;
}

/* ---- what CUDA orders -------------------------------------------------------------------- */

static atomic_int gate;

static void CUDART_CB wait_gate(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void test_event_wait_orders_streams_and_queries_follow(void **state)
{
    (void)state;
    enum { N = 4096 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    float *dx = dev_floats(N), *dy = dev_floats(N);
    cudaEvent_t e, never;
    assert_int_equal(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    assert_int_equal(cudaEventCreate(&never), cudaSuccess);
    assert_int_equal(cudaEventQuery(never), cudaSuccess); /* never recorded: complete */
    atomic_store(&gate, 0);
    assert_int_equal(cudaLaunchHostFunc(s1, wait_gate, NULL), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(dx, x, sizeof x, cudaMemcpyHostToDevice, s1), cudaSuccess);
    assert_int_equal(cudaEventRecord(e, s1), cudaSuccess);
    assert_int_equal(cudaStreamWaitEvent(s2, e, 0), cudaSuccess);
    assert_int_equal(sim_twice(dy, dx, N, s2), cudaSuccess);
    assert_int_equal(cudaEventQuery(e), cudaErrorNotReady);
    assert_int_equal(cudaStreamQuery(s2), cudaErrorNotReady);
    assert_int_equal(cudaGetLastError(), cudaSuccess); /* "not ready" is not an error */
    atomic_store(&gate, 1);
    assert_int_equal(cudaStreamSynchronize(s2), cudaSuccess);
    assert_int_equal(cudaEventQuery(e), cudaSuccess);
    assert_int_equal(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == 2.0f * (float)i);
    cudaEventDestroy(e), cudaEventDestroy(never);
    cudaFree(dx), cudaFree(dy);
    assert_int_equal(cudasim_findings(), 0);
}

static void CUDART_CB sleep_50ms(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 50 * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* cudaEventElapsedTime: the stream's time between two records (50 ms of work queued
 * between them, measured against the host's clock around the whole), "not ready" before the
 * later one completes (no error recorded), and CUDA's refusals: an event created with
 * cudaEventDisableTiming, one never recorded. */
static void test_event_elapsed_time(void **state)
{
    (void)state;
    cudaEvent_t a, b, untimed, never;
    assert_int_equal(cudaEventCreate(&a), cudaSuccess);
    assert_int_equal(cudaEventCreate(&b), cudaSuccess);
    assert_int_equal(cudaEventCreate(&never), cudaSuccess);
    assert_int_equal(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    atomic_store(&gate, 0);
    assert_int_equal(cudaEventRecord(a, s1), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s1, sleep_50ms, NULL), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s1, wait_gate, NULL), cudaSuccess);
    assert_int_equal(cudaEventRecord(b, s1), cudaSuccess);
    assert_int_equal(cudaEventRecord(untimed, s1), cudaSuccess);
    float ms = -1;
    assert_int_equal(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
    assert_int_equal(cudaGetLastError(), cudaSuccess); /* "not ready" is not an error */
    atomic_store(&gate, 1);
    assert_int_equal(cudaEventSynchronize(b), cudaSuccess);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double host_ms =
        (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    assert_int_equal(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    print_message("elapsed %.3f ms on the stream, %.3f ms on the host around it\n", (double)ms,
                  host_ms);
    assert_true(ms >= 50.0f && (double)ms <= host_ms);
    assert_int_equal(cudaEventElapsedTime(&ms, b, a), cudaSuccess); /* reversed: negative */
    assert_true(ms <= -50.0f);
    assert_int_equal(cudaEventElapsedTime(&ms, a, untimed), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventElapsedTime(&ms, never, b), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventElapsedTime(NULL, a, b), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    cudaEventDestroy(a), cudaEventDestroy(b), cudaEventDestroy(untimed), cudaEventDestroy(never);
    assert_int_equal(cudasim_findings(), 0);
}

/* A blocking stream and the NULL stream wait for each other ... */
static void test_null_stream_orders_blocking_streams(void **state)
{
    (void)state;
    enum { N = 1024 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(N - i);
    cudaStream_t blocking;
    assert_int_equal(cudaStreamCreate(&blocking), cudaSuccess);
    float *dx = dev_floats(N), *dy = dev_floats(N);
    assert_int_equal(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(sim_twice(dy, dx, N, blocking), cudaSuccess);
    /* the NULL stream's copy is ordered after the kernel: no finding, the doubled values */
    assert_int_equal(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == 2.0f * x[i]);
    assert_int_equal(cudasim_findings(), 0);
    cudaStreamDestroy(blocking);
    cudaFree(dx), cudaFree(dy);
}

/* ... a non-blocking one and the NULL stream do not: the NULL stream's copy races with it. */
static void test_non_blocking_stream_is_not_ordered_with_null_stream(void **state)
{
    (void)state;
    SKIP_RACE_UNDER_TSAN();
    enum { N = 1024 };
    static float y[N];
    float *dx = dev_floats(N), *dy = dev_floats(N);
    assert_int_equal(cudaMemset(dx, 0, N * sizeof(float)), cudaSuccess);
    assert_int_equal(sim_twice(dy, dx, N, s1), cudaSuccess);
    assert_int_equal(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_finding("cudaMemcpy(DeviceToHost", "kernel twice");
    cudaDeviceSynchronize();
    cudaFree(dx), cudaFree(dy);
}

static void test_last_error_and_injection(void **state)
{
    (void)state;
    void *p = NULL;
    assert_int_equal(cudaSetDevice(99), cudaErrorInvalidDevice);
    assert_int_equal(cudaPeekAtLastError(), cudaErrorInvalidDevice); /* kept ... */
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);    /* ... until read */
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    cudasim_fail_alloc_after(2);
    assert_int_equal(cudaMalloc(&p, 64), cudaSuccess);
    cudaFree(p);
    assert_int_equal(cudaMalloc(&p, 64), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(cudaMalloc(&p, 64), cudaErrorMemoryAllocation); /* still out of memory */
    cudasim_fail_alloc_after(0);
    assert_int_equal(cudaMalloc(&p, 64), cudaSuccess);
    cudasim_not_ready_next(1);
    assert_int_equal(cudaStreamQuery(s1), cudaErrorNotReady);
    assert_int_equal(cudaStreamQuery(s1), cudaSuccess);
    assert_int_equal(cudaMemcpy(p, p, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    cudaFree(p);
}

/* Freed pool memory stays the pool's up to its release threshold (so it is not free for
 * cudaMalloc), and goes back at a synchronisation once the threshold is lowered. */
static void test_pool_keeps_memory_up_to_its_threshold(void **state)
{
    (void)state;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    assert_int_equal(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    uint64_t keep = 64u << 20;
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                     cudaSuccess);
    size_t free0, free1, free2, total;
    cudaMemGetInfo(&free0, &total);
    void *p = NULL;
    assert_int_equal(cudaMallocFromPoolAsync(&p, 32u << 20, pool, s1), cudaSuccess);
    assert_int_equal(cudaFreeAsync(p, s1), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
    cudaMemGetInfo(&free1, &total);
    assert_true(free0 - free1 >= (32u << 20));
    void *q = NULL; /* the cached block serves the next request of its size */
    assert_int_equal(cudaMallocFromPoolAsync(&q, 32u << 20, pool, s1), cudaSuccess);
    assert_ptr_equal(p, q);
    assert_int_equal(cudaFreeAsync(q, s1), cudaSuccess);
    keep = 0;
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                     cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
    cudaMemGetInfo(&free2, &total);
    assert_int_equal(free2, free0);
    assert_int_equal(cudaMemPoolDestroy(pool), cudaSuccess);
    assert_int_equal(cudasim_findings(), 0);
}

/* ---- the bugs ---------------------------------------------------------------------------- */

static void test_free_without_event_wait_is_named(void **state)
{
    (void)state;
    SKIP_RACE_UNDER_TSAN();
    enum { N = 2048 };
    float *dx = dev_floats(N), *dy = NULL;
    assert_int_equal(cudaMemsetAsync(dx, 0, N * sizeof(float), s1), cudaSuccess);
    assert_int_equal(cudaMallocAsync((void **)&dy, N * sizeof(float), s1), cudaSuccess);
    assert_int_equal(sim_twice(dy, dx, N, s1), cudaSuccess);
    /* right: s2 waits for s1's kernel before freeing what it read */
    cudaEvent_t e;
    assert_int_equal(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    assert_int_equal(cudaEventRecord(e, s1), cudaSuccess);
    assert_int_equal(cudaStreamWaitEvent(s2, e, 0), cudaSuccess);
    assert_int_equal(cudaFreeAsync(dy, s2), cudaSuccess);
    assert_int_equal(cudasim_findings(), 0);
    /* wrong: the same without the wait */
    assert_int_equal(cudaMallocAsync((void **)&dy, N * sizeof(float), s1), cudaSuccess);
    assert_int_equal(sim_twice(dy, dx, N, s1), cudaSuccess);
    assert_int_equal(cudaFreeAsync(dy, s2), cudaSuccess);
    expect_finding("cudaFreeAsync", "kernel twice");
    cudaDeviceSynchronize(); /* the kernel may have run after the free: a second finding */
    cudasim_reset_findings();
    cudaEventDestroy(e);
    cudaFree(dx);
}

static void test_host_read_before_copy_completes_is_named(void **state)
{
    (void)state;
    SKIP_RACE_UNDER_TSAN();
    enum { N = 4 * 4096 };
    float *h = NULL, *dx = dev_floats(N);
    assert_int_equal(cudaMallocHost((void **)&h, N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(dx, 0, N * sizeof(float), s1), cudaSuccess);
    cudaEvent_t e;
    assert_int_equal(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    /* right: read after the event */
    assert_int_equal(cudaMemcpyAsync(h, dx, N * sizeof(float), cudaMemcpyDeviceToHost, s1),
                     cudaSuccess);
    assert_int_equal(cudaEventRecord(e, s1), cudaSuccess);
    assert_int_equal(cudaEventSynchronize(e), cudaSuccess);
    volatile float v = h[N / 2];
    assert_true(v == 0.0f);
    assert_int_equal(cudasim_findings(), 0);
    /* wrong: read before */
    assert_int_equal(cudaMemcpyAsync(h, dx, N * sizeof(float), cudaMemcpyDeviceToHost, s1),
                     cudaSuccess);
    assert_int_equal(cudaEventRecord(e, s1), cudaSuccess);
    v = h[N / 2];
    (void)v;
    expect_finding("host read", "destination of cudaMemcpyAsync(DeviceToHost");
    assert_int_equal(cudaEventSynchronize(e), cudaSuccess);
    /* wrong too: writing a host-to-device copy's source before it is known done */
    assert_int_equal(cudaMemcpyAsync(dx, h, N * sizeof(float), cudaMemcpyHostToDevice, s1),
                     cudaSuccess);
    h[N / 2] = 1.0f;
    expect_finding("host wrote", "source of cudaMemcpyAsync(HostToDevice");
    assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
    h[N / 2] = 2.0f; /* after the synchronisation: fine */
    assert_int_equal(cudasim_findings(), 0);
    cudaEventDestroy(e);
    cudaFreeHost(h);
    cudaFree(dx);
}

static void test_two_streams_writing_one_buffer_is_named(void **state)
{
    (void)state;
    SKIP_RACE_UNDER_TSAN();
    float *d = dev_floats(1024);
    assert_int_equal(cudaMemsetAsync(d, 0, 4096, s1), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d, 1, 4096, s2), cudaSuccess);
    expect_finding("cudaMemsetAsync", "nothing orders the two");
    cudaDeviceSynchronize();
    cudaFree(d);
}

/* Device memory is not host memory on a GPU: host code that dereferences a device pointer
 * faults there (or reads garbage); here it is named. */
static void test_host_dereference_of_device_memory_is_named(void **state)
{
    (void)state;
    float *d = dev_floats(1024);
    assert_int_equal(cudaMemset(d, 0, 4096), cudaSuccess);
    volatile float v = d[10];
    (void)v;
    expect_finding("host code read device memory", "cudaMalloc");
    cudaFree(d);
    float *freed = dev_floats(1024);
    cudaFree(freed);
    volatile float w = freed[3];
    (void)w;
    expect_finding("host code read freed device memory", NULL);
}

static void CUDART_CB calls_cuda(void *arg)
{
    int n = 0;
    (void)cudaGetDeviceCount(&n);
    *(int *)arg = n;
}

static void test_api_call_in_host_function_is_named(void **state)
{
    (void)state;
    int n = 0;
    assert_int_equal(cudaLaunchHostFunc(s1, calls_cuda, &n), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
    expect_finding("cudaGetDeviceCount", "cudaLaunchHostFunc callback");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_wait_orders_streams_and_queries_follow),
        cmocka_unit_test(test_event_elapsed_time),
        cmocka_unit_test(test_null_stream_orders_blocking_streams),
        cmocka_unit_test(test_non_blocking_stream_is_not_ordered_with_null_stream),
        cmocka_unit_test(test_last_error_and_injection),
        cmocka_unit_test(test_pool_keeps_memory_up_to_its_threshold),
        cmocka_unit_test(test_free_without_event_wait_is_named),
        cmocka_unit_test(test_host_read_before_copy_completes_is_named),
        cmocka_unit_test(test_two_streams_writing_one_buffer_is_named),
        cmocka_unit_test(test_host_dereference_of_device_memory_is_named),
        cmocka_unit_test(test_api_call_in_host_function_is_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

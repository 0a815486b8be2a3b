/* SPDX-License-Identifier: MIT */
/* The cuda device backend on a GPU: budgeted allocation and its errors, host<->device round
 * trips of random data (pinned and registered), memset, event ordering across two streams,
 * and the kernels (cast, scale, non-finite check, int8 block quantization) against scalar
 * references. Exits 77 (skipped) where no GPU is visible, as on this project's CI machines.
 *
 * This is a backend-specific test: it relies on a zt_stream * being a cudaStream_t to gate a
 * stream with a host function. */
#include "core/convert.h"
#include "optimizer/adam.h"
#include "core/quant.h"
#include "device/cuda_kernels.h"
#include "device/device.h"

#include <cuda_runtime_api.h>
#ifdef ZT_CUDA_FAKE
#include "cudasim.h" /* fault injection */
#endif
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define BUDGET (256ull << 20)

static zt_device *dev;
static zt_error err;

/* ---- helpers ---------------------------------------------------------------------------- */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_random(void *p, size_t n)
{
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)rng_next();
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Test-local fp32 -> bf16, round to nearest, ties to even, written from the definition
 * (compare the dropped half with one half-ulp) rather than the library's add-and-shift. */
static uint16_t ref_bf16(float f)
{
    if (isnan(f))
        return 0x7fc0; /* NaN payloads may differ: callers compare NaN-ness only */
    uint32_t u = bits_of(f), kept = u >> 16, dropped = u & 0xffffu;
    if (dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u)))
        kept++; /* carries into the exponent: the largest finite rounds up to inf */
    return (uint16_t)kept;
}

static int is_nan_bf16(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu); }
static int is_nan_f16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

/* fp32 inputs that exercise rounding: ties both ways, subnormals, overflow, specials, then
 * random bit patterns over every exponent. */
static float *edge_and_random_floats(size_t n)
{
    static const uint32_t edges[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, /* zeros, subnormals */
        0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, /* bf16 ties, near */
        0xbf808000u, 0xbf818000u, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, /* overflow to inf */
        0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, /* inf, NaN */
        0x477fe000u, 0x477fefffu, 0x477ff000u, 0x33800000u, 0x33000000u, /* f16: 65504.., 2^-24 */
        0x33000001u, 0x387fc000u, 0x38800000u, 0x3f801000u, 0x3f803000u, /* f16 ties */
    };
    size_t ne = sizeof edges / sizeof edges[0];
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) {
        if (i < ne) {
            x[i] = float_of(edges[i]);
        } else if (i % 3 == 0) { /* around 1: where the training values live */
            x[i] = (float)((int64_t)(rng_next() % 2000001) - 1000000) * 1e-5f;
        } else {
            x[i] = float_of((uint32_t)rng_next());
        }
    }
    return x;
}

typedef struct dbuf { /* a device buffer and its host mirror */
    void *d;
    void *h;
    size_t bytes;
} dbuf;

static dbuf dbuf_new(size_t bytes)
{
    dbuf b = {NULL, NULL, bytes};
    assert_int_equal(zt_device_alloc(dev, bytes, &b.d, &err), ZT_OK);
    assert_int_equal(zt_device_host_alloc(dev, bytes, &b.h, &err), ZT_OK);
    return b;
}

static void dbuf_free(dbuf *b)
{
    zt_device_free(dev, b->d);
    zt_device_host_free(dev, b->h);
}

static void to_device(zt_stream *s, dbuf *b)
{
    assert_int_equal(zt_device_copy_sync(dev, b->d, b->h, b->bytes, ZT_COPY_H2D, s, &err), ZT_OK);
}

static void to_host(zt_stream *s, dbuf *b)
{
    assert_int_equal(zt_device_copy_sync(dev, b->h, b->d, b->bytes, ZT_COPY_D2H, s, &err), ZT_OK);
}

static zt_stream *stream_new(void)
{
    zt_stream *s = NULL;
    assert_int_equal(zt_device_stream_create(dev, &s, &err), ZT_OK);
    assert_non_null(s);
    return s;
}

/* ---- creation --------------------------------------------------------------------------- */

static void test_create_checks_index_and_clamps_budget(void **state)
{
    (void)state;
    int count = 0;
    assert_int_equal(cudaGetDeviceCount(&count), cudaSuccess);
    zt_error e;
    zt_device *other = NULL;
    zt_device_config bad = {0, count, 1, NULL, 0, 1};
    assert_int_equal(zt_device_cuda.create(&bad, &other, &e), ZT_ERR_CONFIG);
    assert_null(other);

    size_t free_b = 0, total_b = 0;
    assert_int_equal(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    zt_device_config all = {0, 0, 1, NULL, 0, 1}, huge = {UINT64_MAX / 2, 0, 1, NULL, 0, 1};
    assert_int_equal(zt_device_cuda.create(&all, &other, &e), ZT_OK);
    /* no budget given: what is free less a reserve the caller can still allocate from (an
     * eighth of the GPU, at least 1 GiB, at most half of what is free) */
    size_t reserve = total_b / 8 > (1u << 30) ? total_b / 8 : (size_t)1 << 30;
    reserve = reserve < free_b / 2 ? reserve : free_b / 2;
    assert_int_equal(other->capacity, free_b - reserve);
    zt_device_cuda.destroy(other);
    assert_int_equal(zt_device_cuda.create(&huge, &other, &e), ZT_OK);
    assert_true(other->capacity <= total_b);
    zt_device_cuda.destroy(other);

    assert_ptr_equal(zt_device_find("cuda", &e), &zt_device_cuda);
}

/* Several ranks on the machine and no index: each takes the GPU of its local rank; more
 * ranks than GPUs is refused, naming both counts (NCCL would refuse two ranks on one). */
static void test_local_rank_chooses_the_gpu(void **state)
{
    (void)state;
    int count = 0;
    assert_int_equal(cudaGetDeviceCount(&count), cudaSuccess);
    zt_error e;
    zt_device *d = NULL;
    zt_device_config last = {64u << 20, -1, 1, NULL, count - 1, count};
    assert_int_equal(zt_device_cuda.create(&last, &d, &e), ZT_OK);
    assert_int_equal(d->index, count - 1);
    zt_device_cuda.destroy(d);
    zt_device_config crowded = {64u << 20, -1, 1, NULL, 0, count + 1};
    assert_int_equal(zt_device_cuda.create(&crowded, &d, &e), ZT_ERR_CONFIG);
    assert_null(d);
    assert_non_null(strstr(e.msg, "GPU"));
    assert_non_null(strstr(e.msg, "ztier.device_index"));
}

/* The thread's CUDA error state is the caller's: an error it had pending before a backend
 * call is still pending after (a failed user kernel launch must not read as success), and a
 * launch of ztier's own is not failed by it. */
static void test_caller_error_state_is_kept(void **state)
{
    (void)state;
    zt_stream *s = stream_new();
    dbuf b = dbuf_new(4096);
    assert_int_equal(cudaSetDevice(999), cudaErrorInvalidDevice); /* now pending */
    assert_int_equal(zt_device_memset_async(dev, b.d, 0, 4096, s, &err), ZT_OK);
    assert_int_equal(zt_device_cast_async(dev, b.d, ZT_BF16, b.d, ZT_BF16, 16, s, &err), ZT_OK);
    assert_int_equal(zt_device_stream_synchronize(dev, s, &err), ZT_OK);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
#ifdef ZT_CUDA_FAKE
    /* and an error of ztier's own goes out as its status, not into the caller's state */
    void *p = NULL;
    cudasim_fail_alloc_after(1);
    assert_int_equal(zt_device_alloc(dev, 4096, &p, &err), ZT_ERR_DEVICE_NOMEM);
    cudasim_fail_alloc_after(0);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
#endif
    dbuf_free(&b);
    zt_device_stream_destroy(dev, s);
}

/* device_index -1 takes the caller's current device; every call gives the calling thread its
 * current device back, also when the instance lives on another GPU. */
static void test_caller_device_is_kept(void **state)
{
    (void)state;
    int count = 0, cur = -1;
    assert_int_equal(cudaGetDeviceCount(&count), cudaSuccess);
    zt_error e;
    zt_device *d = NULL;
    zt_device_config mine = {64u << 20, -1, 1, NULL, 0, 1},
                     last = {64u << 20, count - 1, 1, NULL, 0, 1};
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(zt_device_cuda.create(&mine, &d, &e), ZT_OK);
    void *p = NULL;
    assert_int_equal(zt_device_alloc(d, 4096, &p, &e), ZT_OK);
    struct cudaPointerAttributes a;
    assert_int_equal(cudaPointerGetAttributes(&a, p), cudaSuccess);
    assert_int_equal(a.device, 0);
    zt_device_free(d, p);
    zt_device_cuda.destroy(d);
    assert_int_equal(zt_device_cuda.create(&last, &d, &e), ZT_OK);
    assert_int_equal(zt_device_alloc(d, 4096, &p, &e), ZT_OK);
    assert_int_equal(cudaGetDevice(&cur), cudaSuccess);
    assert_int_equal(cur, 0); /* the instance is on device count-1; the thread stays on 0 */
    assert_int_equal(cudaPointerGetAttributes(&a, p), cudaSuccess);
    assert_int_equal(a.device, count - 1);
    zt_device_free(d, p);
    zt_device_cuda.destroy(d);
}

/* ---- memory ----------------------------------------------------------------------------- */

static void test_alloc_counts_bytes(void **state)
{
    (void)state;
    void *a = NULL, *b = NULL, *z = NULL;
    uint64_t peak0 = dev->bytes_peak;
    assert_int_equal(dev->bytes_in_use, 0);
    assert_int_equal(zt_device_alloc(dev, 1 << 20, &a, &err), ZT_OK);
    assert_int_equal(zt_device_alloc(dev, (3 << 20) + 5, &b, &err), ZT_OK);
    assert_int_equal(zt_device_alloc(dev, 0, &z, &err), ZT_OK);
    assert_non_null(a), assert_non_null(b), assert_non_null(z);
    assert_true(a != b && b != z && a != z);
    assert_int_equal((uintptr_t)a % 256, 0);
    assert_int_equal((uintptr_t)b % 256, 0);
    assert_int_equal(dev->bytes_in_use, (1 << 20) + (3 << 20) + 5);
    zt_device_free(dev, a);
    assert_int_equal(dev->bytes_in_use, (3 << 20) + 5);
    assert_true(dev->bytes_peak >= (1 << 20) + (3 << 20) + 5 && dev->bytes_peak >= peak0);
    zt_device_free(dev, NULL); /* a no-op */
    zt_device_free(dev, z);
    zt_device_free(dev, b);
    assert_int_equal(dev->bytes_in_use, 0);
}

static void test_alloc_beyond_capacity_fails_and_says_why(void **state)
{
    (void)state;
    void *a = NULL, *b = NULL;
    assert_int_equal(zt_device_alloc(dev, 1 << 20, &a, &err), ZT_OK);
    size_t too_much = (size_t)(dev->capacity - (1 << 20)) + 1;
    assert_int_equal(zt_device_alloc(dev, too_much, &b, &err), ZT_ERR_DEVICE_NOMEM);
    assert_null(b);
    char want[64];
    snprintf(want, sizeof want, "%zu bytes requested", too_much);
    assert_non_null(strstr(err.msg, want));
    snprintf(want, sizeof want, "%llu", (unsigned long long)dev->capacity);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "1048576 in use"));
    assert_int_equal(dev->bytes_in_use, 1 << 20);
    /* exactly the rest still fits */
    assert_int_equal(zt_device_alloc(dev, too_much - 1, &b, &err), ZT_OK);
    assert_int_equal(dev->bytes_in_use, dev->capacity);
    zt_device_free(dev, b);
    zt_device_free(dev, a);
    assert_int_equal(dev->bytes_in_use, 0);
}

/* Many live allocations (the pointer table grows), each usable, freed in shuffled order. */
static void test_many_allocations_are_distinct_and_freed(void **state)
{
    (void)state;
    enum { N = 3000 };
    void **p = calloc(N, sizeof *p);
    size_t *sz = calloc(N, sizeof *sz);
    uint64_t sum = 0;
    zt_stream *s = stream_new();
    for (int i = 0; i < N; i++) {
        sz[i] = 1 + rng_next() % 20000;
        assert_int_equal(zt_device_alloc(dev, sz[i], &p[i], &err), ZT_OK);
        assert_int_equal(zt_device_memset_async(dev, p[i], i & 0xff, sz[i], s, &err), ZT_OK);
        sum += sz[i];
    }
    assert_int_equal(dev->bytes_in_use, sum);
    for (int i = 0; i < N; i += 97) { /* a sample keeps its own contents: no overlap */
        unsigned char last = 0;
        assert_int_equal(
            zt_device_copy_sync(dev, &last, (char *)p[i] + sz[i] - 1, 1, ZT_COPY_D2H, s, &err),
            ZT_OK);
        assert_int_equal(last, i & 0xff);
    }
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(rng_next() % (uint64_t)(i + 1));
        void *tp = p[i];
        size_t ts = sz[i];
        p[i] = p[j], sz[i] = sz[j], p[j] = tp, sz[j] = ts;
    }
    for (int i = 0; i < N; i++) {
        zt_device_free(dev, p[i]);
        sum -= sz[i];
        assert_int_equal(dev->bytes_in_use, sum);
    }
    zt_device_stream_destroy(dev, s);
    free(p), free(sz);
}

/* A backend destroyed with allocations left frees them (and says so); its budget's memory is
 * the GPU's again. */
static void test_destroy_frees_what_is_left(void **state)
{
    (void)state;
    size_t free0 = 0, free1 = 0, total = 0;
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    zt_error e;
    zt_device *d = NULL;
    zt_device_config cfg = {64u << 20, 0, 1, NULL, 0, 1};
    assert_int_equal(zt_device_cuda.create(&cfg, &d, &e), ZT_OK);
    void *a = NULL, *b = NULL;
    assert_int_equal(zt_device_alloc(d, 1 << 20, &a, &e), ZT_OK);
    assert_int_equal(zt_device_alloc(d, 3 << 20, &b, &e), ZT_OK);
    zt_device_cuda.destroy(d);
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_int_equal(free1, free0);
}

/* A host function runs after the work queued before it, and work after it waits for it. */
static atomic_int host_fn_ran;
static void mark(void *arg) { atomic_store(&host_fn_ran, *(int *)arg); }

static void test_host_function_is_ordered(void **state)
{
    (void)state;
    zt_stream *s = stream_new();
    zt_event *e = NULL;
    static int value = 7;
    assert_int_equal(zt_device_event_create(dev, &e, &err), ZT_OK);
    atomic_store(&host_fn_ran, 0);
    assert_int_equal(zt_device_launch_host_fn(dev, s, mark, &value, &err), ZT_OK);
    assert_int_equal(zt_device_event_record(dev, e, s, &err), ZT_OK);
    assert_int_equal(zt_device_event_synchronize(dev, e, &err), ZT_OK);
    assert_int_equal(atomic_load(&host_fn_ran), 7);
    zt_device_event_destroy(dev, e);
    zt_device_stream_destroy(dev, s);
}

#ifdef ZT_CUDA_FAKE
/* Pinned memory that cannot be had: ZT_ERR_NOMEM naming the size (the stand-in refuses it). */
static void test_pinning_failure_names_the_size(void **state)
{
    (void)state;
    void *p = NULL;
    cudasim_fail_alloc_after(1);
    assert_int_equal(zt_device_host_alloc(dev, 12345, &p, &err), ZT_ERR_NOMEM);
    cudasim_fail_alloc_after(0);
    assert_null(p);
    assert_non_null(strstr(err.msg, "pinning 12345 bytes"));
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}
#endif

static void test_free_of_foreign_pointer_is_ignored(void **state)
{
    (void)state;
    int not_ours;
    void *a = NULL;
    assert_int_equal(zt_device_alloc(dev, 4096, &a, &err), ZT_OK);
    zt_device_free(dev, &not_ours);
    zt_device_free(dev, (char *)a + 256); /* inside, but not the start */
    assert_int_equal(dev->bytes_in_use, 4096);
    zt_device_free(dev, a);
    assert_int_equal(dev->bytes_in_use, 0);
}

/* ---- copies ----------------------------------------------------------------------------- */

static void test_round_trip_of_random_data(void **state)
{
    (void)state;
    const size_t n = (3u << 20) + 17; /* odd length */
    zt_stream *s = stream_new();
    unsigned char *src, *back;
    void *d;
    assert_int_equal(zt_device_host_alloc(dev, n + 8, (void **)&src, &err), ZT_OK);
    assert_int_equal(zt_device_host_alloc(dev, n + 8, (void **)&back, &err), ZT_OK);
    assert_int_equal(zt_device_alloc(dev, n + 8, &d, &err), ZT_OK);
    fill_random(src, n + 8);
    memset(back, 0, n + 8);
    /* unaligned on both sides: host +3, device +1, host back +5 */
    assert_int_equal(zt_device_memcpy_async(dev, (char *)d + 1, src + 3, n, ZT_COPY_H2D, s, &err),
                     ZT_OK);
    assert_int_equal(zt_device_memcpy_async(dev, back + 5, (char *)d + 1, n, ZT_COPY_D2H, s, &err),
                     ZT_OK);
    assert_int_equal(zt_device_stream_synchronize(dev, s, &err), ZT_OK);
    assert_memory_equal(back + 5, src + 3, n);
    assert_int_equal(back[4], 0);
    assert_int_equal(back[n + 5], 0);
    /* device to device, then host to host */
    void *d2;
    assert_int_equal(zt_device_alloc(dev, n, &d2, &err), ZT_OK);
    assert_int_equal(zt_device_memcpy_async(dev, d2, (char *)d + 1, n, ZT_COPY_D2D, s, &err),
                     ZT_OK);
    memset(back, 0, n + 8);
    assert_int_equal(zt_device_memcpy_async(dev, back, d2, n, ZT_COPY_D2H, s, &err), ZT_OK);
    assert_int_equal(zt_device_memcpy_async(dev, back + n, src, 8, ZT_COPY_H2H, s, &err), ZT_OK);
    assert_int_equal(zt_device_stream_synchronize(dev, s, &err), ZT_OK);
    assert_memory_equal(back, src + 3, n);
    assert_memory_equal(back + n, src, 8);
    zt_device_free(dev, d), zt_device_free(dev, d2);
    zt_device_host_free(dev, src), zt_device_host_free(dev, back);
    zt_device_stream_destroy(dev, s);
}

static void test_registered_host_memory_round_trip(void **state)
{
    (void)state;
    const size_t n = 1u << 21;
    zt_stream *s = stream_new();
    unsigned char *src = aligned_alloc(4096, n), *back = aligned_alloc(4096, n);
    assert_non_null(src), assert_non_null(back);
    assert_int_equal(zt_device_host_register(dev, src, n, &err), ZT_OK);
    assert_int_equal(zt_device_host_register(dev, back, n, &err), ZT_OK);
    fill_random(src, n);
    memset(back, 0, n);
    void *d;
    assert_int_equal(zt_device_alloc(dev, n, &d, &err), ZT_OK);
    assert_int_equal(zt_device_memcpy_async(dev, d, src, n, ZT_COPY_H2D, s, &err), ZT_OK);
    assert_int_equal(zt_device_memcpy_async(dev, back, d, n, ZT_COPY_D2H, s, &err), ZT_OK);
    assert_int_equal(zt_device_stream_synchronize(dev, s, &err), ZT_OK);
    assert_memory_equal(src, back, n);
    /* registering twice is an error that names the call and CUDA's text, and it does not
     * stick to the thread: the next kernel launch still reports success */
    assert_int_equal(zt_device_host_register(dev, src, n, &err), ZT_ERR_DEVICE);
    assert_non_null(strstr(err.msg, "cudaHostRegister failed: "));
    assert_non_null(strstr(err.msg, cudaGetErrorString(cudaErrorHostMemoryAlreadyRegistered)));
    assert_int_equal(zt_device_scale_async(dev, d, ZT_F32, 1.0f, n / 4, s, &err), ZT_OK);
    assert_int_equal(zt_device_stream_synchronize(dev, s, &err), ZT_OK);
    zt_device_host_unregister(dev, src, n);
    zt_device_host_unregister(dev, back, n);
    zt_device_free(dev, d);
    zt_device_stream_destroy(dev, s);
    free(src), free(back);
}

static void test_memset_sets_only_its_range(void **state)
{
    (void)state;
    const size_t n = 100000, lo = 1001, len = 33333;
    zt_stream *s = stream_new();
    dbuf b = dbuf_new(n);
    unsigned char *orig = malloc(n);
    fill_random(b.h, n);
    memcpy(orig, b.h, n);
    to_device(s, &b);
    assert_int_equal(zt_device_memset_async(dev, (char *)b.d + lo, 0xa5, len, s, &err), ZT_OK);
    assert_int_equal(zt_device_memset_async(dev, b.d, 0x5a, 0, s, &err), ZT_OK); /* nothing */
    memset(b.h, 0, n);
    to_host(s, &b);
    const unsigned char *h = b.h;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(h[i], i >= lo && i < lo + len ? 0xa5 : orig[i]);
    dbuf_free(&b);
    free(orig);
    zt_device_stream_destroy(dev, s);
}

static void test_bad_arguments_are_reported(void **state)
{
    (void)state;
    zt_stream *s = stream_new();
    void *d;
    assert_int_equal(zt_device_alloc(dev, 64, &d, &err), ZT_OK);
    assert_int_equal(zt_device_memcpy_async(dev, d, d, 64, (zt_copy_kind)9, s, &err),
                     ZT_ERR_ARGUMENT);
    assert_int_equal(zt_device_cast_async(dev, d, (zt_dtype)7, d, ZT_F32, 4, s, &err),
                     ZT_ERR_ARGUMENT);
    assert_int_equal(zt_device_scale_async(dev, d, (zt_dtype)7, 2.0f, 4, s, &err), ZT_ERR_ARGUMENT);
    assert_int_not_equal(zt_cuda_quant8(d, ZT_F32, 16, 0, d, d, s), 0);
    assert_int_not_equal(zt_cuda_dequant8(d, d, 16, 0, d, ZT_F32, s), 0);
    assert_int_equal(zt_device_stream_synchronize(dev, s, &err), ZT_OK);
    zt_device_free(dev, d);
    zt_device_stream_destroy(dev, s);
}

/* ---- streams and events ----------------------------------------------------------------- */

static atomic_int gate_open;

static void CUDART_CB wait_for_gate(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate_open)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* s1 is held by a host function until the test opens the gate: the event recorded after
 * s1's memset must stay pending, and so must s2's copy, which waits for it (an event after
 * the copy says so: the host may not read the copy's destination before it completes), and
 * the copy then brings the new contents. */
static void test_event_orders_two_streams(void **state)
{
    (void)state;
    const size_t n = 1u << 24;
    zt_stream *s1 = stream_new(), *s2 = stream_new();
    zt_event *e = NULL, *copied = NULL;
    assert_int_equal(zt_device_event_create(dev, &e, &err), ZT_OK);
    assert_int_equal(zt_device_event_create(dev, &copied, &err), ZT_OK);
    dbuf b = dbuf_new(n);
    assert_int_equal(zt_device_memset_async(dev, b.d, 0x11, n, s1, &err), ZT_OK);
    assert_int_equal(zt_device_stream_synchronize(dev, s1, &err), ZT_OK);
    memset(b.h, 0, n);

    atomic_store(&gate_open, 0);
    cudaError_t launched = cudaLaunchHostFunc((cudaStream_t)s1, wait_for_gate, NULL);
    zt_status st_set = zt_device_memset_async(dev, b.d, 0x77, n, s1, &err);
    zt_status st_rec = zt_device_event_record(dev, e, s1, &err);
    zt_status st_wait = zt_device_stream_wait_event(dev, s2, e, &err);
    zt_status st_copy = zt_device_memcpy_async(dev, b.h, b.d, n, ZT_COPY_D2H, s2, &err);
    zt_status st_rec2 = zt_device_event_record(dev, copied, s2, &err);
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
    int pending = zt_device_event_query(dev, e);
    int copy_pending = zt_device_event_query(dev, copied);
    atomic_store(&gate_open, 1); /* before any assert: a failed one must not leave s1 stuck */

    assert_int_equal(launched, cudaSuccess);
    assert_int_equal(st_set, ZT_OK), assert_int_equal(st_rec, ZT_OK);
    assert_int_equal(st_wait, ZT_OK), assert_int_equal(st_copy, ZT_OK);
    assert_int_equal(st_rec2, ZT_OK);
    assert_int_equal(pending, 0);
    assert_int_equal(copy_pending, 0);
    assert_int_equal(zt_device_stream_synchronize(dev, s2, &err), ZT_OK);
    assert_int_equal(zt_device_event_query(dev, e), 1);
    assert_int_equal(zt_device_event_synchronize(dev, e, &err), ZT_OK);
    const unsigned char *h = b.h;
    for (size_t i = 0; i < n; i += 4093)
        assert_int_equal(h[i], 0x77);
    assert_int_equal(h[n - 1], 0x77);
    dbuf_free(&b);
    zt_device_event_destroy(dev, e);
    zt_device_event_destroy(dev, copied);
    zt_device_stream_destroy(dev, s1), zt_device_stream_destroy(dev, s2);
}

/* ---- kernels ---------------------------------------------------------------------------- */

enum { NK = 100003 }; /* odd: the grid-stride tails */

static void test_cast_f32_bf16_f32_matches_rne_reference(void **state)
{
    (void)state;
    zt_stream *s = stream_new();
    float *x = edge_and_random_floats(NK);
    dbuf f = dbuf_new(NK * sizeof(float)), h = dbuf_new(NK * sizeof(uint16_t));
    memcpy(f.h, x, NK * sizeof(float));
    to_device(s, &f);
    assert_int_equal(zt_device_cast_async(dev, h.d, ZT_BF16, f.d, ZT_F32, NK, s, &err), ZT_OK);
    assert_int_equal(zt_device_cast_async(dev, f.d, ZT_F32, h.d, ZT_BF16, NK, s, &err), ZT_OK);
    to_host(s, &h);
    to_host(s, &f);
    const uint16_t *hb = h.h;
    const float *back = f.h;
    for (int i = 0; i < NK; i++) {
        uint16_t want = ref_bf16(x[i]);
        if (isnan(x[i])) {
            assert_true(is_nan_bf16(hb[i]));
            assert_true(isnan(back[i]));
            continue;
        }
        if (hb[i] != want)
            fail_msg("bf16 of %a (0x%08x): got 0x%04x, want 0x%04x", (double)x[i], bits_of(x[i]),
                     hb[i], want);
        assert_int_equal(bits_of(back[i]), (uint32_t)want << 16); /* widening is exact */
    }
    dbuf_free(&f), dbuf_free(&h);
    free(x);
    zt_device_stream_destroy(dev, s);
}

static void test_cast_f16_matches_host_conversion(void **state)
{
    (void)state;
    zt_stream *s = stream_new();
    float *x = edge_and_random_floats(NK);
    dbuf f = dbuf_new(NK * sizeof(float)), h = dbuf_new(NK * sizeof(uint16_t));
    memcpy(f.h, x, NK * sizeof(float));
    to_device(s, &f);
    assert_int_equal(zt_device_cast_async(dev, h.d, ZT_F16, f.d, ZT_F32, NK, s, &err), ZT_OK);
    to_host(s, &h);
    const uint16_t *hh = h.h;
    for (int i = 0; i < NK; i++) {
        uint16_t want = zt_f32_to_f16(x[i]);
        if (isnan(x[i]))
            assert_true(is_nan_f16(hh[i]));
        else if (hh[i] != want)
            fail_msg("f16 of %a (0x%08x): got 0x%04x, want 0x%04x", (double)x[i], bits_of(x[i]),
                     hh[i], want);
    }
    dbuf_free(&f), dbuf_free(&h);
    free(x);
    zt_device_stream_destroy(dev, s);
}

/* Every 16-bit pattern: widening to fp32 is exact, and bf16 -> f16 rounds once. */
static void test_cast_all_16bit_patterns(void **state)
{
    (void)state;
    enum { N = 65536 };
    zt_stream *s = stream_new();
    dbuf in = dbuf_new(N * 2), wide = dbuf_new(N * 4), narrow = dbuf_new(N * 2);
    uint16_t *p = in.h;
    for (int i = 0; i < N; i++)
        p[i] = (uint16_t)i;
    to_device(s, &in);
    for (zt_dtype t = ZT_BF16; t <= ZT_F16; t++) {
        assert_int_equal(zt_device_cast_async(dev, wide.d, ZT_F32, in.d, t, N, s, &err), ZT_OK);
        to_host(s, &wide);
        const float *w = wide.h;
        for (int i = 0; i < N; i++) {
            float want = t == ZT_BF16 ? zt_bf16_to_f32((uint16_t)i) : zt_f16_to_f32((uint16_t)i);
            if (isnan(want))
                assert_true(isnan(w[i]));
            else
                assert_int_equal(bits_of(w[i]), bits_of(want));
        }
    }
    assert_int_equal(zt_device_cast_async(dev, narrow.d, ZT_F16, in.d, ZT_BF16, N, s, &err), ZT_OK);
    to_host(s, &narrow);
    const uint16_t *q = narrow.h;
    for (int i = 0; i < N; i++) {
        float v = zt_bf16_to_f32((uint16_t)i);
        if (isnan(v))
            assert_true(is_nan_f16(q[i]));
        else
            assert_int_equal(q[i], zt_f32_to_f16(v));
    }
    dbuf_free(&in), dbuf_free(&wide), dbuf_free(&narrow);
    zt_device_stream_destroy(dev, s);
}

static void test_scale_matches_reference(void **state)
{
    (void)state;
    const float alpha = 0.37f;
    zt_stream *s = stream_new();
    dbuf b = dbuf_new(NK * sizeof(float));
    float *x = malloc(NK * sizeof(float));
    for (int i = 0; i < NK; i++)
        x[i] = (float)((int64_t)(rng_next() % 2000001) - 1000000) * 1e-3f;
    for (zt_dtype t = ZT_F32; t <= ZT_F16; t++) {
        uint16_t *h16 = b.h;
        float *h32 = b.h;
        for (int i = 0; i < NK; i++) { /* the input, already in type t */
            if (t == ZT_F32)
                h32[i] = x[i];
            else
                h16[i] = t == ZT_BF16 ? ref_bf16(x[i]) : zt_f32_to_f16(x[i]);
        }
        to_device(s, &b);
        assert_int_equal(zt_device_scale_async(dev, b.d, t, alpha, NK, s, &err), ZT_OK);
        to_host(s, &b);
        for (int i = 0; i < NK; i++) {
            if (t == ZT_F32) {
                assert_int_equal(bits_of(h32[i]), bits_of(x[i] * alpha));
            } else if (t == ZT_BF16) {
                float in = zt_bf16_to_f32(ref_bf16(x[i]));
                assert_int_equal(h16[i], ref_bf16(in * alpha));
            } else {
                float in = zt_f16_to_f32(zt_f32_to_f16(x[i]));
                assert_int_equal(h16[i], zt_f32_to_f16(in * alpha));
            }
        }
    }
    dbuf_free(&b);
    free(x);
    zt_device_stream_destroy(dev, s);
}

static void test_nonfinite_flag(void **state)
{
    (void)state;
    zt_stream *s = stream_new();
    dbuf x = dbuf_new(NK * sizeof(float)), flag = dbuf_new(sizeof(int));
    float *h = x.h;
    for (int i = 0; i < NK; i++)
        h[i] = (float)(i % 1000) * 1e30f; /* large, finite */
    static const struct {
        int at;
        uint32_t bits;
        int want;
    } cases[] = {
        {-1, 0, 0}, {NK - 1, 0x7f800000u, 1}, {0, 0xff800000u, 1}, {NK / 2, 0x7fc00000u, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float keep = 0;
        if (cases[c].at >= 0)
            keep = h[cases[c].at], h[cases[c].at] = float_of(cases[c].bits);
        to_device(s, &x);
        *(int *)flag.h = 0;
        to_device(s, &flag);
        assert_int_equal(zt_cuda_nonfinite(x.d, ZT_F32, NK, flag.d, s), 0);
        to_host(s, &flag);
        assert_int_equal(*(int *)flag.h, cases[c].want);
        if (cases[c].at >= 0)
            h[cases[c].at] = keep;
    }
    /* 16-bit inputs: a bf16 NaN at the tail, then 0x7c00: inf as fp16, 2^121 as bf16 */
    uint16_t *h16 = x.h;
    for (int i = 0; i < NK; i++)
        h16[i] = 0x3c00; /* 1.0 in fp16, 2^-7 in bf16 */
    h16[NK - 1] = 0x7fc1;
    to_device(s, &x);
    *(int *)flag.h = 0;
    to_device(s, &flag);
    assert_int_equal(zt_cuda_nonfinite(x.d, ZT_BF16, NK - 1, flag.d, s), 0); /* tail excluded */
    to_host(s, &flag);
    assert_int_equal(*(int *)flag.h, 0);
    assert_int_equal(zt_cuda_nonfinite(x.d, ZT_BF16, NK, flag.d, s), 0);
    to_host(s, &flag);
    assert_int_equal(*(int *)flag.h, 1);
    h16[NK - 1] = 0x7c00;
    to_device(s, &x);
    *(int *)flag.h = 0;
    to_device(s, &flag);
    assert_int_equal(zt_cuda_nonfinite(x.d, ZT_BF16, NK, flag.d, s), 0);
    to_host(s, &flag);
    assert_int_equal(*(int *)flag.h, 0);
    assert_int_equal(zt_cuda_nonfinite(x.d, ZT_F16, NK, flag.d, s), 0);
    to_host(s, &flag);
    assert_int_equal(*(int *)flag.h, 1);
    dbuf_free(&x), dbuf_free(&flag);
    zt_device_stream_destroy(dev, s);
}

/* The ZeRO++ quantization kernels on the GPU give the CPU reference's bits, for block sizes
 * below, at and above one CUDA block's threads, and for fp32 and bf16 input. */
static void test_quant8_matches_cpu_reference(void **state)
{
    (void)state;
    enum { N = 10007 };
    static const int blocks[] = {256, 100, 2048, 1};
    zt_stream *s = stream_new();
    float *x = malloc(N * sizeof(float));
    uint16_t *xb = malloc(N * sizeof(uint16_t));
    for (int i = 0; i < N; i++) {
        x[i] = (float)((int64_t)(rng_next() % 2001) - 1000) * 1e-3f;
        xb[i] = ref_bf16(x[i]);
    }
    for (int i = 3000; i < 3300; i++)
        x[i] = 0.0f, xb[i] = 0; /* whole zero blocks: scale 0 */
    dbuf dx = dbuf_new(N * sizeof(float)), dq = dbuf_new(N), ds = dbuf_new(N * sizeof(float));
    dbuf dout = dbuf_new(N * sizeof(float));
    int8_t *q = malloc(N);
    uint16_t *out16 = malloc(N * sizeof(uint16_t));
    float *scales = malloc(N * sizeof(float)), *out = malloc(N * sizeof(float));
    for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
        for (zt_dtype t = ZT_F32; t <= ZT_BF16; t++) {
            int block = blocks[bi];
            size_t nb = (size_t)zt_quant_blocks(N, block);
            const void *in = t == ZT_F32 ? (const void *)x : (const void *)xb;
            memcpy(dx.h, in, N * (t == ZT_F32 ? 4 : 2));
            to_device(s, &dx);
            zt_quant8_scalar(in, t, N, block, q, scales);
            assert_int_equal(zt_cuda_quant8(dx.d, t, N, block, dq.d, ds.d, s), 0);
            to_host(s, &dq);
            to_host(s, &ds);
            assert_memory_equal(q, dq.h, N);
            assert_memory_equal(scales, ds.h, nb * sizeof(float));
            /* and back, as fp32 and as the input type */
            zt_dequant8_scalar(q, scales, N, block, out, ZT_F32);
            assert_int_equal(zt_cuda_dequant8(dq.d, ds.d, N, block, dout.d, ZT_F32, s), 0);
            to_host(s, &dout);
            assert_memory_equal(out, dout.h, N * sizeof(float));
            zt_dequant8_scalar(q, scales, N, block, out16, ZT_BF16);
            assert_int_equal(zt_cuda_dequant8(dq.d, ds.d, N, block, dout.d, ZT_BF16, s), 0);
            to_host(s, &dout);
            assert_memory_equal(out16, dout.h, N * sizeof(uint16_t));
        }
    }
    dbuf_free(&dx), dbuf_free(&dq), dbuf_free(&ds), dbuf_free(&dout);
    free(x), free(xb), free(q), free(out16), free(scales), free(out);
    zt_device_stream_destroy(dev, s);
}

/* qgZ's int4 kernels against the CPU's scalar reference, bit for bit: odd lengths and odd
 * blocks (a packed byte then spans two blocks), through the backend's vtable; with a NaN, an
 * inf and a run of ~1e-40 values (1 / scale overflows) among them, whose blocks must come
 * back NaN on both (NaN payloads may differ) or keep the reference's bits. */
static void test_quant4_matches_cpu_reference(void **state)
{
    (void)state;
    enum { N = 10007 };
    static const int blocks[] = {256, 101, 1};
    zt_stream *s = stream_new();
    float *x = malloc(N * sizeof(float)), *acc = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        x[i] = (float)((int64_t)(rng_next() % 2001) - 1000) * 1e-3f;
    x[300] = NAN, x[700] = -INFINITY;
    for (int i = 1024; i < 1536; i++)
        x[i] = i % 3 ? (i % 2 ? 1e-40f : -2e-40f) : 0.0f;
    dbuf dx = dbuf_new(N * sizeof(float)), dq = dbuf_new(N), ds = dbuf_new(N * sizeof(float));
    dbuf dacc = dbuf_new(N * sizeof(float));
    uint8_t *q = malloc(N);
    float *scales = malloc(N * sizeof(float));
    for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
        int block = blocks[bi];
        size_t nb = (size_t)zt_quant_blocks(N, block);
        memcpy(dx.h, x, N * sizeof(float));
        to_device(s, &dx);
        zt_quant4_scalar(x, N, block, q, scales);
        assert_int_equal(zt_device_quant4_async(dev, dx.d, N, block, dq.d, ds.d, s, &err), ZT_OK);
        to_host(s, &dq);
        to_host(s, &ds);
        assert_memory_equal(q, dq.h, (N + 1) / 2);
        assert_memory_equal(scales, ds.h, nb * sizeof(float));
        for (int i = 0; i < N; i++)
            acc[i] = 0.25f * (float)(i % 5);
        memcpy(dacc.h, acc, N * sizeof(float));
        to_device(s, &dacc);
        zt_dequant4_add_scalar(q, scales, N, block, acc);
        assert_int_equal(zt_device_dequant4_add_async(dev, dq.d, ds.d, N, block, dacc.d, s, &err),
                         ZT_OK);
        to_host(s, &dacc);
        const float *g = dacc.h;
        for (int i = 0; i < N; i++)
            if (!(isnan(acc[i]) && isnan(g[i])) && memcmp(&acc[i], &g[i], sizeof(float)))
                fail_msg("block %d, element %d: CPU %g, GPU %g", block, i, (double)acc[i],
                         (double)g[i]);
        assert_true(isnan(acc[300]) && isnan(acc[700]));
    }
    dbuf_free(&dx), dbuf_free(&dq), dbuf_free(&ds), dbuf_free(&dacc);
    free(x), free(acc), free(q), free(scales);
    zt_device_stream_destroy(dev, s);
}

/* ---- the optimizer ---------------------------------------------------------------------- */

static float uniform(float lo, float hi) /* from the test's generator */
{
    return lo + (hi - lo) * (float)(rng_next() >> 40) / (float)(1u << 24);
}

/* The gradient norm's sums on the GPU (the device vtable's sumsq_async): against a double
 * reference to double rounding, the non-finite count exact, both added to what out held; and
 * the same bits when run again (partials combined in a fixed order, no atomics). */
static void test_sumsq_matches_reference_and_repeats(void **state)
{
    (void)state;
    enum { N = (1 << 21) + 3 }; /* more blocks than the kernel's 4096: grid-stride */
    zt_stream *s = stream_new();
    dbuf dx = dbuf_new(N * 4), dout = dbuf_new(2 * sizeof(double));
    dbuf dscratch = dbuf_new(ZT_SUMSQ_SCRATCH_DOUBLES * sizeof(double));
    float *x = dx.h;
    for (int i = 0; i < N; i++)
        x[i] = uniform(-2, 2);
    x[17] = INFINITY, x[N - 1] = NAN, x[N / 2] = -INFINITY;
    const float scale = 0.5f;
    double want = 1.25, bad = 3; /* the start */
    for (int i = 0; i < N; i++) {
        float g = x[i] * scale;
        if (isfinite(g))
            want += (double)g * (double)g;
        else
            bad += 1;
    }
    to_device(s, &dx);
    double got[2][2];
    for (int r = 0; r < 2; r++) {
        ((double *)dout.h)[0] = 1.25, ((double *)dout.h)[1] = 3;
        to_device(s, &dout);
        assert_int_equal(zt_device_sumsq_async(dev, dx.d, N, scale, dout.d, dscratch.d, s, &err),
                         ZT_OK);
        to_host(s, &dout);
        memcpy(got[r], dout.h, sizeof got[r]);
    }
    assert_true(fabs(got[0][0] - want) <= 1e-10 * want); /* 2M terms: reordered in double */
    assert_true(got[0][1] == bad);
    assert_memory_equal(got[0], got[1], sizeof got[0]);
    dbuf_free(&dx), dbuf_free(&dout), dbuf_free(&dscratch);
    zt_device_stream_destroy(dev, s);
}

/* The CUDA Adam kernel (the device vtable's adam_async, as the device optimizer calls it)
 * against the CPU's scalar reference kernel, the definition every variant is tested against:
 * master, m, v and the working copy (bf16, fp16, fp32, or none) bitwise equal, and the same
 * count of non-finite gradients (counted on the device, on top of what the counter held).
 * AdamW with a gradient scale (clipping folded in) and Adam with L2, over an odd length. */
static void test_adam_matches_cpu_kernel(void **state)
{
    (void)state;
    enum { N = (1 << 18) + 7, BAD_A = 5, BAD_B = N - 1 };
    static const zt_adam_hparams hp[2] = {{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 3, 0.5f},
                                          {3e-4f, 0.8f, 0.99f, 1e-6f, 0.1f, 0, 1, 1.0f}};
    static const zt_dtype out_types[4] = {ZT_BF16, ZT_F16, ZT_F32, ZT_F32};
    zt_stream *s = stream_new();
    dbuf dp = dbuf_new(N * 4), dm = dbuf_new(N * 4), dv = dbuf_new(N * 4), dg = dbuf_new(N * 4);
    dbuf dout = dbuf_new(N * 4), dcount = dbuf_new(sizeof(unsigned long long));
    float *p = malloc(N * 4), *m = malloc(N * 4), *v = malloc(N * 4), *g = malloc(N * 4);
    void *out = malloc(N * 4);
    assert_true(p && m && v && g && out);
    for (int k = 0; k < 8; k++) {
        const zt_adam_hparams *h = &hp[k % 2];
        zt_dtype ot = out_types[k / 2];
        int with_out = k / 2 != 3; /* the last two: no working copy */
        for (int i = 0; i < N; i++) {
            p[i] = uniform(-1, 1), m[i] = uniform(-1e-2f, 1e-2f), v[i] = uniform(0, 1e-4f);
            g[i] = i % 97 == 0 ? 0.0f : i % 89 == 0 ? 1e-40f : uniform(-0.1f, 0.1f);
        }
        g[BAD_A] = INFINITY, g[BAD_B] = NAN;
        memcpy(dp.h, p, N * 4), memcpy(dm.h, m, N * 4), memcpy(dv.h, v, N * 4);
        memcpy(dg.h, g, N * 4);
        *(unsigned long long *)dcount.h = 7; /* added to */
        to_device(s, &dp), to_device(s, &dm), to_device(s, &dv), to_device(s, &dg);
        to_device(s, &dcount);
        zt_adam_consts c;
        zt_adam_consts_init(&c, h);
        zt_adam_tensors t = {p, m, v, g, ZT_F32, with_out ? out : NULL, ot, N};
        assert_int_equal(zt_adam_step_scalar(&c, &t), 2);
        assert_int_equal(zt_device_adam_async(dev, &c, dp.d, dm.d, dv.d, dg.d,
                                              with_out ? dout.d : NULL, ot, N, dcount.d, s, &err),
                         ZT_OK);
        to_host(s, &dp), to_host(s, &dm), to_host(s, &dv), to_host(s, &dcount);
        assert_int_equal(*(unsigned long long *)dcount.h, 7 + 2);
        const float *gp = dp.h, *gm = dm.h, *gv = dv.h;
        for (int i = 0; i < N; i++) {
            if (i == BAD_A || i == BAD_B) { /* NaN or inf through the update: only payloads */
                assert_true(!isfinite(gp[i]) && !isfinite(p[i]));
                continue;
            }
            if (memcmp(&gp[i], &p[i], 4) || memcmp(&gm[i], &m[i], 4) || memcmp(&gv[i], &v[i], 4))
                fail_msg("case %d, element %d: CPU p %a m %a v %a, GPU p %a m %a v %a", k, i,
                         (double)p[i], (double)m[i], (double)v[i], (double)gp[i], (double)gm[i],
                         (double)gv[i]);
        }
        if (!with_out)
            continue;
        to_host(s, &dout);
        size_t es = zt_dtype_size(ot);
        for (int i = 0; i < N; i++)
            if (i != BAD_A && i != BAD_B &&
                memcmp((char *)dout.h + (size_t)i * es, (char *)out + (size_t)i * es, es))
                fail_msg("case %d, element %d: the %s working copy differs", k, i,
                         ot == ZT_BF16  ? "bf16"
                         : ot == ZT_F16 ? "fp16"
                                        : "fp32");
    }
    dbuf_free(&dp), dbuf_free(&dm), dbuf_free(&dv), dbuf_free(&dg), dbuf_free(&dout);
    dbuf_free(&dcount);
    free(p), free(m), free(v), free(g), free(out);
    zt_device_stream_destroy(dev, s);
}

int main(void)
{
    int count = 0;
    cudaError_t r = cudaGetDeviceCount(&count);
    if (r != cudaSuccess || count == 0) {
        printf("no GPU visible (%s): skipping the cuda backend test\n",
               r != cudaSuccess ? cudaGetErrorString(r) : "0 devices");
        return 77;
    }
    zt_device_config cfg = {BUDGET, 0, 1, NULL, 0, 1};
    if (zt_device_cuda.create(&cfg, &dev, &err) != ZT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_checks_index_and_clamps_budget),
        cmocka_unit_test(test_caller_device_is_kept),
        cmocka_unit_test(test_local_rank_chooses_the_gpu),
        cmocka_unit_test(test_caller_error_state_is_kept),
        cmocka_unit_test(test_alloc_counts_bytes),
        cmocka_unit_test(test_alloc_beyond_capacity_fails_and_says_why),
        cmocka_unit_test(test_many_allocations_are_distinct_and_freed),
        cmocka_unit_test(test_free_of_foreign_pointer_is_ignored),
        cmocka_unit_test(test_destroy_frees_what_is_left),
        cmocka_unit_test(test_host_function_is_ordered),
#ifdef ZT_CUDA_FAKE
        cmocka_unit_test(test_pinning_failure_names_the_size),
#endif
        cmocka_unit_test(test_round_trip_of_random_data),
        cmocka_unit_test(test_registered_host_memory_round_trip),
        cmocka_unit_test(test_memset_sets_only_its_range),
        cmocka_unit_test(test_bad_arguments_are_reported),
        cmocka_unit_test(test_event_orders_two_streams),
        cmocka_unit_test(test_cast_f32_bf16_f32_matches_rne_reference),
        cmocka_unit_test(test_cast_f16_matches_host_conversion),
        cmocka_unit_test(test_cast_all_16bit_patterns),
        cmocka_unit_test(test_scale_matches_reference),
        cmocka_unit_test(test_nonfinite_flag),
        cmocka_unit_test(test_quant8_matches_cpu_reference),
        cmocka_unit_test(test_quant4_matches_cpu_reference),
        cmocka_unit_test(test_sumsq_matches_reference_and_repeats),
        cmocka_unit_test(test_adam_matches_cpu_kernel),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zt_device_cuda.destroy(dev);
    return rc;
}

/* SPDX-License-Identifier: MIT */
/* The host device backend: budgeted allocation, in-order asynchronous copies on worker
 * threads, events and cross-stream waits, and its cast/scale kernels. */
#include "core/convert.h"
#include "core/time.h"
#include "device/device.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static zt_device *make_device(uint64_t capacity)
{
    zt_device_config cfg = {capacity, 0, 1, NULL, 0, 1};
    zt_device *dev = NULL;
    zt_error err;
    assert_int_equal(zt_device_host.create(&cfg, &dev, &err), ZT_OK);
    return dev;
}

static void test_alloc_respects_budget(void **state)
{
    (void)state;
    zt_device *dev = make_device(1000);
    zt_error err = {0};
    void *a = NULL, *b = NULL;
    assert_int_equal(zt_device_alloc(dev, 600, &a, &err), ZT_OK);
    assert_int_equal(zt_device_alloc(dev, 600, &b, &err), ZT_ERR_DEVICE_NOMEM);
    assert_non_null(strstr(err.msg, "600 bytes requested, 600 in use of a 1000-byte budget"));
    assert_int_equal(dev->bytes_in_use, 600);
    zt_device_free(dev, a);
    assert_int_equal(dev->bytes_in_use, 0);
    assert_int_equal(dev->bytes_peak, 600);
    assert_int_equal(zt_device_alloc(dev, 1000, &b, &err), ZT_OK);
    zt_device_free(dev, b);
    zt_device_destroy(dev);
}

/* Freed blocks are reused by allocations of their size (warm memory, as a GPU pool's), never
 * keep the budget from being allocated whole, and are kept only while the memory held, in use
 * and cached, stays within the most ever in use (zt_stats.device_bytes_peak): no memory
 * beyond what the counters show. */
static void test_freed_blocks_are_reused(void **state)
{
    (void)state;
    zt_device *dev = make_device(4096);
    zt_error err = {0};
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    assert_int_equal(zt_device_alloc(dev, 1024, &a, &err), ZT_OK);
    assert_int_equal(zt_device_alloc(dev, 512, &c, &err), ZT_OK);
    zt_device_free(dev, a), zt_device_free(dev, c);
    assert_int_equal(dev->bytes_in_use, 0);
    assert_int_equal(zt_device_alloc(dev, 1024, &b, &err), ZT_OK);
    assert_ptr_equal(a, b); /* the cached block */
    assert_int_equal(zt_device_alloc(dev, 512, &d, &err), ZT_OK);
    assert_ptr_equal(c, d);
    assert_int_equal(dev->bytes_in_use, 1536);
    assert_int_equal(dev->bytes_held_peak, 1536);
    zt_device_free(dev, b), zt_device_free(dev, d);
    /* another size: the cached blocks go first, the memory held stays within the peak */
    assert_int_equal(zt_device_alloc(dev, 1024 + 512, &a, &err), ZT_OK);
    assert_int_equal(dev->bytes_held_peak, 1536);
    zt_device_free(dev, a);
    /* the whole budget is still allocatable: cached blocks do not hold it */
    assert_int_equal(zt_device_alloc(dev, 4096, &a, &err), ZT_OK);
    assert_int_equal(dev->bytes_held_peak, 4096);
    zt_device_free(dev, a);
    zt_device_destroy(dev);
}

static void test_copies_run_in_order(void **state)
{
    (void)state;
    zt_device *dev = make_device(1 << 24);
    zt_error err;
    zt_stream *s;
    assert_int_equal(zt_device_stream_create(dev, &s, &err), ZT_OK);
    enum { N = 1 << 20 };
    unsigned char *src = malloc(N), *dst = malloc(N), *back = malloc(N);
    void *d = NULL;
    assert_int_equal(zt_device_alloc(dev, N, &d, &err), ZT_OK);
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 31 + 7);
    /* copy in, overwrite a part, copy out: only in-order execution gives this result */
    assert_int_equal(zt_device_memcpy_async(dev, d, src, N, ZT_COPY_H2D, s, &err), ZT_OK);
    assert_int_equal(zt_device_memset_async(dev, d, 0xab, 100, s, &err), ZT_OK);
    assert_int_equal(zt_device_memcpy_async(dev, back, d, N, ZT_COPY_D2H, s, &err), ZT_OK);
    assert_int_equal(zt_device_stream_synchronize(dev, s, &err), ZT_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(back[i], i < 100 ? 0xab : src[i]);
    (void)dst;
    zt_device_free(dev, d);
    zt_device_stream_destroy(dev, s);
    zt_device_destroy(dev);
    free(src), free(dst), free(back);
}

static void test_event_orders_two_streams(void **state)
{
    (void)state;
    zt_device *dev = make_device(1 << 26);
    zt_error err;
    zt_stream *s1, *s2;
    zt_event *e;
    assert_int_equal(zt_device_stream_create(dev, &s1, &err), ZT_OK);
    assert_int_equal(zt_device_stream_create(dev, &s2, &err), ZT_OK);
    assert_int_equal(zt_device_event_create(dev, &e, &err), ZT_OK);
    assert_int_equal(zt_device_event_query(dev, e), 1); /* never recorded: complete */
    enum { N = 16 << 20 };
    char *a = malloc(N), *b = malloc(N), *c = malloc(N);
    memset(a, 7, N);
    memset(b, 0, N);
    memset(c, 0, N);
    for (int round = 0; round < 8; round++) {
        memset(b, 0, N);
        /* s1: a -> b (large, slow); s2 waits on the event, then b -> c */
        assert_int_equal(zt_device_memcpy_async(dev, b, a, N, ZT_COPY_H2H, s1, &err), ZT_OK);
        assert_int_equal(zt_device_event_record(dev, e, s1, &err), ZT_OK);
        assert_int_equal(zt_device_stream_wait_event(dev, s2, e, &err), ZT_OK);
        assert_int_equal(zt_device_memcpy_async(dev, c, b, N, ZT_COPY_H2H, s2, &err), ZT_OK);
        assert_int_equal(zt_device_stream_synchronize(dev, s2, &err), ZT_OK);
        assert_int_equal(zt_device_event_query(dev, e), 1);
        assert_int_equal(c[0], 7);
        assert_int_equal(c[N - 1], 7);
        memset(c, 0, N);
    }
    assert_int_equal(zt_device_event_synchronize(dev, e, &err), ZT_OK);
    zt_device_event_destroy(dev, e);
    zt_device_stream_destroy(dev, s1);
    zt_device_stream_destroy(dev, s2);
    zt_device_destroy(dev);
    free(a), free(b), free(c);
}

static void sleep_30ms(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 30 * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Timed events: the seconds between the stream reaching two records (30 ms of work between
 * them, within the host's clock around the whole; a record on an idle stream takes the time
 * at once), and the refusals (an untimed event, one never recorded, one not complete). */
static void test_timed_events(void **state)
{
    (void)state;
    zt_device *dev = make_device(1 << 20);
    zt_error err = {0};
    zt_stream *s;
    zt_event *a, *b, *untimed, *never;
    assert_true(zt_device_can_time(dev));
    assert_int_equal(zt_device_stream_create(dev, &s, &err), ZT_OK);
    assert_int_equal(zt_device_event_create_timed(dev, &a, &err), ZT_OK);
    assert_int_equal(zt_device_event_create_timed(dev, &b, &err), ZT_OK);
    assert_int_equal(zt_device_event_create_timed(dev, &never, &err), ZT_OK);
    assert_int_equal(zt_device_event_create(dev, &untimed, &err), ZT_OK);
    double t0 = zt_now_s(), secs = -1;
    assert_int_equal(zt_device_event_record(dev, a, s, &err), ZT_OK); /* idle: now */
    assert_int_equal(zt_device_launch_host_fn(dev, s, sleep_30ms, NULL, &err), ZT_OK);
    assert_int_equal(zt_device_event_record(dev, b, s, &err), ZT_OK);
    assert_int_equal(zt_device_event_record(dev, untimed, s, &err), ZT_OK);
    zt_status early = zt_device_event_elapsed(dev, a, b, &secs, &err);
    if (early != ZT_OK) /* the usual case: the stream is still in its 30 ms */
        assert_non_null(strstr(err.msg, "not complete yet"));
    assert_int_equal(zt_device_event_synchronize(dev, b, &err), ZT_OK);
    double host = zt_now_s() - t0;
    assert_int_equal(zt_device_event_elapsed(dev, a, b, &secs, &err), ZT_OK);
    print_message("timed: %.4f s on the stream, %.4f s on the host around it\n", secs, host);
    assert_true(secs >= 0.030 && secs <= host);
    assert_int_equal(zt_device_event_elapsed(dev, a, untimed, &secs, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "not made by event_create_timed"));
    assert_int_equal(zt_device_event_elapsed(dev, never, b, &secs, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "never recorded"));
    zt_device_event_destroy(dev, a), zt_device_event_destroy(dev, b);
    zt_device_event_destroy(dev, never), zt_device_event_destroy(dev, untimed);
    zt_device_stream_destroy(dev, s);
    zt_device_destroy(dev);
}

static void test_cast_and_scale_kernels(void **state)
{
    (void)state;
    zt_device *dev = make_device(1 << 20);
    zt_error err;
    zt_stream *s;
    assert_int_equal(zt_device_stream_create(dev, &s, &err), ZT_OK);
    enum { N = 1001 };
    float x[N], back[N];
    uint16_t bf[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - 500) * 0.37f;
    assert_int_equal(zt_device_cast_async(dev, bf, ZT_BF16, x, ZT_F32, N, s, &err), ZT_OK);
    assert_int_equal(zt_device_cast_async(dev, back, ZT_F32, bf, ZT_BF16, N, s, &err), ZT_OK);
    assert_int_equal(zt_device_scale_async(dev, back, ZT_F32, 2.0f, N, s, &err), ZT_OK);
    assert_int_equal(zt_device_stream_synchronize(dev, s, &err), ZT_OK);
    for (int i = 0; i < N; i++) {
        /* independent reference: bf16 keeps the top 16 bits after round-to-nearest-even */
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        float r;
        memcpy(&r, &u, 4);
        assert_float_equal(back[i], 2.0f * r, 0.0f);
    }
    zt_device_stream_destroy(dev, s);
    zt_device_destroy(dev);
}

static void test_find_backend(void **state)
{
    (void)state;
    zt_error err = {0};
    assert_ptr_equal(zt_device_find("host", &err), &zt_device_host);
    assert_null(zt_device_find("tpu", &err));
    assert_int_equal(err.status, ZT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "'tpu' is not built"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_respects_budget),
        cmocka_unit_test(test_freed_blocks_are_reused),
        cmocka_unit_test(test_copies_run_in_order),
        cmocka_unit_test(test_event_orders_two_streams),
        cmocka_unit_test(test_timed_events),
        cmocka_unit_test(test_cast_and_scale_kernels),
        cmocka_unit_test(test_find_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

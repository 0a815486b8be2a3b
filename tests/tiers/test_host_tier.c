/* SPDX-License-Identifier: MIT */
/* The host tier: allocations are page-aligned, zeroed and counted by whole pages against the
 * bound; large ones (a huge page or more) start at different page offsets within their first
 * huge page, so that shards streamed side by side do not share cache sets and memory banks
 * (and so do large buffers laid a stride apart in one allocation);
 * every byte asked for is usable and frees give back exactly what was counted; a request
 * over the bound is refused naming the key to raise, and the tier stays usable; an
 * allocation asked not to be zeroed (ZT_HOST_UNZEROED) is counted the same but not touched:
 * none of its pages is resident until written. */
#include "core/align.h"
#include "tiers/host_tier.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#define HUGE (2u << 20)

static int all_zero(const unsigned char *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void test_large_allocations_are_staggered(void **state)
{
    (void)state;
    enum { N = 8 };
    zt_host_tier t = {0};
    zt_error err = {0};
    void *p[N];
    uint64_t bytes = 3 * (uint64_t)HUGE + 100; /* not a whole number of pages */
    uint64_t counted = zt_round_up(bytes, ZT_PAGE_BYTES);
    for (int i = 0; i < N; i++) {
        assert_int_equal(zt_host_tier_alloc(&t, bytes, "shard", &p[i], &err), ZT_OK);
        assert_int_equal((uintptr_t)p[i] % ZT_PAGE_BYTES, 0);
        assert_true(all_zero(p[i], counted));
        memset(p[i], 0xa5, counted); /* the whole counted size is usable */
        for (int j = 0; j < i; j++)
            assert_int_not_equal((uintptr_t)p[i] % HUGE, (uintptr_t)p[j] % HUGE);
    }
    assert_int_equal(t.current, N * counted);
    assert_int_equal(t.peak, N * counted);
    for (int i = 0; i < N; i++)
        zt_host_tier_free(&t, p[i], bytes);
    assert_int_equal(t.current, 0);
    assert_int_equal(t.peak, N * counted);
}

/* Large buffers side by side in one allocation, a stride apart, start at different page
 * offsets within a huge page; small ones are whole pages apart. */
static void test_stride_staggers_large_neighbours(void **state)
{
    (void)state;
    assert_int_equal(zt_host_tier_stride(100), ZT_PAGE_BYTES);
    assert_int_equal(zt_host_tier_stride(HUGE - ZT_PAGE_BYTES), HUGE - ZT_PAGE_BYTES);
    uint64_t sizes[] = {HUGE, 64u << 20, (16u << 20) + 1};
    for (int s = 0; s < 3; s++) {
        uint64_t stride = zt_host_tier_stride(sizes[s]);
        assert_int_equal(stride % ZT_PAGE_BYTES, 0);
        assert_true(stride >= zt_round_up(sizes[s], ZT_PAGE_BYTES));
        for (uint64_t i = 1; i < 4; i++)
            assert_int_not_equal(i * stride % HUGE, 0);
    }
}

static void test_small_allocations_are_page_aligned(void **state)
{
    (void)state;
    zt_host_tier t = {0};
    zt_error err = {0};
    void *a = NULL, *b = NULL;
    assert_int_equal(zt_host_tier_alloc(&t, 1, "tiny", &a, &err), ZT_OK);
    assert_int_equal(zt_host_tier_alloc(&t, HUGE - 1, "almost huge", &b, &err), ZT_OK);
    assert_int_equal((uintptr_t)a % ZT_PAGE_BYTES, 0);
    assert_int_equal((uintptr_t)b % ZT_PAGE_BYTES, 0);
    assert_true(all_zero(b, HUGE));
    assert_int_equal(t.current, ZT_PAGE_BYTES + HUGE);
    zt_host_tier_free(&t, a, 1);
    zt_host_tier_free(&t, b, HUGE - 1);
    zt_host_tier_free(&t, NULL, 123); /* nothing */
    assert_int_equal(t.current, 0);
}

static void test_bound_refuses_and_stays_usable(void **state)
{
    (void)state;
    zt_host_tier t = {.capacity = 4 * (uint64_t)HUGE};
    zt_error err = {0};
    void *a = NULL, *b = NULL;
    assert_int_equal(zt_host_tier_alloc(&t, 3 * (uint64_t)HUGE, "m", &a, &err), ZT_OK);
    assert_int_equal(zt_host_tier_alloc(&t, 2 * (uint64_t)HUGE, "v", &b, &err), ZT_ERR_NOMEM);
    assert_null(b);
    assert_non_null(strstr(err.msg, "'v'"));
    assert_non_null(strstr(err.msg, "ztier.host_capacity"));
    assert_int_equal(t.current, 3 * (uint64_t)HUGE);
    assert_int_equal(zt_host_tier_alloc(&t, HUGE, "v", &b, &err), ZT_OK);
    assert_int_equal(t.current, t.capacity);
    zt_host_tier_free(&t, a, 3 * (uint64_t)HUGE);
    zt_host_tier_free(&t, b, HUGE);
    assert_int_equal(t.current, 0);
}

/* Resident pages of [p, p + n) (mincore: an anonymous page is, once first written). */
static size_t resident(const void *p, uint64_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), in = 0;
    static unsigned char vec[(64u << 20) / 4096];
    assert_true(n / page <= sizeof vec);
    assert_int_equal(mincore((void *)p, (size_t)n, vec), 0);
    for (size_t i = 0; i < (size_t)((n + page - 1) / page); i++)
        in += vec[i] & 1;
    return in;
}

static void test_unzeroed_is_not_touched(void **state)
{
    (void)state;
    zt_host_tier t = {0};
    zt_error err = {0};
    void *a = NULL, *b = NULL;
    uint64_t n = 8 * (uint64_t)HUGE;
    assert_int_equal(zt_host_tier_alloc_as(&t, n, "m", ZT_HOST_UNZEROED, &a, &err), ZT_OK);
    assert_int_equal(zt_host_tier_alloc_as(&t, n, "grad", 0, &b, &err), ZT_OK);
#if !defined(__SANITIZE_ADDRESS__) && !defined(ZT_TEST_SANITIZED)
    /* (a sanitizer's allocator may hand back memory it had before, already resident) */
    assert_int_equal(resident(a, n), 0);
#endif
    assert_int_equal(resident(b, n), n / (uint64_t)sysconf(_SC_PAGESIZE));
    assert_true(all_zero(b, n));
    assert_int_equal(t.current, 2 * n);
    memset(a, 7, n); /* every byte usable */
    assert_int_equal(resident(a, n), n / (uint64_t)sysconf(_SC_PAGESIZE));
    zt_host_tier_free(&t, a, n);
    zt_host_tier_free(&t, b, n);
    assert_int_equal(t.current, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_allocations_are_staggered),
        cmocka_unit_test(test_stride_staggers_large_neighbours),
        cmocka_unit_test(test_small_allocations_are_page_aligned),
        cmocka_unit_test(test_bound_refuses_and_stays_usable),
        cmocka_unit_test(test_unzeroed_is_not_touched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The thread pool's parallel-for: every item is processed exactly once whatever the thread
 * count, chunk size and item count; worker indices stay in range; many loops in a row reuse
 * the same threads; a loop started from inside a loop runs on its caller; NULL and one-thread
 * pools run on the caller; NUMA binding accepts real nodes and rejects missing ones. */
#include "core/threadpool.h"

#include <numa.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

typedef struct count_ctx {
    atomic_int *hits; /* per item */
    atomic_int bad_worker;
    atomic_llong calls;
    int threads;
    int64_t chunk;
} count_ctx;

static void count_items(void *arg, int64_t begin, int64_t end, int worker)
{
    count_ctx *c = arg;
    if (worker < 0 || worker >= c->threads || end - begin > c->chunk || end <= begin)
        atomic_store(&c->bad_worker, 1);
    for (int64_t i = begin; i < end; i++)
        atomic_fetch_add(&c->hits[i], 1);
    atomic_fetch_add(&c->calls, 1);
}

static void expect_each_item_once(zt_threadpool *pool, int64_t n, int64_t chunk)
{
    count_ctx c = {.threads = zt_threadpool_size(pool), .chunk = chunk < 1 ? 1 : chunk};
    c.hits = calloc((size_t)(n > 0 ? n : 1), sizeof *c.hits);
    atomic_init(&c.bad_worker, 0);
    atomic_init(&c.calls, 0);
    zt_threadpool_run(pool, n, chunk, count_items, &c);
    for (int64_t i = 0; i < n; i++)
        if (atomic_load(&c.hits[i]) != 1)
            fail_msg("n=%lld chunk=%lld: item %lld processed %d times", (long long)n,
                     (long long)chunk, (long long)i, atomic_load(&c.hits[i]));
    assert_int_equal(atomic_load(&c.bad_worker), 0);
    int64_t per = c.chunk;
    assert_int_equal(atomic_load(&c.calls), n > 0 ? (n + per - 1) / per : 0);
    free(c.hits);
}

static void test_every_item_once(void **state)
{
    (void)state;
    const int64_t sizes[] = {0, 1, 2, 63, 64, 65, 1000, 100003};
    const int64_t chunks[] = {0, 1, 7, 64, 4096, 1 << 20};
    for (int threads = 1; threads <= 4; threads++) {
        zt_threadpool *pool = NULL;
        zt_error err;
        assert_int_equal(zt_threadpool_create(threads, -1, &pool, &err), ZT_OK);
        assert_int_equal(zt_threadpool_size(pool), threads);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
                if (sizes[s] / (chunks[c] > 0 ? chunks[c] : 1) <= 200000)
                    expect_each_item_once(pool, sizes[s], chunks[c]);
        zt_threadpool_destroy(pool);
    }
}

static void add_range(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    int64_t sum = 0;
    for (int64_t i = begin; i < end; i++)
        sum += i;
    atomic_fetch_add((atomic_llong *)arg, sum);
}

static void test_many_loops_in_a_row(void **state)
{
    (void)state;
    zt_threadpool *pool = NULL;
    zt_error err;
    assert_int_equal(zt_threadpool_create(3, -1, &pool, &err), ZT_OK);
    for (int round = 0; round < 3000; round++) {
        atomic_llong sum;
        atomic_init(&sum, 0);
        int64_t n = 1 + round % 997;
        zt_threadpool_run(pool, n, 16, add_range, &sum);
        assert_int_equal(atomic_load(&sum), n * (n - 1) / 2);
    }
    zt_threadpool_destroy(pool);
}

typedef struct nested_ctx {
    zt_threadpool *pool;
    atomic_llong sum;
} nested_ctx;

static void nested_outer(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    nested_ctx *c = arg;
    for (int64_t i = begin; i < end; i++) /* the pool is busy: runs on this thread */
        zt_threadpool_run(c->pool, 100, 10, add_range, &c->sum);
}

static void test_nested_loop_runs_on_caller(void **state)
{
    (void)state;
    zt_threadpool *pool = NULL;
    zt_error err;
    assert_int_equal(zt_threadpool_create(2, -1, &pool, &err), ZT_OK);
    nested_ctx c = {.pool = pool};
    atomic_init(&c.sum, 0);
    zt_threadpool_run(pool, 8, 1, nested_outer, &c);
    assert_int_equal(atomic_load(&c.sum), 8 * 4950);
    zt_threadpool_destroy(pool);
}

static void test_null_and_single_thread_pools(void **state)
{
    (void)state;
    atomic_llong sum;
    atomic_init(&sum, 0);
    zt_threadpool_run(NULL, 1000, 64, add_range, &sum);
    assert_int_equal(atomic_load(&sum), 499500);
    assert_int_equal(zt_threadpool_size(NULL), 1);
    zt_threadpool_destroy(NULL);
    zt_threadpool *pool = NULL;
    zt_error err;
    assert_int_equal(zt_threadpool_create(0, -1, &pool, &err), ZT_OK);
    assert_int_equal(zt_threadpool_size(pool), 1);
    expect_each_item_once(pool, 1000, 7);
    zt_threadpool_destroy(pool);
}

static void test_numa_binding(void **state)
{
    (void)state;
    if (numa_available() < 0)
        skip();
    zt_threadpool *pool = NULL;
    zt_error err = {0};
    assert_int_equal(zt_threadpool_create(2, 0, &pool, &err), ZT_OK);
    expect_each_item_once(pool, 5000, 100);
    zt_threadpool_destroy(pool);
    pool = NULL;
    assert_int_equal(zt_threadpool_create(2, numa_max_node() + 1, &pool, &err), ZT_ERR_ARGUMENT);
    assert_null(pool);
    assert_int_equal(err.status, ZT_ERR_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_item_once),
        cmocka_unit_test(test_many_loops_in_a_row),
        cmocka_unit_test(test_nested_loop_runs_on_caller),
        cmocka_unit_test(test_null_and_single_thread_pools),
        cmocka_unit_test(test_numa_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The NVMe staging pool: a buffer released twice, or one that is not the pool's, is refused
 * with ZT_ERR_INTERNAL and a message, and the pool stays as it was: each buffer is handed out
 * once at a time (a second release would put it on the free list twice, and two transfers
 * would then share it). */
#include "tiers/staging_pool.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_double_release_is_refused(void **state)
{
    (void)state;
    zt_staging_pool *p = NULL;
    zt_error err = {0};
    assert_int_equal(zt_staging_pool_create(3, 4096, NULL, -1, &p, &err), ZT_OK);
    char *a = zt_staging_acquire(p), *b = zt_staging_acquire(p);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(zt_staging_release(p, a, &err), ZT_OK);
    assert_int_equal(zt_staging_in_use(p), 1);
    memset(&err, 0, sizeof err);
    assert_int_equal(zt_staging_release(p, a, &err), ZT_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "released twice"));
    assert_int_equal(zt_staging_in_use(p), 1); /* unchanged by the refused release */
    /* the three buffers are handed out once each, then none: a is not handed out twice */
    char *got[4] = {zt_staging_acquire(p), zt_staging_acquire(p), zt_staging_acquire(p)};
    assert_non_null(got[0]);
    assert_non_null(got[1]);
    assert_null(got[2]);
    assert_ptr_not_equal(got[0], got[1]);
    assert_ptr_not_equal(got[0], b);
    assert_ptr_not_equal(got[1], b);
    assert_int_equal(zt_staging_in_use(p), 3);
    zt_staging_pool_destroy(p);
}

static void test_foreign_buffer_is_refused(void **state)
{
    (void)state;
    zt_staging_pool *p = NULL;
    zt_error err = {0};
    assert_int_equal(zt_staging_pool_create(2, 4096, NULL, -1, &p, &err), ZT_OK);
    char *a = zt_staging_acquire(p);
    static char elsewhere[64];
    assert_int_equal(zt_staging_release(p, elsewhere, &err), ZT_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "none of its 2 buffers"));
    assert_int_equal(zt_staging_release(p, a + 1, &err), ZT_ERR_INTERNAL); /* inside one */
    assert_int_equal(zt_staging_in_use(p), 1);
    assert_int_equal(zt_staging_release(p, a, &err), ZT_OK);
    assert_int_equal(zt_staging_release(p, NULL, &err), ZT_OK); /* nothing */
    assert_int_equal(zt_staging_in_use(p), 0);
    zt_staging_pool_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_double_release_is_refused),
        cmocka_unit_test(test_foreign_buffer_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

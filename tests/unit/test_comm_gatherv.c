/* SPDX-License-Identifier: MIT */
/* The single comm backend's gathers of unequal blocks: its one block lands at its offset
 * (gatherv to root 0 and allgatherv alike), nothing else in recv is touched, an empty block
 * writes nothing, and any other root is ZT_ERR_ARGUMENT naming it. */
#include "comm/comm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

static void test_single_gathers_its_block_at_its_offset(void **state)
{
    (void)state;
    zt_comm *c = NULL;
    zt_error err = {0};
    assert_int_equal(zt_comm_single_create(&c, &err), ZT_OK);
    float send[3] = {1.5f, -2.0f, 3.25f}, recv[8];
    for (int root = -1; root <= 0; root++) {
        for (int i = 0; i < 8; i++)
            recv[i] = 9.0f;
        size_t counts[1] = {3}, displs[1] = {4};
        assert_int_equal(
            zt_comm_gatherv_sync(c, send, recv, counts, displs, ZT_COMM_F32, root, &err), ZT_OK);
        float want[8] = {9, 9, 9, 9, 1.5f, -2.0f, 3.25f, 9};
        assert_memory_equal(recv, want, sizeof want);
        counts[0] = 0; /* an empty block: recv stays */
        assert_int_equal(
            zt_comm_gatherv_sync(c, send, recv, counts, displs, ZT_COMM_F32, root, &err), ZT_OK);
        assert_memory_equal(recv, want, sizeof want);
    }
    size_t counts[1] = {3}, displs[1] = {0};
    zt_comm_req req = {0};
    assert_int_equal(zt_comm_gatherv(c, send, recv, counts, displs, ZT_COMM_F32, 1, &req, &err),
                     ZT_ERR_ARGUMENT);
    assert_non_null(strstr(err.msg, "root 1"));
    zt_comm_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_gathers_its_block_at_its_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The step model's scheduler (runtime/stepmodel.h) against schedules worked out by hand: two
 * resources (copies feeding compute) that overlap, one that bounds the other, and the critical
 * path named from the tasks that set the end, as a chain and in words. */
#include "runtime/stepmodel.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* fetch i on h2d, then compute i waiting for it: the prefetching forward of n layers */
static void pipeline(zt_stepmodel *m, int n, double fetch, double compute)
{
    for (int i = 0; i < n; i++) {
        char w[32];
        snprintf(w, sizeof w, "fetch of layer %d", i);
        int f = zt_sm_add(m, ZT_SM_H2D, fetch, NULL, 0, w);
        assert_true(f >= 0);
        snprintf(w, sizeof w, "forward of layer %d", i);
        assert_true(zt_sm_add(m, ZT_SM_COMPUTE, compute, &f, 1, w) >= 0);
    }
}

/* Copies faster than compute: h2d 0-1, 1-2, 2-3; compute 1-3, 3-5, 5-7. Only the first fetch
 * is exposed. */
static void test_compute_bound(void **state)
{
    (void)state;
    zt_stepmodel m = {0};
    pipeline(&m, 3, 1.0, 2.0);
    zt_sm_result r;
    zt_sm_run(&m, &r);
    assert_float_equal(r.step, 7.0, 1e-12);
    assert_float_equal(r.busy[ZT_SM_COMPUTE], 6.0, 1e-12);
    assert_float_equal(r.busy[ZT_SM_H2D], 3.0, 1e-12);
    assert_float_equal(r.stall, 1.0, 1e-12);
    assert_float_equal(m.task[3].start, 3.0, 1e-12); /* compute 1 waits for compute 0 */
    assert_int_equal(m.task[3].bound_by, 1);
    char path[256];
    zt_sm_critical(&m, &r, 0, path, sizeof path);
    assert_string_equal(path, "h2d: fetch of layer 0 (1 s) -> compute: forward of layer 0 .. "
                              "forward of layer 2, 3 tasks (6 s)");
    zt_sm_bound(&m, &r, 0, path, sizeof path);
    assert_string_equal(path, "compute bounds the step: 6 s of the 7 s critical path; "
                              "host-to-device copies (1 s, fetch of layer 0) hold up the compute "
                              "from forward of layer 0 on");
    zt_sm_free(&m);
}

/* Copies slower than compute: h2d 0-3, 3-6, 6-9; compute 3-4, 6-7, 9-10: the copies bound it
 * and compute stalls 7 of 10 s. */
static void test_copy_bound(void **state)
{
    (void)state;
    zt_stepmodel m = {0};
    pipeline(&m, 3, 3.0, 1.0);
    zt_sm_result r;
    zt_sm_run(&m, &r);
    assert_float_equal(r.step, 10.0, 1e-12);
    assert_float_equal(r.stall, 7.0, 1e-12);
    assert_float_equal(m.task[3].start, 6.0, 1e-12);
    assert_int_equal(m.task[3].bound_by, 2); /* the fetch, not compute 0 (ended at 4) */
    char path[256];
    zt_sm_critical(&m, &r, 0, path, sizeof path);
    assert_string_equal(path, "h2d: fetch of layer 0 .. fetch of layer 2, 3 tasks (9 s) -> "
                              "compute: forward of layer 2 (1 s)");
    zt_sm_critical(&m, &r, 5.0, path, sizeof path); /* from the fetch ending at 6 on */
    assert_string_equal(path, "h2d: fetch of layer 1 .. fetch of layer 2, 2 tasks (6 s) -> "
                              "compute: forward of layer 2 (1 s)");
    zt_sm_bound(&m, &r, 0, path, sizeof path);
    assert_string_equal(path, "host-to-device copies bound the step: 9 s of the 10 s critical "
                              "path (fetch of layer 0 .. fetch of layer 2; they hold up the "
                              "compute from forward of layer 2 on)");
    zt_sm_free(&m);
}

/* A join: an optimizer task on the CPU waiting for a d2h copy and an NVMe read that run at
 * once (d2h 0-2, nvme 0-5), then 1 s: it starts at 5, the later of the two. */
static void test_join_and_bad_dep(void **state)
{
    (void)state;
    zt_stepmodel m = {0};
    int d[2];
    d[0] = zt_sm_add(&m, ZT_SM_D2H, 2.0, NULL, 0, "grads out");
    d[1] = zt_sm_add(&m, ZT_SM_NVME, 5.0, NULL, 0, "state in");
    assert_int_equal(zt_sm_add(&m, ZT_SM_CPU_OPT, 1.0, d, 2, "adam"), 2);
    int future = 7;
    assert_int_equal(zt_sm_add(&m, ZT_SM_NET, 1.0, &future, 1, "bad"), -1);
    assert_int_equal(zt_sm_add(&m, ZT_SM_NET, -1.0, NULL, 0, "bad"), -1);
    zt_sm_result r;
    zt_sm_run(&m, &r);
    assert_float_equal(r.step, 6.0, 1e-12);
    assert_int_equal(m.task[2].bound_by, 1);
    assert_float_equal(r.busy[ZT_SM_COMPUTE], 0.0, 0);
    zt_sm_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compute_bound),
        cmocka_unit_test(test_copy_bound),
        cmocka_unit_test(test_join_and_bad_dep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The node layout as every rank gathers it, and ZeRO++'s decisions on it (comm/topology.h),
 * on hand-made layouts: equal consecutive nodes (2x2), `--map-by node` placement (ranks 0,2 on
 * one node, 1,3 on the other), unequal nodes (2+1+1, 3+1), one node, every rank its own node.
 * Each checks the node groups (by actual node, in rank order), whether hpZ and two-level qgZ
 * apply, the one-line description and what is reported as turned off, against the layout
 * written out by hand; node ids are arbitrary numbers (host hashes, lowest ranks). */
#include "comm/topology.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

typedef struct expect {
    int n_nodes, equal, hpz, two_level;
    const char *groups; /* "0,1|2,3": node m's ranks in rank order */
    const char *desc, *off;
} expect;

/* The layout's groups written as "0,1|2,3". */
static void groups_of(const zt_layout *l, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (int m = 0; m < l->n_nodes; m++)
        for (int i = l->start[m]; i < l->start[m + 1]; i++)
            used += (size_t)snprintf(out + used, cap - used, "%s%d",
                                     i == l->start[m] ? (m ? "|" : "") : ",", l->members[i]);
}

static void check(const int64_t *ids, int size, int hpz, int qgz, const expect *e)
{
    zt_layout l;
    zt_error err = {0};
    assert_int_equal(zt_layout_make(ids, size, hpz, qgz, &l, &err), ZT_OK);
    char groups[256];
    groups_of(&l, groups, sizeof groups);
    assert_string_equal(groups, e->groups);
    assert_int_equal(l.n_nodes, e->n_nodes);
    assert_int_equal(l.equal, e->equal);
    assert_int_equal(l.hpz, e->hpz);
    assert_int_equal(l.two_level, e->two_level);
    assert_string_equal(l.desc, e->desc);
    assert_string_equal(l.off, e->off);
    for (int r = 0; r < size; r++) { /* node_of and local_of agree with the groups */
        int m = l.node_of[r];
        assert_int_equal(l.members[l.start[m] + l.local_of[r]], r);
        assert_true(ids[r] == ids[l.members[l.start[m]]]);
    }
    zt_layout_free(&l);
}

static void test_equal_consecutive_nodes(void **state)
{
    (void)state;
    const int64_t ids[4] = {7, 7, 3, 3}; /* node ids need not follow the ranks */
    check(ids, 4, 2, 1, &(expect){2, 2, 1, 1, "0,1|2,3", "2 nodes x 2 ranks", ""});
    /* ztier.ranks_per_node's consecutive groups give the same */
    int64_t cons[4];
    zt_layout_consecutive(4, 2, cons);
    check(cons, 4, 2, 1, &(expect){2, 2, 1, 1, "0,1|2,3", "2 nodes x 2 ranks", ""});
    /* nothing asked for: nothing on, nothing reported */
    check(ids, 4, 1, 0, &(expect){2, 2, 0, 0, "0,1|2,3", "2 nodes x 2 ranks", ""});
}

static void test_map_by_node(void **state)
{
    (void)state;
    const int64_t ids[4] = {0, 1, 0, 1};
    check(ids, 4, 2, 1,
          &(expect){2, 2, 1, 1, "0,2|1,3", "2 nodes x 2 ranks, nodes {0,2} {1,3}", ""});
    const int64_t six[6] = {5, 9, 2, 5, 9, 2}; /* 3 nodes round-robin */
    check(six, 6, 2, 1,
          &(expect){3, 2, 1, 1, "0,3|1,4|2,5", "3 nodes x 2 ranks, nodes {0,3} {1,4} {2,5}", ""});
}

static void test_unequal_nodes(void **state)
{
    (void)state;
    const int64_t ids[4] = {0, 0, 2, 3};
    check(ids, 4, 2, 1,
          &(expect){3, 0, 0, 0, "0,1|2|3", "3 nodes of 2+1+1 ranks",
                    "hpZ (zero_hpz_partition_size = 2) is off and qgZ runs in one level over "
                    "all ranks: they need nodes of equal size, more than one rank each"});
    const int64_t three_one[4] = {4, 4, 1, 4};
    check(three_one, 4, 1, 1,
          &(expect){2, 0, 0, 0, "0,1,3|2", "2 nodes of 3+1 ranks, nodes {0,1,3} {2}",
                    "qgZ runs in one level over all ranks: it needs nodes of equal size, more "
                    "than one rank each"});
    check(three_one, 4, 4, 0,
          &(expect){2, 0, 0, 0, "0,1,3|2", "2 nodes of 3+1 ranks, nodes {0,1,3} {2}",
                    "hpZ (zero_hpz_partition_size = 4) is off: it needs nodes of equal size, "
                    "more than one rank each"});
}

static void test_one_node(void **state)
{
    (void)state;
    const int64_t ids[4] = {11, 11, 11, 11};
    /* hpZ over the one node (as before); qgZ has no second level to take */
    check(ids, 4, 2, 1, &(expect){1, 4, 1, 0, "0,1,2,3", "1 node x 4 ranks", ""});
    const int64_t one[1] = {0};
    check(one, 1, 2, 1, &(expect){1, 1, 0, 0, "0", "1 node x 1 rank", ""});
}

static void test_every_rank_its_own_node(void **state)
{
    (void)state;
    const int64_t ids[4] = {40, 30, 20, 10};
    /* one-level qgZ is all there is: not reported; hpZ asked for is */
    check(ids, 4, 2, 1,
          &(expect){4, 1, 0, 0, "0|1|2|3", "4 nodes x 1 rank",
                    "hpZ (zero_hpz_partition_size = 2) is off: it needs nodes of equal size, "
                    "more than one rank each"});
    check(ids, 4, 1, 1, &(expect){4, 1, 0, 0, "0|1|2|3", "4 nodes x 1 rank", ""});
}

/* The description stays one bounded line however many ranks. */
static void test_long_layout_is_cut(void **state)
{
    (void)state;
    enum { N = 400 };
    int64_t ids[N];
    for (int r = 0; r < N; r++)
        ids[r] = r % 2;
    zt_layout l;
    assert_int_equal(zt_layout_make(ids, N, 2, 1, &l, NULL), ZT_OK);
    assert_int_equal(l.n_nodes, 2);
    assert_int_equal(l.equal, 200);
    assert_int_equal(l.hpz, 1);
    assert_int_equal(l.two_level, 1);
    assert_true(strlen(l.desc) < ZT_LAYOUT_TEXT_MAX);
    assert_memory_equal(l.desc, "2 nodes x 200 ranks, nodes {0,2,4,", 34);
    assert_string_equal(l.desc + strlen(l.desc) - 3, "...");
    zt_layout_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_consecutive_nodes), cmocka_unit_test(test_map_by_node),
        cmocka_unit_test(test_unequal_nodes),           cmocka_unit_test(test_one_node),
        cmocka_unit_test(test_every_rank_its_own_node), cmocka_unit_test(test_long_layout_is_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

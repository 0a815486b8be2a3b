/* SPDX-License-Identifier: MIT */
/* NUMA placement, what a one-node machine can show: the node a GPU's PCI address gives under
 * a (fake) sysfs tree, -1 where sysfs says none or has no file; a node the process cannot use
 * refused with ZT_ERR_CONFIG naming it and the nodes there are; the memory policy the kernel
 * reports (get_mempolicy, MPOL_F_ADDR) on host-tier buffers small and large and on the NVMe
 * staging pool: MPOL_PREFERRED with exactly the node asked for, and the default policy when
 * none is; the thread pool's workers bound after creation prefer the node for their own
 * memory, and so do threads started inside a zt_numa_scope (the I/O engines'). */
#include "core/numa.h"
#include "core/threadpool.h"
#include "tiers/host_tier.h"
#include "tiers/numa_place.h"
#include "tiers/staging_pool.h"

#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* The policy of the memory at addr: its mode, and *only_node the one node in its mask (-1:
 * none, -2: several). */
static int policy_at(void *addr, int *only_node)
{
    int mode = -1;
    unsigned long mask[16] = {0};
    assert_int_equal(get_mempolicy(&mode, mask, sizeof mask * 8, addr, MPOL_F_ADDR), 0);
    *only_node = -1;
    for (unsigned n = 0; n < sizeof mask * 8; n++)
        if (mask[n / (8 * sizeof *mask)] >> (n % (8 * sizeof *mask)) & 1)
            *only_node = *only_node == -1 ? (int)n : -2;
    return mode;
}

static void expect_on_node(void *addr, int node)
{
    int only;
    assert_int_equal(policy_at(addr, &only), MPOL_PREFERRED);
    assert_int_equal(only, node);
}

static void expect_default(void *addr)
{
    int only;
    assert_int_equal(policy_at(addr, &only), MPOL_DEFAULT);
    assert_int_equal(only, -1);
}

static int setup(void **state)
{
    (void)state;
    return numa_available() < 0 ? -1 : 0; /* without NUMA support nothing here applies */
}

/* ---- the node of a PCI device ---- */

static char sysfs[512];

static void make_device(const char *id, const char *numa_node)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s", sysfs, id);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    assert_int_equal(system(cmd), 0);
    if (!numa_node)
        return;
    strcat(path, "/numa_node");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", numa_node);
    fclose(f);
}

static void test_node_of_pci_address(void **state)
{
    (void)state;
    const char *tmp = getenv("ZT_TEST_TMPDIR");
    snprintf(sysfs, sizeof sysfs, "%s/numa-sysfs-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    make_device("0000:3b:00.0", "1");
    make_device("0000:86:00.0", "-1"); /* firmware that does not say */
    make_device("0001:0a:1f.7", "2");  /* another domain, device and function */
    make_device("0000:af:00.0", NULL); /* no numa_node file */
    /* as CUDA writes it: upper-case hex, a 4- or 8-digit domain */
    assert_int_equal(zt_numa_node_of_pci(sysfs, "0000:3B:00.0"), 1);
    assert_int_equal(zt_numa_node_of_pci(sysfs, "00000000:3B:00.0"), 1);
    assert_int_equal(zt_numa_node_of_pci(sysfs, "0000:3b:00.0"), 1);
    assert_int_equal(zt_numa_node_of_pci(sysfs, "0001:0A:1F.7"), 2);
    assert_int_equal(zt_numa_node_of_pci(sysfs, "0000:86:00.0"), -1);
    assert_int_equal(zt_numa_node_of_pci(sysfs, "0000:AF:00.0"), -1);
    assert_int_equal(zt_numa_node_of_pci(sysfs, "0000:12:00.0"), -1); /* no such device */
    assert_int_equal(zt_numa_node_of_pci(sysfs, "not an address"), -1);
    assert_int_equal(zt_numa_node_of_pci(sysfs, ""), -1);
    /* the tests' archive reads the tree $ZT_TEST_SYSFS_ROOT names */
    setenv("ZT_TEST_SYSFS_ROOT", sysfs, 1);
    assert_int_equal(zt_numa_node_of_gpu("0000:3B:00.0"), 1);
    unsetenv("ZT_TEST_SYSFS_ROOT");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sysfs);
    assert_int_equal(system(cmd), 0);
}

/* ---- checking a node ---- */

static void test_missing_node_is_refused(void **state)
{
    (void)state;
    int bound = 7;
    zt_error err = {0};
    assert_int_equal(zt_numa_check_node(-1, "ztier.numa_node", &bound, &err), ZT_OK);
    assert_int_equal(bound, -1);
    assert_int_equal(zt_numa_check_node(0, "ztier.numa_node", &bound, &err), ZT_OK);
    assert_int_equal(bound, 0);
    int missing = numa_max_node() < 3 ? 3 : numa_max_node() + 1;
    assert_int_equal(zt_numa_check_node(missing, "ztier.numa_node", &bound, &err), ZT_ERR_CONFIG);
    assert_int_equal(bound, -1);
    char want[128];
    snprintf(want, sizeof want, "ztier.numa_node = %d: this process has no NUMA node %d", missing,
             missing);
    assert_non_null(strstr(err.msg, want));
    char nodes[256];
    zt_numa_describe_nodes(nodes, sizeof nodes);
    assert_non_null(strstr(err.msg, nodes));
    if (numa_max_node() == 0)
        assert_string_equal(nodes, "0");
    print_message("%s\n", err.msg);
}

/* ---- the buffers ---- */

static void test_host_tier_buffers_on_node(void **state)
{
    (void)state;
    zt_host_tier plain = {0}, placed = {.numa_bind = 1, .numa_node = 0};
    zt_error err = {0};
    uint64_t sizes[] = {3 * 4096 + 10, 5u << 20}; /* a heap block, a huge-page-aligned block */
    for (int i = 0; i < 2; i++) {
        void *a = NULL, *b = NULL;
        assert_int_equal(zt_host_tier_alloc(&plain, sizes[i], "plain", &a, &err), ZT_OK);
        expect_default(a);
        expect_default((char *)a + sizes[i] - 1);
        assert_int_equal(zt_host_tier_alloc(&placed, sizes[i], "placed", &b, &err), ZT_OK);
        expect_on_node(b, 0);
        expect_on_node((char *)b + sizes[i] - 1, 0);             /* the last page too */
        assert_int_equal(((unsigned char *)b)[sizes[i] - 1], 0); /* zeroed after placing */
        zt_host_tier_free(&plain, a, sizes[i]);
        zt_host_tier_free(&placed, b, sizes[i]);
    }
    assert_int_equal(zt_host_tier_node(&plain), -1);
    assert_int_equal(zt_host_tier_node(&placed), 0);
}

static void test_staging_pool_on_node(void **state)
{
    (void)state;
    zt_staging_pool *plain = NULL, *placed = NULL;
    zt_error err = {0};
    assert_int_equal(zt_staging_pool_create(3, 4 << 20, NULL, -1, &plain, &err), ZT_OK);
    assert_int_equal(zt_staging_pool_create(3, 4 << 20, NULL, 0, &placed, &err), ZT_OK);
    for (int i = 0; i < 3; i++) {
        char *a = zt_staging_acquire(plain), *b = zt_staging_acquire(placed);
        expect_default(a);
        expect_on_node(b, 0);
        expect_on_node(b + zt_staging_size(placed) - 1, 0);
    }
    zt_staging_pool_destroy(plain);
    zt_staging_pool_destroy(placed);
}

/* ---- the threads ---- */

typedef struct seen_ctx {
    atomic_int arrived;
    int threads;
    int mode[8], node[8];
} seen_ctx;

/* One item per thread, each waiting for all: every worker runs exactly one, and records the
 * policy its own allocations get. */
static void record_policy(void *arg, int64_t begin, int64_t end, int worker)
{
    seen_ctx *c = arg;
    (void)begin, (void)end;
    atomic_fetch_add(&c->arrived, 1);
    while (atomic_load(&c->arrived) < c->threads)
        ;
    int mode = -1;
    unsigned long mask[16] = {0};
    if (get_mempolicy(&mode, mask, sizeof mask * 8, NULL, 0) != 0)
        mode = -1;
    c->mode[worker] = mode;
    c->node[worker] = mask[0] == 1 ? 0 : mask[0] ? -2 : -1;
}

static void run_recording(zt_threadpool *pool, seen_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->threads = zt_threadpool_size(pool);
    zt_threadpool_run(pool, c->threads, 1, record_policy, c);
}

static void test_pool_bound_after_creation(void **state)
{
    (void)state;
    zt_threadpool *pool = NULL;
    zt_error err = {0};
    assert_int_equal(zt_threadpool_create(4, -1, &pool, &err), ZT_OK);
    seen_ctx c;
    run_recording(pool, &c);
    for (int w = 1; w < 4; w++)
        assert_int_equal(c.mode[w], MPOL_DEFAULT);
    assert_int_equal(zt_threadpool_bind(pool, numa_max_node() + 1, &err), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_threadpool_bind(pool, 0, &err), ZT_OK);
    run_recording(pool, &c);
    for (int w = 1; w < 4; w++) { /* the workers; the caller's thread is the caller's */
        assert_int_equal(c.mode[w], MPOL_PREFERRED);
        assert_int_equal(c.node[w], 0);
    }
    zt_threadpool_destroy(pool);
}

/* ---- threads started in a scope ---- */

static void *read_own_policy(void *arg)
{
    int *node = arg;
    *node = -3;
    int mode = -1;
    unsigned long mask[16] = {0};
    if (get_mempolicy(&mode, mask, sizeof mask * 8, NULL, 0) == 0)
        *node = mode == MPOL_DEFAULT ? -1 : mode == MPOL_PREFERRED && mask[0] == 1 ? 0 : -2;
    return NULL;
}

static int policy_of_new_thread(void)
{
    pthread_t t;
    int node = -3;
    assert_int_equal(pthread_create(&t, NULL, read_own_policy, &node), 0);
    pthread_join(t, NULL);
    return node;
}

/* The I/O engines' threads: started inside a scope on node 0 they prefer node 0; the caller
 * gets its own policy and CPUs back; a scope with no node changes nothing. */
static void test_threads_started_in_scope(void **state)
{
    (void)state;
    cpu_set_t before, after;
    assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
    assert_int_equal(policy_of_new_thread(), -1);
    zt_numa_scope scope;
    zt_numa_scope_enter(&scope, -1);
    assert_int_equal(policy_of_new_thread(), -1);
    zt_numa_scope_leave(&scope);
    zt_numa_scope_enter(&scope, 0);
    assert_int_equal(policy_of_new_thread(), 0);
    zt_numa_scope_leave(&scope);
    assert_int_equal(policy_of_new_thread(), -1);
    int mode = -1;
    assert_int_equal(get_mempolicy(&mode, NULL, 0, NULL, 0), 0);
    assert_int_equal(mode, MPOL_DEFAULT);
    assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
    assert_true(CPU_EQUAL(&before, &after));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_of_pci_address),
        cmocka_unit_test(test_missing_node_is_refused),
        cmocka_unit_test(test_host_tier_buffers_on_node),
        cmocka_unit_test(test_staging_pool_on_node),
        cmocka_unit_test(test_pool_bound_after_creation),
        cmocka_unit_test(test_threads_started_in_scope),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

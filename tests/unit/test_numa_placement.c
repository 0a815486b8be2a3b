/* SPDX-License-Identifier: MIT */
/* ztier.numa_node through the runtime, on what a one-node machine can show: with node 0 the
 * kernel reports MPOL_PREFERRED on node 0 (get_mempolicy, MPOL_F_ADDR) for every kind of host
 * buffer the device copies from or to - parameters' and optimizer state's host homes, the
 * gradient accumulators, the gradient staging buffer, the NVMe step's buffers, the NVMe
 * parameter staging pool, the gradient landing buffers - and for the optimizer pool's
 * workers; with the key unset (host backend: no GPU) the default policy, as before; a node
 * that does not exist is ZT_ERR_CONFIG at commit, naming it and the nodes there are. With the
 * cuda backend (the stand-in) and "auto", the node comes from the GPU's PCI address under a
 * fake sysfs tree ($ZT_TEST_SYSFS_ROOT), and -1 there leaves everything unplaced. */
#include "train.h"
#include "rt_fixture.h"
#include "runtime/runtime.h"

#include <numa.h>
#include <numaif.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};

static int setup(void **state)
{
    (void)state;
    if (numa_available() < 0)
        return -1;
    return rt_fixture_open("numa_placement");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

/* -1: the default policy; n: MPOL_PREFERRED on node n alone; -2: anything else. */
static int placement(void *addr, int flags)
{
    int mode = -1;
    unsigned long mask[16] = {0};
    assert_int_equal(get_mempolicy(&mode, mask, sizeof mask * 8, addr, flags), 0);
    if (mode == MPOL_DEFAULT)
        return -1;
    if (mode != MPOL_PREFERRED || __builtin_popcountl(mask[0]) != 1)
        return -2;
    return __builtin_ctzl(mask[0]);
}

static void expect(void *addr, const char *what, int node)
{
    int got = placement(addr, MPOL_F_ADDR);
    if (got != node)
        fail_msg("%s at %p: placement %d, expected %d", what, addr, got, node);
}

typedef struct workers {
    atomic_int arrived;
    int threads;
    int node[64];
} workers;

static void worker_policy(void *arg, int64_t begin, int64_t end, int worker)
{
    workers *w = arg;
    (void)begin, (void)end;
    atomic_fetch_add(&w->arrived, 1);
    while (atomic_load(&w->arrived) < w->threads) /* so that each thread takes one item */
        ;
    w->node[worker] = placement(NULL, 0);
}

enum { NVME = 1, TRAIN = 2 }; /* what expect_placed's runtime does */

/* Every buffer of a committed runtime, and its pool's workers, on `node`. With TRAIN it first
 * trains a step (a stream-ordered micro-step, for the landing buffers: the minimal model
 * computes on the host, so not with the cuda backend); with NVME the config puts parameters
 * and state on NVMe (else in host memory). */
static void expect_placed(const char *cfg, int node, int flags)
{
    minimal_model m;
    zt_runtime *rt = rt_fixture_mlp(NULL, cfg, &dims, 3, &m);
    void *stream = NULL;
    float loss;
    if (flags & TRAIN) {
        assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
        assert_int_equal(minimal_micro_step_on(rt, &m, stream, 0, 0, dims.batch, 0, &loss), ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    int nvme = flags & NVME;
    int homes = 0;
    for (int i = 0; i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        zt_home *h[] = {&L->param_home, &L->master, &L->exp_avg, &L->exp_avg_sq};
        const char *names[] = {"parameter home", "master", "exp_avg", "exp_avg_sq"};
        for (int k = 0; k < 4; k++)
            if (h[k]->kind == ZT_TIER_HOST && h[k]->ptr)
                expect(h[k]->ptr, names[k], node), homes++;
        expect(L->grad_acc, "gradient accumulator", node);
    }
    /* the config puts parameters and state in host memory, or on NVMe through staging */
    assert_true(nvme ? homes == 0 : homes >= 3 * rt->reg.n_layers);
    assert_true(nvme ? rt->opt.block && rt->tiers.param_staging
                     : !rt->opt.block && !rt->tiers.param_staging);
    expect(rt->opt.staging, "gradient staging buffer", node);
    if (rt->opt.block)
        expect(rt->opt.block, "NVMe step buffers", node);
    if (rt->tiers.param_staging) {
        void *base;
        size_t len;
        zt_staging_region(rt->tiers.param_staging, &base, &len);
        expect(base, "NVMe parameter staging", node);
        expect((char *)base + len - 1, "NVMe parameter staging's end", node);
    }
    if (flags & TRAIN)
        assert_true(rt->reduce.n_landing > 0);
    for (int k = 0; k < rt->reduce.n_landing; k++)
        expect(rt->reduce.landing[k], "gradient landing buffer", node);
    workers w = {.threads = zt_threadpool_size(rt->cpu.pool)};
    assert_int_equal(w.threads, 3);
    zt_threadpool_run(rt->cpu.pool, w.threads, 1, worker_policy, &w);
    for (int k = 1; k < w.threads; k++) /* worker 0 is this thread, the caller's */
        assert_int_equal(w.node[k], node);
    zt_runtime_destroy(rt);
}

static const char *config(const char *where, const char *ztier)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"%s\", "
             "\"nvme_path\": \"$SCRATCH\"}, \"offload_optimizer\": {\"device\": \"%s\", "
             "\"nvme_path\": \"$SCRATCH\"}, \"stage3_param_persistence_threshold\": 0}, "
             "\"aio\": {\"block_size\": 4096}, \"ztier\": {\"hbm_capacity\": \"16M\", "
             "\"optimizer_threads\": 3%s}}",
             where, where, ztier);
    return buf;
}

/* First: before any buffer of this process was placed (heap blocks keep their policy). */
static void test_unset_places_nothing(void **state)
{
    (void)state;
    expect_placed(config("cpu", ""), -1, TRAIN);
}

static void test_host_homes_on_node(void **state)
{
    (void)state;
    expect_placed(config("cpu", ", \"numa_node\": 0"), 0, TRAIN);
}

static void test_nvme_buffers_on_node(void **state)
{
    (void)state;
    expect_placed(config("nvme", ", \"numa_node\": 0"), 0, NVME | TRAIN);
}

static void test_missing_node_is_refused(void **state)
{
    (void)state;
    int missing = numa_max_node() < 3 ? 3 : numa_max_node() + 1;
    char extra[64];
    snprintf(extra, sizeof extra, ", \"numa_node\": %d", missing);
    minimal_model m;
    zt_runtime *rt = NULL;
    assert_int_equal(rt_fixture_try_mlp(NULL, config("cpu", extra), &dims, 3, &m, &rt),
                     ZT_ERR_CONFIG);
    char want[96];
    snprintf(want, sizeof want, "ztier.numa_node = %d: this process has no NUMA node %d", missing,
             missing);
    print_message("%s\n", zt_last_error(rt));
    assert_non_null(strstr(zt_last_error(rt), want));
    assert_non_null(strstr(zt_last_error(rt), "the nodes it may use: 0"));
    zt_runtime_destroy(rt);
    /* out of the key's range altogether: refused when read */
    assert_int_equal(zt_runtime_create(NULL, "{\"ztier\": {\"numa_node\": -2}}", &rt),
                     ZT_ERR_CONFIG);
    assert_non_null(strstr(zt_last_error(rt), "ztier.numa_node"));
    zt_runtime_destroy(rt);
}

#ifdef ZT_TEST_CUDASIM
/* The stand-in's GPU 0 says it is at PCI 0000:1A:00.0; sysfs (a fake tree) gives its node. */
static void gpu_on_node(const char *numa_node, int expected)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/sys/bus/pci/devices/0000:1a:00.0' && echo %s > "
             "'%s/sys/bus/pci/devices/0000:1a:00.0/numa_node'",
             rt_fixture_dir(), numa_node, rt_fixture_dir());
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/sys", rt_fixture_dir());
    setenv("ZT_TEST_SYSFS_ROOT", cmd, 1);
    expect_placed(config("cpu", ", \"device_backend\": \"cuda\", \"numa_node\": \"auto\""),
                  expected, 0);
    unsetenv("ZT_TEST_SYSFS_ROOT");
}

static void test_gpu_node_from_sysfs(void **state)
{
    (void)state;
    gpu_on_node("0", 0);
}

static void test_gpu_without_node(void **state)
{
    (void)state;
    gpu_on_node("-1", -1);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unset_places_nothing),
#ifdef ZT_TEST_CUDASIM
        cmocka_unit_test(test_gpu_without_node),
#endif
        cmocka_unit_test(test_host_homes_on_node),      cmocka_unit_test(test_nvme_buffers_on_node),
        cmocka_unit_test(test_missing_node_is_refused),
#ifdef ZT_TEST_CUDASIM
        cmocka_unit_test(test_gpu_node_from_sysfs),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: MIT */
/* The thread budget, seen from the kernel: a monitor thread samples every thread's state in
 * /proc/self/task while a training loop runs, per phase.
 *  - Idle (between calls, the work drained): no ztier thread is runnable; stream workers,
 *    pool workers, I/O threads and the comm thread sleep instead of spinning.
 *  - zt_step with the optimizer state in host memory: at most ztier.optimizer_threads
 *    runnable (the caller counts as one), plus one stream worker that starts the next step's
 *    copies.
 * Printed, not asserted: the fetch/release phase (the host backend's stream workers copy
 * as a GPU's copy engines would, beside the caller) and the NVMe step (its I/O threads copy
 * through the page cache on this machine's file systems). */
#include "rt_fixture.h"
#include "ztier.h"

#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("thread-budget");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

enum { IDLE, LAYERS, STEP, PHASES };
static const char *const phase_names[PHASES] = {"idle", "fetch/release", "zt_step"};

typedef struct monitor {
    pthread_t thread;
    pid_t self, caller;
    atomic_int stop, phase;
    int max_runnable[PHASES], samples[PHASES], threads_seen;
} monitor;

/* Runnable threads of this process now, the monitor (and, idle, the caller) left out. */
static int runnable(pid_t self, pid_t skip, int *threads)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0, all = 0;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == self || atoi(e->d_name) == skip)
            continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *rp = strrchr(buf, ')'); /* the state follows the command name */
        all++;
        if (rp && rp[1] == ' ' && rp[2] == 'R')
            n++;
    }
    if (d)
        closedir(d);
    *threads = all;
    return n;
}

static void *watch(void *arg)
{
    monitor *m = arg;
    m->self = (pid_t)syscall(SYS_gettid);
    while (!atomic_load(&m->stop)) {
        int ph = atomic_load(&m->phase), all;
        int r = runnable(m->self, ph == IDLE ? m->caller : 0, &all);
        if (ph == atomic_load(&m->phase)) { /* the phase did not change while sampling */
            m->max_runnable[ph] = r > m->max_runnable[ph] ? r : m->max_runnable[ph];
            m->samples[ph]++;
        }
        m->threads_seen = all > m->threads_seen ? all : m->threads_seen;
        usleep(200);
    }
    return NULL;
}

/* Two layers "l0", "l1" of one parameter of `numel` elements each. */
typedef struct two_layers {
    int64_t numel;
    int layer[2], param; /* the ids; param: l1's */
} two_layers;

static zt_status register_two(zt_runtime *rt, void *model)
{
    two_layers *t = model;
    zt_status st = ZT_OK;
    for (int l = 0; l < 2 && st == ZT_OK; l++) {
        char name[16];
        snprintf(name, sizeof name, "l%d", l);
        st = zt_layer_add(rt, name, &t->layer[l]);
        if (st == ZT_OK)
            st = zt_param_add(rt, t->layer[l], name, &t->numel, 1, NULL, &t->param);
    }
    return st;
}

static void check_budget(const char *optim, int threads)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
             " \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"$SCRATCH\"},"
             " \"stage3_param_persistence_threshold\": 0}, \"gradient_clipping\": 1.0,"
             " \"aio\": {\"block_size\": 4096},"
             " \"ztier\": {\"hbm_capacity\": \"256M\", \"optimizer_threads\": %d}}",
             optim, threads);
    two_layers model = {8 << 20, {0, 0}, 0};
    zt_runtime *rt = rt_fixture_make(NULL, cfg, register_two, &model);
    const int *layer = model.layer, p = model.param;
    const int64_t shape[1] = {model.numel};
    float *w = malloc(sizeof(float) * (size_t)shape[0]);
    monitor m = {0};
    atomic_init(&m.stop, 0);
    atomic_init(&m.phase, LAYERS);
    m.caller = (pid_t)syscall(SYS_gettid);
    pthread_create(&m.thread, NULL, watch, &m);
    for (int s = 0; s < 3; s++) {
        zt_layer_view v;
        atomic_store(&m.phase, LAYERS);
        for (int l = 0; l < 2; l++) {
            assert_int_equal(zt_fetch(rt, layer[l], ZT_FORWARD, &v), ZT_OK);
            assert_int_equal(zt_release(rt, layer[l], ZT_FORWARD), ZT_OK);
        }
        for (int l = 1; l >= 0; l--) {
            assert_int_equal(zt_fetch(rt, layer[l], ZT_BACKWARD, &v), ZT_OK);
            float *g = v.params[0].grad;
            for (int64_t i = 0; i < shape[0]; i += 97)
                g[i] = 1e-3f;
            assert_int_equal(zt_release(rt, layer[l], ZT_BACKWARD), ZT_OK);
        }
        atomic_store(&m.phase, STEP);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
        /* a call that waits for the step's background work (the NVMe write-backs) */
        assert_int_equal(zt_param_read(rt, p, w, shape[0]), ZT_OK);
        /* copies of the next step's first layers (32 MB each) finish; 30 ms was too short
         * under ASan on a loaded 2-core machine (one copy thread still runnable) */
        usleep(100000);
        atomic_store(&m.phase, IDLE);
        usleep(60000);
    }
    atomic_store(&m.stop, 1);
    pthread_join(m.thread, NULL);
    for (int ph = 0; ph < PHASES; ph++)
        print_message("optimizer %s, %d threads, %-13s: at most %d runnable (%d samples)\n", optim,
                      threads, phase_names[ph], m.max_runnable[ph], m.samples[ph]);
    print_message("  %d threads in the process at most\n", m.threads_seen);
    assert_true(m.samples[IDLE] > 10 && m.samples[STEP] > 3);
    assert_int_equal(m.max_runnable[IDLE], 0); /* nothing spins */
    if (!strcmp(optim, "cpu"))
        assert_true(m.max_runnable[STEP] <= threads + 1);
    free(w);
    zt_runtime_destroy(rt);
}

static void test_host_optimizer_stays_in_budget(void **state)
{
    (void)state;
    check_budget("cpu", 2);
    check_budget("cpu", 1);
}

/* The NVMe step's I/O threads wait in the kernel for their transfers. */
static void test_nvme_optimizer_stays_in_budget(void **state)
{
    (void)state;
    check_budget("nvme", 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_optimizer_stays_in_budget),
        cmocka_unit_test(test_nvme_optimizer_stays_in_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

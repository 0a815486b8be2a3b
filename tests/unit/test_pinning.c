/* SPDX-License-Identifier: MIT */
/* Pinned host tiers: the host memory the device copies from or to (parameters' host homes,
 * the gradient staging buffer, NVMe staging buffers, landing buffers) is pinned through the
 * device backend — page locking with the host backend, seen by the kernel as VmLck — within
 * ztier.pinned_limit. Over the limit it stays pageable, counted and logged once, and
 * training is unchanged. Destroy unpins everything. */
#include "train.h"
#include "rt_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
#if defined(__SANITIZE_ADDRESS__)
static const int sanitized = 1;
#else
static const int sanitized = 0;
#endif

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("pinning");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

/* Locked memory of this process, from the kernel (/proc/self/status VmLck, in bytes). */
static long long vm_locked(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmLck: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Whether this process may lock what the tests pin (root, or a large enough limit). */
static int can_lock(void)
{
    struct rlimit r;
    return geteuid() == 0 || (getrlimit(RLIMIT_MEMLOCK, &r) == 0 && r.rlim_cur >= (64u << 20));
}

typedef struct logged {
    int pin_warnings;
    char last[512];
} logged;

static void on_log(void *user, int level, const char *msg)
{
    logged *l = user;
    if (strstr(msg, "stay pageable")) {
        l->pin_warnings++;
        snprintf(l->last, sizeof l->last, "%s", msg);
    }
    (void)level;
}

static const char *config(const char *param, const char *limit, int pin_memory)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
             "\"$SCRATCH\", \"pin_memory\": %s}, \"offload_optimizer\": {\"device\": \"cpu\"},"
             " \"stage3_param_persistence_threshold\": 0}, \"aio\": {\"block_size\": 4096},"
             " \"ztier\": {\"hbm_capacity\": \"16M\", \"pinned_limit\": \"%s\"}}",
             param, pin_memory ? "true" : "false", limit);
    return buf;
}

typedef struct run {
    zt_stats after_commit, after_steps;
    long long locked_delta; /* VmLck after commit minus before create */
    long long locked_left;  /* VmLck after destroy minus before create */
    float w[16 * 48];
    logged log;
} run;

/* Commit, three steps (one of them stream-ordered, for the landing buffers), destroy. */
static void train(const char *cfg, run *r)
{
    memset(r, 0, sizeof *r);
    long long before = vm_locked();
    zt_options opts = ZT_OPTIONS_INIT;
    opts.log_fn = on_log;
    opts.log_level = 2; /* info: the host backend reports refusals there */
    opts.log_user = &r->log;
    minimal_model m;
    zt_runtime *rt = rt_fixture_mlp(&opts, cfg, &dims, 3, &m);
    r->after_commit = (zt_stats)ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &r->after_commit), ZT_OK);
    r->locked_delta = vm_locked() - before;
    void *stream = NULL;
    assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    for (int s = 0; s < 3; s++) {
        float loss;
        assert_int_equal(s == 1 ? minimal_micro_step_on(rt, &m, stream, s, 0, dims.batch, 0, &loss)
                                : minimal_micro_step(rt, &m, s, 0, dims.batch, &loss),
                         ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    r->after_steps = (zt_stats)ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &r->after_steps), ZT_OK);
    assert_int_equal(zt_param_read(rt, m.weight[0], r->w, 16 * 48), ZT_OK);
    zt_runtime_destroy(rt);
    r->locked_left = vm_locked() - before;
}

static void check_placement(const char *param)
{
    if (!can_lock())
        skip(); /* the refusal path is covered by the limit test */
    run full, none, half;
    train(config(param, "1G", 1), &full);
    const zt_stats *s = &full.after_commit;
    print_message("params %s: %llu bytes pinned at commit, %llu after steps; VmLck +%lld\n", param,
                  (unsigned long long)s->host_pinned_bytes,
                  (unsigned long long)full.after_steps.host_pinned_bytes, full.locked_delta);
    assert_true(s->host_pinned_bytes > 0);
    assert_int_equal(s->pinned_refused_bytes, 0);
    assert_int_equal(full.log.pin_warnings, 0);
    /* the kernel sees the pages locked, and unlocked again after destroy (AddressSanitizer
     * turns mlock into a no-op: there the kernel sees nothing) */
    if (!sanitized) {
        assert_true(full.locked_delta >= (long long)s->host_pinned_bytes);
        assert_int_equal(full.locked_left, 0);
    }
    /* the stream-ordered micro-step pinned its landing buffers too */
    assert_true(full.after_steps.host_pinned_bytes > s->host_pinned_bytes);
    assert_int_equal(full.after_steps.host_pinned_peak_bytes, full.after_steps.host_pinned_bytes);

    /* nothing may be pinned: the same bytes are refused, logged once, results unchanged */
    train(config(param, "0", 1), &none);
    assert_int_equal(none.after_steps.host_pinned_bytes, 0);
    assert_int_equal(none.after_steps.pinned_refused_bytes, full.after_steps.host_pinned_bytes);
    assert_int_equal(none.log.pin_warnings, 1);
    assert_non_null(strstr(none.log.last, "ztier.pinned_limit"));
    assert_memory_equal(none.w, full.w, sizeof full.w);

    /* a limit of half of it: what fits is pinned, the rest refused */
    char limit[32];
    snprintf(limit, sizeof limit, "%llu",
             (unsigned long long)full.after_steps.host_pinned_bytes / 2);
    train(config(param, limit, 1), &half);
    const zt_stats *h = &half.after_steps;
    assert_true(h->host_pinned_bytes > 0);
    assert_true(h->host_pinned_bytes <= full.after_steps.host_pinned_bytes / 2);
    assert_int_equal(h->host_pinned_bytes + h->pinned_refused_bytes,
                     full.after_steps.host_pinned_bytes);
    assert_int_equal(half.log.pin_warnings, 1);
    assert_memory_equal(half.w, full.w, sizeof full.w);
    if (!sanitized)
        assert_int_equal(half.locked_left, 0);
}

static void test_host_parameters_are_pinned(void **state)
{
    (void)state;
    check_placement("cpu");
}

static void test_nvme_staging_is_pinned(void **state)
{
    (void)state;
    check_placement("nvme");
}

/* pin_memory: false leaves the parameters' homes pageable; only the gradient buffers are
 * pinned. */
static void test_pin_memory_false(void **state)
{
    (void)state;
    if (!can_lock())
        skip();
    run on, off;
    train(config("cpu", "1G", 1), &on);
    train(config("cpu", "1G", 0), &off);
    assert_true(off.after_commit.host_pinned_bytes > 0); /* the gradient staging buffer */
    assert_true(off.after_commit.host_pinned_bytes < on.after_commit.host_pinned_bytes);
    assert_int_equal(off.after_commit.pinned_refused_bytes, 0);
    assert_memory_equal(on.w, off.w, sizeof on.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_parameters_are_pinned),
        cmocka_unit_test(test_nvme_staging_is_pinned),
        cmocka_unit_test(test_pin_memory_false),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

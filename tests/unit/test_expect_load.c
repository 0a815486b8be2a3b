/* SPDX-License-Identifier: MIT */
/* zt_runtime_expect_load: a commit followed by a load initialises nothing (the
 * initialisers are never called), every call that reads the values before the load is
 * refused with a message naming the missing load (also after a failed load), and the load
 * then restores exactly what a runtime committed the usual way saved: master, Adam m and v.
 * With master, m and v in host memory the load puts the file's pieces straight into them: its
 * peak memory is the values' own, not a second copy of the file (a damaged file is refused
 * all the same, the promise left open). */
#include "rt_fixture.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

enum { ROWS = 24, COLS = 40, NUMEL = ROWS * COLS };

static int init_calls; /* calls of fill below: commit's initialisation */

/* An initialiser whose values are known independently: element i of w is i * 0.25 - 3. */
static zt_status fill(void *user, const char *name, int64_t first, int64_t count, float *dst)
{
    (void)user, (void)name;
    init_calls++;
    for (int64_t i = 0; i < count; i++)
        dst[i] = (float)(first + i) * 0.25f - 3.0f;
    return ZT_OK;
}

typedef struct model {
    int w, b;
} model;

static zt_status reg(zt_runtime *rt, void *user)
{
    model *m = user;
    int l0, l1;
    int64_t shape[2] = {ROWS, COLS}, bias = COLS;
    zt_init cb = {ZT_INIT_CALLBACK, 0, 0, 7, fill, NULL};
    zt_init c = {ZT_INIT_CONSTANT, 0.5f, 0, 7, NULL, NULL};
    zt_status st = zt_layer_add(rt, "l0", &l0);
    if (st == ZT_OK)
        st = zt_param_add(rt, l0, "w", shape, 2, &cb, &m->w);
    if (st == ZT_OK)
        st = zt_layer_add(rt, "l1", &l1);
    return st == ZT_OK ? zt_param_add(rt, l1, "b", &bias, 1, &c, &m->b) : st;
}

/* The optimizer state on NVMe: commit's initialisation writes there too. */
static const char *config =
    "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"nvme\", "
    "\"nvme_path\": \"$SCRATCH\"}}, \"aio\": {\"block_size\": 4096}, \"optimizer\": {\"type\": "
    "\"AdamW\", \"params\": {\"lr\": 0.001}}, \"ztier\": {\"log_effective_settings\": false}}";

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("expect-load");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

static void expect_refused(zt_runtime *rt, zt_status st)
{
    assert_int_equal(st, ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "before zt_checkpoint_load"));
    assert_non_null(strstr(zt_last_error(rt), "zt_runtime_expect_load"));
}

/* A runtime committed the usual way whose checkpoint is saved at once into ck (the fixture's
 * folder / name). */
static zt_runtime *saved_at(char *ck, size_t len, const char *name, const char *cfg,
                            rt_fixture_register_fn reg_fn, void *user)
{
    snprintf(ck, len, "%s/%s", rt_fixture_dir(), name);
    zt_runtime *rt = rt_fixture_make(NULL, cfg, reg_fn, user);
    assert_int_equal(zt_checkpoint_save(rt, ck), ZT_OK);
    return rt;
}

/* A runtime told that a load follows (zt_runtime_expect_load), then committed. */
static zt_runtime *committed_for_load(const char *cfg, rt_fixture_register_fn reg_fn, void *user)
{
    zt_runtime *rt = rt_fixture_create(NULL, cfg);
    rt_fixture_register(rt, reg_fn, user);
    assert_int_equal(zt_runtime_expect_load(rt), ZT_OK);
    rt_fixture_commit(rt);
    return rt;
}

static void test_skips_init_then_load_restores(void **state)
{
    (void)state;
    char ck[600];
    snprintf(ck, sizeof ck, "%s/ck", rt_fixture_dir());
    model a, b;
    init_calls = 0;
    zt_runtime *ra = rt_fixture_make(NULL, config, reg, &a); /* the usual commit */
    assert_true(init_calls > 0);
    assert_int_equal(zt_checkpoint_save(ra, ck), ZT_OK);
    zt_runtime_destroy(ra); /* its NVMe folder is the next one's */

    init_calls = 0;
    zt_runtime *rb = committed_for_load(config, reg, &b);
    assert_int_equal(init_calls, 0); /* nothing initialised */

    static float got[NUMEL];
    zt_layer_view view;
    expect_refused(rb, zt_fetch(rb, 0, ZT_FORWARD, &view));
    expect_refused(rb, zt_param_read(rb, b.w, got, NUMEL));
    expect_refused(rb, zt_param_read_state(rb, b.w, ZT_STATE_ADAM_M, got, NUMEL));
    expect_refused(rb, zt_param_write(rb, b.w, got, NUMEL));
    expect_refused(rb, zt_step(rb, NULL, NULL));
    expect_refused(rb, zt_checkpoint_save(rb, ck));
    /* a failed load leaves the promise open */
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none", rt_fixture_dir());
    assert_int_not_equal(zt_checkpoint_load(rb, missing), ZT_OK);
    expect_refused(rb, zt_fetch(rb, 0, ZT_FORWARD, &view));

    assert_int_equal(zt_checkpoint_load(rb, ck), ZT_OK);
    assert_int_equal(init_calls, 0);
    assert_int_equal(zt_param_read(rb, b.w, got, NUMEL), ZT_OK);
    for (int i = 0; i < NUMEL; i++)
        assert_true(got[i] == (float)i * 0.25f - 3.0f);
    float bias[COLS];
    assert_int_equal(zt_param_read(rb, b.b, bias, COLS), ZT_OK);
    for (int i = 0; i < COLS; i++)
        assert_true(bias[i] == 0.5f);
    for (int s = ZT_STATE_ADAM_M; s <= ZT_STATE_ADAM_V; s++) {
        memset(got, 0xff, sizeof got); /* NaN: a state not restored shows */
        assert_int_equal(zt_param_read_state(rb, b.w, (zt_param_state)s, got, NUMEL), ZT_OK);
        for (int i = 0; i < NUMEL; i++)
            assert_true(got[i] == 0.0f);
    }
    assert_int_equal(zt_fetch(rb, 0, ZT_FORWARD, &view), ZT_OK);
    assert_int_equal(zt_release(rb, 0, ZT_FORWARD), ZT_OK);
    zt_runtime_destroy(rb);
}

static void test_after_commit_is_usage(void **state)
{
    (void)state;
    model m;
    zt_runtime *rt = rt_fixture_make(NULL, config, reg, &m);
    assert_int_equal(zt_runtime_expect_load(rt), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "after zt_runtime_commit"));
    static float got[NUMEL]; /* and the committed values stay usable */
    assert_int_equal(zt_param_read(rt, m.w, got, NUMEL), ZT_OK);
    assert_true(got[7] == 7 * 0.25f - 3.0f);
    assert_int_equal(zt_runtime_expect_load(NULL), ZT_ERR_ARGUMENT);
    zt_runtime_destroy(rt);
}

/* One layer of BIG floats, its optimizer state in host memory. */
enum { BIG = 8 << 20 };

static zt_status reg_big(zt_runtime *rt, void *user)
{
    int *w = user, l;
    int64_t n = BIG;
    zt_init cb = {ZT_INIT_CALLBACK, 0, 0, 7, fill, NULL};
    zt_status st = zt_layer_add(rt, "big", &l);
    return st == ZT_OK ? zt_param_add(rt, l, "w", &n, 1, &cb, w) : st;
}

static const char *host_config =
    "{\"zero_optimization\": {\"stage\": 3}, \"optimizer\": {\"type\": \"AdamW\", "
    "\"params\": {\"lr\": 0.001}}, \"ztier\": {\"log_effective_settings\": false}}";

/* The process's peak resident memory in bytes since reset_peak (Linux: VmHWM; the resident
 * memory at the reset, right after it). */
static uint64_t peak_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb * 1024;
}

static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    assert_non_null(f);
    fputs("5", f);
    fclose(f);
}

/* The checkpoint's rank file under ck (one rank). */
static void rank_file(const char *ck, char *out, size_t len)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls %s/$(head -1 %s/latest)/rank-*", ck, ck);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, (int)len, p));
    out[strcspn(out, "\n")] = 0;
    pclose(p);
}

/* reg_big's parameter w as saved before any step: the initialiser's values bit for bit, Adam's
 * m and v exactly zero. */
static void expect_big_saved(zt_runtime *rt, int w)
{
    float *got = malloc(sizeof(float) * BIG);
    assert_non_null(got);
    assert_int_equal(zt_param_read(rt, w, got, BIG), ZT_OK);
    for (int i = 0; i < BIG; i++)
        assert_true(got[i] == (float)i * 0.25f - 3.0f);
    for (int s = ZT_STATE_ADAM_M; s <= ZT_STATE_ADAM_V; s++) {
        memset(got, 0xff, sizeof(float) * BIG);
        assert_int_equal(zt_param_read_state(rt, w, (zt_param_state)s, got, BIG), ZT_OK);
        for (int i = 0; i < BIG; i++)
            assert_true(got[i] == 0.0f);
    }
    free(got);
}

static void test_host_load_needs_no_second_copy(void **state)
{
    (void)state;
    char ck[600], bad[700], cmd[2400], file[1200];
    snprintf(ck, sizeof ck, "%s/big", rt_fixture_dir());
    snprintf(bad, sizeof bad, "%s/bad", rt_fixture_dir());
    int a, b;
    zt_runtime *ra = rt_fixture_make(NULL, host_config, reg_big, &a);
    assert_int_equal(zt_checkpoint_save(ra, ck), ZT_OK);
    zt_runtime_destroy(ra);
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s %s", bad, ck, bad);
    assert_int_equal(system(cmd), 0);
    rank_file(bad, file, sizeof file); /* a byte of the master's middle flipped */
    FILE *f = fopen(file, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 64 + 4 * (BIG / 2), SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, -1, SEEK_CUR), 0);
    fputc(c ^ 0x5a, f);
    fclose(f);

    zt_runtime *rb = committed_for_load(host_config, reg_big, &b);
    assert_int_equal(zt_checkpoint_load(rb, bad), ZT_ERR_CORRUPT);
    assert_non_null(strstr(zt_last_error(rb), "is damaged"));
    zt_layer_view view;
    expect_refused(rb, zt_fetch(rb, 0, ZT_FORWARD, &view));
    rank_file(ck, file, sizeof file);
    struct stat sb;
    assert_int_equal(stat(file, &sb), 0);
    reset_peak(); /* the peak from here on: the resident memory now */
    uint64_t before = peak_bytes();
    assert_int_equal(zt_checkpoint_load(rb, ck), ZT_OK);
    uint64_t grew = peak_bytes() > before ? peak_bytes() - before : 0;
#if !defined(__SANITIZE_ADDRESS__) && !defined(ZT_TEST_SANITIZED)
    /* the homes already hold the refused load's bytes: the good one needs only the reads'
     * buffers (4 x 8 MiB), where a second copy of the file (an image) would be the file's */
    printf("the load's peak memory grew %llu bytes, the file is %lld\n", (unsigned long long)grew,
           (long long)sb.st_size);
    assert_true(grew < (uint64_t)sb.st_size / 2);
#else
    (void)grew;
#endif
    expect_big_saved(rb, b);
    zt_runtime_destroy(rb);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(ZT_TEST_SANITIZED)
/* The pages of [p, p + bytes) the process has in memory (mincore: an anonymous page is
 * resident once it was first written). Not under a sanitizer, whose allocator may hand back
 * memory it had before, already resident. */
static size_t resident_pages(const void *p, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p / page * page, hi = ((uintptr_t)p + bytes + page - 1) / page * page;
    size_t n = (hi - lo) / page, in = 0;
    unsigned char *vec = malloc(n);
    assert_non_null(vec);
    assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
    for (size_t i = 0; i < n; i++)
        in += vec[i] & 1;
    free(vec);
    return in;
}
#endif

/* After zt_runtime_expect_load, commit leaves the homes the load fills (master, m, v in host
 * memory) untouched: no page of them is resident before the load (main zeroed every byte,
 * the pages' first touch, which the load then repeated). Neither commit nor the load touch
 * the gradient sums, which the first backward overwrites (test_stale_sums_never_count). The
 * load then fills every element: the values are the saved ones bit for bit, m and v exactly
 * zero (a page the load missed would show as the 0xff bytes written into it below). */
static void test_commit_leaves_the_loaded_homes_untouched(void **state)
{
    (void)state;
    char ck[600];
    int a, b;
    zt_runtime *ra = saved_at(ck, sizeof ck, "untouched", host_config, reg_big, &a);
    zt_runtime_destroy(ra);

    zt_runtime *rb = committed_for_load(host_config, reg_big, &b);
    zt_layer *L = &rb->reg.layers[0];
    size_t bytes = (size_t)L->shard_numel * sizeof(float);
    const zt_home *homes[3] = {&L->master, &L->exp_avg, &L->exp_avg_sq};
    for (int s = 0; s < 3; s++) {
        assert_int_equal(homes[s]->kind, ZT_TIER_HOST);
#if !defined(__SANITIZE_ADDRESS__) && !defined(ZT_TEST_SANITIZED)
        /* (a sanitizer's allocator may hand back memory it had before, already resident) */
        assert_int_equal(resident_pages(homes[s]->ptr, bytes), 0);
#endif
    }
#if !defined(__SANITIZE_ADDRESS__) && !defined(ZT_TEST_SANITIZED)
    assert_int_equal(resident_pages(L->grad_acc, bytes), 0);
#endif
    /* a page the load did not write would keep these bytes */
    for (int s = 0; s < 3; s++)
        memset(homes[s]->ptr, 0xff, bytes);

    assert_int_equal(zt_checkpoint_load(rb, ck), ZT_OK);
#if !defined(__SANITIZE_ADDRESS__) && !defined(ZT_TEST_SANITIZED)
    assert_int_equal(resident_pages(L->grad_acc, bytes), 0); /* the load did not zero them */
#endif
    expect_big_saved(rb, b);
    zt_runtime_destroy(rb);
}

/* One step of reg's model where only l0 has a backward, its gradient g[i] = (i % 7 - 3) / 8. */
static void step_l0_only(zt_runtime *rt)
{
    zt_layer_view v;
    assert_int_equal(zt_fetch(rt, 0, ZT_BACKWARD, &v), ZT_OK);
    float *g = v.params[0].grad;
    for (int i = 0; i < NUMEL; i++)
        g[i] += (float)(i % 7 - 3) / 8.0f;
    assert_int_equal(zt_release(rt, 0, ZT_BACKWARD), ZT_OK);
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
}

/* The gradient sums are never zeroed at commit or load: whatever they hold, the step after a
 * load must see l0's gradient alone and l1's as zero. The reference runtime committed the
 * usual way and loaded the same checkpoint; in the other every byte of both layers' sums is
 * NaN (0xff) before the step. Parameters, m and v must agree bit for bit. */
static void test_stale_sums_never_count(void **state)
{
    (void)state;
    char ck[600];
    model a, b;
    zt_runtime *ra = saved_at(ck, sizeof ck, "stale", host_config, reg, &a);
    assert_int_equal(zt_checkpoint_load(ra, ck), ZT_OK);
    step_l0_only(ra);

    zt_runtime *rb = committed_for_load(host_config, reg, &b);
    assert_int_equal(zt_checkpoint_load(rb, ck), ZT_OK);
    for (int i = 0; i < rb->reg.n_layers; i++) {
        zt_layer *L = &rb->reg.layers[i];
        memset(L->grad_acc, 0xff, (size_t)L->shard_numel * zt_dtype_size(rb->reg.acc_dtype));
    }
    step_l0_only(rb);

    static float x[NUMEL], y[NUMEL];
    int ids[2][2] = {{a.w, b.w}, {a.b, b.b}}, n[2] = {NUMEL, COLS};
    for (int p = 0; p < 2; p++) {
        assert_int_equal(zt_param_read(ra, ids[p][0], x, n[p]), ZT_OK);
        assert_int_equal(zt_param_read(rb, ids[p][1], y, n[p]), ZT_OK);
        assert_memory_equal(x, y, sizeof(float) * (size_t)n[p]);
        for (int s = ZT_STATE_ADAM_M; s <= ZT_STATE_ADAM_V; s++) {
            assert_int_equal(zt_param_read_state(ra, ids[p][0], (zt_param_state)s, x, n[p]), ZT_OK);
            assert_int_equal(zt_param_read_state(rb, ids[p][1], (zt_param_state)s, y, n[p]), ZT_OK);
            assert_memory_equal(x, y, sizeof(float) * (size_t)n[p]);
        }
    }
    /* and l0 did move: the step was not a no-op in both */
    assert_int_equal(zt_param_read(rb, b.w, y, NUMEL), ZT_OK);
    assert_true(y[0] != -3.0f); /* fill's value at element 0 */
    zt_runtime_destroy(ra);
    zt_runtime_destroy(rb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skips_init_then_load_restores),
        cmocka_unit_test(test_after_commit_is_usage),
        cmocka_unit_test(test_host_load_needs_no_second_copy),
        cmocka_unit_test(test_commit_leaves_the_loaded_homes_untouched),
        cmocka_unit_test(test_stale_sums_never_count),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

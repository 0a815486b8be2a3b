/* SPDX-License-Identifier: MIT */
/* Misuse of the public API returns an argument/usage status with a message naming the
 * problem, never a crash, and the runtime stays usable afterwards. */
#include "ztier.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static const char *small_config = "{\"ztier\": {\"hbm_capacity\": \"16M\"}}";

/* A committed runtime with one layer "l0" holding "w" [4, 8]. */
typedef struct fixture {
    zt_runtime *rt;
    int layer, param;
} fixture;

static int setup_registered(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    assert_int_equal(zt_runtime_create(NULL, small_config, &f.rt), ZT_OK);
    assert_int_equal(zt_layer_add(f.rt, "l0", &f.layer), ZT_OK);
    int64_t shape[2] = {4, 8};
    assert_int_equal(zt_param_add(f.rt, f.layer, "w", shape, 2, NULL, &f.param), ZT_OK);
    *state = &f;
    return 0;
}

static int setup_committed(void **state)
{
    setup_registered(state);
    fixture *f = *state;
    assert_int_equal(zt_runtime_commit(f->rt), ZT_OK);
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    zt_runtime_destroy(f->rt);
    return 0;
}

#define EXPECT(call, status, fragment)                             \
    do {                                                           \
        assert_int_equal((call), (status));                        \
        assert_non_null(strstr(zt_last_error(f->rt), (fragment))); \
    } while (0)

static void test_create_rejects_null_out(void **state)
{
    (void)state;
    assert_int_equal(zt_runtime_create(NULL, NULL, NULL), ZT_ERR_ARGUMENT);
}

static void test_create_rejects_uninitialised_options(void **state)
{
    (void)state;
    zt_options opts;
    memset(&opts, 0, sizeof opts);
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(&opts, NULL, &rt), ZT_ERR_ARGUMENT);
    assert_non_null(rt); /* still reports why */
    assert_non_null(strstr(zt_last_error(rt), "ZT_OPTIONS_INIT"));
    int id;
    assert_int_equal(zt_layer_add(rt, "x", &id), ZT_ERR_USAGE); /* failed handle */
    zt_runtime_destroy(rt);
}

static void test_create_reports_bad_config_on_handle(void **state)
{
    (void)state;
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(NULL, "{\"zero_optimization\": {\"stage\": \"x\"}}", &rt),
                     ZT_ERR_CONFIG);
    assert_non_null(strstr(zt_last_error(rt), "zero_optimization.stage"));
    zt_runtime_destroy(rt);
}

static void test_null_handle_and_destroy_null(void **state)
{
    (void)state;
    int id;
    assert_int_equal(zt_layer_add(NULL, "x", &id), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_step(NULL, NULL, NULL), ZT_ERR_ARGUMENT);
    assert_non_null(zt_last_error(NULL));
    assert_int_equal(zt_last_status(NULL), ZT_ERR_ARGUMENT);
    int64_t v;
    assert_int_equal(zt_checkpoint_meta_set(NULL, "k", 1), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_checkpoint_meta_get(NULL, "k", &v), ZT_ERR_ARGUMENT);
    zt_runtime_destroy(NULL);
}

static void test_layer_add_bad_arguments(void **state)
{
    fixture *f = *state;
    int id;
    EXPECT(zt_layer_add(f->rt, NULL, &id), ZT_ERR_ARGUMENT, "name is NULL");
    EXPECT(zt_layer_add(f->rt, "", &id), ZT_ERR_ARGUMENT, "empty");
    EXPECT(zt_layer_add(f->rt, "l1", NULL), ZT_ERR_ARGUMENT, "layer_id is NULL");
    EXPECT(zt_layer_add(f->rt, "l0", &id), ZT_ERR_ARGUMENT, "already exists");
}

static void test_param_add_unknown_layer(void **state)
{
    fixture *f = *state;
    int64_t shape[1] = {3};
    int id;
    EXPECT(zt_param_add(f->rt, 7, "p", shape, 1, NULL, &id), ZT_ERR_ARGUMENT, "unknown layer id 7");
    EXPECT(zt_param_add(f->rt, -1, "p", shape, 1, NULL, &id), ZT_ERR_ARGUMENT,
           "unknown layer id -1");
}

static void test_param_add_bad_shapes(void **state)
{
    fixture *f = *state;
    int id;
    int64_t zero[2] = {4, 0}, neg[1] = {-3}, huge[3] = {INT64_C(1) << 30, INT64_C(1) << 30, 16};
    EXPECT(zt_param_add(f->rt, f->layer, "p", NULL, 1, NULL, &id), ZT_ERR_ARGUMENT,
           "shape is NULL");
    EXPECT(zt_param_add(f->rt, f->layer, "p", zero, 0, NULL, &id), ZT_ERR_ARGUMENT, "ndim = 0");
    EXPECT(zt_param_add(f->rt, f->layer, "p", zero, 9, NULL, &id), ZT_ERR_ARGUMENT, "ndim = 9");
    EXPECT(zt_param_add(f->rt, f->layer, "p", zero, 2, NULL, &id), ZT_ERR_ARGUMENT, "shape[1] = 0");
    EXPECT(zt_param_add(f->rt, f->layer, "p", neg, 1, NULL, &id), ZT_ERR_ARGUMENT, "shape[0] = -3");
    EXPECT(zt_param_add(f->rt, f->layer, "p", huge, 3, NULL, &id), ZT_ERR_ARGUMENT, "overflows");
    EXPECT(zt_param_add(f->rt, f->layer, "w", neg + 0, 0, NULL, NULL), ZT_ERR_ARGUMENT,
           "param_id is NULL");
}

static void test_param_add_bad_init(void **state)
{
    fixture *f = *state;
    int id;
    int64_t shape[1] = {3};
    zt_init cb = {ZT_INIT_CALLBACK, 0, 0, 0, NULL, NULL};
    zt_init normal = {ZT_INIT_NORMAL, 0.0f, -1.0f, 0, NULL, NULL};
    zt_init uniform = {ZT_INIT_UNIFORM, 2.0f, 1.0f, 0, NULL, NULL};
    EXPECT(zt_param_add(f->rt, f->layer, "p", shape, 1, &cb, &id), ZT_ERR_ARGUMENT, "init->fn");
    EXPECT(zt_param_add(f->rt, f->layer, "p", shape, 1, &normal, &id), ZT_ERR_ARGUMENT,
           "standard deviation");
    EXPECT(zt_param_add(f->rt, f->layer, "p", shape, 1, &uniform, &id), ZT_ERR_ARGUMENT,
           "low 2 > high 1");
    EXPECT(zt_param_add(f->rt, f->layer, "w", shape, 1, NULL, &id), ZT_ERR_ARGUMENT,
           "already exists");
}

static void test_fetch_and_step_before_commit(void **state)
{
    fixture *f = *state;
    zt_layer_view v;
    float buf[32];
    EXPECT(zt_fetch(f->rt, f->layer, ZT_FORWARD, &v), ZT_ERR_USAGE, "before zt_runtime_commit");
    EXPECT(zt_release(f->rt, f->layer, ZT_FORWARD), ZT_ERR_USAGE, "before zt_runtime_commit");
    EXPECT(zt_step(f->rt, NULL, NULL), ZT_ERR_USAGE, "before zt_runtime_commit");
    EXPECT(zt_param_read(f->rt, f->param, buf, 32), ZT_ERR_USAGE, "before zt_runtime_commit");
    EXPECT(zt_param_read_to(f->rt, f->param, 0, buf, 32), ZT_ERR_USAGE, "before zt_runtime_commit");
    EXPECT(zt_param_read_state(f->rt, f->param, ZT_STATE_ADAM_M, buf, 32), ZT_ERR_USAGE,
           "before zt_runtime_commit");
    assert_int_equal(zt_last_status(f->rt), ZT_ERR_USAGE);
}

static void test_commit_needs_parameters(void **state)
{
    (void)state;
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(NULL, small_config, &rt), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "no layers"));
    int id;
    assert_int_equal(zt_layer_add(rt, "empty", &id), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "'empty' has no parameters"));
    zt_runtime_destroy(rt);
}

static void test_register_after_commit(void **state)
{
    fixture *f = *state;
    int id;
    int64_t shape[1] = {3};
    EXPECT(zt_layer_add(f->rt, "late", &id), ZT_ERR_USAGE, "after zt_runtime_commit");
    EXPECT(zt_param_add(f->rt, f->layer, "late", shape, 1, NULL, &id), ZT_ERR_USAGE,
           "after zt_runtime_commit");
    EXPECT(zt_runtime_commit(f->rt), ZT_ERR_USAGE, "after zt_runtime_commit");
}

static void test_fetch_bad_arguments(void **state)
{
    fixture *f = *state;
    zt_layer_view v;
    EXPECT(zt_fetch(f->rt, 3, ZT_FORWARD, &v), ZT_ERR_ARGUMENT, "unknown layer id 3");
    EXPECT(zt_fetch(f->rt, f->layer, (zt_pass)5, &v), ZT_ERR_ARGUMENT, "pass 5");
    EXPECT(zt_fetch(f->rt, f->layer, ZT_FORWARD, NULL), ZT_ERR_ARGUMENT, "view is NULL");
    EXPECT(zt_release(f->rt, 3, ZT_FORWARD), ZT_ERR_ARGUMENT, "unknown layer id 3");
}

static void test_release_without_fetch_and_double_release(void **state)
{
    fixture *f = *state;
    zt_layer_view v;
    EXPECT(zt_release(f->rt, f->layer, ZT_FORWARD), ZT_ERR_USAGE, "without a matching fetch");
    assert_int_equal(zt_fetch(f->rt, f->layer, ZT_FORWARD, &v), ZT_OK);
    EXPECT(zt_release(f->rt, f->layer, ZT_BACKWARD), ZT_ERR_USAGE, "(backward) without");
    assert_int_equal(zt_release(f->rt, f->layer, ZT_FORWARD), ZT_OK);
    EXPECT(zt_release(f->rt, f->layer, ZT_FORWARD), ZT_ERR_USAGE, "double release");
    /* still usable */
    assert_int_equal(zt_fetch(f->rt, f->layer, ZT_FORWARD, &v), ZT_OK);
    assert_int_equal(zt_release(f->rt, f->layer, ZT_FORWARD), ZT_OK);
    assert_string_equal(zt_last_error(f->rt), "");
}

static void test_step_in_the_middle_of_backward(void **state)
{
    fixture *f = *state;
    zt_layer_view v;
    assert_int_equal(zt_fetch(f->rt, f->layer, ZT_BACKWARD, &v), ZT_OK);
    assert_non_null(v.params[0].grad);
    EXPECT(zt_step(f->rt, NULL, NULL), ZT_ERR_USAGE, "not released: 'l0' (backward)");
    float buf[32];
    EXPECT(zt_param_read(f->rt, f->param, buf, 32), ZT_ERR_USAGE, "'l0' (backward)");
    EXPECT(zt_param_read_to(f->rt, f->param, 0, buf, 32), ZT_ERR_USAGE, "'l0' (backward)");
    EXPECT(zt_param_write(f->rt, f->param, buf, 32), ZT_ERR_USAGE, "'l0' (backward)");
    EXPECT(zt_checkpoint_save(f->rt, "/tmp/unused"), ZT_ERR_USAGE, "'l0' (backward)");
    assert_int_equal(zt_release(f->rt, f->layer, ZT_BACKWARD), ZT_OK);
    zt_step_info info = ZT_STEP_INFO_INIT;
    assert_int_equal(zt_step(f->rt, NULL, &info), ZT_OK);
    assert_int_equal(info.step, 1);
}

static void test_step_args_uninitialised(void **state)
{
    fixture *f = *state;
    zt_step_args args;
    memset(&args, 0, sizeof args);
    EXPECT(zt_step(f->rt, &args, NULL), ZT_ERR_ARGUMENT, "ZT_STEP_ARGS_INIT");
}

static void test_param_read_bad_arguments(void **state)
{
    fixture *f = *state;
    float buf[32];
    EXPECT(zt_param_read(f->rt, 9, buf, 32), ZT_ERR_ARGUMENT, "unknown parameter id 9");
    EXPECT(zt_param_read(f->rt, f->param, NULL, 32), ZT_ERR_ARGUMENT, "dst is NULL");
    EXPECT(zt_param_read(f->rt, f->param, buf, 31), ZT_ERR_ARGUMENT, "has 32 elements");
    assert_int_equal(zt_stats_get(f->rt, NULL), ZT_ERR_ARGUMENT);
    /* one rank: the root is 0, and it needs a buffer */
    EXPECT(zt_param_read_to(f->rt, f->param, 1, buf, 32), ZT_ERR_ARGUMENT, "root 1 is not a rank");
    EXPECT(zt_param_read_to(f->rt, f->param, -1, buf, 32), ZT_ERR_ARGUMENT, "zt_param_read reads");
    EXPECT(zt_param_read_to(f->rt, f->param, 0, NULL, 32), ZT_ERR_ARGUMENT, "dst is NULL");
    EXPECT(zt_param_read_to(f->rt, f->param, 0, buf, 33), ZT_ERR_ARGUMENT, "has 32 elements");
    EXPECT(zt_param_read_to(f->rt, 9, 0, buf, 32), ZT_ERR_ARGUMENT, "unknown parameter id 9");
    float all[32];
    assert_int_equal(zt_param_read(f->rt, f->param, all, 32), ZT_OK);
    assert_int_equal(zt_param_read_to(f->rt, f->param, 0, buf, 32), ZT_OK);
    assert_memory_equal(buf, all, sizeof buf);
}

static zt_runtime *two_big_layers(const char *hbm, int layer[2], zt_status commit)
{
    zt_runtime *rt = NULL;
    char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}},"
             " \"ztier\": {\"hbm_capacity\": \"%s\"}}",
             hbm);
    assert_int_equal(zt_runtime_create(NULL, cfg, &rt), ZT_OK);
    int64_t shape[1] = {1 << 19}; /* 2 MiB of fp32 */
    int p;
    assert_int_equal(zt_layer_add(rt, "a", &layer[0]), ZT_OK);
    assert_int_equal(zt_param_add(rt, layer[0], "a.w", shape, 1, NULL, &p), ZT_OK);
    assert_int_equal(zt_layer_add(rt, "big", &layer[1]), ZT_OK);
    assert_int_equal(zt_param_add(rt, layer[1], "big.w", shape, 1, NULL, &p), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), commit);
    return rt;
}

static void test_device_budget_below_the_largest_layer(void **state)
{
    (void)state;
    int layer[2];
    /* a backward pass of one layer needs 4 MiB (parameters and gradients) */
    zt_runtime *rt = two_big_layers("3M", layer, ZT_ERR_DEVICE_NOMEM);
    const char *msg = zt_last_error(rt);
    assert_non_null(strstr(msg, "device memory budget of 3145728 bytes"));
    assert_non_null(strstr(msg, "4194304 bytes while layer 'a' runs its backward pass"));
    assert_non_null(strstr(msg, "hbm_capacity"));
    zt_runtime_destroy(rt);
    rt = two_big_layers("4M", layer, ZT_OK); /* exactly enough: eviction has to do the rest */
    zt_runtime_destroy(rt);
}

static void test_device_budget_exceeded_at_fetch(void **state)
{
    (void)state;
    int layer[2];
    zt_runtime *rt = two_big_layers("5M", layer, ZT_OK);
    zt_layer_view v;
    /* 'a' held (2 MiB) while 'big' needs 4 MiB for its backward pass */
    assert_int_equal(zt_fetch(rt, layer[0], ZT_FORWARD, &v), ZT_OK);
    assert_int_equal(zt_fetch(rt, layer[1], ZT_BACKWARD, &v), ZT_ERR_DEVICE_NOMEM);
    assert_non_null(strstr(zt_last_error(rt), "layer 'big'"));
    assert_non_null(strstr(zt_last_error(rt), "hbm_capacity"));
    assert_int_equal(zt_release(rt, layer[0], ZT_FORWARD), ZT_OK);
    /* nothing else is held after the failed fetch; the same fetch now fits; step works */
    assert_int_equal(zt_fetch(rt, layer[1], ZT_BACKWARD, &v), ZT_OK);
    assert_int_equal(zt_release(rt, layer[1], ZT_BACKWARD), ZT_OK);
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    zt_runtime_destroy(rt);
}

/* A message with a path near ZT_PATH_MAX keeps its cause and fix: the path loses its middle. */
static void test_long_path_keeps_the_reason(void **state)
{
    (void)state;
    char path[1001], cfg[1400];
    memset(path, 'd', sizeof path - 1);
    for (int i = 0; i < (int)sizeof path - 1; i += 100)
        path[i] = '/'; /* components below NAME_MAX: the folder is missing, not misnamed */
    path[sizeof path - 1] = '\0';
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"nvme\", "
             "\"nvme_path\": \"%s\"}}, \"ztier\": {\"hbm_capacity\": \"16M\"}}",
             path);
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(NULL, cfg, &rt), ZT_OK);
    int layer, p;
    assert_int_equal(zt_layer_add(rt, "l", &layer), ZT_OK);
    assert_int_equal(zt_param_add(rt, layer, "l.w", (int64_t[]){64}, 1, NULL, &p), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_ERR_CONFIG);
    const char *msg = zt_last_error(rt);
    assert_true(strlen(msg) < 1024);
    assert_non_null(strstr(msg, "NVMe swap folder '/ddd"));
    assert_non_null(strstr(msg, "zt_runtime_commit failed"));
    assert_non_null(strstr(msg, "ddd...ddd"));
    assert_non_null(strstr(msg, "cannot be used: No such file or directory; create it"));
    assert_non_null(strstr(msg, "fast local disk [swap.c:"));
    zt_runtime_destroy(rt);
}

/* "" after a successful call (api/ztier.h), also when the device memory a fetch needed was
 * found only by evicting a prefetched layer: the failed first try is not the call's error.
 * 8 layers of 64 Ki floats (256 KiB each) in a 1.25 MiB budget, a window of all of them:
 * every step's fetches evict. */
static void test_fetch_that_evicted_leaves_no_error(void **state)
{
    (void)state;
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(NULL,
                                       "{\"zero_optimization\": {\"offload_param\": {\"device\":"
                                       " \"cpu\"}, \"stage3_param_persistence_threshold\": 0,"
                                       " \"stage3_prefetch_bucket_size\": 100000000,"
                                       " \"stage3_max_reuse_distance\": 100000000},"
                                       " \"ztier\": {\"hbm_capacity\": 1310720}}",
                                       &rt),
                     ZT_OK);
    int layer[8], p;
    int64_t shape[1] = {65536};
    for (int l = 0; l < 8; l++) {
        char name[8], param[12];
        snprintf(name, sizeof name, "l%d", l);
        snprintf(param, sizeof param, "l%d.w", l);
        assert_int_equal(zt_layer_add(rt, name, &layer[l]), ZT_OK);
        assert_int_equal(zt_param_add(rt, layer[l], param, shape, 1, NULL, &p), ZT_OK);
    }
    if (zt_runtime_commit(rt) != ZT_OK)
        fail_msg("%s", zt_last_error(rt));
    zt_layer_view v;
    for (int step = 0; step < 3; step++) {
        for (int l = 0; l < 8; l++) {
            assert_int_equal(zt_fetch(rt, layer[l], ZT_FORWARD, &v), ZT_OK);
            assert_string_equal(zt_last_error(rt), "");
            assert_int_equal(zt_release(rt, layer[l], ZT_FORWARD), ZT_OK);
        }
        for (int l = 7; l >= 0; l--) {
            assert_int_equal(zt_fetch(rt, layer[l], ZT_BACKWARD, &v), ZT_OK);
            assert_string_equal(zt_last_error(rt), "");
            assert_int_equal(zt_release(rt, layer[l], ZT_BACKWARD), ZT_OK);
        }
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    zt_stats s = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_true(s.evictions > 0); /* the path under test was taken */
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rejects_null_out),
        cmocka_unit_test(test_create_rejects_uninitialised_options),
        cmocka_unit_test(test_create_reports_bad_config_on_handle),
        cmocka_unit_test(test_null_handle_and_destroy_null),
        cmocka_unit_test_setup_teardown(test_layer_add_bad_arguments, setup_registered, teardown),
        cmocka_unit_test_setup_teardown(test_param_add_unknown_layer, setup_registered, teardown),
        cmocka_unit_test_setup_teardown(test_param_add_bad_shapes, setup_registered, teardown),
        cmocka_unit_test_setup_teardown(test_param_add_bad_init, setup_registered, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_and_step_before_commit, setup_registered,
                                        teardown),
        cmocka_unit_test(test_commit_needs_parameters),
        cmocka_unit_test_setup_teardown(test_register_after_commit, setup_committed, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_bad_arguments, setup_committed, teardown),
        cmocka_unit_test_setup_teardown(test_release_without_fetch_and_double_release,
                                        setup_committed, teardown),
        cmocka_unit_test_setup_teardown(test_step_in_the_middle_of_backward, setup_committed,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_step_args_uninitialised, setup_committed, teardown),
        cmocka_unit_test_setup_teardown(test_param_read_bad_arguments, setup_committed, teardown),
        cmocka_unit_test(test_device_budget_below_the_largest_layer),
        cmocka_unit_test(test_long_path_keeps_the_reason),
        cmocka_unit_test(test_device_budget_exceeded_at_fetch),
        cmocka_unit_test(test_fetch_that_evicted_leaves_no_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Configuration: real DeepSpeed ZeRO-3 configs load as they are; unknown keys warn with
 * their full path and the closest known key; every invalid value is an error naming the
 * JSON path, the value and what is allowed; environment overrides are checked too. */
#include "runtime/config.h"
#include "runtime/log.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char logbuf[8192];

static void capture(void *user, int level, const char *msg)
{
    (void)user, (void)level;
    strncat(logbuf, msg, sizeof logbuf - strlen(logbuf) - 2);
    strcat(logbuf, "\n");
}

static int setup(void **state)
{
    (void)state;
    logbuf[0] = '\0';
    zt_log_configure(ZT_LOG_INFO, capture, NULL);
    unsetenv("ZT_LOG"), unsetenv("ZT_HBM_CAPACITY"), unsetenv("ZT_NVME_PATH");
    unsetenv("ZT_IO_ENGINE"), unsetenv("ZT_ADAM_VARIANT");
    return 0;
}

static zt_status parse(const char *json, zt_config *cfg, zt_error *err)
{
    zt_config_defaults(cfg);
    zt_error_clear(err);
    return zt_config_parse(cfg, json, "test", err);
}

static void expect_error(const char *json, const char *fragment1, const char *fragment2)
{
    zt_config cfg;
    zt_error err;
    assert_int_equal(parse(json, &cfg, &err), ZT_ERR_CONFIG);
    if (!strstr(err.msg, fragment1) || (fragment2 && !strstr(err.msg, fragment2)))
        fail_msg("message '%s' lacks '%s' / '%s'", err.msg, fragment1, fragment2 ? fragment2 : "");
}

static void test_defaults(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    assert_int_equal(parse("{}", &c, &err), ZT_OK);
    assert_int_equal(c.stage, 3);
    assert_int_equal(c.offload_param.device, ZT_TIER_DEVICE);
    assert_int_equal(c.aio_block_size, 1 << 20);
    assert_int_equal(c.aio_queue_depth, 32);
    assert_int_equal(c.stage3_prefetch_bucket_size, 50000000);
    assert_string_equal(c.device_backend, "host");
    assert_int_equal(c.hbm_capacity, (int64_t)8 << 30);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
}

static void test_deepspeed_nvme_config_loads(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(zt_config_load_file(&c, ZT_TEST_DATA "/ds_zero3_nvme.json", &err), ZT_OK);
    assert_int_equal(c.offload_param.device, ZT_TIER_NVME);
    assert_string_equal(c.offload_param.nvme_path[0], "/local_nvme");
    assert_int_equal(c.offload_optimizer.n_nvme_paths, 2);
    assert_string_equal(c.offload_optimizer.nvme_path[1], "/local_nvme1");
    assert_int_equal(c.offload_param.buffer_count, 5);
    assert_int_equal(c.sub_group_size, 100000000);
    assert_int_equal(c.reduce_bucket_size, 500000000);
    assert_int_equal(c.gradient_accumulation_steps, 8);
    assert_int_equal(c.aio_queue_depth, 16);
    assert_int_equal(c.aio_intra_op_parallelism, 2);
    assert_int_equal(c.bf16, 1);
    assert_int_equal(c.optimizer, ZT_OPT_ADAMW);
    assert_float_equal(c.beta2, 0.95f, 1e-7f);
    assert_float_equal(c.weight_decay, 0.1f, 1e-7f);
    assert_float_equal(c.gradient_clipping, 1.0f, 0.0f);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
    assert_non_null(strstr(logbuf, "scheduler: a DeepSpeed setting ztier does not use"));
    assert_null(strstr(logbuf, "unknown key"));
}

static void test_huggingface_auto_config_loads(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(zt_config_load_file(&c, ZT_TEST_DATA "/ds_zero3_cpu_hf.json", &err), ZT_OK);
    assert_int_equal(c.offload_param.device, ZT_TIER_HOST);
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_HOST);
    assert_int_equal(c.fp16, 0); /* "auto" keeps the default */
    assert_int_equal(c.stage3_prefetch_bucket_size, 50000000);
    assert_int_equal(c.gradient_accumulation_steps, 1);
    assert_non_null(strstr(logbuf, "optimizer.params.lr = \"auto\""));
}

static void test_unknown_key_warns_with_suggestion(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    assert_int_equal(parse("{\"zero_optimization\": {\"stage3_prefetch_bucketsize\": 5,"
                           " \"offload_param\": {\"devise\": \"cpu\"}}, \"frobnicate\": 1}",
                           &c, &err),
                     ZT_OK);
    assert_non_null(strstr(logbuf, "unknown key 'zero_optimization.stage3_prefetch_bucketsize' "
                                   "ignored; did you mean "
                                   "'zero_optimization.stage3_prefetch_bucket_size'?"));
    assert_non_null(strstr(logbuf, "'zero_optimization.offload_param.devise'"));
    assert_non_null(strstr(logbuf, "unknown key 'frobnicate' ignored\n"));
}

static void test_invalid_values_name_path_value_and_range(void **state)
{
    (void)state;
    expect_error("{\"zero_optimization\": {\"stage3_prefetch_bucket_size\": -5}}",
                 "zero_optimization.stage3_prefetch_bucket_size = -5", "integer in [0");
    expect_error("{\"zero_optimization\": {\"stage\": \"three\"}}",
                 "zero_optimization.stage = \"three\"", "must be an integer");
    expect_error("{\"zero_optimization\": {\"stage\": 2}}", "zero_optimization.stage = 2",
                 "stage 3 only");
    expect_error("{\"zero_optimization\": {\"offload_param\": {\"device\": \"gpu\"}}}",
                 "zero_optimization.offload_param.device = \"gpu\"",
                 "one of \"none\", \"cpu\", \"nvme\"");
    expect_error("{\"aio\": {\"queue_depth\": 0}}", "aio.queue_depth = 0", "[1, 4096]");
    expect_error("{\"aio\": {\"block_size\": 1.5}}", "aio.block_size = 1.5", "integer");
    expect_error("{\"zero_optimization\": {\"sub_group_size\": [1]}}",
                 "zero_optimization.sub_group_size = [1]", NULL);
    expect_error("{\"aio\": {\"queue_depth\": \"auto\"}}", "aio.queue_depth = \"auto\"",
                 "cannot honour \"auto\"");
    expect_error("{\"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": true}}",
                 "bf16.enabled and fp16.enabled", NULL);
    expect_error("{\"optimizer\": {\"type\": \"SGD\"}}", "optimizer.type = \"SGD\"", "adamw");
    expect_error("{\"optimizer\": {\"params\": {\"betas\": [0.9]}}}", "optimizer.params.betas",
                 "[beta1, beta2]");
    expect_error("{\"ztier\": {\"hbm_capacity\": \"lots\"}}", "ztier.hbm_capacity = \"lots\"",
                 "\"2G\"");
    expect_error("{\"ztier\": {\"device_backend\": \"tpu\"}}", "ztier.device_backend = \"tpu\"",
                 NULL);
    expect_error("{\"bf16\": {\"enabled\": \"yes\"}}", "bf16.enabled = \"yes\"", "true or false");
    expect_error("{\"zero_optimization\": 3}", "zero_optimization = 3", "must be an object");
    expect_error("[1, 2]", "must be a JSON object", NULL);
    expect_error("{\n  \"aio\": {\n    \"queue_depth\": 4,,\n  }\n}", "syntax error at line 3",
                 NULL);
}

static void test_sizes_and_paths(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    assert_int_equal(parse("{\"ztier\": {\"hbm_capacity\": \"2G\", \"host_capacity\": 1048576},"
                           " \"zero_optimization\": {\"reduce_bucket_size\": 5e8}}",
                           &c, &err),
                     ZT_OK);
    assert_int_equal(c.hbm_capacity, (int64_t)2 << 30);
    assert_int_equal(c.host_capacity, 1048576);
    assert_int_equal(c.reduce_bucket_size, 500000000);
    assert_int_equal(parse("{\"zero_optimization\": {\"offload_optimizer\": {\"device\": "
                           "\"nvme\"}}}", &c, &err),
                     ZT_OK);
    assert_int_equal(zt_config_validate(&c, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "zero_optimization.offload_optimizer.nvme_path is not set"));
}

static void test_adam_mode_and_weight_decay_defaults(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    assert_int_equal(parse("{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": "
                           "false}}}", &c, &err),
                     ZT_OK);
    assert_int_equal(c.optimizer, ZT_OPT_ADAM);
    assert_float_equal(c.weight_decay, 0.0f, 0.0f);
    assert_int_equal(parse("{\"optimizer\": {\"type\": \"Adam\"}}", &c, &err), ZT_OK);
    assert_int_equal(c.optimizer, ZT_OPT_ADAMW);
}

static void test_environment_overrides(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    setenv("ZT_HBM_CAPACITY", "512M", 1);
    setenv("ZT_NVME_PATH", "/tmp/swap", 1);
    setenv("ZT_IO_ENGINE", "threads", 1);
    assert_int_equal(zt_config_apply_env(&c, &err), ZT_OK);
    assert_int_equal(c.hbm_capacity, (int64_t)512 << 20);
    assert_string_equal(c.offload_optimizer.nvme_path[0], "/tmp/swap");
    assert_int_equal(c.io_engine, ZT_IO_ENGINE_THREADS);
    setenv("ZT_IO_ENGINE", "floppy", 1);
    assert_int_equal(zt_config_apply_env(&c, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "ZT_IO_ENGINE"));
    unsetenv("ZT_IO_ENGINE");
    setenv("ZT_LOG", "chatty", 1);
    assert_int_equal(zt_config_apply_env(&c, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "ZT_LOG = \"chatty\""));
    unsetenv("ZT_LOG");
    setenv("ZT_HBM_CAPACITY", "12", 1);
    assert_int_equal(zt_config_apply_env(&c, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "ZT_HBM_CAPACITY"));
    unsetenv("ZT_HBM_CAPACITY");
    unsetenv("ZT_NVME_PATH");
}

static void test_missing_file(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(zt_config_load_file(&c, "/nonexistent/ds.json", &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "cannot read config file '/nonexistent/ds.json'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, setup),
        cmocka_unit_test_setup(test_deepspeed_nvme_config_loads, setup),
        cmocka_unit_test_setup(test_huggingface_auto_config_loads, setup),
        cmocka_unit_test_setup(test_unknown_key_warns_with_suggestion, setup),
        cmocka_unit_test_setup(test_invalid_values_name_path_value_and_range, setup),
        cmocka_unit_test_setup(test_sizes_and_paths, setup),
        cmocka_unit_test_setup(test_adam_mode_and_weight_decay_defaults, setup),
        cmocka_unit_test_setup(test_environment_overrides, setup),
        cmocka_unit_test_setup(test_missing_file, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

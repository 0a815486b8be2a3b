/* SPDX-License-Identifier: MIT */
/* Configuration: real DeepSpeed ZeRO-3 configs load as they are; DeepSpeed keys ztier does not
 * use are logged at info; unknown keys warn with their full path and the closest known key;
 * every invalid value is ZT_ERR_CONFIG naming the JSON path, the value and what is allowed;
 * environment overrides and the final validation are checked the same way. */
#include "runtime/config_parse.h"
#include "runtime/config_schedule.h"
#include "core/log.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cmocka.h>

#ifndef ZT_TEST_DATA
#define ZT_TEST_DATA "tests/config/data"
#endif

static char logbuf[16384];

static void capture(void *user, int level, const char *msg)
{
    (void)user, (void)level;
    strncat(logbuf, msg, sizeof logbuf - strlen(logbuf) - 2);
    strcat(logbuf, "\n");
}

static const char *const env_vars[] = {
    "ZT_LOG",          "ZT_HBM_CAPACITY", "ZT_NVME_PATH", "ZT_IO_ENGINE",
    "ZT_ADAM_VARIANT", "ZT_THREADS",      "ZT_TRACE",     NULL};

static int setup(void **state)
{
    (void)state;
    logbuf[0] = '\0';
    zt_log_configure(ZT_LOG_DEBUG, capture, NULL);
    for (int i = 0; env_vars[i]; i++)
        unsetenv(env_vars[i]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; env_vars[i]; i++)
        unsetenv(env_vars[i]);
    return 0;
}

static zt_status parse(const char *json, zt_config *cfg, zt_error *err)
{
    zt_config_defaults(cfg);
    zt_error_clear(err);
    return zt_config_parse(cfg, json, "test", err);
}

static void parse_ok(const char *json, zt_config *cfg)
{
    zt_error err;
    if (parse(json, cfg, &err) != ZT_OK)
        fail_msg("'%s' was rejected: %s", json, err.msg);
}

/* The message must contain every fragment (NULL-terminated list). */
static void assert_msg_has(const char *msg, const char *const *fragments)
{
    for (int i = 0; fragments[i]; i++)
        if (!strstr(msg, fragments[i]))
            fail_msg("message '%s' lacks '%s'", msg, fragments[i]);
}

#define expect_error(json, ...)                                             \
    do {                                                                    \
        zt_config cfg_;                                                     \
        zt_error err_;                                                      \
        assert_int_equal(parse((json), &cfg_, &err_), ZT_ERR_CONFIG);       \
        assert_int_equal(err_.status, ZT_ERR_CONFIG);                       \
        assert_msg_has(err_.msg, (const char *const[]){__VA_ARGS__, NULL}); \
    } while (0)

static void assert_log_has(const char *fragment)
{
    if (!strstr(logbuf, fragment))
        fail_msg("log lacks '%s'; log:\n%s", fragment, logbuf);
}

/* ---- defaults and real configs ---- */

static void test_defaults_are_the_documented_values(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(c.stage, 3);
    assert_int_equal(c.offload_param.device, ZT_TIER_DEVICE);
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_DEVICE);
    assert_int_equal(c.offload_param.pin_memory, 1);
    assert_int_equal(c.offload_param.buffer_count, 4);
    assert_int_equal(c.offload_optimizer.buffer_size, 100000000);
    assert_int_equal(c.offload_param.max_in_cpu, 1000000000);
    assert_int_equal(c.stage3_prefetch_bucket_size, 50000000);
    assert_int_equal(c.stage3_max_live_parameters, 1000000000);
    assert_int_equal(c.stage3_max_reuse_distance, 1000000000);
    assert_int_equal(c.stage3_param_persistence_threshold, 100000);
    assert_int_equal(c.reduce_bucket_size, 5000000);
    assert_int_equal(c.sub_group_size, 1000000000);
    assert_int_equal(c.zero_hpz_partition_size, 1);
    assert_int_equal(c.aio_block_size, 1048576);
    assert_int_equal(c.aio_queue_depth, 32);
    assert_int_equal(c.aio_intra_op_parallelism, 1);
    assert_int_equal(c.aio_single_submit, 0);
    assert_int_equal(c.aio_overlap_events, 1);
    assert_int_equal(c.optimizer, ZT_OPT_ADAMW);
    assert_float_equal(c.lr, 1e-3f, 0);
    assert_float_equal(c.beta1, 0.9f, 0);
    assert_float_equal(c.beta2, 0.999f, 0);
    assert_float_equal(c.eps, 1e-8f, 0);
    assert_float_equal(c.weight_decay, 0.01f, 0);
    assert_int_equal(c.gradient_accumulation_steps, 1);
    assert_float_equal(c.gradient_clipping, 0, 0);
    assert_float_equal(c.fp16_loss_scale, 0, 0);
    assert_int_equal(c.fp16_initial_scale_power, 16);
    assert_int_equal(c.fp16_loss_scale_window, 1000);
    assert_int_equal(c.fp16_hysteresis, 2);
    assert_float_equal(c.fp16_min_loss_scale, 1, 0);
    assert_string_equal(c.device_backend, "host");
    assert_string_equal(c.comm_backend, "auto");
    assert_int_equal(c.hbm_capacity, 0);                             /* unset: */
    assert_int_equal(zt_config_device_budget(&c), (int64_t)8 << 30); /* the host's 8 GiB */
    strcpy(c.device_backend, "cuda");
    assert_int_equal(zt_config_device_budget(&c), 0); /* the GPU's free memory less a reserve */
    strcpy(c.device_backend, "host");
    assert_int_equal(c.host_capacity, 0);
    assert_int_equal(c.io_engine, ZT_IO_ENGINE_AUTO);
    assert_string_equal(c.adam_variant, "auto");
    assert_int_equal(c.ranks_per_node, 0);
    assert_string_equal(c.trace_path, "");
    assert_int_equal(c.log_level, -1);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
}

static void test_empty_object_keeps_defaults(void **state)
{
    (void)state;
    zt_config c, d;
    parse_ok("{}", &c);
    zt_config_defaults(&d);
    assert_memory_equal(&c, &d, sizeof c);
    assert_string_equal(logbuf, "");
}

static void test_hf_zero3_nvme_config_loads(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    if (zt_config_load_file(&c, ZT_TEST_DATA "/ds_zero3_nvme.json", &err) != ZT_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(c.offload_param.device, ZT_TIER_NVME);
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_NVME);
    assert_int_equal(c.offload_param.n_nvme_paths, 1);
    assert_string_equal(c.offload_param.nvme_path[0], "/local_nvme");
    assert_string_equal(c.offload_optimizer.nvme_path[0], "/local_nvme");
    assert_int_equal(c.offload_param.buffer_count, 5);
    assert_int_equal(c.offload_param.buffer_size, 100000000);
    assert_int_equal(c.offload_optimizer.buffer_count, 4);
    assert_int_equal(c.reduce_bucket_size, 10000000);
    assert_int_equal(c.stage3_prefetch_bucket_size, 10000000);
    assert_int_equal(c.stage3_param_persistence_threshold, 100000); /* "auto" */
    assert_int_equal(c.aio_block_size, 262144);
    assert_int_equal(c.aio_queue_depth, 16);
    assert_int_equal(c.aio_intra_op_parallelism, 2); /* thread_count, the older name */
    assert_int_equal(c.fp16, 0);                     /* "auto" */
    assert_int_equal(c.gradient_accumulation_steps, 1);
    assert_float_equal(c.gradient_clipping, 1.0f, 0);
    assert_int_equal(c.optimizer, ZT_OPT_ADAMW);
    assert_float_equal(c.lr, 1e-3f, 0);
    assert_float_equal(c.weight_decay, 0.01f, 0);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
    /* the schedule is applied: WarmupLR, its "auto"s recorded for the report at commit */
    assert_int_equal(c.sched.type, ZT_LR_WARMUP);
    assert_float_equal(c.sched.warmup_min_lr, 0, 0);
    assert_float_equal(c.sched.warmup_max_lr, c.lr, 0); /* "auto": the optimizer's lr */
    assert_int_equal(c.sched.warmup_num_steps, 1000);
    assert_int_equal(zt_config_check_schedule(&c, &err), ZT_OK);
    char report[1024];
    zt_config_auto_report(&c, report, sizeof report);
    assert_msg_has(report, (const char *const[]){
                               "scheduler.params.warmup_max_lr = 0.001 (optimizer.params.lr)",
                               "scheduler.params.warmup_num_steps = 1000", NULL});
    assert_null(strstr(report, "warmup_min_lr")); /* "auto" is 0 in HF too: not reported */
    assert_log_has("steps_per_print: not used by ztier");
    assert_log_has("zero_optimization.stage3_gather_16bit_weights_on_model_save: not used");
    assert_log_has("optimizer.params.lr = \"auto\": using ztier's default");
    assert_null(strstr(logbuf, "warn"));
}

static void test_striped_nvme_bf16_config_loads(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    if (zt_config_load_file(&c, ZT_TEST_DATA "/ds_zero3_nvme_striped.json", &err) != ZT_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(c.offload_optimizer.n_nvme_paths, 2);
    assert_string_equal(c.offload_optimizer.nvme_path[0], "/local_nvme0");
    assert_string_equal(c.offload_optimizer.nvme_path[1], "/local_nvme1");
    assert_int_equal(c.sub_group_size, 100000000);
    assert_int_equal(c.gradient_accumulation_steps, 8);
    assert_int_equal(c.bf16, 1);
    assert_float_equal(c.lr, 3e-4f, 0);
    assert_float_equal(c.beta2, 0.95f, 0);
    assert_float_equal(c.weight_decay, 0.1f, 0);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
    /* read (partition_activations is warned at commit: tests/unit/test_activations.c) */
    assert_int_equal(c.act_partition, 1);
    assert_int_equal(c.act_contiguous, 1);
    assert_int_equal(c.sched.type, ZT_LR_WARMUP);
    assert_float_equal(c.sched.warmup_max_lr, 3e-4f, 0);
    assert_int_equal(c.sched.warmup_num_steps, 100);
    assert_int_equal(c.sched.warmup_type, ZT_WARMUP_LOG);
    assert_int_equal(zt_config_check_schedule(&c, &err), ZT_OK);
    assert_null(strstr(logbuf, "warn")); /* nothing ztier does not apply */
}

static void test_hf_zero3_cpu_config_loads(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    if (zt_config_load_file(&c, ZT_TEST_DATA "/ds_zero3_cpu_hf.json", &err) != ZT_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(c.offload_param.device, ZT_TIER_HOST);
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_HOST);
    assert_int_equal(c.offload_param.n_nvme_paths, 0);
    assert_int_equal(c.fp16, 0);
    assert_int_equal(c.stage3_prefetch_bucket_size, 50000000);
    assert_int_equal(c.reduce_bucket_size, 5000000);
    assert_float_equal(c.gradient_clipping, 0, 0);
    assert_float_equal(c.beta2, 0.999f, 0);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
    assert_null(strstr(logbuf, "warn"));
}

static void test_ignored_keys_are_silent_at_warn_level(void **state)
{
    (void)state;
    zt_config c;
    zt_log_configure(ZT_LOG_WARN, capture, NULL);
    parse_ok("{\"train_batch_size\": 32, \"zero_optimization\": {\"round_robin_gradients\": true},"
             " \"aio\": {\"use_gds\": false}, \"optimizer\": {\"params\": {\"torch_adam\": true}}}",
             &c);
    assert_string_equal(logbuf, "");
}

/* DeepSpeed settings that would change training and that ztier does not apply warn at the
 * default level, one line each naming the key and what ztier does instead; at DeepSpeed's
 * defaults they change nothing and stay silent. */
static void test_dropped_training_settings_warn(void **state)
{
    (void)state;
    zt_config c;
    zt_log_configure(ZT_LOG_WARN, capture, NULL);
    parse_ok("{\"zero_optimization\": {\"mics_shard_size\": 8},"
             " \"optimizer\": {\"params\": {\"bias_correction\": false}},"
             " \"fp16\": {\"fp16_master_weights_and_grads\": true}, \"prescale_gradients\": true,"
             " \"gradient_predivide_factor\": 2.0}",
             &c);
    const char *const expected[] = {
        "zero_optimization.mics_shard_size: MiCS is not built",
        "optimizer.params.bias_correction: ztier's Adam always corrects",
        "fp16.fp16_master_weights_and_grads: the master weights and gradient sums stay fp32",
        "prescale_gradients: gradients are summed",
        "gradient_predivide_factor: gradients are summed",
        NULL};
    for (int i = 0; expected[i]; i++)
        assert_log_has(expected[i]);
    int lines = 0;
    for (const char *p = logbuf; (p = strstr(p, "ztier warn")); p++)
        lines++;
    assert_int_equal(lines, 5);
    logbuf[0] = '\0';
    parse_ok("{\"optimizer\": {\"params\": {\"bias_correction\": true}},"
             " \"fp16\": {\"fp16_master_weights_and_grads\": false}, \"prescale_gradients\": false,"
             " \"gradient_predivide_factor\": 1.0, \"communication_data_type\": null,"
             " \"amp\": {\"enabled\": false}, \"fp32_allreduce\": false}",
             &c);
    assert_string_equal(logbuf, "");
}

/* communication_data_type: the dtype gradients are summed over ranks in. Unset, null and
 * "auto" leave 16-bit gradients in 16 bits; "fp32" and fp32_allreduce widen them; naming a
 * 16-bit dtype that is not enabled is refused with the fix. */
static void test_communication_data_type(void **state)
{
    (void)state;
    zt_config c;
    zt_error err = {0};
    parse_ok("{\"bf16\": {\"enabled\": true}}", &c);
    assert_int_equal(zt_config_reduce_dtype(&c, ZT_BF16), ZT_BF16);
    parse_ok("{\"bf16\": {\"enabled\": true}, \"communication_data_type\": null}", &c);
    assert_int_equal(zt_config_reduce_dtype(&c, ZT_BF16), ZT_BF16);
    parse_ok("{\"bf16\": {\"enabled\": true}, \"communication_data_type\": \"bf16\"}", &c);
    assert_int_equal(zt_config_reduce_dtype(&c, ZT_BF16), ZT_BF16);
    parse_ok("{\"bf16\": {\"enabled\": true}, \"communication_data_type\": \"fp32\"}", &c);
    assert_int_equal(zt_config_reduce_dtype(&c, ZT_BF16), ZT_F32);
    parse_ok("{\"fp16\": {\"enabled\": true}, \"fp32_allreduce\": true}", &c);
    assert_int_equal(zt_config_reduce_dtype(&c, ZT_F16), ZT_F32);
    assert_int_equal(parse("{\"communication_data_type\": \"fp16\"}", &c, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "communication_data_type = \"fp16\" with fp16.enabled false"));
    assert_non_null(strstr(err.msg, "enable fp16"));
}

static void test_pydantic_field_names_are_aliases(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"prefetch_bucket_size\": 123, \"max_live_parameters\": 4,"
             " \"max_reuse_distance\": 5, \"param_persistence_threshold\": 6}}",
             &c);
    assert_int_equal(c.stage3_prefetch_bucket_size, 123);
    assert_int_equal(c.stage3_max_live_parameters, 4);
    assert_int_equal(c.stage3_max_reuse_distance, 5);
    assert_int_equal(c.stage3_param_persistence_threshold, 6);
}

static void test_ztier_object_values_land(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"ztier\": {\"device_backend\": \"CUDA\", \"comm_backend\": \"nccl\","
             " \"hbm_capacity\": \"2G\", \"host_capacity\": 1073741824, \"io_engine\": \"threads\","
             " \"verify_checksums\": true, \"allow_buffered_io\": 1, \"optimizer_threads\": 6,"
             " \"adam_variant\": \"avx2\", \"ranks_per_node\": 4, \"trace_path\": \"/tmp/t.json\","
             " \"log_level\": \"debug\"}}",
             &c);
    assert_string_equal(c.device_backend, "cuda");
    assert_string_equal(c.comm_backend, "nccl");
    assert_int_equal(c.hbm_capacity, (int64_t)2 << 30);
    assert_int_equal(c.host_capacity, (int64_t)1 << 30);
    assert_int_equal(c.io_engine, ZT_IO_ENGINE_THREADS);
    assert_int_equal(c.verify_checksums, 1);
    assert_int_equal(c.allow_buffered_io, 1);
    assert_int_equal(c.optimizer_threads, 6);
    assert_string_equal(c.adam_variant, "avx2");
    assert_int_equal(c.ranks_per_node, 4);
    assert_string_equal(c.trace_path, "/tmp/t.json");
    assert_int_equal(c.log_level, ZT_LOG_DEBUG);
}

/* ---- unknown keys ---- */

static void test_unknown_key_warns_with_full_path_and_suggestion(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"stage3_prefetch_bucketsize\": 5,"
             " \"offload_param\": {\"devise\": \"cpu\"}}, \"frobnicate\": 1}",
             &c);
    assert_log_has("ztier warn [config] unknown key 'zero_optimization.stage3_prefetch_bucketsize'"
                   " ignored; did you mean 'zero_optimization.stage3_prefetch_bucket_size'?");
    assert_log_has("unknown key 'zero_optimization.offload_param.devise' ignored; did you mean "
                   "'zero_optimization.offload_param.device'?");
    assert_log_has("unknown key 'frobnicate' ignored\n");
    assert_int_equal(c.stage3_prefetch_bucket_size, 50000000); /* untouched */
    assert_int_equal(c.offload_param.device, ZT_TIER_DEVICE);
}

static void test_misspelt_object_and_misplaced_key_get_suggestions(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimisation\": {\"stage\": 3}, \"offload_param\": {\"device\": \"cpu\"},"
             " \"zero_optimization.stage\": 3, \"stage\": 3}",
             &c);
    assert_log_has("unknown key 'zero_optimisation' ignored; did you mean 'zero_optimization'?");
    assert_log_has("unknown key 'offload_param' ignored; did you mean "
                   "'zero_optimization.offload_param'?");
    assert_log_has("unknown key 'stage' ignored; did you mean 'zero_optimization.stage'?");
    assert_log_has("unknown key 'zero_optimization.stage' ignored; write dotted paths as nested");
}

/* ---- invalid values ---- */

static void test_negative_size_is_error_with_exact_message(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    assert_int_equal(
        parse("{\"zero_optimization\": {\"stage3_prefetch_bucket_size\": -5}}", &c, &err),
        ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "test: zero_optimization.stage3_prefetch_bucket_size = -5: "
                                    "must be an integer >= 0"));
    expect_error("{\"zero_optimization\": {\"offload_param\": {\"max_in_cpu\": -1}}}",
                 "zero_optimization.offload_param.max_in_cpu = -1", ">= 0");
    expect_error("{\"ztier\": {\"host_capacity\": \"-1G\"}}", "ztier.host_capacity = \"-1G\"");
}

static void test_wrong_json_type_is_error(void **state)
{
    (void)state;
    expect_error("{\"zero_optimization\": {\"stage\": \"three\"}}",
                 "zero_optimization.stage = \"three\"", "must be an integer in [0, 3]");
    expect_error("{\"bf16\": {\"enabled\": \"yes\"}}", "bf16.enabled = \"yes\"",
                 "must be true or false");
    expect_error("{\"zero_optimization\": {\"sub_group_size\": [1]}}",
                 "zero_optimization.sub_group_size = [1]", "an integer");
    expect_error("{\"optimizer\": {\"params\": {\"lr\": \"0.1\"}}}",
                 "optimizer.params.lr = \"0.1\"", "a number");
    expect_error("{\"optimizer\": {\"params\": {\"betas\": 0.9}}}", "optimizer.params.betas = 0.9",
                 "[beta1, beta2]");
    expect_error("{\"ztier\": {\"trace_path\": 5}}", "ztier.trace_path = 5", "path string");
    expect_error("{\"zero_optimization\": 3}", "zero_optimization = 3", "must be an object");
    expect_error("{\"zero_optimization\": {\"offload_param\": \"cpu\"}}",
                 "zero_optimization.offload_param = \"cpu\"", "must be an object");
    expect_error("{\"aio\": {\"single_submit\": null}}", "aio.single_submit = null");
    expect_error("[1, 2]", "test: the configuration must be a JSON object");
}

static void test_out_of_range_is_error(void **state)
{
    (void)state;
    expect_error("{\"aio\": {\"queue_depth\": 0}}", "test: aio.queue_depth = 0",
                 "must be an integer in [1, 4096]");
    expect_error("{\"aio\": {\"block_size\": 1000000}}", "aio.block_size = 1000000",
                 "multiple of 4096");
    expect_error("{\"zero_optimization\": {\"zero_hpz_partition_size\": 0}}",
                 "zero_optimization.zero_hpz_partition_size = 0");
    expect_error("{\"zero_optimization\": {\"reduce_bucket_size\": 0}}",
                 "zero_optimization.reduce_bucket_size = 0", ">= 1");
    expect_error("{\"optimizer\": {\"params\": {\"betas\": [0.9, 1.0]}}}",
                 "optimizer.params.betas = [0.9, 1.0]", "each a number in [0, 1)");
    expect_error("{\"optimizer\": {\"params\": {\"eps\": -1e-8}}}", "optimizer.params.eps");
    expect_error("{\"gradient_accumulation_steps\": 0}", "gradient_accumulation_steps = 0");
    expect_error("{\"ztier\": {\"hbm_capacity\": 0}}", "ztier.hbm_capacity = 0", ">= 1");
    expect_error("{\"zero_optimization\": {\"offload_param\": {\"pin_memory\": 2}}}",
                 "zero_optimization.offload_param.pin_memory = 2", "true or false");
}

static void test_unknown_enum_string_is_error(void **state)
{
    (void)state;
    expect_error("{\"zero_optimization\": {\"offload_param\": {\"device\": \"gpu\"}}}",
                 "zero_optimization.offload_param.device = \"gpu\"",
                 "must be one of \"none\", \"cpu\", \"nvme\"");
    expect_error("{\"optimizer\": {\"type\": \"SGD\"}}", "optimizer.type = \"SGD\"",
                 "\"AdamW\", \"Adam\"");
    expect_error("{\"ztier\": {\"device_backend\": \"tpu\"}}", "ztier.device_backend = \"tpu\"",
                 "\"host\", \"cuda\"");
    expect_error("{\"ztier\": {\"comm_backend\": \"gloo\"}}", "ztier.comm_backend = \"gloo\"");
    expect_error("{\"ztier\": {\"io_engine\": \"aio\"}}", "ztier.io_engine = \"aio\"",
                 "\"io_uring\"");
    expect_error("{\"ztier\": {\"adam_variant\": \"neon\"}}", "ztier.adam_variant = \"neon\"");
    expect_error("{\"ztier\": {\"log_level\": \"loud\"}}", "ztier.log_level = \"loud\"");
}

static void test_enum_strings_are_case_insensitive(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"optimizer\": {\"type\": \"adamw\"}, \"zero_optimization\": {\"offload_param\":"
             " {\"device\": \"CPU\"}}}",
             &c);
    assert_int_equal(c.optimizer, ZT_OPT_ADAMW);
    assert_int_equal(c.offload_param.device, ZT_TIER_HOST);
}

static void test_auto_where_not_allowed_is_error(void **state)
{
    (void)state;
    expect_error("{\"aio\": {\"queue_depth\": \"auto\"}}", "aio.queue_depth = \"auto\"",
                 "ztier cannot honour \"auto\" here", "integer in [1, 4096]");
    expect_error("{\"zero_optimization\": {\"stage\": \"auto\"}}",
                 "zero_optimization.stage = \"auto\"", "cannot honour \"auto\"");
    expect_error("{\"zero_optimization\": {\"offload_param\": {\"device\": \"auto\"}}}",
                 "zero_optimization.offload_param.device = \"auto\"", "\"none\", \"cpu\"");
    expect_error("{\"ztier\": {\"hbm_capacity\": \"auto\"}}", "ztier.hbm_capacity = \"auto\"",
                 "cannot honour");
}

static void test_auto_where_allowed_keeps_defaults(void **state)
{
    (void)state;
    zt_config c, d;
    parse_ok("{\"zero_optimization\": {\"stage3_prefetch_bucket_size\": \"auto\","
             " \"stage3_param_persistence_threshold\": \"auto\", \"stage3_max_live_parameters\":"
             " \"auto\", \"stage3_max_reuse_distance\": \"auto\", \"reduce_bucket_size\": \"auto\","
             " \"sub_group_size\": \"auto\"}, \"gradient_accumulation_steps\": \"auto\","
             " \"gradient_clipping\": \"auto\", \"bf16\": {\"enabled\": \"auto\"},"
             " \"fp16\": {\"enabled\": \"auto\"}, \"optimizer\": {\"params\": {\"lr\": \"auto\","
             " \"betas\": \"auto\", \"eps\": \"auto\", \"weight_decay\": \"auto\"}},"
             " \"ztier\": {\"comm_backend\": \"auto\", \"io_engine\": \"auto\"}}",
             &c);
    zt_config_defaults(&d);
    /* the values are the defaults; the "auto" keys that change training are recorded */
    memcpy(d.auto_keys, c.auto_keys, sizeof d.auto_keys);
    d.n_auto_keys = c.n_auto_keys;
    d.optimizer_given = c.optimizer_given;
    d.accumulation_given = c.accumulation_given;
    assert_memory_equal(&c, &d, sizeof c);
    assert_log_has("zero_optimization.sub_group_size = \"auto\": using ztier's default");
    assert_log_has("gradient_clipping = \"auto\"");
    char report[1024];
    assert_int_equal(zt_config_auto_report(&c, report, sizeof report), 8);
    assert_msg_has(
        report, (const char *const[]){
                    "gradient_accumulation_steps = 1", "gradient_clipping = 0",
                    "bf16.enabled = false", "fp16.enabled = false", "optimizer.params.lr = 0.001",
                    "optimizer.params.betas = [0.9, 0.999]", "optimizer.params.eps = 1e-08",
                    "optimizer.params.weight_decay = 0.01", NULL});
    assert_null(strstr(report, "bucket")); /* sizes change no result: not reported */
    /* a value given later (zt_config_set, the environment) takes the key off the list */
    zt_error err;
    assert_int_equal(zt_config_set_value(&c, "optimizer.params.lr", "3e-4", &err), ZT_OK);
    assert_int_equal(zt_config_set_value(&c, "gradient_clipping", "1.0", &err), ZT_OK);
    assert_int_equal(zt_config_auto_report(&c, report, sizeof report), 6);
    assert_null(strstr(report, "optimizer.params.lr"));
    assert_null(strstr(report, "gradient_clipping"));
}

static void test_integers_accept_integral_scientific_notation(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"reduce_bucket_size\": 5e8, \"stage\": 3.0,"
             " \"offload_param\": {\"max_in_cpu\": 9007199254740993}}, \"aio\": {\"queue_depth\":"
             " 6.4e1}}",
             &c);
    assert_int_equal(c.reduce_bucket_size, 500000000);
    assert_int_equal(c.aio_queue_depth, 64);
    assert_int_equal(c.offload_param.max_in_cpu, INT64_C(9007199254740993)); /* > 2^53, exact */
    expect_error("{\"aio\": {\"block_size\": 1.5}}", "aio.block_size = 1.5", "an integer");
    expect_error("{\"zero_optimization\": {\"reduce_bucket_size\": 2.5e-1}}",
                 "zero_optimization.reduce_bucket_size = 0.25");
}

static void test_booleans_accept_0_and_1(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"overlap_comm\": 0, \"zero_quantized_weights\": 1,"
             " \"zero_quantized_gradients\": true}, \"aio\": {\"overlap_events\": false}}",
             &c);
    assert_int_equal(c.overlap_comm, 0);
    assert_int_equal(c.zero_quantized_weights, 1);
    assert_int_equal(c.zero_quantized_gradients, 1);
    assert_int_equal(c.aio_overlap_events, 0);
    expect_error("{\"zero_optimization\": {\"overlap_comm\": 1.0}}",
                 "zero_optimization.overlap_comm = 1.0", "true or false");
}

/* Stages 1 and 2 take the optimizer offload but not the parameters' (DeepSpeed's rule), nor
 * hpZ (stage 3's); a stage beyond 3 or a bucket size below 1 is refused naming the key. */
static void test_stages_1_and_2(void **state)
{
    (void)state;
    for (int s = 1; s < 3; s++) {
        char json[160], want[64];
        zt_config c;
        snprintf(json, sizeof json,
                 "{\"zero_optimization\": {\"stage\": %d, \"offload_optimizer\": {\"device\": "
                 "\"cpu\"}, \"zero_quantized_weights\": true}}",
                 s);
        parse_ok(json, &c);
        assert_int_equal(c.stage, s);
        assert_int_equal(c.offload_optimizer.device, ZT_TIER_HOST);
        snprintf(json, sizeof json,
                 "{\"zero_optimization\": {\"stage\": %d, \"offload_param\": {\"device\": "
                 "\"cpu\"}}}",
                 s);
        snprintf(want, sizeof want, "test: zero_optimization.offload_param with stage %d", s);
        expect_error(json, want, "remove offload_param or set stage 3");
        snprintf(json, sizeof json,
                 "{\"zero_optimization\": {\"stage\": %d, \"zero_hpz_partition_size\": 2}}", s);
        expect_error(json, "zero_optimization.zero_hpz_partition_size = 2 with stage",
                     "remove it or set stage 3");
    }
    expect_error("{\"zero_optimization\": {\"stage\": 1, \"zero_quantized_gradients\": true}}",
                 "zero_optimization.zero_quantized_gradients with stage 1", "set stage 2 or 3");
    expect_error("{\"zero_optimization\": {\"stage\": 4}}", "zero_optimization.stage = 4",
                 "[0, 3]");
    expect_error("{\"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": 0}}",
                 "zero_optimization.reduce_bucket_size = 0", ">= 1");
    expect_error("{\"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": -5}}",
                 "zero_optimization.reduce_bucket_size = -5");
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"overlap_comm\": true}}", &c);
    assert_int_equal(c.stage, 3); /* absent means 3 */
}

/* Stage 0 is plain data parallelism: nothing offloaded, no ZeRO++ (DeepSpeed's rules). */
static void test_stage_0(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"stage\": 0}}", &c);
    assert_int_equal(c.stage, 0);
    expect_error("{\"zero_optimization\": {\"stage\": 0, \"offload_param\": {\"device\": "
                 "\"cpu\"}}}",
                 "zero_optimization.offload_param with stage 0", "set stage 3");
    expect_error("{\"zero_optimization\": {\"stage\": 0, \"offload_optimizer\": {\"device\": "
                 "\"nvme\", \"nvme_path\": \"/tmp\"}}}",
                 "zero_optimization.offload_optimizer with stage 0", "set stage 1, 2 or 3");
    expect_error("{\"zero_optimization\": {\"stage\": 0, \"zero_quantized_gradients\": true}}",
                 "ZeRO++", "with stage 0");
}

static void test_fp16_and_bf16_together_is_error(void **state)
{
    (void)state;
    expect_error("{\"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": true}}",
                 "test: bf16.enabled and fp16.enabled are both true", "at most one");
    zt_config c;
    parse_ok("{\"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": false}}", &c);
    assert_int_equal(c.bf16, 1);
    assert_int_equal(c.fp16, 0);
}

static void test_syntax_error_reports_line_and_column(void **state)
{
    (void)state;
    expect_error("{\n  \"aio\": {\n    \"queue_depth\": 4,,\n  }\n}",
                 "test: JSON syntax error at line 3, column");
    expect_error("", "JSON syntax error at line");
}

static void test_syntax_error_in_file_names_the_file(void **state)
{
    (void)state;
    const char *dir = getenv("ZT_TEST_TMPDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/test_config_bad.json", dir && *dir ? dir : "/tmp");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\n  \"zero_optimization\": {\n    \"stage\": 3\n  \n}\n", f);
    fclose(f);
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(zt_config_load_file(&c, path, &err), ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){path, "JSON syntax error at line", NULL});
    remove(path);
}

static void test_missing_file_is_error(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(zt_config_load_file(&c, "/nonexistent/ds.json", &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "cannot read config file '/nonexistent/ds.json'"));
}

static void test_null_offload_object_keeps_defaults(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"offload_param\": null, \"offload_optimizer\": {\"device\":"
             " \"cpu\", \"nvme_path\": null}}}",
             &c);
    assert_int_equal(c.offload_param.device, ZT_TIER_DEVICE);
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_HOST);
    assert_int_equal(c.offload_optimizer.n_nvme_paths, 0);
}

/* ---- nvme paths and byte sizes ---- */

static void test_nvme_path_is_a_string_or_a_list(void **state)
{
    (void)state;
    zt_config c;
    parse_ok(
        "{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": [\"/a\", \"/b\", \"/c\"]},"
        " \"offload_optimizer\": {\"nvme_path\": \"/d\"}}}",
        &c);
    assert_int_equal(c.offload_param.n_nvme_paths, 3);
    assert_string_equal(c.offload_param.nvme_path[2], "/c");
    assert_int_equal(c.offload_optimizer.n_nvme_paths, 1);
    assert_string_equal(c.offload_optimizer.nvme_path[0], "/d");
    expect_error("{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": []}}}",
                 "zero_optimization.offload_param.nvme_path = []", "list of 1 to 8");
    expect_error("{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": [\"/a\", \"/a\","
                 " \"/a\", \"/a\", \"/a\", \"/a\", \"/a\", \"/a\", \"/a\"]}}}",
                 "zero_optimization.offload_param.nvme_path = [", "list of 1 to 8");
    expect_error("{\"zero_optimization\": {\"offload_optimizer\": {\"nvme_path\": [\"/a\", 7]}}}",
                 "zero_optimization.offload_optimizer.nvme_path = [\"/a\", 7]", "non-empty");
    expect_error("{\"zero_optimization\": {\"offload_optimizer\": {\"nvme_path\": \"\"}}}",
                 "zero_optimization.offload_optimizer.nvme_path = \"\"", "non-empty");
}

static void test_nvme_device_without_path_fails_validation(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    parse_ok("{\"zero_optimization\": {\"offload_param\": {\"device\": \"nvme\"}}}", &c);
    assert_int_equal(zt_config_validate(&c, &err), ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){"zero_optimization.offload_param.nvme_path",
                                                  "set it", NULL});
    parse_ok("{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"nvme\"}}}", &c);
    assert_int_equal(zt_config_validate(&c, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "zero_optimization.offload_optimizer.nvme_path is not set"));
    setenv("ZT_NVME_PATH", "/scratch", 1); /* the environment can supply it */
    assert_int_equal(zt_config_apply_env(&c, &err), ZT_OK);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
}

static void test_byte_sizes_accept_suffixes(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"ztier\": {\"hbm_capacity\": \"2G\", \"host_capacity\": \"1.5KiB\"}}", &c);
    assert_int_equal(c.hbm_capacity, (int64_t)2 << 30);
    assert_int_equal(c.host_capacity, 1536);
    parse_ok("{\"ztier\": {\"hbm_capacity\": \"512MB\", \"host_capacity\": 4e9}}", &c);
    assert_int_equal(c.hbm_capacity, (int64_t)512 << 20);
    assert_int_equal(c.host_capacity, 4000000000);
    expect_error("{\"ztier\": {\"hbm_capacity\": \"lots\"}}", "ztier.hbm_capacity = \"lots\"",
                 "\"2G\"");
    expect_error("{\"ztier\": {\"hbm_capacity\": \"1e30G\"}}", "ztier.hbm_capacity = \"1e30G\"");
    expect_error("{\"ztier\": {\"hbm_capacity\": \"2Q\"}}", "ztier.hbm_capacity = \"2Q\"");
}

static void test_parse_bytes_helper(void **state)
{
    (void)state;
    int64_t v = -7;
    assert_int_equal(zt_config_parse_bytes("1024", &v), 0);
    assert_int_equal(v, 1024);
    assert_int_equal(zt_config_parse_bytes("3t", &v), 0);
    assert_int_equal(v, (int64_t)3 << 40);
    assert_int_equal(zt_config_parse_bytes("64k", &v), 0);
    assert_int_equal(v, 65536);
    v = -7;
    assert_int_equal(zt_config_parse_bytes("", &v), -1);
    assert_int_equal(zt_config_parse_bytes("G", &v), -1);
    assert_int_equal(zt_config_parse_bytes("0.3", &v), -1);
    assert_int_equal(zt_config_parse_bytes("inf", &v), -1);
    assert_int_equal(zt_config_parse_bytes("2GG", &v), -1);
    assert_int_equal(zt_config_parse_bytes(NULL, &v), -1);
    assert_int_equal(v, -7);
}

/* ---- optimizer ---- */

/* A setting that would change training ztier cannot honour is refused, with the reason:
 * amsgrad true (false, DeepSpeed's default, is accepted). */
static void test_amsgrad_true_is_refused(void **state)
{
    (void)state;
    expect_error("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"amsgrad\": true}}}",
                 "optimizer.params.amsgrad = true", "no AMSGrad variant",
                 "remove the key or set it to false");
    expect_error("{\"optimizer\": {\"params\": {\"amsgrad\": 1}}}", "optimizer.params.amsgrad = 1");
    zt_config c;
    zt_error err;
    assert_int_equal(
        parse("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"amsgrad\": false}}}", &c, &err),
        ZT_OK);
}

static void test_optimizer_type_sets_deepspeed_defaults(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"optimizer\": {\"type\": \"Adam\"}}", &c);
    assert_int_equal(c.optimizer, ZT_OPT_ADAMW); /* adam_w_mode defaults to true */
    assert_float_equal(c.weight_decay, 0.0f, 0);
    parse_ok("{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false}}}", &c);
    assert_int_equal(c.optimizer, ZT_OPT_ADAM);
    assert_int_equal(c.adam_w_mode, 0);
    parse_ok("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"adam_w_mode\": false}}}", &c);
    assert_int_equal(c.optimizer, ZT_OPT_ADAMW); /* AdamW is always decoupled */
    assert_float_equal(c.weight_decay, 0.01f, 0);
    parse_ok("{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"weight_decay\": \"auto\"}}}", &c);
    assert_float_equal(c.weight_decay, 0.0f, 0);
    parse_ok("{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 2e-4, \"betas\":"
             " [0.8, 0.99], \"eps\": 1e-6, \"weight_decay\": 0.05}}}",
             &c);
    assert_float_equal(c.lr, 2e-4f, 0);
    assert_float_equal(c.beta1, 0.8f, 0);
    assert_float_equal(c.beta2, 0.99f, 0);
    assert_float_equal(c.eps, 1e-6f, 0);
    assert_float_equal(c.weight_decay, 0.05f, 0);
}

static void test_fp16_settings_land(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"fp16\": {\"enabled\": true, \"loss_scale\": 128, \"initial_scale_power\": 12,"
             " \"loss_scale_window\": 500, \"hysteresis\": 3, \"min_loss_scale\": 0.5},"
             " \"gradient_clipping\": 0.5, \"gradient_accumulation_steps\": 4}",
             &c);
    assert_int_equal(c.fp16, 1);
    assert_float_equal(c.fp16_loss_scale, 128, 0);
    assert_int_equal(c.fp16_initial_scale_power, 12);
    assert_int_equal(c.fp16_loss_scale_window, 500);
    assert_int_equal(c.fp16_hysteresis, 3);
    assert_float_equal(c.fp16_min_loss_scale, 0.5f, 0);
    assert_float_equal(c.gradient_clipping, 0.5f, 0);
    assert_int_equal(c.gradient_accumulation_steps, 4);
}

/* ---- validation of an edited struct ---- */

static void expect_invalid(const zt_config *c, const char *fragment1, const char *fragment2)
{
    zt_error err;
    zt_error_clear(&err);
    assert_int_equal(zt_config_validate(c, &err), ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){fragment1, fragment2, NULL});
}

static void test_validate_checks_the_final_struct(void **state)
{
    (void)state;
    zt_config c;
    zt_config_defaults(&c);
    c.hbm_capacity = -1; /* 0 is "unset" */
    expect_invalid(&c, "ztier.hbm_capacity = -1", ">= 1");
    zt_config_defaults(&c);
    c.aio_block_size = 5000;
    expect_invalid(&c, "aio.block_size = 5000", "multiple of 4096");
    zt_config_defaults(&c);
    c.stage = 2;
    c.offload_param.device = ZT_TIER_HOST;
    expect_invalid(&c, "zero_optimization.offload_param with stage 2", "set stage 3");
    zt_config_defaults(&c);
    c.bf16 = c.fp16 = 1;
    expect_invalid(&c, "bf16.enabled", "fp16.enabled");
    zt_config_defaults(&c);
    c.offload_param.buffer_count = 0;
    expect_invalid(&c, "zero_optimization.offload_param.buffer_count = 0", "[1, 1000000]");
    zt_config_defaults(&c);
    c.beta2 = 1.5f;
    expect_invalid(&c, "optimizer.params.betas = [0.9, 1.5]", "[0, 1)");
    zt_config_defaults(&c);
    strcpy(c.adam_variant, "sse");
    expect_invalid(&c, "ztier.adam_variant = \"sse\"", "\"avx512\"");
    zt_config_defaults(&c);
    c.io_engine = (zt_io_engine_kind)7;
    expect_invalid(&c, "ztier.io_engine = 7", "\"threads\"");
}

static void test_validate_rejects_unsupported_backend_combinations(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    /* ZeRO++ quantizes through the device's kernels: the cuda backend takes it (over nccl) */
    parse_ok("{\"ztier\": {\"device_backend\": \"cuda\", \"comm_backend\": \"nccl\"},"
             " \"zero_optimization\": {\"zero_quantized_weights\": true,"
             " \"zero_quantized_gradients\": true, \"zero_hpz_partition_size\": 2}}",
             &c);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
    parse_ok("{\"ztier\": {\"device_backend\": \"cuda\", \"comm_backend\": \"mpi\"}}", &c);
    expect_invalid(&c, "ztier.comm_backend = \"mpi\"", "\"nccl\"");
}

/* ---- environment ---- */

static void test_environment_overrides_apply(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    setenv("ZT_LOG", "info", 1);
    setenv("ZT_HBM_CAPACITY", "512M", 1);
    setenv("ZT_NVME_PATH", "/nvme0/swap:/nvme1/swap", 1);
    setenv("ZT_IO_ENGINE", "threads", 1);
    setenv("ZT_ADAM_VARIANT", "scalar", 1);
    setenv("ZT_THREADS", "3", 1);
    setenv("ZT_TRACE", "/tmp/run.json", 1);
    if (zt_config_apply_env(&c, &err) != ZT_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(c.log_level, ZT_LOG_INFO);
    assert_int_equal(c.hbm_capacity, (int64_t)512 << 20);
    assert_int_equal(c.offload_param.n_nvme_paths, 2);
    assert_string_equal(c.offload_param.nvme_path[1], "/nvme1/swap");
    assert_string_equal(c.offload_optimizer.nvme_path[0], "/nvme0/swap");
    assert_int_equal(c.io_engine, ZT_IO_ENGINE_THREADS);
    assert_string_equal(c.adam_variant, "scalar");
    assert_int_equal(c.optimizer_threads, 3);
    assert_string_equal(c.trace_path, "/tmp/run.json");
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
    unsetenv("ZT_THREADS"), unsetenv("ZT_TRACE");
}

static void expect_env_error(const char *var, const char *value, const char *fragment)
{
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    setenv(var, value, 1);
    assert_int_equal(zt_config_apply_env(&c, &err), ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){var, fragment, NULL});
    unsetenv(var);
}

static void test_bad_environment_values_are_errors(void **state)
{
    (void)state;
    expect_env_error("ZT_LOG", "chatty", "ZT_LOG = \"chatty\"");
    expect_env_error("ZT_HBM_CAPACITY", "0", "ztier.hbm_capacity = \"0\"");
    expect_env_error("ZT_HBM_CAPACITY", "big", ">= 1");
    expect_env_error("ZT_IO_ENGINE", "floppy", "\"io_uring\"");
    expect_env_error("ZT_ADAM_VARIANT", "neon", "\"avx2\"");
    expect_env_error("ZT_NVME_PATH", "/a::/b", "separated by ':'");
    expect_env_error("ZT_THREADS", "-2", "ztier.optimizer_threads");
}

/* ---- DeepSpeed's older spellings ---- */

static void test_legacy_offload_switches_map_to_modern_keys(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"cpu_offload\": true}}", &c);
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_HOST);
    assert_int_equal(c.offload_param.device, ZT_TIER_DEVICE);
    assert_log_has("ztier warn [config] zero_optimization.cpu_offload is deprecated in "
                   "DeepSpeed: read as zero_optimization.offload_optimizer.device = \"cpu\"");
    parse_ok("{\"zero_optimization\": {\"cpu_offload_param\": true, "
             "\"cpu_offload_use_pin_memory\": false}}",
             &c);
    assert_int_equal(c.offload_param.device, ZT_TIER_HOST);
    assert_int_equal(c.offload_param.pin_memory, 0);
    assert_int_equal(c.offload_optimizer.pin_memory, 0);
    parse_ok("{\"zero_optimization\": {\"cpu_offload_params\": true}}", &c);
    assert_int_equal(c.offload_param.device, ZT_TIER_HOST);
    parse_ok("{\"zero_optimization\": {\"cpu_offload\": false}}", &c); /* changes nothing */
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_DEVICE);
    expect_error("{\"zero_optimization\": {\"cpu_offload\": true, \"offload_optimizer\": "
                 "{\"device\": \"nvme\", \"nvme_path\": \"/tmp\"}}}",
                 "zero_optimization.cpu_offload and zero_optimization.offload_optimizer.device "
                 "are both set",
                 "keep only zero_optimization.offload_optimizer.device");
    expect_error("{\"zero_optimization\": {\"cpu_offload\": \"yes\"}}",
                 "zero_optimization.cpu_offload = \"yes\"", "true or false");
}

static void test_deepspeed_spellings_are_understood(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\"zero_optimization\": {\"sub_group_size\": 0}}", &c); /* axolotl's configs */
    assert_int_equal(c.sub_group_size, 1000000000);
    parse_ok("{\"bfloat16\": {\"enabled\": true}}", &c);
    assert_int_equal(c.bf16, 1);
    assert_log_has("'bfloat16' is DeepSpeed's older name of 'bf16': read as 'bf16'");
}

/* The weight decay default follows the type whatever order sources gave them in. */
static void test_optimizer_defaults_follow_the_final_type(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    parse_ok("{\"optimizer\": {\"params\": {\"weight_decay\": 0.1}}}", &c);
    assert_int_equal(zt_config_set_value(&c, "optimizer.type", "Adam", &err), ZT_OK);
    assert_float_equal(c.weight_decay, 0.1f, 0); /* given: kept */
    parse_ok("{\"optimizer\": {\"type\": \"AdamW\"}}", &c);
    assert_float_equal(c.weight_decay, 0.01f, 0);
    assert_int_equal(zt_config_set_value(&c, "optimizer.type", "\"Adam\"", &err), ZT_OK);
    assert_float_equal(c.weight_decay, 0.0f, 0); /* Adam's default */
    assert_int_equal(c.optimizer, ZT_OPT_ADAMW); /* adam_w_mode */
    assert_int_equal(zt_config_set_value(&c, "optimizer.params.adam_w_mode", "false", &err), ZT_OK);
    assert_int_equal(c.optimizer, ZT_OPT_ADAM);
}

static void test_set_value_checks_like_a_file(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(
        zt_config_set_value(&c, "zero_optimization.offload_param.device", "nvme", &err), ZT_OK);
    assert_int_equal(c.offload_param.device, ZT_TIER_NVME);
    assert_int_equal(zt_config_set_value(&c, "optimizer.params.betas", "[0.8, 0.95]", &err), ZT_OK);
    assert_float_equal(c.beta2, 0.95f, 0);
    assert_int_equal(zt_config_set_value(&c, "zero_optimization.offload_optimizer",
                                         "{\"device\": \"cpu\", \"pin_memory\": false}", &err),
                     ZT_OK);
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_HOST);
    assert_int_equal(zt_config_set_value(&c, NULL, "{\"gradient_clipping\": 0.5}", &err), ZT_OK);
    assert_float_equal(c.gradient_clipping, 0.5f, 0);
    assert_int_equal(zt_config_set_value(&c, "zero_optimization.offload_param.nvme_path",
                                         "/mnt/fast disk/swap", &err),
                     ZT_OK);
    assert_string_equal(c.offload_param.nvme_path[0], "/mnt/fast disk/swap");
    /* errors: the path, the value and what is allowed; unknown keys are errors here */
    assert_int_equal(zt_config_set_value(&c, "aio.queue_depth", "0", &err), ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){"zt_config_set(\"aio.queue_depth\")",
                                                  "aio.queue_depth = 0", "[1, 4096]", NULL});
    assert_int_equal(zt_config_set_value(&c, "zero_optimization.offload_param.devce", "nvme", &err),
                     ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){"unknown key",
                                                  "did you mean "
                                                  "'zero_optimization.offload_param.device'?",
                                                  NULL});
    assert_int_equal(zt_config_set_value(&c, "optimizer..lr", "1", &err), ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){"empty part", NULL});
    assert_int_equal(zt_config_set_value(&c, ".lr", "1", &err), ZT_ERR_CONFIG);
    assert_int_equal(zt_config_set_value(&c, "optimizer.params.lr", NULL, &err), ZT_ERR_CONFIG);
}

/* ---- the scheduler section ---- */

static void test_scheduler_params_land(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    parse_ok("{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": 1e-5,"
             " \"warmup_max_lr\": 2e-3, \"warmup_num_steps\": 30, \"warmup_type\": \"linear\","
             " \"total_num_steps\": 5e2}}}",
             &c);
    assert_int_equal(c.sched.type, ZT_LR_WARMUP_DECAY);
    assert_float_equal(c.sched.warmup_min_lr, 1e-5f, 0);
    assert_float_equal(c.sched.warmup_max_lr, 2e-3f, 0);
    assert_int_equal(c.sched.warmup_num_steps, 30);
    assert_int_equal(c.sched.warmup_type, ZT_WARMUP_LINEAR);
    assert_int_equal(c.sched.total_num_steps, 500);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
    assert_int_equal(zt_config_check_schedule(&c, &err), ZT_OK);
    parse_ok("{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 1e-4,"
             " \"cycle_max_lr\": 1e-2, \"decay_lr_rate\": 0.5, \"cycle_first_step_size\": 7,"
             " \"cycle_second_step_size\": 9, \"decay_step_size\": 3, \"cycle_momentum\": false,"
             " \"cycle_min_mom\": 0.85, \"cycle_max_mom\": 0.95, \"decay_mom_rate\": 0.01,"
             " \"cycle_first_stair_count\": 0}}}",
             &c);
    assert_int_equal(c.sched.type, ZT_LR_ONE_CYCLE);
    assert_float_equal(c.sched.cycle_min_lr, 1e-4f, 0);
    assert_float_equal(c.sched.cycle_max_lr, 1e-2f, 0);
    assert_float_equal(c.sched.decay_lr_rate, 0.5f, 0);
    assert_int_equal(c.sched.cycle_first_step_size, 7);
    assert_int_equal(c.sched.cycle_second_step_size, 9);
    assert_int_equal(c.sched.decay_step_size, 3);
    assert_int_equal(c.sched.cycle_momentum, 0);
    assert_float_equal(c.sched.cycle_min_mom, 0.85f, 0);
    assert_float_equal(c.sched.cycle_max_mom, 0.95f, 0);
    assert_float_equal(c.sched.decay_mom_rate, 0.01f, 0);
    assert_int_equal(zt_config_check_schedule(&c, &err), ZT_OK);
    /* DeepSpeed's defaults */
    zt_config_defaults(&c);
    assert_int_equal(c.sched.type, ZT_LR_CONSTANT);
    assert_float_equal(c.sched.warmup_max_lr, 0.001f, 0);
    assert_int_equal(c.sched.warmup_num_steps, 1000);
    assert_float_equal(c.sched.cos_min_ratio, 0.0001f, 0);
    assert_int_equal(c.sched.cycle_first_step_size, 2000);
    assert_int_equal(c.sched.cycle_momentum, 1);
    assert_float_equal(c.sched.cycle_min_mom, 0.8f, 0);
    assert_float_equal(c.sched.cycle_max_mom, 0.9f, 0);
}

static void test_unsupported_scheduler_type_is_refused_by_name(void **state)
{
    (void)state;
    expect_error(
        "{\"scheduler\": {\"type\": \"LRRangeTest\"}}", "scheduler.type = \"LRRangeTest\"",
        "must be one of \"WarmupLR\", \"WarmupDecayLR\", \"WarmupCosineLR\", \"OneCycle\"");
    expect_error("{\"scheduler\": {\"type\": \"StepLR\"}}", "scheduler.type = \"StepLR\"");
    expect_error(
        "{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_type\": \"cubic\"}}}",
        "scheduler.params.warmup_type = \"cubic\"", "\"log\", \"linear\"");
}

static zt_status check_schedule(const char *json, zt_error *err)
{
    zt_config c;
    parse_ok(json, &c);
    zt_error_clear(err);
    return zt_config_check_schedule(&c, err);
}

#define expect_schedule_error(json, ...)                                    \
    do {                                                                    \
        zt_error err_;                                                      \
        assert_int_equal(check_schedule((json), &err_), ZT_ERR_CONFIG);     \
        assert_msg_has(err_.msg, (const char *const[]){__VA_ARGS__, NULL}); \
    } while (0)

static void test_scheduler_rules_at_commit(void **state)
{
    (void)state;
    expect_schedule_error(
        "{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"total_num_steps\": 10}}}",
        "scheduler.params.total_num_steps: WarmupLR takes no such parameter",
        "it takes warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type");
    expect_schedule_error("{\"scheduler\": {\"type\": \"WarmupDecayLR\"}}",
                          "scheduler.params.total_num_steps is not set: WarmupDecayLR needs it",
                          "zt_config_set(rt, \"scheduler.params.total_num_steps\"");
    expect_schedule_error("{\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": "
                          "{\"total_num_steps\": \"auto\"}}}",
                          "scheduler.params.total_num_steps was given as \"auto\" and got no value "
                          "after that: WarmupCosineLR needs it",
                          "WarmupCosineLR needs it");
    expect_schedule_error(
        "{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.1}}}",
        "scheduler.params.cycle_max_lr is not set: OneCycle needs it");
    /* warned as DeepSpeed warns, or where DeepSpeed would silently apply nothing */
    zt_error err;
    logbuf[0] = '\0';
    assert_int_equal(check_schedule("{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": "
                                    "{\"total_num_steps\": 50, \"warmup_num_steps\": 100}}}",
                                    &err),
                     ZT_OK);
    assert_log_has("total_num_steps = 50 is less than warmup_num_steps = 100");
    assert_int_equal(
        check_schedule("{\"scheduler\": {\"params\": {\"warmup_num_steps\": 5}}}", &err), ZT_OK);
    assert_log_has("scheduler.params are given but scheduler.type is not: no schedule is applied");
    assert_int_equal(check_schedule("{\"scheduler\": {\"type\": \"OneCycle\", \"params\": "
                                    "{\"cycle_min_lr\": 0.1, \"cycle_max_lr\": 0.2}}}",
                                    &err),
                     ZT_OK);
    assert_log_has("sets beta2 to 0.99, as DeepSpeed does: optimizer.params.betas[1] = 0.999");
    logbuf[0] = '\0';
    assert_int_equal(check_schedule("{\"scheduler\": {\"type\": \"OneCycle\", \"params\": "
                                    "{\"cycle_min_lr\": 0.1, \"cycle_max_lr\": 0.2, "
                                    "\"cycle_momentum\": false}}}",
                                    &err),
                     ZT_OK);
    assert_null(strstr(logbuf, "warn"));
}

/* HF's "auto"s in the scheduler: total_num_steps must get a value, warmup_max_lr follows the
 * optimizer's lr until given one, and a value given later takes the key off the report. */
static void test_scheduler_auto_values(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    parse_ok(
        "{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": \"auto\","
        " \"warmup_max_lr\": \"auto\", \"warmup_num_steps\": \"auto\", \"total_num_steps\":"
        " \"auto\"}}}",
        &c);
    assert_int_equal(zt_config_check_schedule(&c, &err), ZT_ERR_CONFIG);
    assert_int_equal(zt_config_set_value(&c, "optimizer.params.lr", "3e-4", &err), ZT_OK);
    assert_float_equal(c.sched.warmup_max_lr, 3e-4f, 0);
    assert_int_equal(zt_config_set_value(&c, "scheduler.params.total_num_steps", "400", &err),
                     ZT_OK);
    assert_int_equal(zt_config_check_schedule(&c, &err), ZT_OK);
    char report[1024];
    assert_int_equal(zt_config_auto_report(&c, report, sizeof report), 2);
    assert_msg_has(report, (const char *const[]){"scheduler.params.warmup_max_lr = 0.0003 "
                                                 "(optimizer.params.lr)",
                                                 "scheduler.params.warmup_num_steps = 1000", NULL});
    assert_int_equal(zt_config_set_value(&c, "scheduler.params.warmup_max_lr", "1e-3", &err),
                     ZT_OK);
    assert_int_equal(zt_config_set_value(&c, "optimizer.params.lr", "5e-4", &err), ZT_OK);
    assert_float_equal(c.sched.warmup_max_lr, 1e-3f, 0); /* given: no longer the optimizer's */
    assert_int_equal(zt_config_auto_report(&c, report, sizeof report), 1);
    assert_null(strstr(report, "warmup_max_lr"));
}

/* ---- typed setters (zt_config_set_string/_int/_double/_bool) ---- */

static zt_status set_typed(zt_config *c, const char *path, zt_config_type t, const char *text,
                           int64_t i, double d, zt_error *err)
{
    zt_config_value v = {t, text, i, d};
    zt_error_clear(err);
    return zt_config_set_typed(c, path, &v, err);
}

#define set_string(c, path, s, err) set_typed((c), (path), ZT_CONFIG_STRING, (s), 0, 0, (err))
#define set_int(c, path, i, err) set_typed((c), (path), ZT_CONFIG_INT, NULL, (i), 0, (err))
#define set_double(c, path, d, err) set_typed((c), (path), ZT_CONFIG_DOUBLE, NULL, 0, (d), (err))
#define set_bool(c, path, b, err) set_typed((c), (path), ZT_CONFIG_BOOL, NULL, (b), 0, (err))

/* Folder names that are JSON text stay the exact strings; zt_config_set reads them as JSON. */
static void test_typed_string_is_never_parsed(void **state)
{
    (void)state;
    static const char *const traps[] = {"1234", "null", "\"q\"", "true", "[\"/a\"]", " 7 "};
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(
            set_string(&c, "zero_optimization.offload_param.nvme_path", traps[i], &err), ZT_OK);
        assert_int_equal(c.offload_param.n_nvme_paths, 1);
        assert_string_equal(c.offload_param.nvme_path[0], traps[i]);
    }
    assert_int_equal(set_string(&c, "ztier.trace_path", "null", &err), ZT_OK);
    assert_string_equal(c.trace_path, "null");
    /* the JSON setter's meaning, for contrast */
    assert_int_equal(
        zt_config_set_value(&c, "zero_optimization.offload_param.nvme_path", "1234", &err),
        ZT_ERR_CONFIG);
    assert_int_equal(
        zt_config_set_value(&c, "zero_optimization.offload_param.nvme_path", "\"q\"", &err), ZT_OK);
    assert_string_equal(c.offload_param.nvme_path[0], "q");
    assert_int_equal(
        zt_config_set_value(&c, "zero_optimization.offload_param.nvme_path", "null", &err), ZT_OK);
    assert_int_equal(c.offload_param.n_nvme_paths, 0);
}

static void test_typed_setters_on_every_kind(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(set_int(&c, "aio.queue_depth", 7, &err), ZT_OK); /* INT */
    assert_int_equal(c.aio_queue_depth, 7);
    assert_int_equal(set_int(&c, "zero_optimization.offload_param.buffer_count", 9, &err), ZT_OK);
    assert_int_equal(c.offload_param.buffer_count, 9);                        /* I64 */
    assert_int_equal(set_double(&c, "gradient_clipping", 0.25, &err), ZT_OK); /* FLOAT */
    assert_float_equal(c.gradient_clipping, 0.25f, 0);
    assert_int_equal(set_int(&c, "gradient_clipping", 2, &err), ZT_OK); /* an int widens */
    assert_float_equal(c.gradient_clipping, 2.0f, 0);
    assert_int_equal(set_bool(&c, "fp16.enabled", 1, &err), ZT_OK); /* BOOL */
    assert_int_equal(c.fp16, 1);
    assert_int_equal(set_bool(&c, "fp16.enabled", 0, &err), ZT_OK);
    assert_int_equal(c.fp16, 0);
    assert_int_equal(set_int(&c, "ztier.hbm_capacity", 12345, &err), ZT_OK); /* BYTES */
    assert_int_equal(c.hbm_capacity, 12345);
    assert_int_equal(set_string(&c, "ztier.hbm_capacity", "2G", &err), ZT_OK);
    assert_int_equal(c.hbm_capacity, (int64_t)2 << 30);
    assert_int_equal(set_string(&c, "zero_optimization.offload_optimizer.device", "NVMe", &err),
                     ZT_OK); /* ENUM */
    assert_int_equal(c.offload_optimizer.device, ZT_TIER_NVME);
    assert_int_equal(set_string(&c, "ztier.adam_variant", "scalar", &err), ZT_OK); /* ENUM_STR */
    assert_string_equal(c.adam_variant, "scalar");
    assert_int_equal(set_string(&c, "ztier.trace_path", "/tmp/t {rank}.json", &err), ZT_OK);
    assert_string_equal(c.trace_path, "/tmp/t {rank}.json"); /* PATH */
    assert_int_equal(set_string(&c, "zero_optimization.offload_optimizer.nvme_path", "/x y", &err),
                     ZT_OK); /* PATHS: one folder */
    assert_int_equal(c.offload_optimizer.n_nvme_paths, 1);
    assert_string_equal(c.offload_optimizer.nvme_path[0], "/x y");
    assert_int_equal(set_bool(&c, "zero_optimization.cpu_offload_param", 1, &err), ZT_OK);
    assert_int_equal(c.offload_param.device, ZT_TIER_HOST);            /* LEGACY */
    assert_int_equal(set_int(&c, "steps_per_print", 64, &err), ZT_OK); /* IGNORED */
    assert_int_equal(set_bool(&c, "optimizer.params.amsgrad", 1, &err), ZT_ERR_CONFIG);
    assert_int_equal(set_bool(&c, "prescale_gradients", 1, &err), ZT_OK); /* DROPPED: warned */
    assert_log_has("prescale_gradients: gradients are summed over ranks");
    assert_int_equal(set_string(&c, "optimizer.params.lr", "auto", &err), ZT_OK);   /* "auto" */
    assert_int_equal(set_string(&c, "bfloat16.enabled", "x", &err), ZT_ERR_CONFIG); /* alias */
    assert_msg_has(err.msg, (const char *const[]){"bf16.enabled expects true or false, not a "
                                                  "string: use zt_config_set_bool",
                                                  NULL});
    assert_int_equal(set_bool(&c, "bfloat16.enabled", 1, &err), ZT_OK);
    assert_int_equal(c.bf16, 1);
}

#define expect_mismatch(call, ...)                                         \
    do {                                                                   \
        zt_config before_ = c;                                             \
        assert_int_equal((call), ZT_ERR_CONFIG);                           \
        assert_msg_has(err.msg, (const char *const[]){__VA_ARGS__, NULL}); \
        assert_memory_equal(&before_, &c, sizeof c); /* nothing changed */ \
    } while (0)

static void test_typed_setters_refuse_mismatches(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    expect_mismatch(set_string(&c, "gradient_clipping", "1.0", &err),
                    "zt_config_set_string(\"gradient_clipping\"): gradient_clipping expects a "
                    "number, not a string: use zt_config_set_double");
    expect_mismatch(set_bool(&c, "gradient_clipping", 1, &err), "expects a number, not a boolean");
    expect_mismatch(set_double(&c, "aio.queue_depth", 8.0, &err),
                    "aio.queue_depth expects an integer, not a number: use zt_config_set_int");
    expect_mismatch(set_string(&c, "aio.queue_depth", "8", &err), "use zt_config_set_int");
    expect_mismatch(set_int(&c, "fp16.enabled", 1, &err),
                    "fp16.enabled expects true or false, not an integer: use zt_config_set_bool");
    expect_mismatch(set_double(&c, "ztier.hbm_capacity", 1e9, &err),
                    "expects a byte count, not a number: use zt_config_set_int, or "
                    "zt_config_set_string");
    expect_mismatch(set_bool(&c, "zero_optimization.offload_param.device", 1, &err),
                    "expects one of its names, not a boolean: use zt_config_set_string");
    expect_mismatch(set_int(&c, "zero_optimization.offload_param.nvme_path", 1, &err),
                    "expects a folder path, not an integer: use zt_config_set_string");
    expect_mismatch(set_int(&c, "ztier.trace_path", 1, &err), "expects a path");
    expect_mismatch(set_string(&c, "optimizer.params.betas", "[0.9, 0.95]", &err),
                    "optimizer.params.betas expects a list [beta1, beta2], not a string: use "
                    "zt_config_set with JSON text");
    expect_mismatch(set_string(&c, "zero_optimization.offload_param", "cpu", &err),
                    "zero_optimization.offload_param is an object");
    expect_mismatch(set_int(&c, NULL, 1, &err), "needs the path of a key");
    expect_mismatch(set_string(&c, "optimizer.params.learning_rate", "x", &err),
                    "unknown key 'optimizer.params.learning_rate'");
    expect_mismatch(set_double(&c, "optimizer.params.lr", NAN, &err), "not a finite number");
    expect_mismatch(set_string(&c, "optimizer.params.lr", NULL, &err), "value is NULL");
    expect_mismatch(set_int(&c, "aio.queue_depth", 0, &err), "aio.queue_depth = 0", "[1, 4096]");
    expect_mismatch(set_string(&c, "zero_optimization.offload_param.device", "disk", &err),
                    "must be one of \"none\", \"cpu\", \"nvme\"");
}

/* ---- duplicate keys, ignored subtrees, long values ---- */

static void test_duplicate_keys_warn_with_both_positions(void **state)
{
    (void)state;
    zt_config c;
    parse_ok("{\n"
             "  \"zero_optimization\": {\"stage\": 3,\n"
             "    \"offload_param\": {\"device\": \"cpu\"},\n"
             "    \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/\u00e9/x\"}},\n"
             "  \"gradient_clipping\": 1.0, \"gradient_clipping\": 2.0,\n"
             "  \"tensorboard\": {\"a\": 1, \"a\": 2}\n"
             "}",
             &c);
    assert_log_has("test: key 'zero_optimization.offload_param' is given twice, at line 3, "
                   "column 5 and at line 4, column 5: the last one (line 4, column 5) is used");
    assert_log_has("test: key 'gradient_clipping' is given twice, at line 5, column 3 and at "
                   "line 5, column 29: the last one (line 5, column 29) is used");
    assert_int_equal(c.offload_param.device, ZT_TIER_NVME); /* the last one wins */
    assert_float_equal(c.gradient_clipping, 2.0f, 0);
    assert_null(strstr(logbuf, "'tensorboard.a'")); /* an ignored value is not looked into */
    /* the value of zt_config_set: positions in the value, paths under the key */
    zt_error err;
    logbuf[0] = '\0';
    assert_int_equal(zt_config_set_value(&c, "zero_optimization",
                                         "{\"stage\": 3,\n \"sub_group_size\": 1,"
                                         " \"sub_group_size\": 2}",
                                         &err),
                     ZT_OK);
    assert_log_has("zt_config_set(\"zero_optimization\"): key 'zero_optimization.sub_group_size' "
                   "is given twice, at line 2, column 2 and at line 2, column 23");
    assert_int_equal(c.sub_group_size, 2);
    /* keys written with escapes are the same key */
    logbuf[0] = '\0';
    parse_ok("{\"aio\": {\"queue_depth\": 4, \"queue\\u005fdepth\": 5}}", &c);
    assert_log_has("key 'aio.queue_depth' is given twice, at line 1, column 10 and at line 1, "
                   "column 28");
    assert_int_equal(c.aio_queue_depth, 5);
}

static char *tmp_path(const char *name)
{
    static char path[1024];
    const char *dir = getenv("ZT_TEST_TMPDIR");
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "/tmp", name);
    return path;
}

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* 50 MB of numbers under an ignored key and an unknown one: not built (it took 1.08 GB and
 * 5.5 s), the rest of the file read, and the lines of later syntax errors unchanged. */
static void test_ignored_subtrees_are_not_built(void **state)
{
    (void)state;
    char *path = tmp_path("test_config_big.json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"tensorboard\": {\"enabled\": false, \"values\": [", f);
    long bytes = 0;
    for (long i = 0; bytes < 25L << 20; i++)
        bytes += fprintf(f, "%s%ld.5", i ? "," : "", i % 10);
    fputs("]},\n \"my_trainer_extras\": [[", f);
    for (long i = 0; bytes < 50L << 20; i++)
        bytes += fprintf(f, "%s%ld", i % 1000 ? "," : "],\n[", i % 10);
    fputs("]],\n \"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 4096},"
          " \"gradient_clipping\": 0.75}\n",
          f);
    fclose(f);
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    long before = max_rss_kib();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(zt_config_load_file(&c, path, &err), ZT_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long grown_mib = (max_rss_kib() - before) / 1024;
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    print_message("50 MB config: %.2f s, peak RSS grew %ld MiB\n", secs, grown_mib);
    assert_true(grown_mib < 200); /* the text itself: 50 MB */
    assert_true(secs < 30);
    assert_int_equal(c.sub_group_size, 4096);
    assert_float_equal(c.gradient_clipping, 0.75f, 0);
    assert_log_has("unknown key 'my_trainer_extras' ignored");
    remove(path);
    /* blanked values keep the lines: a syntax error after one is at its own line */
    expect_error("{\"wandb\": [1,\n2,\n3],\n \"aio\": {\"queue_depth\": 4,,}}",
                 "JSON syntax error at line 4");
    /* and a syntax error inside an ignored value is still one */
    expect_error("{\"wandb\": {\"a\": [1, 2,, 3]}}", "JSON syntax error at line 1");
    expect_error("{\"wandb\": {\"a\": [01]}}", "JSON syntax error");
    expect_error("{\"wandb\": {\"a\": \"\\x\"}}", "JSON syntax error");
    /* amsgrad is read even when ignored */
    expect_error("{\"optimizer\": {\"params\": {\"amsgrad\": [true]}}}", "AMSGrad");
}

static int ends_with_place(const char *msg, const char *file)
{
    const char *open = strrchr(msg, '[');
    size_t n = strlen(file);
    return open && strncmp(open + 1, file, n) == 0 && open[1 + n] == ':' &&
           strspn(open + 2 + n, "0123456789") > 0 &&
           open[2 + n + strspn(open + 2 + n, "0123456789")] == ']' &&
           open[3 + n + strspn(open + 2 + n, "0123456789")] == '\0';
}

static void test_long_values_keep_reason_and_place(void **state)
{
    (void)state;
    char *long_path = malloc(5001), *json = malloc(6000);
    memset(long_path, 'd', 5000);
    long_path[0] = '/', long_path[5000] = '\0';
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(set_string(&c, "zero_optimization.offload_param.nvme_path", long_path, &err),
                     ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){"zero_optimization.offload_param.nvme_path = "
                                                  "\"/ddd",
                                                  "(5002 characters)", "too long",
                                                  "at most 1023 bytes", NULL});
    assert_true(ends_with_place(err.msg, "config_parse.c"));
    snprintf(json, 6000, "{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": \"%s\"}}}",
             long_path);
    assert_int_equal(parse(json, &c, &err), ZT_ERR_CONFIG);
    assert_msg_has(err.msg, (const char *const[]){"test: ", "too long", NULL});
    assert_true(ends_with_place(err.msg, "config_parse.c"));
    setenv("ZT_NVME_PATH", long_path, 1);
    assert_int_equal(zt_config_apply_env(&c, &err), ZT_ERR_CONFIG);
    assert_msg_has(err.msg,
                   (const char *const[]){"ZT_NVME_PATH", "(5000 characters)", "too long", NULL});
    assert_true(ends_with_place(err.msg, "config_parse.c"));
    /* any text: the start, the end and [file:line] stay, the middle goes */
    int line = __LINE__ + 1;
    ZT_ERR(&err, ZT_ERR_CONFIG, "start %s end: the fix", long_path);
    char place[64];
    snprintf(place, sizeof place, "end: the fix [test_config.c:%d]", line);
    assert_true(strncmp(err.msg, "start /ddd", 10) == 0);
    assert_non_null(strstr(err.msg, place));
    assert_true(ends_with_place(err.msg, "test_config.c"));
    assert_true(strlen(err.msg) < ZT_ERROR_MSG_MAX);
    /* a quote inside a word is not a quoted part that loses its middle */
    ZT_ERR(&err, ZT_ERR_CONFIG, "ztier's %s '%.1000s' reason", "x", long_path);
    assert_non_null(strstr(err.msg, "ztier's x '/ddd"));
    assert_non_null(strstr(err.msg, "' reason [test_config.c:"));
    char q[ZT_QUOTE_MAX];
    assert_string_equal(zt_text_quote(q, sizeof q, "short", '\''), "'short'");
    assert_string_equal(zt_text_quote(q, sizeof q, long_path + 4930, 0), long_path + 4930);
    free(long_path);
    free(json);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_defaults_are_the_documented_values),
        T(test_legacy_offload_switches_map_to_modern_keys),
        T(test_deepspeed_spellings_are_understood),
        T(test_optimizer_defaults_follow_the_final_type),
        T(test_set_value_checks_like_a_file),
        T(test_empty_object_keeps_defaults),
        T(test_hf_zero3_nvme_config_loads),
        T(test_striped_nvme_bf16_config_loads),
        T(test_hf_zero3_cpu_config_loads),
        T(test_ignored_keys_are_silent_at_warn_level),
        T(test_dropped_training_settings_warn),
        T(test_pydantic_field_names_are_aliases),
        T(test_communication_data_type),
        T(test_ztier_object_values_land),
        T(test_unknown_key_warns_with_full_path_and_suggestion),
        T(test_misspelt_object_and_misplaced_key_get_suggestions),
        T(test_negative_size_is_error_with_exact_message),
        T(test_wrong_json_type_is_error),
        T(test_out_of_range_is_error),
        T(test_unknown_enum_string_is_error),
        T(test_enum_strings_are_case_insensitive),
        T(test_auto_where_not_allowed_is_error),
        T(test_auto_where_allowed_keeps_defaults),
        T(test_integers_accept_integral_scientific_notation),
        T(test_booleans_accept_0_and_1),
        T(test_stages_1_and_2),
        T(test_stage_0),
        T(test_fp16_and_bf16_together_is_error),
        T(test_syntax_error_reports_line_and_column),
        T(test_syntax_error_in_file_names_the_file),
        T(test_missing_file_is_error),
        T(test_null_offload_object_keeps_defaults),
        T(test_nvme_path_is_a_string_or_a_list),
        T(test_nvme_device_without_path_fails_validation),
        T(test_byte_sizes_accept_suffixes),
        T(test_parse_bytes_helper),
        T(test_amsgrad_true_is_refused),
        T(test_optimizer_type_sets_deepspeed_defaults),
        T(test_fp16_settings_land),
        T(test_validate_checks_the_final_struct),
        T(test_validate_rejects_unsupported_backend_combinations),
        T(test_environment_overrides_apply),
        T(test_bad_environment_values_are_errors),
        T(test_scheduler_params_land),
        T(test_unsupported_scheduler_type_is_refused_by_name),
        T(test_scheduler_rules_at_commit),
        T(test_scheduler_auto_values),
        T(test_typed_string_is_never_parsed),
        T(test_typed_setters_on_every_kind),
        T(test_typed_setters_refuse_mismatches),
        T(test_duplicate_keys_warn_with_both_positions),
        T(test_ignored_subtrees_are_not_built),
        T(test_long_values_keep_reason_and_place),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}

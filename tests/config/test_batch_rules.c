/* SPDX-License-Identifier: MIT */
/* DeepSpeed's batch rules held to the values DeepSpeed's own config class computed
 * (tests/deepspeed/data/batch_rules.json, made by tests/deepspeed/gen_tables.py with the
 * DeepSpeed version named in it): for train_batch_size, train_micro_batch_size_per_gpu and
 * gradient_accumulation_steps each given or left out, on 1 to 4 data-parallel ranks,
 *  - through a runtime (one rank): commit accepts what DeepSpeed accepts, and
 *    zt_optimizer_get reports DeepSpeed's three values; what DeepSpeed refuses is
 *    ZT_ERR_CONFIG with a message naming the three numbers;
 *  - for every world size, the rules' function the runtime uses at commit
 *    (zt_config_batch_sizes) gives the same.
 * One documented difference: with neither batch size given DeepSpeed refuses the config;
 * ztier needs no batch size and takes gradient_accumulation_steps as given (or 1). */
#include "rt_fixture.h"
#include "runtime/config_batch.h"
#include "runtime/config_parse.h"
#include "ztier.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static json_t *tables; /* batch_rules.json */

/* The config of a row: the keys it gives (null: left out), nothing else batch-related. */
static const char *row_config(const json_t *given)
{
    static const char *const keys[3] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                        "gradient_accumulation_steps"};
    static char text[512];
    size_t used = (size_t)snprintf(text, sizeof text, "{");
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_array_get(given, i);
        if (json_is_integer(v))
            used += (size_t)snprintf(text + used, sizeof text - used, "\"%s\": %lld, ", keys[i],
                                     (long long)json_integer_value(v));
    }
    snprintf(text + used, sizeof text - used,
             "\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}}, "
             "\"ztier\": {\"hbm_capacity\": \"16M\"}}");
    return text;
}

static long long at(const json_t *row, const char *what, size_t i)
{
    return (long long)json_integer_value(json_array_get(json_object_get(row, what), i));
}

/* Neither batch size given: DeepSpeed's refusal ztier does not copy. */
static int no_batch_size(const json_t *row)
{
    return json_is_null(json_array_get(json_object_get(row, "given"), 0)) &&
           json_is_null(json_array_get(json_object_get(row, "given"), 1));
}

/* The message names the three numbers (given or derived): "train_batch_size 10, ...". */
static void assert_names_the_three(const char *msg, const json_t *row)
{
    const json_t *given = json_object_get(row, "given");
    static const char *const keys[3] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                        "gradient_accumulation_steps"};
    for (size_t i = 0; i < 3; i++) {
        char want[96];
        if (json_is_integer(json_array_get(given, i)))
            snprintf(want, sizeof want, "%s %lld", keys[i], at(row, "given", i));
        else
            snprintf(want, sizeof want, "%s ", keys[i]);
        if (!strstr(msg, want))
            fail_msg("the refusal lacks \"%s\": %s", want, msg);
    }
    if (!strstr(msg, "data-parallel rank"))
        fail_msg("the refusal does not name the ranks: %s", msg);
}

static zt_status dummy_register(zt_runtime *rt, void *user)
{
    int64_t shape[1] = {64};
    int *layer = user, param;
    zt_init init = {ZT_INIT_ZEROS, 0, 0, 0, NULL, NULL};
    zt_status st = zt_layer_add(rt, "l", layer);
    return st == ZT_OK ? zt_param_add(rt, *layer, "l.w", shape, 1, &init, &param) : st;
}

/* Rows of world size 1, each through zt_runtime_create / commit / zt_optimizer_get. */
static void test_batch_rules_through_the_runtime(void **state)
{
    (void)state;
    json_t *row;
    size_t i, checked = 0;
    json_array_foreach(json_object_get(tables, "cases"), i, row)
    {
        if (json_integer_value(json_object_get(row, "world")) != 1)
            continue;
        const char *cfg = row_config(json_object_get(row, "given"));
        zt_options o = ZT_OPTIONS_INIT;
        o.log_level = 0;
        zt_runtime *rt = NULL;
        int layer;
        zt_status st = rt_fixture_try(&o, cfg, dummy_register, &layer, &rt);
        checked++;
        if (json_object_get(row, "error") && !no_batch_size(row)) {
            if (st != ZT_ERR_CONFIG)
                fail_msg("%s: DeepSpeed refuses it (%s), ztier's commit returned %d", cfg,
                         json_string_value(json_object_get(row, "error")), (int)st);
            assert_names_the_three(zt_last_error(rt), row);
            zt_runtime_destroy(rt);
            continue;
        }
        if (st != ZT_OK)
            fail_msg("%s: refused: %s", cfg, zt_last_error(rt));
        zt_optimizer_info oi = ZT_OPTIMIZER_INFO_INIT;
        assert_int_equal(zt_optimizer_get(rt, &oi), ZT_OK);
        if (no_batch_size(row)) {
            long long gas = json_is_integer(json_array_get(json_object_get(row, "given"), 2))
                                ? at(row, "given", 2)
                                : 1;
            assert_int_equal(oi.gradient_accumulation_steps, gas);
            assert_int_equal(oi.train_batch_size, 0);
            assert_int_equal(oi.train_micro_batch_size_per_gpu, 0);
        } else {
            if (oi.train_batch_size != at(row, "result", 0) ||
                oi.train_micro_batch_size_per_gpu != at(row, "result", 1) ||
                oi.gradient_accumulation_steps != at(row, "result", 2))
                fail_msg("%s: ztier %d, %d, %d; DeepSpeed %lld, %lld, %lld", cfg,
                         oi.train_batch_size, oi.train_micro_batch_size_per_gpu,
                         oi.gradient_accumulation_steps, at(row, "result", 0), at(row, "result", 1),
                         at(row, "result", 2));
        }
        zt_runtime_destroy(rt);
    }
    assert_true(checked >= 40);
}

/* Every row, every world size, through the function commit applies. */
static void test_batch_rules_every_world_size(void **state)
{
    (void)state;
    json_t *row;
    size_t i, refused = 0, derived = 0;
    json_array_foreach(json_object_get(tables, "cases"), i, row)
    {
        const char *cfg = row_config(json_object_get(row, "given"));
        int world = (int)json_integer_value(json_object_get(row, "world"));
        zt_config c;
        zt_error err;
        zt_config_defaults(&c);
        if (zt_config_parse(&c, cfg, "test", &err) != ZT_OK)
            fail_msg("%s: %s", cfg, err.msg);
        zt_batch_sizes b;
        zt_error_clear(&err);
        zt_status st = zt_config_batch_sizes(&c, world, &b, &err);
        if (no_batch_size(row)) {
            assert_int_equal(st, ZT_OK);
            assert_int_equal(b.train_batch, 0);
            continue;
        }
        if (json_object_get(row, "error")) {
            if (st != ZT_ERR_CONFIG)
                fail_msg("%s on %d ranks: DeepSpeed refuses it (%s), ztier gives %d, %d, %d", cfg,
                         world, json_string_value(json_object_get(row, "error")), b.train_batch,
                         b.micro_batch, b.accumulation);
            assert_names_the_three(err.msg, row);
            refused++;
            continue;
        }
        if (st != ZT_OK)
            fail_msg("%s on %d ranks: refused: %s", cfg, world, err.msg);
        if (b.train_batch != at(row, "result", 0) || b.micro_batch != at(row, "result", 1) ||
            b.accumulation != at(row, "result", 2))
            fail_msg("%s on %d ranks: ztier %d, %d, %d; DeepSpeed %lld, %lld, %lld", cfg, world,
                     b.train_batch, b.micro_batch, b.accumulation, at(row, "result", 0),
                     at(row, "result", 1), at(row, "result", 2));
        derived++;
    }
    print_message("%zu combinations as DeepSpeed %s derives them, %zu refused as it does\n",
                  derived, json_string_value(json_object_get(tables, "deepspeed")), refused);
    assert_true(derived >= 40 && refused >= 40);
}

/* "auto" (as the HF integration leaves it) is not given: with both batch sizes the
 * accumulation is derived and not reported as an "auto" default; null is not given either. */
static void test_auto_and_null_are_not_given(void **state)
{
    (void)state;
    zt_config c;
    zt_error err;
    zt_config_defaults(&c);
    assert_int_equal(
        zt_config_parse(&c,
                        "{\"train_batch_size\": 24, \"train_micro_batch_size_per_gpu\":"
                        " 3, \"gradient_accumulation_steps\": \"auto\"}",
                        "test", &err),
        ZT_OK);
    assert_int_equal(zt_config_apply_batch(&c, 2, &err), ZT_OK);
    assert_int_equal(c.gradient_accumulation_steps, 4); /* 24 / 3 / 2 */
    assert_int_equal(zt_config_auto_report(&c, NULL, 0), 0);
    zt_config_defaults(&c);
    assert_int_equal(zt_config_parse(&c,
                                     "{\"train_batch_size\": \"auto\", "
                                     "\"train_micro_batch_size_per_gpu\": null, "
                                     "\"gradient_accumulation_steps\": 3}",
                                     "test", &err),
                     ZT_OK);
    assert_int_equal(zt_config_validate(&c, &err), ZT_OK);
    assert_int_equal(zt_config_apply_batch(&c, 4, &err), ZT_OK);
    assert_int_equal(c.gradient_accumulation_steps, 3);
}

/* A caller built before the batch sizes were added (a shorter struct_size) gets the fields it
 * has and nothing written past them. */
static void test_older_callers_struct_is_not_overrun(void **state)
{
    (void)state;
    zt_options o = ZT_OPTIONS_INIT;
    o.log_level = 0;
    zt_runtime *rt = NULL;
    int layer;
    const char *cfg = "{\"train_batch_size\": 24, \"train_micro_batch_size_per_gpu\": 3, "
                      "\"ztier\": {\"hbm_capacity\": \"16M\"}}";
    assert_int_equal(rt_fixture_try(&o, cfg, dummy_register, &layer, &rt), ZT_OK);
    union {
        zt_optimizer_info info;
        unsigned char bytes[sizeof(zt_optimizer_info)];
    } u;
    size_t old = offsetof(zt_optimizer_info, train_batch_size);
    memset(&u, 0xab, sizeof u);
    u.info.struct_size = old;
    assert_int_equal(zt_optimizer_get(rt, &u.info), ZT_OK);
    assert_int_equal(u.info.gradient_accumulation_steps, 8);
    for (size_t i = old; i < sizeof u; i++)
        assert_int_equal(u.bytes[i], 0xab);
    zt_optimizer_info full = ZT_OPTIMIZER_INFO_INIT;
    assert_int_equal(zt_optimizer_get(rt, &full), ZT_OK);
    assert_int_equal(full.train_batch_size, 24);
    assert_int_equal(full.train_micro_batch_size_per_gpu, 3);
    zt_runtime_destroy(rt);
}

static int setup(void **state)
{
    (void)state;
    json_error_t e;
    tables = json_load_file(ZT_DS_TABLES "/batch_rules.json", 0, &e);
    if (!tables)
        fprintf(stderr, "%s:%d: %s\n", ZT_DS_TABLES "/batch_rules.json", e.line, e.text);
    return tables ? rt_fixture_open("batch_rules") : -1;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(tables);
    return rt_fixture_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_rules_through_the_runtime),
        cmocka_unit_test(test_batch_rules_every_world_size),
        cmocka_unit_test(test_auto_and_null_are_not_given),
        cmocka_unit_test(test_older_callers_struct_is_not_overrun),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

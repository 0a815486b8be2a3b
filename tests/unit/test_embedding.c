/* SPDX-License-Identifier: MIT */
/* What a trainer that embeds ztier relies on, through the public API only:
 *  - offload asked for but every layer kept resident by the persistence threshold: a warning
 *    at commit naming the key, and zt_stats.persistent_bytes;
 *  - the effective optimizer: logged at commit, zt_optimizer_get, per-step weight decay
 *    (equal to configuring it), invalid per-step values refused with nothing changed;
 *  - zt_config_set: the merge order file < text < calls < environment, errors that name the
 *    key, rules between keys checked at commit, refusal after commit and for comm_backend;
 *    the typed setters take folder names that are JSON text ("1234", "null") as they are,
 *    and a long missing nvme_path keeps the reason and [file:line] in the message;
 *  - ZT_INFERENCE fetches between and inside steps: no warning, no deviation, prefetching
 *    of the next step unchanged, values equal to the parameters;
 *  - zt_param_write: fetches and zt_param_read see the written values on every placement
 *    (bf16 copies rounded from them), training continues, bad input refused;
 *  - init from the caller's arrays (ZT_INIT_COPY) and a failing init callback;
 *  - errors returned are not logged, and getters leave "" behind. */
#include "rt_fixture.h"
#include "train.h"

#include <math.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
static char logbuf[65536];

static void capture(void *user, int level, const char *msg)
{
    (void)user;
    size_t used = strlen(logbuf);
    snprintf(logbuf + used, sizeof logbuf - used, "%d %s\n", level, msg);
}

static zt_runtime *create(const char *json, int log_level)
{
    zt_options o = ZT_OPTIONS_INIT;
    o.log_level = log_level;
    o.log_fn = capture;
    logbuf[0] = '\0';
    return rt_fixture_create(&o, json);
}

static zt_runtime *model(const char *json, int log_level, minimal_model *m)
{
    zt_runtime *rt = create(json, log_level);
    rt_fixture_register_mlp(rt, &dims, 3, m);
    rt_fixture_commit(rt);
    return rt;
}

static void train(zt_runtime *rt, const minimal_model *m, int from, int to)
{
    for (int s = from; s < to; s++) {
        float loss;
        assert_int_equal(minimal_micro_step(rt, m, s, 0, dims.batch, &loss), ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
}

static float *read_param(zt_runtime *rt, int id, int64_t n)
{
    float *buf = malloc(sizeof(float) * (size_t)n);
    assert_int_equal(zt_param_read(rt, id, buf, n), ZT_OK);
    return buf;
}

static void assert_log_has(const char *fragment)
{
    if (!strstr(logbuf, fragment))
        fail_msg("log lacks '%s'; log:\n%s", fragment, logbuf);
}

/* ---- 1. persistence ---- */

static void test_offload_kept_resident_is_reported(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = model("{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}},"
                           " \"ztier\": {\"hbm_capacity\": \"4M\"}}",
                           1, &m);
    assert_log_has("1 ztier warn [runtime] zero_optimization.offload_param.device is \"cpu\", "
                   "but all 3 layers are below "
                   "zero_optimization.stage3_param_persistence_threshold (100000 elements)");
    assert_log_has("lower the threshold (0 offloads every layer)");
    zt_stats s = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    /* fp32, each parameter padded to 16 elements: 16x48+48, 48x48+48, 48x4+4 */
    uint64_t want = 4 * (uint64_t)((768 + 48) + (2304 + 48) + (192 + 16));
    assert_int_equal(s.persistent_bytes, want);
    assert_int_equal(s.persistent_layers, 3);
    zt_runtime_destroy(rt);

    rt = model("{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}, "
               "\"stage3_param_persistence_threshold\": 1000}, \"ztier\": {\"hbm_capacity\": "
               "\"4M\"}}",
               2, &m);
    assert_log_has("2 of 3 layers (");
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_int_equal(s.persistent_layers, 2); /* fc2 (2352 elements) is offloaded */
    zt_runtime_destroy(rt);
}

/* ---- 2. the effective optimizer ---- */

static void test_effective_optimizer_is_logged_and_readable(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = model("{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 2e-4}},"
                           " \"gradient_clipping\": 1.5, \"ztier\": {\"hbm_capacity\": \"4M\"}}",
                           2, &m);
    assert_log_has("ztier warn [runtime] effective settings: AdamW, lr 0.0002 (zt_step_args.lr "
                   "overrides), betas (0.9, 0.999), eps 1e-08, weight decay 0 (the type's "
                   "default), fp32, gradient clipping at norm 1.5, 1 accumulation steps, "
                   "schedule none");
    zt_optimizer_info o = ZT_OPTIMIZER_INFO_INIT;
    assert_int_equal(zt_optimizer_get(rt, &o), ZT_OK);
    assert_int_equal(o.adamw, 1);
    assert_true(o.lr == 2e-4f && o.beta1 == 0.9f && o.beta2 == 0.999f && o.eps == 1e-8f);
    assert_true(o.weight_decay == 0.0f && o.gradient_clipping == 1.5f);
    assert_int_equal(o.gradient_accumulation_steps, 1);
    assert_string_equal(o.scheduler, "");
    zt_optimizer_info small = {.struct_size = offsetof(zt_optimizer_info, lr), .lr = 123.0f};
    assert_int_equal(zt_optimizer_get(rt, &small), ZT_OK); /* an older, shorter struct */
    assert_true(small.lr == 123.0f);                       /* untouched beyond its size */
    zt_runtime_destroy(rt);
}

/* A weight decay passed per step equals the same weight decay configured. */
static void test_per_step_weight_decay(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *a = model("{\"optimizer\": {\"params\": {\"weight_decay\": 0.0}}, "
                          "\"ztier\": {\"hbm_capacity\": \"4M\"}}",
                          1, &m);
    zt_runtime *b = model("{\"optimizer\": {\"params\": {\"weight_decay\": 0.3, \"lr\": 0.01}}, "
                          "\"ztier\": {\"hbm_capacity\": \"4M\"}}",
                          1, &m);
    for (int s = 0; s < 3; s++) {
        float loss;
        zt_step_args args = ZT_STEP_ARGS_INIT;
        args.weight_decay = 0.3f;
        args.lr = 0.01f;
        assert_int_equal(minimal_micro_step(a, &m, s, 0, dims.batch, &loss), ZT_OK);
        assert_int_equal(zt_step(a, &args, NULL), ZT_OK);
        assert_int_equal(minimal_micro_step(b, &m, s, 0, dims.batch, &loss), ZT_OK);
        assert_int_equal(zt_step(b, NULL, NULL), ZT_OK);
    }
    float *wa = read_param(a, m.weight[1], 48 * 48), *wb = read_param(b, m.weight[1], 48 * 48);
    assert_memory_equal(wa, wb, sizeof(float) * 48 * 48);
    free(wa), free(wb);
    zt_runtime_destroy(a), zt_runtime_destroy(b);
}

static void test_invalid_step_values_change_nothing(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = model("{\"ztier\": {\"hbm_capacity\": \"4M\"}}", 1, &m);
    float loss;
    assert_int_equal(minimal_micro_step(rt, &m, 0, 0, dims.batch, &loss), ZT_OK);
    float *before = read_param(rt, m.weight[0], 16 * 48);
    const float bad[] = {INFINITY, -INFINITY, NAN, 1e30f, 1000.5f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        zt_step_args args = ZT_STEP_ARGS_INIT;
        args.lr = bad[i];
        assert_int_equal(zt_step(rt, &args, NULL), ZT_ERR_ARGUMENT);
        assert_non_null(strstr(zt_last_error(rt), "zt_step_args.lr"));
        args = (zt_step_args)ZT_STEP_ARGS_INIT;
        args.weight_decay = bad[i];
        assert_int_equal(zt_step(rt, &args, NULL), ZT_ERR_ARGUMENT);
        assert_non_null(strstr(zt_last_error(rt), "zt_step_args.weight_decay"));
    }
    float *after = read_param(rt, m.weight[0], 16 * 48);
    assert_memory_equal(before, after, sizeof(float) * 16 * 48);
    int64_t steps = -1;
    assert_int_equal(zt_step_count(rt, &steps), ZT_OK);
    assert_int_equal(steps, 0);
    zt_step_info info = ZT_STEP_INFO_INIT; /* the gradients were kept: the step applies them */
    assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
    assert_int_equal(info.micro_steps, 1);
    free(before), free(after);
    zt_runtime_destroy(rt);
}

/* ---- 3. zt_config_set ---- */

static void test_config_merge_order(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/ds.json", rt_fixture_dir());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"optimizer\": {\"params\": {\"lr\": 0.1, \"eps\": 1e-6}}, \"gradient_clipping\": 2.0,"
          " \"ztier\": {\"hbm_capacity\": \"2M\"}}",
          f);
    fclose(f);
    zt_options o = ZT_OPTIONS_INIT;
    o.config_path = path;
    zt_runtime *rt = NULL;
    setenv("ZT_HBM_CAPACITY", "8M", 1);
    assert_int_equal(zt_runtime_create(&o,
                                       "{\"optimizer\": {\"params\": {\"lr\": 0.2, "
                                       "\"weight_decay\": 0.05}}}",
                                       &rt),
                     ZT_OK);
    zt_optimizer_info info = ZT_OPTIMIZER_INFO_INIT;
    assert_int_equal(zt_optimizer_get(rt, &info), ZT_OK);
    assert_true(info.lr == 0.2f && info.eps == 1e-6f && info.gradient_clipping == 2.0f);
    assert_int_equal(zt_config_set(rt, "optimizer.params.lr", "0.3"), ZT_OK);
    assert_int_equal(zt_config_set(rt, "ztier.hbm_capacity", "\"4M\""), ZT_OK); /* env wins */
    assert_int_equal(zt_optimizer_get(rt, &info), ZT_OK);
    assert_true(info.lr == 0.3f && info.eps == 1e-6f && info.weight_decay == 0.05f);
    /* a rejected call changes nothing and names the key and what is allowed */
    assert_int_equal(zt_config_set(rt, "optimizer.params.lr", "-1"), ZT_ERR_CONFIG);
    assert_non_null(strstr(zt_last_error(rt), "optimizer.params.lr = -1"));
    assert_int_equal(zt_config_set(rt, "optimizer.params.learning_rate", "1"), ZT_ERR_CONFIG);
    assert_non_null(strstr(zt_last_error(rt), "unknown key 'optimizer.params.learning_rate'"));
    assert_int_equal(zt_config_set(rt, "ztier.comm_backend", "mpi"), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "cannot change after zt_runtime_create"));
    assert_int_equal(zt_optimizer_get(rt, &info), ZT_OK);
    assert_true(info.lr == 0.3f);
    minimal_model m;
    assert_int_equal(minimal_register(rt, &dims, 3, &m), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    zt_stats s = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_int_equal(s.device_bytes_capacity, 8u << 20);
    assert_int_equal(zt_config_set(rt, "optimizer.params.lr", "0.1"), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "after zt_runtime_commit"));
    unsetenv("ZT_HBM_CAPACITY");
    zt_runtime_destroy(rt);
    unlink(path);
}

/* Keys set one at a time may pass through states the rules between keys forbid. */
static void test_config_rules_between_keys_wait_for_commit(void **state)
{
    (void)state;
    zt_runtime *rt = create("{\"ztier\": {\"hbm_capacity\": \"4M\"}}", 1);
    assert_int_equal(zt_config_set(rt, "zero_optimization.offload_optimizer.device", "nvme"),
                     ZT_OK); /* no nvme_path yet */
    assert_int_equal(
        zt_config_set(rt, "zero_optimization.offload_optimizer.nvme_path", rt_fixture_dir()),
        ZT_OK);
    assert_int_equal(zt_config_set(rt, "fp16.enabled", "true"), ZT_OK);
    assert_int_equal(zt_config_set(rt, "bf16.enabled", "true"), ZT_OK); /* both, for now */
    minimal_model m;
    assert_int_equal(minimal_register(rt, &dims, 3, &m), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_ERR_CONFIG);
    assert_non_null(strstr(zt_last_error(rt), "bf16.enabled and fp16.enabled are both true"));
    zt_runtime_destroy(rt);
}

/* ---- 4. inference passes ---- */

/* An evaluation pass fetched with ZT_FORWARD every other step changes the recorded order
 * again and again: one warning at the default level, naming ZT_INFERENCE; the later changes
 * are counted (zt_stats.trace_deviations), not printed. */
/* HF-style "auto" for a value that changes training, with no value from the trainer by
 * commit: one warning at the default level naming each key and the default it got; a key the
 * trainer set with zt_config_set after the file said "auto" is not in it. */
static void test_auto_left_to_defaults_warns_at_commit(void **state)
{
    (void)state;
    zt_runtime *rt = create("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\","
                            " \"weight_decay\": \"auto\"}}, \"gradient_clipping\": \"auto\","
                            " \"zero_optimization\": {\"reduce_bucket_size\": \"auto\"}}",
                            1); /* warnings */
    assert_int_equal(zt_config_set(rt, "optimizer.params.lr", "3e-4"), ZT_OK);
    minimal_model m;
    rt_fixture_register_mlp(rt, &dims, 3, &m);
    rt_fixture_commit(rt);
    const char *w = strstr(logbuf, "\"auto\" with no value from the trainer");
    if (!w)
        fail_msg("no warning; log:\n%s", logbuf);
    assert_non_null(strstr(w, "optimizer.params.weight_decay = 0.01"));
    assert_non_null(strstr(w, "gradient_clipping = 0"));
    assert_null(strstr(w, "optimizer.params.lr"));
    assert_null(strstr(w, "reduce_bucket_size"));         /* a size: changes no result */
    assert_null(strstr(w + 1, "\"auto\" with no value")); /* once */
    zt_runtime_destroy(rt);
}

/* Sizes under "auto" come from the model's hidden size as the HF/DeepSpeed integration fills
 * them (h*h, 0.9*h*h, 10*h): the minimal model's three 2-D weights (48x16, 48x48, 4x48)
 * share 48. The threshold shows in what stays resident: 480 elements keeps fc3 only (196). */
static void test_auto_sizes_come_from_the_hidden_size(void **state)
{
    (void)state;
    const char *autos =
        "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}, "
        "\"stage3_param_persistence_threshold\": \"auto\", "
        "\"stage3_prefetch_bucket_size\": \"auto\", "
        "\"reduce_bucket_size\": \"auto\"}, \"ztier\": {\"hbm_capacity\": \"4M\"%s}}";
    char cfg[512];
    snprintf(cfg, sizeof cfg, autos, "");
    minimal_model m;
    zt_runtime *rt = model(cfg, 2, &m); /* info */
    const int64_t h = 48;
    char want[256];
    snprintf(want, sizeof want,
             "\"auto\" sizes from hidden size %lld (a dimension of 3 of the 3 2-D parameters",
             (long long)h);
    assert_log_has(want);
    snprintf(want, sizeof want, "zero_optimization.stage3_param_persistence_threshold = %lld",
             (long long)(10 * h));
    assert_log_has(want);
    snprintf(want, sizeof want, "zero_optimization.stage3_prefetch_bucket_size = %lld",
             (long long)(9 * h * h / 10));
    assert_log_has(want);
    snprintf(want, sizeof want, "zero_optimization.reduce_bucket_size = %lld", (long long)(h * h));
    assert_log_has(want);
    zt_stats s = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_int_equal(s.persistent_layers, 1);
    zt_runtime_destroy(rt);

    /* ztier.hidden_size 100: threshold 1000 keeps fc1 (816) and fc3 */
    snprintf(cfg, sizeof cfg, autos, ", \"hidden_size\": 100");
    rt = model(cfg, 2, &m);
    assert_log_has("\"auto\" sizes from ztier.hidden_size 100: ");
    assert_log_has("zero_optimization.stage3_param_persistence_threshold = 1000");
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_int_equal(s.persistent_layers, 2);
    zt_runtime_destroy(rt);

    /* a value given after "auto" is kept */
    snprintf(cfg, sizeof cfg, autos, "");
    rt = create(cfg, 2);
    assert_int_equal(zt_config_set(rt, "zero_optimization.stage3_param_persistence_threshold", "0"),
                     ZT_OK);
    rt_fixture_register_mlp(rt, &dims, 3, &m);
    rt_fixture_commit(rt);
    assert_log_has("zero_optimization.stage3_prefetch_bucket_size = 2073");
    if (strstr(logbuf, "stage3_param_persistence_threshold = 480"))
        fail_msg("the given threshold was replaced; log:\n%s", logbuf);
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_int_equal(s.persistent_layers, 0);
    zt_runtime_destroy(rt);
}

/* No "optimizer" section: the run trains with ztier's AdamW defaults, said once at commit at
 * the default level; one optimizer key given (here by zt_config_set) is enough to quiet it. */
static void test_missing_optimizer_section_warns(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = model("{}", 1, &m); /* warnings */
    const char *w = strstr(logbuf, "no \"optimizer\" section: AdamW with ztier's defaults");
    if (!w)
        fail_msg("no warning; log:\n%s", logbuf);
    assert_non_null(strstr(w, "lr 0.001"));
    assert_non_null(strstr(w, "weight decay 0.01"));
    zt_runtime_destroy(rt);
    rt = create("{}", 1);
    assert_int_equal(zt_config_set(rt, "optimizer.params.lr", "3e-4"), ZT_OK);
    rt_fixture_register_mlp(rt, &dims, 3, &m);
    rt_fixture_commit(rt);
    assert_null(strstr(logbuf, "\"optimizer\" section"));
    zt_runtime_destroy(rt);
}

static void test_forward_evaluation_warns_once(void **state)
{
    (void)state;
    const char *cfg = "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
                      " \"stage3_param_persistence_threshold\": 0},"
                      " \"ztier\": {\"hbm_capacity\": \"4M\"}}";
    minimal_model m;
    zt_runtime *rt = model(cfg, 1, &m); /* warnings */
    for (int s = 0; s < 8; s++) {
        train(rt, &m, s, s + 1);
        if (s % 2) { /* the wrong pass for an evaluation */
            zt_layer_view v;
            for (int l = 0; l < MLP_LAYERS; l++) {
                assert_int_equal(zt_fetch(rt, m.layer[l], ZT_FORWARD, &v), ZT_OK);
                assert_int_equal(zt_release(rt, m.layer[l], ZT_FORWARD), ZT_OK);
            }
        }
    }
    zt_stats st = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &st), ZT_OK);
    assert_true(st.trace_deviations >= 3);
    const char *first = strstr(logbuf, "layer order changed");
    assert_non_null(first);
    assert_non_null(strstr(first, "ZT_INFERENCE"));
    assert_null(strstr(first + 1, "layer order changed")); /* once */
    zt_runtime_destroy(rt);
}

static void test_inference_between_and_inside_steps(void **state)
{
    (void)state;
    const char *cfg = "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
                      " \"stage3_param_persistence_threshold\": 0},"
                      " \"ztier\": {\"hbm_capacity\": \"4M\"}}";
    minimal_model m;
    zt_runtime *plain = model(cfg, 1, &m), *rt = model(cfg, 1, &m);
    train(plain, &m, 0, 3);
    train(rt, &m, 0, 1);
    float loss, eval = 0;
    for (int s = 1; s < 3; s++) {
        assert_int_equal(minimal_evaluate(rt, &m, 999, 0, dims.batch, &eval), ZT_OK);
        assert_int_equal(minimal_micro_step(rt, &m, s, 0, dims.batch, &loss), ZT_OK);
        assert_int_equal(minimal_evaluate(rt, &m, 999, 0, dims.batch, &eval), ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
    /* training is unchanged, nothing was reported as a change of order */
    for (int l = 0; l < MLP_LAYERS; l++) {
        int64_t n = (int64_t)m.n_in[l] * m.n_out[l];
        float *a = read_param(plain, m.weight[l], n), *b = read_param(rt, m.weight[l], n);
        assert_memory_equal(a, b, sizeof(float) * (size_t)n);
        free(a), free(b);
    }
    assert_null(strstr(logbuf, "layer order changed"));
    zt_stats sp = ZT_STATS_INIT, sr = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(plain, &sp), ZT_OK);
    assert_int_equal(zt_stats_get(rt, &sr), ZT_OK);
    assert_int_equal(sr.trace_deviations, 0);
    /* the training fetches were prefetched as often as without the evaluations */
    uint64_t hits_before = sr.prefetch_hits, plain_before = sp.prefetch_hits;
    train(plain, &m, 3, 4);
    train(rt, &m, 3, 4);
    assert_int_equal(zt_stats_get(plain, &sp), ZT_OK);
    assert_int_equal(zt_stats_get(rt, &sr), ZT_OK);
    assert_int_equal(sr.prefetch_hits - hits_before, sp.prefetch_hits - plain_before);
    assert_true(sp.prefetch_hits - plain_before > 0);
    /* an inference view: the parameters, no gradients */
    float *w = read_param(rt, m.weight[0], 16 * 48);
    zt_layer_view v;
    assert_int_equal(zt_fetch(rt, m.layer[0], ZT_INFERENCE, &v), ZT_OK);
    assert_null(v.params[0].grad);
    assert_int_equal(zt_fetch(rt, m.layer[0], ZT_FORWARD, &v), ZT_OK); /* nested, other pass */
    assert_memory_equal(v.params[0].data, w, sizeof(float) * 16 * 48);
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_ERR_USAGE);
    assert_non_null(strstr(zt_last_error(rt), "'fc1' (forward), 'fc1' (inference)"));
    assert_int_equal(zt_release(rt, m.layer[0], ZT_FORWARD), ZT_OK);
    assert_int_equal(zt_release(rt, m.layer[0], ZT_INFERENCE), ZT_OK);
    assert_int_equal(zt_release(rt, m.layer[0], ZT_INFERENCE), ZT_ERR_USAGE);
    free(w);
    zt_runtime_destroy(plain), zt_runtime_destroy(rt);
}

/* ---- 5. zt_param_write, init from arrays, init failures ---- */

static void write_and_check(const char *pdev, const char *odev, int bf16)
{
    char cfg[2048];
    snprintf(
        cfg, sizeof cfg,
        "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
        "\"$SCRATCH\"}, \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"$SCRATCH\"}, "
        "\"stage3_param_persistence_threshold\": 0}, \"bf16\": {\"enabled\": %s}, "
        "\"aio\": {\"block_size\": 4096}, \"ztier\": {\"hbm_capacity\": \"4M\"}}",
        pdev, odev, bf16 ? "true" : "false");
    minimal_model m;
    zt_runtime *rt = model(cfg, 1, &m);
    float loss;
    if (!bf16)
        train(rt, &m, 0, 2);
    float w[48 * 48], got[48 * 48];
    for (int i = 0; i < 48 * 48; i++)
        w[i] = (float)i / 1024.0f - 1.0f + 1.0f / 3.0f; /* not representable in bf16 */
    assert_int_equal(zt_param_write(rt, m.weight[1], w, 48 * 48), ZT_OK);
    assert_int_equal(zt_param_read(rt, m.weight[1], got, 48 * 48), ZT_OK);
    assert_memory_equal(w, got, sizeof w); /* the fp32 master holds exactly what was written */
    zt_layer_view v;
    assert_int_equal(zt_fetch(rt, m.layer[1], ZT_INFERENCE, &v), ZT_OK);
    for (int i = 0; i < 48 * 48; i++) {
        float seen;
        if (bf16) { /* the working copy is the written value rounded to bf16 */
            uint32_t u = (uint32_t)((const uint16_t *)v.params[0].data)[i] << 16;
            memcpy(&seen, &u, 4);
            assert_true(fabsf(seen - w[i]) <= fabsf(w[i]) * 0x1p-8f);
        } else {
            seen = ((const float *)v.params[0].data)[i];
            assert_true(seen == w[i]);
        }
    }
    assert_int_equal(zt_release(rt, m.layer[1], ZT_INFERENCE), ZT_OK);
    if (!bf16) /* training goes on from the written values */
        assert_int_equal(minimal_micro_step(rt, &m, 2, 0, dims.batch, &loss), ZT_OK);
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    zt_runtime_destroy(rt);
}

static void test_param_write_on_every_placement(void **state)
{
    (void)state;
    write_and_check("none", "none", 0);
    write_and_check("cpu", "cpu", 0);
    write_and_check("nvme", "nvme", 0);
    write_and_check("cpu", "cpu", 1);
}

static void test_param_write_bad_input(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = model("{\"ztier\": {\"hbm_capacity\": \"4M\"}}", 1, &m);
    float w[48] = {0};
    assert_int_equal(zt_param_write(rt, m.bias[1], w, 47), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "'fc2.bias' has 48 elements"));
    w[7] = NAN;
    assert_int_equal(zt_param_write(rt, m.bias[1], w, 48), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "element 7 is nan"));
    assert_int_equal(zt_param_write(rt, 99, w, 48), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_param_write(rt, m.bias[1], NULL, 48), ZT_ERR_ARGUMENT);
    zt_runtime_destroy(rt);
}

static zt_status failing_init(void *user, const char *name, int64_t first, int64_t count,
                              float *dst)
{
    (void)user, (void)name;
    for (int64_t i = 0; i < count; i++)
        dst[i] = (float)(first + i);
    return first + count > 10 ? ZT_ERR_IO : ZT_OK; /* e.g. its weights file is short */
}

static void test_init_from_arrays_and_failing_callbacks(void **state)
{
    (void)state;
    float weights[5 * 7];
    for (int i = 0; i < 5 * 7; i++)
        weights[i] = 0.5f * (float)i - 3.0f;
    zt_runtime *rt = create("{\"ztier\": {\"hbm_capacity\": \"4M\"}}", 1);
    int layer, w, b;
    zt_init copy = {ZT_INIT_COPY, 0, 0, 0, NULL, weights};
    assert_int_equal(zt_layer_add(rt, "proj", &layer), ZT_OK);
    assert_int_equal(zt_param_add(rt, layer, "proj.w", (int64_t[]){5, 7}, 2, &copy, &w), ZT_OK);
    zt_init bad = {ZT_INIT_COPY, 0, 0, 0, NULL, NULL};
    assert_int_equal(zt_param_add(rt, layer, "proj.b", (int64_t[]){5}, 1, &bad, &b),
                     ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "ZT_INIT_COPY needs init->user"));
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    float got[35];
    assert_int_equal(zt_param_read(rt, w, got, 35), ZT_OK);
    assert_memory_equal(got, weights, sizeof weights);
    zt_runtime_destroy(rt);

    rt = create("{\"ztier\": {\"hbm_capacity\": \"4M\"}}", 1);
    zt_init cb = {ZT_INIT_CALLBACK, 0, 0, 0, failing_init, NULL};
    assert_int_equal(zt_layer_add(rt, "emb", &layer), ZT_OK);
    assert_int_equal(zt_param_add(rt, layer, "emb.w", (int64_t[]){4, 8}, 2, &cb, &w), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_ERR_IO);
    assert_non_null(strstr(zt_last_error(rt), "parameter 'emb.w': its init callback failed "
                                              "(I/O error) for elements [0, 32)"));
    assert_int_equal(zt_fetch(rt, layer, ZT_FORWARD, &(zt_layer_view){0}), ZT_ERR_USAGE);
    zt_runtime_destroy(rt);
}

/* ---- 7. errors: returned, not logged; getters leave no stale text ---- */

static void test_errors_are_returned_not_logged(void **state)
{
    (void)state;
    zt_options o = ZT_OPTIONS_INIT;
    o.log_level = 3;
    o.log_fn = capture;
    logbuf[0] = '\0';
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(&o, "{\"zero_optimization\": {\"stage\": 4}}", &rt),
                     ZT_ERR_CONFIG);
    assert_null(strstr(logbuf, "0 ztier error"));
    assert_null(strstr(zt_last_error(rt), "zt_runtime_create"));
    assert_non_null(strstr(zt_last_error(rt), "zero_optimization.stage = 4"));
    zt_runtime_destroy(rt);

    minimal_model m;
    rt = model("{\"ztier\": {\"hbm_capacity\": \"4M\"}}", 3, &m);
    logbuf[0] = '\0';
    assert_int_equal(zt_release(rt, m.layer[0], ZT_FORWARD), ZT_ERR_USAGE);
    assert_null(strstr(logbuf, "0 ztier error"));
    /* successful getters reset the text */
    int rank, world, count;
    int64_t steps;
    zt_stats s = ZT_STATS_INIT;
    zt_optimizer_info oi = ZT_OPTIMIZER_INFO_INIT;
    assert_int_equal(zt_runtime_rank(rt, &rank, &world), ZT_OK);
    assert_string_equal(zt_last_error(rt), "");
    assert_int_equal(zt_release(rt, m.layer[0], ZT_FORWARD), ZT_ERR_USAGE);
    assert_int_equal(zt_layer_count(rt, &count), ZT_OK);
    assert_string_equal(zt_last_error(rt), "");
    assert_int_equal(zt_release(rt, m.layer[0], ZT_FORWARD), ZT_ERR_USAGE);
    assert_int_equal(zt_step_count(rt, &steps), ZT_OK);
    assert_string_equal(zt_last_error(rt), "");
    assert_int_equal(zt_release(rt, m.layer[0], ZT_FORWARD), ZT_ERR_USAGE);
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_string_equal(zt_last_error(rt), "");
    assert_int_equal(zt_release(rt, m.layer[0], ZT_FORWARD), ZT_ERR_USAGE);
    assert_int_equal(zt_optimizer_get(rt, &oi), ZT_OK);
    assert_string_equal(zt_last_error(rt), "");
    assert_int_equal(zt_layer_count(rt, NULL), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "zt_layer_count"));
    zt_runtime_destroy(rt);
}

/* The swap file an NVMe parameter home made in folder dir (relative to the working folder):
 * 1 when there is one. */
static int has_swap_file(const char *dir)
{
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        found |= strncmp(e->d_name, "ztier-", 6) == 0 && strstr(e->d_name, ".swap") != NULL;
    if (d)
        closedir(d);
    return found;
}

/* Folder names that are JSON text ("1234", "null", "\"q\"") given to zt_config_set_string
 * are those folders: the swap files land in them. */
static void test_typed_setter_folder_names_are_exact(void **state)
{
    (void)state;
    static const char *const traps[] = {"1234", "null", "\"q\""};
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(rt_fixture_dir()), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mkdir(traps[i], 0755), 0);
        zt_runtime *rt = create("{\"zero_optimization\": {\"stage3_param_persistence_threshold\":"
                                " 0}, \"aio\": {\"block_size\": 4096}}",
                                1);
        assert_int_equal(
            zt_config_set_string(rt, "zero_optimization.offload_param.nvme_path", traps[i]), ZT_OK);
        assert_int_equal(zt_config_set_string(rt, "zero_optimization.offload_param.device", "nvme"),
                         ZT_OK);
        assert_int_equal(zt_config_set_string(rt, "ztier.hbm_capacity", "4M"), ZT_OK);
        assert_int_equal(zt_config_set_int(rt, "aio.queue_depth", 4), ZT_OK);
        assert_int_equal(zt_config_set_double(rt, "optimizer.params.lr", 0.125), ZT_OK);
        assert_int_equal(zt_config_set_bool(rt, "ztier.verify_checksums", 1), ZT_OK);
        /* a mismatch names the key and the setter, and changes nothing */
        assert_int_equal(zt_config_set_string(rt, "gradient_clipping", "1.0"), ZT_ERR_CONFIG);
        assert_non_null(strstr(zt_last_error(rt), "gradient_clipping expects a number, not a "
                                                  "string: use zt_config_set_double"));
        assert_int_equal(zt_config_set_bool(rt, "optimizer.params.lr", 1), ZT_ERR_CONFIG);
        zt_optimizer_info info = ZT_OPTIMIZER_INFO_INIT;
        assert_int_equal(zt_optimizer_get(rt, &info), ZT_OK);
        assert_true(info.lr == 0.125f && info.gradient_clipping == 0.0f);
        minimal_model m;
        assert_int_equal(minimal_register(rt, &dims, 3, &m), ZT_OK);
        if (zt_runtime_commit(rt) != ZT_OK)
            fail_msg("nvme_path %s: %s", traps[i], zt_last_error(rt));
        if (!has_swap_file(traps[i]))
            fail_msg("no swap file in the folder %s", traps[i]);
        assert_int_equal(zt_config_set_bool(rt, "fp16.enabled", 1), ZT_ERR_USAGE);
        assert_non_null(strstr(zt_last_error(rt), "zt_config_set_bool after zt_runtime_commit"));
        zt_runtime_destroy(rt);
    }
    /* the environment still has the last word */
    setenv("ZT_NVME_PATH", "null", 1);
    zt_runtime *rt = create("{\"zero_optimization\": {\"stage3_param_persistence_threshold\":"
                            " 0}}",
                            1);
    assert_int_equal(zt_config_set_string(rt, "zero_optimization.offload_param.nvme_path", "1234"),
                     ZT_OK);
    assert_int_equal(zt_config_set_string(rt, "zero_optimization.offload_param.device", "nvme"),
                     ZT_OK);
    assert_int_equal(zt_config_set_string(rt, "ztier.hbm_capacity", "4M"), ZT_OK);
    minimal_model m;
    assert_int_equal(minimal_register(rt, &dims, 3, &m), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    unsetenv("ZT_NVME_PATH");
    assert_true(has_swap_file("null") && !has_swap_file("1234"));
    zt_runtime_destroy(rt);
    assert_int_equal(chdir(cwd), 0);
}

/* A long nvme_path that does not exist: the message keeps the reason and its [file:line]. */
static void test_long_missing_nvme_path_keeps_the_reason(void **state)
{
    (void)state;
    char path[1001];
    for (int i = 0; i < 1000; i++)
        path[i] = i % 100 ? 'n' : '/'; /* components a filesystem takes */
    path[1000] = '\0';
    zt_runtime *rt =
        create("{\"zero_optimization\": {\"stage3_param_persistence_threshold\": 0}}", 1);
    assert_int_equal(zt_config_set_string(rt, "zero_optimization.offload_param.nvme_path", path),
                     ZT_OK);
    assert_int_equal(zt_config_set_string(rt, "zero_optimization.offload_param.device", "nvme"),
                     ZT_OK);
    minimal_model m;
    assert_int_equal(minimal_register(rt, &dims, 3, &m), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_ERR_CONFIG);
    const char *msg = zt_last_error(rt);
    const char *const parts[] = {"NVMe swap folder '/nnn",
                                 "(1000 characters)",
                                 "cannot be used",
                                 "No such file or directory",
                                 "create it",
                                 "[swap.c:",
                                 NULL};
    for (int i = 0; parts[i]; i++)
        if (!strstr(msg, parts[i]))
            fail_msg("message '%s' lacks '%s'", msg, parts[i]);
    assert_int_equal(msg[strlen(msg) - 1], ']');
    zt_runtime_destroy(rt);
}

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("embedding");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_offload_kept_resident_is_reported),
        T(test_effective_optimizer_is_logged_and_readable),
        T(test_per_step_weight_decay),
        T(test_invalid_step_values_change_nothing),
        T(test_config_merge_order),
        T(test_config_rules_between_keys_wait_for_commit),
        T(test_typed_setter_folder_names_are_exact),
        T(test_long_missing_nvme_path_keeps_the_reason),
        T(test_inference_between_and_inside_steps),
        T(test_forward_evaluation_warns_once),
        T(test_auto_sizes_come_from_the_hidden_size),
        T(test_missing_optimizer_section_warns),
        T(test_auto_left_to_defaults_warns_at_commit),
        T(test_param_write_on_every_placement),
        T(test_param_write_bad_input),
        T(test_init_from_arrays_and_failing_callbacks),
        T(test_errors_are_returned_not_logged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

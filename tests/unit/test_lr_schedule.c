/* SPDX-License-Identifier: MIT */
/* DeepSpeed's learning-rate schedules from the config's "scheduler" section, through the
 * public API, held to tables DeepSpeed's own scheduler classes computed
 * (tests/deepspeed/data/lr_schedules.json, made by tests/deepspeed/gen_tables.py with the
 * DeepSpeed version named in it): for every case there, WarmupLR, WarmupDecayLR,
 * WarmupCosineLR and OneCycle with each parameter docs/config.md lists, the lr of each of
 * 300 steps (zt_step_info.lr) and the betas zt_optimizer_get reports before it are
 * DeepSpeed's within 1e-6 relative; the parameters follow an AdamW written here that takes
 * that lr and those betas each step; the first step moves every parameter by the lr itself.
 * A config DeepSpeed's constructor refuses is refused at commit. Also: fp16 steps skipped for
 * an overflow do not advance the schedule, a checkpoint resumes it, a trainer's lr overrides
 * it with one warning, and commit's line of effective settings (its content for two configs,
 * ztier.log_effective_settings false and log level error hide it). */
#include "rt_fixture.h"
#include "ztier.h"

#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define N 256
#define BASE_LR 0.01 /* optimizer.params.lr, as the tables' base_lr */

static char logbuf[65536];

static void capture(void *user, int level, const char *msg)
{
    (void)user;
    size_t used = strlen(logbuf);
    snprintf(logbuf + used, sizeof logbuf - used, "%d %s\n", level, msg);
}

/* ---- DeepSpeed's table ---- */

static json_t *tables; /* lr_schedules.json */

static json_t *table_case(const char *name)
{
    json_t *cases = json_object_get(tables, "cases"), *c;
    size_t i;
    json_array_foreach(cases, i, c)
    {
        if (!strcmp(json_string_value(json_object_get(c, "name")), name))
            return c;
    }
    fail_msg("no case %s in lr_schedules.json", name);
    return NULL;
}

/* The lr DeepSpeed's param group holds while optimizer step k (1-based) runs. */
static double table_lr(const json_t *c, int64_t k)
{
    return json_number_value(json_array_get(json_object_get(c, "lr"), (size_t)(k - 1)));
}

/* Its betas, the configured ones where the case records none. */
static void table_betas(const json_t *c, int64_t k, double *b1, double *b2)
{
    json_t *row = json_array_get(json_object_get(c, "betas"), (size_t)(k - 1));
    *b1 = row ? json_number_value(json_array_get(row, 0)) : 0.9;
    *b2 = row ? json_number_value(json_array_get(row, 1)) : 0.999;
}

/* The case's "scheduler" section as config text (static buffer). */
static const char *table_scheduler(const json_t *c)
{
    static char text[1024];
    char *s = json_dumps(json_object_get(c, "scheduler"), JSON_COMPACT);
    snprintf(text, sizeof text, "%s", s);
    free(s);
    return text;
}

/* ---- the model: one layer, one parameter; the gradient is w - target ---- */

typedef struct model {
    int layer, param;
} model;

static float target(int i) { return 0.002f * (float)(i % 29) - 0.03f; }

static zt_status register_model(zt_runtime *rt, void *user)
{
    model *m = user;
    int64_t shape[1] = {N};
    zt_init init = {ZT_INIT_UNIFORM, -0.05f, 0.05f, 11, NULL, NULL};
    zt_status st = zt_layer_add(rt, "lin", &m->layer);
    return st == ZT_OK ? zt_param_add(rt, m->layer, "lin.w", shape, 1, &init, &m->param) : st;
}

/* AdamW with weight decay 0 and eps 1e-20, as documented in optimizer/adam.h, for this
 * step's lr and betas. */
typedef struct ref_adam {
    float w[N], m[N], v[N];
    int step;
} ref_adam;

static void ref_step(ref_adam *r, const float *g, float lr, float b1, float b2)
{
    int t = ++r->step;
    float step_size = (float)((double)lr / (1.0 - pow(b1, t)));
    float inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
    for (int i = 0; i < N; i++) {
        r->m[i] = b1 * r->m[i] + (1.0f - b1) * g[i];
        r->v[i] = b2 * r->v[i] + (1.0f - b2) * (g[i] * g[i]);
        r->w[i] -= step_size * (r->m[i] / (sqrtf(r->v[i]) * inv_sqrt_bc2 + 1e-20f));
    }
}

/* The config: a "scheduler" section (NULL: none), more top-level members (each followed by
 * a comma), more "ztier" members (each preceded by one). */
static const char *config(const char *scheduler, const char *more, const char *ztier)
{
    static char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": %g, \"betas\": [0.9, "
             "0.999], \"eps\": 1e-20, \"weight_decay\": 0.0}}, %s%s%s%s"
             " \"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}},"
             " \"ztier\": {\"hbm_capacity\": \"16M\"%s}}",
             BASE_LR, scheduler ? "\"scheduler\": " : "", scheduler ? scheduler : "",
             scheduler ? "," : "", more, ztier);
    return cfg;
}

static zt_runtime *make_with(const char *scheduler, const char *more, const char *ztier,
                             int log_level, model *m)
{
    zt_options o = ZT_OPTIONS_INIT;
    o.log_level = log_level;
    o.log_fn = capture;
    logbuf[0] = '\0';
    return rt_fixture_make(&o, config(scheduler, more, ztier), register_model, m);
}

static zt_runtime *make(const char *scheduler, const char *more, int log_level, model *m)
{
    return make_with(scheduler, more, "", log_level, m);
}

/* One micro-step with fp32 gradients w - target (into g), then zt_step. */
static zt_step_info step(zt_runtime *rt, const model *m, const zt_step_args *args, float *g)
{
    zt_layer_view view;
    assert_int_equal(zt_fetch(rt, m->layer, ZT_BACKWARD, &view), ZT_OK);
    const float *w = view.params[0].data;
    float *grad = view.params[0].grad;
    for (int i = 0; i < N; i++)
        g[i] = grad[i] = w[i] - target(i);
    assert_int_equal(zt_release(rt, m->layer, ZT_BACKWARD), ZT_OK);
    zt_step_info info = ZT_STEP_INFO_INIT;
    assert_int_equal(zt_step(rt, args, &info), ZT_OK);
    return info;
}

static void assert_rel(double got, double want, double tol, const char *what, int s)
{
    if (!(fabs(got - want) <= tol * fabs(want) + 1e-30))
        fail_msg("%s at step %d: %.9g, want %.9g", what, s, got, want);
}

/* Every step of the case: the lr against DeepSpeed's, the betas zt_optimizer_get reports
 * (those the step will use) against DeepSpeed's, the parameters against the reference AdamW
 * with those values, the first step's movement against the lr. */
static void check_case(const json_t *c)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *type = json_string_value(json_object_get(json_object_get(c, "scheduler"), "type"));
    int steps = (int)json_array_size(json_object_get(c, "lr"));
    model m;
    zt_runtime *rt = make(table_scheduler(c), "", 1, &m);
    zt_optimizer_info oi = ZT_OPTIMIZER_INFO_INIT;
    assert_int_equal(zt_optimizer_get(rt, &oi), ZT_OK);
    assert_string_equal(oi.scheduler, type);
    ref_adam ref = {.step = 0};
    assert_int_equal(zt_param_read(rt, m.param, ref.w, N), ZT_OK);
    float before[N], g[N], got[N];
    memcpy(before, ref.w, sizeof before);
    for (int k = 1; k <= steps; k++) {
        double lr = table_lr(c, k), b1, b2;
        table_betas(c, k, &b1, &b2);
        assert_int_equal(zt_optimizer_get(rt, &oi), ZT_OK);
        assert_rel(oi.beta1, b1, 1e-6, name, k);
        assert_rel(oi.beta2, b2, 1e-6, name, k);
        zt_step_info info = step(rt, &m, NULL, g);
        assert_int_equal(info.step, k);
        assert_rel(info.lr, lr, 1e-6, name, k);
        ref_step(&ref, g, (float)lr, (float)b1, (float)b2);
        if (k > 1)
            continue;
        /* the first AdamW step moves each element by lr * g / (|g| + eps): by the lr */
        assert_int_equal(zt_param_read(rt, m.param, got, N), ZT_OK);
        for (int i = 0; i < N; i++)
            if (!(fabs(fabs((double)got[i] - before[i]) - lr) <=
                  1e-6 * lr + 1.2e-7 * fabs(before[i])))
                fail_msg("%s: element %d moved by %.9g, the lr is %.9g", name, i,
                         fabs((double)got[i] - before[i]), lr);
    }
    assert_int_equal(zt_param_read(rt, m.param, got, N), ZT_OK);
    for (int i = 0; i < N; i++)
        assert_float_equal(got[i], ref.w[i], 1e-5f * (1.0f + fabsf(ref.w[i])));
    assert_null(strstr(logbuf, "overrides the config's scheduler"));
    zt_runtime_destroy(rt);
}

/* A config DeepSpeed's constructor refuses (warmup_num_steps 0, cycle_first_step_size 0):
 * refused with ZT_ERR_CONFIG naming the parameter. */
static void check_refused(const json_t *c)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    json_t *params = json_object_get(json_object_get(c, "scheduler"), "params");
    const char *key = json_object_iter_key(json_object_iter(params));
    model m;
    zt_options o = ZT_OPTIONS_INIT;
    o.log_level = 0;
    zt_runtime *rt = NULL;
    zt_status st = rt_fixture_try(&o, config(table_scheduler(c), "", ""), register_model, &m, &rt);
    if (st != ZT_ERR_CONFIG)
        fail_msg("%s: DeepSpeed refuses it (%s); ztier returned %d", name,
                 json_string_value(json_object_get(c, "error")), (int)st);
    if (strcmp(key, "cycle_min_lr") == 0) /* OneCycle: the refused one is the last */
        key = "cycle_first_step_size";
    assert_non_null(strstr(zt_last_error(rt), key));
    zt_runtime_destroy(rt);
}

/* Every case of the table (its DeepSpeed version named in the failure). */
static void test_schedules_match_deepspeed(void **state)
{
    (void)state;
    assert_float_equal(json_number_value(json_object_get(tables, "base_lr")), BASE_LR, 0);
    json_t *cases = json_object_get(tables, "cases"), *c;
    size_t i, checked = 0, refused = 0;
    json_array_foreach(cases, i, c)
    {
        if (json_object_get(c, "error"))
            check_refused(c), refused++;
        else
            check_case(c), checked++;
    }
    print_message("%zu schedules held to DeepSpeed %s over 300 steps, %zu refusals\n", checked,
                  json_string_value(json_object_get(tables, "deepspeed")), refused);
    assert_true(checked >= 15 && refused >= 2);
}

/* WarmupDecayLR of the table, for the tests below that follow a schedule's lr. */
#define DECAY_CASE "decay_log"

/* fp16 steps skipped for an overflow run with the schedule's lr and do not advance it. */
static void test_skipped_steps_do_not_advance(void **state)
{
    (void)state;
    model m;
    const json_t *c = table_case(DECAY_CASE);
    zt_runtime *rt =
        make(table_scheduler(c), "\"fp16\": {\"enabled\": true, \"hysteresis\": 1},", 1, &m);
    int64_t done = 0;
    for (int k = 0; k < 20; k++) {
        zt_layer_view view;
        assert_int_equal(zt_fetch(rt, m.layer, ZT_BACKWARD, &view), ZT_OK);
        uint16_t *grad = view.params[0].grad; /* zeros: Adam leaves the weights */
        if (k == 3 || k == 4 || k == 9)
            grad[5] = 0x7c00; /* +inf */
        assert_int_equal(zt_release(rt, m.layer, ZT_BACKWARD), ZT_OK);
        zt_step_info info = ZT_STEP_INFO_INIT;
        assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
        assert_int_equal(info.skipped, k == 3 || k == 4 || k == 9);
        assert_rel(info.lr, table_lr(c, done + 1), 1e-6, "fp16", k + 1);
        done += !info.skipped;
        assert_int_equal(info.step, done);
    }
    assert_int_equal(done, 17);
    zt_runtime_destroy(rt);
}

/* After zt_checkpoint_load the schedule continues where the saved run was. */
static void test_checkpoint_resumes_the_schedule(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ckpt", rt_fixture_dir());
    model m;
    float g[N], want[10];
    const json_t *c = table_case(DECAY_CASE);
    zt_runtime *a = make(table_scheduler(c), "", 1, &m);
    for (int k = 0; k < 15; k++)
        step(a, &m, NULL, g);
    assert_int_equal(zt_checkpoint_save(a, dir), ZT_OK);
    for (int k = 0; k < 10; k++)
        want[k] = step(a, &m, NULL, g).lr;
    zt_runtime_destroy(a);
    zt_runtime *b = make(table_scheduler(c), "", 1, &m);
    assert_int_equal(zt_checkpoint_load(b, dir), ZT_OK);
    for (int k = 0; k < 10; k++) {
        zt_step_info info = step(b, &m, NULL, g);
        assert_int_equal(info.step, 16 + k);
        assert_float_equal(info.lr, want[k], 0);
        assert_rel(info.lr, table_lr(c, 16 + k), 1e-6, "resumed", 16 + k);
    }
    zt_runtime_destroy(b);
}

/* A trainer's lr replaces the schedule, said once at the default level. */
static void test_trainer_lr_overrides_with_one_warning(void **state)
{
    (void)state;
    model m;
    float g[N];
    const json_t *c = table_case(DECAY_CASE);
    zt_runtime *rt = make(table_scheduler(c), "", 1, &m);
    zt_step_args args = ZT_STEP_ARGS_INIT;
    args.lr = 0.005f;
    for (int k = 0; k < 3; k++)
        assert_float_equal(step(rt, &m, &args, g).lr, 0.005f, 0);
    const char *w = strstr(logbuf, "1 ztier warn [step] zt_step_args.lr = 0.005 overrides the "
                                   "config's scheduler WarmupDecayLR");
    if (!w)
        fail_msg("no warning; log:\n%s", logbuf);
    assert_null(strstr(strchr(w, '\n'), "overrides the config's scheduler")); /* once */
    /* lr < 0 returns to the schedule at the steps taken (3) */
    args.lr = -1.0f;
    assert_rel(step(rt, &m, &args, g).lr, table_lr(c, 4), 1e-6, "back", 4);
    zt_runtime_destroy(rt);
}

/* ---- commit's line of effective settings ---- */

static const char *settings_line(void)
{
    const char *l = strstr(logbuf, "ztier warn [runtime] effective settings: ");
    return l ? l : "";
}

static void test_effective_settings_line(void **state)
{
    (void)state;
    model m;
    zt_runtime *rt = make("{\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": 0.001, "
                          "\"warmup_max_lr\": 0.02, \"warmup_num_steps\": 12, \"total_num_steps\": "
                          "60}}",
                          "\"fp16\": {\"enabled\": true}, \"gradient_clipping\": 0.5,"
                          " \"gradient_accumulation_steps\": 4,",
                          1, &m);
    const char *want = "1 ztier warn [runtime] effective settings: AdamW, lr per step from the "
                       "schedule (zt_step_args.lr overrides), betas (0.9, 0.999), eps 1e-20, "
                       "weight decay 0, fp16 (fp32 master), dynamic loss scale from 65536 "
                       "(window 1000, hysteresis 2, min 1), gradient clipping at norm 0.5, 4 "
                       "accumulation steps, schedule WarmupDecayLR (warmup_min_lr 0.001, "
                       "warmup_max_lr 0.02, warmup_num_steps 12 log, total_num_steps 60)";
    if (!strstr(logbuf, want))
        fail_msg("log lacks\n%s\nlog:\n%s", want, logbuf);
    const char *line = settings_line();
    assert_null(strstr(strchr(line, '\n'), "effective settings")); /* one line */
    zt_runtime_destroy(rt);

    rt = make("{\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.001, \"cycle_max_lr\": "
              "0.01, \"cycle_first_step_size\": 10}}",
              "\"bf16\": {\"enabled\": true},", 1, &m);
    want = "effective settings: AdamW, lr per step from the schedule (zt_step_args.lr "
           "overrides), betas (cycled by the schedule, 0.99), eps 1e-20, weight decay 0, bf16 "
           "(fp32 master), gradient clipping off, 1 accumulation steps, schedule OneCycle "
           "(cycle_min_lr 0.001, cycle_max_lr 0.01, cycle_first_step_size 10, "
           "cycle_second_step_size 10, decay_lr_rate 0, decay_step_size 0, momentum cycling "
           "beta1 0.8..0.9, decay_mom_rate 0)";
    if (!strstr(logbuf, want))
        fail_msg("log lacks\n%s\nlog:\n%s", want, logbuf);
    zt_runtime_destroy(rt);

    rt = make(NULL, "", 1, &m);
    if (!strstr(logbuf, "effective settings: AdamW, lr 0.01 (zt_step_args.lr overrides), betas "
                        "(0.9, 0.999), eps 1e-20, weight decay 0, fp32, gradient clipping off, 1 "
                        "accumulation steps, schedule none"))
        fail_msg("log:\n%s", logbuf);
    zt_runtime_destroy(rt);
}

static void test_effective_settings_can_be_silenced(void **state)
{
    (void)state;
    model m;
    zt_runtime *rt = make_with(NULL, "", ", \"log_effective_settings\": false", 3, &m);
    assert_string_equal(settings_line(), "");
    assert_null(strstr(logbuf, "effective settings"));
    assert_non_null(strstr(logbuf, "[optimizer] state in")); /* the info line stays */
    zt_runtime_destroy(rt);
    rt = make(NULL, "", 0, &m); /* log level error */
    assert_null(strstr(logbuf, "effective settings"));
    zt_runtime_destroy(rt);
}

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("lr_schedule");
}

static int load_tables(void **state)
{
    (void)state;
    json_error_t e;
    tables = json_load_file(ZT_DS_TABLES "/lr_schedules.json", 0, &e);
    if (!tables)
        fprintf(stderr, "%s:%d: %s\n", ZT_DS_TABLES "/lr_schedules.json", e.line, e.text);
    return tables ? 0 : -1;
}

static int free_tables(void **state)
{
    (void)state;
    json_decref(tables);
    return 0;
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
        T(test_schedules_match_deepspeed),       T(test_skipped_steps_do_not_advance),
        T(test_checkpoint_resumes_the_schedule), T(test_trainer_lr_overrides_with_one_warning),
        T(test_effective_settings_line),         T(test_effective_settings_can_be_silenced),
    };
#undef T
    return cmocka_run_group_tests(tests, load_tables, free_tables);
}

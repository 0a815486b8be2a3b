/* SPDX-License-Identifier: MIT */
/* DeepSpeed configs in the shapes public projects ship them (data/projects: DeepSpeedExamples,
 * DeepSpeed-Chat, transformers, accelerate, LLaMA-Factory, axolotl, LLaVA, VILA, FastChat,
 * xtuner, open-instruct, ms-swift, stanford_alpaca), each loaded as a new user would: the
 * file as is, a small model registered, commit, one step. Per config this asserts
 *  - the effective settings (zt_optimizer_get, the precision in commit's settings line, the
 *    first step's lr) against values worked out here from DeepSpeed's meaning of the file;
 *  - that every setting dropped or left to a default that changes training gave a warning at
 *    the default level (each expected fragment is in a warning), and that nothing else
 *    warned (every warning line holds one of the expected fragments). */
#include "rt_fixture.h"
#include "train.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#define MAX_WARN 8

typedef struct project_case {
    const char *file; /* under data/projects */
    const char *type; /* "AdamW" or "Adam" (L2 decay) */
    double lr, beta1, beta2, eps, wd, clip;
    int accum;
    const char *precision; /* how commit's settings line names it */
    const char *scheduler; /* zt_optimizer_info.scheduler */
    double first_lr;       /* zt_step_info.lr of the first step */
    /* One fragment per expected warning line, NULL-terminated */
    const char *warn[MAX_WARN];
    /* For a config commit refuses as it stands: a fragment of the refusal, and the value the
     * trainer then gives (zt_config_set) before committing again */
    const char *refusal, *fix_key, *fix_value;
    /* The keys the "auto" warning lists (space-separated, as its "key = value" entries) */
    const char *autos;
} project_case;

/* ztier's defaults behind "auto" and absent sections (test_config checks them too) */
#define DEF_LR 1e-3
#define DEF_B1 0.9
#define DEF_B2 0.999
#define DEF_EPS 1e-8
#define DEF_WD 0.01
#define NO_REFUSAL NULL, NULL, NULL
#define DEFAULTS DEF_LR, DEF_B1, DEF_B2, DEF_EPS, DEF_WD

#define NO_OPT "no \"optimizer\" section: AdamW with ztier's defaults"
#define AUTO "\"auto\" with no value from the trainer"
#define LEGACY "is deprecated in DeepSpeed"
#define RESIDENT "are below zero_optimization.stage3_param_persistence_threshold"
#define FP32 "fp32,"
#define BF16 "bf16 (fp32 master)"
#define FP16_DYN "fp16 (fp32 master), dynamic loss scale"

/* The "auto" lists: the optimizer's values, WarmupLR's (warmup_min_lr's "auto" is 0, what
 * the HF integration fills in, so it is not listed), precision, clipping, accumulation */
#define A_OPT                                                          \
    "optimizer.params.lr optimizer.params.betas optimizer.params.eps " \
    "optimizer.params.weight_decay "
#define A_SCH "scheduler.params.warmup_max_lr scheduler.params.warmup_num_steps "
#define A_F16 "fp16.enabled "
#define A_B16 "bf16.enabled "
#define A_CLIP "gradient_clipping "
#define A_ACC "gradient_accumulation_steps"

/* One case a block, the fields in the struct's order. The accumulation of a file that gives
 * train_batch_size and train_micro_batch_size_per_gpu only is DeepSpeed's derivation on one
 * rank, train_batch_size / micro (dse_zero3_offload_warmup 16/4, dse_bert 32/8, dschat
 * 32/4; test_batch_rules holds the rule to DeepSpeed's code). The betas are those of the first
 * step: OneCycle's (cycle_min_mom, 0.99) in dse_onecycle_cifar. */
/* clang-format off */
static const project_case cases[] = {
    {"dse_zero3_offload_warmup.json", "AdamW", 3e-5, 0.9, 0.999, 1e-8, 0.01, 1.0, 4, FP16_DYN, "WarmupLR", 0.0,
     {RESIDENT, NULL}, NO_REFUSAL, NULL},
    {"dse_legacy_cpu_offload_decay.json", "AdamW", 1e-4, 0.9, 0.95, 1e-8, 0.1, 0, 2, FP16_DYN, "WarmupDecayLR", 0.0,
     {"zero_optimization.cpu_offload " LEGACY, "zero_optimization.cpu_offload_params " LEGACY, RESIDENT, NULL},
     NO_REFUSAL, NULL},
    {"dse_bert_no_bias_correction.json", "AdamW", 1e-4, 0.9, 0.999, 1e-8, 0.01, 1.0, 4, FP16_DYN, "", 1e-4,
     {"optimizer.params.bias_correction", NULL}, NO_REFUSAL, NULL},
    {"dse_cosine_bf16.json", "AdamW", 6e-4, 0.9, 0.95, 1e-8, 0.1, 1.0, 4, BF16, "WarmupCosineLR", 0.0,
     {NULL}, NO_REFUSAL, NULL},
    /* OneCycle cycles beta1 and sets beta2 to 0.99, as DeepSpeed does: warned (0.999 given) */
    {"dse_onecycle_cifar.json", "AdamW", 1e-3, 0.85, 0.99, 1e-8, 3e-7, 1.0, 1, FP32, "OneCycle", 1e-4,
     {"0.99", NULL}, NO_REFUSAL, NULL},
    {"dse_nvme_infinity.json", "AdamW", 1e-5, 0.9, 0.999, 1e-8, 0.0, 0, 1, BF16, "", 1e-5,
     {RESIDENT, NULL}, NO_REFUSAL, NULL},
    {"dschat_step1_zero3.json", "AdamW", 9.65e-6, 0.9, 0.95, 1e-8, 0.0, 1.0, 8, FP16_DYN, "", 9.65e-6,
     {NULL}, NO_REFUSAL, NULL},
    {"hf_zero3_auto.json", "AdamW", DEFAULTS, 0, 1, FP32, "WarmupLR", 0.0,
     {AUTO, NULL}, NO_REFUSAL, A_OPT A_SCH A_F16 A_B16 A_CLIP A_ACC},
    {"hf_zero3_nvme_auto.json", "AdamW", DEFAULTS, 0, 1, FP32, "WarmupLR", 0.0,
     {AUTO, NULL}, NO_REFUSAL, A_OPT A_SCH A_F16 A_CLIP A_ACC},
    {"accelerate_zero3_no_optimizer.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_B16 A_CLIP A_ACC},
    {"llamafactory_ds_z3.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_B16 A_CLIP A_ACC},
    {"llamafactory_ds_z3_offload.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_B16 A_CLIP A_ACC},
    {"axolotl_zero3_bf16.json", "AdamW", DEFAULTS, 0, 1, BF16, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_CLIP A_ACC},
    {"axolotl_zero3_bf16_cpuoffload_all.json", "AdamW", DEFAULTS, 0, 1, BF16, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_CLIP A_ACC},
    {"llava_zero3.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_B16 A_ACC},
    {"llava_zero3_offload.json", "AdamW", DEFAULTS, 0, 1, FP32, "WarmupLR", 0.0,
     {AUTO, NULL}, NO_REFUSAL, A_OPT A_SCH A_F16 A_B16 A_CLIP A_ACC},
    {"vila_zero3_mics.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, "zero_optimization.mics_shard_size", NULL}, NO_REFUSAL, A_F16 A_B16 A_ACC},
    {"fastchat_s3.json", "AdamW", DEFAULTS, 0, 1, FP32, "WarmupLR", 0.0,
     {AUTO, RESIDENT, NULL}, NO_REFUSAL, A_OPT A_SCH A_F16 A_ACC},
    {"xtuner_zero3.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_B16 A_CLIP A_ACC},
    {"xtuner_zero3_offload.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, RESIDENT, NULL}, NO_REFUSAL, A_F16 A_B16 A_CLIP A_ACC},
    {"openinstruct_stage3_offloading.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_B16 A_CLIP A_ACC},
    {"msswift_zero3.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_B16 A_CLIP A_ACC},
    /* ZeRO stages 1 and 2: the optimizer offloaded (ZeRO-Offload), buckets and overlap keys */
    {"hf_zero2_auto.json", "AdamW", DEFAULTS, 0, 1, FP32, "WarmupLR", 0.0,
     {AUTO, NULL}, NO_REFUSAL, A_OPT A_SCH A_F16 A_B16 A_CLIP A_ACC},
    {"dse_zero_offload_stage2.json", "AdamW", 1e-4, 0.9, 0.999, 1e-8, 0.01, 1.0, 2, FP16_DYN, "", 1e-4,
     {"zero_optimization.cpu_offload " LEGACY, NULL}, NO_REFUSAL, NULL},
    {"llamafactory_ds_z2_offload.json", "AdamW", DEFAULTS, 0, 1, FP32, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_B16 A_CLIP A_ACC},
    {"axolotl_zero1_bf16.json", "AdamW", DEFAULTS, 0, 1, BF16, "", DEF_LR,
     {AUTO, NO_OPT, NULL}, NO_REFUSAL, A_F16 A_CLIP A_ACC},
    /* WarmupDecayLR has no default length: its "auto" must come from the trainer */
    {"alpaca_zero3_decay.json", "AdamW", DEFAULTS, 0, 1, FP32, "WarmupDecayLR", 0.0,
     {AUTO, NULL}, "scheduler.params.total_num_steps", "scheduler.params.total_num_steps", "1000",
     A_OPT A_SCH A_B16 A_CLIP A_ACC},
};
/* clang-format on */

static const mlp_dims dims = {16, 48, 4, 32};
static char logbuf[1 << 16];

static void capture(void *user, int level, const char *msg)
{
    (void)user;
    size_t used = strlen(logbuf);
    snprintf(logbuf + used, sizeof logbuf - used, "%d %s\n", level, msg);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc((size_t)n + 1, 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return s;
}

static void assert_close(const char *file, const char *what, double got, double want)
{
    if (fabs(got - want) > 1e-6 * fabs(want) + 1e-12)
        fail_msg("%s: %s is %.9g, expected %.9g", file, what, got, want);
}

/* Every warning line holds one of the fragments and every fragment is in a warning line; the
 * settings line is checked on its own. */
static void check_warnings(const project_case *c)
{
    int found[MAX_WARN] = {0};
    for (const char *line = logbuf; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        line += len + (end != NULL);
        if (strncmp(buf, "1 ", 2) != 0 || strstr(buf, "effective settings: "))
            continue;
        int matched = 0;
        for (int i = 0; c->warn[i]; i++)
            if (strstr(buf, c->warn[i]))
                matched = found[i] = 1;
        if (!matched)
            fail_msg("%s: unexpected warning: %s\nlog:\n%s", c->file, buf, logbuf);
    }
    for (int i = 0; c->warn[i]; i++)
        if (!found[i])
            fail_msg("%s: no warning with '%s'; log:\n%s", c->file, c->warn[i], logbuf);
}

/* The "auto" warning lists exactly the keys of c->autos. */
static void check_autos(const project_case *c)
{
    const char *line = strstr(logbuf, AUTO);
    if (!c->autos) {
        if (line)
            fail_msg("%s: unexpected \"auto\" warning; log:\n%s", c->file, logbuf);
        return;
    }
    if (!line)
        fail_msg("%s: no \"auto\" warning; log:\n%s", c->file, logbuf);
    const char *end = strchr(line, '\n');
    int listed = 0, want = 0;
    for (const char *p = line; (p = strstr(p, " = ")) && (!end || p < end); p += 3)
        listed++;
    char keys[1024];
    snprintf(keys, sizeof keys, "%s", c->autos);
    for (char *save, *k = strtok_r(keys, " ", &save); k; k = strtok_r(NULL, " ", &save)) {
        char entry[160];
        snprintf(entry, sizeof entry, " %s = ", k);
        const char *at = strstr(line, entry);
        if (!at || (end && at > end))
            fail_msg("%s: the \"auto\" warning does not list %s; log:\n%s", c->file, k, logbuf);
        want++;
    }
    if (listed != want)
        fail_msg("%s: the \"auto\" warning lists %d keys, expected %d (%s); log:\n%s", c->file,
                 listed, want, c->autos, logbuf);
}

static void check_effective(const project_case *c, zt_runtime *rt)
{
    zt_optimizer_info o = ZT_OPTIMIZER_INFO_INIT;
    assert_int_equal(zt_optimizer_get(rt, &o), ZT_OK);
    const char *type = o.adamw ? "AdamW" : "Adam";
    if (strcmp(type, c->type) != 0)
        fail_msg("%s: optimizer %s, expected %s", c->file, type, c->type);
    assert_close(c->file, "lr", o.lr, c->lr);
    assert_close(c->file, "beta1", o.beta1, c->beta1);
    assert_close(c->file, "beta2", o.beta2, c->beta2);
    assert_close(c->file, "eps", o.eps, c->eps);
    assert_close(c->file, "weight decay", o.weight_decay, c->wd);
    assert_close(c->file, "gradient clipping", o.gradient_clipping, c->clip);
    if (o.gradient_accumulation_steps != c->accum)
        fail_msg("%s: %d accumulation steps, expected %d", c->file, o.gradient_accumulation_steps,
                 c->accum);
    if (strcmp(o.scheduler, c->scheduler) != 0)
        fail_msg("%s: scheduler '%s', expected '%s'", c->file, o.scheduler, c->scheduler);
    const char *line = strstr(logbuf, "effective settings: ");
    if (!line || !strstr(line, c->precision))
        fail_msg("%s: the settings line does not say '%s'; log:\n%s", c->file, c->precision,
                 logbuf);
}

/* One micro-step over the layers in order, forward then backward, every gradient element
 * 2^-10 whatever the working dtype (exact in fp32, bf16 and fp16). */
static void micro_step(const project_case *c, zt_runtime *rt, int n_layers)
{
    zt_layer_view v;
    for (int l = 0; l < n_layers; l++) {
        if (zt_fetch(rt, l, ZT_FORWARD, &v) != ZT_OK || zt_release(rt, l, ZT_FORWARD) != ZT_OK)
            fail_msg("%s: forward of layer %d: %s", c->file, l, zt_last_error(rt));
    }
    for (int l = n_layers - 1; l >= 0; l--) {
        if (zt_fetch(rt, l, ZT_BACKWARD, &v) != ZT_OK)
            fail_msg("%s: backward fetch of layer %d: %s", c->file, l, zt_last_error(rt));
        for (int p = 0; p < v.n_params; p++) {
            const zt_tensor_view *t = &v.params[p];
            for (int64_t i = 0; i < t->numel; i++) {
                if (t->dtype == ZT_F32)
                    ((float *)t->grad)[i] = 0x1p-10f;
                else /* 2^-10: bf16 0x3a80, fp16 0x1400 */
                    ((uint16_t *)t->grad)[i] = t->dtype == ZT_BF16 ? 0x3a80 : 0x1400;
            }
        }
        if (zt_release(rt, l, ZT_BACKWARD) != ZT_OK)
            fail_msg("%s: backward release of layer %d: %s", c->file, l, zt_last_error(rt));
    }
}

static void run_one(const project_case *c)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/projects/%s", ZT_TEST_DATA, c->file);
    char *text = read_text(path);
    zt_options opts = ZT_OPTIONS_INIT;
    opts.log_level = 1; /* the default: warnings */
    opts.log_fn = capture;
    logbuf[0] = '\0';
    minimal_model m;
    zt_runtime *rt = NULL;
    zt_status st = rt_fixture_try_mlp(&opts, text, &dims, 7, &m, &rt);
    if (c->refusal) {
        if (st == ZT_OK || !strstr(zt_last_error(rt), c->refusal))
            fail_msg("%s: expected a refusal naming %s, got %s: %s", c->file, c->refusal,
                     zt_status_string(st), zt_last_error(rt));
        zt_runtime_destroy(rt);
        logbuf[0] = '\0';
        rt = rt_fixture_create(&opts, text);
        assert_int_equal(zt_config_set(rt, c->fix_key, c->fix_value), ZT_OK);
        rt_fixture_register_mlp(rt, &dims, 7, &m);
        rt_fixture_commit(rt);
    } else if (st != ZT_OK) {
        fail_msg("%s: %s: %s", c->file, zt_status_string(st), zt_last_error(rt));
    }
    check_effective(c, rt);
    zt_step_info info = ZT_STEP_INFO_INIT;
    for (int micro = 0; micro < c->accum; micro++)
        micro_step(c, rt, 3);
    if ((st = zt_step(rt, NULL, &info)) != ZT_OK)
        fail_msg("%s: zt_step: %s", c->file, zt_last_error(rt));
    assert_close(c->file, "the first step's lr", info.lr, c->first_lr);
    check_warnings(c);
    check_autos(c);
    zt_runtime_destroy(rt);
    free(text);
}

static void test_project_configs(void **state)
{
    (void)state;
    assert_int_equal(sizeof cases / sizeof cases[0], 27);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_one(&cases[i]);
}

static int setup(void **state)
{
    (void)state;
    if (rt_fixture_open("project_configs"))
        return -1;
    char nvme[1024];
    snprintf(nvme, sizeof nvme, "%s/nvme", rt_fixture_dir());
    return mkdir(nvme, 0755);
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_project_configs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* `ztier plan --search` (tools/plan_search.h). Each candidate is a ds_config: the user's
 * --ds-config (or none) with the searched keys set. Its bytes come from `ztier estimate`'s
 * replay (est_estimate) and, for a GPT-2 --config, its activations from estimate's activation
 * table (the lightest checkpoint policy that fits); its time from `ztier plan` itself, run on
 * the candidate's file, so that the search always predicts with the model the plan prints. */
#include "tools/plan_search.h"
#include "core/convert.h"
#include "runtime/runtime.h"
#include "tools/bench_common.h"
#include "tools/commands.h"
#include "tools/estimate_acts.h"

#include "gpt2_attention.h"
#include "gpt2_model.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define N_RES 6 /* the step model's resources, as `ztier plan --json` names them */
static const char *const res_name[N_RES] = {"compute", "h2d", "d2h", "nvme", "cpu_opt", "net"};

/* The placements: parameters' and optimizer state's homes ("none": device memory). Which a
 * stage allows is the configuration's rule: est_build rejects the others. */
static const char *const placements[][2] = {{"none", "none"}, {"none", "cpu"}, {"none", "nvme"},
                                            {"cpu", "cpu"},   {"cpu", "nvme"}, {"nvme", "nvme"}};
#define N_PLACE (int)(sizeof placements / sizeof placements[0])
/* 1 runs as 2 in ztier (docs/configuration.md); --stage N searches that stage alone */
static const int stages[] = {0, 1, 2, 3};
/* activation checkpoint policies, lightest (least recompute) first, as estimate names them */
static const char *const policies[] = {"none", "selective", "full", "full+offload"};

typedef struct budgets {
    uint64_t device, host, nvme;
    const char *nvme_path; /* NULL: none, NVMe placements skipped */
} budgets;

typedef struct cand {
    int stage, rows, accum; /* rows: the micro-batch per rank */
    const char *param, *optim, *policy;
    uint64_t device, host, nvme; /* the bytes it needs */
    int fits;
    char why[160]; /* why it does not fit */
    double step, tokens_s, busy[N_RES];
    json_t *ds; /* its ds_config */
} cand;

typedef struct search {
    const est_options *o;
    const char *profile;
    json_t *base; /* the user's ds_config */
    budgets b;
    char tmp[1024]; /* the candidates' ds_config file */
    cand *c;
    int n;
    int evaluated, fit, predicted;
} search;

static int size_arg(int argc, char **argv, const char *name, uint64_t *out, char *err, size_t len)
{
    const char *v = bench_arg(argc, argv, name);
    if (v && bench_parse_size(v, out) != 0)
        return snprintf(err, len, "--%s '%s' is not a size (e.g. 64G)", name, v), -1;
    return 0;
}

static const char *base_nvme_path(json_t *base)
{
    json_t *z = json_object_get(base, "zero_optimization");
    const char *keys[] = {"offload_param", "offload_optimizer"};
    for (int i = 0; i < 2; i++) {
        const char *p =
            json_string_value(json_object_get(json_object_get(z, keys[i]), "nvme_path"));
        if (p)
            return p;
    }
    return NULL;
}

/* The budgets: --device-memory (or the host backend's configured budget), --host-memory (or
 * MemAvailable), --nvme-memory (or the free space at the NVMe path). */
static int read_budgets(search *s, int argc, char **argv, const zt_config *cfg, char *err,
                        size_t len)
{
    budgets *b = &s->b;
    b->nvme_path = bench_arg(argc, argv, "nvme-path");
    if (!b->nvme_path)
        b->nvme_path = base_nvme_path(s->base);
    if (size_arg(argc, argv, "device-memory", &b->device, err, len) != 0 ||
        size_arg(argc, argv, "host-memory", &b->host, err, len) != 0 ||
        size_arg(argc, argv, "nvme-memory", &b->nvme, err, len) != 0)
        return -1;
    if (!b->device && strcmp(cfg->device_backend, "host"))
        return snprintf(err, len,
                        "the %s device backend's memory is known once a device is open: give "
                        "--device-memory (e.g. 80G for an H100)",
                        cfg->device_backend),
               -1;
    if (!b->device)
        b->device = zt_config_device_budget(cfg);
    if (!b->host)
        b->host = est_mem_available();
    struct statvfs vfs;
    if (!bench_arg(argc, argv, "nvme-memory") && b->nvme_path && statvfs(b->nvme_path, &vfs) == 0)
        b->nvme = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    return 0;
}

static json_t *obj(json_t *parent, const char *key)
{
    json_t *v = json_object_get(parent, key);
    if (!json_is_object(v)) {
        v = json_object();
        json_object_set_new(parent, key, v);
    }
    return v;
}

/* The candidate's ds_config: the user's with the searched keys set. */
static json_t *cand_ds(const search *s, const cand *c)
{
    json_t *ds = json_deep_copy(s->base);
    json_t *z = obj(ds, "zero_optimization");
    json_object_set_new(z, "stage", json_integer(c->stage));
    const char *dev[2] = {c->param, c->optim}, *key[2] = {"offload_param", "offload_optimizer"};
    for (int i = 0; i < 2; i++) {
        json_t *off = obj(z, key[i]);
        json_object_set_new(off, "device", json_string(dev[i]));
        if (!strcmp(dev[i], "nvme"))
            json_object_set_new(off, "nvme_path", json_string(s->b.nvme_path));
    }
    /* the state in device memory means Adam on the device */
    json_object_set_new(obj(ds, "ztier"), "device_optimizer",
                        json_string(strcmp(c->optim, "none") ? "off" : "on"));
    json_object_set_new(ds, "train_micro_batch_size_per_gpu", json_integer(c->rows));
    json_object_set_new(ds, "gradient_accumulation_steps", json_integer(c->accum));
    json_object_del(ds, "train_batch_size"); /* implied; a stale one would contradict */
    if (c->policy && !strcmp(c->policy, "full+offload"))
        json_object_set_new(obj(ds, "activation_checkpointing"), "device", json_string("cpu"));
    return ds;
}

/* The candidate's options: the model's, at its micro-batch, on its ds_config file. */
static est_options cand_options(const search *s, const cand *c)
{
    est_options o = *s->o;
    o.ds_config = s->tmp;
    o.stage = -1;
    o.batch = c->rows * s->o->world;
    return o;
}

/* Its bytes against the budgets (`ztier estimate`'s judgement), with the lightest activation
 * policy that fits the device. */
static int judge(search *s, cand *c, char *err, size_t len)
{
    est_options o = cand_options(s, c);
    est_model m = {0};
    zt_estimate e;
    if (est_estimate(&o, NULL, NULL, s->b.device, &m, &e, err, len) != 0) {
        size_t skip = strncmp(err, s->tmp, strlen(s->tmp)) ? 0 : strlen(s->tmp) + 2;
        snprintf(c->why, sizeof c->why, "not allowed: %.140s",
                 err + (skip < strlen(err) ? skip : 0));
        est_free_model(&m);
        return 0; /* not an error of the search: a combination the rules forbid */
    }
    const zt_plan *p = &e.plan;
    c->host = p->host_bytes + p->pinned_bytes;
    c->nvme = p->nvme_param_bytes + p->nvme_optim_bytes;
    c->device = e.device_min_order;
    est_acts_in a = {.rows = c->rows, .seq = o.seq};
    gpt2_config_named(o.config, o.vocab, &a.c);
    a.prefetch_layers = m.rt->cfg.act_prefetch_layers;
    a.params_peak = e.runs ? e.device_peak : e.device_min_order;
    a.budget = s->b.device;
    a.placement = "the device";
    a.att_keep = strcmp(m.rt->cfg.device_backend, "cuda") ? GPT2_ATT_PROBS : GPT2_ATT_LSE;
    json_t *acts = est_acts_json(&a), *pol = json_object_get(acts, "policies");
    est_free_model(&m);
    c->policy = NULL;
    for (size_t k = 0; k < sizeof policies / sizeof *policies && !c->policy; k++) {
        json_t *row = json_object_get(pol, policies[k]);
        uint64_t dev = (uint64_t)json_integer_value(json_object_get(row, "device_total"));
        uint64_t home = (uint64_t)json_integer_value(json_object_get(row, "store_home"));
        if (row && dev <= s->b.device && c->host + home <= s->b.host)
            c->policy = policies[k], c->device = dev, c->host += home;
    }
    json_decref(acts);
    const char *no = !c->policy                       ? "device memory too small"
                     : c->host > s->b.host            ? "host memory too small"
                     : c->nvme && !s->b.nvme_path     ? "no nvme_path"
                     : c->nvme && c->nvme > s->b.nvme ? "NVMe space too small"
                                                      : NULL;
    c->fits = !no;
    snprintf(c->why, sizeof c->why, "%s", no ? no : "fits");
    return 0;
}

static void describe(const cand *c, char *buf, size_t len)
{
    snprintf(buf, len,
             "stage %d, parameters on %s, optimizer state on %s, micro-batch %d x %d "
             "accumulation, activation policy %s",
             c->stage, strcmp(c->param, "none") ? c->param : "device",
             strcmp(c->optim, "none") ? c->optim : "device", c->rows, c->accum,
             c->policy ? c->policy : "-");
}

/* Its time: `ztier plan --json` on its ds_config, its output read back from a temporary file. */
static int predict(search *s, cand *c, char *err, size_t len)
{
    char rows[16], world[16], seq[16], vocab[16];
    snprintf(rows, sizeof rows, "%d", c->rows * s->o->world);
    snprintf(world, sizeof world, "%d", s->o->world);
    snprintf(seq, sizeof seq, "%d", s->o->seq);
    snprintf(vocab, sizeof vocab, "%d", s->o->vocab);
    /* the candidate's policy, so that the plan counts its recompute (full+offload: full, its
     * offload read from the ds_config's activation_checkpointing) */
    const char *policy = c->policy && !strncmp(c->policy, "full", 4) ? "full" : c->policy;
    char *argv[20] = {"--config",    (char *)s->o->config,
                      "--ds-config", s->tmp,
                      "--batch",     rows,
                      "--seq",       seq,
                      "--world",     world,
                      "--profile",   (char *)s->profile,
                      "--json"};
    int argc = 13;
    if (s->o->vocab)
        argv[argc++] = "--vocab", argv[argc++] = vocab;
    if (policy && strcmp(policy, "none")) /* none: the plan's default, any model */
        argv[argc++] = "--checkpoint-activations", argv[argc++] = (char *)policy;
    argv[argc] = NULL;
    FILE *out = tmpfile();
    if (!out)
        return snprintf(err, len, "cannot make a temporary file: %s", strerror(errno)), -1;
    fflush(stdout), fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(fileno(out), 1), dup2(fileno(out), 2);
    int rc = cmd_plan(argc, argv);
    fflush(stdout), fflush(stderr);
    dup2(saved_out, 1), dup2(saved_err, 2);
    close(saved_out), close(saved_err);
    char line[4096] = "", last[4096] = "";
    rewind(out);
    while (fgets(line, sizeof line, out))
        if (line[0] == '{')
            snprintf(last, sizeof last, "%s", line);
    fclose(out);
    json_t *j = json_loads(last, 0, NULL);
    if (rc != 0 || !j) {
        json_decref(j);
        char d[256];
        describe(c, d, sizeof d);
        return snprintf(err, len, "ztier plan failed on %s: %s", d, line), -1;
    }
    c->step = json_number_value(json_object_get(j, "step_s"));
    c->tokens_s = json_number_value(json_object_get(j, "tokens_per_s"));
    for (int i = 0; i < N_RES; i++)
        c->busy[i] = json_number_value(json_object_get(json_object_get(j, "busy_s"), res_name[i]));
    json_decref(j);
    return 0;
}

static int add_cand(search *s, const cand *c)
{
    cand *n = realloc(s->c, (size_t)(s->n + 1) * sizeof *n);
    if (!n)
        return -1;
    s->c = n;
    s->c[s->n++] = *c;
    return 0;
}

/* The candidate's ds_config (c->ds, replacing one it had) into the search's file. */
static int write_cand(search *s, cand *c, char *err, size_t len)
{
    json_decref(c->ds);
    c->ds = cand_ds(s, c);
    if (!c->ds || json_dump_file(c->ds, s->tmp, JSON_COMPACT) != 0)
        return snprintf(err, len, "cannot write %s", s->tmp), -1;
    return 0;
}

/* Every candidate: judged, and predicted when it fits. */
static int run_all(search *s, int global_rows, char *err, size_t len)
{
    for (size_t si = 0; si < sizeof stages / sizeof *stages; si++)
        for (int pi = 0;
             pi < N_PLACE && (s->o->stage < 0 ? stages[si] != 1 : s->o->stage == stages[si]); pi++)
            for (int rows = 1; rows <= global_rows; rows++) {
                if (global_rows % rows)
                    continue;
                cand c = {.stage = stages[si],
                          .rows = rows,
                          .accum = global_rows / rows,
                          .param = placements[pi][0],
                          .optim = placements[pi][1]};
                if ((!strcmp(c.param, "nvme") || !strcmp(c.optim, "nvme")) && !s->b.nvme_path)
                    continue; /* no NVMe to place it on */
                c.policy = "none";
                if (write_cand(s, &c, err, len) != 0)
                    return -1;
                s->evaluated++;
                if (judge(s, &c, err, len) != 0)
                    return json_decref(c.ds), -1;
                if (c.fits) { /* its own policy's ds_config */
                    if (write_cand(s, &c, err, len) != 0)
                        return -1;
                    s->fit++;
                    if (predict(s, &c, err, len) != 0)
                        return json_decref(c.ds), -1;
                    s->predicted++;
                }
                if (add_cand(s, &c) != 0)
                    return json_decref(c.ds), snprintf(err, len, "out of memory"), -1;
            }
    return 0;
}

/* Fastest first. Among equally fast ones (the model does not see a small micro-batch's slower
 * GEMMs, nor NVMe's wear), the one with fewer accumulation steps, then the least NVMe, host and
 * device memory. */
static int cmp_u64(uint64_t x, uint64_t y) { return (x > y) - (x < y); }

static int faster(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->fits != y->fits)
        return y->fits - x->fits;
    if (fabs(x->tokens_s - y->tokens_s) > 1e-9 * (x->tokens_s + y->tokens_s))
        return x->tokens_s < y->tokens_s ? 1 : -1;
    if (x->accum != y->accum)
        return x->accum - y->accum;
    int c = cmp_u64(x->nvme, y->nvme);
    c = c ? c : cmp_u64(x->host, y->host);
    return c ? c : cmp_u64(x->device, y->device);
}

/* The runner-up: the fastest that fits with another stage or placement than the best's (a
 * micro-batch of the same placement tells the user nothing). */
static const cand *runner_up(const search *s)
{
    const cand *b = &s->c[0];
    for (int i = 1; i < s->n && s->c[i].fits; i++)
        if (s->c[i].stage != b->stage || strcmp(s->c[i].param, b->param) ||
            strcmp(s->c[i].optim, b->optim))
            return &s->c[i];
    return NULL;
}

static int bound(const cand *c)
{
    int r = 0;
    for (int i = 1; i < N_RES; i++)
        if (c->busy[i] > c->busy[r])
            r = i;
    return r;
}

static json_t *cand_json(const cand *c)
{
    json_t *busy = json_object();
    for (int i = 0; i < N_RES; i++)
        json_object_set_new(busy, res_name[i], json_real(c->busy[i]));
    return json_pack("{s:i, s:s, s:s, s:i, s:i, s:s?, s:I, s:I, s:I, s:b, s:s, s:f, s:f, s:o, "
                     "s:O}",
                     "stage", c->stage, "params", c->param, "optimizer", c->optim, "micro_batch",
                     c->rows, "accumulation", c->accum, "activation_policy", c->policy,
                     "device_bytes", (json_int_t)c->device, "host_bytes", (json_int_t)c->host,
                     "nvme_bytes", (json_int_t)c->nvme, "fits", c->fits, "why", c->why, "step_s",
                     c->step, "tokens_per_s", c->tokens_s, "busy_s", busy, "ds_config", c->ds);
}

static void print_result(const search *s, double secs, int json)
{
    const cand *best = &s->c[0], *next = runner_up(s);
    if (json) {
        json_t *all = json_array();
        for (int i = 0; i < s->n; i++)
            json_array_append_new(all, cand_json(&s->c[i]));
        json_t *o =
            json_pack("{s:i, s:i, s:i, s:f, s:o, s:o, s:o}", "evaluated", s->evaluated, "fit",
                      s->fit, "predicted", s->predicted, "seconds", secs, "best", cand_json(best),
                      "runner_up", next ? cand_json(next) : json_null(), "candidates", all);
        char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (txt)
            printf("%s\n", txt);
        free(txt);
        json_decref(o);
        return;
    }
    char d[256];
    describe(best, d, sizeof d);
    printf("evaluated %d configurations in %.2f s: %d fit the budgets, each predicted\n",
           s->evaluated, secs, s->fit);
    printf("best: %s\n  predicted step %.4f s, %.0f tokens/s, bound by %s\n", d, best->step,
           best->tokens_s, res_name[bound(best)]);
    printf("ds_config:\n");
    char *txt = json_dumps(best->ds, JSON_INDENT(2));
    printf("%s\n", txt ? txt : "{}");
    free(txt);
    if (!next) {
        printf("runner-up: none (no other configuration fits)\n");
        return;
    }
    describe(next, d, sizeof d);
    printf("runner-up: %s\n  predicted step %.4f s, %.0f tokens/s", d, next->step, next->tokens_s);
    int r = bound(next);
    if (faster(best, next) < 0 &&
        fabs(best->tokens_s - next->tokens_s) > 1e-9 * (best->tokens_s + next->tokens_s))
        printf(" (%.1f%% fewer): bound by %s, busy %.4f s of its step against %.4f s in the "
               "best\n",
               100 * (1 - next->tokens_s / best->tokens_s), res_name[r], next->busy[r],
               best->busy[r]);
    else /* as fast: the tie-break */
        printf(": as fast (both bound by %s); ranked lower for %s\n", res_name[r],
               next->accum != best->accum ? "more accumulation steps"
               : next->nvme != best->nvme ? "more NVMe space"
               : next->host != best->host ? "more host memory"
                                          : "more device memory");
}

int plan_search(int argc, char **argv, const est_options *o, const char *profile)
{
    char err[1200] = "";
    search s = {.o = o, .profile = profile};
    int rc = 0;
    if (bench_arg(argc, argv, "svg") || bench_arg(argc, argv, "trace"))
        rc = -1, snprintf(err, sizeof err,
                          "--search draws nothing: run `ztier plan` with its answer's ds_config "
                          "and --svg or --trace");
    else if (!o->config || !o->batch)
        rc = -1, snprintf(err, sizeof err,
                          "--search needs a GPT-2 --config with --batch and --seq (the tokens "
                          "of a step and the activations of each micro-batch)");
    json_error_t je;
    if (rc == 0)
        s.base = o->ds_config ? json_load_file(o->ds_config, 0, &je) : json_object();
    if (rc == 0 && !json_is_object(s.base))
        rc = -1, snprintf(err, sizeof err, "cannot read the ds_config %s: %s", o->ds_config,
                          json_is_object(s.base) ? "" : je.text);
    est_model m = {0};
    if (rc == 0 && (rc = est_build(&m, o, NULL, NULL, err, sizeof err)) == 0) {
        int accum =
            m.rt->cfg.gradient_accumulation_steps > 0 ? m.rt->cfg.gradient_accumulation_steps : 1;
        rc = read_budgets(&s, argc, argv, &m.rt->cfg, err, sizeof err);
        int global_rows = o->batch / o->world * accum; /* per rank, per step */
        est_free_model(&m);
        int fd = -1;
        const char *tmpdir = getenv("TMPDIR"); /* mkstemp's template: a name of our own */
        snprintf(s.tmp, sizeof s.tmp, "%s/ztier-search-XXXXXX",
                 tmpdir && *tmpdir ? tmpdir : "/tmp");
        if (rc == 0 && (fd = mkstemp(s.tmp)) < 0)
            rc = -1,
            snprintf(err, sizeof err, "cannot make a temporary file in %s: %s (set TMPDIR)",
                     tmpdir && *tmpdir ? tmpdir : "/tmp", strerror(errno));
        if (fd >= 0)
            close(fd);
        double t0 = bench_now();
        if (rc == 0)
            rc = run_all(&s, global_rows, err, sizeof err);
        if (fd >= 0)
            unlink(s.tmp);
        if (rc == 0) {
            qsort(s.c, (size_t)s.n, sizeof *s.c, faster);
            if (!s.fit) {
                rc = -1;
                snprintf(err, sizeof err,
                         "none of the %d configurations fits the budgets (device %llu, host "
                         "%llu, NVMe %llu bytes%s); raise --device-memory or --host-memory, or "
                         "give an --nvme-path",
                         s.evaluated, (unsigned long long)s.b.device, (unsigned long long)s.b.host,
                         (unsigned long long)s.b.nvme, s.b.nvme_path ? "" : ", no nvme_path");
            } else {
                print_result(&s, bench_now() - t0, o->json);
            }
        }
    }
    if (rc != 0)
        fprintf(stderr, "ztier plan --search: %s\n", err);
    for (int i = 0; i < s.n; i++)
        json_decref(s.c[i].ds);
    free(s.c);
    json_decref(s.base);
    return rc == 0 ? 0 : 1;
}

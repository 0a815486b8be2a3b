/* SPDX-License-Identifier: MIT */
/* `ztier plan --search` (tools/plan_search.h). Each candidate is a ds_config: the user's
 * --ds-config (or none) with the searched keys set. Its bytes come from `ztier estimate`'s
 * replay (est_estimate) and, for a GPT-2 --config, its activations from estimate's activation
 * table (every checkpoint policy that fits is a candidate of its own); its time from `ztier
 * plan` itself, run on the candidate's file, so that the search always predicts with the model
 * the plan prints. The knobs the step model may or may not see (the prefetch window, the
 * optimizer split) are varied one at a time on the fastest candidates, and ranked only when
 * some variant is predicted differently from the value it replaces: a knob the model does not
 * distinguish is reported as such, never chosen on a tie. */
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
/* activation checkpoint policies, least recompute (then least traffic) first: the name the
 * search prints, estimate's row of its activation table, the trainer's --checkpoint-activations
 * and activation_checkpointing.device */
typedef struct policy_def {
    const char *name, *row, *flag, *act_device;
} policy_def;
static const policy_def policies[] = {{"none", "none", "none", "none"},
                                      {"selective", "selective", "selective", "none"},
                                      {"full", "full", "full", "none"},
                                      {"full+host", "full+offload", "full", "cpu"},
                                      {"full+nvme", "full+offload", "full", "nvme"}};
#define N_POL (int)(sizeof policies / sizeof policies[0])

/* The knobs varied on the fastest candidates, one at a time. */
enum { KNOB_PREFETCH, KNOB_RATIO, N_KNOBS };
static const char *const knob_name[N_KNOBS] = {"prefetch_window", "optimizer_ratio"};
#define REFINE_TOP 8 /* the fastest base candidates each knob is varied on */
#define N_RATIOS 3
static const double ratios[N_RATIOS] = {0.75, 0.5, 0.25}; /* offload_optimizer.ratio below 1 */
#define N_WINDOWS 4 /* stage3_prefetch_bucket_size: 0, 1, 2 and 4 median layers */

typedef struct knob_stat {
    int tried, fit, differs; /* variants evaluated, fitting (so predicted), predicted otherwise */
    double lo, hi;           /* the least and most step ratio variant / its base candidate */
} knob_stat;

typedef struct budgets {
    uint64_t device, host, nvme;
    const char *nvme_path; /* NULL: none, NVMe placements skipped */
} budgets;

typedef struct cand {
    int stage, rows, accum; /* rows: the micro-batch per rank */
    const char *param, *optim;
    int pol;                     /* policies[pol] */
    int64_t prefetch;            /* stage3_prefetch_bucket_size; -1: the base configuration's */
    double ratio;                /* offload_optimizer.ratio; -1: the base configuration's */
    int knob;                    /* the knob this variant changes; -1: a base candidate */
    uint64_t device, host, nvme; /* the bytes it needs */
    int fits, ranked; /* ranked: fits, and not a variant of a knob the model cannot see */
    char why[160];    /* why it does not fit */
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
    int64_t base_prefetch, windows[N_WINDOWS]; /* the prefetch windows tried (elements) */
    double base_ratio;
    knob_stat knobs[N_KNOBS];
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
    json_t *act = obj(ds, "activation_checkpointing");
    json_object_set_new(act, "device", json_string(policies[c->pol].act_device));
    if (!strcmp(policies[c->pol].act_device, "nvme"))
        json_object_set_new(act, "nvme_path", json_string(s->b.nvme_path));
    if (c->prefetch >= 0)
        json_object_set_new(z, "stage3_prefetch_bucket_size", json_integer(c->prefetch));
    if (c->ratio >= 0)
        json_object_set_new(obj(z, "offload_optimizer"), "ratio", json_real(c->ratio));
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

/* Its bytes (`ztier estimate`'s replay) without activations, and estimate's activation table
 * at its micro-batch; NULL when the configuration's rules forbid the combination (c->why). */
static json_t *replay_bytes(search *s, cand *c)
{
    est_options o = cand_options(s, c);
    est_model m = {0};
    zt_estimate e;
    char err[1024];
    c->fits = c->ranked = 0;
    if (est_estimate(&o, NULL, NULL, s->b.device, &m, &e, err, sizeof err) != 0) {
        size_t skip = strncmp(err, s->tmp, strlen(s->tmp)) ? 0 : strlen(s->tmp) + 2;
        snprintf(c->why, sizeof c->why, "not allowed: %.140s",
                 err + (skip < strlen(err) ? skip : 0));
        est_free_model(&m);
        return NULL; /* not an error of the search: a combination the rules forbid */
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
    est_free_model(&m);
    return est_acts_json(&a);
}

/* The bytes with its policy's activations (the device total; the blocks' inputs in host memory
 * or on NVMe for full+host, full+nvme) against the budgets (`ztier estimate`'s judgement). */
static void judge_policy(const search *s, cand *c, json_t *acts)
{
    const policy_def *p = &policies[c->pol];
    json_t *row = json_object_get(json_object_get(acts, "policies"), p->row);
    uint64_t home = (uint64_t)json_integer_value(json_object_get(row, "store_home"));
    if (row)
        c->device = (uint64_t)json_integer_value(json_object_get(row, "device_total"));
    if (!strcmp(p->act_device, "cpu"))
        c->host += home;
    else if (!strcmp(p->act_device, "nvme"))
        c->nvme += home;
    const char *no = !row                             ? "no activation table for the policy"
                     : c->device > s->b.device        ? "device memory too small"
                     : c->host > s->b.host            ? "host memory too small"
                     : c->nvme && !s->b.nvme_path     ? "no nvme_path"
                     : c->nvme && c->nvme > s->b.nvme ? "NVMe space too small"
                                                      : NULL;
    c->fits = c->ranked = !no;
    snprintf(c->why, sizeof c->why, "%s", no ? no : "fits");
}

static void describe(const cand *c, char *buf, size_t len)
{
    int n = snprintf(buf, len,
                     "stage %d, parameters on %s, optimizer state on %s, micro-batch %d x %d "
                     "accumulation, activation policy %s",
                     c->stage, strcmp(c->param, "none") ? c->param : "device",
                     strcmp(c->optim, "none") ? c->optim : "device", c->rows, c->accum,
                     policies[c->pol].name);
    if (n > 0 && (size_t)n < len && c->prefetch >= 0)
        n += snprintf(buf + n, len - (size_t)n, ", prefetch window %lld elements",
                      (long long)c->prefetch);
    if (n > 0 && (size_t)n < len && c->ratio >= 0)
        snprintf(buf + n, len - (size_t)n, ", optimizer ratio %g", c->ratio);
}

/* Its time: `ztier plan --json` on its ds_config, its output read back from a temporary file. */
static int predict(search *s, cand *c, char *err, size_t len)
{
    char rows[16], world[16], seq[16], vocab[16];
    snprintf(rows, sizeof rows, "%d", c->rows * s->o->world);
    snprintf(world, sizeof world, "%d", s->o->world);
    snprintf(seq, sizeof seq, "%d", s->o->seq);
    snprintf(vocab, sizeof vocab, "%d", s->o->vocab);
    /* the candidate's policy, so that the plan counts its recompute (full+host, full+nvme:
     * full, its offload read from the ds_config's activation_checkpointing) */
    const char *policy = policies[c->pol].flag;
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
    if (strcmp(policy, "none")) /* none: the plan's default, any model */
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

/* One candidate's bytes judged (with `acts`, the table of its placement; NULL: replayed
 * here), predicted when it fits, and added to the list. */
static int evaluate(search *s, cand *c, json_t *acts, char *err, size_t len)
{
    int own = !acts;
    if (write_cand(s, c, err, len) != 0)
        return -1;
    if (own && (acts = replay_bytes(s, c)) == NULL) { /* forbidden: listed with its reason */
        s->evaluated++;
        return add_cand(s, c) == 0 ? 0 : (snprintf(err, len, "out of memory"), -1);
    }
    judge_policy(s, c, acts);
    if (own)
        json_decref(acts);
    s->evaluated++;
    if (c->fits) {
        s->fit++;
        if (predict(s, c, err, len) != 0)
            return json_decref(c->ds), -1;
        s->predicted++;
    }
    if (add_cand(s, c) != 0)
        return json_decref(c->ds), snprintf(err, len, "out of memory"), -1;
    return 0;
}

/* Every stage, placement and micro-batch, each with every activation policy: its bytes
 * replayed once, each policy's activations judged on them, each that fits predicted. */
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
                          .optim = placements[pi][1],
                          .prefetch = -1,
                          .ratio = -1,
                          .knob = -1};
                if ((!strcmp(c.param, "nvme") || !strcmp(c.optim, "nvme")) && !s->b.nvme_path)
                    continue; /* no NVMe to place it on */
                if (write_cand(s, &c, err, len) != 0)
                    return -1;
                json_t *acts = replay_bytes(s, &c);
                if (!acts) { /* forbidden whatever the policy: listed once, with its reason */
                    s->evaluated++;
                    if (add_cand(s, &c) != 0)
                        return json_decref(c.ds), snprintf(err, len, "out of memory"), -1;
                    continue;
                }
                json_decref(c.ds);
                c.ds = NULL;
                for (int k = 0; k < N_POL; k++) {
                    cand p = c;
                    p.pol = k;
                    if (!strcmp(policies[k].act_device, "nvme") && !s->b.nvme_path)
                        continue;
                    if (evaluate(s, &p, acts, err, len) != 0)
                        return json_decref(acts), -1;
                }
                json_decref(acts);
            }
    return 0;
}

/* Fastest first; those not ranked (not fitting, or a variant of a knob the model does not
 * see) last. Among equally fast ones (the model does not see a small micro-batch's slower
 * GEMMs, nor NVMe's wear), the one with fewer accumulation steps, then the base configuration's
 * knobs, the lighter policy, the least NVMe, host and device memory. */
static int cmp_u64(uint64_t x, uint64_t y) { return (x > y) - (x < y); }

static int faster(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->ranked != y->ranked)
        return y->ranked - x->ranked;
    if (x->fits != y->fits)
        return y->fits - x->fits;
    if (fabs(x->tokens_s - y->tokens_s) > 1e-9 * (x->tokens_s + y->tokens_s))
        return x->tokens_s < y->tokens_s ? 1 : -1;
    if (x->accum != y->accum)
        return x->accum - y->accum;
    if ((x->knob >= 0) != (y->knob >= 0))
        return (x->knob >= 0) - (y->knob >= 0);
    if (x->pol != y->pol)
        return x->pol - y->pol;
    int c = cmp_u64(x->nvme, y->nvme);
    c = c ? c : cmp_u64(x->host, y->host);
    return c ? c : cmp_u64(x->device, y->device);
}

/* Whether a knob means anything for the candidate: the prefetcher gathers at stage 3; the
 * optimizer splits with its state in host memory. */
static int knob_applies(const cand *c, int knob)
{
    return knob == KNOB_PREFETCH ? c->stage == 3 : !strcmp(c->optim, "cpu");
}

static int knob_values(int knob) { return knob == KNOB_PREFETCH ? N_WINDOWS : N_RATIOS; }

/* Variant v of the knob on c; 0 when it is the base configuration's value (nothing to try). */
static int set_knob(const search *s, cand *c, int knob, int v)
{
    c->knob = knob;
    if (knob == KNOB_PREFETCH)
        return (c->prefetch = s->windows[v]) != s->base_prefetch;
    return (c->ratio = ratios[v]) != s->base_ratio;
}

/* The knob varied on the REFINE_TOP fastest base candidates it applies to. Its variants are
 * ranked only when one of them is predicted otherwise than its base candidate: the model
 * sees the knob; else none is (a tie would pick one for its bytes alone). */
static int refine(search *s, int knob, char *err, size_t len)
{
    knob_stat *k = &s->knobs[knob];
    k->lo = k->hi = 1;
    qsort(s->c, (size_t)s->n, sizeof *s->c, faster);
    int n0 = s->n, first = s->n;
    for (int i = 0, parents = 0; i < n0 && s->c[i].ranked && parents < REFINE_TOP; i++) {
        cand par = s->c[i]; /* a copy: add_cand moves the list */
        if (par.knob >= 0 || !knob_applies(&par, knob))
            continue;
        parents++;
        for (int v = 0; v < knob_values(knob); v++) {
            cand c = par;
            c.ds = NULL;
            if (!set_knob(s, &c, knob, v))
                continue;
            k->tried++;
            if (evaluate(s, &c, NULL, err, len) != 0)
                return -1;
            if (!c.fits)
                continue;
            k->fit++;
            double r = c.step / par.step;
            k->differs += fabs(r - 1) > 1e-9;
            k->lo = fmin(k->lo, r), k->hi = fmax(k->hi, r);
        }
    }
    for (int i = first; i < s->n && !k->differs; i++)
        if (s->c[i].fits) {
            s->c[i].ranked = 0;
            snprintf(s->c[i].why, sizeof s->c[i].why,
                     "fits; not ranked: the step model predicts every %s tried as its base",
                     knob_name[knob]);
        }
    return 0;
}

/* The runner-up: the fastest that fits with another stage or placement than the best's (a
 * micro-batch of the same placement tells the user nothing). */
static const cand *runner_up(const search *s)
{
    const cand *b = &s->c[0];
    for (int i = 1; i < s->n && s->c[i].ranked; i++)
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
    json_t *j = json_pack(
        "{s:i, s:s, s:s, s:i, s:i, s:s, s:s, s:I, s:I, s:I, s:b, s:b, s:s, s:f, s:f, s:o, s:O}",
        "stage", c->stage, "params", c->param, "optimizer", c->optim, "micro_batch", c->rows,
        "accumulation", c->accum, "activation_policy", policies[c->pol].name,
        "checkpoint_activations", policies[c->pol].flag, "device_bytes", (json_int_t)c->device,
        "host_bytes", (json_int_t)c->host, "nvme_bytes", (json_int_t)c->nvme, "fits", c->fits,
        "ranked", c->ranked, "why", c->why, "step_s", c->step, "tokens_per_s", c->tokens_s,
        "busy_s", busy, "ds_config", c->ds);
    json_object_set_new(j, "varies", c->knob >= 0 ? json_string(knob_name[c->knob]) : json_null());
    json_object_set_new(j, "prefetch_window",
                        c->prefetch >= 0 ? json_integer(c->prefetch) : json_null());
    json_object_set_new(j, "optimizer_ratio", c->ratio >= 0 ? json_real(c->ratio) : json_null());
    return j;
}

/* Per policy beyond none: in how many placements both fit and how its step compares with
 * none's there (lo, hi: the least and most ratio; same: as many predicted the same). */
typedef struct policy_stat {
    int both, same;
    double lo, hi;
} policy_stat;

static void policy_stats(const search *s, policy_stat st[N_POL])
{
    for (int k = 0; k < N_POL; k++)
        st[k] = (policy_stat){0, 0, INFINITY, 0};
    for (int i = 0; i < s->n; i++) {
        const cand *x = &s->c[i];
        if (!x->fits || x->knob >= 0 || x->pol != 0)
            continue;
        for (int j = 0; j < s->n; j++) {
            const cand *y = &s->c[j];
            if (!y->fits || y->knob >= 0 || y->pol == 0 || y->stage != x->stage ||
                y->rows != x->rows || strcmp(y->param, x->param) || strcmp(y->optim, x->optim))
                continue;
            policy_stat *p = &st[y->pol];
            double r = y->step / x->step;
            p->both++;
            p->same += fabs(r - 1) <= 1e-9;
            p->lo = fmin(p->lo, r), p->hi = fmax(p->hi, r);
        }
    }
}

static json_t *dimensions_json(const search *s)
{
    policy_stat st[N_POL];
    policy_stats(s, st);
    json_t *pol = json_object();
    for (int k = 1; k < N_POL; k++)
        json_object_set_new(pol, policies[k].name,
                            json_pack("{s:i, s:i, s:f, s:f}", "placements", st[k].both, "same",
                                      st[k].same, "step_vs_none_min", st[k].both ? st[k].lo : 0.0,
                                      "step_vs_none_max", st[k].hi));
    json_t *win = json_array(), *rat = json_array();
    for (int v = 0; v < N_WINDOWS; v++)
        json_array_append_new(win, json_integer(s->windows[v]));
    for (int v = 0; v < N_RATIOS; v++)
        json_array_append_new(rat, json_real(ratios[v]));
    json_t *d = json_pack("{s:o}", "activation_policy", pol);
    json_t *vals[N_KNOBS] = {win, rat};
    for (int k = 0; k < N_KNOBS; k++) {
        const knob_stat *n = &s->knobs[k];
        json_object_set_new(
            d, knob_name[k],
            json_pack("{s:o, s:f, s:i, s:i, s:i, s:b, s:f, s:f}", "values", vals[k], "base",
                      k == KNOB_PREFETCH ? (double)s->base_prefetch : s->base_ratio, "tried",
                      n->tried, "fit", n->fit, "differs", n->differs, "searched", n->differs > 0,
                      "step_vs_base_min", n->lo, "step_vs_base_max", n->hi));
    }
    return d;
}

/* What each dimension beyond placement, stage and micro-batch came to, in words: where the
 * step model does not tell the values apart, it says so rather than choose among them. */
static void print_dimensions(const search *s)
{
    policy_stat st[N_POL];
    policy_stats(s, st);
    printf("activation policies (each that fits predicted):");
    for (int k = 1; k < N_POL; k++) {
        const policy_stat *p = &st[k];
        if (!p->both)
            printf(" %s: nowhere with none;", policies[k].name);
        else if (p->same == p->both)
            printf(" %s: predicted as none (%d placements: the model does not tell them apart);",
                   policies[k].name, p->both);
        else
            printf(" %s: %+.1f%% to %+.1f%% against none (%d placements);", policies[k].name,
                   100 * (p->lo - 1), 100 * (p->hi - 1), p->both);
    }
    printf("\n");
    const char *what[N_KNOBS] = {"prefetch window (stage3_prefetch_bucket_size)",
                                 "optimizer split (offload_optimizer.ratio)"};
    for (int k = 0; k < N_KNOBS; k++) {
        const knob_stat *n = &s->knobs[k];
        printf("%s: ", what[k]);
        for (int v = 0; v < knob_values(k); v++)
            if (k == KNOB_PREFETCH)
                printf("%s%lld", v ? ", " : "", (long long)s->windows[v]);
            else
                printf("%s%g", v ? ", " : "", ratios[v]);
        printf(" against the base %g on the %d fastest configurations it applies to: %d tried, "
               "%d fit",
               k == KNOB_PREFETCH ? (double)s->base_prefetch : s->base_ratio, REFINE_TOP, n->tried,
               n->fit);
        if (!n->fit)
            printf("; none fits the budgets\n");
        else if (!n->differs)
            printf("; the step model predicts each as its base: not searched, left at the "
                   "base's\n");
        else
            printf(", %d predicted otherwise (%+.1f%% to %+.1f%%): searched\n", n->differs,
                   100 * (n->lo - 1), 100 * (n->hi - 1));
    }
}

static void print_result(const search *s, double secs, int json)
{
    const cand *best = &s->c[0], *next = runner_up(s);
    if (json) {
        json_t *all = json_array();
        for (int i = 0; i < s->n; i++)
            json_array_append_new(all, cand_json(&s->c[i]));
        json_t *o = json_pack("{s:i, s:i, s:i, s:f, s:o, s:o, s:o, s:o}", "evaluated", s->evaluated,
                              "fit", s->fit, "predicted", s->predicted, "seconds", secs, "best",
                              cand_json(best), "runner_up", next ? cand_json(next) : json_null(),
                              "dimensions", dimensions_json(s), "candidates", all);
        char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (txt)
            printf("%s\n", txt);
        free(txt);
        json_decref(o);
        return;
    }
    char d[320];
    describe(best, d, sizeof d);
    printf("evaluated %d configurations in %.2f s: %d fit the budgets, %d predicted\n",
           s->evaluated, secs, s->fit, s->predicted);
    print_dimensions(s);
    printf("best: %s\n  predicted step %.4f s, %.0f tokens/s, bound by %s\n", d, best->step,
           best->tokens_s, res_name[bound(best)]);
    printf("ds_config (with the trainer's --checkpoint-activations %s):\n",
           policies[best->pol].flag);
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
               : next->pol != best->pol   ? "a heavier activation policy"
               : next->nvme != best->nvme ? "more NVMe space"
               : next->host != best->host ? "more host memory"
                                          : "more device memory");
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The base configuration's prefetch window and optimizer split, and the windows tried: none
 * (0) and 1, 2 and 4 of the model's median layer, in elements. */
static void knob_bases(search *s, const est_model *m)
{
    const zt_config *cfg = &m->rt->cfg;
    s->base_prefetch = cfg->stage3_prefetch_bucket_size;
    s->base_ratio = cfg->offload_optimizer.ratio;
    int n = m->rt->reg.n_layers;
    int64_t *numel = malloc((size_t)(n > 0 ? n : 1) * sizeof *numel), median = 0;
    if (numel && n > 0) {
        for (int i = 0; i < n; i++) { /* its parameters' (flat_numel is set at commit) */
            const zt_layer *L = &m->rt->reg.layers[i];
            numel[i] = 0;
            for (int j = 0; j < L->n_params; j++)
                numel[i] += m->rt->reg.params[L->param_ids[j]].numel;
        }
        qsort(numel, (size_t)n, sizeof *numel, cmp_i64);
        median = numel[n / 2];
    }
    free(numel);
    for (int v = 0; v < N_WINDOWS; v++)
        s->windows[v] = v ? median << (v - 1) : 0;
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
        knob_bases(&s, &m);
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
        for (int k = 0; k < N_KNOBS && rc == 0 && s.fit; k++)
            rc = refine(&s, k, err, sizeof err);
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

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
#include "tools/plan_search_int.h"
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

const char *const search_res_name[N_RES] = {"compute", "h2d", "d2h", "nvme", "cpu_opt", "net"};
/* activation checkpoint policies, least recompute (then least traffic) first */
const policy_def search_policies[N_POL] = {{"none", "none", "none", "none"},
                                           {"selective", "selective", "selective", "none"},
                                           {"full", "full", "full", "none"},
                                           {"full+host", "full+offload", "full", "cpu"},
                                           {"full+nvme", "full+offload", "full", "nvme"}};
const char *const search_knob_name[N_KNOBS] = {"prefetch_window", "optimizer_ratio"};
const double search_ratios[N_RATIOS] = {0.75, 0.5, 0.25};

static const char *const placements[][2] = {{"none", "none"}, {"none", "cpu"}, {"none", "nvme"},
                                            {"cpu", "cpu"},   {"cpu", "nvme"}, {"nvme", "nvme"}};
#define N_PLACE (int)(sizeof placements / sizeof placements[0])
/* 1 runs as 2 in ztier (docs/configuration.md); --stage N searches that stage alone */
static const int stages[] = {0, 1, 2, 3};

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
    json_object_set_new(act, "device", json_string(search_policies[c->pol].act_device));
    if (!strcmp(search_policies[c->pol].act_device, "nvme"))
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
    int gpu = !strcmp(m.rt->cfg.device_backend, "cuda");
    a.att_keep = gpu ? GPT2_ATT_LSE : GPT2_ATT_PROBS;
    a.fused_dgelu = gpu;
    est_free_model(&m);
    return est_acts_json(&a);
}

/* The bytes with its policy's activations (the device total; the blocks' inputs in host memory
 * or on NVMe for full+host, full+nvme) against the budgets (`ztier estimate`'s judgement). */
static void judge_policy(const search *s, cand *c, json_t *acts)
{
    const policy_def *p = &search_policies[c->pol];
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
    const char *policy = search_policies[c->pol].flag;
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
        search_describe(c, d, sizeof d);
        return snprintf(err, len, "ztier plan failed on %s: %s", d, line), -1;
    }
    c->step = json_number_value(json_object_get(j, "step_s"));
    c->tokens_s = json_number_value(json_object_get(j, "tokens_per_s"));
    for (int i = 0; i < N_RES; i++)
        c->busy[i] =
            json_number_value(json_object_get(json_object_get(j, "busy_s"), search_res_name[i]));
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
                    if (!strcmp(search_policies[k].act_device, "nvme") && !s->b.nvme_path)
                        continue;
                    if (evaluate(s, &p, acts, err, len) != 0)
                        return json_decref(acts), -1;
                }
                json_decref(acts);
            }
    return 0;
}

/* Whether a knob means anything for the candidate: the prefetcher moves layers at stage 3
 * where their parameters are off the device or sharded over ranks; the optimizer splits with
 * its state in host memory. */
static int knob_applies(const search *s, const cand *c, int knob)
{
    if (knob == KNOB_PREFETCH)
        return c->stage == 3 && (strcmp(c->param, "none") != 0 || s->o->world > 1);
    return !strcmp(c->optim, "cpu");
}

/* Variant v of the knob on c; 0 when it is the base configuration's value (nothing to try). */
static int set_knob(const search *s, cand *c, int knob, int v)
{
    c->knob = knob;
    if (knob == KNOB_PREFETCH)
        return (c->prefetch = s->windows[v]) != s->base_prefetch;
    return (c->ratio = search_ratios[v]) != s->base_ratio;
}

/* The knob varied on the REFINE_TOP fastest base candidates it applies to. Its variants are
 * ranked only when one of them is predicted otherwise than its base candidate: the model
 * sees the knob; else none is (a tie would pick one for its bytes alone). */
static int refine(search *s, int knob, char *err, size_t len)
{
    knob_stat *k = &s->knobs[knob];
    k->lo = k->hi = 1;
    qsort(s->c, (size_t)s->n, sizeof *s->c, search_faster);
    int n0 = s->n, first = s->n;
    for (int i = 0, parents = 0; i < n0 && s->c[i].ranked && parents < REFINE_TOP; i++) {
        cand par = s->c[i]; /* a copy: add_cand moves the list */
        if (par.knob >= 0 || !knob_applies(s, &par, knob))
            continue;
        parents++;
        for (int v = 0; v < search_knob_values(knob); v++) {
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
                     search_knob_name[knob]);
        }
    return 0;
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
            qsort(s.c, (size_t)s.n, sizeof *s.c, search_faster);
            if (!s.fit) {
                rc = -1;
                snprintf(err, sizeof err,
                         "none of the %d configurations fits the budgets (device %llu, host "
                         "%llu, NVMe %llu bytes%s); raise --device-memory or --host-memory, or "
                         "give an --nvme-path",
                         s.evaluated, (unsigned long long)s.b.device, (unsigned long long)s.b.host,
                         (unsigned long long)s.b.nvme, s.b.nvme_path ? "" : ", no nvme_path");
            } else {
                search_print(&s, bench_now() - t0, o->json);
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

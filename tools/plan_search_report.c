/* SPDX-License-Identifier: MIT */
/* What `ztier plan --search` prints (tools/plan_search_int.h): the order of its candidates,
 * the best with its ds_config and the runner-up with why it lost, and per dimension whether the
 * step model tells its values apart. */
#include "tools/plan_search_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void search_describe(const cand *c, char *buf, size_t len)
{
    int n = snprintf(buf, len,
                     "stage %d, parameters on %s, optimizer state on %s, micro-batch %d x %d "
                     "accumulation, activation policy %s",
                     c->stage, strcmp(c->param, "none") ? c->param : "device",
                     strcmp(c->optim, "none") ? c->optim : "device", c->rows, c->accum,
                     search_policies[c->pol].name);
    if (n > 0 && (size_t)n < len && c->prefetch >= 0)
        n += snprintf(buf + n, len - (size_t)n, ", prefetch window %lld elements",
                      (long long)c->prefetch);
    if (n > 0 && (size_t)n < len && c->ratio >= 0)
        snprintf(buf + n, len - (size_t)n, ", optimizer ratio %g", c->ratio);
}

/* Fastest first; those not ranked (not fitting, or a variant of a knob the model does not
 * see) last. Among equally fast ones (the model does not see a small micro-batch's slower
 * GEMMs, nor NVMe's wear), the one with fewer accumulation steps, then the base configuration's
 * knobs, the lighter policy, the least NVMe, host and device memory. */
static int cmp_u64(uint64_t x, uint64_t y) { return (x > y) - (x < y); }

int search_faster(const void *a, const void *b)
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
        json_object_set_new(busy, search_res_name[i], json_real(c->busy[i]));
    json_t *j = json_pack(
        "{s:i, s:s, s:s, s:i, s:i, s:s, s:s, s:I, s:I, s:I, s:b, s:b, s:s, s:f, s:f, s:o, s:O}",
        "stage", c->stage, "params", c->param, "optimizer", c->optim, "micro_batch", c->rows,
        "accumulation", c->accum, "activation_policy", search_policies[c->pol].name,
        "checkpoint_activations", search_policies[c->pol].flag, "device_bytes",
        (json_int_t)c->device, "host_bytes", (json_int_t)c->host, "nvme_bytes", (json_int_t)c->nvme,
        "fits", c->fits, "ranked", c->ranked, "why", c->why, "step_s", c->step, "tokens_per_s",
        c->tokens_s, "busy_s", busy, "ds_config", c->ds);
    json_object_set_new(j, "varies",
                        c->knob >= 0 ? json_string(search_knob_name[c->knob]) : json_null());
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
        json_object_set_new(pol, search_policies[k].name,
                            json_pack("{s:i, s:i, s:f, s:f}", "placements", st[k].both, "same",
                                      st[k].same, "step_vs_none_min", st[k].both ? st[k].lo : 0.0,
                                      "step_vs_none_max", st[k].hi));
    json_t *win = json_array(), *rat = json_array();
    for (int v = 0; v < N_WINDOWS; v++)
        json_array_append_new(win, json_integer(s->windows[v]));
    for (int v = 0; v < N_RATIOS; v++)
        json_array_append_new(rat, json_real(search_ratios[v]));
    json_t *d = json_pack("{s:o}", "activation_policy", pol);
    json_t *vals[N_KNOBS] = {win, rat};
    for (int k = 0; k < N_KNOBS; k++) {
        const knob_stat *n = &s->knobs[k];
        json_object_set_new(
            d, search_knob_name[k],
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
            printf(" %s: nowhere with none;", search_policies[k].name);
        else if (p->same == p->both)
            printf(" %s: predicted as none (%d placements: the model does not tell them apart);",
                   search_policies[k].name, p->both);
        else
            printf(" %s: %+.1f%% to %+.1f%% against none (%d placements);", search_policies[k].name,
                   100 * (p->lo - 1), 100 * (p->hi - 1), p->both);
    }
    printf("\n");
    const char *what[N_KNOBS] = {"prefetch window (stage3_prefetch_bucket_size)",
                                 "optimizer split (offload_optimizer.ratio)"};
    for (int k = 0; k < N_KNOBS; k++) {
        const knob_stat *n = &s->knobs[k];
        printf("%s: ", what[k]);
        for (int v = 0; v < search_knob_values(k); v++)
            if (k == KNOB_PREFETCH)
                printf("%s%lld", v ? ", " : "", (long long)s->windows[v]);
            else
                printf("%s%g", v ? ", " : "", search_ratios[v]);
        double base = k == KNOB_PREFETCH ? (double)s->base_prefetch : s->base_ratio;
        char b[32] = "auto"; /* offload_optimizer.ratio "auto" */
        if (base >= 0)
            snprintf(b, sizeof b, "%g", base);
        printf(" against the base %s on the %d fastest configurations it applies to: %d tried, "
               "%d fit",
               b, REFINE_TOP, n->tried, n->fit);
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

void search_print(const search *s, double secs, int json)
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
    search_describe(best, d, sizeof d);
    printf("evaluated %d configurations in %.2f s: %d fit the budgets, %d predicted\n",
           s->evaluated, secs, s->fit, s->predicted);
    print_dimensions(s);
    printf("best: %s\n  predicted step %.4f s, %.0f tokens/s, bound by %s\n", d, best->step,
           best->tokens_s, search_res_name[bound(best)]);
    printf("ds_config (with the trainer's --checkpoint-activations %s):\n",
           search_policies[best->pol].flag);
    char *txt = json_dumps(best->ds, JSON_INDENT(2));
    printf("%s\n", txt ? txt : "{}");
    free(txt);
    if (!next) {
        printf("runner-up: none (no other configuration fits)\n");
        return;
    }
    search_describe(next, d, sizeof d);
    printf("runner-up: %s\n  predicted step %.4f s, %.0f tokens/s", d, next->step, next->tokens_s);
    int r = bound(next);
    if (search_faster(best, next) < 0 &&
        fabs(best->tokens_s - next->tokens_s) > 1e-9 * (best->tokens_s + next->tokens_s))
        printf(" (%.1f%% fewer): bound by %s, busy %.4f s of its step against %.4f s in the "
               "best\n",
               100 * (1 - next->tokens_s / best->tokens_s), search_res_name[r], next->busy[r],
               best->busy[r]);
    else /* as fast: the tie-break */
        printf(": as fast (both bound by %s); ranked lower for %s\n", search_res_name[r],
               next->accum != best->accum ? "more accumulation steps"
               : next->pol != best->pol   ? "a heavier activation policy"
               : next->nvme != best->nvme ? "more NVMe space"
               : next->host != best->host ? "more host memory"
                                          : "more device memory");
}

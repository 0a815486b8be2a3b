/* SPDX-License-Identifier: MIT */
/* `ztier plan --search`'s own types, shared by the search (plan_search.c: the candidates,
 * judged and predicted) and its report (plan_search_report.c: what it prints). Not an
 * interface beyond those two files. */
#ifndef ZT_TOOLS_PLAN_SEARCH_INT_H
#define ZT_TOOLS_PLAN_SEARCH_INT_H

#include "tools/estimate_model.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define N_RES 6 /* the step model's resources, as `ztier plan --json` names them */
extern const char *const search_res_name[N_RES];

/* The placements: parameters' and optimizer state's homes ("none": device memory). Which a
 * stage allows is the configuration's rule: est_build rejects the others. */
/* activation checkpoint policies, least recompute (then least traffic) first: the name the
 * search prints, estimate's row of its activation table, the trainer's --checkpoint-activations
 * and activation_checkpointing.device */
typedef struct policy_def {
    const char *name, *row, *flag, *act_device;
} policy_def;
#define N_POL 5
extern const policy_def search_policies[N_POL];

/* The knobs varied on the fastest candidates, one at a time. */
enum { KNOB_PREFETCH, KNOB_RATIO, N_KNOBS };
extern const char *const search_knob_name[N_KNOBS];
#define REFINE_TOP 8 /* the fastest base candidates each knob is varied on */
#define N_RATIOS 3
extern const double search_ratios[N_RATIOS]; /* offload_optimizer.ratio below 1 */
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
    int pol;                     /* search_policies[pol] */
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

/* The values a knob takes besides the base configuration's. */
static inline int search_knob_values(int knob)
{
    return knob == KNOB_PREFETCH ? N_WINDOWS : N_RATIOS;
}

/* "stage 3, parameters on cpu, ..., activation policy full" (and a varied knob's value). */
void search_describe(const cand *c, char *buf, size_t len);
/* qsort's order of candidates: ranked first, then the most tokens/s, then the tie-breaks. */
int search_faster(const void *a, const void *b);
/* The sorted candidates: the best, its ds_config, the runner-up and each dimension's count,
 * as text or (json) one JSON line. */
void search_print(const search *s, double secs, int json);

#endif

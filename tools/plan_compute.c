/* SPDX-License-Identifier: MIT */
/* The profile's GEMM entries for `ztier plan` (plan_compute.h). */
#include "tools/plan_compute.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A positive integer key of entry i, or -1 after the message. */
static int pos_int(json_t *e, const char *key, size_t i, int *out, char *err, size_t len)
{
    json_t *v = json_object_get(e, key);
    double x = json_is_number(v) ? json_number_value(v) : 0;
    if (x < 1 || x != floor(x) || x > 1e9)
        return snprintf(err, len,
                        "the profile's compute[%zu] (op gemm) has no positive integer %s: fix the "
                        "entry or remove it (docs/plan.md, the machine profile)",
                        i, key),
               -1;
    *out = (int)x;
    return 0;
}

static int read_pt(json_t *e, size_t i, plan_gemm_pt *p, char *err, size_t len)
{
    if (pos_int(e, "m", i, &p->m, err, len) || pos_int(e, "n", i, &p->n, err, len) ||
        pos_int(e, "k", i, &p->k, err, len))
        return -1;
    const char *pass = json_string_value(json_object_get(e, "pass"));
    p->pass = pass && !strcmp(pass, "forward") ? 0 : pass && !strcmp(pass, "backward") ? 1 : -1;
    json_t *s = json_object_get(e, "seconds");
    if (p->pass < 0 || !json_is_number(s) || json_number_value(s) <= 0)
        return snprintf(err, len,
                        "the profile's compute[%zu] (op gemm) needs \"pass\": \"forward\" or "
                        "\"backward\" and positive \"seconds\": fix the entry or remove it "
                        "(docs/plan.md, the machine profile)",
                        i),
               -1;
    p->s = json_number_value(s);
    return 0;
}

int plan_gemms_read(json_t *compute, double rate, plan_gemms *g, char *err, size_t len)
{
    memset(g, 0, sizeof *g);
    g->rate = rate;
    size_t n = json_array_size(compute), i;
    if (n && !(g->pt = calloc(n, sizeof *g->pt)))
        return snprintf(err, len, "out of memory reading the profile's compute entries"), -1;
    json_t *e;
    json_array_foreach(compute, i, e)
    {
        const char *op = json_string_value(json_object_get(e, "op"));
        if (!op || strcmp(op, "gemm"))
            continue;
        if (read_pt(e, i, &g->pt[g->n], err, len) != 0)
            return -1;
        g->n++;
    }
    return 0;
}

void plan_gemms_free(plan_gemms *g)
{
    free(g->pt);
    g->pt = NULL;
    g->n = 0;
}

static double gemm_flops(double m, int n, int k, int pass)
{
    return (pass ? 4.0 : 2.0) * m * n * k;
}

static double pt_rate(const plan_gemm_pt *p)
{
    return gemm_flops(p->m, p->n, p->k, p->pass) / p->s;
}

plan_mm plan_gemm_time(const plan_gemms *g, int m, int n, int k, int pass)
{
    /* the nearest entries of the shape at or below m and above it */
    const plan_gemm_pt *lo = NULL, *hi = NULL;
    for (int i = 0; i < g->n; i++) {
        const plan_gemm_pt *p = &g->pt[i];
        if (p->n != n || p->k != k || p->pass != pass)
            continue;
        if (p->m <= m && (!lo || p->m > lo->m))
            lo = p;
        if (p->m > m && (!hi || p->m < hi->m))
            hi = p;
    }
    double flops = gemm_flops(m, n, k, pass);
    plan_mm r = {flops / g->rate, PLAN_SRC_RATE, m, 0, 0};
    if (lo && lo->m == m)
        r.s = lo->s, r.src = PLAN_SRC_GEMM_EXACT, r.lo = r.hi = m;
    else if (lo && hi) {
        double t = (log(m) - log(lo->m)) / (log(hi->m) - log(lo->m));
        r.s = flops / (pt_rate(lo) + t * (pt_rate(hi) - pt_rate(lo)));
        r.src = PLAN_SRC_GEMM_INTERP, r.lo = lo->m, r.hi = hi->m;
    } else if (lo || hi) {
        const plan_gemm_pt *p = lo ? lo : hi;
        r.s = flops / pt_rate(p), r.src = PLAN_SRC_GEMM_CLAMPED, r.lo = r.hi = p->m;
    }
    return r;
}

/* Sums the GEMMs of shapes[n][2] (k, n) at m; rate_s when none has an entry. */
static plan_mm sum_gemms(const plan_gemms *g, int m, const int (*shape)[2], int n, int pass,
                         double rate_s)
{
    plan_mm sum = {0, PLAN_SRC_GEMM_EXACT, m, 0, 0};
    int entries = 0;
    for (int i = 0; i < n; i++) {
        plan_mm x = plan_gemm_time(g, m, shape[i][1], shape[i][0], pass);
        entries += x.src != PLAN_SRC_RATE;
        sum.s += x.s;
        if (x.src >= sum.src) /* the worst source names the sum */
            sum.src = x.src, sum.lo = x.lo, sum.hi = x.hi;
    }
    if (!entries)
        sum.s = rate_s, sum.src = PLAN_SRC_RATE;
    return sum;
}

plan_mm plan_block_matmuls(const plan_gemms *g, int m, int C, int pass, double rate_s)
{
    const int shape[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}}; /* k, n */
    return sum_gemms(g, m, shape, 4, pass, rate_s);
}

plan_mm plan_head_matmul(const plan_gemms *g, int m, int C, int Vp, int pass, double rate_s)
{
    const int shape[1][2] = {{C, Vp}};
    return sum_gemms(g, m, shape, 1, pass, rate_s);
}

void plan_mm_describe(const plan_mm *x, char *buf, size_t len)
{
    switch (x->src) {
    case PLAN_SRC_LAYER:
        snprintf(buf, len, "the exact layer entry (the whole layer)");
        break;
    case PLAN_SRC_GEMM_EXACT:
        snprintf(buf, len, "GEMM entries at m %d", x->m);
        break;
    case PLAN_SRC_GEMM_INTERP:
        snprintf(buf, len, "GEMM entries at m %d (interpolated between m %d and %d)", x->m, x->lo,
                 x->hi);
        break;
    case PLAN_SRC_GEMM_CLAMPED:
        snprintf(buf, len, "GEMM entries at m %d (clamped: the rate measured at m %d)", x->m,
                 x->lo);
        break;
    case PLAN_SRC_RATE:
        snprintf(buf, len, "gemm_flops_per_s");
        break;
    default:
        snprintf(buf, len, "none");
    }
}

static const char *const use_name[2][2] = {{"block_forward", "block_backward"},
                                           {"head_forward", "head_backward"}};

void plan_mm_text(const plan_mm mm[2][2], char *buf, size_t len)
{
    static const char *const words[2][2] = {{"block forward", "block backward"},
                                            {"head forward", "head backward"}};
    size_t at = (size_t)snprintf(buf, len, "matmuls from:");
    const char *sep = " ";
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < 2 && at < len; p++) {
            if (mm[l][p].src == PLAN_SRC_NONE)
                continue;
            char d[160];
            plan_mm_describe(&mm[l][p], d, sizeof d);
            at += (size_t)snprintf(buf + at, len - at, "%s%s: %s", sep, words[l][p], d);
            sep = "; ";
        }
}

json_t *plan_mm_json(const plan_mm mm[2][2])
{
    static const char *const code[] = {"layer", "gemm", "gemm_interpolated", "gemm_clamped",
                                       "rate"};
    json_t *o = json_object();
    for (int l = 0; o && l < 2; l++)
        for (int p = 0; p < 2; p++) {
            const plan_mm *x = &mm[l][p];
            if (x->src == PLAN_SRC_NONE)
                continue;
            char d[160];
            plan_mm_describe(x, d, sizeof d);
            int has_m = x->src >= PLAN_SRC_GEMM_EXACT && x->src <= PLAN_SRC_GEMM_CLAMPED;
            json_object_set_new(o, use_name[l][p],
                                json_pack("{s:s, s:i, s:o, s:f, s:s}", "source", code[x->src], "m",
                                          x->m, "from_m",
                                          has_m ? json_pack("[i, i]", x->lo, x->hi) : json_null(),
                                          "seconds", x->s, "text", d));
        }
    return o;
}

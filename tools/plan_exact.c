/* SPDX-License-Identifier: MIT */
/* The profile's exact-shape compute entries for `ztier plan` (plan_exact.h). */
#include "tools/plan_exact.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const layer_name[] = {"embed", "block", "ln_f", "head", "loss"};

static int int_is(json_t *e, const char *key, int want)
{
    json_t *v = json_object_get(e, key);
    return json_is_number(v) && json_number_value(v) == want;
}

/* The entry's kind and pass, or -1 for an op the plan does not use. */
static int kind_of(json_t *e, int *pass)
{
    const char *op = json_string_value(json_object_get(e, "op"));
    const char *layer = json_string_value(json_object_get(e, "layer"));
    if (op && !strcmp(op, "attention"))
        return *pass = -1, PLAN_ATTENTION;
    if (!op || !layer)
        return -1;
    *pass = !strcmp(op, "layer_forward") ? 0 : !strcmp(op, "layer_backward") ? 1 : -1;
    for (int k = 0; *pass >= 0 && k < PLAN_ATTENTION; k++)
        if (!strcmp(layer, layer_name[k]))
            return k;
    return -1;
}

static int seconds(json_t *e, const char *key, size_t i, double *out, char *err, size_t len)
{
    json_t *v = json_object_get(e, key);
    if (!json_is_number(v) || json_number_value(v) <= 0)
        return snprintf(err, len,
                        "the profile's compute[%zu] is at the model's shape but has no positive "
                        "%s: fix the entry or remove it (docs/plan.md, the machine profile)",
                        i, key),
               -1;
    *out = json_number_value(v);
    return 0;
}

int plan_exact_read(json_t *compute, int B, int T, int C, int NH, plan_exact *x, char *err,
                    size_t len)
{
    memset(x->from, 0, sizeof x->from);
    for (int k = 0; k < PLAN_NKIND; k++)
        x->s[k][0] = x->s[k][1] = -1;
    x->found = 0;
    size_t i;
    json_t *e;
    json_array_foreach(compute, i, e)
    {
        int pass, k = kind_of(e, &pass);
        if (k < 0 || !int_is(e, "B", B) || !int_is(e, "T", T) || !int_is(e, "C", C) ||
            !int_is(e, "NH", NH))
            continue;
        int rc = k == PLAN_ATTENTION /* forward and backward in one entry */
                     ? seconds(e, "forward_s", i, &x->s[k][0], err, len) ||
                           seconds(e, "backward_s", i, &x->s[k][1], err, len)
                     : seconds(e, "seconds", i, &x->s[k][pass], err, len);
        if (rc)
            return -1;
        x->found++;
    }
    return 0;
}

/* The layers whose time is linear in the tokens, so an entry at another B x T scales. */
static int scales(int k) { return k == PLAN_EMBED || k == PLAN_LN_F || k == PLAN_LOSS; }

/* How far an entry's tokens are from the step's: |log ratio|. */
static double token_distance(double tokens, double entry) { return fabs(log(tokens / entry)); }

void plan_exact_scale(json_t *compute, int B, int T, int C, int NH, plan_exact *x)
{
    double tokens = (double)B * T, near[PLAN_NKIND][2] = {{0}}, at[PLAN_NKIND][2] = {{0}};
    size_t i;
    json_t *e;
    json_array_foreach(compute, i, e)
    {
        int pass, k = kind_of(e, &pass);
        json_t *s = json_object_get(e, "seconds");
        double eb = json_number_value(json_object_get(e, "B"));
        double et = json_number_value(json_object_get(e, "T"));
        if (k < 0 || !scales(k) || (x->s[k][pass] >= 0 && !x->from[k][pass][0]))
            continue; /* not a scaling layer, or its entry at the shape is there */
        if (!int_is(e, "C", C) || !int_is(e, "NH", NH) || eb < 1 || et < 1 || eb != floor(eb) ||
            et != floor(et) || !json_is_number(s) || json_number_value(s) <= 0)
            continue;
        double d = token_distance(tokens, eb * et);
        if (x->from[k][pass][0] &&
            (d > near[k][pass] || (d == near[k][pass] && eb * et <= at[k][pass])))
            continue; /* one nearer (or as near and larger) is held */
        near[k][pass] = d, at[k][pass] = eb * et;
        x->from[k][pass][0] = (int)eb, x->from[k][pass][1] = (int)et;
        x->scale[k][pass] = tokens / (eb * et);
        x->s[k][pass] = json_number_value(s) * x->scale[k][pass];
    }
}

static const char *const pass_name[2] = {"forward", "backward"};

/* One used entry in words, e.g. "loss forward: the entry at 4 x 64 scaled per token (x0.5:
 * 0.0325 s)". */
static void describe(const plan_exact *x, int k, int p, char *buf, size_t len)
{
    const int *f = x->from[k][p];
    if (f[0])
        snprintf(buf, len, "%s %s: the entry at %d x %d scaled per token (x%.4g: %.4g s)",
                 layer_name[k], pass_name[p], f[0], f[1], x->scale[k][p], x->s[k][p]);
    else
        snprintf(buf, len, "%s %s: the entry at the shape (%.4g s)", layer_name[k], pass_name[p],
                 x->s[k][p]);
}

/* Whether the output names layer k's entry in pass p (a scaling layer with an entry used). */
static int used(const plan_exact *x, int k, int p) { return scales(k) && x->s[k][p] >= 0; }

int plan_exact_text(const plan_exact *x, char *buf, size_t len)
{
    size_t at = 0;
    for (int k = 0; k < PLAN_NKIND; k++)
        for (int p = 0; p < 2 && at < len; p++) {
            if (!used(x, k, p))
                continue;
            char d[160];
            describe(x, k, p, d, sizeof d);
            at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? "; " : "layers from: ", d);
        }
    return at > 0;
}

json_t *plan_exact_json(const plan_exact *x)
{
    json_t *o = json_object();
    for (int k = 0; o && k < PLAN_NKIND; k++)
        for (int p = 0; p < 2; p++) {
            if (!used(x, k, p))
                continue;
            char key[32], d[160];
            const int *f = x->from[k][p];
            snprintf(key, sizeof key, "%s_%s", layer_name[k], pass_name[p]);
            describe(x, k, p, d, sizeof d);
            json_object_set_new(o, key,
                                json_pack("{s:s, s:f, s:o, s:f, s:s}", "source",
                                          f[0] ? "layer_scaled" : "layer", "seconds", x->s[k][p],
                                          "from",
                                          f[0] ? json_pack("[i, i]", f[0], f[1]) : json_null(),
                                          "scale", f[0] ? x->scale[k][p] : 1.0, "text", d));
        }
    return o;
}

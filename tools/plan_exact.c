/* SPDX-License-Identifier: MIT */
/* The profile's exact-shape compute entries for `ztier plan` (plan_exact.h). */
#include "tools/plan_exact.h"

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

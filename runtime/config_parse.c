/* SPDX-License-Identifier: MIT */
/* DeepSpeed-style JSON configuration: walks the document, looks every key up in the table
 * (config_keys.c), stores valid values, logs DeepSpeed keys ztier does not use, warns
 * about unknown keys with the closest known one, and rejects invalid values with the JSON
 * path, the value and what is allowed. zt_config_validate checks the same table again on
 * the final struct (after environment overrides or edits by the caller). */
#include "runtime/config_parse.h"
#include "runtime/config_auto.h"
#include "runtime/config_schedule.h"
#include "runtime/config_keys.h"
#include "runtime/config_scan.h"
#include "core/log.h"

#include <errno.h>
#include <stddef.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- describing values and what is allowed ---- */

/* The value as JSON text for messages, a long one shortened in the middle (malloc'd). */
static char *value_text(const json_t *v)
{
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) : NULL;
    if (s && strlen(s) > 80) {
        char q[ZT_QUOTE_MAX];
        zt_text_quote(q, sizeof q, s, 0);
        free(s);
        s = strdup(q);
    }
    return s ? s : strdup("?");
}

static size_t enum_list(const char *const *values, char *buf, size_t n)
{
    size_t len = 0;
    for (int i = 0; values[i] && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s\"%s\"", i ? ", " : "", values[i]);
    return len;
}

static void describe_allowed(const zt_config_key *k, char *buf, size_t n)
{
    const char *what = k->kind == ZT_KEY_FLOAT ? "a number" : "an integer";
    size_t len = 0;
    switch (k->kind) {
    case ZT_KEY_INT:
    case ZT_KEY_I64:
    case ZT_KEY_FLOAT:
    case ZT_KEY_BYTES:
        if (k->max >= ZT_KEY_NO_MAX)
            len = (size_t)snprintf(buf, n, "must be %s >= %.17g", what, k->min);
        else
            len = (size_t)snprintf(buf, n, "must be %s in [%.17g, %.17g]", what, k->min, k->max);
        if (k->multiple && len < n)
            len += (size_t)snprintf(buf + len, n - len, " and a multiple of %d", k->multiple);
        if (k->kind == ZT_KEY_BYTES && len < n)
            snprintf(buf + len, n - len, " (bytes; a string like \"2G\" or \"512M\" works too)");
        return;
    case ZT_KEY_BOOL:
        snprintf(buf, n, "must be true or false");
        return;
    case ZT_KEY_ENUM:
    case ZT_KEY_ENUM_STR:
        len = (size_t)snprintf(buf, n, "must be one of ");
        enum_list(k->values, buf + len, n - len);
        return;
    case ZT_KEY_PATH:
        snprintf(buf, n, "must be a path string (\"\" for none)");
        return;
    case ZT_KEY_LEGACY:
        snprintf(buf, n, "must be true or false");
        return;
    case ZT_KEY_PATHS:
        snprintf(buf, n, "must be a folder path or a list of 1 to %d folder paths",
                 ZT_MAX_NVME_PATHS);
        return;
    case ZT_KEY_BETAS:
        snprintf(buf, n, "must be [beta1, beta2], each a number in [0, 1)");
        return;
    case ZT_KEY_IGNORED:
    case ZT_KEY_DROPPED:
        break;
    }
    snprintf(buf, n, "is not used");
}

/* "origin: path = value: allowed" (origin may be NULL for checks on the final struct). */
static zt_status fail_text(zt_error *err, const char *origin, const char *path, const char *text,
                           const char *allowed)
{
    return ZT_ERR(err, ZT_ERR_CONFIG, "%s%s%s = %s: %s", origin ? origin : "", origin ? ": " : "",
                  path, text, allowed);
}

static zt_status fail_value(zt_error *err, const char *origin, const char *path, const json_t *v,
                            const char *allowed)
{
    char *text = value_text(v);
    zt_status st = fail_text(err, origin, path, text, allowed);
    free(text);
    return st;
}

static zt_status fail_key(const zt_config_key *k, zt_error *err, const char *origin,
                          const json_t *v)
{
    char allowed[512];
    describe_allowed(k, allowed, sizeof allowed);
    return fail_value(err, origin, k->path, v, allowed);
}

/* ---- storing values ---- */

static int enum_index(const char *const *values, const char *s)
{
    for (int i = 0; values && values[i]; i++)
        if (strcasecmp(values[i], s) == 0)
            return i;
    return -1;
}

/* An integer, or a real with no fractional part (DeepSpeed configs write 5e8). */
static int integral_value(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 1;
    }
    double x = json_is_real(v) ? json_real_value(v) : 0.5;
    if (x != floor(x) || fabs(x) >= ZT_KEY_NO_MAX)
        return 0;
    *out = (int64_t)x;
    return 1;
}

static int int_in_range(const zt_config_key *k, int64_t i)
{
    return (double)i >= k->min && (double)i <= k->max && (!k->multiple || i % k->multiple == 0);
}

static zt_status set_number(const zt_config_key *k, zt_config *cfg, const json_t *v,
                            const char *origin, zt_error *err)
{
    char *field = (char *)cfg + k->offset;
    if (k->kind == ZT_KEY_FLOAT) {
        double x = json_number_value(v);
        if (!json_is_number(v) || x < k->min || x > k->max)
            return fail_key(k, err, origin, v);
        *(float *)field = (float)x;
        return ZT_OK;
    }
    int64_t i = 0;
    int ok = integral_value(v, &i) || (k->kind == ZT_KEY_BYTES && json_is_string(v) &&
                                       zt_config_parse_bytes(json_string_value(v), &i) == 0);
    if (!ok || !int_in_range(k, i))
        return fail_key(k, err, origin, v);
    if (k->kind == ZT_KEY_INT)
        *(int *)field = (int)i;
    else
        *(int64_t *)field = i;
    return ZT_OK;
}

static zt_status set_bool(const zt_config_key *k, zt_config *cfg, const json_t *v,
                          const char *origin, zt_error *err)
{
    int *field = (int *)((char *)cfg + k->offset);
    if (json_is_boolean(v))
        *field = json_is_true(v);
    else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
        *field = (int)json_integer_value(v);
    else
        return fail_key(k, err, origin, v);
    return ZT_OK;
}

static zt_status set_enum(const zt_config_key *k, zt_config *cfg, const json_t *v,
                          const char *origin, zt_error *err)
{
    char *field = (char *)cfg + k->offset;
    int idx = json_is_string(v) ? enum_index(k->values, json_string_value(v)) : -1;
    if (idx < 0)
        return fail_key(k, err, origin, v);
    if (k->kind == ZT_KEY_ENUM)
        *(int *)field = idx;
    else
        snprintf(field, sizeof cfg->adam_variant, "%s", k->values[idx]);
    return ZT_OK;
}

/* A path string longer than the configuration holds. */
static zt_status path_too_long(const zt_config_key *k, const json_t *v, const char *origin,
                               zt_error *err)
{
    char allowed[160];
    snprintf(allowed, sizeof allowed,
             "a path is too long: at most %d bytes; use a shorter one (a symbolic link to the "
             "folder works)",
             ZT_PATH_MAX - 1);
    return fail_value(err, origin, k->path, v, allowed);
}

static zt_status set_path(const zt_config_key *k, zt_config *cfg, const json_t *v,
                          const char *origin, zt_error *err)
{
    const char *s = json_is_null(v) ? "" : json_string_value(v);
    if (!s)
        return fail_key(k, err, origin, v);
    if (strlen(s) >= ZT_PATH_MAX)
        return path_too_long(k, v, origin, err);
    snprintf((char *)cfg + k->offset, ZT_PATH_MAX, "%s", s);
    return ZT_OK;
}

/* nvme_path: a string, a list of strings, or null (no path). */
static zt_status set_paths(const zt_config_key *k, zt_config *cfg, const json_t *v,
                           const char *origin, zt_error *err)
{
    zt_offload_config *off =
        (zt_offload_config *)((char *)cfg + k->offset - offsetof(zt_offload_config, nvme_path));
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (json_is_null(v)) {
        off->n_nvme_paths = 0;
        return ZT_OK;
    }
    if (n == 0 || n > ZT_MAX_NVME_PATHS)
        return fail_key(k, err, origin, v);
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_is_string(v) ? v : json_array_get(v, i));
        if (!s || !*s)
            return fail_value(err, origin, k->path, v,
                              "every entry must be a non-empty folder path string");
        if (strlen(s) >= ZT_PATH_MAX)
            return path_too_long(k, v, origin, err);
    }
    for (size_t i = 0; i < n; i++)
        snprintf(off->nvme_path[i], ZT_PATH_MAX, "%s",
                 json_string_value(json_is_string(v) ? v : json_array_get(v, i)));
    off->n_nvme_paths = (int)n;
    return ZT_OK;
}

static int beta_ok(const json_t *b)
{
    return json_is_number(b) && json_number_value(b) >= 0 && json_number_value(b) < 1;
}

static zt_status set_betas(const zt_config_key *k, zt_config *cfg, const json_t *v,
                           const char *origin, zt_error *err)
{
    json_t *b1 = json_array_get(v, 0), *b2 = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !beta_ok(b1) || !beta_ok(b2))
        return fail_key(k, err, origin, v);
    cfg->beta1 = (float)json_number_value(b1);
    cfg->beta2 = (float)json_number_value(b2);
    return ZT_OK;
}

/* DeepSpeed's "auto" (filled in by HF Trainer/Accelerate): kept as ztier's default where that
 * is meaningful, an error elsewhere. Returns 1 when v was "auto" (and *st says the outcome). */
static int handle_auto(const zt_config_key *k, const json_t *v, const char *origin, zt_error *err,
                       zt_status *st)
{
    if (!json_is_string(v) || strcasecmp(json_string_value(v), "auto") != 0 ||
        enum_index(k->values, "auto") >= 0)
        return 0;
    *st = ZT_OK;
    if (k->auto_ok == ZT_AUTO_MODEL) {
        ZT_LOGI("config", "%s = \"auto\": from the model's hidden size at commit", k->path);
        return 1;
    }
    if (k->auto_ok == ZT_AUTO_MEASURED) {
        ZT_LOGI("config", "%s = \"auto\": chosen at commit from measured rates", k->path);
        return 1;
    }
    if (k->auto_ok) {
        ZT_LOGI("config", "%s = \"auto\": using ztier's default", k->path);
        return 1;
    }
    char allowed[600], what[512];
    describe_allowed(k, what, sizeof what);
    snprintf(allowed, sizeof allowed,
             "ztier cannot honour \"auto\" here; put an explicit value instead: it %s", what);
    *st = fail_value(err, origin, k->path, v, allowed);
    return 1;
}

/* A dropped key at DeepSpeed's default changes nothing: null, false, an object with
 * "enabled": false, bias_correction true, gradient_predivide_factor 1. */
static int drop_is_neutral(const zt_config_key *k, const json_t *v)
{
    if (json_is_null(v))
        return 1;
    if (!strcmp(k->path, "optimizer.params.bias_correction"))
        return json_is_true(v);
    if (!strcmp(k->path, "gradient_predivide_factor"))
        return json_is_number(v) && json_number_value(v) == 1.0;
    if (json_is_object(v))
        return json_is_false(json_object_get(v, "enabled"));
    return json_is_false(v);
}

/* The record of "auto" keys whose default changes training (zt_config.auto_keys): noted when
 * given as "auto", forgotten when given a value (aliases share the field's offset). */
static void forget_auto(zt_config *cfg, const zt_config_key *k)
{
    zt_config_forget_auto(cfg, k->offset);
}

static void note_auto(zt_config *cfg, const zt_config_key *k)
{
    forget_auto(cfg, k);
    if ((k->auto_ok == ZT_AUTO_WARNED || k->auto_ok == ZT_AUTO_MODEL) &&
        cfg->n_auto_keys < ZT_CONFIG_MAX_AUTO)
        cfg->auto_keys[cfg->n_auto_keys++] = (int)(k - zt_config_keys);
}

int zt_config_auto_report(const zt_config *cfg, char *buf, size_t len)
{
    size_t used = 0;
    int n_warned = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; i < cfg->n_auto_keys; i++) {
        const zt_config_key *k = &zt_config_keys[cfg->auto_keys[i]];
        if (k->auto_ok != ZT_AUTO_WARNED)
            continue;
        if (used >= len) {
            n_warned++;
            continue;
        }
        const char *f = (const char *)cfg + k->offset;
        char v[64];
        if (k->offset == offsetof(zt_config, sched.warmup_max_lr))
            snprintf(v, sizeof v, "%g (optimizer.params.lr)", (double)*(const float *)f);
        else if (k->kind == ZT_KEY_FLOAT)
            snprintf(v, sizeof v, "%g", (double)*(const float *)f);
        else if (k->kind == ZT_KEY_I64)
            snprintf(v, sizeof v, "%lld", (long long)*(const int64_t *)f);
        else if (k->kind == ZT_KEY_BETAS)
            snprintf(v, sizeof v, "[%g, %g]", (double)((const float *)f)[0], (double)cfg->beta2);
        else if (k->kind == ZT_KEY_BOOL)
            snprintf(v, sizeof v, "%s", *(const int *)f ? "true" : "false");
        else
            snprintf(v, sizeof v, "%d", *(const int *)f);
        int n = snprintf(buf + used, len - used, "%s%s = %s", n_warned++ ? ", " : "", k->path, v);
        used += n > 0 ? (size_t)n : 0;
    }
    return n_warned;
}

int zt_config_resolve_model_autos(zt_config *cfg, int64_t h, char *buf, size_t len)
{
    size_t used = 0;
    int n_set = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; h > 0 && i < cfg->n_auto_keys; i++) {
        const zt_config_key *k = &zt_config_keys[cfg->auto_keys[i]];
        if (k->auto_ok != ZT_AUTO_MODEL)
            continue;
        int64_t v = h * h; /* reduce_bucket_size */
        if (k->offset == offsetof(zt_config, stage3_prefetch_bucket_size))
            v = (int64_t)(0.9 * (double)h * (double)h);
        else if (k->offset == offsetof(zt_config, stage3_param_persistence_threshold))
            v = 10 * h;
        *(int64_t *)((char *)cfg + k->offset) = v;
        if (used < len) {
            int n = snprintf(buf + used, len - used, "%s%s = %lld", n_set ? ", " : "", k->path,
                             (long long)v);
            used += n > 0 ? (size_t)n : 0;
        }
        n_set++;
        cfg->auto_keys[i--] = cfg->auto_keys[--cfg->n_auto_keys];
    }
    return n_set;
}

/* An ignored key whose value is still checked (amsgrad: only false is DeepSpeed's meaning). */
static int ignored_but_checked(const zt_config_key *k)
{
    return k->kind == ZT_KEY_IGNORED && !strcmp(k->path, "optimizer.params.amsgrad");
}

/* Keys whose "not given" is a value outside their range (DeepSpeed's None): the field holds it
 * until a value comes, a null gives it back, and validation lets it pass. */
static const struct absent_key {
    size_t offset;
    int64_t value;
} absent_keys[] = {
    {offsetof(zt_config, train_batch_size), 0},
    {offsetof(zt_config, train_micro_batch_size_per_gpu), 0},
    {offsetof(zt_config, sched) + offsetof(zt_lr_schedule, cycle_second_step_size), -1},
    {offsetof(zt_config, sched) + offsetof(zt_lr_schedule, cycle_second_stair_count), -1},
};

static const struct absent_key *absent_key(const zt_config_key *k)
{
    for (size_t i = 0; i < sizeof absent_keys / sizeof absent_keys[0]; i++)
        if (absent_keys[i].offset == k->offset && (k->kind == ZT_KEY_INT || k->kind == ZT_KEY_I64))
            return &absent_keys[i];
    return NULL;
}

/* 1 when the key's field holds its "not given" value. */
static int is_absent(const zt_config_key *k, const zt_config *cfg)
{
    const struct absent_key *a = absent_key(k);
    const char *f = (const char *)cfg + k->offset;
    return a &&
           (k->kind == ZT_KEY_INT ? *(const int *)f == a->value : *(const int64_t *)f == a->value);
}

/* A key whose null is DeepSpeed's "not set" (its documented default): the default stays, or
 * the field gets its "not given" value back. */
static int null_is_unset(const zt_config_key *k, zt_config *cfg, const json_t *v)
{
    if (!json_is_null(v))
        return 0;
    const struct absent_key *a = absent_key(k);
    char *f = (char *)cfg + k->offset;
    if (a && k->kind == ZT_KEY_INT)
        *(int *)f = (int)a->value;
    else if (a)
        *(int64_t *)f = a->value;
    if (k->offset == offsetof(zt_config, comm_dtype)) /* DeepSpeed's default: the model's */
        *(int *)f = ZT_COMM_DATA_AUTO;
    return a || k->offset == offsetof(zt_config, comm_dtype) ||
           (k->offset == offsetof(zt_config, act_number_checkpoints) && k->kind == ZT_KEY_I64);
}

static zt_status set_value(const zt_config_key *k, zt_config *cfg, const json_t *v,
                           const char *origin, zt_error *err)
{
    zt_status st = ZT_OK;
    if (null_is_unset(k, cfg, v))
        return ZT_OK;
    if (strncmp(k->path, "optimizer.", 10) == 0)
        cfg->optimizer_given = 1;
    zt_config_note_given(cfg, k->path);
    if (ignored_but_checked(k) && !json_is_false(v))
        return fail_value(err, origin, k->path, v,
                          "ztier's Adam has no AMSGrad variant (it keeps no running maximum of "
                          "the second moment), so training would differ from the config's; "
                          "remove the key or set it to false");
    if (k->kind == ZT_KEY_IGNORED) {
        ZT_LOGI("config", "%s: not used by ztier (ignored)", k->path);
        return ZT_OK;
    }
    if (k->kind == ZT_KEY_DROPPED) { /* it would change training: said at the default level */
        if (drop_is_neutral(k, v))
            ZT_LOGI("config", "%s: DeepSpeed's default, which ztier's behaviour matches", k->path);
        else
            ZT_LOGW("config", "%s%s%s: %s (a DeepSpeed setting ztier does not apply)",
                    origin ? origin : "", origin ? ": " : "", k->path, k->doc);
        return ZT_OK;
    }
    if (k->kind == ZT_KEY_LEGACY) /* applied after the walk (apply_legacy) */
        return json_is_boolean(v) ? ZT_OK : fail_key(k, err, origin, v);
    if (handle_auto(k, v, origin, err, &st)) {
        if (st == ZT_OK)
            note_auto(cfg, k);
        if (st == ZT_OK && k->auto_ok == ZT_AUTO_MEASURED)
            *(float *)((char *)cfg + k->offset) = ZT_RATIO_AUTO;
        return st;
    }
    forget_auto(cfg, k); /* a value given: no longer "auto" (a bad one fails the parse) */
    if (k->offset == offsetof(zt_config, weight_decay) && k->kind == ZT_KEY_FLOAT)
        cfg->weight_decay_set = 1;
    switch (k->kind) {
    case ZT_KEY_INT:
    case ZT_KEY_I64:
    case ZT_KEY_FLOAT:
    case ZT_KEY_BYTES:
        return set_number(k, cfg, v, origin, err);
    case ZT_KEY_BOOL:
        return set_bool(k, cfg, v, origin, err);
    case ZT_KEY_ENUM:
    case ZT_KEY_ENUM_STR:
        return set_enum(k, cfg, v, origin, err);
    case ZT_KEY_PATH:
        return set_path(k, cfg, v, origin, err);
    case ZT_KEY_PATHS:
        return set_paths(k, cfg, v, origin, err);
    case ZT_KEY_BETAS:
        return set_betas(k, cfg, v, origin, err);
    case ZT_KEY_IGNORED:
    case ZT_KEY_DROPPED:
    case ZT_KEY_LEGACY:
        break;
    }
    return ZT_OK;
}

/* ---- unknown keys ---- */

static const zt_config_key *find_key(const char *path)
{
    for (const zt_config_key *k = zt_config_keys; k->path; k++)
        if (strcmp(k->path, path) == 0)
            return k;
    return NULL;
}

static int is_object_path(const char *path)
{
    for (int i = 0; zt_config_objects[i]; i++)
        if (strcmp(zt_config_objects[i], path) == 0)
            return 1;
    return 0;
}

/* Levenshtein distance, capped at 3 (all that matters for suggestions). */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), prev[128], cur[128];
    if (la >= 128 || lb >= 128 || (la > lb ? la - lb : lb - la) > 2)
        return 3;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(size_t) * (lb + 1));
    }
    return prev[lb] < 3 ? prev[lb] : 3;
}

static const char *last_name(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

/* The known key or object closest to `path` (edit distance <= 2), else a known key with the
 * same name under another object (a key put at the wrong level), else NULL. */
static const char *suggest(const char *path)
{
    const char *best = NULL, *moved = NULL;
    size_t best_d = 3;
    for (const zt_config_key *k = zt_config_keys; k->path; k++) {
        size_t d = edit_distance(path, k->path);
        if (d < best_d)
            best = k->path, best_d = d;
        if (!moved && strcmp(last_name(path), last_name(k->path)) == 0)
            moved = k->path;
    }
    for (int i = 0; zt_config_objects[i]; i++) {
        size_t d = edit_distance(path, zt_config_objects[i]);
        if (d < best_d)
            best = zt_config_objects[i], best_d = d;
        if (!moved && strcmp(last_name(path), last_name(zt_config_objects[i])) == 0)
            moved = zt_config_objects[i];
    }
    return best ? best : moved;
}

static zt_status unknown_key(const char *path, const char *name, const char *origin, int strict,
                             zt_error *err)
{
    const char *hint = strchr(name, '.') ? NULL : suggest(path);
    char advice[600] = "";
    if (strchr(name, '.'))
        snprintf(advice, sizeof advice, "; write dotted paths as nested objects");
    else if (hint)
        snprintf(advice, sizeof advice, "; did you mean '%s'?", hint);
    if (strict) /* a key set from code: a typo there must not pass silently */
        return ZT_ERR(err, ZT_ERR_CONFIG, "%s: unknown key '%s'%s", origin, path, advice);
    ZT_LOGW("config", "unknown key '%s' ignored%s", path, advice);
    return ZT_OK;
}

/* Older DeepSpeed names of whole objects, read as the current ones (with a warning). */
static const char *const object_aliases[][2] = {{"bfloat16", "bf16"}, {NULL, NULL}};

static const char *object_alias(const char *path)
{
    for (int i = 0; object_aliases[i][0]; i++)
        if (strcmp(path, object_aliases[i][0]) == 0)
            return object_aliases[i][1];
    return NULL;
}

/* ---- walking the document ---- */

static zt_status walk(zt_config *cfg, json_t *obj, const char *prefix, const char *origin,
                      int strict, zt_error *err)
{
    const char *name;
    json_t *v;
    json_object_foreach(obj, name, v)
    {
        char path[512];
        int n = snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
        int plain = n < (int)sizeof path && !strchr(name, '.'); /* "a.b" keys are not paths */
        const zt_config_key *k = plain ? find_key(path) : NULL;
        const char *alias = plain && !k ? object_alias(path) : NULL;
        int object = plain && !k && (alias || is_object_path(path));
        zt_status st = ZT_OK;
        if (alias)
            ZT_LOGW("config",
                    "'%s' is DeepSpeed's older name of '%s': read as '%s' (write "
                    "'%s' instead)",
                    path, alias, alias, alias);
        if (k)
            st = set_value(k, cfg, v, origin, err);
        else if (object && json_is_object(v))
            st = walk(cfg, v, alias ? alias : path, origin, strict, err);
        else if (object && json_is_null(v))
            ZT_LOGI("config", "%s = null: using ztier's defaults", path);
        else if (object)
            st = fail_value(err, origin, path, v, "must be an object");
        else
            st = unknown_key(path, name, origin, strict, err);
        if (st != ZT_OK)
            return st;
    }
    return ZT_OK;
}

static json_t *get_path(json_t *root, const char *a, const char *b, const char *c)
{
    json_t *v = json_object_get(root, a);
    v = v && b ? json_object_get(v, b) : v;
    return v && c ? json_object_get(v, c) : v;
}

/* DeepSpeed's optimizer defaults depend on the type: "Adam" has weight_decay 0 and, with
 * adam_w_mode (default true), decoupled decay, i.e. AdamW; "AdamW" is always decoupled.
 * Derived from the fields as written, so it gives the same answer whatever order the file,
 * the text and zt_config_set calls gave them in. */
static void resolve(zt_config *cfg)
{
    int adam = cfg->optimizer_type == ZT_OPT_ADAM;
    if (!cfg->weight_decay_set)
        cfg->weight_decay = adam ? 0.0f : 0.01f;
    cfg->optimizer = !adam || cfg->adam_w_mode ? ZT_OPT_ADAMW : ZT_OPT_ADAM;
    zt_config_resolve_schedule(cfg);
    if (cfg->sub_group_size == 0) {
        ZT_LOGI("config", "zero_optimization.sub_group_size = 0: using the default (1e9)");
        cfg->sub_group_size = 1000000000;
    }
}

/* Deprecated DeepSpeed switches and the keys that replaced them. A true switch sets its
 * modern key, unless the same document sets that key too (DeepSpeed refuses the pair). */
static const struct legacy_key {
    const char *path, *modern_object, *modern_key, *value; /* value NULL: the switch's own */
} legacy_keys[] = {
    {"zero_optimization.cpu_offload", "zero_optimization.offload_optimizer", "device", "cpu"},
    {"zero_optimization.cpu_offload_param", "zero_optimization.offload_param", "device", "cpu"},
    {"zero_optimization.cpu_offload_params", "zero_optimization.offload_param", "device", "cpu"},
    {"zero_optimization.cpu_offload_use_pin_memory", "zero_optimization.offload_param",
     "pin_memory", NULL},
    {"zero_optimization.cpu_offload_use_pin_memory", "zero_optimization.offload_optimizer",
     "pin_memory", NULL},
    {NULL, NULL, NULL, NULL},
};

static zt_status apply_legacy_key(const struct legacy_key *lk, zt_config *cfg, json_t *root,
                                  const char *origin, zt_error *err)
{
    json_t *v = get_path(root, "zero_optimization", lk->path + strlen("zero_optimization."), NULL);
    if (!json_is_boolean(v) || (lk->value && !json_is_true(v)))
        return ZT_OK;
    char modern[160];
    snprintf(modern, sizeof modern, "%s.%s", lk->modern_object, lk->modern_key);
    if (get_path(root, "zero_optimization", lk->modern_object + strlen("zero_optimization."),
                 lk->modern_key))
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "%s: %s and %s are both set: %s is the deprecated form of %s; keep only "
                      "%s",
                      origin, lk->path, modern, lk->path, modern, modern);
    json_t *val = lk->value ? json_string(lk->value) : json_incref(v);
    zt_status st = set_value(find_key(modern), cfg, val, origin, err);
    char *text = value_text(val);
    if (st == ZT_OK)
        ZT_LOGW("config", "%s is deprecated in DeepSpeed: read as %s = %s (write that instead)",
                lk->path, modern, text);
    free(text);
    json_decref(val);
    return st;
}

static zt_status apply_legacy(zt_config *cfg, json_t *root, const char *origin, zt_error *err)
{
    zt_status st = ZT_OK;
    for (const struct legacy_key *lk = legacy_keys; st == ZT_OK && lk->path; lk++)
        st = apply_legacy_key(lk, cfg, root, origin, err);
    return st;
}

/* Rules checked both after parsing and by zt_config_validate. */
/* communication_data_type names the parameters' 16-bit dtype or fp32: ztier sums gradients
 * over ranks in the dtype they are released in, or widened to fp32, nothing else. */
static zt_status check_comm_dtype(const zt_config *cfg, zt_error *err)
{
    static const char *const names[] = {"auto", "fp32", "bf16", "fp16"};
    int want = cfg->comm_dtype;
    if ((want == ZT_COMM_DATA_BF16 && !cfg->bf16) || (want == ZT_COMM_DATA_F16 && !cfg->fp16))
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "communication_data_type = \"%s\" with %s.enabled false: ztier sums "
                      "gradients over ranks in the parameters' 16-bit dtype or in fp32; set it "
                      "to \"fp32\" or \"auto\" (or remove it), or enable %s",
                      names[want], names[want], names[want]);
    return ZT_OK;
}

static zt_status check_core(const zt_config *cfg, zt_error *err)
{
    if (cfg->stage < 3 && cfg->offload_param.device != ZT_TIER_DEVICE)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.offload_param with stage %d: stages 0, 1 and 2 keep "
                      "every layer's parameters on every rank's device, so they cannot be "
                      "offloaded (as in DeepSpeed, offload_param needs stage 3); remove "
                      "offload_param or set stage 3",
                      cfg->stage);
    if (cfg->stage < 3 && cfg->zero_hpz_partition_size > 1)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.zero_hpz_partition_size = %d with stage %d: hpZ keeps "
                      "node-local copies of stage 3's partitioned parameters, which stages 0-2 "
                      "replicate already; remove it or set stage 3",
                      cfg->zero_hpz_partition_size, cfg->stage);
    if (cfg->stage == 1 && cfg->zero_quantized_gradients)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.zero_quantized_gradients with stage 1: qgZ quantizes the "
                      "reduce-scatter of each backward release, which stage 1 replaces by one "
                      "reduction of its own sums per step; set stage 2 or 3, or remove it");
    if (cfg->stage == 0) {
        if (cfg->offload_optimizer.device != ZT_TIER_DEVICE)
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "zero_optimization.offload_optimizer with stage 0: stage 0 keeps the "
                          "whole optimizer state on every rank's device, so nothing is offloaded "
                          "(as in DeepSpeed); remove offload_optimizer or set stage 1, 2 or 3");
        if (cfg->zero_quantized_weights || cfg->zero_quantized_gradients)
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "ZeRO++ (zero_quantized_weights, zero_quantized_gradients) with stage "
                          "0: it applies to the partitioned stages' gathers and reductions; "
                          "remove it or set stage 2 or 3");
    }
    if (cfg->bf16 && cfg->fp16)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "bf16.enabled and fp16.enabled are both true: enable at most one");
    return check_comm_dtype(cfg, err);
}

static zt_status parse_doc(zt_config *cfg, json_t *root, const char *origin, int strict,
                           zt_error *err)
{
    if (!json_is_object(root))
        return ZT_ERR(err, ZT_ERR_CONFIG, "%s: the configuration must be a JSON object ({...})",
                      origin);
    zt_status st = walk(cfg, root, "", origin, strict, err);
    if (st == ZT_OK)
        st = apply_legacy(cfg, root, origin, err);
    if (st != ZT_OK)
        return st;
    resolve(cfg);
    /* rules between keys wait for the whole configuration when keys come one at a time */
    if (!strict && (st = check_core(cfg, err)) != ZT_OK)
        zt_error_prefix(err, "%s: ", origin);
    return st;
}

/* ---- the scan before jansson (config_scan.h) ---- */

/* path with a leading older object name ("bfloat16") read as the current one, into buf. */
static const char *canonical_path(const char *path, char *buf, size_t n)
{
    size_t first = strcspn(path, ".");
    char head[64];
    snprintf(head, sizeof head, "%.*s", (int)(first < 63 ? first : 63), path);
    const char *alias = first < 63 ? object_alias(head) : NULL;
    if (!alias)
        return path;
    snprintf(buf, n, "%s%s", alias, path + first);
    return buf;
}

typedef struct scan_ctx {
    const char *text, *origin;
    size_t len;
    char *blanked; /* the text jansson reads: the caller's writable text, or a copy made at the
                      first value skipped (NULL: none, or the copy failed) */
    int copied;
} scan_ctx;

/* Whether a member's object or array is never read: an ignored DeepSpeed key or an unknown
 * key in an object ztier reads (the walk below sees the key, with 0 for its value). */
static int scan_skip(void *user, const char *path, const char *name)
{
    (void)user;
    char pbuf[512], kbuf[512], parent[512];
    size_t plen = strlen(path) - strlen(name);
    if (plen >= sizeof parent)
        return 0;
    snprintf(parent, sizeof parent, "%.*s", (int)(plen ? plen - 1 : 0), path);
    const char *p = canonical_path(parent, pbuf, sizeof pbuf);
    if (*p && !is_object_path(p))
        return 0; /* inside a value that is read as a whole (arrays, dropped objects) */
    if (strchr(name, '.'))
        return 1; /* "a.b" is an unknown key */
    const char *key = canonical_path(path, kbuf, sizeof kbuf);
    const zt_config_key *k = find_key(key);
    if (!k)
        return !is_object_path(key) && !object_alias(key);
    return k->kind == ZT_KEY_IGNORED && !ignored_but_checked(k);
}

static void scan_skipped(void *user, size_t start, size_t end)
{
    scan_ctx *c = user;
    if (!c->blanked && !c->copied) {
        c->copied = 1;
        c->blanked = malloc(c->len + 1);
        if (c->blanked)
            memcpy(c->blanked, c->text, c->len + 1);
    }
    if (c->blanked)
        zt_json_blank(c->blanked, start, end);
}

static void scan_duplicate(void *user, const char *path, zt_json_pos first, zt_json_pos again)
{
    const scan_ctx *c = user;
    char key[ZT_QUOTE_MAX];
    ZT_LOGW("config",
            "%s: key %s is given twice, at line %d, column %d and at line %d, column %d: the "
            "last one (line %d, column %d) is used; remove the other",
            c->origin, zt_text_quote(key, sizeof key, path, '\''), first.line, first.column,
            again.line, again.column, again.line, again.column);
}

/* jansson's document of text after the scan: keys given twice warned, the values nobody
 * reads blanked out (in `writable`, the text itself, when the caller lets it be changed,
 * else in a copy). prefix: the dotted path the text's members are under. */
static json_t *load_json(const char *text, char *writable, const char *origin, const char *prefix,
                         size_t flags, json_error_t *je)
{
    scan_ctx c = {text, origin, strlen(text), writable, 0};
    zt_json_scan_ops ops = {scan_skip, scan_skipped, scan_duplicate, &c};
    zt_json_scan(text, c.len, prefix, &ops); /* a syntax error: jansson's message says where */
    json_t *root = json_loads(c.blanked ? c.blanked : text, flags, je);
    if (c.copied)
        free(c.blanked);
    return root;
}

static zt_status parse_text(zt_config *cfg, const char *json_text, char *writable,
                            const char *origin, zt_error *err)
{
    json_error_t je;
    origin = origin ? origin : "config text";
    if (!json_text)
        return ZT_ERR(err, ZT_ERR_CONFIG, "%s: no JSON text given", origin);
    json_t *root = load_json(json_text, writable, origin, "", 0, &je);
    if (!root)
        return ZT_ERR(err, ZT_ERR_CONFIG, "%s: JSON syntax error at line %d, column %d: %s", origin,
                      je.line, je.column, je.text);
    zt_status st = parse_doc(cfg, root, origin, 0, err);
    json_decref(root);
    return st;
}

zt_status zt_config_parse(zt_config *cfg, const char *json_text, const char *origin, zt_error *err)
{
    return parse_text(cfg, json_text, NULL, origin, err);
}

/* {"a": {"b": {"c": value}}} for path "a.b.c"; takes value; NULL for an empty part. */
static json_t *nest(const char *path, json_t *value)
{
    json_t *doc = value;
    for (const char *end = path + strlen(path); doc && end > path;) {
        const char *dot = end;
        while (dot > path && dot[-1] != '.')
            dot--;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(end - dot), dot);
        json_t *obj = *name ? json_object() : NULL;
        if (!obj || json_object_set_new(obj, name, doc) != 0) {
            json_decref(obj ? obj : doc);
            return NULL;
        }
        doc = obj;
        if (dot == path)
            break;
        end = dot - 1;
        if (end == path) { /* a leading '.' */
            json_decref(doc);
            return NULL;
        }
    }
    return doc;
}

static const char *const setter_names[] = {"zt_config_set", "zt_config_set_string",
                                           "zt_config_set_int", "zt_config_set_double",
                                           "zt_config_set_bool"};

const char *zt_config_setter_name(zt_config_type t) { return setter_names[t]; }

/* What key k takes from the typed setters when a value of type t does not fit: "an integer:
 * use zt_config_set_int"; NULL when it fits. */
static const char *typed_expectation(const zt_config_key *k, zt_config_type t)
{
    switch (k->kind) {
    case ZT_KEY_INT:
    case ZT_KEY_I64:
        return t == ZT_CONFIG_INT ? NULL : "an integer: use zt_config_set_int";
    case ZT_KEY_FLOAT:
        return t == ZT_CONFIG_DOUBLE || t == ZT_CONFIG_INT ? NULL
                                                           : "a number: use zt_config_set_double";
    case ZT_KEY_BYTES:
        return t == ZT_CONFIG_INT || t == ZT_CONFIG_STRING
                   ? NULL
                   : "a byte count: use zt_config_set_int, or zt_config_set_string with a size "
                     "such as \"2G\"";
    case ZT_KEY_BOOL:
    case ZT_KEY_LEGACY:
        return t == ZT_CONFIG_BOOL ? NULL : "true or false: use zt_config_set_bool";
    case ZT_KEY_ENUM:
    case ZT_KEY_ENUM_STR:
        return t == ZT_CONFIG_STRING ? NULL : "one of its names: use zt_config_set_string";
    case ZT_KEY_PATH:
        return t == ZT_CONFIG_STRING ? NULL : "a path: use zt_config_set_string";
    case ZT_KEY_PATHS:
        return t == ZT_CONFIG_STRING ? NULL
                                     : "a folder path: use zt_config_set_string (several "
                                       "folders: zt_config_set with a JSON list)";
    case ZT_KEY_BETAS:
        return "a list [beta1, beta2]: use zt_config_set with JSON text such as \"[0.9, 0.999]\"";
    case ZT_KEY_IGNORED:
    case ZT_KEY_DROPPED:
        break;
    }
    return NULL;
}

static const char *const type_names[] = {"JSON text", "a string", "an integer", "a number",
                                         "a boolean"};

/* The typed value as JSON in *out. */
static zt_status typed_json(const zt_config_value *v, const char *origin, json_t **out,
                            zt_error *err)
{
    if (v->type == ZT_CONFIG_STRING && !v->text)
        return ZT_ERR(err, ZT_ERR_CONFIG, "%s: value is NULL", origin);
    if (v->type == ZT_CONFIG_DOUBLE && !isfinite(v->d))
        return ZT_ERR(err, ZT_ERR_CONFIG, "%s: the value %g is not a finite number", origin, v->d);
    *out = v->type == ZT_CONFIG_STRING   ? json_string(v->text)
           : v->type == ZT_CONFIG_INT    ? json_integer((json_int_t)v->i)
           : v->type == ZT_CONFIG_DOUBLE ? json_real(v->d)
                                         : json_boolean(v->i);
    if (!*out && v->type == ZT_CONFIG_STRING)
        return ZT_ERR(err, ZT_ERR_CONFIG, "%s: the value is not UTF-8 text", origin);
    return *out ? ZT_OK : ZT_ERR(err, ZT_ERR_NOMEM, "%s: out of memory", origin);
}

/* A typed value for key path: the key must exist and take it (checked before the value). */
static zt_status check_typed(const char *path, const zt_config_value *v, const char *origin,
                             zt_error *err)
{
    char buf[512];
    const char *key = canonical_path(path, buf, sizeof buf);
    if (is_object_path(key) || object_alias(key))
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "%s: %s is an object: set its keys one by one, or give zt_config_set JSON "
                      "text such as {\"key\": value}",
                      origin, path);
    const zt_config_key *k = find_key(key);
    int is_auto = v->type == ZT_CONFIG_STRING && v->text && strcasecmp(v->text, "auto") == 0;
    const char *want = k && !is_auto ? typed_expectation(k, v->type) : NULL;
    if (!want) /* fits; or an unknown key, which the walk names with the closest known one */
        return ZT_OK;
    const char *use = strchr(want, ':');
    return ZT_ERR(err, ZT_ERR_CONFIG, "%s: %s expects %.*s, not %s:%s", origin, k->path,
                  (int)(use - want), want, type_names[v->type], use + 1);
}

zt_status zt_config_set_typed(zt_config *cfg, const char *path, const zt_config_value *v,
                              zt_error *err)
{
    char origin[320];
    snprintf(origin, sizeof origin, "%s(\"%.256s\")", setter_names[v->type], path ? path : "");
    json_t *val = NULL;
    if (v->type == ZT_CONFIG_JSON) {
        if (!v->text)
            return ZT_ERR(err, ZT_ERR_CONFIG, "%s: value is NULL", origin);
        json_error_t je;
        val = load_json(v->text, NULL, origin, path ? path : "", JSON_DECODE_ANY, &je);
        if (!val) /* not JSON: the text itself is the (string) value */
            val = json_string(v->text);
    } else {
        if (!path || !*path)
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "%s: needs the path of a key; a whole document goes through "
                          "zt_config_set with JSON text",
                          origin);
        zt_status st = typed_json(v, origin, &val, err);
        if (st == ZT_OK && (st = check_typed(path, v, origin, err)) != ZT_OK)
            json_decref(val);
        if (st != ZT_OK)
            return st;
    }
    json_t *doc = val && path && *path ? nest(path, val) : val;
    zt_status st = doc ? parse_doc(cfg, doc, origin, 1, err)
                       : ZT_ERR(err, ZT_ERR_CONFIG,
                                "%s: the path has an empty part or the "
                                "value is not UTF-8 text",
                                origin);
    json_decref(doc);
    return st;
}

zt_status zt_config_set_value(zt_config *cfg, const char *path, const char *value, zt_error *err)
{
    zt_config_value v = {ZT_CONFIG_JSON, value, 0, 0};
    return zt_config_set_typed(cfg, path, &v, err);
}

/* Reads a whole file (pipes too) into a NUL-terminated malloc'd buffer the caller frees. */
static zt_status read_text(const char *path, char **out, zt_error *err)
{
    FILE *f = fopen(path, "rb");
    char q[ZT_QUOTE_MAX];
    if (!f)
        return ZT_ERR(err, ZT_ERR_CONFIG, "cannot read config file %s: %s",
                      zt_text_quote(q, sizeof q, path, '\''), strerror(errno));
    size_t cap = 0, len = 0;
    char *text = NULL;
    const char *why = NULL;
    while (!why) {
        if (len + 1 >= cap) {
            char *bigger = cap < (64u << 20) ? realloc(text, cap ? cap * 2 : 4096) : NULL;
            if (!bigger) {
                why = cap < (64u << 20) ? "out of memory" : "larger than 64 MiB";
                break;
            }
            text = bigger, cap = cap ? cap * 2 : 4096;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            why = ferror(f) ? strerror(errno) : "";
    }
    fclose(f);
    if (*why) {
        free(text);
        return ZT_ERR(err, ZT_ERR_CONFIG, "cannot read config file %s: %s",
                      zt_text_quote(q, sizeof q, path, '\''), why);
    }
    text[len] = '\0';
    *out = text;
    return ZT_OK;
}

zt_status zt_config_load_file(zt_config *cfg, const char *path, zt_error *err)
{
    char *text = NULL;
    if (!path)
        return ZT_ERR(err, ZT_ERR_CONFIG, "no config file path given");
    zt_status st = read_text(path, &text, err);
    if (st == ZT_OK) /* the text is ours: values nobody reads are blanked in place */
        st = parse_text(cfg, text, text, path, err);
    free(text);
    return st;
}

/* ---- environment ---- */

static const char *env_value(const char *var)
{
    const char *v = getenv(var);
    return v && *v ? v : NULL;
}

/* An environment variable that sets a table key; messages are "$VAR: path = value: ...". */
static zt_status env_key(const char *var, const char *path, zt_config *cfg, zt_error *err)
{
    const char *v = env_value(var);
    if (!v)
        return ZT_OK;
    char origin[64];
    snprintf(origin, sizeof origin, "environment variable %s", var);
    const zt_config_key *k = find_key(path);
    json_t *s = NULL;
    if (k->kind == ZT_KEY_INT || k->kind == ZT_KEY_I64 || k->kind == ZT_KEY_FLOAT) {
        s = json_loads(v, JSON_DECODE_ANY, NULL); /* a number, as in a config file */
        if (s && !json_is_number(s))
            json_decref(s), s = NULL;
    }
    if (!s)
        s = json_string(v);
    zt_status st = s ? set_value(k, cfg, s, origin, err)
                     : ZT_ERR(err, ZT_ERR_CONFIG, "%s: not valid UTF-8 text", origin);
    json_decref(s);
    return st;
}

/* ZT_NVME_PATH: one folder, or several separated by ':' (striped over, like a list). */
static zt_status env_nvme_paths(zt_config *cfg, zt_error *err)
{
    const char *v = env_value("ZT_NVME_PATH");
    if (!v)
        return ZT_OK;
    zt_offload_config tmp = {0};
    char q[ZT_QUOTE_MAX];
    for (const char *p = v;; p++) {
        size_t len = strcspn(p, ":");
        if (len >= ZT_PATH_MAX)
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "environment variable ZT_NVME_PATH = %s: a path is too long: at most "
                          "%d bytes; use a shorter one (a symbolic link to the folder works)",
                          zt_text_quote(q, sizeof q, v, '"'), ZT_PATH_MAX - 1);
        if (len == 0 || tmp.n_nvme_paths == ZT_MAX_NVME_PATHS)
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "environment variable ZT_NVME_PATH = %s: must be a folder path or "
                          "up to %d non-empty folder paths separated by ':'",
                          zt_text_quote(q, sizeof q, v, '"'), ZT_MAX_NVME_PATHS);
        memcpy(tmp.nvme_path[tmp.n_nvme_paths++], p, len);
        p += len;
        if (!*p)
            break;
    }
    cfg->offload_param.n_nvme_paths = cfg->offload_optimizer.n_nvme_paths = tmp.n_nvme_paths;
    memcpy(cfg->offload_param.nvme_path, tmp.nvme_path, sizeof tmp.nvme_path);
    memcpy(cfg->offload_optimizer.nvme_path, tmp.nvme_path, sizeof tmp.nvme_path);
    return ZT_OK;
}

zt_status zt_config_apply_env(zt_config *cfg, zt_error *err)
{
    const char *log = env_value("ZT_LOG");
    int level = log ? zt_log_level_parse(log) : -1;
    char q[ZT_QUOTE_MAX];
    if (log && level < 0)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "environment variable ZT_LOG = %s: must be one of \"error\", \"warn\", "
                      "\"info\", \"debug\" (or 0 to 3)",
                      zt_text_quote(q, sizeof q, log, '"'));
    if (log)
        cfg->log_level = level;
    zt_status st = env_key("ZT_HBM_CAPACITY", "ztier.hbm_capacity", cfg, err);
    if (st == ZT_OK)
        st = env_nvme_paths(cfg, err);
    if (st == ZT_OK)
        st = env_key("ZT_IO_ENGINE", "ztier.io_engine", cfg, err);
    if (st == ZT_OK)
        st = env_key("ZT_ADAM_VARIANT", "ztier.adam_variant", cfg, err);
    if (st == ZT_OK)
        st = env_key("ZT_TRACE", "ztier.trace_path", cfg, err);
    if (st == ZT_OK)
        st = env_key("ZT_THREADS", "ztier.optimizer_threads", cfg, err);
    return st;
}

/* ---- validation of the final struct ---- */

/* Checks one table key against the value now in *cfg; 1 when allowed. */
static int field_ok(const zt_config_key *k, const zt_config *cfg, char *text, size_t n)
{
    const char *field = (const char *)cfg + k->offset;
    switch (k->kind) {
    case ZT_KEY_INT:
    case ZT_KEY_BOOL:
        snprintf(text, n, "%d", *(const int *)field);
        return int_in_range(k, *(const int *)field);
    case ZT_KEY_I64:
    case ZT_KEY_BYTES:
        snprintf(text, n, "%lld", (long long)*(const int64_t *)field);
        return int_in_range(k, *(const int64_t *)field);
    case ZT_KEY_FLOAT:
        snprintf(text, n, "%.7g", (double)*(const float *)field);
        return *(const float *)field >= k->min && *(const float *)field <= k->max;
    case ZT_KEY_ENUM: {
        int i = *(const int *)field, count = 0;
        while (k->values[count])
            count++;
        if (i >= 0 && i < count)
            return snprintf(text, n, "\"%s\"", k->values[i]), 1;
        snprintf(text, n, "%d", i);
        return 0;
    }
    case ZT_KEY_ENUM_STR:
        snprintf(text, n, "\"%.15s\"", field);
        return enum_index(k->values, field) >= 0;
    case ZT_KEY_BETAS:
        snprintf(text, n, "[%.7g, %.7g]", (double)cfg->beta1, (double)cfg->beta2);
        return cfg->beta1 >= 0 && cfg->beta1 < 1 && cfg->beta2 >= 0 && cfg->beta2 < 1;
    default:
        return 1;
    }
}

static zt_status check_ranges(const zt_config *cfg, zt_error *err)
{
    for (const zt_config_key *k = zt_config_keys; k->path; k++) {
        char text[64], allowed[512];
        if (k->kind == ZT_KEY_ENUM && k->offset == offsetof(zt_config, log_level) &&
            cfg->log_level == -1)
            continue; /* -1: unset */
        if (k->offset == offsetof(zt_config, sched.type) && cfg->sched.type == ZT_LR_CONSTANT)
            continue; /* no scheduler */
        if (k->offset == offsetof(zt_config, hbm_capacity) && cfg->hbm_capacity == 0)
            continue; /* 0: unset */
        if (is_absent(k, cfg))
            continue;
        if (k->auto_ok == ZT_AUTO_MEASURED &&
            *(const float *)((const char *)cfg + k->offset) == ZT_RATIO_AUTO)
            continue; /* "auto": measured at commit */
        if (field_ok(k, cfg, text, sizeof text))
            continue;
        describe_allowed(k, allowed, sizeof allowed);
        return fail_text(err, NULL, k->path, text, allowed);
    }
    return ZT_OK;
}

static zt_status check_nvme(const zt_offload_config *off, const char *name, zt_error *err)
{
    if (off->n_nvme_paths < 0 || off->n_nvme_paths > ZT_MAX_NVME_PATHS)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.%s.nvme_path: %d paths given, at most %d are supported",
                      name, off->n_nvme_paths, ZT_MAX_NVME_PATHS);
    if (off->device == ZT_TIER_NVME && off->n_nvme_paths == 0)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.%s.device is \"nvme\" but zero_optimization.%s.nvme_path "
                      "is not set: set it to a folder on a fast local disk (or a list of folders), "
                      "or set ZT_NVME_PATH",
                      name, name);
    return ZT_OK;
}

/* offload_optimizer.ratio below 1 (or "auto") splits the state between the CPU and the
 * device optimizer: only from host memory, with fp32 sums (the device sums in fp32). */
static zt_status check_optimizer_ratio(const zt_config *cfg, zt_error *err)
{
    const zt_offload_config *o = &cfg->offload_optimizer;
    if (o->ratio == 1.0f)
        return ZT_OK;
    char r[32] = "\"auto\"";
    if (o->ratio != ZT_RATIO_AUTO)
        snprintf(r, sizeof r, "%g", (double)o->ratio);
    if (o->device == ZT_TIER_NVME)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.offload_optimizer.ratio = %s with device \"nvme\": ztier "
                      "splits the optimizer between the CPU and the device only with the state in "
                      "host memory; set the ratio to 1 (or remove it), or device to \"cpu\"",
                      r);
    if (o->device == ZT_TIER_HOST && cfg->grad_accum_bf16)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.offload_optimizer.ratio = %s puts part of the optimizer "
                      "on the device, which sums gradients in fp32; ztier.grad_accum_dtype = "
                      "\"bf16\" cannot apply there: set it to \"fp32\", or the ratio to 1",
                      r);
    return ZT_OK;
}

static zt_status check_backends(const zt_config *cfg, zt_error *err)
{
    zt_status st;
    if (cfg->device_optimizer == ZT_DEVOPT_ON && cfg->offload_optimizer.device != ZT_TIER_DEVICE)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "ztier.device_optimizer = \"on\" runs Adam on optimizer state in device "
                      "memory: set zero_optimization.offload_optimizer.device to \"none\", or "
                      "ztier.device_optimizer to \"auto\"");
    if (cfg->grad_accum_bf16 && zt_config_device_optimizer(cfg))
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "ztier.grad_accum_dtype = \"bf16\" keeps the gradient sums in host "
                      "memory; the optimizer on the device sums in fp32: set it to \"fp32\" "
                      "or ztier.device_optimizer to \"off\"");
    if ((st = check_optimizer_ratio(cfg, err)) != ZT_OK)
        return st;
    if (strcmp(cfg->device_backend, "cuda") != 0)
        return ZT_OK;
    if (strcmp(cfg->comm_backend, "mpi") == 0)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "ztier.comm_backend = \"mpi\" works on host memory; with "
                      "ztier.device_backend \"cuda\" use \"nccl\" (or \"single\")");
    return ZT_OK;
}

zt_status zt_config_validate(const zt_config *cfg, zt_error *err)
{
    zt_status st = check_core(cfg, err);
    if (st == ZT_OK)
        st = check_ranges(cfg, err);
    if (st == ZT_OK)
        st = check_nvme(&cfg->offload_param, "offload_param", err);
    if (st == ZT_OK)
        st = check_nvme(&cfg->offload_optimizer, "offload_optimizer", err);
    if (st == ZT_OK)
        st = check_backends(cfg, err);
    if (st == ZT_OK && cfg->act_offload.device == ZT_TIER_NVME && !cfg->act_offload.n_nvme_paths &&
        !cfg->offload_param.n_nvme_paths && !cfg->offload_optimizer.n_nvme_paths)
        st = ZT_ERR(err, ZT_ERR_CONFIG,
                    "activation_checkpointing.device is \"nvme\" but no folder is set: set "
                    "activation_checkpointing.nvme_path to a folder on a fast local disk (it "
                    "falls back to offload_param's or offload_optimizer's nvme_path)");
    return st;
}

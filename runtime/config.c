/* DeepSpeed-style JSON configuration: walks the document, looks every key up in the table
 * (config_schema.c), stores valid values, warns about unknown keys with the closest known
 * one, and rejects invalid values with the JSON path, the value and what is allowed. */
#include "runtime/config.h"
#include "runtime/config_schema.h"
#include "runtime/log.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void zt_config_defaults(zt_config *c)
{
    memset(c, 0, sizeof *c);
    c->stage = 3;
    zt_offload_config off = {0};
    off.device = ZT_TIER_DEVICE;
    off.pin_memory = 1;
    off.buffer_count = 4;
    off.buffer_size = 100000000;
    off.max_in_cpu = 1000000000;
    c->offload_param = off;
    c->offload_optimizer = off;
    c->stage3_prefetch_bucket_size = 50000000;
    c->stage3_max_live_parameters = 1000000000;
    c->stage3_max_reuse_distance = 1000000000;
    c->stage3_param_persistence_threshold = 100000;
    c->reduce_bucket_size = 500000000;
    c->sub_group_size = 1000000000;
    c->overlap_comm = c->contiguous_gradients = 1;
    c->zero_hpz_partition_size = 1;
    c->aio_block_size = 1 << 20;
    c->aio_queue_depth = 32;
    c->aio_intra_op_parallelism = 1;
    c->aio_overlap_events = 1;
    c->optimizer = ZT_OPT_ADAMW;
    c->adam_w_mode = 1;
    c->lr = 1e-3f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->weight_decay = 0.01f;
    c->fp16_initial_scale_power = 16;
    c->fp16_loss_scale_window = 1000;
    c->fp16_hysteresis = 2;
    c->fp16_min_loss_scale = 1.0f;
    c->gradient_accumulation_steps = 1;
    strcpy(c->device_backend, "host");
    strcpy(c->comm_backend, "auto");
    c->hbm_capacity = (int64_t)8 << 30;
    strcpy(c->adam_variant, "auto");
    c->log_level = -1;
    c->quant_block_size = 256;
}

/* ---- value parsing ---- */

static char *value_text(json_t *v)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    return s ? s : strdup("?");
}

static zt_status bad_value(zt_error *err, const char *origin, const char *path, json_t *v,
                           const char *allowed)
{
    char *text = value_text(v);
    ZT_ERR(err, ZT_ERR_CONFIG, "%s: %s = %s: %s", origin, path, text, allowed);
    free(text);
    return ZT_ERR_CONFIG;
}

/* Parses "2G", "512M", "64K", "1024" (powers of 1024); -1 on error. */
static int64_t parse_bytes(const char *s)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': mult = 1024.0, end++; break;
    case 'M': mult = 1048576.0, end++; break;
    case 'G': mult = 1073741824.0, end++; break;
    case 'T': mult = 1099511627776.0, end++; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    return *end ? -1 : (int64_t)(v * mult);
}

static int integral_number(json_t *v, double *out)
{
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return 1;
    }
    if (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v)) {
        *out = json_real_value(v);
        return 1;
    }
    return 0;
}

static zt_status set_number(const zt_config_key *k, char *base, json_t *v, const char *origin,
                            zt_error *err)
{
    char allowed[160];
    double x;
    int ok = k->kind == ZT_KEY_FLOAT ? json_is_number(v) : integral_number(v, &x);
    if (k->kind == ZT_KEY_FLOAT && ok)
        x = json_number_value(v);
    if (k->kind == ZT_KEY_BYTES && json_is_string(v)) {
        x = (double)parse_bytes(json_string_value(v));
        ok = x >= 0;
    }
    snprintf(allowed, sizeof allowed, "must be %s in [%.17g, %.17g]%s",
             k->kind == ZT_KEY_FLOAT ? "a number" : "an integer", k->min, k->max,
             k->kind == ZT_KEY_BYTES ? " (bytes; strings like \"2G\" or \"512M\" work too)" : "");
    if (!ok || x < k->min || x > k->max)
        return bad_value(err, origin, k->path, v, allowed);
    if (k->kind == ZT_KEY_INT)
        *(int *)(base + k->offset) = (int)x;
    else if (k->kind == ZT_KEY_FLOAT)
        *(float *)(base + k->offset) = (float)x;
    else
        *(int64_t *)(base + k->offset) = (int64_t)x;
    return ZT_OK;
}

static int enum_index(const char *const *values, const char *s)
{
    for (int i = 0; values[i]; i++)
        if (strcasecmp(values[i], s) == 0)
            return i;
    return -1;
}

static zt_status set_enum(const zt_config_key *k, char *base, json_t *v, const char *origin,
                          zt_error *err)
{
    char allowed[256] = "must be one of";
    for (int i = 0; k->values[i]; i++)
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s \"%s\"",
                 i ? "," : "", k->values[i]);
    int idx = json_is_string(v) ? enum_index(k->values, json_string_value(v)) : -1;
    if (idx < 0)
        return bad_value(err, origin, k->path, v, allowed);
    if (k->kind == ZT_KEY_ENUM)
        *(int *)(base + k->offset) = idx;
    else
        snprintf(base + k->offset, 16, "%s", k->values[idx]);
    return ZT_OK;
}

static zt_status set_paths(const zt_config_key *k, char *base, json_t *v, const char *origin,
                           zt_error *err)
{
    zt_offload_config *off = (zt_offload_config *)(base + k->offset -
                                                   offsetof(zt_offload_config, nvme_path));
    json_t *list = json_is_string(v) ? json_pack("[O]", v) : json_incref(v);
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    zt_status st = ZT_OK;
    if (n == 0 || n > ZT_MAX_NVME_PATHS)
        st = bad_value(err, origin, k->path, v,
                       "must be a folder path or a list of 1 to 8 folder paths");
    for (size_t i = 0; st == ZT_OK && i < n; i++) {
        json_t *p = json_array_get(list, i);
        if (!json_is_string(p) || !*json_string_value(p) ||
            strlen(json_string_value(p)) >= ZT_PATH_MAX)
            st = bad_value(err, origin, k->path, v, "every entry must be a non-empty path");
        else
            snprintf(off->nvme_path[i], ZT_PATH_MAX, "%s", json_string_value(p));
    }
    if (st == ZT_OK)
        off->n_nvme_paths = (int)n;
    json_decref(list);
    return st;
}

static zt_status set_value(const zt_config_key *k, zt_config *cfg, json_t *v,
                           const char *origin, zt_error *err)
{
    char *base = (char *)cfg;
    if (k->kind == ZT_KEY_IGNORED) {
        ZT_LOGI("config", "%s: a DeepSpeed setting ztier does not use", k->path);
        return ZT_OK;
    }
    int auto_is_value = k->values && enum_index(k->values, "auto") >= 0;
    if (json_is_string(v) && strcasecmp(json_string_value(v), "auto") == 0 && !auto_is_value) {
        if (k->auto_ok) {
            ZT_LOGI("config", "%s = \"auto\": using ztier's default", k->path);
            return ZT_OK;
        }
        return bad_value(err, origin, k->path, v,
                         "ztier cannot honour \"auto\" here; give an explicit value");
    }
    switch (k->kind) {
    case ZT_KEY_INT:
    case ZT_KEY_I64:
    case ZT_KEY_FLOAT:
    case ZT_KEY_BYTES:
        return set_number(k, base, v, origin, err);
    case ZT_KEY_BOOL:
        if (json_is_boolean(v) || (json_is_integer(v) && (json_integer_value(v) == 0 ||
                                                          json_integer_value(v) == 1))) {
            *(int *)(base + k->offset) = json_is_boolean(v) ? json_is_true(v)
                                                             : (int)json_integer_value(v);
            return ZT_OK;
        }
        return bad_value(err, origin, k->path, v, "must be true or false");
    case ZT_KEY_ENUM:
    case ZT_KEY_ENUM_STR:
        return set_enum(k, base, v, origin, err);
    case ZT_KEY_PATH:
        if (!json_is_string(v) || strlen(json_string_value(v)) >= ZT_PATH_MAX)
            return bad_value(err, origin, k->path, v, "must be a path string");
        snprintf(base + k->offset, ZT_PATH_MAX, "%s", json_string_value(v));
        return ZT_OK;
    case ZT_KEY_PATHS:
        return set_paths(k, base, v, origin, err);
    case ZT_KEY_BETAS: {
        json_t *b1 = json_array_get(v, 0), *b2 = json_array_get(v, 1);
        if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(b1) ||
            !json_is_number(b2) || json_number_value(b1) < 0 || json_number_value(b1) >= 1 ||
            json_number_value(b2) < 0 || json_number_value(b2) >= 1)
            return bad_value(err, origin, k->path, v, "must be [beta1, beta2], each in [0, 1)");
        cfg->beta1 = (float)json_number_value(b1);
        cfg->beta2 = (float)json_number_value(b2);
        return ZT_OK;
    }
    case ZT_KEY_IGNORED:
        break;
    }
    return ZT_OK;
}

/* ---- walking the document ---- */

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

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), prev[256], cur[256];
    if (la > 255 || lb > 255)
        return 1000;
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
    return prev[lb];
}

static void warn_unknown(const char *path)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (const zt_config_key *k = zt_config_keys; k->path; k++) {
        size_t d = edit_distance(path, k->path);
        if (d < best_d)
            best = k->path, best_d = d;
    }
    if (best)
        ZT_LOGW("config", "unknown key '%s' ignored; did you mean '%s'?", path, best);
    else
        ZT_LOGW("config", "unknown key '%s' ignored", path);
}

static zt_status walk(zt_config *cfg, json_t *obj, const char *prefix, const char *origin,
                      zt_error *err)
{
    const char *name;
    json_t *v;
    json_object_foreach(obj, name, v)
    {
        char path[512];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
        const zt_config_key *k = find_key(path);
        zt_status st = ZT_OK;
        if (k)
            st = set_value(k, cfg, v, origin, err);
        else if (is_object_path(path) && json_is_object(v))
            st = walk(cfg, v, path, origin, err);
        else if (is_object_path(path))
            st = bad_value(err, origin, path, v, "must be an object");
        else
            warn_unknown(path);
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

/* Rules that involve more than one key. */
static zt_status resolve(zt_config *cfg, json_t *root, const char *origin, zt_error *err)
{
    json_t *type = get_path(root, "optimizer", "type", NULL);
    if (type && cfg->optimizer == ZT_OPT_ADAM && cfg->adam_w_mode)
        cfg->optimizer = ZT_OPT_ADAMW; /* DeepSpeed's Adam defaults to decoupled decay */
    if (type && !get_path(root, "optimizer", "params", "weight_decay"))
        cfg->weight_decay = 0.0f; /* DeepSpeed's Adam/AdamW default */
    if (cfg->stage != 3)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "%s: zero_optimization.stage = %d: ztier implements ZeRO stage 3 only "
                      "(parameters, gradients and optimizer state partitioned); set it to 3",
                      origin, cfg->stage);
    if (cfg->bf16 && cfg->fp16)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "%s: bf16.enabled and fp16.enabled are both true: enable at most one",
                      origin);
    return ZT_OK;
}

zt_status zt_config_parse(zt_config *cfg, const char *json_text, const char *origin,
                          zt_error *err)
{
    json_error_t je;
    json_t *root = json_loads(json_text, 0, &je);
    if (!root)
        return ZT_ERR(err, ZT_ERR_CONFIG, "%s: JSON syntax error at line %d, column %d: %s",
                      origin, je.line, je.column, je.text);
    zt_status st = ZT_OK;
    if (!json_is_object(root))
        st = ZT_ERR(err, ZT_ERR_CONFIG, "%s: the configuration must be a JSON object", origin);
    if (st == ZT_OK)
        st = walk(cfg, root, "", origin, err);
    if (st == ZT_OK)
        st = resolve(cfg, root, origin, err);
    json_decref(root);
    return st;
}

zt_status zt_config_load_file(zt_config *cfg, const char *path, zt_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ZT_ERR(err, ZT_ERR_CONFIG, "cannot read config file '%s': %s", path,
                      strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = n >= 0 && n < (64l << 20) ? malloc((size_t)n + 1) : NULL;
    zt_status st = ZT_OK;
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n)
        st = ZT_ERR(err, ZT_ERR_CONFIG, "cannot read config file '%s'", path);
    fclose(f);
    if (st == ZT_OK) {
        text[n] = '\0';
        st = zt_config_parse(cfg, text, path, err);
    }
    free(text);
    return st;
}

/* ---- environment and cross-checks ---- */

static zt_status env_enum(const char *var, const char *path, zt_config *cfg, zt_error *err)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return ZT_OK;
    json_t *s = json_string(v);
    zt_status st = set_value(find_key(path), cfg, s, var, err);
    json_decref(s);
    return st;
}

zt_status zt_config_apply_env(zt_config *cfg, zt_error *err)
{
    const char *log = getenv("ZT_LOG");
    if (log && *log && (cfg->log_level = zt_log_level_parse(log)) < 0)
        return ZT_ERR(err, ZT_ERR_CONFIG, "ZT_LOG = \"%s\": must be error, warn, info or debug",
                      log);
    const char *hbm = getenv("ZT_HBM_CAPACITY");
    if (hbm && *hbm) {
        int64_t b = parse_bytes(hbm);
        if (b < (1 << 20))
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "ZT_HBM_CAPACITY = \"%s\": must be a byte count >= 1M (e.g. 2G)", hbm);
        cfg->hbm_capacity = b;
    }
    const char *nvme = getenv("ZT_NVME_PATH");
    if (nvme && *nvme) {
        if (strlen(nvme) >= ZT_PATH_MAX)
            return ZT_ERR(err, ZT_ERR_CONFIG, "ZT_NVME_PATH is longer than %d bytes", ZT_PATH_MAX);
        snprintf(cfg->offload_param.nvme_path[0], ZT_PATH_MAX, "%s", nvme);
        snprintf(cfg->offload_optimizer.nvme_path[0], ZT_PATH_MAX, "%s", nvme);
        cfg->offload_param.n_nvme_paths = cfg->offload_optimizer.n_nvme_paths = 1;
    }
    zt_status st = env_enum("ZT_IO_ENGINE", "ztier.io_engine", cfg, err);
    return st == ZT_OK ? env_enum("ZT_ADAM_VARIANT", "ztier.adam_variant", cfg, err) : st;
}

zt_status zt_config_validate(const zt_config *cfg, zt_error *err)
{
    if (cfg->offload_param.device == ZT_TIER_NVME && cfg->offload_param.n_nvme_paths == 0)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.offload_param.device is \"nvme\" but "
                      "zero_optimization.offload_param.nvme_path is not set: give a folder on "
                      "a fast disk (or set ZT_NVME_PATH)");
    if (cfg->offload_optimizer.device == ZT_TIER_NVME && cfg->offload_optimizer.n_nvme_paths == 0)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_optimization.offload_optimizer.device is \"nvme\" but "
                      "zero_optimization.offload_optimizer.nvme_path is not set: give a folder "
                      "on a fast disk (or set ZT_NVME_PATH)");
    if (strcmp(cfg->device_backend, "cuda") == 0 &&
        (cfg->zero_quantized_weights || cfg->zero_quantized_gradients ||
         cfg->zero_hpz_partition_size > 1))
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "zero_quantized_weights/zero_quantized_gradients/hpZ run on host memory only "
                      "in this build (no CUDA quantization path yet); turn them off with "
                      "ztier.device_backend \"cuda\"");
    if (strcmp(cfg->device_backend, "cuda") == 0 && strcmp(cfg->comm_backend, "mpi") == 0)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "ztier.comm_backend \"mpi\" works on host memory; with "
                      "ztier.device_backend \"cuda\" use \"nccl\" (or \"single\")");
    return ZT_OK;
}

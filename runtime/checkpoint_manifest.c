/* SPDX-License-Identifier: MIT */
/* manifest.json: building, checksumming and validating (see checkpoint_manifest.h). */
#include "runtime/checkpoint_manifest.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define CKPT_FORMAT "ztier-checkpoint"
/* Every dump of a manifest uses these flags, so the checksum is reproducible on load. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))

void zt_ckpt_shard_name(int rank, int world, char *out, size_t len)
{
    snprintf(out, len, "rank-%05d-of-%05d.zts", rank, world);
}

void zt_manifest_checksum(json_t *m, char out[16])
{
    json_t *copy = json_copy(m);
    json_object_del(copy, "checksum");
    char *text = json_dumps(copy, DUMP_FLAGS);
    uLong crc = crc32(0L, Z_NULL, 0);
    if (text)
        crc = crc32(crc, (const Bytef *)text, (uInt)strlen(text));
    snprintf(out, 16, "crc32:%08lx", (unsigned long)crc);
    free(text);
    json_decref(copy);
}

/* ---- writing ---- */

json_t *zt_manifest_model_json(const zt_runtime *rt)
{
    json_t *layers = json_array();
    for (int i = 0; i < rt->reg.n_layers; i++) {
        const zt_layer *L = &rt->reg.layers[i];
        json_t *params = json_array();
        for (int k = 0; k < L->n_params; k++) {
            const zt_param *p = &rt->reg.params[L->param_ids[k]];
            json_t *shape = json_array();
            for (int d = 0; d < p->ndim; d++)
                json_array_append_new(shape, json_integer(p->shape[d]));
            json_array_append_new(params, json_pack("{s:s, s:o, s:I}", "name", p->name, "shape",
                                                    shape, "offset", (json_int_t)p->offset));
        }
        json_array_append_new(layers,
                              json_pack("{s:s, s:I, s:I, s:o}", "name", L->name, "flat_numel",
                                        (json_int_t)L->flat_numel, "shard_numel",
                                        (json_int_t)L->shard_numel, "params", params));
    }
    return layers;
}

/* A file's pieces' CRC-32s as one string of 8 hex digits each (compact: a manifest lists
 * 1 + 3 x layers of them per file). */
static json_t *pieces_json(const int64_t *crc, size_t n)
{
    char *hex = malloc(8 * n + 1);
    if (!hex)
        return NULL;
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 8 * i, 9, "%08lx", (unsigned long)(uint32_t)crc[i]);
    json_t *v = json_string(hex);
    free(hex);
    return v;
}

static json_t *files_json(const zt_runtime *rt, const int64_t *files)
{
    json_t *list = json_array();
    size_t each = ZT_CKPT_FILE_FIELDS(rt->reg.n_layers);
    for (int r = 0; r < rt->dist.world; r++) {
        char name[64];
        const int64_t *f = files + each * (size_t)r;
        zt_ckpt_shard_name(r, rt->dist.world, name, sizeof name);
        json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:o}", "name", name, "bytes",
                                              (json_int_t)f[0], "crc32", (json_int_t)f[1],
                                              "pieces_crc32", pieces_json(f + 2, each - 2)));
    }
    return list;
}

static json_t *meta_json(const zt_ckpt_meta *meta)
{
    json_t *o = json_object();
    for (int i = 0; i < meta->n; i++)
        json_object_set_new(o, meta->key[i], json_integer((json_int_t)meta->value[i]));
    return o;
}

static zt_status dump_synced(json_t *m, const char *path, zt_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ZT_ERR(err, zt_status_from_errno(errno), "cannot create '%s': %s", path,
                      strerror(errno));
    int ok = json_dumpf(m, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) == 0 && fflush(f) == 0 &&
             fsync(fileno(f)) == 0;
    int e = errno;
    ok = fclose(f) == 0 && ok;
    if (!ok)
        return ZT_ERR(err, zt_status_from_errno(e), "cannot write '%s': %s", path, strerror(e));
    return ZT_OK;
}

zt_status zt_manifest_write(const zt_runtime *rt, const zt_ckpt_state *s, const int64_t *files,
                            const char *folder, zt_error *err)
{
    json_t *m = json_pack("{s:s, s:i, s:i, s:i, s:I, s:f, s:i, s:i, s:b, s:o, s:o, s:o}", "format",
                          CKPT_FORMAT, "version", ZT_CKPT_VERSION, "world_size", rt->dist.world,
                          "zero_stage", rt->cfg.stage, "step", (json_int_t)s->step, "loss_scale",
                          (double)s->loss_scale, "good_steps", (int)s->good_steps,
                          "hysteresis_left", (int)s->hysteresis_left, "fp16", s->fp16 > 0, "layers",
                          zt_manifest_model_json(rt), "files", files_json(rt, files), "meta",
                          meta_json(&rt->meta));
    if (!m)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory building a checkpoint manifest");
    char sum[16];
    zt_manifest_checksum(m, sum);
    json_object_set_new(m, "checksum", json_string(sum));
    char path[ZT_PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/manifest.json", folder);
    zt_status st = dump_synced(m, path, err);
    json_decref(m);
    return st;
}

/* ---- reading: every field is checked before it is used ---- */

typedef struct mctx {
    const char *path;
    zt_error *err;
    const zt_ckpt_expect *x; /* what it is checked against */
    int saved_stage;         /* the manifest's zero_stage, once read (-1: not recorded) */
    int saved_world;         /* its world_size, once read */
    json_t *names;           /* the parameter names seen so far (a set) */
} mctx;

static zt_status bad(const mctx *c, const char *field, const json_t *v, const char *allowed)
{
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    zt_status st = ZT_ERR(c->err, ZT_ERR_CORRUPT,
                          "checkpoint manifest '%s' is damaged or was edited: \"%s\" is %.80s; %s",
                          c->path, field, text ? text : "missing", allowed);
    free(text);
    return st;
}

static zt_status get_int(const mctx *c, json_t *obj, const char *key, const char *field, int64_t lo,
                         int64_t hi, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char allowed[96];
        snprintf(allowed, sizeof allowed, "it must be an integer in [%lld, %lld]", (long long)lo,
                 (long long)hi);
        return bad(c, field, v, allowed);
    }
    *out = (int64_t)json_integer_value(v);
    return ZT_OK;
}

static zt_status check_header(mctx *c, json_t *m, int *version)
{
    json_t *fmt = json_object_get(m, "format");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), CKPT_FORMAT) != 0)
        return ZT_ERR(c->err, ZT_ERR_CORRUPT, "'%s' is not a ztier checkpoint manifest", c->path);
    int64_t v = 0, world = 0;
    zt_status st = get_int(c, m, "version", "version", 1, ZT_CKPT_VERSION, &v);
    if (st != ZT_OK)
        return st;
    *version = (int)v;
    if (v >= 2) {
        json_t *sum = json_object_get(m, "checksum");
        char want[16];
        zt_manifest_checksum(m, want);
        if (!json_is_string(sum) || strcmp(json_string_value(sum), want) != 0)
            return ZT_ERR(c->err, ZT_ERR_CORRUPT,
                          "checkpoint manifest '%s' is damaged or was edited: its checksum is "
                          "%s, the content gives %s; load an older checkpoint",
                          c->path, json_is_string(sum) ? json_string_value(sum) : "missing", want);
    }
    if ((st = get_int(c, m, "world_size", "world_size", 1, 1 << 24, &world)) != ZT_OK)
        return st;
    c->saved_world = (int)world;
    return ZT_OK;
}

static zt_status check_loss_scale(const mctx *c, json_t *m, zt_ckpt_state *s)
{
    json_t *v = json_object_get(m, "loss_scale"), *fp16 = json_object_get(m, "fp16");
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(isfinite(x) && x > 0 && x <= 3.4e38))
        return bad(c, "loss_scale", v, "it must be a finite number > 0");
    if (fp16 && !json_is_boolean(fp16))
        return bad(c, "fp16", fp16, "it must be true or false");
    s->fp16 = fp16 ? json_is_true(fp16) : -1;
    s->loss_scale = (float)x;
    /* Only fp16 scales the loss: any other scale in a run that did not is not a real state. */
    if (s->fp16 != 1 && x != 1.0 && (s->fp16 == 0 || !c->x->fp16))
        return bad(c, "loss_scale", v,
                   "a run without fp16 loss scaling saves exactly 1 (a loss scale here would "
                   "silently change the gradients)");
    return ZT_OK;
}

/* The ZeRO stage that saved it (absent in checkpoints from before stages 0-2: -1). Any stage
 * loads it: the files hold each rank's partition of every layer, which stages 1, 2 and 3
 * lay out alike for one world size. */
static zt_status check_stage(mctx *c, json_t *m, zt_manifest *out)
{
    int64_t stage = -1;
    zt_status st = json_object_get(m, "zero_stage")
                       ? get_int(c, m, "zero_stage", "zero_stage", 0, 3, &stage)
                       : ZT_OK;
    out->zero_stage = c->saved_stage = (int)stage;
    return st;
}

static zt_status check_state(const mctx *c, json_t *m, zt_ckpt_state *s)
{
    int64_t step = 0, good = 0, hyst = 0;
    zt_status st = get_int(c, m, "step", "step", 0, INT64_C(1) << 53, &step);
    if (st == ZT_OK)
        st = check_loss_scale(c, m, s);
    if (st == ZT_OK)
        st = get_int(c, m, "good_steps", "good_steps", 0, INT32_MAX, &good);
    if (st == ZT_OK)
        st = get_int(c, m, "hysteresis_left", "hysteresis_left", 0, 1 << 20, &hyst);
    s->step = step;
    s->good_steps = (int32_t)good;
    s->hysteresis_left = (int32_t)hyst;
    return st;
}

static zt_status foreign(const mctx *c, const char *what, const char *there, const char *here)
{
    return ZT_ERR(c->err, ZT_ERR_ARGUMENT,
                  "checkpoint '%s': %s is '%s' there and '%s' here: it was saved from a "
                  "different model",
                  c->path, what, there, here);
}

/* Parameter field (json jp) on its own: a unique name, a shape of positive sizes, and its
 * offset where the parameters before it end (each rounded up to ZT_PARAM_ALIGN_ELEMS, as
 * every layout packs them): *at, advanced past it. So no two overlap and none is moved. */
static zt_status check_param_itself(mctx *c, json_t *jp, const char *field, int64_t *at,
                                    int64_t *end)
{
    json_t *name = json_object_get(jp, "name"), *shape = json_object_get(jp, "shape"), *d;
    char sub[128];
    if (!json_is_string(name) || !json_string_length(name))
        return bad(c, field, name ? name : jp, "a parameter needs a \"name\" string");
    if (json_object_get(c->names, json_string_value(name)))
        return bad(c, field, name, "two parameters have that name");
    json_object_set_new(c->names, json_string_value(name), json_true());
    snprintf(sub, sizeof sub, "%s.shape", field);
    if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > ZT_MAX_DIMS)
        return bad(c, sub, shape, "it must list 1 to 8 sizes");
    int64_t numel = 1;
    size_t k;
    json_array_foreach(shape, k, d)
    {
        if (!json_is_integer(d) || json_integer_value(d) < 1 ||
            json_integer_value(d) > (INT64_C(1) << 44) / numel)
            return bad(c, sub, shape,
                       "each size must be a positive integer, 2^44 elements at most");
        numel *= (int64_t)json_integer_value(d);
    }
    snprintf(sub, sizeof sub, "%s.offset", field);
    json_t *off = json_object_get(jp, "offset");
    if (!json_is_integer(off) || json_integer_value(off) != *at) {
        char allowed[160];
        snprintf(allowed, sizeof allowed,
                 "the parameters before it in its layer end at element %lld, where it must "
                 "start (an edited shape or offset, or parameters moved)",
                 (long long)*at);
        return bad(c, sub, off, allowed);
    }
    *end = *at + numel;
    *at += (numel + ZT_PARAM_ALIGN_ELEMS - 1) / ZT_PARAM_ALIGN_ELEMS * ZT_PARAM_ALIGN_ELEMS;
    return ZT_OK;
}

/* Parameter jp against the model's (want, as zt_manifest_model_json writes it). */
static zt_status check_param_model(const mctx *c, json_t *want, json_t *jp)
{
    const char *there = json_string_value(json_object_get(jp, "name"));
    const char *here = json_string_value(json_object_get(want, "name"));
    if (!here || strcmp(there, here) != 0)
        return foreign(c, "a parameter", there, here ? here : "(none)");
    if (!json_equal(json_object_get(jp, "shape"), json_object_get(want, "shape")))
        return ZT_ERR(c->err, ZT_ERR_ARGUMENT,
                      "checkpoint '%s': parameter '%s' has another shape there: it was saved "
                      "from a different model",
                      c->path, here);
    json_t *at = json_object_get(want, "offset");
    if (at && !json_equal(json_object_get(jp, "offset"), at))
        return ZT_ERR(c->err, ZT_ERR_CORRUPT,
                      "checkpoint '%s': parameter '%s' starts at element %lld of its layer "
                      "there and at %lld here: the files hold another layout (a damaged "
                      "manifest, or another version's layout)",
                      c->path, here, (long long)json_integer_value(json_object_get(jp, "offset")),
                      (long long)json_integer_value(at));
    return ZT_OK;
}

/* Layer i's name and parameters, on their own and against the model's layer `want` (NULL:
 * none known); *end: where its parameters end in its flat layout. */
static zt_status check_layer_params(mctx *c, json_t *jl, json_t *want, int i, int64_t *end)
{
    char field[64];
    snprintf(field, sizeof field, "layers[%d]", i);
    json_t *name = json_object_get(jl, "name"), *params = json_object_get(jl, "params");
    if (!json_is_string(name) || !json_is_array(params))
        return bad(c, field, jl, "a layer needs a \"name\" string and a \"params\" list");
    const char *here = json_string_value(json_object_get(want, "name"));
    if (want && strcmp(json_string_value(name), here) != 0)
        return foreign(c, "a layer", json_string_value(name), here);
    json_t *want_params = json_object_get(want, "params");
    if (want && json_array_size(params) != json_array_size(want_params))
        return ZT_ERR(c->err, ZT_ERR_ARGUMENT,
                      "checkpoint '%s': layer '%s' has other parameters there: it was saved "
                      "from a different model",
                      c->path, here);
    int64_t at = 0;
    *end = 0;
    zt_status st = ZT_OK;
    for (size_t k = 0; st == ZT_OK && k < json_array_size(params); k++) {
        json_t *jp = json_array_get(params, k);
        snprintf(field, sizeof field, "layers[%d].params[%d]", i, (int)k);
        st = check_param_itself(c, jp, field, &at, end);
        if (st == ZT_OK && want)
            st = check_param_model(c, json_array_get(want_params, k), jp);
    }
    return st;
}

/* A layer saved before each file's part of it was recorded: loadable only as this run lays
 * it out (the model's flat_numel, the same world size). */
static zt_status check_unrecorded(const mctx *c, json_t *want, int64_t flat)
{
    const zt_ckpt_expect *x = c->x;
    if (c->saved_world != x->world || !x->world)
        return ZT_ERR(c->err, ZT_ERR_ARGUMENT,
                      "checkpoint '%s' was saved by %d ranks by a version that did not record "
                      "each file's part of a layer: load it with %d ranks%s",
                      c->path, c->saved_world, c->saved_world,
                      x->world ? ""
                               : " (and export from there: zt_gpt2 --resume DIR --steps 0 "
                                 "--safetensors F)");
    if (flat == json_integer_value(json_object_get(want, "flat_numel")))
        return ZT_OK;
    return ZT_ERR(c->err, ZT_ERR_ARGUMENT,
                  "checkpoint '%s' was saved at ZeRO stage %d, which lays layer '%s' out "
                  "otherwise than stage %d does on %d ranks, by a version that did not record "
                  "each file's part of a layer: load it with zero_optimization.stage %d",
                  c->path, c->saved_stage, json_string_value(json_object_get(want, "name")),
                  x->stage, x->world, c->saved_stage);
}

/* Layer i as saved: its name and parameters must be the model's; its flat size and each
 * file's part of it (*flat, *shard; 0 where not recorded) may differ from this run's. */
static zt_status check_layer(mctx *c, json_t *jl, json_t *want, int i, int64_t *flat,
                             int64_t *shard)
{
    int64_t end = 0;
    char field[64];
    zt_status st = check_layer_params(c, jl, want, i, &end);
    snprintf(field, sizeof field, "layers[%d].flat_numel", i);
    if (st == ZT_OK)
        st = get_int(c, jl, "flat_numel", field, end > 0 ? end : 1, INT64_C(1) << 44, flat);
    *shard = 0;
    if (st == ZT_OK && json_object_get(jl, "shard_numel")) {
        snprintf(field, sizeof field, "layers[%d].shard_numel", i);
        st = get_int(c, jl, "shard_numel", field, 1, *flat, shard);
        if (st == ZT_OK && *shard != *flat && *shard * c->saved_world != *flat)
            return bad(c, field, json_object_get(jl, "shard_numel"),
                       "it must be the layer's flat_numel (replicated) or that over world_size");
    }
    if (st != ZT_OK || *shard)
        return st;
    if (!c->x->world && c->saved_world == 1) /* a tool; one file holds the whole layer */
        return *shard = *flat, ZT_OK;
    return check_unrecorded(c, want, *flat);
}

static zt_status check_model(mctx *c, json_t *m, zt_manifest *out)
{
    json_t *layers = json_object_get(m, "layers"), *want = c->x->layers;
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        return bad(c, "layers", layers, "it must be the list of the model's layers");
    if (want && json_array_size(layers) != json_array_size(want))
        return ZT_ERR(c->err, ZT_ERR_ARGUMENT,
                      "checkpoint '%s' holds %d layers, this model has %d: it was saved from a "
                      "different model",
                      c->path, (int)json_array_size(layers), (int)json_array_size(want));
    size_t n = json_array_size(layers);
    out->n_layers = (int)n;
    out->flat = calloc(n, sizeof *out->flat);
    out->shard = calloc(n, sizeof *out->shard);
    if (!out->flat || !out->shard)
        return ZT_ERR(c->err, ZT_ERR_NOMEM, "out of memory reading '%s'", c->path);
    zt_status st = ZT_OK;
    int recorded = 1;
    for (size_t i = 0; st == ZT_OK && i < n; i++) {
        st = check_layer(c, json_array_get(layers, i), want ? json_array_get(want, i) : NULL,
                         (int)i, &out->flat[i], &out->shard[i]);
        recorded &= out->shard[i] > 0;
    }
    if (st == ZT_OK && !recorded && out->version >= 3) /* its pieces' lengths need them */
        return bad(c, "layers[].shard_numel", NULL, "version 3 records every layer's");
    if (st == ZT_OK && !recorded) /* older checkpoints: all as this run lays them out */
        free(out->shard), out->shard = NULL;
    return st;
}

/* Version 3: file r's "pieces_crc32", ZT_CKPT_PIECES(layers) CRC-32s of 8 hex digits. */
static zt_status check_pieces(const mctx *c, json_t *e, int r, zt_manifest *out)
{
    size_t n = ZT_CKPT_PIECES(out->n_layers);
    json_t *v = json_object_get(e, "pieces_crc32");
    const char *hex = json_string_value(v);
    char field[64];
    snprintf(field, sizeof field, "files[%d].pieces_crc32", r);
    int ok = hex && strlen(hex) == 8 * n;
    for (size_t i = 0; ok && i < 8 * n; i++)
        ok = (hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f');
    if (!ok) {
        char allowed[160];
        snprintf(allowed, sizeof allowed,
                 "it must be %zu CRC-32s of 8 lowercase hex digits (the header's, then each "
                 "layer's master, m and v)",
                 n);
        return bad(c, field, v, allowed);
    }
    for (size_t i = 0; i < n; i++) {
        char d[9];
        memcpy(d, hex + 8 * i, 8), d[8] = '\0';
        out->pieces[(size_t)r * n + i] = (uint32_t)strtoul(d, NULL, 16);
    }
    return ZT_OK;
}

static zt_status check_files(const mctx *c, json_t *m, zt_manifest *out)
{
    json_t *files = json_object_get(m, "files");
    int world = c->saved_world;
    if (!json_is_array(files) || (int)json_array_size(files) != world)
        return bad(c, "files", files, "it must list one file per rank of world_size");
    out->world = world;
    out->files = calloc(2 * (size_t)world, sizeof *out->files);
    if (out->version >= 3)
        out->pieces = calloc((size_t)world * ZT_CKPT_PIECES(out->n_layers), sizeof *out->pieces);
    if (!out->files || (out->version >= 3 && !out->pieces))
        return ZT_ERR(c->err, ZT_ERR_NOMEM, "out of memory reading '%s'", c->path);
    for (int r = 0; r < world; r++) {
        json_t *e = json_array_get(files, (size_t)r), *name = json_object_get(e, "name");
        char want[64], field[64];
        zt_ckpt_shard_name(r, world, want, sizeof want);
        snprintf(field, sizeof field, "files[%d].name", r);
        if (!json_is_string(name) || strcmp(json_string_value(name), want) != 0)
            return bad(c, field, name, "it must name that rank's shard file");
        int64_t bytes = 0, crc = 0;
        snprintf(field, sizeof field, "files[%d].bytes", r);
        zt_status st = get_int(c, e, "bytes", field, 0, INT64_MAX, &bytes);
        snprintf(field, sizeof field, "files[%d].crc32", r);
        if (st == ZT_OK)
            st = get_int(c, e, "crc32", field, 0, UINT32_MAX, &crc);
        if (st != ZT_OK)
            return st;
        out->files[2 * r] = bytes, out->files[2 * r + 1] = crc;
        if (out->pieces && (st = check_pieces(c, e, r, out)) != ZT_OK)
            return st;
    }
    return ZT_OK;
}

/* The trainer's integers: an object of at most ZT_CKPT_META_MAX integers (absent before
 * they were saved). */
static zt_status check_meta(const mctx *c, json_t *m, zt_manifest *out)
{
    json_t *meta = json_object_get(m, "meta"), *v;
    const char *key;
    if (!meta)
        return ZT_OK;
    if (!json_is_object(meta) || json_object_size(meta) > ZT_CKPT_META_MAX)
        return bad(c, "meta", meta, "it must be an object of at most 16 integers");
    json_object_foreach(meta, key, v)
    {
        if (!json_is_integer(v) || strlen(key) >= ZT_CKPT_META_KEY)
            return bad(c, "meta", meta, "each key must be short and each value an integer");
        snprintf(out->meta.key[out->meta.n], ZT_CKPT_META_KEY, "%s", key);
        out->meta.value[out->meta.n++] = (int64_t)json_integer_value(v);
    }
    return ZT_OK;
}

zt_status zt_manifest_check(const char *folder, const zt_ckpt_expect *x, zt_manifest *out,
                            zt_error *err)
{
    char path[ZT_PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/manifest.json", folder);
    mctx c = {path, err, x, -1, 0, json_object()};
    json_error_t je;
    memset(out, 0, sizeof *out);
    json_t *m = json_load_file(path, 0, &je);
    if (!m) {
        json_decref(c.names);
        return ZT_ERR(err, ZT_ERR_CORRUPT, "checkpoint manifest '%s' cannot be read: line %d: %s",
                      path, je.line, je.text);
    }
    zt_status st = !c.names ? ZT_ERR(err, ZT_ERR_NOMEM, "out of memory reading '%s'", path)
                   : json_is_object(m)
                       ? check_header(&c, m, &out->version)
                       : ZT_ERR(err, ZT_ERR_CORRUPT, "'%s' is not a JSON object", path);
    if (st == ZT_OK)
        st = check_state(&c, m, &out->state);
    if (st == ZT_OK)
        st = check_stage(&c, m, out);
    if (st == ZT_OK)
        st = check_model(&c, m, out);
    if (st == ZT_OK)
        st = check_files(&c, m, out);
    if (st == ZT_OK)
        st = check_meta(&c, m, out);
    json_decref(m);
    json_decref(c.names);
    if (st != ZT_OK)
        zt_manifest_free(out);
    return st;
}

void zt_manifest_free(zt_manifest *m)
{
    free(m->flat), free(m->shard), free(m->files), free(m->pieces);
    m->flat = m->shard = m->files = NULL;
    m->pieces = NULL;
}

int zt_manifest_reshards(const zt_ckpt_expect *x, const zt_manifest *m)
{
    int differ = m->world != x->world;
    for (int i = 0; m->shard && x->layers && i < m->n_layers; i++) {
        json_t *L = json_array_get(x->layers, (size_t)i);
        differ |= m->flat[i] != json_integer_value(json_object_get(L, "flat_numel")) ||
                  m->shard[i] != json_integer_value(json_object_get(L, "shard_numel"));
    }
    return differ;
}

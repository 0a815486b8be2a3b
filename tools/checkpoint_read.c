/* SPDX-License-Identifier: MIT */
/* Reading a checkpoint without a runtime (checkpoint_read.h). The rank files hold, per layer
 * in registration order, the saving rank's part of the layer's flat layout three times (fp32
 * master, Adam m, Adam v): a parameter [offset, offset + numel) of a layer partitioned in
 * parts of `shard` elements lies in files offset / shard to (offset + numel - 1) / shard. */
#include "tools/checkpoint_read.h"
#include "runtime/checkpoint_dir.h"
#include "runtime/checkpoint_file.h"
#include "runtime/checkpoint_manifest.h"
#include "runtime/checkpoint_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WHY(...) (snprintf(why, len, __VA_ARGS__), -1)

int ckpt_file_crc(const char *path, uint64_t *bytes, uint32_t *crc, char *why, size_t len)
{
    if (access(path, R_OK) != 0) /* the cause alone, for the one-line messages */
        return WHY("%s", strerror(errno));
    zt_error err = {0};
    return zt_ckpt_file_crc(path, ZT_IO_ENGINE_AUTO, bytes, crc, &err) == ZT_OK
               ? 0
               : WHY("%s", err.msg);
}

/* An integer field of obj in [lo, hi]; 0, or -1 naming it. */
static int get_int(const char *path, json_t *obj, const char *key, int64_t lo, int64_t hi,
                   int64_t *out, char *why, size_t len)
{
    json_t *x = json_object_get(obj, key);
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return WHY("%s: \"%s\" is missing or out of range: the manifest is damaged", path, key);
    *out = (int64_t)json_integer_value(x);
    return 0;
}

static int read_param(ckpt_view *v, const char *path, json_t *jp, int layer, char *why, size_t len)
{
    ckpt_param *p = &v->params[v->n_params];
    json_t *name = json_object_get(jp, "name"), *shape = json_object_get(jp, "shape"), *d;
    size_t k;
    if (!json_is_string(name) || !json_is_array(shape) || json_array_size(shape) < 1 ||
        json_array_size(shape) > CKPT_MAX_DIMS)
        return WHY("%s: parameter %d has no name or shape: the manifest is damaged", path,
                   v->n_params);
    p->name = json_string_value(name);
    p->layer = layer;
    p->ndim = (int)json_array_size(shape);
    p->numel = 1;
    json_array_foreach(shape, k, d)
    {
        if (!json_is_integer(d) || json_integer_value(d) < 1 ||
            json_integer_value(d) > (INT64_C(1) << 40) / p->numel)
            return WHY("%s: parameter '%s' has a bad shape: the manifest is damaged", path,
                       p->name);
        p->shape[k] = (int64_t)json_integer_value(d);
        p->numel *= p->shape[k];
    }
    if (get_int(path, jp, "offset", 0, v->layers[layer].flat - p->numel, &p->offset, why, len))
        return WHY("%s: parameter '%s' lies outside its layer: the manifest is damaged", path,
                   p->name);
    v->n_params++;
    return 0;
}

/* Layer i's sizes and parameters; *at: where its parts start in a file. */
static int read_layer(ckpt_view *v, const char *path, json_t *jl, int i, int64_t *at, char *why,
                      size_t len)
{
    ckpt_layer *L = &v->layers[i];
    json_t *params = json_object_get(jl, "params");
    if (get_int(path, jl, "flat_numel", 0, INT64_C(1) << 44, &L->flat, why, len) != 0)
        return -1;
    if (!json_object_get(jl, "shard_numel") && v->world > 1)
        return WHY("%s was saved by %d ranks before checkpoints recorded each file's part of a "
                   "layer: load it with the trainer on %d ranks and export from there "
                   "(zt_gpt2 --resume DIR --steps 0 --safetensors F)",
                   path, v->world, v->world);
    L->shard = L->flat;
    if (json_object_get(jl, "shard_numel") &&
        get_int(path, jl, "shard_numel", 1, L->flat, &L->shard, why, len) != 0)
        return -1;
    if (L->shard != L->flat && L->shard * v->world != L->flat)
        return WHY("%s: layer %d's shard_numel is neither its flat_numel nor that over the world "
                   "size: the manifest is damaged",
                   path, i);
    if (!json_is_array(params))
        return WHY("%s: layer %d has no params: the manifest is damaged", path, i);
    L->at = *at;
    *at += 3 * L->shard;
    size_t k;
    json_t *jp;
    json_array_foreach(params, k, jp) if (read_param(v, path, jp, i, why, len) != 0) return -1;
    return 0;
}

static int read_model(ckpt_view *v, const char *path, char *why, size_t len)
{
    json_t *layers = json_object_get(v->manifest, "layers"), *jl;
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        return WHY("%s lists no layers: the manifest is damaged", path);
    size_t n = json_array_size(layers), params = 0, i;
    json_array_foreach(layers, i, jl) params += json_array_size(json_object_get(jl, "params"));
    v->n_layers = (int)n;
    v->layers = calloc(n, sizeof *v->layers);
    v->params = calloc(params ? params : 1, sizeof *v->params);
    if (!v->layers || !v->params)
        return WHY("out of memory reading %s", path);
    int64_t at = 0;
    json_array_foreach(layers, i,
                       jl) if (read_layer(v, path, jl, (int)i, &at, why, len) != 0) return -1;
    return 0;
}

int ckpt_open(const char *dir, ckpt_view *v, char *why, size_t len)
{
    memset(v, 0, sizeof *v);
    zt_error err = {0};
    if (zt_ckpt_resolve(dir, v->folder, sizeof v->folder, &err) != ZT_OK)
        return WHY("%s", err.msg);
    char path[sizeof v->folder + 32];
    snprintf(path, sizeof path, "%s/manifest.json", v->folder);
    json_error_t je;
    if (!(v->manifest = json_load_file(path, 0, &je)))
        return WHY("%s cannot be read: line %d: %s", path, je.line, je.text);
    char sum[16];
    zt_manifest_checksum(v->manifest, sum);
    const char *saved = json_string_value(json_object_get(v->manifest, "checksum"));
    int64_t version = 0, world = 0;
    if (get_int(path, v->manifest, "version", 1, ZT_CKPT_VERSION, &version, why, len) != 0)
        return -1;
    if (version >= 2 && (!saved || strcmp(saved, sum) != 0))
        return WHY("%s: its checksum does not match its contents (edited or corrupted)", path);
    if (get_int(path, v->manifest, "world_size", 1, 1 << 24, &world, why, len) != 0 ||
        get_int(path, v->manifest, "step", 0, INT64_C(1) << 53, &v->step, why, len) != 0)
        return -1;
    v->version = (int)version, v->world = (int)world;
    json_t *files = json_object_get(v->manifest, "files");
    if (!json_is_array(files) || (int)json_array_size(files) != v->world)
        return WHY("%s does not list one file per rank: the manifest is damaged", path);
    return read_model(v, path, why, len);
}

/* File k against the manifest: size, CRC-32, then its header. */
static int verify_file(ckpt_view *v, int k, int64_t elems, char *why, size_t len)
{
    json_t *e = json_array_get(json_object_get(v->manifest, "files"), (size_t)k);
    char name[64], path[sizeof v->folder + 80];
    zt_ckpt_shard_name(k, v->world, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", v->folder, name);
    uint64_t bytes = 0, want = zt_ckpt_header_bytes(v->version) + (uint64_t)elems * 4;
    uint32_t crc = 0;
    char cause[128];
    if (ckpt_file_crc(path, &bytes, &crc, cause, sizeof cause) != 0)
        return WHY("%s cannot be read: %s", path, cause);
    if (bytes != want || (json_int_t)bytes != json_integer_value(json_object_get(e, "bytes")))
        return WHY("%s has %llu bytes, the manifest's model needs %llu: truncated or overwritten",
                   path, (unsigned long long)bytes, (unsigned long long)want);
    if ((json_int_t)crc != json_integer_value(json_object_get(e, "crc32")))
        return WHY("%s: CRC-32 %08x, the manifest says %08llx: its bytes changed", path, crc,
                   (unsigned long long)json_integer_value(json_object_get(e, "crc32")));
    zt_shard_header h;
    if ((v->fds[k] = open(path, O_RDONLY | O_CLOEXEC)) < 0 || pread(v->fds[k], &h, 32, 0) != 32)
        return WHY("%s cannot be read: %s", path, strerror(errno));
    if ((memcmp(h.magic, ZT_CKPT_MAGIC, 8) && memcmp(h.magic, ZT_CKPT_MAGIC_V1, 8)) ||
        h.rank != (uint32_t)k || h.world != (uint32_t)v->world ||
        h.n_layers != (uint32_t)v->n_layers)
        return WHY("%s is not rank %d of %d's file of this checkpoint (its header says rank %u "
                   "of %u, %u layers)",
                   path, k, v->world, h.rank, h.world, h.n_layers);
    return 0;
}

int ckpt_verify(ckpt_view *v, char *why, size_t len)
{
    int64_t elems = 0;
    for (int i = 0; i < v->n_layers; i++)
        elems += 3 * v->layers[i].shard;
    if (!(v->fds = malloc((size_t)v->world * sizeof *v->fds)))
        return WHY("out of memory");
    for (int k = 0; k < v->world; k++)
        v->fds[k] = -1;
    for (int k = 0; k < v->world; k++)
        if (verify_file(v, k, elems, why, len) != 0)
            return -1;
    return 0;
}

/* Elements [lo, hi) of the layer's flat layout from file k, whose part starts at `first`. */
static int read_piece(const ckpt_view *v, int k, const ckpt_layer *L, int64_t lo, int64_t hi,
                      int64_t first, float *dst, char *why, size_t len)
{
    off_t at = (off_t)zt_ckpt_header_bytes(v->version) +
               (off_t)(L->at + (lo - first)) * (off_t)sizeof(float);
    size_t want = (size_t)(hi - lo) * sizeof(float), got = 0;
    while (got < want) {
        ssize_t n = pread(v->fds[k], (char *)dst + got, want - got, at + (off_t)got);
        if (n <= 0)
            return WHY("reading rank %d's file of %s: %s", k, v->folder,
                       n < 0 ? strerror(errno) : "it ends early");
        got += (size_t)n;
    }
    return 0;
}

int ckpt_read_param(const ckpt_view *v, int p, float *dst, char *why, size_t len)
{
    const ckpt_param *P = &v->params[p];
    const ckpt_layer *L = &v->layers[P->layer];
    int64_t lo = P->offset, end = P->offset + P->numel, sh = L->shard;
    if (sh == L->flat) /* replicated: every file holds it whole */
        return read_piece(v, 0, L, lo, end, 0, dst, why, len);
    for (int64_t k = lo / sh; k * sh < end; k++) {
        int64_t a = lo > k * sh ? lo : k * sh, b = end < (k + 1) * sh ? end : (k + 1) * sh;
        if (read_piece(v, (int)k, L, a, b, k * sh, dst + (a - lo), why, len) != 0)
            return -1;
    }
    return 0;
}

int ckpt_meta(const ckpt_view *v, const char *key, int64_t *value)
{
    json_t *x = json_object_get(json_object_get(v->manifest, "meta"), key);
    if (!json_is_integer(x))
        return -1;
    *value = (int64_t)json_integer_value(x);
    return 0;
}

void ckpt_close(ckpt_view *v)
{
    for (int k = 0; v->fds && k < v->world; k++)
        if (v->fds[k] >= 0)
            close(v->fds[k]);
    free(v->fds), free(v->layers), free(v->params);
    json_decref(v->manifest);
    memset(v, 0, sizeof *v);
}

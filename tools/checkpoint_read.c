/* SPDX-License-Identifier: MIT */
/* Reading a checkpoint without a runtime (checkpoint_read.h). The rank files hold, per layer
 * in registration order, the saving rank's part of the layer's flat layout three times (fp32
 * master, Adam m, Adam v): a parameter [offset, offset + numel) of a layer partitioned in
 * parts of `shard` elements lies in files offset / shard to (offset + numel - 1) / shard. */
#include "tools/checkpoint_read.h"
#include "gpt2_model.h"
#include "runtime/checkpoint_check.h"
#include "runtime/checkpoint_dir.h"
#include "runtime/checkpoint_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WHY(...) (snprintf(why, len, __VA_ARGS__), -1)

/* ---- the model, where the checkpoint says which ---- */

/* The GPT-2 trainer's model as its meta values describe it (gpt2.*; zt_gpt2 records them),
 * in the form a manifest records layers: so the same check as a load's finds layers or
 * parameters swapped, renamed or reshaped. NULL for any other checkpoint. */
static json_t *gpt2_expected(json_t *manifest)
{
    static const char *keys[] = {"gpt2.layers",  "gpt2.heads", "gpt2.channels",
                                 "gpt2.max_seq", "gpt2.vocab", "gpt2.padded_vocab"};
    int64_t v[6];
    json_t *meta = json_object_get(manifest, "meta");
    for (int i = 0; i < 6; i++) {
        json_t *x = json_object_get(meta, keys[i]);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 1 << 24)
            return NULL;
        v[i] = (int64_t)json_integer_value(x);
    }
    gpt2_config c = {.layers = (int)v[0],
                     .heads = (int)v[1],
                     .channels = (int)v[2],
                     .max_seq = (int)v[3],
                     .vocab = (int)v[4],
                     .padded_vocab = (int)v[5]};
    json_t *layers = json_array();
    for (int l = 0; layers && l < gpt2_layer_count(&c); l++) {
        char name[32];
        gpt2_layer_name(&c, l, name, sizeof name);
        json_t *params = json_array();
        for (int k = 0; k < gpt2_layer_param_count(&c, l); k++) {
            gpt2_param_info pi;
            gpt2_param_info_get(&c, l, k, &pi);
            json_t *shape =
                pi.ndim == 2 ? json_pack("[I,I]", (json_int_t)pi.shape[0], (json_int_t)pi.shape[1])
                             : json_pack("[I]", (json_int_t)pi.shape[0]);
            json_array_append_new(params, json_pack("{s:s, s:o}", "name", pi.name, "shape", shape));
        }
        json_array_append_new(layers, json_pack("{s:s, s:o}", "name", name, "params", params));
    }
    return layers;
}

/* ---- the view: the validated manifest's layers and parameters ---- */

static void view_model(ckpt_view *v, const zt_manifest *m)
{
    json_t *layers = json_object_get(v->manifest, "layers"), *jl, *jp, *d;
    size_t i, k, n;
    int64_t at = 0;
    json_array_foreach(layers, i, jl)
    {
        ckpt_layer *L = &v->layers[i];
        L->flat = m->flat[i], L->shard = m->shard[i], L->at = at;
        at += 3 * L->shard;
        json_array_foreach(json_object_get(jl, "params"), k, jp)
        {
            ckpt_param *p = &v->params[v->n_params++];
            p->name = json_string_value(json_object_get(jp, "name"));
            p->layer = (int)i;
            p->offset = (int64_t)json_integer_value(json_object_get(jp, "offset"));
            p->ndim = (int)json_array_size(json_object_get(jp, "shape"));
            p->numel = 1;
            json_array_foreach(json_object_get(jp, "shape"), n, d)
            {
                p->shape[n] = (int64_t)json_integer_value(d);
                p->numel *= p->shape[n];
            }
        }
    }
}

static int open_view(const char *dir, ckpt_view *v, zt_ckpt_files files, char *why, size_t len)
{
    memset(v, 0, sizeof *v);
    zt_error err = {0};
    if (zt_ckpt_resolve(dir, v->folder, sizeof v->folder, &err) != ZT_OK)
        return WHY("%s", err.msg);
    char path[sizeof v->folder + 32];
    snprintf(path, sizeof path, "%s/manifest.json", v->folder);
    v->manifest = json_load_file(path, 0, NULL); /* what the checks below read, if they pass */
    zt_ckpt_expect x = {.layers = gpt2_expected(v->manifest), .fp16 = 1};
    zt_manifest m;
    zt_status st = zt_ckpt_validate(v->folder, &x, files, ZT_IO_ENGINE_AUTO, &m, &err);
    json_decref(x.layers);
    if (st != ZT_OK || !v->manifest) {
        zt_manifest_free(&m);
        return WHY("%s", st != ZT_OK ? err.msg : "the manifest changed while it was read");
    }
    v->version = m.version, v->world = m.world, v->n_layers = m.n_layers;
    v->step = m.state.step;
    size_t params = 0, i;
    json_t *jl;
    json_array_foreach(json_object_get(v->manifest, "layers"), i, jl) params +=
        json_array_size(json_object_get(jl, "params"));
    v->layers = calloc((size_t)m.n_layers, sizeof *v->layers);
    v->params = calloc(params ? params : 1, sizeof *v->params);
    v->fds = malloc((size_t)m.world * sizeof *v->fds);
    for (int k = 0; v->fds && k < m.world; k++)
        v->fds[k] = -1;
    if (v->layers && v->params && v->fds)
        view_model(v, &m);
    if (files == ZT_CKPT_FILES_SIZES) /* ckpt_stream checks the files against it */
        v->m = m, v->streaming = 1;
    else
        zt_manifest_free(&m);
    if (!v->layers || !v->params || !v->fds)
        return WHY("out of memory reading %s", path);
    for (int k = 0; k < v->world; k++) {
        char name[64], file[sizeof v->folder + 80];
        zt_ckpt_shard_name(k, v->world, name, sizeof name);
        snprintf(file, sizeof file, "%s/%s", v->folder, name);
        if ((v->fds[k] = open(file, O_RDONLY | O_CLOEXEC)) < 0)
            return WHY("%s cannot be read: %s", file, strerror(errno));
    }
    return 0;
}

int ckpt_open(const char *dir, ckpt_view *v, char *why, size_t len)
{
    return open_view(dir, v, ZT_CKPT_FILES_ALL, why, len);
}

int ckpt_open_streaming(const char *dir, ckpt_view *v, char *why, size_t len)
{
    return open_view(dir, v, ZT_CKPT_FILES_SIZES, why, len);
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
    if (v->streaming)
        zt_manifest_free(&v->m);
    json_decref(v->manifest);
    memset(v, 0, sizeof *v);
}

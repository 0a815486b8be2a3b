/* SPDX-License-Identifier: MIT */
/* Resharding load (checkpoint_reshard.h). A checkpoint stores per layer each saving rank's
 * part of the flat layout (m->shard elements, or the whole layer where it was replicated) in
 * that rank's file: master, m, v per layer in registration order. Parameters sit at the same
 * offsets in every layout; only the padding after them depends on the world size. So this
 * rank's part [first, first + shard) of a layer, in any layout, is the concatenation of the
 * pieces of the saved parts that overlap it: each rank reads only those pieces (and checks
 * its share of the files whole), never the whole model unless its own part is the whole
 * layer. Elements past the saved layout (padding) load as zeros. */
#include "runtime/checkpoint_reshard.h"
#include "runtime/checkpoint_file.h"
#include "runtime/checkpoint_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void file_path(const char *folder, const zt_manifest *m, int k, char *out, size_t len)
{
    char name[64];
    zt_ckpt_shard_name(k, m->world, name, sizeof name);
    snprintf(out, len, "%s/%s", folder, name);
}

/* The saved files, opened as first needed: each read front to back (a rank's pieces of a file
 * come in file order: layer by layer, master, m, v), with O_DIRECT reads in flight ahead and
 * the gaps between the pieces skipped (checkpoint_reader.h). */
typedef struct sources {
    const char *folder;
    const zt_manifest *m;
    zt_io_engine_kind engine;
    zt_ckpt_reader **f;
    int64_t *layer_at; /* per layer: where its parts start in a file, in elements */
} sources;

static zt_status read_piece(zt_runtime *rt, sources *s, int k, int layer, int state, int64_t lo,
                            int64_t hi, int64_t part_first, float *dst)
{
    char path[ZT_PATH_MAX + 240];
    file_path(s->folder, s->m, k, path, sizeof path);
    uint64_t size = 0;
    zt_status st =
        s->f[k] ? ZT_OK : zt_ckpt_reader_open(path, s->engine, &size, &s->f[k], &rt->err);
    int64_t at = s->layer_at[layer] + state * s->m->shard[layer] + (lo - part_first);
    uint64_t off = zt_ckpt_header_bytes(s->m->version) + (uint64_t)at * sizeof(float);
    if (st == ZT_OK)
        st = zt_ckpt_reader_seek(s->f[k], off);
    return st == ZT_OK ? zt_ckpt_reader_get(s->f[k], dst, (size_t)(hi - lo) * sizeof(float)) : st;
}

/* This rank's part of `state` (0 master, 1 m, 2 v) of layer i, into rt->opt.staging. */
static zt_status gather_part(zt_runtime *rt, sources *s, int i, int state)
{
    const zt_layer *L = &rt->reg.layers[i];
    const zt_manifest *m = s->m;
    int64_t first = L->persistent ? 0 : (int64_t)rt->dist.rank * L->shard_numel;
    int64_t end = first + L->shard_numel < m->flat[i] ? first + L->shard_numel : m->flat[i];
    float *dst = rt->opt.staging;
    memset(dst, 0, (size_t)L->shard_numel * sizeof(float));
    if (first >= end)
        return ZT_OK;
    int64_t sh = m->shard[i];
    if (sh == m->flat[i]) /* replicated when saved: every file holds it whole */
        return read_piece(rt, s, rt->dist.rank % m->world, i, state, first, end, 0, dst);
    zt_status st = ZT_OK;
    for (int64_t k = first / sh; st == ZT_OK && k * sh < end; k++) {
        int64_t lo = first > k * sh ? first : k * sh;
        int64_t hi = end < (k + 1) * sh ? end : (k + 1) * sh;
        st = read_piece(rt, s, (int)k, i, state, lo, hi, k * sh, dst + (lo - first));
    }
    return st;
}

zt_status zt_ckpt_reshard_restore(zt_runtime *rt, const char *folder, const zt_manifest *m)
{
    sources s = {folder, m, rt->cfg.io_engine, calloc((size_t)m->world, sizeof(zt_ckpt_reader *)),
                 calloc((size_t)rt->reg.n_layers + 1, sizeof(int64_t))};
    zt_status st =
        s.f && s.layer_at ? ZT_OK : ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory loading");
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++)
        s.layer_at[i + 1] = s.layer_at[i] + 3 * m->shard[i];
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        st = gather_part(rt, &s, i, 0);
        if (st == ZT_OK)
            st = zt_layer_set_master(rt, L, rt->opt.staging);
        if (st == ZT_OK)
            st = gather_part(rt, &s, i, 1);
        if (st == ZT_OK)
            st = zt_home_store(&rt->tiers.homes, &L->exp_avg, rt->opt.staging, &rt->err);
        if (st == ZT_OK)
            st = gather_part(rt, &s, i, 2);
        if (st == ZT_OK)
            st = zt_home_store(&rt->tiers.homes, &L->exp_avg_sq, rt->opt.staging, &rt->err);
    }
    for (int k = 0; s.f && k < m->world; k++)
        zt_ckpt_reader_close(s.f[k]);
    free(s.f), free(s.layer_at);
    return st;
}

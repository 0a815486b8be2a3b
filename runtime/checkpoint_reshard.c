/* SPDX-License-Identifier: MIT */
/* Resharding load (checkpoint_reshard.h). A checkpoint stores per layer each saving rank's
 * part of the flat layout (m->shard elements, or the whole layer where it was replicated) in
 * that rank's file: master, m, v per layer in registration order. Parameters sit at the same
 * offsets in every layout; only the padding after them depends on the world size. So this
 * rank's part [first, first + shard) of a layer, in any layout, is the concatenation of the
 * pieces of the saved parts that overlap it: each rank reads only those pieces, never the
 * whole model unless its own part is the whole layer. Elements past the saved layout
 * (padding) load as zeros.
 *
 * One pass (zt_ckpt_reshard_read): every rank can work out every rank's pieces (the layouts
 * are the same on all ranks), so each file is cut at every piece's ends into segments, each
 * with one reader: the lowest rank whose pieces cover it, or for bytes no rank needs (the
 * header, padding, the copies of a replicated layer no rank reads) the file's owner, rank
 * k % world, which reads them for the check only. Each reader CRCs its segments on the bytes
 * it just read; the ranks sum their segments' CRCs (each is set by one rank, zero elsewhere),
 * and the owner combines them in file order with zlib's crc32_combine into the file's CRC-32
 * and checks it and the header as zt_ckpt_check_file does. No byte is read twice. */
#include "runtime/checkpoint_reshard.h"
#include "core/crc32.h"
#include "runtime/checkpoint_file.h"
#include "runtime/checkpoint_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static void file_path(const char *folder, const zt_manifest *m, int k, char *out, size_t len)
{
    char name[64];
    zt_ckpt_shard_name(k, m->world, name, sizeof name);
    snprintf(out, len, "%s/%s", folder, name);
}

/* A piece rank `rank` reads: len bytes at off of saved file k, landing `at` elements into that
 * rank's part of the layer's state. */
typedef struct piece {
    uint64_t off, len;
    int64_t at;
    int k, rank;
} piece;

typedef zt_status (*piece_fn)(void *ctx, const piece *p);

/* Where layer i's parts start in a saved file, in elements (per layer, plus the end). */
static int64_t *layer_starts(const zt_runtime *rt, const zt_manifest *m)
{
    int64_t *at = calloc((size_t)rt->reg.n_layers + 1, sizeof(int64_t));
    for (int i = 0; at && i < rt->reg.n_layers; i++)
        at[i + 1] = at[i] + 3 * m->shard[i];
    return at;
}

/* Calls fn for each piece rank r reads of `state` (0 master, 1 m, 2 v) of layer i, in file
 * order within each file. */
static zt_status each_piece(const zt_runtime *rt, const zt_manifest *m, const int64_t *layer_at,
                            int r, int i, int state, piece_fn fn, void *ctx)
{
    const zt_layer *L = &rt->reg.layers[i];
    int64_t first = L->persistent ? 0 : (int64_t)r * L->shard_numel;
    int64_t end = first + L->shard_numel < m->flat[i] ? first + L->shard_numel : m->flat[i];
    int64_t sh = m->shard[i];
    uint64_t hb = zt_ckpt_header_bytes(m->version);
    zt_status st = ZT_OK;
    if (first >= end)
        return ZT_OK;
    if (sh == m->flat[i]) { /* replicated when saved: every file holds it whole */
        int64_t e = layer_at[i] + state * sh + first;
        piece p = {hb + (uint64_t)e * sizeof(float), (uint64_t)(end - first) * sizeof(float), 0,
                   r % m->world, r};
        return fn(ctx, &p);
    }
    for (int64_t k = first / sh; st == ZT_OK && k * sh < end; k++) {
        int64_t lo = first > k * sh ? first : k * sh;
        int64_t hi = end < (k + 1) * sh ? end : (k + 1) * sh;
        int64_t e = layer_at[i] + state * sh + (lo - k * sh);
        piece p = {hb + (uint64_t)e * sizeof(float), (uint64_t)(hi - lo) * sizeof(float),
                   lo - first, (int)k, r};
        st = fn(ctx, &p);
    }
    return st;
}

/* ---- the segments of every file and their readers ---- */

typedef struct seg {
    uint64_t off, len;
    int reader;
} seg;

typedef struct plan {
    int files, ranks;
    piece **pieces; /* per file: every rank's pieces of it */
    int *n_pieces, *cap_pieces;
    seg **segs; /* per file: its segments in file order */
    int *n_segs;
    size_t *base; /* per file: its first segment's index in the CRC array */
    size_t total;
} plan;

static zt_status collect(void *ctx, const piece *p)
{
    plan *pl = ctx;
    int k = p->k;
    if (pl->n_pieces[k] == pl->cap_pieces[k]) {
        int cap = pl->cap_pieces[k] ? 2 * pl->cap_pieces[k] : 64;
        piece *v = realloc(pl->pieces[k], (size_t)cap * sizeof *v);
        if (!v)
            return ZT_ERR_NOMEM;
        pl->pieces[k] = v, pl->cap_pieces[k] = cap;
    }
    pl->pieces[k][pl->n_pieces[k]++] = *p;
    return ZT_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* File k's segments: cut at 0, its size and every piece's ends; each read by the lowest rank
 * whose piece covers it, else by the owner. */
static zt_status cut_file(plan *pl, int k, uint64_t size)
{
    int np = pl->n_pieces[k], nb = 0;
    uint64_t *b = malloc((2 * (size_t)np + 2) * sizeof *b);
    if (!b)
        return ZT_ERR_NOMEM;
    b[nb++] = 0, b[nb++] = size;
    for (int j = 0; j < np; j++)
        b[nb++] = pl->pieces[k][j].off, b[nb++] = pl->pieces[k][j].off + pl->pieces[k][j].len;
    qsort(b, (size_t)nb, sizeof *b, cmp_u64);
    pl->segs[k] = malloc((size_t)nb * sizeof(seg));
    if (!pl->segs[k]) {
        free(b);
        return ZT_ERR_NOMEM;
    }
    int n = 0;
    for (int j = 0; j + 1 < nb; j++) {
        if (b[j] == b[j + 1] || b[j + 1] > size)
            continue;
        int reader = k % pl->ranks, lowest = pl->ranks;
        for (int q = 0; q < np; q++) {
            const piece *p = &pl->pieces[k][q];
            if (p->off <= b[j] && b[j] < p->off + p->len && p->rank < lowest)
                lowest = p->rank;
        }
        pl->segs[k][n++] = (seg){b[j], b[j + 1] - b[j], lowest < pl->ranks ? lowest : reader};
    }
    pl->n_segs[k] = n;
    free(b);
    return ZT_OK;
}

static void plan_free(plan *pl)
{
    for (int k = 0; k < pl->files; k++) {
        if (pl->pieces)
            free(pl->pieces[k]);
        if (pl->segs)
            free(pl->segs[k]);
    }
    free(pl->pieces), free(pl->n_pieces), free(pl->cap_pieces), free(pl->segs), free(pl->n_segs);
    free(pl->base);
}

static zt_status plan_make(const zt_runtime *rt, const zt_manifest *m, const int64_t *layer_at,
                           plan *pl)
{
    int w = m->world;
    *pl = (plan){w,
                 rt->dist.world,
                 calloc((size_t)w, sizeof(piece *)),
                 calloc((size_t)w, sizeof(int)),
                 calloc((size_t)w, sizeof(int)),
                 calloc((size_t)w, sizeof(seg *)),
                 calloc((size_t)w, sizeof(int)),
                 calloc((size_t)w, sizeof(size_t)),
                 0};
    zt_status st =
        pl->pieces && pl->n_pieces && pl->cap_pieces && pl->segs && pl->n_segs && pl->base
            ? ZT_OK
            : ZT_ERR_NOMEM;
    for (int r = 0; st == ZT_OK && r < rt->dist.world; r++)
        for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++)
            for (int s = 0; st == ZT_OK && s < 3; s++)
                st = each_piece(rt, m, layer_at, r, i, s, collect, pl);
    for (int k = 0; st == ZT_OK && k < w; k++) {
        st = cut_file(pl, k, (uint64_t)m->files[2 * k]);
        pl->base[k] = pl->total;
        pl->total += (size_t)pl->n_segs[k];
    }
    return st;
}

/* The segment of file k starting at off (it exists: pieces' ends are cuts). */
static int seg_at(const plan *pl, int k, uint64_t off)
{
    int lo = 0, hi = pl->n_segs[k] - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (pl->segs[k][mid].off <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---- reading this rank's pieces ---- */

typedef struct reading {
    zt_runtime *rt;
    const char *folder;
    const zt_manifest *m;
    const plan *pl;
    zt_ckpt_reader **f; /* per saved file, opened as first needed, read front to back */
    float *dst;         /* this rank's part of the layer's state being read */
    int64_t *crc;       /* per segment: its CRC-32 where this rank reads it, else 0 */
} reading;

/* Saved file k, to read this rank's pieces of it: only their blocks. */
static zt_status open_file(reading *g, int k, const char *path)
{
    const plan *pl = g->pl;
    int me = g->rt->dist.rank;
    size_t n = 0;
    zt_ckpt_range *v = malloc(((size_t)pl->n_pieces[k] + 1) * sizeof *v);
    if (!v)
        return ZT_ERR(&g->rt->err, ZT_ERR_NOMEM, "out of memory loading");
    for (int q = 0; q < pl->n_pieces[k]; q++) /* in file order: each_piece's */
        if (pl->pieces[k][q].rank == me)
            v[n++] = (zt_ckpt_range){pl->pieces[k][q].off, pl->pieces[k][q].len};
    uint64_t size = 0;
    zt_status st =
        zt_ckpt_reader_open_ranges(path, g->rt->cfg.io_engine, v, n, &size, &g->f[k], &g->rt->err);
    free(v);
    return st;
}

static zt_status read_piece(void *ctx, const piece *p)
{
    reading *g = ctx;
    zt_runtime *rt = g->rt;
    int k = p->k;
    char path[ZT_PATH_MAX + 240];
    file_path(g->folder, g->m, k, path, sizeof path);
    zt_status st = g->f[k] ? ZT_OK : open_file(g, k, path);
    if (st == ZT_OK)
        st = zt_ckpt_reader_seek(g->f[k], p->off);
    unsigned char *dst = (unsigned char *)(g->dst + p->at);
    if (st == ZT_OK)
        st = zt_ckpt_reader_get(g->f[k], dst, (size_t)p->len);
    if (st != ZT_OK || !g->crc)
        return st;
    /* the segments of the piece this rank is the reader of, on the bytes still in cache */
    for (int j = seg_at(g->pl, k, p->off); j < g->pl->n_segs[k]; j++) {
        const seg *s = &g->pl->segs[k][j];
        if (s->off >= p->off + p->len)
            break;
        if (s->reader == rt->dist.rank)
            g->crc[g->pl->base[k] + (size_t)j] =
                zt_crc32(0, dst + (s->off - p->off), (size_t)s->len);
    }
    return ZT_OK;
}

/* This rank's part of every layer's master, m and v into image (laid out as the file of this
 * run's own layout would be: per layer master, m, v of shard_numel each, after the header). */
static zt_status read_parts(reading *g, const int64_t *layer_at, unsigned char *image)
{
    zt_runtime *rt = g->rt;
    float *p = image ? (float *)(void *)(image + zt_ckpt_header_bytes(g->m->version)) : NULL;
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        const zt_layer *L = &rt->reg.layers[i];
        size_t n = (size_t)L->shard_numel;
        int64_t first = L->persistent ? 0 : (int64_t)rt->dist.rank * L->shard_numel;
        int64_t filled = g->m->flat[i] - first; /* each_piece's part: the rest is padding */
        filled = filled < 0 ? 0 : filled > (int64_t)n ? (int64_t)n : filled;
        for (int s = 0; st == ZT_OK && s < 3; s++) {
            const zt_home *h = s == 0 ? &L->master : s == 1 ? &L->exp_avg : &L->exp_avg_sq;
            g->dst = p ? p + (size_t)s * n : h->ptr; /* NULL image: host homes */
            memset(g->dst + filled, 0, (n - (size_t)filled) * sizeof(float));
            st = each_piece(rt, g->m, layer_at, rt->dist.rank, i, s, read_piece, g);
        }
        p = p ? p + 3 * n : NULL;
    }
    return st;
}

/* The segments no rank needs, of the files this rank owns: read for their CRC only. */
static zt_status read_gaps(reading *g)
{
    zt_runtime *rt = g->rt;
    const plan *pl = g->pl;
    enum { CHUNK = 8 << 20 };
    unsigned char *buf = NULL;
    zt_status st = ZT_OK;
    for (int k = rt->dist.rank; st == ZT_OK && k < pl->files; k += rt->dist.world) {
        char path[ZT_PATH_MAX + 240];
        file_path(g->folder, g->m, k, path, sizeof path);
        int fd = -1;
        for (int j = 0; st == ZT_OK && j < pl->n_segs[k]; j++) {
            const seg *s = &pl->segs[k][j];
            int covered = 0; /* by a piece: its reader CRCs it as it reads it */
            for (int q = 0; q < pl->n_pieces[k] && !covered; q++)
                covered = pl->pieces[k][q].off <= s->off &&
                          s->off < pl->pieces[k][q].off + pl->pieces[k][q].len;
            if (covered || s->reader != rt->dist.rank)
                continue;
            if (fd < 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                st = ZT_ERR(&rt->err, ZT_ERR_CORRUPT, "checkpoint file '%s' cannot be read: %s",
                            path, strerror(errno));
            if (st == ZT_OK && !buf && !(buf = malloc(CHUNK)))
                st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory loading");
            uint32_t c = 0;
            for (uint64_t at = 0; st == ZT_OK && at < s->len;) {
                size_t want = s->len - at < CHUNK ? (size_t)(s->len - at) : CHUNK;
                ssize_t n = pread(fd, buf, want, (off_t)(s->off + at));
                if (n <= 0)
                    st = ZT_ERR(&rt->err, ZT_ERR_CORRUPT,
                                "checkpoint file '%s' ends early or cannot be read: %s", path,
                                n < 0 ? strerror(errno) : "end of file");
                else
                    c = zt_crc32(c, buf, (size_t)n), at += (uint64_t)n;
                zt_ckpt_reader_count(n > 0 ? (uint64_t)n : 0);
            }
            g->crc[pl->base[k] + (size_t)j] = c;
        }
        if (fd >= 0)
            close(fd);
    }
    free(buf);
    return st;
}

/* The files this rank owns: their CRC-32 from every rank's segments, then the header. */
static zt_status check_owned(zt_runtime *rt, const char *folder, const zt_manifest *m,
                             const plan *pl, const int64_t *crc)
{
    zt_status st = ZT_OK;
    for (int k = rt->dist.rank; st == ZT_OK && k < pl->files; k += rt->dist.world) {
        uLong c = 0;
        for (int j = 0; j < pl->n_segs[k]; j++)
            c = crc32_combine64(c, (uLong)(uint32_t)crc[pl->base[k] + (size_t)j],
                                (z_off64_t)pl->segs[k][j].len);
        char path[ZT_PATH_MAX + 240];
        file_path(folder, m, k, path, sizeof path);
        st = zt_ckpt_check_file_read(path, m, k, (uint32_t)c, &rt->err);
    }
    return st;
}

static void close_all(zt_ckpt_reader **f, int n)
{
    for (int k = 0; f && k < n; k++)
        zt_ckpt_reader_close(f[k]);
    free(f);
}

zt_status zt_ckpt_reshard_read(zt_runtime *rt, const char *folder, const zt_manifest *m,
                               unsigned char *image)
{
    int64_t *layer_at = layer_starts(rt, m);
    plan pl = {0};
    zt_status st = layer_at ? plan_make(rt, m, layer_at, &pl) : ZT_ERR_NOMEM;
    reading g = {rt,
                 folder,
                 m,
                 &pl,
                 calloc((size_t)m->world, sizeof(zt_ckpt_reader *)),
                 NULL,
                 calloc(pl.total ? pl.total : 1, sizeof(int64_t))};
    if (st == ZT_OK && (!g.f || !g.crc))
        st = ZT_ERR_NOMEM;
    if (st == ZT_ERR_NOMEM)
        st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory planning a resharded load");
    if (st == ZT_OK)
        st = read_parts(&g, layer_at, image);
    close_all(g.f, m->world);
    if (st == ZT_OK)
        st = read_gaps(&g);
    /* every rank read its pieces before the CRCs are summed (a failed read is named by its
     * rank, not by an owner's CRC mismatch) */
    st = zt_comm_agree(rt->dist.comm, st, "checkpoint load (reading the pieces)", &rt->err);
    if (st == ZT_OK)
        st = zt_comm_allreduce_sync(rt->dist.comm, g.crc, pl.total, ZT_COMM_I64, ZT_REDUCE_SUM,
                                    &rt->err);
    if (st == ZT_OK)
        st = check_owned(rt, folder, m, &pl, g.crc);
    free(g.crc), free(layer_at);
    plan_free(&pl);
    return st;
}

/* ---- two passes: the files' share checked whole, then the pieces restored ---- */

zt_status zt_ckpt_reshard_check(zt_runtime *rt, const char *folder, const zt_manifest *m,
                                uint64_t want)
{
    zt_status st = ZT_OK;
    for (int k = rt->dist.rank; st == ZT_OK && k < m->world; k += rt->dist.world) {
        char path[ZT_PATH_MAX + 240];
        file_path(folder, m, k, path, sizeof path);
        st = zt_ckpt_check_file(path, m, k, want, rt->cfg.io_engine, &rt->err);
    }
    return st;
}

static zt_status store_part(zt_runtime *rt, zt_layer *L, int state)
{
    if (state == 0)
        return zt_layer_set_master(rt, L, rt->opt.staging);
    return zt_home_store(&rt->tiers.homes, state == 1 ? &L->exp_avg : &L->exp_avg_sq,
                         rt->opt.staging, &rt->err);
}

zt_status zt_ckpt_reshard_restore(zt_runtime *rt, const char *folder, const zt_manifest *m)
{
    int64_t *layer_at = layer_starts(rt, m);
    plan pl = {0};
    zt_status st = layer_at ? plan_make(rt, m, layer_at, &pl) : ZT_ERR_NOMEM;
    reading g = {rt,   folder, m, &pl, calloc((size_t)m->world, sizeof(zt_ckpt_reader *)),
                 NULL, NULL};
    if (st == ZT_ERR_NOMEM || (st == ZT_OK && !g.f))
        st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory loading");
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        for (int s = 0; st == ZT_OK && s < 3; s++) {
            g.dst = rt->opt.staging;
            memset(g.dst, 0, (size_t)L->shard_numel * sizeof(float));
            st = each_piece(rt, m, layer_at, rt->dist.rank, i, s, read_piece, &g);
            if (st == ZT_OK)
                st = store_part(rt, L, s);
        }
    }
    close_all(g.f, m->world);
    free(layer_at);
    plan_free(&pl);
    return st;
}

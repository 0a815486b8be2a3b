/* SPDX-License-Identifier: MIT */
/* A rank's shard file's header (checkpoint_file.h). */
#include "runtime/checkpoint_file.h"
#include "runtime/checkpoint_reader.h"
#include "core/crc32.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define HEADER_V1_BYTES 32

size_t zt_ckpt_header_bytes(int version)
{
    return version == 1 ? HEADER_V1_BYTES : sizeof(zt_shard_header);
}

/* h: the file's first header bytes (read: whether there were that many). */
static zt_status check_header(const zt_shard_header *h, int read, const char *path, int version,
                              int rank, int world, int n_layers, zt_error *err)
{
    if (!read || memcmp(h->magic, version == 1 ? ZT_CKPT_MAGIC_V1 : ZT_CKPT_MAGIC, 8) != 0 ||
        h->rank != (uint32_t)rank || h->world != (uint32_t)world ||
        h->n_layers != (uint32_t)n_layers)
        return ZT_ERR(err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' has a damaged header or belongs to another rank "
                      "(it should be rank %d's of %d)",
                      path, rank, world);
    return ZT_OK;
}

static zt_status cross_check(const zt_shard_header *h, const zt_manifest *m, const char *path,
                             zt_error *err)
{
    const zt_ckpt_state *s = &m->state;
    if (h->step != (uint64_t)s->step)
        return ZT_ERR(err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' holds step %llu, its manifest says \"step\": %lld: "
                      "one of them was changed; load another checkpoint",
                      path, (unsigned long long)h->step, (long long)s->step);
    const char *field = m->version == 1                            ? NULL
                        : h->loss_scale != s->loss_scale           ? "loss_scale"
                        : h->good_steps != s->good_steps           ? "good_steps"
                        : h->hysteresis_left != s->hysteresis_left ? "hysteresis_left"
                        : h->fp16 != s->fp16                       ? "fp16"
                                                                   : NULL;
    if (!field)
        return ZT_OK;
    return ZT_ERR(err, ZT_ERR_CORRUPT,
                  "checkpoint file '%s' and its manifest disagree on \"%s\": one of them was "
                  "changed; load another checkpoint",
                  path, field);
}

size_t zt_ckpt_fread(void *dst, size_t bytes, FILE *f)
{
    size_t done = 0;
    while (done < bytes) {
        size_t want = bytes - done < ((size_t)8 << 20) ? bytes - done : (size_t)8 << 20;
        size_t n = fread((char *)dst + done, 1, want, f);
        done += n;
        if (n < want)
            break;
    }
    return done;
}

zt_status zt_ckpt_check_file_size(const char *path, const zt_manifest *m, int k, uint64_t want,
                                  zt_error *err)
{
    uint64_t said = (uint64_t)m->files[2 * k];
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ZT_ERR(err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' is missing: %s; load an older checkpoint", path,
                      strerror(errno));
    if ((uint64_t)sb.st_size != said || said != want)
        return ZT_ERR(err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' has %lld bytes, the manifest says %llu and the "
                      "model needs %llu: the file is truncated or from another save",
                      path, (long long)sb.st_size, (unsigned long long)said,
                      (unsigned long long)want);
    return ZT_OK;
}

static zt_status check_crc(const char *path, const zt_manifest *m, int k, uint32_t crc,
                           zt_error *err)
{
    if (crc != (uint32_t)m->files[2 * k + 1])
        return ZT_ERR(err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' is damaged (CRC-32 %08lx, the manifest says %08lx)",
                      path, (unsigned long)crc, (unsigned long)m->files[2 * k + 1]);
    return ZT_OK;
}

/* The header's checks on its bytes (read: whether the file had that many). */
static zt_status check_header_all(const zt_shard_header *h, int read, const char *path,
                                  const zt_manifest *m, int k, zt_error *err)
{
    zt_status st = check_header(h, read, path, m->version, k, m->world, m->n_layers, err);
    return st == ZT_OK ? cross_check(h, m, path, err) : st;
}

/* The file's first header bytes into h (*read: whether it had that many). */
static zt_status read_header(const char *path, const zt_manifest *m, zt_shard_header *h, int *read,
                             zt_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ZT_ERR(err, ZT_ERR_CORRUPT, "checkpoint file '%s' cannot be read: %s", path,
                      strerror(errno));
    memset(h, 0, sizeof *h);
    *read = fread(h, zt_ckpt_header_bytes(m->version), 1, f) == 1;
    fclose(f);
    return ZT_OK;
}

zt_status zt_ckpt_check_file_read(const char *path, const zt_manifest *m, int k, uint32_t crc,
                                  zt_error *err)
{
    zt_status st = check_crc(path, m, k, crc, err);
    if (st != ZT_OK)
        return st;
    zt_shard_header h;
    int read = 0;
    st = read_header(path, m, &h, &read, err);
    return st == ZT_OK ? check_header_all(&h, read, path, m, k, err) : st;
}

zt_status zt_ckpt_check_file(const char *path, const zt_manifest *m, int k, uint64_t want,
                             zt_io_engine_kind engine, zt_error *err)
{
    zt_status st = zt_ckpt_check_file_size(path, m, k, want, err);
    uint64_t size = 0;
    uint32_t crc = 0;
    if (st == ZT_OK)
        st = zt_ckpt_file_crc(path, engine, &size, &crc, err);
    return st == ZT_OK ? zt_ckpt_check_file_read(path, m, k, crc, err) : st;
}

zt_status zt_ckpt_read_file(const char *path, const zt_manifest *m, int k, uint64_t want,
                            zt_threadpool *pool, void *dst, zt_progress *pr, zt_error *err)
{
    zt_status st = zt_ckpt_check_file_size(path, m, k, want, err);
    unsigned char *out = dst;
    uint32_t crc = 0;
    if (st == ZT_OK)
        st = zt_ckpt_read_into(path, out, want, pool, &crc, pr, err);
    if (st == ZT_OK)
        st = check_crc(path, m, k, crc, err);
    if (st != ZT_OK)
        return st;
    zt_shard_header h;
    memset(&h, 0, sizeof h);
    size_t hb = zt_ckpt_header_bytes(m->version);
    memcpy(&h, out, hb <= want ? hb : 0);
    return check_header_all(&h, hb <= want, path, m, k, err);
}

/* zt_ckpt_read_file_each's reader callback: keeps the header's bytes, hands on every byte. */
typedef struct each_ctx {
    zt_ckpt_each_fn each;
    void *ctx;
    zt_shard_header h;
    size_t hb;
} each_ctx;

static void keep_header(void *ctx, uint64_t offset, const unsigned char *bytes, size_t len)
{
    each_ctx *e = ctx;
    if (offset < e->hb) /* the first chunk: one thread */
        memcpy((char *)&e->h + offset, bytes, e->hb - offset < len ? e->hb - offset : len);
    e->each(e->ctx, offset, bytes, len);
}

zt_status zt_ckpt_read_file_each(const char *path, const zt_manifest *m, int k, uint64_t want,
                                 zt_threadpool *pool, zt_ckpt_each_fn each, void *ctx,
                                 zt_progress *pr, zt_error *err)
{
    each_ctx e;
    memset(&e, 0, sizeof e);
    e.each = each, e.ctx = ctx, e.hb = zt_ckpt_header_bytes(m->version);
    zt_status st = zt_ckpt_check_file_size(path, m, k, want, err);
    uint32_t crc = 0;
    if (st == ZT_OK)
        st = zt_ckpt_read_each(path, want, pool, keep_header, &e, &crc, pr, err);
    if (st == ZT_OK)
        st = check_crc(path, m, k, crc, err);
    return st == ZT_OK ? check_header_all(&e.h, e.hb <= want, path, m, k, err) : st;
}

/* ---- version 3: the pieces' CRC-32s ---- */

/* Piece i of file k of m: where it starts and its bytes (ZT_CKPT_PIECES' order). */
static void piece_range(const zt_manifest *m, size_t i, uint64_t *at, uint64_t *len)
{
    uint64_t off = zt_ckpt_header_bytes(m->version);
    if (i == 0) {
        *at = 0, *len = off;
        return;
    }
    size_t layer = (i - 1) / 3, part = (i - 1) % 3;
    for (size_t j = 0; j < layer; j++)
        off += 3 * (uint64_t)m->shard[j] * sizeof(float);
    *len = (uint64_t)m->shard[layer] * sizeof(float);
    *at = off + part * *len;
}

static const uint32_t *file_pieces(const zt_manifest *m, int k)
{
    return m->pieces + (size_t)k * ZT_CKPT_PIECES(m->n_layers);
}

zt_status zt_ckpt_check_pieces_join(const char *path, const zt_manifest *m, int k, zt_error *err)
{
    const uint32_t *crc = file_pieces(m, k);
    uLong joined = 0;
    for (size_t i = 0; i < ZT_CKPT_PIECES(m->n_layers); i++) {
        uint64_t at, len;
        piece_range(m, i, &at, &len);
        joined = crc32_combine64(joined, crc[i], (z_off64_t)len);
    }
    if ((uint32_t)joined == (uint32_t)m->files[2 * k + 1])
        return ZT_OK;
    return ZT_ERR(err, ZT_ERR_CORRUPT,
                  "checkpoint manifest of '%s' is damaged or was edited: the file's CRC-32 "
                  "%08lx is not its pieces' (%08lx joined); load an older checkpoint",
                  path, (unsigned long)m->files[2 * k + 1], (unsigned long)joined);
}

zt_status zt_ckpt_check_header_piece(const char *path, const zt_manifest *m, int k, zt_error *err)
{
    zt_shard_header h;
    int read = 0;
    zt_status st = read_header(path, m, &h, &read, err);
    if (st != ZT_OK)
        return st;
    st = read ? zt_ckpt_check_piece(path, m, k, 0,
                                    zt_crc32(0, &h, zt_ckpt_header_bytes(m->version)), err)
              : ZT_OK;
    return st == ZT_OK ? check_header_all(&h, read, path, m, k, err) : st;
}

zt_status zt_ckpt_check_piece(const char *path, const zt_manifest *m, int k, size_t i, uint32_t crc,
                              zt_error *err)
{
    uint32_t want = file_pieces(m, k)[i];
    if (crc == want)
        return ZT_OK;
    static const char *const part[3] = {"fp32 master values", "Adam m", "Adam v"};
    uint64_t at, len;
    piece_range(m, i, &at, &len);
    char what[96];
    if (i == 0)
        snprintf(what, sizeof what, "header");
    else
        snprintf(what, sizeof what, "%s of layer %zu", part[(i - 1) % 3], (i - 1) / 3);
    return ZT_ERR(err, ZT_ERR_CORRUPT,
                  "checkpoint file '%s' is damaged (CRC-32 %08lx of its %s, bytes %llu to %llu; "
                  "the manifest says %08lx); load or export an older checkpoint",
                  path, (unsigned long)crc, what, (unsigned long long)at,
                  (unsigned long long)(at + len), (unsigned long)want);
}

uint64_t zt_ckpt_piece_range(const zt_manifest *m, size_t i, uint64_t *len)
{
    uint64_t at;
    piece_range(m, i, &at, len);
    return at;
}

/* SPDX-License-Identifier: MIT */
/* The checkpoint file writer (checkpoint_writer.h) on a ring of SLOTS buffers: the one
 * filling is `cur`, the others are being written or free. A buffer is submitted when full,
 * and the next one is waited free before it fills. */
#include "runtime/checkpoint_writer.h"
#include "core/crc32.h"
#include "core/log.h"
#include "tiers/io_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { SLOTS = 4, SLOT_BYTES = 8 << 20, BLOCK = 4096 };

struct zt_ckpt_writer {
    int fd;
    char path[4096];
    zt_error *err;
    zt_io_ring *ring;
    int cur;         /* the slot filling */
    size_t fill;     /* bytes in it */
    uint64_t offset; /* the file offset of the current slot */
    uint32_t crc;    /* the file's up to the last mark */
    uint32_t piece;  /* the bytes put since the last mark (zt_ckpt_writer_mark) */
    uint64_t piece_len;
};

static zt_status write_error(zt_ckpt_writer *w, int e)
{
    return ZT_ERR(w->err, zt_status_from_errno(e), "writing checkpoint file '%s': %s%s", w->path,
                  strerror(e), e == ENOSPC ? " (the disk is full)" : "");
}

/* Submits the current slot (len bytes) and makes the next one current once it is free. */
static zt_status submit(zt_ckpt_writer *w, size_t len)
{
    zt_io_ring_submit(w->ring, w->cur, ZT_IO_WRITE, w->offset, len);
    w->offset += len;
    w->cur = (w->cur + 1) % SLOTS;
    w->fill = 0;
    int failed = zt_io_ring_wait(w->ring, w->cur);
    return failed ? write_error(w, failed) : ZT_OK;
}

static void free_writer(zt_ckpt_writer *w)
{
    zt_io_ring_destroy(w->ring); /* waits for every write in flight */
    if (w->fd >= 0)
        close(w->fd);
    free(w);
}

/* The slots registered with io_uring. A refusal (the memlock limit, ENOMEM) is said once per
 * process at info level: the saves still run, from unregistered buffers, at about 0.8 of the
 * speed (docs/benchmarks.md); the thread-pool engine has nothing to register. */
static void register_slots(zt_io_ring *ring)
{
    static _Atomic int said;
    int rc = zt_io_ring_register(ring);
    if (rc < 0 && rc != -EOPNOTSUPP && !said++)
        ZT_LOGI("checkpoint",
                "checkpoint writes run from unregistered buffers: io_uring refused to register "
                "%d MiB (%s); raise the memlock limit (ulimit -l) to at least %d MiB per "
                "writing thread to save faster",
                SLOTS * (SLOT_BYTES >> 20), strerror(-rc), SLOTS * (SLOT_BYTES >> 20));
}

zt_status zt_ckpt_writer_open(const char *path, zt_io_engine_kind engine, zt_ckpt_writer **out,
                              zt_error *err)
{
    *out = NULL;
    zt_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory writing checkpoint file '%s'", path);
    snprintf(w->path, sizeof w->path, "%s", path);
    w->err = err;
    w->crc = 0;
    /* No O_TRUNC: a file already there (a reused checkpoint's, zt_ckpt_begin) is overwritten
     * in place, its written blocks kept; finish truncates it to the bytes put. */
    w->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_DIRECT, 0644);
    if (w->fd < 0 && errno == EINVAL) /* no O_DIRECT on this filesystem */
        w->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    char why[256] = "";
    int rc = w->fd < 0
                 ? -errno
                 : zt_io_ring_create(w->fd, SLOTS, SLOT_BYTES, engine, &w->ring, why, sizeof why);
    /* Registered slots: a 4-rank save's writes in flight 25 instead of 4, the save 1.28x as
     * fast (docs/benchmarks.md). Unregistered (refused: a memlock limit) still writes. */
    if (rc == 0)
        register_slots(w->ring);
    if (rc != 0) {
        zt_status st =
            ZT_ERR(err, zt_status_from_errno(-rc), "cannot create checkpoint file '%s': %s%s%s",
                   path, strerror(-rc), why[0] ? ": " : "", why);
        free_writer(w);
        return st;
    }
    *out = w;
    return ZT_OK;
}

zt_status zt_ckpt_writer_put(zt_ckpt_writer *w, const void *p, size_t n)
{
    const unsigned char *src = p;
    while (n > 0) {
        size_t take = SLOT_BYTES - w->fill < n ? SLOT_BYTES - w->fill : n;
        unsigned char *dst = zt_io_ring_buf(w->ring, w->cur) + w->fill;
        memcpy(dst, src, take);
        w->piece = zt_crc32(w->piece, dst, take); /* the copy, still in cache: one pass over p */
        w->piece_len += take;
        w->fill += take, src += take, n -= take;
        zt_status st = w->fill == SLOT_BYTES ? submit(w, SLOT_BYTES) : ZT_OK;
        if (st != ZT_OK)
            return st;
    }
    return ZT_OK;
}

uint32_t zt_ckpt_writer_mark(zt_ckpt_writer *w)
{
    uint32_t piece = w->piece;
    w->crc = (uint32_t)crc32_combine64(w->crc, piece, (z_off64_t)w->piece_len);
    w->piece = 0, w->piece_len = 0;
    return piece;
}

uint64_t zt_ckpt_writer_fixed_ios(const zt_ckpt_writer *w) { return zt_io_ring_fixed_ios(w->ring); }

zt_status zt_ckpt_writer_finish(zt_ckpt_writer *w, uint64_t *bytes, uint32_t *crc)
{
    zt_ckpt_writer_mark(w); /* the file's CRC-32: every piece's, joined */
    uint64_t total = w->offset + w->fill;
    zt_status st = ZT_OK;
    if (w->fill > 0) { /* the tail, padded to a block; truncated below */
        size_t len = (w->fill + BLOCK - 1) / BLOCK * BLOCK;
        memset(zt_io_ring_buf(w->ring, w->cur) + w->fill, 0, len - w->fill);
        st = submit(w, len);
    }
    for (int i = 0; i < SLOTS; i++) {
        int failed = zt_io_ring_wait(w->ring, i);
        if (failed && st == ZT_OK)
            st = write_error(w, failed);
    }
    if (st == ZT_OK && (ftruncate(w->fd, (off_t)total) != 0 || fsync(w->fd) != 0))
        st = write_error(w, errno);
    if (close(w->fd) != 0 && st == ZT_OK)
        st = write_error(w, errno);
    w->fd = -1;
    *bytes = total;
    *crc = w->crc;
    free_writer(w);
    return st;
}

void zt_ckpt_writer_discard(zt_ckpt_writer *w)
{
    if (w)
        free_writer(w);
}

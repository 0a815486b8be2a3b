/* SPDX-License-Identifier: MIT */
/* The checkpoint file writer (checkpoint_writer.h): a ring of SLOTS aligned buffers; the one
 * filling is `cur`, the others are being written or free. A buffer is submitted when full,
 * and the next one is waited free before it fills. */
#include "runtime/checkpoint_writer.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

enum { SLOTS = 4, SLOT_BYTES = 8 << 20, BLOCK = 4096 };

typedef struct slot {
    zt_io_piece piece;
    unsigned char *buf;
    int busy;
    struct zt_ckpt_writer *w;
} slot;

struct zt_ckpt_writer {
    int fd;
    char path[4096];
    zt_error *err;
    const zt_io_iface *io;
    zt_io_engine *engine;
    slot slots[SLOTS];
    int cur;
    size_t fill;     /* bytes in the current slot */
    uint64_t offset; /* the file offset of the current slot */
    uLong crc;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int failed; /* the first write's errno, 0 while none failed */
};

static void on_done(zt_io_piece *piece, int result)
{
    slot *s = piece->user;
    zt_ckpt_writer *w = s->w;
    pthread_mutex_lock(&w->lock);
    if (result < 0 && !w->failed)
        w->failed = -result;
    s->busy = 0;
    pthread_cond_broadcast(&w->freed);
    pthread_mutex_unlock(&w->lock);
}

static zt_status write_error(zt_ckpt_writer *w, int e)
{
    return ZT_ERR(w->err, zt_status_from_errno(e), "writing checkpoint file '%s': %s%s", w->path,
                  strerror(e), e == ENOSPC ? " (the disk is full)" : "");
}

/* Waits until slot i is free; the first failure of any write so far, as a status. */
static zt_status wait_free(zt_ckpt_writer *w, int i)
{
    pthread_mutex_lock(&w->lock);
    while (w->slots[i].busy)
        pthread_cond_wait(&w->freed, &w->lock);
    int failed = w->failed;
    pthread_mutex_unlock(&w->lock);
    return failed ? write_error(w, failed) : ZT_OK;
}

static void submit(zt_ckpt_writer *w, size_t len)
{
    slot *s = &w->slots[w->cur];
    s->piece = (zt_io_piece){.op = ZT_IO_WRITE,
                             .file = 0,
                             .offset = w->offset,
                             .buf = s->buf,
                             .len = (uint32_t)len,
                             .buf_index = -1,
                             .on_done = on_done,
                             .user = s};
    s->busy = 1;
    w->io->submit(w->engine, &s->piece);
    w->offset += len;
    w->cur = (w->cur + 1) % SLOTS;
    w->fill = 0;
}

static zt_status start_engine(zt_ckpt_writer *w, zt_io_engine_kind kind)
{
    char why[256] = "";
    if (kind != ZT_IO_ENGINE_THREADS &&
        zt_io_uring_engine.create(&w->fd, 1, SLOTS, 1, &w->engine, why, sizeof why) == 0) {
        w->io = &zt_io_uring_engine;
        return ZT_OK;
    }
    int rc = zt_io_threads_engine.create(&w->fd, 1, SLOTS, 2, &w->engine, why, sizeof why);
    if (rc != 0)
        return ZT_ERR(w->err, ZT_ERR_IO, "writing checkpoint file '%s': no I/O engine: %s", w->path,
                      strerror(-rc));
    w->io = &zt_io_threads_engine;
    return ZT_OK;
}

static void free_writer(zt_ckpt_writer *w)
{
    if (w->engine)
        w->io->destroy(w->engine); /* waits for every write in flight */
    if (w->fd >= 0)
        close(w->fd);
    for (int i = 0; i < SLOTS; i++)
        free(w->slots[i].buf);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->freed);
    free(w);
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
    w->crc = crc32(0L, Z_NULL, 0);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->freed, NULL);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
    if (w->fd < 0 && errno == EINVAL) /* no O_DIRECT on this filesystem */
        w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        zt_status st = ZT_ERR(err, zt_status_from_errno(errno),
                              "cannot create checkpoint file '%s': %s", path, strerror(errno));
        free_writer(w);
        return st;
    }
    for (int i = 0; i < SLOTS; i++) {
        void *p = NULL;
        if (posix_memalign(&p, BLOCK, SLOT_BYTES) != 0) {
            free_writer(w);
            return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory writing checkpoint file '%s'", path);
        }
        w->slots[i] = (slot){.buf = p, .w = w};
    }
    zt_status st = start_engine(w, engine);
    if (st != ZT_OK) {
        free_writer(w);
        return st;
    }
    *out = w;
    return ZT_OK;
}

zt_status zt_ckpt_writer_put(zt_ckpt_writer *w, const void *p, size_t n)
{
    const unsigned char *src = p;
    w->crc = crc32_z(w->crc, src, n);
    while (n > 0) {
        size_t take = SLOT_BYTES - w->fill < n ? SLOT_BYTES - w->fill : n;
        memcpy(w->slots[w->cur].buf + w->fill, src, take);
        w->fill += take, src += take, n -= take;
        if (w->fill == SLOT_BYTES) {
            submit(w, SLOT_BYTES);
            zt_status st = wait_free(w, w->cur);
            if (st != ZT_OK)
                return st;
        }
    }
    return ZT_OK;
}

zt_status zt_ckpt_writer_finish(zt_ckpt_writer *w, uint64_t *bytes, uint32_t *crc)
{
    uint64_t total = w->offset + w->fill;
    if (w->fill > 0) { /* the tail, padded to a block; truncated below */
        size_t len = (w->fill + BLOCK - 1) / BLOCK * BLOCK;
        memset(w->slots[w->cur].buf + w->fill, 0, len - w->fill);
        submit(w, len);
    }
    zt_status st = ZT_OK;
    for (int i = 0; i < SLOTS; i++) {
        zt_status s = wait_free(w, i);
        st = st == ZT_OK ? s : st;
    }
    if (st == ZT_OK && (ftruncate(w->fd, (off_t)total) != 0 || fsync(w->fd) != 0))
        st = write_error(w, errno);
    if (close(w->fd) != 0 && st == ZT_OK)
        st = write_error(w, errno);
    w->fd = -1;
    *bytes = total;
    *crc = (uint32_t)w->crc;
    free_writer(w);
    return st;
}

void zt_ckpt_writer_discard(zt_ckpt_writer *w)
{
    if (w)
        free_writer(w);
}

/* SPDX-License-Identifier: MIT */
/* The checkpoint file writer (checkpoint_writer.h) on a ring of SLOTS buffers: the one
 * filling is `cur`, the others are being written or free. A buffer is submitted when full,
 * and the next one is waited free before it fills. The CRC-32 of each submitted buffer is
 * taken by a thread of the writer, in file order, while the caller's thread fills the next:
 * on one rank the copy and the CRC on one thread were the save's pace (docs/benchmarks.md),
 * and a buffer is free again only once written and CRC'd. */
#include "runtime/checkpoint_writer.h"
#include "core/crc32.h"
#include "tiers/io_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SLOTS = 4, SLOT_BYTES = 8 << 20, BLOCK = 4096 };

struct zt_ckpt_writer {
    int fd;
    char path[4096];
    zt_error *err;
    zt_io_ring *ring;
    int cur;         /* the slot filling */
    size_t fill;     /* bytes in it */
    uint64_t offset; /* the file offset of the current slot */
    uint32_t crc;    /* of the slots CRC'd so far, in file order */
    /* the CRC thread's queue: slots submitted, in order, and the bytes of each to CRC */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int threaded;  /* the thread runs (else the CRC is taken inline) */
    int sync_made; /* lock and cond initialised */
    int queue[SLOTS], head, queued, stop;
    size_t crc_len[SLOTS];
    int crc_pending[SLOTS];
};

static void *crc_thread(void *arg)
{
    zt_ckpt_writer *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->queued && !w->stop)
            pthread_cond_wait(&w->cond, &w->lock);
        if (!w->queued)
            break;
        int slot = w->queue[w->head];
        pthread_mutex_unlock(&w->lock);
        w->crc = zt_crc32(w->crc, zt_io_ring_buf(w->ring, slot), w->crc_len[slot]);
        pthread_mutex_lock(&w->lock);
        w->head = (w->head + 1) % SLOTS, w->queued--;
        w->crc_pending[slot] = 0;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* The CRC of slot's first n bytes: queued for the thread, or taken here without one. */
static void crc_slot(zt_ckpt_writer *w, int slot, size_t n)
{
    if (!w->threaded) {
        w->crc = zt_crc32(w->crc, zt_io_ring_buf(w->ring, slot), n);
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->crc_len[slot] = n;
    w->crc_pending[slot] = 1;
    w->queue[(w->head + w->queued++) % SLOTS] = slot;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static void crc_wait(zt_ckpt_writer *w, int slot)
{
    if (!w->threaded)
        return;
    pthread_mutex_lock(&w->lock);
    while (w->crc_pending[slot])
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

/* Ends the CRC thread once its queue is done (w->crc is then the whole file's). */
static void crc_stop(zt_ckpt_writer *w)
{
    if (!w->threaded)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    w->threaded = 0;
}

static zt_status write_error(zt_ckpt_writer *w, int e)
{
    return ZT_ERR(w->err, zt_status_from_errno(e), "writing checkpoint file '%s': %s%s", w->path,
                  strerror(e), e == ENOSPC ? " (the disk is full)" : "");
}

/* Submits the current slot (len bytes, of which the first w->fill are the file's) and makes
 * the next one current once it is free (written and CRC'd). */
static zt_status submit(zt_ckpt_writer *w, size_t len)
{
    crc_slot(w, w->cur, w->fill);
    zt_io_ring_submit(w->ring, w->cur, ZT_IO_WRITE, w->offset, len);
    w->offset += len;
    w->cur = (w->cur + 1) % SLOTS;
    w->fill = 0;
    int failed = zt_io_ring_wait(w->ring, w->cur);
    crc_wait(w, w->cur);
    return failed ? write_error(w, failed) : ZT_OK;
}

static void free_writer(zt_ckpt_writer *w)
{
    crc_stop(w);
    if (w->sync_made)
        pthread_mutex_destroy(&w->lock), pthread_cond_destroy(&w->cond);
    zt_io_ring_destroy(w->ring); /* waits for every write in flight */
    if (w->fd >= 0)
        close(w->fd);
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
    if (rc == 0) { /* without the thread (none to be had), the CRC is taken inline */
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        w->sync_made = 1;
        w->threaded = pthread_create(&w->thread, NULL, crc_thread, w) == 0;
    }
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
        memcpy(dst, src, take); /* the CRC: on the whole slot, by the thread (submit) */
        w->fill += take, src += take, n -= take;
        zt_status st = w->fill == SLOT_BYTES ? submit(w, SLOT_BYTES) : ZT_OK;
        if (st != ZT_OK)
            return st;
    }
    return ZT_OK;
}

zt_status zt_ckpt_writer_finish(zt_ckpt_writer *w, uint64_t *bytes, uint32_t *crc)
{
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
    crc_stop(w); /* every slot submitted is CRC'd */
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

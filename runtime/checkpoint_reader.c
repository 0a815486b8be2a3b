/* SPDX-License-Identifier: MIT */
/* The checkpoint file reader (checkpoint_reader.h): a ring of SLOTS aligned buffers, each
 * holding one 8 MiB chunk of the file's block-aligned part; chunk k sits in slot k % SLOTS.
 * A slot the caller has emptied is submitted for the chunk SLOTS ahead. */
#include "runtime/checkpoint_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SLOTS = 4, SLOT_BYTES = 8 << 20, BLOCK = 4096 };

typedef struct rslot {
    zt_io_piece piece;
    unsigned char *buf;
    int busy;
    struct zt_ckpt_reader *r;
} rslot;

struct zt_ckpt_reader {
    int fd;      /* O_DIRECT where the filesystem has it */
    int tail_fd; /* through the page cache: the last partial block */
    char path[4096];
    zt_error *err;
    const zt_io_iface *io;
    zt_io_engine *engine;
    rslot slots[SLOTS];
    uint64_t size, direct; /* the file's bytes; those read with O_DIRECT (whole blocks) */
    uint64_t pos;          /* the next byte the caller gets */
    uint64_t next_chunk;   /* the next chunk to submit */
    unsigned char tail[BLOCK];
    pthread_mutex_t lock;
    pthread_cond_t filled;
    int failed; /* the first read's errno */
};

static void on_done(zt_io_piece *piece, int result)
{
    rslot *s = piece->user;
    zt_ckpt_reader *r = s->r;
    pthread_mutex_lock(&r->lock);
    if (result < 0 && !r->failed)
        r->failed = -result;
    s->busy = 0;
    pthread_cond_broadcast(&r->filled);
    pthread_mutex_unlock(&r->lock);
}

static uint64_t chunks(const zt_ckpt_reader *r)
{
    return (r->direct + SLOT_BYTES - 1) / SLOT_BYTES;
}

static void submit_next(zt_ckpt_reader *r)
{
    if (r->next_chunk >= chunks(r))
        return;
    uint64_t at = r->next_chunk * SLOT_BYTES;
    rslot *s = &r->slots[r->next_chunk % SLOTS];
    uint64_t len = r->direct - at < SLOT_BYTES ? r->direct - at : SLOT_BYTES;
    s->piece = (zt_io_piece){.op = ZT_IO_READ,
                             .file = 0,
                             .offset = at,
                             .buf = s->buf,
                             .len = (uint32_t)len,
                             .buf_index = -1,
                             .on_done = on_done,
                             .user = s};
    s->busy = 1;
    r->next_chunk++;
    r->io->submit(r->engine, &s->piece);
}

static zt_status read_error(zt_ckpt_reader *r, int e)
{
    return ZT_ERR(r->err, ZT_ERR_IO, "reading checkpoint file '%s': %s", r->path, strerror(e));
}

static zt_status start_engine(zt_ckpt_reader *r, zt_io_engine_kind kind)
{
    char why[256] = "";
    if (kind != ZT_IO_ENGINE_THREADS &&
        zt_io_uring_engine.create(&r->fd, 1, SLOTS, 1, &r->engine, why, sizeof why) == 0) {
        r->io = &zt_io_uring_engine;
        return ZT_OK;
    }
    int rc = zt_io_threads_engine.create(&r->fd, 1, SLOTS, 2, &r->engine, why, sizeof why);
    if (rc != 0)
        return ZT_ERR(r->err, ZT_ERR_IO, "reading checkpoint file '%s': no I/O engine: %s", r->path,
                      strerror(-rc));
    r->io = &zt_io_threads_engine;
    return ZT_OK;
}

void zt_ckpt_reader_close(zt_ckpt_reader *r)
{
    if (!r)
        return;
    if (r->engine)
        r->io->destroy(r->engine); /* waits for the reads in flight */
    if (r->fd >= 0)
        close(r->fd);
    if (r->tail_fd >= 0)
        close(r->tail_fd);
    for (int i = 0; i < SLOTS; i++)
        free(r->slots[i].buf);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->filled);
    free(r);
}

/* The file's last partial block, through the page cache. */
static zt_status read_tail(zt_ckpt_reader *r)
{
    size_t want = (size_t)(r->size - r->direct), got = 0;
    while (got < want) {
        ssize_t n = pread(r->tail_fd, r->tail + got, want - got, (off_t)(r->direct + got));
        if (n <= 0)
            return read_error(r, n < 0 ? errno : EIO);
        got += (size_t)n;
    }
    return ZT_OK;
}

zt_status zt_ckpt_reader_open(const char *path, zt_io_engine_kind engine, uint64_t *size,
                              zt_ckpt_reader **out, zt_error *err)
{
    *out = NULL;
    zt_ckpt_reader *r = calloc(1, sizeof *r);
    if (!r)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory reading checkpoint file '%s'", path);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->err = err;
    r->fd = r->tail_fd = -1;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->filled, NULL);
    struct stat sb;
    r->tail_fd = open(path, O_RDONLY | O_CLOEXEC);
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (r->fd < 0 && errno == EINVAL) /* no O_DIRECT on this filesystem */
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
    zt_status st = ZT_OK;
    if (r->fd < 0 || r->tail_fd < 0 || fstat(r->fd, &sb) != 0)
        st = ZT_ERR(err, ZT_ERR_CORRUPT, "checkpoint file '%s' cannot be read: %s", path,
                    strerror(errno));
    for (int i = 0; st == ZT_OK && i < SLOTS; i++) {
        void *p = NULL;
        if (posix_memalign(&p, BLOCK, SLOT_BYTES) != 0)
            st = ZT_ERR(err, ZT_ERR_NOMEM, "out of memory reading checkpoint file '%s'", path);
        r->slots[i] = (rslot){.buf = p, .r = r};
    }
    if (st == ZT_OK) {
        r->size = (uint64_t)sb.st_size;
        r->direct = r->size / BLOCK * BLOCK;
        st = read_tail(r);
    }
    if (st == ZT_OK)
        st = start_engine(r, engine);
    if (st != ZT_OK) {
        zt_ckpt_reader_close(r);
        return st;
    }
    for (int i = 0; i < SLOTS; i++)
        submit_next(r);
    *size = r->size;
    *out = r;
    return ZT_OK;
}

zt_status zt_ckpt_reader_get(zt_ckpt_reader *r, void *dst, size_t n)
{
    if (n > r->size - r->pos)
        return ZT_ERR(r->err, ZT_ERR_CORRUPT, "checkpoint file '%s' ends early (%llu bytes)",
                      r->path, (unsigned long long)r->size);
    unsigned char *out = dst;
    while (n > 0) {
        size_t take;
        if (r->pos >= r->direct) { /* the tail */
            take = n;
            if (out)
                memcpy(out, r->tail + (r->pos - r->direct), take);
        } else {
            uint64_t chunk = r->pos / SLOT_BYTES, in = r->pos % SLOT_BYTES;
            rslot *s = &r->slots[chunk % SLOTS];
            pthread_mutex_lock(&r->lock);
            while (s->busy)
                pthread_cond_wait(&r->filled, &r->lock);
            int failed = r->failed;
            pthread_mutex_unlock(&r->lock);
            if (failed)
                return read_error(r, failed);
            uint64_t len = r->direct - chunk * SLOT_BYTES < SLOT_BYTES
                               ? r->direct - chunk * SLOT_BYTES
                               : SLOT_BYTES;
            take = len - in < n ? (size_t)(len - in) : n;
            if (out)
                memcpy(out, s->buf + in, take);
            if (in + take == len) /* the slot is emptied: on to the chunk SLOTS ahead */
                submit_next(r);
        }
        r->pos += take, n -= take;
        if (out)
            out += take;
    }
    return ZT_OK;
}

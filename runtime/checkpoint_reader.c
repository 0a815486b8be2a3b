/* SPDX-License-Identifier: MIT */
/* The checkpoint file reader (checkpoint_reader.h) on a ring of SLOTS buffers, each holding
 * one 8 MiB chunk of the file's block-aligned part; chunk k sits in slot k % SLOTS. A slot the
 * caller has emptied is submitted for the chunk SLOTS ahead. */
#include "runtime/checkpoint_reader.h"
#include "core/crc32.h"
#include "tiers/io_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SLOTS = 4, SLOT_BYTES = 8 << 20, BLOCK = 4096 };

struct zt_ckpt_reader {
    int fd;      /* O_DIRECT where the filesystem has it */
    int tail_fd; /* through the page cache: the last partial block */
    char path[4096];
    zt_error *err;
    zt_io_ring *ring;
    uint64_t size, direct; /* the file's bytes; those read with O_DIRECT (whole blocks) */
    uint64_t pos;          /* the next byte the caller gets */
    uint64_t next_chunk;   /* the next chunk to submit */
    unsigned char tail[BLOCK];
};

static uint64_t chunks(const zt_ckpt_reader *r)
{
    return (r->direct + SLOT_BYTES - 1) / SLOT_BYTES;
}

/* The bytes of chunk k (the last one may be short). */
static uint64_t chunk_len(const zt_ckpt_reader *r, uint64_t k)
{
    uint64_t at = k * SLOT_BYTES;
    return r->direct - at < SLOT_BYTES ? r->direct - at : SLOT_BYTES;
}

static void submit_next(zt_ckpt_reader *r)
{
    if (r->next_chunk >= chunks(r))
        return;
    uint64_t k = r->next_chunk++;
    zt_io_ring_submit(r->ring, (int)(k % SLOTS), ZT_IO_READ, k * SLOT_BYTES, chunk_len(r, k));
}

static zt_status read_error(zt_ckpt_reader *r, int e)
{
    return ZT_ERR(r->err, ZT_ERR_IO, "reading checkpoint file '%s': %s", r->path, strerror(e));
}

void zt_ckpt_reader_close(zt_ckpt_reader *r)
{
    if (!r)
        return;
    zt_io_ring_destroy(r->ring); /* waits for the reads in flight */
    if (r->fd >= 0)
        close(r->fd);
    if (r->tail_fd >= 0)
        close(r->tail_fd);
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
    struct stat sb;
    r->tail_fd = open(path, O_RDONLY | O_CLOEXEC);
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (r->fd < 0 && errno == EINVAL) /* no O_DIRECT on this filesystem */
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
    zt_status st = ZT_OK;
    if (r->fd < 0 || r->tail_fd < 0 || fstat(r->fd, &sb) != 0)
        st = ZT_ERR(err, ZT_ERR_CORRUPT, "checkpoint file '%s' cannot be read: %s", path,
                    strerror(errno));
    if (st == ZT_OK) {
        r->size = (uint64_t)sb.st_size;
        r->direct = r->size / BLOCK * BLOCK;
        st = read_tail(r);
    }
    char why[256] = "";
    int rc = st == ZT_OK
                 ? zt_io_ring_create(r->fd, SLOTS, SLOT_BYTES, engine, &r->ring, why, sizeof why)
                 : 0;
    if (rc != 0)
        st = ZT_ERR(err, ZT_ERR_IO, "reading checkpoint file '%s': %s (%s)", path, strerror(-rc),
                    why);
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
            int slot = (int)(chunk % SLOTS), failed = zt_io_ring_wait(r->ring, slot);
            if (failed)
                return read_error(r, failed);
            uint64_t len = chunk_len(r, chunk);
            take = len - in < n ? (size_t)(len - in) : n;
            if (out)
                memcpy(out, zt_io_ring_buf(r->ring, slot) + in, take);
            if (in + take == len) /* the slot is emptied: on to the chunk SLOTS ahead */
                submit_next(r);
        }
        r->pos += take, n -= take;
        if (out)
            out += take;
    }
    return ZT_OK;
}

zt_status zt_ckpt_reader_seek(zt_ckpt_reader *r, uint64_t offset)
{
    if (offset < r->pos || offset > r->size)
        return ZT_ERR(r->err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s': offset %llu is behind the reader or past the end "
                      "(%llu bytes)",
                      r->path, (unsigned long long)offset, (unsigned long long)r->size);
    uint64_t chunk = offset / SLOT_BYTES;
    if (offset >= r->direct || chunk < r->next_chunk) /* read or in flight already */
        return zt_ckpt_reader_get(r, NULL, (size_t)(offset - r->pos));
    for (int i = 0; i < SLOTS; i++) { /* the chunks in flight are not needed */
        int failed = zt_io_ring_wait(r->ring, i);
        if (failed)
            return read_error(r, failed);
    }
    r->pos = offset;
    r->next_chunk = chunk;
    for (int i = 0; i < SLOTS; i++)
        submit_next(r);
    return ZT_OK;
}

zt_status zt_ckpt_file_crc(const char *path, zt_io_engine_kind engine, uint64_t *size,
                           uint32_t *crc, zt_error *err)
{
    zt_ckpt_reader *r = NULL;
    zt_status st = zt_ckpt_reader_open(path, engine, size, &r, err);
    uint32_t c = 0;
    for (uint64_t k = 0; st == ZT_OK && k < chunks(r); k++) {
        int slot = (int)(k % SLOTS), failed = zt_io_ring_wait(r->ring, slot);
        if (failed)
            st = read_error(r, failed);
        else
            c = zt_crc32(c, zt_io_ring_buf(r->ring, slot), (size_t)chunk_len(r, k));
        submit_next(r); /* the slot is consumed: on to the chunk SLOTS ahead */
    }
    if (st == ZT_OK)
        c = zt_crc32(c, r->tail, (size_t)(r->size - r->direct));
    *crc = c;
    zt_ckpt_reader_close(r);
    return st;
}

/* SPDX-License-Identifier: MIT */
/* The checkpoint file reader (checkpoint_reader.h) on a ring of SLOTS buffers of 8 MiB. The
 * reads it submits ("chunks") cover the ranges the caller will take, in file order: the whole
 * file in 8 MiB chunks, or, for a caller that takes pieces (a resharded load), each range's
 * whole blocks, ranges less than MERGE apart joined into one read of at most 8 MiB. Chunk c
 * sits in slot c % SLOTS; a chunk the caller has moved past frees its slot for the next. */
#include "runtime/checkpoint_reader.h"
#include "core/crc32.h"
#include "tiers/io_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { SLOTS = 4, SLOT_BYTES = 8 << 20, BLOCK = 4096, MERGE = 256 << 10 };

static _Atomic uint64_t bytes_read; /* zt_ckpt_reader_bytes */

typedef struct chunk {
    uint64_t at, len;
} chunk;

struct zt_ckpt_reader {
    int fd;      /* O_DIRECT where the filesystem has it */
    int tail_fd; /* through the page cache: the last partial block */
    char path[4096];
    zt_error *err;
    zt_io_ring *ring;
    uint64_t size, direct; /* the file's bytes; those read with O_DIRECT (whole blocks) */
    uint64_t pos;          /* the next byte the caller gets */
    zt_ckpt_range *ranges; /* what the caller will take, in file order */
    size_t n_ranges, next_range;
    uint64_t planned;         /* the bytes before this are covered by chunks submitted */
    chunk slot[SLOTS];        /* the chunk each slot holds */
    uint64_t head, submitted; /* the oldest chunk not passed; the chunks submitted */
    unsigned char tail[BLOCK];
};

static uint64_t up(uint64_t x) { return (x + BLOCK - 1) / BLOCK * BLOCK; }

/* The next chunk: from `planned` on, the next range's whole blocks (capped at 8 MiB and the
 * O_DIRECT part), joined with the ranges after it while they are near and fit. 0: none. */
static int next_chunk(zt_ckpt_reader *r, chunk *c)
{
    while (r->next_range < r->n_ranges) {
        const zt_ckpt_range *g = &r->ranges[r->next_range];
        uint64_t lo = g->off > r->planned ? g->off : r->planned;
        uint64_t hi = g->off + g->len < r->direct ? g->off + g->len : r->direct;
        if (lo >= hi) {
            r->next_range++;
            continue;
        }
        uint64_t at = lo / BLOCK * BLOCK;
        at = at < r->planned ? r->planned : at; /* planned is a block boundary */
        uint64_t end = up(hi) < at + SLOT_BYTES ? up(hi) : at + SLOT_BYTES;
        while (end == up(hi) && r->next_range + 1 < r->n_ranges) { /* join the next ones */
            const zt_ckpt_range *n = &r->ranges[r->next_range + 1];
            uint64_t nhi = n->off + n->len < r->direct ? n->off + n->len : r->direct;
            if (n->off >= r->direct || n->off > end + MERGE || up(nhi) > at + SLOT_BYTES)
                break;
            r->next_range++;
            hi = nhi > hi ? nhi : hi;
            end = up(hi) > end ? up(hi) : end;
        }
        end = end < r->direct ? end : r->direct;
        r->planned = end;
        if (end >= up(hi) || end >= r->direct)
            r->next_range++;
        *c = (chunk){at, end - at};
        return 1;
    }
    return 0;
}

static void submit_next(zt_ckpt_reader *r)
{
    chunk c;
    if (r->submitted - r->head >= SLOTS || !next_chunk(r, &c))
        return;
    int slot = (int)(r->submitted++ % SLOTS);
    r->slot[slot] = c;
    atomic_fetch_add(&bytes_read, c.len);
    zt_io_ring_submit(r->ring, slot, ZT_IO_READ, c.at, c.len);
}

static zt_status read_error(zt_ckpt_reader *r, int e)
{
    return ZT_ERR(r->err, ZT_ERR_IO, "reading checkpoint file '%s': %s", r->path, strerror(e));
}

uint64_t zt_ckpt_reader_bytes(void) { return atomic_load(&bytes_read); }

void zt_ckpt_reader_count(uint64_t bytes) { atomic_fetch_add(&bytes_read, bytes); }

void zt_ckpt_reader_close(zt_ckpt_reader *r)
{
    if (!r)
        return;
    zt_io_ring_destroy(r->ring); /* waits for the reads in flight */
    if (r->fd >= 0)
        close(r->fd);
    if (r->tail_fd >= 0)
        close(r->tail_fd);
    free(r->ranges);
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
    zt_ckpt_reader_count(want);
    return ZT_OK;
}

zt_status zt_ckpt_reader_open_ranges(const char *path, zt_io_engine_kind engine,
                                     const zt_ckpt_range *ranges, size_t n, uint64_t *size,
                                     zt_ckpt_reader **out, zt_error *err)
{
    *out = NULL;
    zt_ckpt_reader *r = calloc(1, sizeof *r);
    if (r && n)
        r->ranges = malloc(n * sizeof *ranges);
    if (!r || (n && !r->ranges)) {
        free(r);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory reading checkpoint file '%s'", path);
    }
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
        if (n)
            memcpy(r->ranges, ranges, n * sizeof *ranges);
        else
            r->ranges = malloc(sizeof *r->ranges), n = 1; /* the whole file */
        if (!r->ranges)
            st = ZT_ERR(err, ZT_ERR_NOMEM, "out of memory reading checkpoint file '%s'", path);
        else if (!ranges)
            r->ranges[0] = (zt_ckpt_range){0, r->size};
        r->n_ranges = n;
    }
    if (st == ZT_OK)
        st = read_tail(r);
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

zt_status zt_ckpt_reader_open(const char *path, zt_io_engine_kind engine, uint64_t *size,
                              zt_ckpt_reader **out, zt_error *err)
{
    return zt_ckpt_reader_open_ranges(path, engine, NULL, 0, size, out, err);
}

/* Waits for the chunk holding r->pos, moving past (and refilling the slots of) those before
 * it; its slot, or -1 with the error set. */
static int chunk_at_pos(zt_ckpt_reader *r, zt_status *st)
{
    for (;;) {
        if (r->head == r->submitted) {
            *st = ZT_ERR(r->err, ZT_ERR_INTERNAL,
                         "checkpoint file '%s': byte %llu was not among the ranges to read",
                         r->path, (unsigned long long)r->pos);
            return -1;
        }
        int slot = (int)(r->head % SLOTS), failed = zt_io_ring_wait(r->ring, slot);
        if (failed) {
            *st = read_error(r, failed);
            return -1;
        }
        const chunk *c = &r->slot[slot];
        if (r->pos < c->at) {
            *st = ZT_ERR(r->err, ZT_ERR_INTERNAL,
                         "checkpoint file '%s': byte %llu was not among the ranges to read",
                         r->path, (unsigned long long)r->pos);
            return -1;
        }
        if (r->pos < c->at + c->len)
            return slot;
        r->head++; /* passed: the slot takes the next chunk */
        submit_next(r);
    }
}

zt_status zt_ckpt_reader_get(zt_ckpt_reader *r, void *dst, size_t n)
{
    if (n > r->size - r->pos)
        return ZT_ERR(r->err, ZT_ERR_CORRUPT, "checkpoint file '%s' ends early (%llu bytes)",
                      r->path, (unsigned long long)r->size);
    unsigned char *out = dst;
    zt_status st = ZT_OK;
    while (n > 0) {
        size_t take;
        if (r->pos >= r->direct) { /* the tail */
            take = n;
            if (out)
                memcpy(out, r->tail + (r->pos - r->direct), take);
        } else {
            int slot = chunk_at_pos(r, &st);
            if (slot < 0)
                return st;
            const chunk *c = &r->slot[slot];
            uint64_t in = r->pos - c->at;
            take = c->len - in < n ? (size_t)(c->len - in) : n;
            if (out)
                memcpy(out, zt_io_ring_buf(r->ring, slot) + in, take);
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
    r->pos = offset; /* the chunks before it are passed as the next get reaches it */
    return ZT_OK;
}

zt_status zt_ckpt_file_crc(const char *path, zt_io_engine_kind engine, uint64_t *size,
                           uint32_t *crc, zt_error *err)
{
    zt_ckpt_reader *r = NULL;
    zt_status st = zt_ckpt_reader_open(path, engine, size, &r, err);
    uint32_t c = 0;
    while (st == ZT_OK && r->pos < r->direct) { /* the CRC from the read buffers: no copy */
        int slot = chunk_at_pos(r, &st);
        if (slot >= 0) {
            c = zt_crc32(c, zt_io_ring_buf(r->ring, slot), (size_t)r->slot[slot].len);
            r->pos += r->slot[slot].len;
        }
    }
    if (st == ZT_OK)
        c = zt_crc32(c, r->tail, (size_t)(r->size - r->direct));
    *crc = c;
    zt_ckpt_reader_close(r);
    return st;
}

/* ---- a whole file straight into memory ---- */

/* The pool's threads each read 8 MiB chunks in turn (one pread each: as many reads in
 * flight as threads) and take each chunk's CRC-32 while it is in cache; the caller joins
 * the chunks' CRCs in file order (crc32_combine64). The chunks land in dst, or in a buffer
 * of the thread's own that `each` then takes them from. */
typedef struct into {
    int fd;
    unsigned char *dst;
    unsigned char **buf; /* per pool thread, where dst is NULL */
    zt_ckpt_each_fn each;
    void *ctx;
    uint64_t direct, chunks;
    uint32_t *crc;     /* per chunk */
    _Atomic int error; /* the first failed read's errno: the others stop */
    zt_progress *pr;
} into;

static int read_full(int fd, unsigned char *to, uint64_t len, uint64_t at)
{
    for (uint64_t got = 0; got < len;) {
        ssize_t n = pread(fd, to + got, len - got, (off_t)(at + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        got += (uint64_t)n;
    }
    return 0;
}

static void into_chunk(void *ctx, int64_t begin, int64_t end, int worker)
{
    into *t = ctx;
    for (int64_t k = begin; k < end && !atomic_load(&t->error); k++) {
        uint64_t at = (uint64_t)k * SLOT_BYTES,
                 len = t->direct - at < SLOT_BYTES ? t->direct - at : SLOT_BYTES;
        if (!t->dst && !t->buf[worker])
            t->buf[worker] = aligned_alloc(BLOCK, SLOT_BYTES);
        unsigned char *to = t->dst ? t->dst + at : t->buf[worker];
        int e = to ? read_full(t->fd, to, len, at) : ENOMEM;
        if (e) {
            int none = 0;
            atomic_compare_exchange_strong(&t->error, &none, e);
            return;
        }
        t->crc[k] = zt_crc32(0, to, (size_t)len);
        if (t->each)
            t->each(t->ctx, at, to, (size_t)len);
        if (t->pr)
            zt_progress_add(t->pr, len);
    }
}

/* The chunks on the pool, then the last partial block on the caller's thread. */
static zt_status read_chunks(const char *path, into *t, zt_threadpool *pool, uint64_t n,
                             uint32_t *crc, zt_error *err)
{
    t->fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (t->fd < 0 && errno == EINVAL) /* no O_DIRECT on this filesystem */
        t->fd = open(path, O_RDONLY | O_CLOEXEC);
    int tail_fd = open(path, O_RDONLY | O_CLOEXEC);
    zt_status st = ZT_OK;
    if (t->fd < 0 || tail_fd < 0)
        st = ZT_ERR(err, ZT_ERR_CORRUPT, "checkpoint file '%s' cannot be read: %s", path,
                    strerror(errno));
    t->direct = n / BLOCK * BLOCK;
    t->chunks = (t->direct + SLOT_BYTES - 1) / SLOT_BYTES;
    t->crc = calloc(t->chunks + 1, sizeof *t->crc);
    int threads = zt_threadpool_size(pool);
    t->buf = t->dst ? NULL : calloc((size_t)threads, sizeof *t->buf);
    unsigned char tail[BLOCK];
    if (st == ZT_OK && (!t->crc || (!t->dst && !t->buf)))
        st = ZT_ERR(err, ZT_ERR_NOMEM, "out of memory reading checkpoint file '%s'", path);
    if (st == ZT_OK)
        zt_threadpool_run(pool, (int64_t)t->chunks, 1, into_chunk, t);
    if (st == ZT_OK && atomic_load(&t->error))
        st = ZT_ERR(err, ZT_ERR_IO, "reading checkpoint file '%s': %s", path,
                    strerror(atomic_load(&t->error)));
    uLong c = 0;
    for (uint64_t k = 0; st == ZT_OK && k < t->chunks; k++) {
        uint64_t at = k * SLOT_BYTES,
                 len = t->direct - at < SLOT_BYTES ? t->direct - at : SLOT_BYTES;
        c = crc32_combine64(c, t->crc[k], (z_off64_t)len);
    }
    unsigned char *to = t->dst ? t->dst + t->direct : tail; /* the last partial block */
    if (st == ZT_OK && read_full(tail_fd, to, n - t->direct, t->direct))
        st = ZT_ERR(err, ZT_ERR_CORRUPT, "checkpoint file '%s' ends early", path);
    if (st == ZT_OK && n > t->direct) {
        c = zt_crc32((uint32_t)c, to, (size_t)(n - t->direct));
        if (t->each)
            t->each(t->ctx, t->direct, to, (size_t)(n - t->direct));
    }
    atomic_fetch_add(&bytes_read, n);
    for (int i = 0; t->buf && i < threads; i++)
        free(t->buf[i]);
    free(t->buf), free(t->crc);
    if (t->fd >= 0)
        close(t->fd);
    if (tail_fd >= 0)
        close(tail_fd);
    *crc = (uint32_t)c;
    return st;
}

zt_status zt_ckpt_read_into(const char *path, void *dst, uint64_t n, zt_threadpool *pool,
                            uint32_t *crc, zt_progress *pr, zt_error *err)
{
    into t = {.dst = dst, .pr = pr};
    return read_chunks(path, &t, pool, n, crc, err);
}

zt_status zt_ckpt_read_each(const char *path, uint64_t n, zt_threadpool *pool, zt_ckpt_each_fn each,
                            void *ctx, uint32_t *crc, zt_progress *pr, zt_error *err)
{
    into t = {.each = each, .ctx = ctx, .pr = pr};
    return read_chunks(path, &t, pool, n, crc, err);
}

/* SPDX-License-Identifier: MIT */
/* One read of a checkpoint's files (ckpt_stream, checkpoint_read.h): every file cut into
 * pieces in file order (the header, then per layer its master part and its Adam m and v), a
 * pool of threads reading them with pread, each computing its piece's CRC-32 (combined per
 * file in order afterwards: crc32_combine) and handing master pieces on. Several reads in
 * flight keep the disk busy, where one thread reading and checksumming in turn left it idle
 * half the time; and each byte is read once, where checking every file whole before reading
 * the master values read the master values twice. */
#include "core/crc32.h"
#include "runtime/checkpoint_file.h"
#include "tools/checkpoint_read.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

typedef struct piece {
    int file, layer; /* layer -1: no master values (the header, Adam m and v, a replica) */
    uint64_t at, bytes;
    int64_t elem; /* the layer's flat element at `at` */
    uLong crc;
    size_t of; /* version 3: the file's piece with a CRC-32 of its own that this read is part
                  of (zt_ckpt_check_piece) */
} piece;

#define ALIGN 4096 /* O_DIRECT's offsets, lengths and buffers */

typedef struct stream {
    const ckpt_view *v;
    int *direct; /* per file: an O_DIRECT descriptor, or the view's where the filesystem has none */
    piece *pieces;
    size_t n, next;
    size_t chunk;
    ckpt_master_fn fn;
    void *user;
    zt_progress *pr;
    int masters_only; /* version 3: only the master values are read, each piece checked */
    pthread_mutex_t mu;
    int failed;
    char why[2 * 4096 + 512];
} stream;

/* Appends [at, at + bytes) of file k (the file's checked piece `of`) in reads of at most
 * s->chunk bytes. */
static int cut(stream *s, size_t *cap, int k, int layer, uint64_t at, uint64_t bytes, int64_t elem,
               size_t of)
{
    for (uint64_t done = 0; done < bytes;) {
        if (s->n == *cap) {
            piece *p = realloc(s->pieces, (*cap = *cap ? 2 * *cap : 1024) * sizeof *p);
            if (!p)
                return -1;
            s->pieces = p;
        }
        uint64_t n = bytes - done < s->chunk ? bytes - done : s->chunk;
        s->pieces[s->n++] = (piece){k, layer, at + done, n, elem + (int64_t)(done / 4), 0, of};
        done += n;
    }
    return 0;
}

/* Every byte of every file (versions 1, 2: each file's CRC-32 needs them all), or from
 * version 3 on only the master values, once (a replicated layer's from the first file). */
static int plan(stream *s)
{
    const ckpt_view *v = s->v;
    size_t cap = 0;
    uint64_t head = zt_ckpt_header_bytes(v->version);
    for (int k = 0; k < v->world; k++) {
        if (!s->masters_only && cut(s, &cap, k, -1, 0, head, 0, 0) != 0)
            return -1;
        for (int i = 0; i < v->n_layers; i++) {
            const ckpt_layer *L = &v->layers[i];
            uint64_t at = head + (uint64_t)L->at * 4, part = (uint64_t)L->shard * 4;
            int replica = L->shard == L->flat, master = replica ? k == 0 : 1;
            size_t of = 1 + 3 * (size_t)i;
            if (s->masters_only && !master)
                continue;
            if (cut(s, &cap, k, master ? i : -1, at, part, replica ? 0 : k * L->shard, of) != 0 ||
                (!s->masters_only && cut(s, &cap, k, -1, at + part, 2 * part, 0, of + 1) != 0))
                return -1;
        }
    }
    return 0;
}

uint64_t ckpt_stream_bytes(const ckpt_view *v)
{
    uint64_t n = 0;
    for (int k = 0; k < v->world; k++)
        n += v->m.pieces ? 0 : (uint64_t)v->m.files[2 * k];
    for (int i = 0; v->m.pieces && i < v->n_layers; i++) {
        const ckpt_layer *L = &v->layers[i];
        n += (uint64_t)L->shard * 4 * (uint64_t)(L->shard == L->flat ? 1 : v->world);
    }
    return n;
}

static void fail(stream *s, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&s->mu);
    if (!s->failed)
        snprintf(s->why, sizeof s->why, fmt, a, b);
    s->failed = 1;
    pthread_mutex_unlock(&s->mu);
}

/* Reads piece p into buf (ALIGN + chunk + ALIGN bytes) through the file's O_DIRECT
 * descriptor: the aligned blocks around it, so the page cache is neither filled nor copied
 * from (a third of the bytes are the master values the export writes, the rest only checked).
 * Returns where the piece's bytes start in buf, NULL on failure. */
static char *read_piece(stream *s, piece *p, char *buf)
{
    int fd = s->direct[p->file], aligned = fd != s->v->fds[p->file];
    uint64_t from = aligned ? p->at / ALIGN * ALIGN : p->at;
    uint64_t end = aligned ? (p->at + p->bytes + ALIGN - 1) / ALIGN * ALIGN : p->at + p->bytes;
    uint64_t need = p->at + p->bytes - from; /* a file ends within its last block */
    for (uint64_t got = 0; got < need;) {
        ssize_t n = pread(fd, buf + got, end - from - got, (off_t)(from + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            char rank[32];
            snprintf(rank, sizeof rank, "%d", p->file);
            fail(s, "reading rank %s's file: %s", rank, n < 0 ? strerror(errno) : "it ends early");
            return NULL;
        }
        got += (uint64_t)n;
    }
    char *at = buf + (p->at - from);
    p->crc = zt_crc32(0, at, (size_t)p->bytes); /* ISA-L's where built with it: zlib's values */
    return at;
}

static void *worker(void *arg)
{
    stream *s = arg;
    char *buf = aligned_alloc(ALIGN, (s->chunk + ALIGN - 1) / ALIGN * ALIGN + 2 * ALIGN);
    if (!buf)
        fail(s, "out of memory for a read buffer%s%s", "", "");
    while (buf && !__atomic_load_n(&s->failed, __ATOMIC_RELAXED)) {
        size_t i = __atomic_fetch_add(&s->next, 1, __ATOMIC_RELAXED);
        if (i >= s->n)
            break;
        piece *p = &s->pieces[i];
        char *at = read_piece(s, p, buf), why[sizeof s->why];
        if (!at)
            break;
        if (p->layer >= 0 && s->fn(s->user, p->layer, p->elem, (int64_t)(p->bytes / 4), (float *)at,
                                   why, sizeof why) != 0) {
            fail(s, "%s%s", why, "");
            break;
        }
        if (s->pr)
            zt_progress_add(s->pr, p->bytes);
    }
    free(buf);
    return NULL;
}

static void file_path(const ckpt_view *v, int k, char *path, size_t len)
{
    char name[64];
    zt_ckpt_shard_name(k, v->world, name, sizeof name);
    snprintf(path, len, "%s/%s", v->folder, name);
}

/* Version 3, before reading: each file's header (its CRC-32 and fields; zt_ckpt_validate
 * checked that the pieces' CRC-32s join into the file's). */
static int check_heads(const ckpt_view *v, char *why, size_t len)
{
    for (int k = 0; k < v->world; k++) {
        char path[sizeof v->folder + 80];
        file_path(v, k, path, sizeof path);
        zt_error err = {0};
        if (zt_ckpt_check_header_piece(path, &v->m, k, &err) != ZT_OK)
            return snprintf(why, len, "%s", err.msg), -1;
    }
    return 0;
}

/* Version 3, after: each piece read, its CRC-32 joined from its reads', against the
 * manifest's. */
static int check_pieces(stream *s, char *why, size_t len)
{
    uLong crc = 0;
    for (size_t i = 0; i < s->n; i++) {
        piece *p = &s->pieces[i];
        crc = crc32_combine64(crc, p->crc, (z_off64_t)p->bytes);
        if (i + 1 < s->n && s->pieces[i + 1].file == p->file && s->pieces[i + 1].of == p->of)
            continue;
        char path[sizeof s->v->folder + 80];
        file_path(s->v, p->file, path, sizeof path);
        zt_error err = {0};
        if (zt_ckpt_check_piece(path, &s->v->m, p->file, p->of, (uint32_t)crc, &err) != ZT_OK)
            return snprintf(why, len, "%s", err.msg), -1;
        crc = 0;
    }
    return 0;
}

/* Each file's CRC-32 from its pieces', then the load's checks of it. */
static int check_files(stream *s, char *why, size_t len)
{
    if (s->masters_only)
        return check_pieces(s, why, len);
    const ckpt_view *v = s->v;
    uLong crc = crc32_z(0L, Z_NULL, 0);
    for (size_t i = 0; i < s->n; i++) {
        piece *p = &s->pieces[i];
        crc = crc32_combine(crc, p->crc, (z_off_t)p->bytes);
        if (i + 1 < s->n && s->pieces[i + 1].file == p->file)
            continue;
        char name[64], path[sizeof v->folder + 80];
        zt_ckpt_shard_name(p->file, v->world, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", v->folder, name);
        zt_error err = {0};
        if (zt_ckpt_check_file_read(path, &v->m, p->file, (uint32_t)crc, &err) != ZT_OK)
            return snprintf(why, len, "%s", err.msg), -1;
        crc = crc32_z(0L, Z_NULL, 0);
    }
    return 0;
}

int ckpt_stream(const ckpt_view *v, int threads, size_t chunk, ckpt_master_fn fn, void *user,
                zt_progress *pr, char *why, size_t len)
{
    stream s = {.v = v,
                .chunk = chunk < 4 ? 4 : chunk / 4 * 4,
                .fn = fn,
                .user = user,
                .pr = pr,
                .masters_only = v->m.pieces != NULL};
    if (!v->streaming)
        return snprintf(why, len, "internal: the view was not opened by ckpt_open_streaming"), -1;
    if (s.masters_only && check_heads(v, why, len) != 0)
        return -1;
    if (plan(&s) != 0)
        return free(s.pieces), snprintf(why, len, "out of memory planning the reads"), -1;
    if (!(s.direct = malloc((size_t)v->world * sizeof *s.direct)))
        return free(s.pieces), snprintf(why, len, "out of memory"), -1;
    for (int k = 0; k < v->world; k++) { /* the same file the view opened and checked */
        char path[32];
        snprintf(path, sizeof path, "/proc/self/fd/%d", v->fds[k]);
        s.direct[k] = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        s.direct[k] = s.direct[k] < 0 ? v->fds[k] : s.direct[k];
    }
    pthread_mutex_init(&s.mu, NULL);
    pthread_t t[64];
    int n = threads < 1 ? 1 : threads > 64 ? 64 : threads, started = 0;
    while (started < n && pthread_create(&t[started], NULL, worker, &s) == 0)
        started++;
    if (started == 0)
        worker(&s);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_destroy(&s.mu);
    int rc = s.failed ? (snprintf(why, len, "%s", s.why), -1) : check_files(&s, why, len);
    for (int k = 0; k < v->world; k++)
        if (s.direct[k] != v->fds[k])
            close(s.direct[k]);
    free(s.pieces), free(s.direct);
    return rc;
}

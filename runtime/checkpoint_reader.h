/* SPDX-License-Identifier: MIT */
/* A checkpoint file read at the disk's speed, front to back: the I/O engine keeps several
 * 8 MiB O_DIRECT reads in flight ahead of the caller, who takes the bytes in order (the
 * kernel's read-ahead serves one synchronous read at a time, 2-5x slower than the device on
 * the development VM). The last partial block is read through the page cache; a filesystem
 * without O_DIRECT is read through it throughout. The mirror of checkpoint_writer.h. */
#ifndef ZT_RUNTIME_CHECKPOINT_READER_H
#define ZT_RUNTIME_CHECKPOINT_READER_H

#include "core/error.h"
#include "core/progress.h"
#include "core/threadpool.h"
#include "tiers/io.h"

#include <stddef.h>
#include <stdint.h>

typedef struct zt_ckpt_reader zt_ckpt_reader;

/* Opens path and starts reading it; *size: its length. Errors name the file. */
zt_status zt_ckpt_reader_open(const char *path, zt_io_engine_kind engine, uint64_t *size,
                              zt_ckpt_reader **out, zt_error *err);

/* A byte range of a file. */
typedef struct zt_ckpt_range {
    uint64_t off, len;
} zt_ckpt_range;

/* The same for a caller that takes only the n ranges given (in file order, not overlapping;
 * copied): only their blocks are read (ranges less than 256 KiB apart in one read), so the
 * bytes between them cost nothing. Taking a byte outside them is ZT_ERR_INTERNAL. */
zt_status zt_ckpt_reader_open_ranges(const char *path, zt_io_engine_kind engine,
                                     const zt_ckpt_range *ranges, size_t n, uint64_t *size,
                                     zt_ckpt_reader **out, zt_error *err);

/* The bytes every reader of this process asked of the disk since it started (O_DIRECT reads
 * and the tails), with those added by zt_ckpt_reader_count: a load's measure of how often
 * it reads each byte. */
uint64_t zt_ckpt_reader_bytes(void);
void zt_ckpt_reader_count(uint64_t bytes);
/* The next n bytes into dst (NULL: skipped); reading past the end is ZT_ERR_CORRUPT. */
zt_status zt_ckpt_reader_get(zt_ckpt_reader *r, void *dst, size_t n);
/* Moves on to offset (not behind the bytes got): the bytes between are not read where they
 * were not read ahead already (outside the ranges of zt_ckpt_reader_open_ranges). */
zt_status zt_ckpt_reader_seek(zt_ckpt_reader *r, uint64_t offset);
/* A whole file's length and CRC-32, read the same way, the CRC taken from the read buffers
 * (no copy). Errors name the file. */
zt_status zt_ckpt_file_crc(const char *path, zt_io_engine_kind engine, uint64_t *size,
                           uint32_t *crc, zt_error *err);
/* The file's first n bytes (its size, checked before) straight into dst (4096-byte aligned,
 * n rounded up to whole blocks in size) with O_DIRECT, no copy: pool's threads read 8 MiB
 * chunks (one read in flight per thread; NULL: the caller alone) and take each chunk's
 * CRC-32 as it lands (adding it to pr: NULL none); *crc: the file's, joined from them.
 * Errors name the file. */
zt_status zt_ckpt_read_into(const char *path, void *dst, uint64_t n, zt_threadpool *pool,
                            uint32_t *crc, zt_progress *pr, zt_error *err);
/* The same without an image: each chunk lands in a buffer of the thread's own (reused: no
 * fresh pages), and each(ctx, offset, bytes, len) takes it from there, on that thread, before
 * the buffer is read into again: several at once, in no order, each byte once. */
typedef void (*zt_ckpt_each_fn)(void *ctx, uint64_t offset, const unsigned char *bytes, size_t len);
zt_status zt_ckpt_read_each(const char *path, uint64_t n, zt_threadpool *pool, zt_ckpt_each_fn each,
                            void *ctx, uint32_t *crc, zt_progress *pr, zt_error *err);
/* Waits for the reads in flight, closes, frees. NULL is a no-op. */
void zt_ckpt_reader_close(zt_ckpt_reader *r);

#endif

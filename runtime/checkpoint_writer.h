/* SPDX-License-Identifier: MIT */
/* A checkpoint file written at the disk's speed: bytes appended in order are copied (and
 * CRC-32'd) into a ring of aligned 8 MiB buffers that the I/O engine writes with O_DIRECT
 * while the next ones fill, so the page cache (whose write-back can be several times slower
 * than the device) is bypassed and the copies overlap the writes. Where the filesystem has no
 * O_DIRECT (tmpfs on older kernels) the same path writes through the page cache. The last
 * buffer is padded to a block and the file truncated to its length; finish syncs it. */
#ifndef ZT_RUNTIME_CHECKPOINT_WRITER_H
#define ZT_RUNTIME_CHECKPOINT_WRITER_H

#include "core/error.h"
#include "tiers/io.h"

#include <stddef.h>
#include <stdint.h>

typedef struct zt_ckpt_writer zt_ckpt_writer;

/* Creates path, or overwrites the file there in place (its blocks reused; truncated to the
 * bytes put by finish); engine: ztier.io_engine (auto: io_uring, else threads). Errors
 * name the file. */
zt_status zt_ckpt_writer_open(const char *path, zt_io_engine_kind engine, zt_ckpt_writer **out,
                              zt_error *err);
/* Appends n bytes. A failed write (a full disk: ZT_ERR_NOSPACE) is returned by this or a
 * later call, naming the file. */
zt_status zt_ckpt_writer_put(zt_ckpt_writer *w, const void *p, size_t n);
/* The CRC-32 of the bytes put since the previous mark (or the open), taken on the copy put
 * already makes (no second pass); the file's CRC-32 at finish joins them (crc32_combine64).
 * A checkpoint's manifest records them per piece of a file (format version 3). */
uint32_t zt_ckpt_writer_mark(zt_ckpt_writer *w);
/* The writes so far that ran from the ring's registered buffers (io_uring; 0 on the thread
 * pool or where the registration was refused): for tests. */
uint64_t zt_ckpt_writer_fixed_ios(const zt_ckpt_writer *w);
/* Writes what is left, waits, truncates to the bytes put, fsyncs and closes; *bytes, *crc:
 * the file's length and CRC-32. Frees w whatever the outcome. */
zt_status zt_ckpt_writer_finish(zt_ckpt_writer *w, uint64_t *bytes, uint32_t *crc);
/* Stops after a failure elsewhere: waits for the writes in flight, closes, frees. */
void zt_ckpt_writer_discard(zt_ckpt_writer *w);

#endif

/* SPDX-License-Identifier: MIT */
/* A rank's shard file of a checkpoint: a header (magic, version, the rank and world that wrote
 * it, the layer count and the step state), then per layer, in registration order, the rank's
 * fp32 master, Adam m and Adam v, each `shard` elements (a whole layer for a replicated one). */
#ifndef ZT_RUNTIME_CHECKPOINT_FILE_H
#define ZT_RUNTIME_CHECKPOINT_FILE_H

#include "core/progress.h"
#include "core/threadpool.h"
#include "runtime/checkpoint_manifest.h"
#include "runtime/checkpoint_reader.h"
#include "tiers/io.h"

#include <stdint.h>
#include <stdio.h>

#define ZT_CKPT_MAGIC_V1 "ZTCKPT01"
#define ZT_CKPT_MAGIC "ZTCKPT02"

/* Version 1 files start with the first 32 bytes of this header. */
typedef struct zt_shard_header {
    char magic[8];
    uint32_t version, rank, world, n_layers;
    uint64_t step;
    float loss_scale;
    int32_t good_steps, hysteresis_left, fp16;
} zt_shard_header;

size_t zt_ckpt_header_bytes(int version);

/* fread of bytes into dst in pieces of at most 8 MiB: the kernel's read-ahead streams those,
 * where one read of hundreds of megabytes waits for its pages in turn (3-4x slower here). The
 * bytes read. */
size_t zt_ckpt_fread(void *dst, size_t bytes, FILE *f);

/* Checks saving rank k's file at path whole before anything is restored: its size against
 * the manifest's and `want` (the layout's), its CRC-32 against the manifest's, and its header
 * (rank k of m->world, m->n_layers layers, the manifest's step state). ZT_ERR_CORRUPT naming
 * the file and the mismatch. Part of zt_ckpt_validate. */
zt_status zt_ckpt_check_file(const char *path, const zt_manifest *m, int k, uint64_t want,
                             zt_io_engine_kind engine, zt_error *err);
/* The same checks in one pass over the file: reads it whole (want bytes) into dst (4096-byte
 * aligned: the reads land there with O_DIRECT) on pool's threads (zt_ckpt_read_into: one
 * read in flight per thread), each piece's CRC-32 taken as it lands, then checks the CRC and
 * the header there. A load restores from dst only once every rank's checks passed; dst's
 * content is undefined after a failure. The same messages as zt_ckpt_check_file. Each piece
 * read is added to pr (a terminal's progress line; NULL: none). */
zt_status zt_ckpt_read_file(const char *path, const zt_manifest *m, int k, uint64_t want,
                            zt_threadpool *pool, void *dst, zt_progress *pr, zt_error *err);

/* The same checks with no image: each piece read is handed to each(ctx, offset, bytes, len)
 * on the pool's threads (zt_ckpt_read_each), before its CRC is checked: for a caller with
 * nothing to keep whole if the checks fail (a load into values never initialised). */
zt_status zt_ckpt_read_file_each(const char *path, const zt_manifest *m, int k, uint64_t want,
                                 zt_threadpool *pool, zt_ckpt_each_fn each, void *ctx,
                                 zt_progress *pr, zt_error *err);

/* zt_ckpt_check_file in two parts, for a reader that computes the CRC-32 on the bytes it
 * reads anyway (`ztier checkpoint export`: one read of every file): the size check before it
 * reads, and after it, the CRC it computed and the header, in the order and with the
 * messages of zt_ckpt_check_file. */
zt_status zt_ckpt_check_file_size(const char *path, const zt_manifest *m, int k, uint64_t want,
                                  zt_error *err);
zt_status zt_ckpt_check_file_read(const char *path, const zt_manifest *m, int k, uint32_t crc,
                                  zt_error *err);

/* Version 3 (m->pieces): checks of the pieces a reader reads, for one that reads only some
 * (`ztier checkpoint export`: the master values). Piece i of file k (ZT_CKPT_PIECES' order:
 * 0 the header, 1 + 3 x layer + 0, 1, 2 its master, m, v):
 *   zt_ckpt_piece_range:       where it starts in the file (*len: its bytes);
 *   zt_ckpt_check_piece:       its CRC-32 (crc, taken on the bytes read) against the manifest's,
 *                              ZT_ERR_CORRUPT naming the file, the piece and its bytes;
 *   zt_ckpt_check_header_piece: reads the header, checks its CRC-32 and its fields (as
 *                              zt_ckpt_check_file_read does);
 *   zt_ckpt_check_pieces_join: that the pieces' CRC-32s join into the file's whole-file one
 *                              (which the loads check): an edited manifest, no I/O. */
uint64_t zt_ckpt_piece_range(const zt_manifest *m, size_t i, uint64_t *len);
zt_status zt_ckpt_check_piece(const char *path, const zt_manifest *m, int k, size_t i, uint32_t crc,
                              zt_error *err);
zt_status zt_ckpt_check_header_piece(const char *path, const zt_manifest *m, int k, zt_error *err);
zt_status zt_ckpt_check_pieces_join(const char *path, const zt_manifest *m, int k, zt_error *err);

#endif

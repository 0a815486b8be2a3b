/* SPDX-License-Identifier: MIT */
/* A rank's shard file of a checkpoint: a header (magic, version, the rank and world that wrote
 * it, the layer count and the step state), then per layer, in registration order, the rank's
 * fp32 master, Adam m and Adam v, each `shard` elements (a whole layer for a replicated one). */
#ifndef ZT_RUNTIME_CHECKPOINT_FILE_H
#define ZT_RUNTIME_CHECKPOINT_FILE_H

#include "runtime/checkpoint_manifest.h"

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

/* Reads the header at the file's start: refused (ZT_ERR_CORRUPT) unless its magic is the
 * version's and it was written by `rank` of `world` for n_layers layers. */
zt_status zt_ckpt_read_header(FILE *f, const char *path, int version, int rank, int world,
                              int n_layers, zt_shard_header *h, zt_error *err);

/* The header repeats the manifest's state; a mismatch means one of them was changed. */
zt_status zt_ckpt_cross_check(const zt_shard_header *h, const zt_manifest *m, const char *path,
                              zt_error *err);

#endif

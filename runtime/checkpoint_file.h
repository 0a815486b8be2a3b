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

/* The bytes each of the checkpoint's files holds: the header and every layer's three parts
 * (the manifest's parts, or this run's layout where the manifest does not record them). */
uint64_t zt_ckpt_file_bytes(const zt_runtime *rt, const zt_manifest *m);

/* fread of bytes into dst in pieces of at most 8 MiB: the kernel's read-ahead streams those,
 * where one read of hundreds of megabytes waits for its pages in turn (3-4x slower here). The
 * bytes read. */
size_t zt_ckpt_fread(void *dst, size_t bytes, FILE *f);

/* Checks saving rank k's file whole before anything is restored: its size against the
 * manifest's and zt_ckpt_file_bytes, its CRC-32 against the manifest's, and its header (rank k
 * of m->world, this model's layer count, the manifest's step state). rt->opt.staging is the
 * read buffer. ZT_ERR_CORRUPT naming the file and the mismatch. */
zt_status zt_ckpt_verify_file(zt_runtime *rt, FILE *f, const char *path, const zt_manifest *m,
                              int k);

#endif

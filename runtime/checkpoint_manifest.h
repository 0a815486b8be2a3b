/* SPDX-License-Identifier: MIT */
/* manifest.json of a checkpoint folder: the model it was saved from, its ZeRO stage, the step
 * state, each
 * rank's file with its size and CRC-32, and a checksum over all of it. Reading validates
 * every field's type and range and refuses a damaged or edited manifest with
 * ZT_ERR_CORRUPT naming the field, and a foreign model with ZT_ERR_ARGUMENT. */
#ifndef ZT_RUNTIME_CHECKPOINT_MANIFEST_H
#define ZT_RUNTIME_CHECKPOINT_MANIFEST_H

#include "runtime/runtime.h"

#include <jansson.h>
#include <stdint.h>

#define ZT_CKPT_VERSION 2

/* The optimizer's scalar state, saved in the manifest and in every shard header. */
typedef struct zt_ckpt_state {
    int64_t step;
    float loss_scale;
    int32_t good_steps, hysteresis_left;
    int32_t fp16; /* the saving run scaled its loss (fp16); -1: unknown (version 1) */
} zt_ckpt_state;

typedef struct zt_manifest {
    int version;
    zt_ckpt_state state;
    int zero_stage;    /* the saving run's zero_optimization.stage; -1: not recorded */
    int world;         /* the ranks that saved it, one file each */
    int64_t *flat;     /* per layer: its elements as the saving run laid it out */
    int64_t *shard;    /* per layer: each file's part of it (the whole layer for a replicated
                        one); NULL in checkpoints from before it was recorded */
    int64_t *files;    /* per saving rank: its file's bytes and CRC-32 */
    zt_ckpt_meta meta; /* the trainer's integers (zt_checkpoint_meta_set); none before them */
} zt_manifest;

/* "rank-00003-of-00008.zts" */
void zt_ckpt_shard_name(int rank, int world, char *out, size_t len);

/* The checksum field's value for a manifest: "crc32:" and 8 hex digits over the manifest's
 * compact, key-sorted JSON without its "checksum" member. */
void zt_manifest_checksum(json_t *m, char out[16]);

/* Writes folder/manifest.json for the runtime's model and state; files holds (bytes, crc)
 * per rank. The file is synced before this returns. */
zt_status zt_manifest_write(const zt_runtime *rt, const zt_ckpt_state *s, const int64_t *files,
                            const char *folder, zt_error *err);

/* Reads and validates folder/manifest.json against this runtime's model and rank; a
 * checkpoint of the same model saved by another number of ranks, or laid out otherwise (stage
 * 0 against 1-3), passes where it records each layer's part per file. zt_manifest_free after. */
zt_status zt_manifest_read(const zt_runtime *rt, const char *folder, zt_manifest *out,
                           zt_error *err);
void zt_manifest_free(zt_manifest *m);

/* 1 when the files' parts differ from this run's (another world size, or a layer replicated
 * in one and partitioned in the other): each rank then reads its parts from several files. */
int zt_manifest_reshards(const zt_runtime *rt, const zt_manifest *m);

#endif

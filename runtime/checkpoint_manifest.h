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

/* 3: each file's pieces' CRC-32s in the manifest ("pieces_crc32"), so a reader of some pieces
 * (an export reads the master values only) checks what it reads. 2 and 1 still load. */
#define ZT_CKPT_VERSION 3

/* A file's pieces with a CRC-32 of their own: its header, then per layer its master, Adam m
 * and Adam v parts, in file order (they cover the file: the whole-file CRC joins them). */
#define ZT_CKPT_PIECES(n_layers) (1 + 3 * (size_t)(n_layers))
/* What each rank tells rank 0 of its file for the manifest: bytes, CRC-32, its pieces'. */
#define ZT_CKPT_FILE_FIELDS(n_layers) (2 + ZT_CKPT_PIECES(n_layers))

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
    int n_layers;      /* the layers it lists */
    int64_t *flat;     /* per layer: its elements as the saving run laid it out */
    int64_t *shard;    /* per layer: each file's part of it (the whole layer for a replicated
                        one); NULL in checkpoints from before it was recorded */
    int64_t *files;    /* per saving rank: its file's bytes and CRC-32 */
    uint32_t *pieces;  /* per saving rank: ZT_CKPT_PIECES(n_layers) CRC-32s (its header's, then
                          each layer's master, m, v); NULL before version 3 */
    zt_ckpt_meta meta; /* the trainer's integers (zt_checkpoint_meta_set); none before them */
} zt_manifest;

/* What a manifest is checked against. A load: its runtime's model and run. The `ztier
 * checkpoint` commands: the model where they know it (the GPT-2 trainer's, from its meta
 * values), else none, and no run. */
typedef struct zt_ckpt_expect {
    json_t *layers; /* the model's layers as zt_manifest_model_json writes them; NULL: not
                       known (the manifest's layers are then checked on their own only) */
    int world;      /* the loading run's ranks; 0: no run (a tool) */
    int rank;       /* this rank in it */
    int stage;      /* its zero_optimization.stage */
    int fp16;       /* it scales its loss (a tool: 1, any saved scale is real) */
} zt_ckpt_expect;

/* "rank-00003-of-00008.zts" */
void zt_ckpt_shard_name(int rank, int world, char *out, size_t len);

/* The checksum field's value for a manifest: "crc32:" and 8 hex digits over the manifest's
 * compact, key-sorted JSON without its "checksum" member. */
void zt_manifest_checksum(json_t *m, char out[16]);

/* Writes folder/manifest.json for the runtime's model and state; files holds per rank
 * ZT_CKPT_FILE_FIELDS(n_layers) values: bytes, CRC-32, then the pieces' CRC-32s. The file is
 * synced before this returns. */
zt_status zt_manifest_write(const zt_runtime *rt, const zt_ckpt_state *s, const int64_t *files,
                            const char *folder, zt_error *err);

/* The model's layers as a manifest records them: name, flat_numel, shard_numel and params
 * (name, shape, offset), in registration order. */
json_t *zt_manifest_model_json(const zt_runtime *rt);

/* Reads folder/manifest.json and checks every field before anything uses it: format,
 * version and checksum; world size, step state, stage; each layer (flat and per-file sizes)
 * and parameter (a unique name, positive sizes, its offset where the ones before it end, so
 * none overlap) on its own, then against x's model where it has one (names, shapes, offsets
 * and order: a checkpoint of another model, or with layers swapped, is ZT_ERR_ARGUMENT); the
 * files list (one per rank, by its exact name) and the meta values. A checkpoint of the same
 * model saved by another number of ranks, or laid out otherwise (stage 0 against 1-3),
 * passes where it records each layer's part per file. ZT_ERR_CORRUPT naming the field
 * otherwise. zt_manifest_free after (also after a failure). Part of zt_ckpt_validate. */
zt_status zt_manifest_check(const char *folder, const zt_ckpt_expect *x, zt_manifest *out,
                            zt_error *err);
void zt_manifest_free(zt_manifest *m);

/* 1 when the files' parts differ from the loading run's (another world size, or a layer
 * replicated in one and partitioned in the other): each rank then reads its parts from
 * several files. */
int zt_manifest_reshards(const zt_ckpt_expect *x, const zt_manifest *m);

#endif

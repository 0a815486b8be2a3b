/* SPDX-License-Identifier: MIT */
/* The checks a checkpoint passes before anything reads it, one function for every reader: a
 * load (zt_checkpoint_load), `ztier checkpoint inspect` and `ztier checkpoint export`. So
 * what inspect calls intact loads, and what a load refuses inspect and export refuse, with
 * the same message naming the check. */
#ifndef ZT_RUNTIME_CHECKPOINT_CHECK_H
#define ZT_RUNTIME_CHECKPOINT_CHECK_H

#include "runtime/checkpoint_manifest.h"
#include "tiers/io.h"

/* Which rank files zt_ckpt_validate reads whole. */
typedef enum zt_ckpt_files {
    ZT_CKPT_FILES_ALL,    /* every file (the tools) */
    ZT_CKPT_FILES_RANK,   /* the loading rank's share: its own file where the layouts agree,
                           else files k = rank, rank + world, ... (the others check the rest) */
    ZT_CKPT_FILES_OTHERS, /* none where the layouts agree: the load checks its own file as it
                             reads it (zt_ckpt_read_file); else every file's size: the
                             resharded load checks CRCs and headers as the ranks read their
                             pieces (zt_ckpt_reshard_read, or zt_ckpt_reshard_check) */
    ZT_CKPT_FILES_SIZES,  /* every file's size only: the caller reads each file once and checks
                            its CRC-32 and header then (zt_ckpt_check_file_read) */
} zt_ckpt_files;

/* What a load by rt checks against: its model, world size, rank, stage and loss scaling.
 * zt_ckpt_expect_free after. */
zt_status zt_ckpt_expect_runtime(const zt_runtime *rt, zt_ckpt_expect *x, zt_error *err);
void zt_ckpt_expect_free(zt_ckpt_expect *x);

/* Validates the checkpoint in folder (one step folder): its manifest (zt_manifest_check,
 * against x), the folder (no rank file the manifest does not list: a file of another save),
 * then the rank files `files` names whole (zt_ckpt_check_file: size, CRC-32, header). *m: the
 * manifest read (zt_manifest_free after, also after a failure). ZT_ERR_CORRUPT or
 * ZT_ERR_ARGUMENT with a message naming the check that failed. */
/* The bytes each rank file of the checkpoint m, checked against x, holds. */
uint64_t zt_ckpt_file_bytes(const zt_ckpt_expect *x, const zt_manifest *m);

zt_status zt_ckpt_validate(const char *folder, const zt_ckpt_expect *x, zt_ckpt_files files,
                           zt_io_engine_kind engine, zt_manifest *m, zt_error *err);

#endif

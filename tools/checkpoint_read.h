/* SPDX-License-Identifier: MIT */
/* A checkpoint as the `ztier checkpoint` commands read it, without the model or a runtime:
 * the manifest's layers and parameters, checked as a load checks them (zt_ckpt_validate), and
 * any parameter's fp32 master values gathered from the files that hold its pieces (memory:
 * the parameter itself). */
#ifndef ZT_TOOLS_CHECKPOINT_READ_H
#define ZT_TOOLS_CHECKPOINT_READ_H

#include "core/progress.h"
#include "runtime/checkpoint_manifest.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_MAX_DIMS 8

typedef struct ckpt_param {
    const char *name; /* in the manifest (lives as long as the view) */
    int layer, ndim;
    int64_t shape[CKPT_MAX_DIMS];
    int64_t numel, offset; /* elements, and where they start in the layer's flat layout */
} ckpt_param;

typedef struct ckpt_layer {
    int64_t flat;  /* its elements as laid out by the saving run */
    int64_t shard; /* each file's part of it (flat where it was replicated) */
    int64_t at;    /* where its parts (master, m, v) start in a file, in elements */
} ckpt_layer;

typedef struct ckpt_view {
    char folder[4096];
    json_t *manifest;
    int version, world, n_layers, n_params;
    int64_t step;
    ckpt_layer *layers;
    ckpt_param *params;
    int *fds;      /* per file, opened by ckpt_open */
    zt_manifest m; /* ckpt_open_streaming: what ckpt_stream checks each file against */
    int streaming;
} ckpt_view;

/* Opens the checkpoint `dir` names (a root: the newest `latest` lists; or one step folder)
 * after the checks a load runs (zt_ckpt_validate: the manifest, against the GPT-2 trainer's
 * model where its meta values say it is one, and every rank file whole), and keeps the files
 * open for ckpt_read_param. 0, or -1 with the load's message naming the check in why. */
int ckpt_open(const char *dir, ckpt_view *v, char *why, size_t len);

/* ckpt_open for one read of every file (ckpt_stream): the manifest, the folder and every
 * file's size are checked here; each file's CRC-32 and header as ckpt_stream reads it. */
int ckpt_open_streaming(const char *dir, ckpt_view *v, char *why, size_t len);

/* Called by ckpt_stream for each piece of a layer's fp32 master values it reads: flat
 * elements [lo, lo + n) of layer `layer` (past the layer's end: padding), in src, which the
 * callee may overwrite. From several threads at once, for pieces in no particular order.
 * 0, or -1 with the cause in why. */
typedef int (*ckpt_master_fn)(void *user, int layer, int64_t lo, int64_t n, float *src, char *why,
                              size_t len);

/* Reads a view from ckpt_open_streaming with `threads` threads in pieces of `chunk` bytes
 * (O_DIRECT where the filesystem has it), every layer's master values to fn (a replicated
 * layer's from the first file), checked:
 *  - version 3 (the manifest records each piece's CRC-32): only the master values are read;
 *    first each file's header and that its pieces' CRC-32s join into its whole-file one, then
 *    each master piece's CRC-32 on the bytes read (zt_ckpt_check_piece, naming the file and
 *    the piece). Adam m and v are neither read nor checked (a load checks them).
 *  - versions 1 and 2: every file once, whole, each file's CRC-32 over all its bytes and its
 *    header checked as a load checks them (zt_ckpt_check_file_read).
 * Bytes read are added to pr. 0, or -1 with the file and the cause in why. */
int ckpt_stream(const ckpt_view *v, int threads, size_t chunk, ckpt_master_fn fn, void *user,
                zt_progress *pr, char *why, size_t len);
/* The bytes ckpt_stream reads of v (its progress line's whole). */
uint64_t ckpt_stream_bytes(const ckpt_view *v);

/* Parameter p's fp32 master values (numel floats) into dst, from the pieces of it each file
 * holds. 0, or -1 with the file and the cause in why. */
int ckpt_read_param(const ckpt_view *v, int p, float *dst, char *why, size_t len);

/* The manifest's "meta" value of key: 0, or -1 when it has none. */
int ckpt_meta(const ckpt_view *v, const char *key, int64_t *value);

void ckpt_close(ckpt_view *v);

#endif

/* SPDX-License-Identifier: MIT */
/* A checkpoint as the `ztier checkpoint` commands read it, without the model or a runtime:
 * the manifest's layers and parameters (each field checked before it is used), every rank
 * file checked whole (size, CRC-32, header), and any parameter's fp32 master values gathered
 * from the files that hold its pieces (memory: the parameter itself). */
#ifndef ZT_TOOLS_CHECKPOINT_READ_H
#define ZT_TOOLS_CHECKPOINT_READ_H

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
    int *fds; /* per file, opened by ckpt_verify */
} ckpt_view;

/* Opens the checkpoint `dir` names (a root: the newest `latest` lists; or one step folder)
 * and checks its manifest: checksum, model, layout. 0, or -1 with the reason in why. */
int ckpt_open(const char *dir, ckpt_view *v, char *why, size_t len);

/* Checks every rank file whole against the manifest (size, CRC-32, header) and keeps it open
 * for ckpt_read_param. 0, or -1 with the first damaged file and what is wrong in why. */
int ckpt_verify(ckpt_view *v, char *why, size_t len);

/* Parameter p's fp32 master values (numel floats) into dst, from the pieces of it each file
 * holds. 0, or -1 with the file and the cause in why. */
int ckpt_read_param(const ckpt_view *v, int p, float *dst, char *why, size_t len);

/* The manifest's "meta" value of key: 0, or -1 when it has none. */
int ckpt_meta(const ckpt_view *v, const char *key, int64_t *value);

void ckpt_close(ckpt_view *v);

/* A file's size and CRC-32 (zt_ckpt_file_crc); 0, or -1 with the cause in why. */
int ckpt_file_crc(const char *path, uint64_t *bytes, uint32_t *crc, char *why, size_t len);

#endif

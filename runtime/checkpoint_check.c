/* SPDX-License-Identifier: MIT */
/* The checks every reader of a checkpoint runs (checkpoint_check.h). */
#include "runtime/checkpoint_check.h"
#include "runtime/checkpoint_file.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

zt_status zt_ckpt_expect_runtime(const zt_runtime *rt, zt_ckpt_expect *x, zt_error *err)
{
    *x = (zt_ckpt_expect){zt_manifest_model_json(rt), rt->dist.world, rt->dist.rank, rt->cfg.stage,
                          rt->cfg.fp16};
    if (!x->layers)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory describing the model to a checkpoint load");
    return ZT_OK;
}

void zt_ckpt_expect_free(zt_ckpt_expect *x)
{
    json_decref(x->layers);
    x->layers = NULL;
}

/* The bytes each file holds: the header and every layer's three parts (the manifest's, or
 * the loading run's where the manifest does not record them). */
uint64_t zt_ckpt_file_bytes(const zt_ckpt_expect *x, const zt_manifest *m)
{
    uint64_t n = zt_ckpt_header_bytes(m->version);
    for (int i = 0; i < m->n_layers; i++) {
        json_t *L = json_array_get(x->layers, (size_t)i);
        int64_t part =
            m->shard ? m->shard[i] : json_integer_value(json_object_get(L, "shard_numel"));
        n += 3 * (uint64_t)part * sizeof(float);
    }
    return n;
}

/* A rank file in folder that the manifest does not list: left by another save (or copied in),
 * so the folder is not what was saved. Other files are not ztier's and do not matter. */
static zt_status check_listing(const char *folder, const zt_manifest *m, zt_error *err)
{
    DIR *d = opendir(folder);
    if (!d)
        return ZT_ERR(err, ZT_ERR_IO, "checkpoint folder '%s' cannot be read", folder);
    zt_status st = ZT_OK;
    for (struct dirent *e; st == ZT_OK && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "rank-", 5) != 0 || n < 9 || strcmp(e->d_name + n - 4, ".zts"))
            continue;
        int listed = 0;
        for (int k = 0; k < m->world && !listed; k++) {
            char name[64];
            zt_ckpt_shard_name(k, m->world, name, sizeof name);
            listed = !strcmp(name, e->d_name);
        }
        if (!listed)
            st = ZT_ERR(err, ZT_ERR_CORRUPT,
                        "checkpoint folder '%s' holds '%s', which its manifest does not list "
                        "(a file of another save, or the folder was changed); load an older "
                        "checkpoint",
                        folder, e->d_name);
    }
    closedir(d);
    return st;
}

/* Version 3: every file's pieces' CRC-32s join into its whole-file one, so what a reader of
 * some pieces checks (an export) is what a load checks. */
static zt_status check_pieces_join(const char *folder, const zt_manifest *m, zt_error *err)
{
    zt_status st = ZT_OK;
    for (int k = 0; m->pieces && st == ZT_OK && k < m->world; k++) {
        char name[64], path[ZT_PATH_MAX + 240];
        zt_ckpt_shard_name(k, m->world, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", folder, name);
        st = zt_ckpt_check_pieces_join(path, m, k, err);
    }
    return st;
}

zt_status zt_ckpt_validate(const char *folder, const zt_ckpt_expect *x, zt_ckpt_files files,
                           zt_io_engine_kind engine, zt_manifest *m, zt_error *err)
{
    zt_status st = zt_manifest_check(folder, x, m, err);
    if (st == ZT_OK)
        st = check_listing(folder, m, err);
    if (st == ZT_OK)
        st = check_pieces_join(folder, m, err);
    if (st != ZT_OK)
        return st;
    int first = 0, step = 1;
    int reshards = zt_manifest_reshards(x, m);
    if (files == ZT_CKPT_FILES_OTHERS && !reshards)
        return ZT_OK;
    if (files == ZT_CKPT_FILES_OTHERS) /* the resharded load checks the CRCs as it reads */
        files = ZT_CKPT_FILES_SIZES;
    if (files == ZT_CKPT_FILES_RANK || files == ZT_CKPT_FILES_OTHERS) /* a share */
        first = x->rank, step = reshards ? x->world : INT_MAX;
    uint64_t want = zt_ckpt_file_bytes(x, m);
    for (int k = first; st == ZT_OK && k<m->world; k = k> INT_MAX - step ? INT_MAX : k + step) {
        char name[64], path[ZT_PATH_MAX + 240];
        zt_ckpt_shard_name(k, m->world, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", folder, name);
        st = files == ZT_CKPT_FILES_SIZES ? zt_ckpt_check_file_size(path, m, k, want, err)
                                          : zt_ckpt_check_file(path, m, k, want, engine, err);
    }
    return st;
}

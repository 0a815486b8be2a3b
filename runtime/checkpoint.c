/* Checkpoints: every rank writes its fp32 master, Adam m and v shards (from whatever tier
 * they live in) to one file; rank 0 then writes manifest.json naming the model, the step
 * state and each file's size and CRC-32. The manifest is written last and renamed into
 * place, so a checkpoint without one is an interrupted save and is refused on load.
 * Loading restores the shards and re-derives the working-dtype parameters, so training
 * resumes bit-identically. */
#include "runtime/checkpoint.h"
#include "runtime/log.h"
#include "runtime/step_nvme.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CKPT_FORMAT "ztier-checkpoint"
#define CKPT_VERSION 1
#define CKPT_MAGIC "ZTCKPT01"

typedef struct shard_header {
    char magic[8];
    uint32_t version, rank, world, n_layers;
    uint64_t step;
} shard_header;

static void shard_path(const char *dir, int rank, int world, char *out, size_t len)
{
    snprintf(out, len, "%s/rank-%05d-of-%05d.zts", dir, rank, world);
}

static zt_status write_all(FILE *f, const void *p, size_t n, uLong *crc, const char *path,
                           zt_error *err)
{
    if (n && fwrite(p, 1, n, f) != n)
        return ZT_ERR(err, zt_status_from_errno(errno), "writing checkpoint file '%s': %s",
                      path, strerror(errno));
    *crc = crc32(*crc, p, (uInt)n);
    return ZT_OK;
}

/* Writes one home's bytes through the fp32 staging buffer. */
static zt_status write_home(zt_runtime *rt, FILE *f, const zt_home *h, uLong *crc,
                            const char *path)
{
    zt_status st = zt_home_load(&rt->homes, h, rt->staging, &rt->err);
    return st == ZT_OK ? write_all(f, rt->staging, h->bytes, crc, path, &rt->err) : st;
}

static zt_status write_shard_file(zt_runtime *rt, const char *dir, uint64_t *bytes, uLong *crc)
{
    char path[ZT_PATH_MAX + 64], tmp[ZT_PATH_MAX + 80];
    shard_path(dir, rt->rank, rt->world, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return ZT_ERR(&rt->err, zt_status_from_errno(errno),
                      "cannot create checkpoint file '%s': %s", tmp, strerror(errno));
    shard_header h = {CKPT_MAGIC, CKPT_VERSION, (uint32_t)rt->rank, (uint32_t)rt->world,
                      (uint32_t)rt->n_layers, (uint64_t)rt->steps};
    *crc = crc32(0L, Z_NULL, 0);
    zt_status st = write_all(f, &h, sizeof h, crc, tmp, &rt->err);
    for (int i = 0; st == ZT_OK && i < rt->n_layers; i++) {
        zt_layer *L = &rt->layers[i];
        st = write_home(rt, f, &L->master, crc, tmp);
        if (st == ZT_OK)
            st = write_home(rt, f, &L->exp_avg, crc, tmp);
        if (st == ZT_OK)
            st = write_home(rt, f, &L->exp_avg_sq, crc, tmp);
    }
    *bytes = (uint64_t)ftell(f);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        st = st != ZT_OK ? st : ZT_ERR(&rt->err, zt_status_from_errno(errno),
                                       "flushing checkpoint file '%s': %s", tmp, strerror(errno));
    if (fclose(f) != 0 && st == ZT_OK)
        st = ZT_ERR(&rt->err, zt_status_from_errno(errno), "closing '%s': %s", tmp,
                    strerror(errno));
    if (st == ZT_OK && rename(tmp, path) != 0)
        st = ZT_ERR(&rt->err, ZT_ERR_IO, "renaming '%s': %s", tmp, strerror(errno));
    if (st != ZT_OK)
        unlink(tmp);
    return st;
}

static json_t *model_json(const zt_runtime *rt)
{
    json_t *layers = json_array();
    for (int i = 0; i < rt->n_layers; i++) {
        const zt_layer *L = &rt->layers[i];
        json_t *params = json_array();
        for (int k = 0; k < L->n_params; k++) {
            const zt_param *p = &rt->params[L->param_ids[k]];
            json_t *shape = json_array();
            for (int d = 0; d < p->ndim; d++)
                json_array_append_new(shape, json_integer(p->shape[d]));
            json_array_append_new(params, json_pack("{s:s, s:o, s:I}", "name", p->name, "shape",
                                                    shape, "offset", (json_int_t)p->offset));
        }
        json_array_append_new(layers, json_pack("{s:s, s:I, s:o}", "name", L->name, "flat_numel",
                                                (json_int_t)L->flat_numel, "params", params));
    }
    return layers;
}

static zt_status write_manifest(zt_runtime *rt, const char *dir, const int64_t *files)
{
    json_t *list = json_array();
    for (int r = 0; r < rt->world; r++) {
        char name[64];
        snprintf(name, sizeof name, "rank-%05d-of-%05d.zts", r, rt->world);
        json_array_append_new(list, json_pack("{s:s, s:I, s:I}", "name", name, "bytes",
                                              (json_int_t)files[2 * r], "crc32",
                                              (json_int_t)files[2 * r + 1]));
    }
    json_t *m = json_pack("{s:s, s:i, s:i, s:I, s:f, s:i, s:i, s:o, s:o}", "format", CKPT_FORMAT,
                          "version", CKPT_VERSION, "world_size", rt->world, "step",
                          (json_int_t)rt->steps, "loss_scale", (double)rt->loss_scale,
                          "good_steps", rt->good_steps, "hysteresis_left", rt->hysteresis_left,
                          "layers", model_json(rt), "files", list);
    char path[ZT_PATH_MAX + 32], tmp[ZT_PATH_MAX + 48];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    snprintf(tmp, sizeof tmp, "%s/manifest.json.tmp", dir);
    int rc = json_dump_file(m, tmp, JSON_INDENT(1));
    json_decref(m);
    if (rc != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return ZT_ERR(&rt->err, ZT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    return ZT_OK;
}

static zt_status prepare_dir(zt_runtime *rt, const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return ZT_ERR(&rt->err, zt_status_from_errno(errno),
                      "cannot create checkpoint folder '%s': %s", dir, strerror(errno));
    /* An older manifest must not describe the files this save is about to replace. */
    char path[ZT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (rt->rank == 0 && unlink(path) != 0 && errno != ENOENT)
        return ZT_ERR(&rt->err, ZT_ERR_IO, "cannot replace '%s': %s", path, strerror(errno));
    return ZT_OK;
}

zt_status zt_rt_checkpoint_save(zt_runtime *rt, const char *dir)
{
    if (strlen(dir) >= ZT_PATH_MAX)
        return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT, "checkpoint path longer than %d bytes",
                      ZT_PATH_MAX);
    zt_status st = zt_step_nvme_drain(rt); /* the optimizer state on disk is complete */
    if (st == ZT_OK)
        st = prepare_dir(rt, dir);
    st = zt_comm_agree(rt->comm, st, "checkpoint save (folder)", &rt->err);
    uint64_t bytes = 0;
    uLong crc = 0;
    if (st == ZT_OK)
        st = write_shard_file(rt, dir, &bytes, &crc);
    int64_t mine[2] = {(int64_t)bytes, (int64_t)crc};
    int64_t *files = calloc(2 * (size_t)rt->world, sizeof *files);
    if (!files && st == ZT_OK)
        st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory saving a checkpoint");
    st = zt_comm_agree(rt->comm, st, "checkpoint save (shard files)", &rt->err);
    if (st == ZT_OK)
        st = zt_comm_allgather_sync(rt->comm, mine, files, 2, ZT_COMM_I64, &rt->err);
    if (st == ZT_OK && rt->rank == 0)
        st = write_manifest(rt, dir, files);
    free(files);
    st = zt_comm_agree(rt->comm, st, "checkpoint save (manifest)", &rt->err);
    if (st == ZT_OK)
        ZT_LOGI("checkpoint", "saved step %lld to %s", (long long)rt->steps, dir);
    return st;
}

/* ---- load ---- */

static zt_status check_model(zt_runtime *rt, json_t *layers, const char *path)
{
    if (!json_is_array(layers) || (int)json_array_size(layers) != rt->n_layers)
        return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                      "checkpoint '%s' holds %d layers, this model has %d: it was saved from a "
                      "different model", path, json_is_array(layers) ? (int)json_array_size(layers) : -1,
                      rt->n_layers);
    for (int i = 0; i < rt->n_layers; i++) {
        const zt_layer *L = &rt->layers[i];
        json_t *jl = json_array_get(layers, (size_t)i), *params = json_object_get(jl, "params");
        const char *name = json_string_value(json_object_get(jl, "name"));
        if (!name || strcmp(name, L->name) != 0 || !json_is_array(params) ||
            (int)json_array_size(params) != L->n_params ||
            json_integer_value(json_object_get(jl, "flat_numel")) != L->flat_numel)
            return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                          "checkpoint '%s': layer %d is '%s' there and '%s' here (or its "
                          "parameters differ): it was saved from a different model",
                          path, i, name ? name : "?", L->name);
        for (int k = 0; k < L->n_params; k++) {
            const zt_param *p = &rt->params[L->param_ids[k]];
            json_t *jp = json_array_get(params, (size_t)k), *shape = json_object_get(jp, "shape");
            const char *pname = json_string_value(json_object_get(jp, "name"));
            int same = pname && !strcmp(pname, p->name) && json_is_array(shape) &&
                       (int)json_array_size(shape) == p->ndim;
            for (int d = 0; same && d < p->ndim; d++)
                same = json_integer_value(json_array_get(shape, (size_t)d)) == p->shape[d];
            if (!same)
                return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                              "checkpoint '%s': parameter '%s' has another name or shape there",
                              path, p->name);
        }
    }
    return ZT_OK;
}

static zt_status read_manifest(zt_runtime *rt, const char *dir, json_t **out)
{
    char path[ZT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_error_t je;
    json_t *m = json_load_file(path, 0, &je);
    if (!m) {
        if (access(path, F_OK) != 0)
            return ZT_ERR(&rt->err, ZT_ERR_CORRUPT,
                          "no manifest.json in '%s': not a ztier checkpoint, or its save was "
                          "interrupted before it finished", dir);
        return ZT_ERR(&rt->err, ZT_ERR_CORRUPT, "'%s' line %d: %s", path, je.line, je.text);
    }
    const char *fmt = json_string_value(json_object_get(m, "format"));
    json_int_t ver = json_integer_value(json_object_get(m, "version"));
    json_int_t world = json_integer_value(json_object_get(m, "world_size"));
    zt_status st = ZT_OK;
    if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0 || ver != CKPT_VERSION)
        st = ZT_ERR(&rt->err, ZT_ERR_CORRUPT, "'%s' is not a version-%d ztier checkpoint manifest",
                    path, CKPT_VERSION);
    else if (world != rt->world)
        st = ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                    "checkpoint '%s' was saved by %lld ranks and this run has %d: resume with "
                    "the same number of ranks", dir, (long long)world, rt->world);
    else
        st = check_model(rt, json_object_get(m, "layers"), path);
    if (st != ZT_OK)
        json_decref(m);
    else
        *out = m;
    return st;
}

static uint64_t expected_shard_bytes(const zt_runtime *rt)
{
    uint64_t n = sizeof(shard_header);
    for (int i = 0; i < rt->n_layers; i++)
        n += 3 * (uint64_t)rt->layers[i].shard_numel * sizeof(float);
    return n;
}

/* Checks size, header and CRC of this rank's file before anything is changed. */
static zt_status verify_shard_file(zt_runtime *rt, FILE *f, const char *path, json_t *entry)
{
    uint64_t want = (uint64_t)json_integer_value(json_object_get(entry, "bytes"));
    uLong want_crc = (uLong)json_integer_value(json_object_get(entry, "crc32"));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || (uint64_t)sb.st_size != want ||
        want != expected_shard_bytes(rt))
        return ZT_ERR(&rt->err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' has %lld bytes, the manifest says %llu and the "
                      "model needs %llu: the file is truncated or from another save",
                      path, (long long)sb.st_size, (unsigned long long)want,
                      (unsigned long long)expected_shard_bytes(rt));
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t n;
    while ((n = fread(rt->staging, 1, rt->staging_bytes, f)) > 0)
        crc = crc32(crc, rt->staging, (uInt)n);
    shard_header h;
    rewind(f);
    if (crc != want_crc || fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, CKPT_MAGIC, 8) ||
        h.rank != (uint32_t)rt->rank || h.world != (uint32_t)rt->world)
        return ZT_ERR(&rt->err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' is damaged (CRC-32 %08lx, manifest says %08lx, or "
                      "its header does not match rank %d of %d)",
                      path, (unsigned long)crc, (unsigned long)want_crc, rt->rank, rt->world);
    return ZT_OK;
}

static zt_status read_home(zt_runtime *rt, FILE *f, zt_home *h, const char *path)
{
    if (fread(rt->staging, 1, h->bytes, f) != h->bytes)
        return ZT_ERR(&rt->err, ZT_ERR_IO, "reading '%s': %s", path, strerror(errno));
    return zt_home_store(&rt->homes, h, rt->staging, &rt->err);
}

/* Re-derives the working-dtype parameters from the restored fp32 master. */
static zt_status refresh_params(zt_runtime *rt, zt_layer *L)
{
    zt_status st = zt_home_load(&rt->homes, &L->master, rt->staging, &rt->err);
    void *working = rt->staging;
    if (st == ZT_OK && rt->dtype != ZT_F32) {
        working = rt->staging_lp;
        zt_convert_array(working, rt->dtype, rt->staging, ZT_F32, (size_t)L->shard_numel);
    }
    return st == ZT_OK ? zt_home_store(&rt->homes, &L->param_home, working, &rt->err) : st;
}

static zt_status load_shards(zt_runtime *rt, const char *dir, json_t *m)
{
    char path[ZT_PATH_MAX + 64];
    shard_path(dir, rt->rank, rt->world, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ZT_ERR(&rt->err, ZT_ERR_CORRUPT, "checkpoint file '%s' is missing: %s", path,
                      strerror(errno));
    json_t *entry = json_array_get(json_object_get(m, "files"), (size_t)rt->rank);
    zt_status st = verify_shard_file(rt, f, path, entry);
    for (int i = 0; st == ZT_OK && i < rt->n_layers; i++) {
        zt_layer *L = &rt->layers[i];
        st = read_home(rt, f, &L->master, path);
        if (st == ZT_OK)
            st = read_home(rt, f, &L->exp_avg, path);
        if (st == ZT_OK)
            st = read_home(rt, f, &L->exp_avg_sq, path);
        if (st == ZT_OK)
            st = refresh_params(rt, L);
    }
    fclose(f);
    return st;
}

zt_status zt_rt_checkpoint_load(zt_runtime *rt, const char *dir)
{
    json_t *m = NULL;
    zt_status st = zt_step_nvme_drain(rt); /* no write-back may land after the restore */
    if (st == ZT_OK)
        st = read_manifest(rt, dir, &m);
    if (st == ZT_OK)
        st = zt_comm_agree(rt->comm, ZT_OK, "checkpoint load (manifest)", &rt->err);
    else
        zt_comm_agree(rt->comm, st, "checkpoint load (manifest)", NULL);
    if (st != ZT_OK) {
        json_decref(m);
        return st;
    }
    zt_prefetch_drop_unheld(rt);
    st = load_shards(rt, dir, m);
    if (st == ZT_OK) {
        rt->steps = json_integer_value(json_object_get(m, "step"));
        rt->loss_scale = (float)json_real_value(json_object_get(m, "loss_scale"));
        rt->good_steps = (int)json_integer_value(json_object_get(m, "good_steps"));
        rt->hysteresis_left = (int)json_integer_value(json_object_get(m, "hysteresis_left"));
        for (int i = 0; i < rt->n_layers; i++) {
            memset(rt->layers[i].grad_acc, 0, (size_t)rt->layers[i].shard_numel * sizeof(float));
            rt->layers[i].accum_count = 0;
        }
    }
    json_decref(m);
    st = zt_comm_agree(rt->comm, st, "checkpoint load (shard files)", &rt->err);
    if (st == ZT_OK)
        ZT_LOGI("checkpoint", "resumed step %lld from %s", (long long)rt->steps, dir);
    return st;
}

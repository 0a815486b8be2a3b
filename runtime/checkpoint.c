/* SPDX-License-Identifier: MIT */
/* Checkpoints: every rank writes its fp32 master, Adam m and v shards (from whatever tier
 * they live in) into one file of a fresh folder; rank 0 then writes manifest.json and
 * commits the folder as the root's latest checkpoint (checkpoint_dir.c), so an interrupted
 * or failed save never touches the previous checkpoint. Loading validates the manifest and
 * every shard file (size, CRC-32, header) on every rank, agrees, and only then restores the
 * shards and re-derives the working-dtype parameters, so training resumes bit-identically
 * and a refused checkpoint changes nothing. */
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_check.h"
#include "runtime/checkpoint_dir.h"
#include "runtime/checkpoint_file.h"
#include "runtime/checkpoint_reshard.h"
#include "runtime/checkpoint_reader.h"
#include "runtime/checkpoint_writer.h"
#include "runtime/checkpoint_manifest.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/test_hooks.h"
#include "core/time.h"
#include "core/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static zt_ckpt_state current_state(const zt_runtime *rt)
{
    zt_ckpt_state s = {rt->train.steps, rt->train.loss_scale, rt->train.good_steps,
                       rt->train.hysteresis_left, rt->cfg.fp16};
    return s;
}

static void shard_path(const char *folder, const zt_runtime *rt, char *out, size_t len)
{
    char name[64];
    zt_ckpt_shard_name(rt->dist.rank, rt->dist.world, name, sizeof name);
    snprintf(out, len, "%s/%s", folder, name);
}

/* ---- save ---- */

/* Writes one home's bytes: a host home's straight from it into the write buffers, any other
 * through the fp32 staging buffer. */
static zt_status write_home(zt_runtime *rt, zt_ckpt_writer *w, const zt_home *h)
{
    if (h->kind == ZT_TIER_HOST)
        return zt_ckpt_writer_put(w, h->ptr, h->bytes);
    zt_status st = zt_home_load(&rt->tiers.homes, h, rt->opt.staging, &rt->err);
    return st == ZT_OK ? zt_ckpt_writer_put(w, rt->opt.staging, h->bytes) : st;
}

/* Rank 0's bytes of its file, the part of a save or load a terminal's progress line shows. */
static uint64_t shard_file_bytes(const zt_runtime *rt)
{
    uint64_t n = 0;
    for (int i = 0; i < rt->reg.n_layers; i++)
        n += 3 * (uint64_t)rt->reg.layers[i].shard_numel * sizeof(float);
    return n;
}

/* pieces: per layer the CRC-32s of its master, m and v parts (zt_ckpt_writer_mark). */
static zt_status write_layers(zt_runtime *rt, zt_ckpt_writer *w, int64_t *pieces)
{
    zt_status st = ZT_OK;
    zt_progress pr; /* rank 0's file, on a terminal: a save of minutes says how far it is */
    zt_progress_begin(&pr, stderr, "checkpoint save (rank 0)", shard_file_bytes(rt),
                      rt->dist.rank == 0);
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        const zt_home *parts[3] = {&L->master, &L->exp_avg, &L->exp_avg_sq};
        for (int j = 0; st == ZT_OK && j < 3; j++) {
            st = write_home(rt, w, parts[j]);
            pieces[3 * i + j] = zt_ckpt_writer_mark(w);
        }
        zt_progress_add(&pr, 3 * (uint64_t)L->shard_numel * sizeof(float));
        zt_test_crash_point("shard layer written");
    }
    zt_progress_end(&pr, st == ZT_OK);
    return st;
}

/* This rank's shard file, written and synced to the disk. mine: its bytes, its CRC-32, then
 * its pieces' CRC-32s (the header's, then each layer's master, m and v: ZT_CKPT_PIECES). */
static zt_status write_shard_file(zt_runtime *rt, const char *folder, int64_t *mine)
{
    char path[ZT_PATH_MAX + 240];
    shard_path(folder, rt, path, sizeof path);
    zt_ckpt_writer *w = NULL;
    zt_status st = zt_ckpt_writer_open(path, rt->cfg.io_engine, &w, &rt->err);
    if (st != ZT_OK)
        return st;
    zt_ckpt_state s = current_state(rt);
    zt_shard_header h = {ZT_CKPT_MAGIC,
                         ZT_CKPT_VERSION,
                         (uint32_t)rt->dist.rank,
                         (uint32_t)rt->dist.world,
                         (uint32_t)rt->reg.n_layers,
                         (uint64_t)s.step,
                         s.loss_scale,
                         s.good_steps,
                         s.hysteresis_left,
                         s.fp16};
    st = zt_ckpt_writer_put(w, &h, sizeof h);
    mine[2] = zt_ckpt_writer_mark(w);
    if (st == ZT_OK)
        st = write_layers(rt, w, mine + 3);
    if (st != ZT_OK) {
        zt_ckpt_writer_discard(w);
        return st;
    }
    uint32_t c = 0;
    uint64_t bytes = 0;
    st = zt_ckpt_writer_finish(w, &bytes, &c);
    mine[0] = (int64_t)bytes, mine[1] = (int64_t)c;
    zt_test_crash_point("shard file synced");
    return st;
}

/* Every rank writes into the folder rank 0 made, so every rank must see it: a folder on a
 * disk of each node's own (node-local storage) would fail each rank's file with ENOENT and
 * say nothing of the cause. The ranks exchange whether they see it, and every rank names the
 * ones that do not (ZT_ERR_IO) before any file is written; rank 0 then removes the folder. */
static zt_status check_visible(zt_runtime *rt, const char *root, const char *name)
{
    char partial[ZT_PATH_MAX + 160];
    zt_ckpt_partial_path(root, name, partial, sizeof partial);
    struct stat sb;
    int64_t mine = stat(partial, &sb) == 0 && S_ISDIR(sb.st_mode);
    int64_t *seen = calloc((size_t)rt->dist.world, sizeof *seen);
    if (!seen)
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory saving a checkpoint");
    zt_status st = zt_comm_allgather_sync(rt->dist.comm, &mine, seen, 1, ZT_COMM_I64, &rt->err);
    char blind[256] = "";
    int n_blind = 0;
    for (int r = 0; st == ZT_OK && r < rt->dist.world; r++)
        if (!seen[r] && n_blind++ < 8)
            snprintf(blind + strlen(blind), sizeof blind - strlen(blind), "%s%d",
                     n_blind > 1 ? ", " : "", r);
    free(seen);
    if (st != ZT_OK || n_blind == 0)
        return st;
    return ZT_ERR(&rt->err, ZT_ERR_IO,
                  "checkpoint save of step %lld: rank%s %s%s of %d do%s not see the folder '%s' "
                  "that rank 0 created: '%s' is not one folder shared by every rank (a disk of "
                  "each node's own?). Give every rank a checkpoint path on a filesystem all nodes "
                  "mount (NFS, Lustre, ...); nothing was written and the previous checkpoint "
                  "stays the latest",
                  (long long)rt->train.steps, n_blind > 1 ? "s" : "", blind,
                  n_blind > 8 ? " and more" : "", rt->dist.world, n_blind > 1 ? "" : "es", partial,
                  root);
}

/* Rank 0 prepares the folder; every rank learns its name and checks that it sees it. */
static zt_status begin_save(zt_runtime *rt, const char *root, char *name)
{
    zt_status st = zt_rt_drain_optimizer(rt); /* the optimizer state on disk is complete */
    if (st == ZT_OK && rt->dist.rank == 0)
        st = zt_ckpt_begin(root, rt->train.steps,
                           rt->cfg.checkpoint_reuse_files ? rt->dist.world : 0, name, &rt->err);
    st = zt_comm_agree(rt->dist.comm, st, "checkpoint save (folder)", &rt->err);
    if (st != ZT_OK || rt->dist.world == 1)
        return st;
    st = zt_comm_broadcast_sync(rt->dist.comm, name, ZT_CKPT_NAME_MAX, ZT_COMM_U8, 0, &rt->err);
    if (st == ZT_OK)
        st = check_visible(rt, root, name);
    if (st != ZT_OK && rt->dist.rank == 0 && name[0])
        zt_ckpt_abort(root, name);
    return st;
}

/* Every rank writes its shard; rank 0 writes the manifest and commits the folder. Once every
 * rank's shard file is written (the ranks exchange their statuses, then the files' sizes and
 * CRCs), only rank 0 decides: *verdict_due says this rank got that far (rank 0 then tells
 * the others whether it committed). *unknown: this rank sent its OK but lost contact before
 * that point (a network split may let rank 0 get through and commit). */
static zt_status write_checkpoint(zt_runtime *rt, const char *root, const char *name,
                                  int *verdict_due, int *unknown)
{
    char folder[ZT_PATH_MAX + 160];
    zt_ckpt_partial_path(root, name, folder, sizeof folder);
    size_t each = ZT_CKPT_FILE_FIELDS(rt->reg.n_layers);
    int64_t *mine = calloc(each, sizeof *mine);
    int64_t *files = calloc(each * (size_t)rt->dist.world, sizeof *files);
    zt_status st = mine && files
                       ? write_shard_file(rt, folder, mine)
                       : ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory saving a checkpoint");
    /* Rank 0 may commit once it has seen every status OK: a rank that sent OK but did not
     * get through the exchange itself (a network split) cannot know whether it did. */
    int sent_ok = st == ZT_OK, exchanged = 0;
    zt_status agreed = zt_comm_agree_exchanged(rt->dist.comm, st, "checkpoint save (shard files)",
                                               &exchanged, &rt->err);
    st = agreed;
    if (st == ZT_OK)
        st = zt_comm_allgather_sync(rt->dist.comm, mine, files, each, ZT_COMM_I64, &rt->err);
    *unknown = rt->dist.rank != 0 && sent_ok && (!exchanged || (agreed == ZT_OK && st != ZT_OK));
    *verdict_due = st == ZT_OK;
    zt_ckpt_state s = current_state(rt);
    if (st == ZT_OK && rt->dist.rank == 0)
        st = zt_manifest_write(rt, &s, files, folder, &rt->err);
    zt_test_crash_point("manifest written");
    if (st == ZT_OK && rt->dist.rank == 0)
        st = zt_ckpt_commit(root, name, rt->cfg.checkpoint_keep, rt->cfg.checkpoint_reuse_files,
                            &rt->err);
    free(files), free(mine);
    return st;
}

/* A rank that cannot know whether the save was committed says so, and how to find out. */
static zt_status outcome_unknown(zt_runtime *rt, const char *root, const char *name)
{
    char why[ZT_ERROR_MSG_MAX];
    snprintf(why, sizeof why, "%s", rt->err.msg);
    return ZT_ERR(&rt->err, ZT_ERR_COMM,
                  "checkpoint save of step %lld: rank %d cannot know whether it was committed "
                  "(it lost contact with rank 0 after writing its shard: %s). Rank 0 commits a "
                  "save by writing its name first in '%s/latest': if that file's first line is "
                  "'%s', this save was committed, else the previous checkpoint is still the "
                  "latest; either loads with zt_checkpoint_load",
                  (long long)rt->train.steps, rt->dist.rank, why, root, name);
}

/* Rank 0 tells the others whether it committed the save (its status st). Returns what this
 * rank knows: ZT_OK for committed, or why not; the outcome unknown where rank 0's word did not
 * arrive. */
static zt_status verdict(zt_runtime *rt, const char *root, const char *name, zt_status st)
{
    int64_t word = st;
    zt_test_delay_point("checkpoint verdict");
    zt_error comm_err = {0};
    zt_status sent = zt_comm_broadcast_sync(rt->dist.comm, &word, 1, ZT_COMM_I64, 0, &comm_err);
    if (rt->dist.rank == 0) {
        if (st == ZT_OK && sent != ZT_OK)
            return ZT_ERR(&rt->err, ZT_ERR_COMM,
                          "checkpoint save of step %lld: '%s/%s' was committed ('%s/latest' "
                          "names it first), but the other ranks could not be told: %s",
                          (long long)rt->train.steps, root, name, root, comm_err.msg);
        return st;
    }
    if (sent != ZT_OK) {
        rt->err = comm_err;
        return outcome_unknown(rt, root, name);
    }
    if (word != ZT_OK)
        return ZT_ERR(&rt->err, ZT_ERR_COMM,
                      "checkpoint save failed on rank 0 (status %lld, %s; see that rank's "
                      "message); the previous checkpoint stays the latest",
                      (long long)word, zt_status_string((zt_status)word));
    return ZT_OK;
}

zt_status zt_rt_checkpoint_save(zt_runtime *rt, const char *root)
{
    if (strlen(root) >= ZT_PATH_MAX)
        return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT, "checkpoint path longer than %d bytes",
                      ZT_PATH_MAX - 1);
    char name[ZT_CKPT_NAME_MAX] = "";
    double t0 = zt_now_s();
    zt_status st = begin_save(rt, root, name);
    if (st != ZT_OK)
        return st;
    int verdict_due = 0, unknown = 0;
    st = write_checkpoint(rt, root, name, &verdict_due, &unknown);
    zt_trace_span("checkpoint", t0, "save %s", name);
    if (unknown)
        st = outcome_unknown(rt, root, name);
    else if (verdict_due && rt->dist.world > 1)
        st = verdict(rt, root, name, st);
    if (st != ZT_OK && rt->dist.rank == 0)
        zt_ckpt_abort(root, name); /* never a committed one: the previous one stays the latest */
    if (st == ZT_OK)
        ZT_LOGI("checkpoint", "saved step %lld to %s/%s", (long long)rt->train.steps, root, name);
    return st;
}

/* ---- load ---- */

/* The load's threads: each keeps one 8 MiB read in flight (zt_ckpt_read_into), then they
 * restore the host layers together. Blocked on the disk most of the time, so more than the
 * cores. */
enum { LOAD_THREADS = 4 };

/* Reads the file's next fp32 shard of layer L into rt->opt.staging. */
static zt_status read_shard(zt_runtime *rt, zt_ckpt_reader *r, const zt_layer *L)
{
    return zt_ckpt_reader_get(r, rt->opt.staging, (size_t)L->shard_numel * sizeof(float));
}

/* Per layer the file holds master, m, v; the working-dtype parameters follow the master. The
 * file was checked whole before (zt_ckpt_check_file). */
static zt_status restore_layers(zt_runtime *rt, const char *path, int version)
{
    zt_ckpt_reader *r = NULL;
    uint64_t size = 0;
    zt_status st = zt_ckpt_reader_open(path, rt->cfg.io_engine, &size, &r, &rt->err);
    if (st == ZT_OK)
        st = zt_ckpt_reader_get(r, NULL, zt_ckpt_header_bytes(version));
    zt_progress pr;
    zt_progress_begin(&pr, stderr, "checkpoint load (rank 0)", shard_file_bytes(rt),
                      rt->dist.rank == 0);
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        st = read_shard(rt, r, L);
        if (st == ZT_OK)
            st = zt_layer_set_master(rt, L, rt->opt.staging);
        if (st == ZT_OK)
            st = read_shard(rt, r, L);
        if (st == ZT_OK)
            st = zt_home_store(&rt->tiers.homes, &L->exp_avg, rt->opt.staging, &rt->err);
        if (st == ZT_OK)
            st = read_shard(rt, r, L);
        if (st == ZT_OK)
            st = zt_home_store(&rt->tiers.homes, &L->exp_avg_sq, rt->opt.staging, &rt->err);
        zt_progress_add(&pr, 3 * (uint64_t)L->shard_numel * sizeof(float));
    }
    zt_progress_end(&pr, st == ZT_OK);
    zt_ckpt_reader_close(r);
    return st;
}

/* src where a host home takes it as it is, else a copy in the aligned staging buffer (the
 * NVMe tier's O_DIRECT and the device's copies need it). */
static const float *staged(zt_runtime *rt, int host, const float *src, size_t n)
{
    if (host)
        return src;
    memcpy(rt->opt.staging, src, n * sizeof(float));
    return rt->opt.staging;
}

/* Every layer's byte offset in this run's own file (and the end): n_layers + 1 values. */
static uint64_t *layer_offsets(const zt_runtime *rt, int version)
{
    uint64_t *at = malloc(((size_t)rt->reg.n_layers + 1) * sizeof *at);
    if (!at)
        return NULL;
    at[0] = zt_ckpt_header_bytes(version);
    for (int i = 0; i < rt->reg.n_layers; i++)
        at[i + 1] = at[i] + 3 * (uint64_t)rt->reg.layers[i].shard_numel * sizeof(float);
    return at;
}

/* A layer whose master, m, v and working parameters all live in host memory: restored by
 * plain copies, any number of layers at once. */
static int state_in_host(const zt_layer *L)
{
    return L->master.kind == ZT_TIER_HOST && L->exp_avg.kind == ZT_TIER_HOST &&
           L->exp_avg_sq.kind == ZT_TIER_HOST;
}

static int params_in_host(const zt_layer *L)
{
    return L->master.shared || L->param_home.kind == ZT_TIER_HOST;
}

static int host_layer(const zt_layer *L) { return state_in_host(L) && params_in_host(L); }

/* A host layer from its part of the image (p: master, m, v), the working parameters converted
 * straight into their home (zt_layer_set_master's staging buffer is one for all threads). */
static void restore_host_layer(zt_runtime *rt, zt_layer *L, const float *p)
{
    size_t n = (size_t)L->shard_numel;
    zt_homes *h = &rt->tiers.homes;
    (void)zt_home_store(h, &L->master, p, &rt->err); /* host homes: a memcpy, cannot fail */
    if (!L->master.shared && rt->reg.dtype == ZT_F32)
        (void)zt_home_store(h, &L->param_home, p, &rt->err);
    else if (!L->master.shared)
        zt_convert_array(L->param_home.ptr, rt->reg.dtype, p, ZT_F32, n);
    (void)zt_home_store(h, &L->exp_avg, p + n, &rt->err);
    (void)zt_home_store(h, &L->exp_avg_sq, p + 2 * n, &rt->err);
}

/* Gives the image's whole pages in [p, p + bytes) back to the kernel: freed by the threads
 * that restored them (unmapping 1.5 GB at the end took 0.12 s of one thread). */
static void release_pages(const void *p, size_t bytes)
{
    uintptr_t lo = ((uintptr_t)p + 4095) / 4096 * 4096, hi = ((uintptr_t)p + bytes) / 4096 * 4096;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* a hint: a failure costs time only */
}

typedef struct restoring {
    zt_runtime *rt;
    const unsigned char *image;
    const uint64_t *at; /* per layer: its part's byte offset in the image */
} restoring;

static void restore_host_layers(void *ctx, int64_t begin, int64_t end, int worker)
{
    restoring *g = ctx;
    (void)worker;
    for (int64_t i = begin; i < end; i++) {
        zt_layer *L = &g->rt->reg.layers[i];
        const float *p = (const float *)(const void *)(g->image + g->at[i]);
        if (!host_layer(L))
            continue;
        restore_host_layer(g->rt, L, p);
        release_pages(p, 3 * (size_t)L->shard_numel * sizeof(float));
    }
}

/* The same from the file's image in memory (zt_ckpt_read_file: read and checked in one pass):
 * the host layers on pool's threads, then the others (through the one staging buffer). */
static zt_status restore_image(zt_runtime *rt, zt_threadpool *pool, const unsigned char *image,
                               int version)
{
    uint64_t *at = layer_offsets(rt, version);
    if (!at)
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory loading a checkpoint");
    restoring g = {rt, image, at};
    zt_threadpool_run(pool, rt->reg.n_layers, 1, restore_host_layers, &g);
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        const float *p = (const float *)(const void *)(image + at[i]);
        size_t n = (size_t)L->shard_numel;
        if (host_layer(L))
            continue;
        int host = L->master.kind == ZT_TIER_HOST && L->param_home.kind == ZT_TIER_HOST;
        st = zt_layer_set_master(rt, L, staged(rt, host, p, n));
        if (st == ZT_OK)
            st = zt_home_store(&rt->tiers.homes, &L->exp_avg,
                               staged(rt, L->exp_avg.kind == ZT_TIER_HOST, p + n, n), &rt->err);
        if (st == ZT_OK)
            st = zt_home_store(&rt->tiers.homes, &L->exp_avg_sq,
                               staged(rt, L->exp_avg_sq.kind == ZT_TIER_HOST, p + 2 * n, n),
                               &rt->err);
    }
    free(at);
    return st;
}

/* The loss scale a resumed run continues with: the saved one where both runs scale their
 * loss dynamically, else this run's configured start. */
static void restore_state(zt_runtime *rt, const zt_ckpt_state *s)
{
    rt->train.steps = s->step;
    if (rt->cfg.fp16 && rt->cfg.fp16_loss_scale == 0 && s->fp16 != 0) {
        rt->train.loss_scale = s->loss_scale;
        rt->train.good_steps = s->good_steps;
        rt->train.hysteresis_left = s->hysteresis_left;
    } else if (s->fp16 > 0 && !rt->cfg.fp16) {
        ZT_LOGI("checkpoint",
                "the checkpoint's fp16 loss scale %g is not used: this run "
                "does not scale its loss",
                (double)s->loss_scale);
    }
}

/* A loaded checkpoint starts with no accumulated gradients. The host sums are not zeroed:
 * with accum_count 0 the next accumulation overwrites them and a layer that gets none is
 * zeroed at the step (as after every step; a resume's first touch of their pages is then
 * its first backward's, not the load's). */
static zt_status clear_accumulators(zt_runtime *rt)
{
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        L->local_count = 0; /* a stage-1 layer's own sums start again too */
        if (L->opt_device) {
            st = zt_dev_opt_zero_acc(rt, L);
        } else {
            L->accum_count = 0;
            L->norm_valid = 0;
        }
    }
    return st;
}

/* A rank file read whole into memory, checked as it lands, rather than checked in one pass
 * and restored in a second: where it takes at most a quarter of the memory available (the
 * other ranks of the node read theirs too), else NULL (two passes). */
static unsigned char *image_alloc(uint64_t bytes)
{
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0 || bytes > (uint64_t)pages * (uint64_t)page / 4)
        return NULL;
    return aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096); /* O_DIRECT reads land */
}

/* Where a load need not keep anything whole should its checks fail, and every master, m and v
 * lives in host memory: the pieces of the file go straight into their homes as they land (no
 * image); the working parameters follow the master there where they are in host memory too,
 * else once the file is read (params_from_master). */
static int restore_as_read(const zt_runtime *rt)
{
    for (int i = 0; i < rt->reg.n_layers; i++)
        if (!state_in_host(&rt->reg.layers[i]))
            return 0;
    return rt->load_pending; /* zt_runtime_expect_load: nothing to keep, nothing may read them */
}

typedef struct scattering {
    zt_runtime *rt;
    const uint64_t *at;
} scattering;

/* bytes [a, b) of layer L's state s (0 master, 1 m, 2 v), at byte `from` of that state. */
static void scatter_state(zt_runtime *rt, zt_layer *L, int s, uint64_t from, const void *src,
                          size_t len)
{
    zt_home *h = s == 0 ? &L->master : s == 1 ? &L->exp_avg : &L->exp_avg_sq;
    memcpy((char *)h->ptr + from, src, len);
    if (s != 0 || L->master.shared || L->param_home.kind != ZT_TIER_HOST)
        return;
    size_t esz = zt_dtype_size(rt->reg.dtype); /* pieces end on whole floats: 8 MiB chunks */
    zt_convert_array((char *)L->param_home.ptr + from / sizeof(float) * esz, rt->reg.dtype, src,
                     ZT_F32, len / sizeof(float));
}

/* zt_ckpt_read_file_each's callback: the file's bytes [offset, offset + len) into the homes
 * of the layers they belong to (the header is the checks'). */
static void scatter(void *ctx, uint64_t offset, const unsigned char *bytes, size_t len)
{
    scattering *g = ctx;
    int lo = 0, hi = g->rt->reg.n_layers; /* the first layer ending after offset */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (g->at[mid + 1] <= offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t end = offset + len;
    for (int i = lo; i < g->rt->reg.n_layers && g->at[i] < end; i++) {
        zt_layer *L = &g->rt->reg.layers[i];
        uint64_t part = (uint64_t)L->shard_numel * sizeof(float);
        for (int s = 0; s < 3; s++) {
            uint64_t a = g->at[i] + s * part, b = a + part;
            uint64_t from = a > offset ? a : offset, to = b < end ? b : end;
            if (from < to)
                scatter_state(g->rt, L, s, from - a, bytes + (from - offset), (size_t)(to - from));
        }
    }
}

/* After the pieces went straight into the homes: the working parameters from the master, all
 * of them (a resharded load's pieces) or those not in host memory (a device's; the others
 * were converted as the file's pieces landed). */
static zt_status params_from_master(zt_runtime *rt, int all)
{
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        if (all || !params_in_host(L))
            st = zt_layer_set_master(rt, L, L->master.ptr);
    }
    return st;
}

/* This rank's own file where the layouts agree: read whole into *image and checked there (one
 * pass); or, where restore_as_read, straight into the homes (*restored set); or checked whole
 * by the CRC pass where it does not fit (*image NULL: restored by a second pass). */
static zt_status check_own_file(zt_runtime *rt, zt_threadpool *pool, const char *folder,
                                const zt_ckpt_expect *x, const zt_manifest *m,
                                unsigned char **image, int *restored)
{
    char path[ZT_PATH_MAX + 240];
    shard_path(folder, rt, path, sizeof path);
    uint64_t want = zt_ckpt_file_bytes(x, m);
    uint64_t *at = restore_as_read(rt) ? layer_offsets(rt, m->version) : NULL;
    *image = at ? NULL : image_alloc(want);
    if (!at && !*image)
        return zt_ckpt_check_file(path, m, rt->dist.rank, want, rt->cfg.io_engine, &rt->err);
    zt_progress pr; /* rank 0's file, on a terminal: the one pass that reads it */
    zt_progress_begin(&pr, stderr, "checkpoint load (rank 0)", want, rt->dist.rank == 0);
    scattering g = {rt, at};
    zt_status st =
        at ? zt_ckpt_read_file_each(path, m, rt->dist.rank, want, pool, scatter, &g, &pr, &rt->err)
           : zt_ckpt_read_file(path, m, rt->dist.rank, want, pool, *image, &pr, &rt->err);
    zt_progress_end(&pr, st == ZT_OK);
    *restored = at != NULL;
    free(at);
    return st;
}

/* The bytes of this run's own file: the header and every layer's master, m and v part. */
static uint64_t own_file_bytes(const zt_runtime *rt, int version)
{
    uint64_t n = zt_ckpt_header_bytes(version);
    for (int i = 0; i < rt->reg.n_layers; i++)
        n += 3 * (uint64_t)rt->reg.layers[i].shard_numel * sizeof(float);
    return n;
}

/* Where the files split the layers otherwise: every rank reads its pieces into *image once,
 * the ranks check every file from the pieces' CRCs (zt_ckpt_reshard_read); where some rank's
 * image does not fit (*image NULL on all), each checks its share of the files whole and the
 * pieces are restored by a second pass. A collective: every rank calls it. */
static zt_status reshard_checked(zt_runtime *rt, const char *folder, const zt_ckpt_expect *x,
                                 const zt_manifest *m, unsigned char **image, int *restored)
{
    *restored = restore_as_read(rt); /* the pieces straight into the homes: no image */
    *image = *restored ? NULL : image_alloc(own_file_bytes(rt, m->version));
    int64_t lacks = !*restored && *image == NULL; /* the same path on every rank */
    zt_status st =
        zt_comm_allreduce_sync(rt->dist.comm, &lacks, 1, ZT_COMM_I64, ZT_REDUCE_MAX, &rt->err);
    if (st != ZT_OK || lacks) {
        free(*image);
        *image = NULL;
        *restored = 0;
    }
    if (st == ZT_OK && !lacks)
        return zt_ckpt_reshard_read(rt, folder, m, *image);
    if (st == ZT_OK)
        st = zt_ckpt_reshard_check(rt, folder, m, zt_ckpt_file_bytes(x, m));
    return st;
}

/* Every rank checks the manifest and its share of the files (zt_ckpt_validate, as `ztier
 * checkpoint inspect` does; its own file, where the layouts agree, as it reads it into
 * *image; where they do not, the pieces it reads, zt_ckpt_reshard_read); nothing changes
 * unless all of them pass. *reshard: the files split the layers otherwise than this run. */
static zt_status open_checked(zt_runtime *rt, zt_threadpool *pool, const char *dir, char *folder,
                              size_t len, zt_manifest *m, int *reshard, unsigned char **image,
                              int *restored)
{
    /* no write-back may land after the restore; a failed one does not matter any more */
    zt_nvme_step_drain(rt->opt.nvme_step, NULL);
    zt_ckpt_expect x = {0};
    zt_status st = zt_ckpt_resolve(dir, folder, len, &rt->err);
    if (st == ZT_OK)
        st = zt_ckpt_expect_runtime(rt, &x, &rt->err);
    if (st == ZT_OK)
        st = zt_ckpt_validate(folder, &x, ZT_CKPT_FILES_OTHERS, rt->cfg.io_engine, m, &rt->err);
    *reshard = st == ZT_OK && zt_manifest_reshards(&x, m);
    if (st == ZT_OK && !*reshard)
        st = check_own_file(rt, pool, folder, &x, m, image, restored);
    /* a resharded load's reads and checks are collectives: every rank enters them or none */
    st = zt_comm_agree(rt->dist.comm, st, "checkpoint load (checks)", &rt->err);
    if (st == ZT_OK && *reshard)
        st = zt_comm_agree(rt->dist.comm, reshard_checked(rt, folder, &x, m, image, restored),
                           "checkpoint load (checks)", &rt->err);
    zt_ckpt_expect_free(&x);
    return st;
}

/* The loaded checkpoint's meta values, then the ones set before that it lacks while there is
 * room (a warning names each that is not). */
static void meta_merge(zt_ckpt_meta *to, const zt_ckpt_meta *loaded)
{
    zt_ckpt_meta set = *to;
    *to = *loaded;
    for (int k = 0; k < set.n; k++) {
        int i = 0;
        while (i < to->n && strcmp(to->key[i], set.key[k]) != 0)
            i++;
        if (i < to->n)
            continue;
        if (to->n == ZT_CKPT_META_MAX) {
            ZT_LOGW("checkpoint",
                    "meta value '%s' set before the load is dropped: the loaded checkpoint holds "
                    "%d values, the most a runtime keeps",
                    set.key[k], ZT_CKPT_META_MAX);
            continue;
        }
        memcpy(to->key[to->n], set.key[k], ZT_CKPT_META_KEY);
        to->value[to->n++] = set.value[k];
    }
}

zt_status zt_rt_checkpoint_load(zt_runtime *rt, const char *dir)
{
    char folder[ZT_PATH_MAX + 160] = "", path[ZT_PATH_MAX + 240];
    zt_manifest m = {0};
    int reshard = 0, restored = 0;
    unsigned char *image = NULL;
    double t0 = zt_now_s();
    uint64_t read0 = zt_ckpt_reader_bytes();
    /* no reduction still to land in the accumulators the load clears, no caller stream
     * still reading parameters it replaces */
    zt_status st = zt_rt_finish_reductions(rt);
    /* an overlapped step in progress ends first (if it fails, the load restores the state) */
    zt_rt_step_complete(rt);
    zt_threadpool *pool = NULL; /* the load's reads in flight and its restore's threads */
    if (st == ZT_OK)
        st = zt_threadpool_create(LOAD_THREADS, -1, &pool, &rt->err);
    if (st == ZT_OK)
        st = open_checked(rt, pool, dir, folder, sizeof folder, &m, &reshard, &image, &restored);
    if (st == ZT_OK && m.zero_stage >= 0 && m.zero_stage != rt->cfg.stage)
        ZT_LOGI("checkpoint",
                "'%s' was saved at ZeRO stage %d and loads into stage %d: the same state of "
                "every parameter",
                folder, m.zero_stage, rt->cfg.stage);
    if (st == ZT_OK && reshard)
        ZT_LOGI("checkpoint",
                "'%s' was saved by %d ranks and this run has %d (or lays layers out otherwise): "
                "each rank reads its parts from the files that hold them",
                folder, m.world, rt->dist.world);
    if (st == ZT_OK) {
        zt_prefetcher_invalidate(rt->prefetch);
        shard_path(folder, rt, path, sizeof path);
        st = restored  ? params_from_master(rt, reshard)
             : image   ? restore_image(rt, pool, image, m.version)
             : reshard ? zt_ckpt_reshard_restore(rt, folder, &m)
                       : restore_layers(rt, path, m.version);
    }
    free(image);
    zt_threadpool_destroy(pool);
    zt_manifest_free(&m);
    if (st == ZT_OK) {
        restore_state(rt, &m.state);
        meta_merge(&rt->meta, &m.meta);
        st = clear_accumulators(rt);
    }
    if (st == ZT_OK) { /* the state is consistent again */
        zt_error_clear(&rt->async_err);
        rt->train.step_cleared = rt->reg.n_layers;
        rt->opt.host_step_pending = 0;
    }
    zt_trace_span("checkpoint", t0, "load %s", folder);
    st = zt_comm_agree(rt->dist.comm, st, "checkpoint load (shard files)", &rt->err);
    if (st == ZT_OK) /* the bytes asked of the disk: how often each was read (reshard.sh) */
        ZT_LOGI("checkpoint", "resumed step %lld from %s (this rank read %llu bytes of its files)",
                (long long)rt->train.steps, folder,
                (unsigned long long)(zt_ckpt_reader_bytes() - read0));
    return st;
}

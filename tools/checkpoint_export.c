/* SPDX-License-Identifier: MIT */
/* `ztier checkpoint export DIR --format safetensors|llmc [--dtype fp32|bf16] [--out F]`: one
 * model file from a checkpoint's fp32 master weights, whatever number of ranks saved it.
 * The checkpoint is checked as a load checks it (zt_ckpt_validate: the manifest, the model
 * where it is the GPT-2 trainer's, every rank file's size first; each file's CRC-32 and
 * header once it has been read). Every file is read once (ckpt_stream: threads reading
 * pieces in parallel, the CRC computed on the bytes read) and each piece of master values
 * is written at once where its parameters lie in the file (pwrite at offsets known from the
 * header), so the memory is the threads' pieces, not the model. The file is written as
 * F.partial beside F, synced and renamed only after every check passed: F is either the
 * whole export or untouched.
 *   safetensors: names and shapes of the manifest, dtype F32 or BF16, the step in
 *                __metadata__ (loadable by the `safetensors` Python package).
 *   llmc:        llm.c's GPT-2 model file (version 3 fp32, 5 bf16), for checkpoints of the
 *                GPT-2 trainer (its shape from the manifest's gpt2.* meta values). */
#include "core/convert.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/time.h"
#include "tools/bench_common.h"
#include "tools/checkpoint_read.h"
#include "tools/commands.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct export_opts {
    const char *dir, *format, *dtype, *out;
    int bf16, llmc;
} export_opts;

typedef struct exporter {
    export_opts o;
    ckpt_view v;
    int *order; /* the parameters in the file's order */
    int n;
    uint64_t *out_at; /* per parameter: where its data starts in the export */
    int *first;       /* per layer: its first parameter (a layer's are consecutive) */
    uint64_t data_at; /* where the data starts: after the header */
    size_t chunk;     /* the read pieces */
    int fd;           /* the .partial file */
    char tmp[PATH_MAX + 16];
    uint64_t total;
    zt_progress pr;
    double t0;
    char why[2 * PATH_MAX + 512];
} exporter;

static int export_usage(void)
{
    fprintf(stderr, "usage: ztier checkpoint export DIR --format safetensors|llmc "
                    "[--dtype fp32|bf16] [--out FILE]\n");
    return 2;
}

static int parse(int argc, char **argv, export_opts *o)
{
    *o = (export_opts){.dtype = "fp32"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        const char **s = !strcmp(a, "--format")  ? &o->format
                         : !strcmp(a, "--dtype") ? &o->dtype
                         : !strcmp(a, "--out")   ? &o->out
                                                 : NULL;
        if (s && val)
            *s = val, i++;
        else if (!s && a[0] != '-' && !o->dir)
            o->dir = a;
        else
            return export_usage();
    }
    if (!o->dir || !o->format || (strcmp(o->format, "safetensors") && strcmp(o->format, "llmc")) ||
        (strcmp(o->dtype, "fp32") && strcmp(o->dtype, "bf16")))
        return export_usage();
    o->bf16 = !strcmp(o->dtype, "bf16");
    o->llmc = !strcmp(o->format, "llmc");
    return 0;
}

/* ---- the file's parameter order ---- */

static int find_param(const ckpt_view *v, const char *name)
{
    for (int p = 0; p < v->n_params; p++)
        if (!strcmp(v->params[p].name, name))
            return p;
    return -1;
}

/* llm.c's order: wte, wpe, each block tensor for all layers in turn, ln_f. The block
 * tensors are the first block's, in its registration order. */
static int llmc_order(exporter *e, const int64_t shape[8])
{
    const ckpt_view *v = &e->v;
    int L = (int)shape[4], p0 = find_param(v, "h.0.ln_1.weight");
    int per_block = p0 < 0 ? 0 : v->n_params - p0 - 2;
    per_block = L > 0 ? per_block / L : 0;
    if (find_param(v, "wte") != 0 || find_param(v, "wpe") != 1 || p0 != 2 || per_block < 1 ||
        v->n_params != 4 + L * per_block)
        return snprintf(e->why, sizeof e->why,
                        "%s does not hold the GPT-2 trainer's parameters (wte, wpe, h.0..h.%d, "
                        "ln_f): export it as safetensors",
                        v->folder, L - 1),
               -1;
    if (v->params[0].numel != shape[7] * shape[6] || v->params[1].numel != shape[2] * shape[6])
        return snprintf(e->why, sizeof e->why,
                        "%s: wte or wpe does not have the shape its gpt2.* meta values give: the "
                        "manifest is damaged",
                        v->folder),
               -1;
    e->order[e->n++] = 0, e->order[e->n++] = 1;
    for (int k = 0; k < per_block; k++) {
        const char *suffix = v->params[p0 + k].name + strlen("h.0.");
        for (int l = 0; l < L; l++) {
            char name[128];
            snprintf(name, sizeof name, "h.%d.%s", l, suffix);
            int p = find_param(v, name);
            if (p < 0)
                return snprintf(e->why, sizeof e->why,
                                "%s has no parameter %s: not the GPT-2 trainer's model", v->folder,
                                name),
                       -1;
            e->order[e->n++] = p;
        }
    }
    e->order[e->n++] = v->n_params - 2, e->order[e->n++] = v->n_params - 1;
    return 0;
}

/* llm.c's header: magic, version, max_seq, vocab, layers, heads, channels, padded vocab. */
static int llmc_shape(exporter *e, int64_t shape[8])
{
    static const char *keys[] = {"gpt2.max_seq", "gpt2.vocab",    "gpt2.layers",
                                 "gpt2.heads",   "gpt2.channels", "gpt2.padded_vocab"};
    shape[0] = 20240326, shape[1] = e->o.bf16 ? 5 : 3;
    for (int i = 0; i < 6; i++)
        if (ckpt_meta(&e->v, keys[i], &shape[2 + i]) != 0 || shape[2 + i] < 1 ||
            shape[2 + i] > INT32_MAX)
            return snprintf(e->why, sizeof e->why,
                            "%s does not record %s (an llm.c file needs the GPT-2 trainer's "
                            "shape, which its checkpoints record since they carry meta "
                            "values): export it as safetensors",
                            e->v.folder, keys[i]),
                   -1;
    return 0;
}

/* ---- writing ---- */

static int write_failed(const char *tmp, ssize_t w, char *why, size_t len);

static int write_all(exporter *e, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(e->fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return write_failed(e->tmp, w, e->why, sizeof e->why);
        c += w, n -= (size_t)w;
    }
    return 0;
}

static int safetensors_header(exporter *e)
{
    json_t *h = json_object();
    char step[32];
    snprintf(step, sizeof step, "%lld", (long long)e->v.step);
    json_object_set_new(h, "__metadata__",
                        json_pack("{s:s, s:s, s:s}", "format", "pt", "ztier_step", step,
                                  "ztier_checkpoint", e->v.folder));
    uint64_t at = 0, esize = e->o.bf16 ? 2 : 4;
    for (int i = 0; i < e->n; i++) {
        const ckpt_param *p = &e->v.params[e->order[i]];
        json_t *shape = json_array();
        for (int d = 0; d < p->ndim; d++)
            json_array_append_new(shape, json_integer((json_int_t)p->shape[d]));
        uint64_t bytes = (uint64_t)p->numel * esize;
        json_object_set_new(h, p->name,
                            json_pack("{s:s, s:o, s:[I,I]}", "dtype", e->o.bf16 ? "BF16" : "F32",
                                      "shape", shape, "data_offsets", (json_int_t)at,
                                      (json_int_t)(at + bytes)));
        at += bytes;
    }
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!text)
        return snprintf(e->why, sizeof e->why, "out of memory"), -1;
    size_t n = strlen(text), padded = (n + 7) / 8 * 8; /* data 8-byte aligned */
    uint64_t hlen = padded;
    int rc =
        write_all(e, &hlen, 8) || write_all(e, text, n) || write_all(e, "        ", padded - n);
    free(text);
    return rc ? -1 : 0;
}

static int llmc_header(exporter *e, const int64_t shape[8])
{
    int32_t h[256] = {0};
    for (int i = 0; i < 8; i++)
        h[i] = (int32_t)shape[i];
    return write_all(e, h, sizeof h);
}

/* The errno of a failed write of the export, with the fix for a full disk. */
static int write_failed(const char *tmp, ssize_t w, char *why, size_t len)
{
    return snprintf(why, len, "cannot write '%s': %s%s", tmp,
                    w < 0 ? strerror(errno) : "no progress",
                    w < 0 && errno == ENOSPC ? " (the disk is full: free space or give --out on "
                                               "another disk)"
                                             : ""),
           -1;
}

static int pwrite_all(exporter *e, const void *p, size_t n, uint64_t at, char *why, size_t len)
{
    size_t len0 = n;
    const char *c = p;
    while (n > 0) {
        ssize_t w = pwrite(e->fd, c, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return write_failed(e->tmp, w, why, len);
        c += w, n -= (size_t)w, at += (uint64_t)w;
    }
    /* start writing it to the disk now, so the fsync at the end waits for little */
    sync_file_range(e->fd, (off_t)(at - len0), (off_t)len0, SYNC_FILE_RANGE_WRITE);
    return 0;
}

/* ckpt_stream's master pieces: the parts of the layer's parameters among flat elements
 * [lo, lo + n), converted (bf16: in place, element k's 2 bytes where no later element is)
 * and written where those parameters lie in the export. */
static int put_master(void *user, int layer, int64_t lo, int64_t n, float *src, char *why,
                      size_t len)
{
    exporter *e = user;
    size_t esize = e->o.bf16 ? 2 : 4;
    for (int p = e->first[layer]; p < e->first[layer + 1]; p++) {
        const ckpt_param *P = &e->v.params[p];
        int64_t a = lo > P->offset ? lo : P->offset;
        int64_t b = lo + n < P->offset + P->numel ? lo + n : P->offset + P->numel;
        if (a >= b)
            continue;
        char *from = (char *)(src + (a - lo));
        if (e->o.bf16)
            for (int64_t k = 0; k < b - a; k++) {
                uint16_t h = zt_f32_to_bf16(src[a - lo + k]);
                memcpy(from + 2 * k, &h, sizeof h);
            }
        if (pwrite_all(e, from, (size_t)(b - a) * esize,
                       e->data_at + e->out_at[p] + (uint64_t)(a - P->offset) * esize, why,
                       len) != 0)
            return -1;
    }
    return 0;
}

/* fsync, rename over the target, fsync of its folder. */
static int commit_file(exporter *e, const char *out)
{
    if (fsync(e->fd) != 0 || close(e->fd) != 0) {
        e->fd = -1;
        return snprintf(e->why, sizeof e->why, "cannot write '%s': %s", e->tmp, strerror(errno)),
               -1;
    }
    e->fd = -1;
    if (rename(e->tmp, out) != 0)
        return snprintf(e->why, sizeof e->why, "cannot rename '%s' to '%s': %s", e->tmp, out,
                        strerror(errno)),
               -1;
    char folder[PATH_MAX + 16];
    snprintf(folder, sizeof folder, "%s", out);
    int dfd = open(dirname(folder), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0)
        fsync(dfd), close(dfd);
    return 0;
}

/* Reads in flight: the disk's queue wants several (an NVMe drive more than 8 gains little
 * with pieces of megabytes); each piece at most 8 MiB, and small beside the largest
 * parameter, so the memory stays below it for small models. */
#define EXPORT_THREADS 8

static int prepare(exporter *e, int64_t shape[8])
{
    char why[sizeof e->why];
    fprintf(stderr, "checking %s as a load would, while reading it\n", e->o.dir);
    if (ckpt_open_streaming(e->o.dir, &e->v, why, sizeof why) != 0)
        return snprintf(e->why, sizeof e->why, "%s", why), -1;
    int64_t largest = 1;
    for (int p = 0; p < e->v.n_params; p++) {
        largest = e->v.params[p].numel > largest ? e->v.params[p].numel : largest;
        e->total += (uint64_t)e->v.params[p].numel * (e->o.bf16 ? 2 : 4);
    }
    size_t chunk = (size_t)largest * sizeof(float) / (2 * EXPORT_THREADS);
    e->chunk = chunk < 65536 ? 65536 : chunk > ((size_t)8 << 20) ? (size_t)8 << 20 : chunk;
    e->order = malloc((size_t)e->v.n_params * sizeof *e->order);
    e->out_at = malloc((size_t)e->v.n_params * sizeof *e->out_at);
    e->first = calloc((size_t)e->v.n_layers + 1, sizeof *e->first);
    if (!e->order || !e->out_at || !e->first)
        return snprintf(e->why, sizeof e->why, "out of memory for the parameter list"), -1;
    for (int p = 0; p < e->v.n_params; p++) /* a layer's parameters are consecutive */
        e->first[e->v.params[p].layer + 1] = p + 1;
    if (e->o.llmc && (llmc_shape(e, shape) != 0 || llmc_order(e, shape) != 0))
        return -1;
    for (int p = 0; !e->o.llmc && p < e->v.n_params; p++)
        e->order[e->n++] = p;
    uint64_t at = 0;
    for (int i = 0; i < e->n; i++) {
        e->out_at[e->order[i]] = at;
        at += (uint64_t)e->v.params[e->order[i]].numel * (e->o.bf16 ? 2 : 4);
    }
    return 0;
}

static int run(exporter *e, const char *out)
{
    int64_t shape[8] = {0};
    e->t0 = zt_now_s();
    if (prepare(e, shape) != 0)
        return -1;
    snprintf(e->tmp, sizeof e->tmp, "%s.partial", out);
    if ((e->fd = open(e->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return snprintf(e->why, sizeof e->why, "cannot create '%s': %s", e->tmp, strerror(errno)),
               -1;
    if ((e->o.llmc ? llmc_header(e, shape) : safetensors_header(e)) != 0)
        return -1;
    off_t head = lseek(e->fd, 0, SEEK_CUR);
    e->data_at = head > 0 ? (uint64_t)head : 0;
    if (!e->v.m.pieces) /* say why an export of an old checkpoint reads 3x what it writes */
        ZT_LOGI("checkpoint",
                "%s is a version %d checkpoint, which records no CRC-32 of its "
                "pieces: the export reads every rank file whole (master, Adam m and v) to check "
                "each file's CRC-32 (a version 3 checkpoint, saved by this version, is read for "
                "its master values only)",
                e->v.folder, e->v.version);
    zt_progress_begin(&e->pr, stderr, "checkpoint export (read)", ckpt_stream_bytes(&e->v), 1);
    int rc =
        ckpt_stream(&e->v, EXPORT_THREADS, e->chunk, put_master, e, &e->pr, e->why, sizeof e->why);
    zt_progress_end(&e->pr, rc == 0);
    return rc != 0 ? -1 : commit_file(e, out);
}

int cmd_checkpoint_export(int argc, char **argv)
{
    exporter e = {.fd = -1};
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0); /* what the program starts with: its shared libraries */
    if (parse(argc, argv, &e.o) != 0)
        return 2;
    char out[PATH_MAX];
    snprintf(out, sizeof out, "%s",
             e.o.out    ? e.o.out
             : e.o.llmc ? "model.bin"
                        : "model.safetensors");
    int rc = run(&e, out);
    if (e.fd >= 0)
        close(e.fd);
    if (rc != 0) {
        if (e.tmp[0])
            unlink(e.tmp);
        fprintf(stderr, "ztier checkpoint export: %s; nothing was written to '%s'\n", e.why, out);
    } else {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double dt = zt_now_s() - e.t0;
        char a[32], b[32], c[32], d[32], r[32];
        uint64_t read = ckpt_stream_bytes(&e.v); /* bench/checkpoints.sh's bound needs it */
        printf("exported %d parameters of step %lld (%s, %s, %s) to %s in %.2f s, %s/s, reading "
               "%s of the rank files (%llu bytes); peak memory %s, of which the export's %s (the "
               "rest: the program's libraries)\n",
               e.n, (long long)e.v.step, e.o.format, e.o.dtype,
               bench_fmt_bytes(e.total, a, sizeof a), out, dt,
               bench_fmt_bytes((uint64_t)((double)e.total / (dt > 1e-9 ? dt : 1e-9)), b, sizeof b),
               bench_fmt_bytes(read, r, sizeof r), (unsigned long long)read,
               bench_fmt_bytes((uint64_t)ru.ru_maxrss * 1024, c, sizeof c),
               bench_fmt_bytes((uint64_t)(ru.ru_maxrss - ru0.ru_maxrss) * 1024, d, sizeof d));
    }
    free(e.order), free(e.out_at), free(e.first);
    ckpt_close(&e.v);
    return rc ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/* `ztier checkpoint export DIR --format safetensors|llmc [--dtype fp32|bf16] [--out F]`: one
 * model file from a checkpoint's fp32 master weights, whatever number of ranks saved it.
 * The checkpoint is checked first as a load checks it (zt_ckpt_validate: the manifest, the
 * model where it is the GPT-2 trainer's, every rank file whole); then the parameters are
 * streamed one at a time, each gathered from the files that hold its pieces, so the memory
 * is the largest parameter in fp32, not the model. The file is written as
 * F.partial beside F, synced and renamed: F is either the whole export or untouched.
 *   safetensors: names and shapes of the manifest, dtype F32 or BF16, the step in
 *                __metadata__ (loadable by the `safetensors` Python package).
 *   llmc:        llm.c's GPT-2 model file (version 3 fp32, 5 bf16), for checkpoints of the
 *                GPT-2 trainer (its shape from the manifest's gpt2.* meta values). */
#include "core/convert.h"
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
    float *buf; /* the largest parameter, fp32 (its bf16 copy written over its first half) */
    int fd;     /* the .partial file */
    char tmp[PATH_MAX + 16];
    uint64_t written, total;
    double t0, last_report;
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

static int write_all(exporter *e, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(e->fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return snprintf(e->why, sizeof e->why, "cannot write '%s': %s%s", e->tmp,
                            w < 0 ? strerror(errno) : "no progress",
                            errno == ENOSPC ? " (the disk is full: free space or give --out on "
                                              "another disk)"
                                            : ""),
                   -1;
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

static void progress(exporter *e, int done)
{
    double t = zt_now_s();
    if (!done && t - e->last_report < 5.0)
        return;
    e->last_report = t;
    char a[32], b[32];
    fprintf(stderr, "  %s of %s written (%.0f%%), %.1f s\n",
            bench_fmt_bytes(e->written, a, sizeof a), bench_fmt_bytes(e->total, b, sizeof b),
            e->total ? 100.0 * (double)e->written / (double)e->total : 100.0, t - e->t0);
}

static int write_params(exporter *e)
{
    for (int i = 0; i < e->n; i++) {
        const ckpt_param *p = &e->v.params[e->order[i]];
        if (ckpt_read_param(&e->v, e->order[i], e->buf, e->why, sizeof e->why) != 0)
            return -1;
        int rc;
        if (e->o.bf16) { /* in place: element k's 2 bytes land where no later element is */
            for (int64_t k = 0; k < p->numel; k++) {
                uint16_t h = zt_f32_to_bf16(e->buf[k]);
                memcpy((char *)e->buf + 2 * k, &h, sizeof h);
            }
            rc = write_all(e, e->buf, (size_t)p->numel * 2);
        } else {
            rc = write_all(e, e->buf, (size_t)p->numel * 4);
        }
        if (rc)
            return -1;
        e->written += (uint64_t)p->numel * (e->o.bf16 ? 2 : 4);
        progress(e, 0);
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

static int prepare(exporter *e, int64_t shape[8])
{
    char why[sizeof e->why];
    fprintf(stderr, "checking %s as a load would\n", e->o.dir);
    if (ckpt_open(e->o.dir, &e->v, why, sizeof why) != 0)
        return snprintf(e->why, sizeof e->why, "%s", why), -1;
    int64_t largest = 1;
    for (int p = 0; p < e->v.n_params; p++) {
        largest = e->v.params[p].numel > largest ? e->v.params[p].numel : largest;
        e->total += (uint64_t)e->v.params[p].numel * (e->o.bf16 ? 2 : 4);
    }
    e->order = malloc((size_t)e->v.n_params * sizeof *e->order);
    e->buf = malloc((size_t)largest * sizeof(float));
    if (!e->order || !e->buf)
        return snprintf(e->why, sizeof e->why,
                        "out of memory for the largest parameter (%lld elements)",
                        (long long)largest),
               -1;
    if (e->o.llmc)
        return llmc_shape(e, shape) != 0 ? -1 : llmc_order(e, shape);
    for (int p = 0; p < e->v.n_params; p++)
        e->order[e->n++] = p;
    return 0;
}

static int run(exporter *e, const char *out)
{
    int64_t shape[8] = {0};
    if (prepare(e, shape) != 0)
        return -1;
    snprintf(e->tmp, sizeof e->tmp, "%s.partial", out);
    if ((e->fd = open(e->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        return snprintf(e->why, sizeof e->why, "cannot create '%s': %s", e->tmp, strerror(errno)),
               -1;
    e->t0 = e->last_report = zt_now_s();
    if ((e->o.llmc ? llmc_header(e, shape) : safetensors_header(e)) != 0 || write_params(e) != 0)
        return -1;
    return commit_file(e, out);
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
        progress(&e, 1);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double dt = zt_now_s() - e.t0;
        char a[32], b[32], c[32], d[32];
        printf(
            "exported %d parameters of step %lld (%s, %s, %s) to %s in %.2f s, %s/s; peak "
            "memory %s, of which the export's %s (the rest: the program's libraries)\n",
            e.n, (long long)e.v.step, e.o.format, e.o.dtype,
            bench_fmt_bytes(e.written, a, sizeof a), out, dt,
            bench_fmt_bytes((uint64_t)((double)e.written / (dt > 1e-9 ? dt : 1e-9)), b, sizeof b),
            bench_fmt_bytes((uint64_t)ru.ru_maxrss * 1024, c, sizeof c),
            bench_fmt_bytes((uint64_t)(ru.ru_maxrss - ru0.ru_maxrss) * 1024, d, sizeof d));
    }
    free(e.order), free(e.buf);
    ckpt_close(&e.v);
    return rc ? 1 : 0;
}

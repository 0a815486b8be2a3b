/* SPDX-License-Identifier: MIT */
/* `ztier bench profile`: the rates `ztier plan` predicts a step from, measured on this machine
 * with the backends in use, written as the machine profile of docs/plan.md, "The machine profile".
 *
 *   ztier bench profile [--out FILE] [--config NAME --batch B --seq T] [--vocab V]
 *                       [--nvme-path DIR] [--seconds S] [--threads N] [--backend B]
 *
 * Phases, each within its share of the budget (S seconds, 120 by default; the transfer sizes
 * shrink with it): host<->device copies through the device backend (cuda where a GPU is
 * usable, else host) and the host memcpy probe of `ztier bench copy`; NVMe write and read
 * through ztier's swap engine at the runtime's block size and queue depth (`ztier bench
 * nvme`'s code); the fused CPU Adam step at the thread budget (`ztier bench adam`'s); ZeRO++
 * int8 quantize and dequantize (`ztier bench quant`'s); the model's compute through its ops
 * table (bench_profile_compute.c); under mpirun the collectives (bench_profile_comm.c), every
 * rank measuring at once as a training step loads the machine, rank 0's figures written.
 * The file is written whole or not at all (a temporary file beside it, renamed). */
#include "tools/bench_profile.h"
#include "core/progress.h"
#include "runtime/config.h"
#include "tools/bench_adam.h"
#include "device/device.h"
#include "optimizer/adam.h"
#include "tools/bench_common.h"
#include "tools/bench_copy.h"
#include "tools/bench_nvme.h"
#include "tools/bench_quant.h"
#include "tools/commands.h"
#include "ztier_commit.h"

#include "ztier.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FULL_SECONDS 120.0
/* the phases' shares of the budget (the compute's: bench_profile_compute.c, _layers.c) */
#define COPY_SHARE 0.12
#define NVME_SHARE 0.22
#define ADAM_SHARE 0.12
#define QUANT_SHARE 0.08
#define MAX_REPS 64

typedef struct options {
    const char *out, *config, *nvme_path, *backend;
    int batch, seq, vocab, threads;
    int json; /* the profile on one line on standard output too */
    double seconds;
    char nvme_dir[PATH_MAX]; /* --nvme-path, resolved */
} options;

/* ---- the profile ------------------------------------------------------------------------ */

static int bad_rates; /* rates that came out not positive (a broken measurement) */

json_t *profile_rate(profile *p, const char *name, double value, const char *unit, const char *fmt,
                     ...)
{
    char how[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(how, sizeof how, "measured: ");
    vsnprintf(how + n, sizeof how - (size_t)n, fmt, ap);
    va_end(ap);
    if (!(value > 0) || !isfinite(value)) {
        fprintf(stderr, PROFILE_CMD ": rank %d: %s came out %g (%s): not written\n", p->rank, name,
                value, how);
        bad_rates++;
        return NULL;
    }
    json_t *r = json_pack("{s:f, s:s, s:s}", "value", value, "unit", unit, "source", how);
    if (r)
        json_object_set_new(p->rates, name, r);
    if (p->progress)
        fprintf(stderr, "  %-28s %.4g %s\n", name, value, unit);
    return r;
}

int profile_more(const profile *p, int done, int min_reps, int max_reps, double share, double t0)
{
    if (done < min_reps)
        return 1;
    return done < max_reps && bench_now() - t0 < share * p->seconds;
}

static void phase(const profile *p, int k, int n, const char *what)
{
    if (p->progress)
        fprintf(stderr, PROFILE_CMD " [%d/%d] %s\n", k, n, what);
}

/* ---- the phases ------------------------------------------------------------------------- */

static size_t scaled(const profile *p, double full, double least, size_t multiple)
{
    double v = full * p->scale;
    size_t n = (size_t)(v < least ? least : v);
    return n / multiple * multiple;
}

static double median_of(double (*fn)(bench_copy_bufs *, zt_copy_kind), bench_copy_bufs *c,
                        zt_copy_kind kind, const profile *p, double t0, int *reps)
{
    double v[MAX_REPS];
    int n = 0;
    fn(c, kind); /* warm-up */
    *reps = 0;
    while (profile_more(p, n, 3, MAX_REPS, COPY_SHARE / 5, t0))
        if ((v[n++] = fn(c, kind)) < 0)
            return -1; /* the copy said why */
    *reps = n;
    return bench_median(v, n) * 1e9;
}

static double both_at_once(bench_copy_bufs *c, zt_copy_kind kind)
{
    (void)kind;
    return bench_copy_both(c);
}

/* The host memory copy of `ztier bench copy`'s limit: memcpy between pinned host buffers. */
static double host_memcpy(bench_copy_bufs *c, zt_copy_kind kind)
{
    (void)kind;
    double t0 = bench_now();
    memcpy(c->host2, c->host, c->bytes);
    return (double)c->bytes / (bench_now() - t0) / 1e9;
}

/* Writing into memory mapped just before: an allocation that no cache serves (bench_common.h). */
static double fresh_pages(bench_copy_bufs *c, zt_copy_kind kind)
{
    (void)kind;
    return bench_fresh_touch(c->bytes);
}

static int copies(profile *p, const char *backend, const char *stand_in)
{
    bench_copy_bufs c;
    size_t bytes = scaled(p, 256.0 * 1048576, 64.0 * 1048576, 4096); /* past the caches */
    if (bench_copy_open(&c, backend, bytes, p->local_rank, p->local_size, PROFILE_CMD) != 0)
        return bench_copy_close(&c), -1;
    double t0 = bench_now(), v[5];
    int reps[5];
    v[0] = median_of(bench_copy_backend, &c, ZT_COPY_H2D, p, t0, &reps[0]);
    v[1] = median_of(bench_copy_backend, &c, ZT_COPY_D2H, p, bench_now(), &reps[1]);
    v[2] = median_of(both_at_once, &c, ZT_COPY_H2D, p, bench_now(), &reps[2]);
    v[3] = median_of(host_memcpy, &c, ZT_COPY_H2D, p, bench_now(), &reps[3]);
    v[4] = median_of(fresh_pages, &c, ZT_COPY_H2D, p, bench_now(), &reps[4]);
    bench_copy_close(&c);
    const char *how = c.cuda ? "pinned cuda backend memcpy_async"
                             : "host backend memcpy_async "
                               "(its device memory is host "
                               "memory)";
    char mib[32];
    bench_fmt_bytes(bytes, mib, sizeof mib);
    profile_rate(p, "h2d_bytes_per_s", v[0], "B/s", "%s%s host->device, %s x%d, median", how,
                 stand_in, mib, reps[0]);
    profile_rate(p, "d2h_bytes_per_s", v[1], "B/s", "%s%s device->host, %s x%d, median", how,
                 stand_in, mib, reps[1]);
    profile_rate(p, "h2d_d2h_both_bytes_per_s", v[2], "B/s",
                 "%s%s, one copy each way at once on two streams, the sum, %s each x%d, median",
                 how, stand_in, mib, reps[2]);
    profile_rate(p, "host_memcpy_bytes_per_s", v[3], "B/s",
                 "memcpy between pinned host buffers (`ztier bench copy`'s host limit), %s x%d, "
                 "median, bytes copied per second",
                 mib, reps[3]);
    profile_rate(p, "host_fresh_bytes_per_s", v[4], "B/s",
                 "memset into newly mapped host memory (mmap, memset, munmap: page faults and "
                 "first touch), %s x%d, median",
                 mib, reps[4]);
    return 0;
}

static int nvme(profile *p, const char *dir)
{
    zt_config cfg; /* the runtime's default aio.block_size and aio.queue_depth */
    zt_config_defaults(&cfg);
    bench_nvme_spec s = {
        dir, 0, (uint64_t)cfg.aio_block_size, cfg.aio_queue_depth, ZT_IO_ENGINE_AUTO, p->rank};
    s.size = scaled(p, 1024.0 * 1048576, 16.0 * 1048576, s.block);
    bench_nvme_file z;
    if (bench_nvme_open(&z, &s, PROFILE_CMD) != 0)
        return bench_nvme_close(&z), -1;
    double w[MAX_REPS], r[MAX_REPS], t0 = bench_now();
    int n = 0, ok = bench_nvme_run(&z, 1) > 0 && bench_nvme_run(&z, 0) > 0; /* warm-up */
    while (ok && profile_more(p, n, 3, MAX_REPS, NVME_SHARE, t0)) {
        w[n] = bench_nvme_run(&z, 1), r[n] = bench_nvme_run(&z, 0);
        ok = w[n] > 0 && r[n++] > 0;
    }
    const char *engine = zt_swap_engine_name(z.sw);
    bench_nvme_close(&z);
    if (!ok)
        return -1;
    char sz[32];
    bench_fmt_bytes(s.size, sz, sizeof sz);
    json_t *rw[2];
    rw[0] = profile_rate(p, "nvme_read_bytes_per_s", bench_median(r, n) * 1e9, "B/s",
                         "ztier's swap engine (%s, O_DIRECT) in %s, one read of %s at block %llu "
                         "B and queue depth %d (the runtime's aio defaults), x%d alternating with "
                         "the writes, median",
                         engine, dir, sz, (unsigned long long)s.block, s.qd, n);
    rw[1] = profile_rate(p, "nvme_write_bytes_per_s", bench_median(w, n) * 1e9, "B/s",
                         "ztier's swap engine (%s, O_DIRECT) in %s, one write of %s of "
                         "incompressible data at block %llu B and queue depth %d, x%d, median",
                         engine, dir, sz, (unsigned long long)s.block, s.qd, n);
    for (int i = 0; i < 2; i++)
        if (rw[i]) {
            json_object_set_new(rw[i], "block_bytes", json_integer((json_int_t)s.block));
            json_object_set_new(rw[i], "queue_depth", json_integer(s.qd));
        }
    return 0;
}

static int adam(profile *p, zt_threadpool *pool, int threads)
{
    zt_adam_variant var = zt_adam_variant_best();
    adam_bench b = {.n = (int64_t)scaled(p, 2e7, 4e6, 1024), .grad_dtype = ZT_F32, .copy = 1};
    if (bench_adam_alloc(&b, pool) != 0) {
        bench_adam_free(&b);
        return fprintf(stderr, PROFILE_CMD ": no memory for Adam over %lld parameters\n",
                       (long long)b.n),
               -1;
    }
    double s[MAX_REPS], t0 = bench_now();
    int n = 0;
    bench_adam_pass(&b, pool, var, 1); /* warm-up */
    while (profile_more(p, n, 3, MAX_REPS, ADAM_SHARE, t0))
        s[n] = bench_adam_pass(&b, pool, var, n + 2), n++;
    bench_adam_free(&b);
    json_t *r = profile_rate(p, "adam_params_per_s", (double)b.n / bench_median(s, n), "1/s",
                             "`ztier bench adam`'s fused step (variant %s, fp32 gradients, a bf16 "
                             "parameter copy) over %lld parameters on %d threads, x%d, median",
                             zt_adam_variant_name(var), (long long)b.n, threads, n);
    if (r)
        json_object_set_new(r, "threads", json_integer(threads));
    return 0;
}

/* The device backend's fused Adam kernel (ztier.device_optimizer: master, m, v, the gradient
 * and the bf16 parameters all in device memory), synchronized after each step. */
typedef struct dev_adam {
    zt_device *dev;
    zt_stream *stream;
    float *buf[4]; /* master, m, v, grad */
    void *out, *count;
} dev_adam;

static double dev_adam_step(dev_adam *d, size_t n, int64_t step)
{
    zt_adam_hparams h = {1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, step, 1.0f};
    zt_adam_consts c;
    zt_error err = {0};
    zt_adam_consts_init(&c, &h);
    double t0 = bench_now();
    zt_status st = zt_device_adam_async(d->dev, &c, d->buf[0], d->buf[1], d->buf[2], d->buf[3],
                                        d->out, ZT_BF16, n, d->count, d->stream, &err);
    if (st == ZT_OK)
        st = zt_device_stream_synchronize(d->dev, d->stream, &err);
    if (st != ZT_OK)
        fprintf(stderr, PROFILE_CMD ": the device's Adam: %s\n", err.msg);
    return st == ZT_OK ? bench_now() - t0 : -1;
}

static int device_adam(profile *p, const char *backend, const char *stand_in)
{
#ifdef ZT_CUDA_FAKE
    size_t n = 1u << 18; /* the stand-in runs each CUDA thread on the CPU */
#else
    size_t n = scaled(p, 1e8, 1e7, 1024);
#endif
    zt_error err = {0};
    dev_adam d;
    memset(&d, 0, sizeof d);
    const zt_device_iface *iface = zt_device_find(backend, &err);
    zt_device_config dc = {(uint64_t)n * 18 + 4096, -1, 1, NULL, p->local_rank, p->local_size};
    zt_status st = iface ? iface->create(&dc, &d.dev, &err) : ZT_ERR_ARGUMENT;
    if (st == ZT_OK)
        st = zt_device_stream_create(d.dev, &d.stream, &err);
    for (int i = 0; st == ZT_OK && i < 4; i++)
        if ((st = zt_device_alloc(d.dev, n * 4, (void **)&d.buf[i], &err)) == ZT_OK)
            st = zt_device_memset_async(d.dev, d.buf[i], 0, n * 4, d.stream, &err);
    if (st == ZT_OK && (st = zt_device_alloc(d.dev, n * 2, &d.out, &err)) == ZT_OK &&
        (st = zt_device_alloc(d.dev, 64, &d.count, &err)) == ZT_OK)
        st = zt_device_memset_async(d.dev, d.count, 0, 64, d.stream, &err);
    double s[MAX_REPS], t0 = bench_now();
    int k = 0;
    if (st != ZT_OK)
        fprintf(stderr, PROFILE_CMD ": the device's Adam: %s\n", err.msg);
    else if (dev_adam_step(&d, n, 1) < 0) /* warm-up */
        st = ZT_ERR_INTERNAL;
    while (st == ZT_OK && profile_more(p, k, 3, MAX_REPS, ADAM_SHARE / 2, t0))
        if ((s[k] = dev_adam_step(&d, n, k + 2)) < 0)
            st = ZT_ERR_INTERNAL;
        else
            k++;
    for (int i = 0; d.dev && i < 4; i++)
        if (d.buf[i])
            zt_device_free(d.dev, d.buf[i]);
    if (d.out)
        zt_device_free(d.dev, d.out);
    if (d.count)
        zt_device_free(d.dev, d.count);
    if (d.stream)
        zt_device_stream_destroy(d.dev, d.stream);
    if (d.dev)
        zt_device_destroy(d.dev);
    if (st != ZT_OK)
        return -1;
    profile_rate(p, "adam_device_params_per_s", (double)n / bench_median(s, k), "1/s",
                 "the %s backend's fused Adam kernel%s (fp32 master, m, v and gradients, bf16 "
                 "parameters, all in device memory) over %zu parameters, x%d, median",
                 backend, stand_in, n, k);
    return 0;
}

static int quant(profile *p, zt_threadpool *pool, int threads)
{
    int64_t n = (int64_t)scaled(p, 64.0 * 1048576 / 4, 8.0 * 1048576, 256);
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4), *s = malloc((size_t)n / 64);
    int8_t *q = malloc((size_t)n);
    if (!x || !y || !s || !q) {
        free(x), free(y), free(s), free(q);
        return fprintf(stderr, PROFILE_CMD ": out of memory for quantization\n"), -1;
    }
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(i % 1000) * 0.001f - 0.5f;
    zt_quant_variant v = zt_quant_variant_best();
    double tq[MAX_REPS], td[MAX_REPS], t0 = bench_now();
    int k = 0;
    bench_quant8_s(pool, v, x, n, q, s), bench_dequant8_s(pool, v, q, s, n, y); /* warm-up */
    while (profile_more(p, k, 3, MAX_REPS, QUANT_SHARE, t0))
        tq[k] = bench_quant8_s(pool, v, x, n, q, s), td[k] = bench_dequant8_s(pool, v, q, s, n, y),
        k++;
    free(x), free(y), free(s), free(q);
    const char *fmt = "`ztier bench quant`'s int8 %s (variant %s, blocks of 256) of %lld fp32 "
                      "values on %d threads, x%d, median, fp32 bytes per second";
    profile_rate(p, "quantize_bytes_per_s", 4.0 * (double)n / bench_median(tq, k), "B/s", fmt,
                 "quantization", zt_quant_variant_name(v), (long long)n, threads, k);
    profile_rate(p, "dequantize_bytes_per_s", 4.0 * (double)n / bench_median(td, k), "B/s", fmt,
                 "dequantization", zt_quant_variant_name(v), (long long)n, threads, k);
    return 0;
}

static int compute(profile *p, const options *o, const gpt2_config *c, int cuda,
                   const char *stand_in)
{
    char how[160];
    if (!cuda) {
        snprintf(how, sizeof how, "the CPU ops (OpenBLAS) of models/gpt2");
        profile_ops ops = {&gpt2_ops_cpu, NULL, NULL, how};
        return profile_compute(p, c, o->batch, o->seq, &ops) ||
               profile_layers(p, c, o->batch, o->seq, &ops);
    }
#ifdef ZT_HAVE_GPT2_CUDA
    profile_cuda cu;
    if (profile_cuda_open(&cu, p->local_size > 1 ? p->local_rank : -1) != 0)
        return profile_cuda_close(&cu), -1;
    snprintf(how, sizeof how, "the CUDA ops of models/gpt2 (bf16 matmuls)%s", stand_in);
    profile_ops ops = {&cu.ops, profile_cuda_sync, cu.stream, how};
    int rc = profile_compute(p, c, o->batch, o->seq, &ops) ||
             profile_layers(p, c, o->batch, o->seq, &ops);
    profile_cuda_close(&cu);
    return rc;
#else
    (void)stand_in;
    return -1;
#endif
}

/* ---- the machine ------------------------------------------------------------------------ */

/* The value of `key` in a "key: value" or key="value" line of a file, into out. */
static int read_field(const char *path, const char *key, char sep, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    char line[512];
    size_t k = strlen(key);
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        char *v = strchr(line, sep);
        if (strncmp(line, key, k) != 0 || !v)
            continue;
        v++;
        while (*v == ' ' || *v == '\t' || *v == '"')
            v++;
        v[strcspn(v, "\"\n")] = '\0';
        snprintf(out, len, "%s", v);
        found = 1;
    }
    if (f)
        fclose(f);
    return found;
}

static json_t *machine(const profile *p, const options *o, const char *backend, const char *gpu,
                       double peak, int threads, const char *nvme_dir)
{
    char cpu[256] = "unknown", os[256] = "unknown OS", desc[700], when[32], ver[128];
    read_field("/proc/cpuinfo", "model name", ':', cpu, sizeof cpu);
    read_field("/etc/os-release", "PRETTY_NAME", '=', os, sizeof os);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    snprintf(desc, sizeof desc, "%ld-core %s, %.0f GiB, %s%s%s", cores, cpu, mem / 1073741824.0, os,
             gpu ? ", " : "", gpu ? gpu : "");
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(ver, sizeof ver, "%s (commit %s)", zt_version_string(), ZT_TOOLS_COMMIT);
    json_t *m =
        json_pack("{s:s, s:s, s:i, s:I, s:s, s:s, s:i, s:i, s:s, s:s, s:s}", "description", desc,
                  "cpu", cpu, "cores", (int)cores, "memory_bytes", (json_int_t)mem, "backend",
                  backend, "comm", p->comm->iface->name, "world", p->world, "threads", threads,
                  "nvme_path", nvme_dir, "measured_at", when, "ztier", ver);
    if (!m)
        return NULL;
    json_object_set_new(m, "gpu", gpu ? json_string(gpu) : json_null());
    json_object_set_new(m, "gpu_peak_flops", peak > 0 ? json_real(peak) : json_null());
    json_object_set_new(
        m, "model",
        json_pack("{s:s, s:i, s:i}", "config", o->config, "batch", o->batch, "seq", o->seq));
    json_object_set_new(m, "seconds", json_real(o->seconds));
    return m;
}

/* ---- options, the output file ----------------------------------------------------------- */

static int parse(int argc, char **argv, options *o, gpt2_config *c)
{
    static const char *const known[] = {"out",     "config",  "batch",   "seq",       "vocab",
                                        "seconds", "threads", "backend", "nvme-path", NULL};
    *o = (options){.config = "d12",
                   .nvme_path = ".",
                   .backend = "auto",
                   .batch = 4,
                   .seq = 64,
                   .seconds = FULL_SECONDS};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return -1;
    o->json = bench_flag(argc, argv, "json");
    const char *v;
    o->out = bench_arg(argc, argv, "out");
    if ((v = bench_arg(argc, argv, "config")))
        o->config = v;
    if ((v = bench_arg(argc, argv, "nvme-path")))
        o->nvme_path = v;
    if ((v = bench_arg(argc, argv, "backend")))
        o->backend = v;
    if (bench_int_arg(argc, argv, PROFILE_CMD, "batch", 1, 1 << 20, &o->batch) ||
        bench_int_arg(argc, argv, PROFILE_CMD, "seq", 2, 1 << 20, &o->seq) ||
        bench_int_arg(argc, argv, PROFILE_CMD, "vocab", 2, 1 << 24, &o->vocab) ||
        bench_int_arg(argc, argv, PROFILE_CMD, "threads", 1, 4096, &o->threads))
        return -1;
    if ((v = bench_arg(argc, argv, "seconds"))) {
        char *end = NULL;
        o->seconds = strtod(v, &end);
        if (end == v || *end || !(o->seconds > 0) || o->seconds > 3600)
            return fprintf(stderr,
                           PROFILE_CMD ": --seconds '%s': give the time budget in seconds, more "
                                       "than 0 and at most 3600 (default 120)\n",
                           v),
                   -1;
    }
    if (gpt2_config_named(o->config, o->vocab, c) != 0)
        return fprintf(stderr,
                       PROFILE_CMD ": --config '%s': not a model; give " GPT2_CONFIG_HELP "\n",
                       o->config),
               -1;
    if (o->seq > c->max_seq)
        return fprintf(stderr, PROFILE_CMD ": --seq %d: %s takes at most %d tokens\n", o->seq,
                       o->config, c->max_seq),
               -1;
    if (strcmp(o->backend, "auto") && strcmp(o->backend, "host") && strcmp(o->backend, "cuda"))
        return fprintf(stderr, PROFILE_CMD ": --backend '%s': give auto, host or cuda\n",
                       o->backend),
               -1;
    struct stat st;
    if (o->out && stat(o->out, &st) == 0 && S_ISDIR(st.st_mode))
        return fprintf(stderr,
                       PROFILE_CMD ": --out '%s' is a folder: give the profile's file name (e.g. "
                                   "%s/machine.json)\n",
                       o->out, o->out),
               -1;
    int found = stat(o->nvme_path, &st) == 0;
    if (!found || !S_ISDIR(st.st_mode))
        return fprintf(stderr,
                       PROFILE_CMD ": --nvme-path '%s': %s; give an existing folder on the disk "
                                   "to measure (NVMe swap files are written there and removed)\n",
                       o->nvme_path, found ? "not a folder" : strerror(errno)),
               -1;
    if (!realpath(o->nvme_path, o->nvme_dir)) /* it exists: keep it as given */
        snprintf(o->nvme_dir, sizeof o->nvme_dir, "%s", o->nvme_path);
    return 0;
}

/* The temporary file while it exists: Ctrl-C or a kill removes it (unlink is safe in a signal
 * handler), then ends the process as the signal would have. */
static char tmp_path[PATH_MAX + 16];

static void remove_tmp(int sig)
{
    if (tmp_path[0])
        unlink(tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The temporary file the profile is written to, in --out's folder (so the rename is atomic);
 * made before measuring so a bad --out fails at once. -1 after a message. */
static int open_out(const char *out, char *tmp, size_t len)
{
    /* the handlers first: no moment where the file exists and a signal would leave it */
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp.XXXXXX", out);
    signal(SIGINT, remove_tmp), signal(SIGTERM, remove_tmp), signal(SIGHUP, remove_tmp);
    int fd = mkstemp(tmp_path); /* fills in the name in place */
    int saved = errno;
    snprintf(tmp, len, "%s", tmp_path);
    if (fd < 0) {
        tmp_path[0] = '\0';
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", out);
        char *slash = strrchr(dir, '/');
        snprintf(slash ? slash : dir, sizeof dir - (size_t)(slash ? slash - dir : 0), "%s",
                 slash ? (slash == dir ? "/" : "") : ".");
        fprintf(stderr,
                PROFILE_CMD ": --out '%s': cannot create a file in the folder '%s': %s (give a "
                            "path in an existing folder you can write)\n",
                out, dir, strerror(saved));
    }
    return fd;
}

/* Writes root to fd (tmp), then renames it to out. */
static int write_out(json_t *root, int fd, const char *tmp, const char *out)
{
    FILE *f = fdopen(fd, "w");
    int ok = f && json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 &&
             fputc('\n', f) != EOF && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    ok = (f ? fclose(f) : close(fd)) == 0 && ok;
    if (ok && rename(tmp, out) == 0)
        return tmp_path[0] = '\0', 0;
    fprintf(stderr, PROFILE_CMD ": writing '%s': %s\n", out, strerror(ok ? errno : saved));
    unlink(tmp);
    return -1;
}

/* The backend measured: cuda where built and a GPU (or the stand-in) is usable, else host.
 * *gpu: the GPU's name or NULL. -1 after a message when --backend cuda cannot be had. */
static int pick_backend(const char *want, const char **backend, char *gpu, size_t len, double *peak)
{
    *backend = "host", *peak = 0;
    if (!strcmp(want, "host"))
        return 0;
#ifdef ZT_HAVE_GPT2_CUDA
    char why[256] = "";
    if (gpt2_cuda_usable(gpu, len, why, sizeof why)) {
        *backend = "cuda";
        *peak = gpt2_cuda_bf16_peak(gpu, len);
        return 0;
    }
#else
    char why[] = "this ztier was built without CUDA";
    (void)gpu, (void)len;
#endif
    if (!strcmp(want, "cuda"))
        return fprintf(stderr, PROFILE_CMD ": --backend cuda: %s\n", why), -1;
    return 0;
}

/* ---- the command ------------------------------------------------------------------------ */

typedef struct run {
    profile p;
    options o;
    gpt2_config c;
    zt_threadpool *pool;
    int threads, cuda;
    const char *backend, *stand_in;
} run;

static int measure(run *r)
{
    profile *p = &r->p;
    zt_error err = {0};
    const int n = p->world > 1 ? 6 : 5;
    static const char *const names[] = {"host<->device copies",
                                        "NVMe write and read",
                                        "Adam (the CPU's; the device's with cuda)",
                                        "int8 quantize and dequantize",
                                        "the model's compute",
                                        "collectives"};
    for (int k = 0; k < n; k++) {
        phase(p, k + 1, n, names[k]);
        int rc = k == 0   ? copies(p, r->backend, r->stand_in)
                 : k == 1 ? nvme(p, r->o.nvme_dir)
                 : k == 2 ? adam(p, r->pool, r->threads) ||
                                (r->cuda && device_adam(p, r->backend, r->stand_in))
                 : k == 3 ? quant(p, r->pool, r->threads)
                 : k == 4 ? compute(p, &r->o, &r->c, r->cuda, r->stand_in)
                          : profile_comm(p);
        /* every rank starts the next phase together, or all stop */
        if (zt_comm_agree(p->comm, rc ? ZT_ERR_INTERNAL : ZT_OK, names[k], &err) != ZT_OK) {
            if (!rc)
                fprintf(stderr, PROFILE_CMD ": rank %d: %s\n", p->rank, err.msg);
            return -1;
        }
    }
    return bad_rates ? -1 : 0;
}

int cmd_bench_profile(int argc, char **argv)
{
    run r;
    memset(&r, 0, sizeof r);
    profile *p = &r.p;
    if (parse(argc, argv, &r.o, &r.c) != 0)
        return 2;
    char gpu[256] = "", tmp[PATH_MAX + 16] = "";
    double peak = 0;
    if (pick_backend(r.o.backend, &r.backend, gpu, sizeof gpu, &peak) != 0)
        return 2;
    r.cuda = !strcmp(r.backend, "cuda");
#ifdef ZT_CUDA_FAKE
    r.stand_in = r.cuda ? " (on cudasim, the CPU stand-in: not a GPU's figure)" : "";
#else
    r.stand_in = "";
#endif
    zt_error err = {0};
    if (zt_comm_create("auto", &p->comm, &err) != ZT_OK)
        return fprintf(stderr, PROFILE_CMD ": %s\n", err.msg), 1;
    p->rank = p->comm->rank, p->world = p->comm->size;
    if (zt_comm_local_rank(p->comm, &p->local_rank, &p->local_size, &err) != ZT_OK)
        return fprintf(stderr, PROFILE_CMD ": %s\n", err.msg), zt_comm_destroy(p->comm), 1;
    int fd = p->rank == 0 && r.o.out ? open_out(r.o.out, tmp, sizeof tmp) : -1;
    int rc = zt_comm_agree(p->comm, p->rank == 0 && r.o.out && fd < 0 ? ZT_ERR_ARGUMENT : ZT_OK,
                           "--out", &err) == ZT_OK
                 ? 0
                 : 2;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    r.threads = r.o.threads ? r.o.threads : (int)(cores > 0 ? cores : 1); /* the runtime's */
    if (!rc && zt_threadpool_create(r.threads, -1, &r.pool, &err) != ZT_OK)
        rc = 1, fprintf(stderr, PROFILE_CMD ": %s\n", err.msg);
    p->rates = json_object(), p->compute = json_array();
    p->seconds = r.o.seconds;
    p->scale = r.o.seconds / FULL_SECONDS;
    p->scale = p->scale < 1.0 / 64 ? 1.0 / 64 : p->scale > 1 ? 1 : p->scale;
    p->progress = p->rank == 0 && zt_progress_wanted(stderr, 1);
    double t0 = bench_now();
    if (!rc && measure(&r) != 0)
        rc = 1;
    json_t *root = NULL;
    if (!rc && p->rank == 0) {
        json_t *m = machine(p, &r.o, r.backend, r.cuda ? gpu : NULL, peak, r.threads, r.o.nvme_dir);
        root = json_pack("{s:s, s:i, s:o, s:O, s:O}", "format", "ztier-profile", "version", 1,
                         "machine", m, "rates", p->rates, "compute", p->compute);
        if (!root)
            rc = 1, fprintf(stderr, PROFILE_CMD ": out of memory for the profile\n");
    }
    if (root && fd >= 0) {
        rc = write_out(root, fd, tmp, r.o.out) ? 1 : 0, fd = -1;
        if (!rc)
            fprintf(stderr, PROFILE_CMD ": wrote %s (%zu rates) in %.0f s\n", r.o.out,
                    json_object_size(p->rates), bench_now() - t0);
    } else if (root && !r.o.json) {
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    }
    if (root && r.o.json && !rc) { /* as every bench command's --json: one line, the last */
        json_dumpf(root, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    }
    if (fd >= 0)
        close(fd), unlink(tmp);
    tmp_path[0] = '\0';
    json_decref(root), json_decref(p->rates), json_decref(p->compute);
    zt_threadpool_destroy(r.pool);
    zt_comm_destroy(p->comm);
    return rc;
}

/* SPDX-License-Identifier: MIT */
/* `ztier bench nvme`: write then read S bytes through the NVMe swap space (O_DIRECT, the
 * chosen engine, block size, queue depth) and, when fio is installed, run fio on the same
 * bytes of the same swap file (so both see the same extents of the device) with the same
 * size, block size, io_uring and O_DIRECT, interleaved, who goes first alternating by round
 * (fio then ztier, ztier then fio, ...); prints medians and the median of the pairwise
 * ratios. The limit of a round is fio's best over queue depths 1, 4, ztier's and a deeper one
 * (see fio_depths: a fio run at ztier's depth alone is not every device's limit). */
#include "tiers/swap.h"
#include "tools/bench_common.h"
#include "tools/bench_nvme.h"
#include "tools/commands.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_REPS 16
#define FIO_DEPTHS 4

typedef struct nvme_opts {
    bench_nvme_spec s;
    int reps, json;
} nvme_opts;

static int parse(int argc, char **argv, nvme_opts *o)
{
    static const char *const known[] = {"path",   "size", "block-size", "queue-depth",
                                        "engine", "reps", NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return -1;
    *o = (nvme_opts){
        {".", 1ull << 30, 1u << 20, 32, ZT_IO_ENGINE_AUTO, 0}, 3, bench_flag(argc, argv, "json")};
    const char *v;
    if ((v = bench_arg(argc, argv, "path")))
        o->s.path = v;
    if ((v = bench_arg(argc, argv, "size")) &&
        (bench_parse_size(v, &o->s.size) || o->s.size < 4096))
        return fprintf(stderr, "ztier bench nvme: --size '%s' is not a size >= 4K\n", v), -1;
    if ((v = bench_arg(argc, argv, "block-size")) &&
        (bench_parse_size(v, &o->s.block) || o->s.block % 4096 || o->s.block == 0))
        return fprintf(stderr, "ztier bench nvme: --block-size must be a multiple of 4K\n"), -1;
    if ((v = bench_arg(argc, argv, "queue-depth")) && ((o->s.qd = atoi(v)) < 1 || o->s.qd > 4096))
        return fprintf(stderr, "ztier bench nvme: --queue-depth must be 1..4096\n"), -1;
    if ((v = bench_arg(argc, argv, "reps")))
        o->reps = atoi(v) < 3 ? 3 : atoi(v) > MAX_REPS ? MAX_REPS : atoi(v);
    if ((v = bench_arg(argc, argv, "engine"))) {
        if (!strcmp(v, "uring") || !strcmp(v, "io_uring"))
            o->s.engine = ZT_IO_ENGINE_URING;
        else if (!strcmp(v, "threads"))
            o->s.engine = ZT_IO_ENGINE_THREADS;
        else if (strcmp(v, "auto"))
            return fprintf(stderr, "ztier bench nvme: --engine is uring, threads or auto\n"), -1;
    }
    o->s.size = (o->s.size + o->s.block - 1) / o->s.block * o->s.block;
    return 0;
}

/* Where fio runs: the bytes of ztier's swap file that ztier's runs move. */
typedef struct fio_target {
    const char *file;
    uint64_t offset;
} fio_target;

/* One fio job with ztier's settings: io_uring, O_DIRECT, the same block size and queue depth,
 * the same bytes of the same (preallocated) file written in place, and registered buffers
 * and file (as ztier registers its buffers: --fixedbufs --registerfiles). Returns GB/s or a
 * negative number when fio failed. */
static double run_fio(const nvme_opts *o, const fio_target *t, const char *rw, int qd)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "fio --name=ztier-bench --filename='%s' --offset=%llu --ioengine=io_uring "
             "--direct=1 --rw=%s --bs=%llu --iodepth=%d --size=%llu --numjobs=1 "
             "--overwrite=1 --fixedbufs --registerfiles --output-format=json 2>/dev/null",
             t->file, (unsigned long long)t->offset, rw, (unsigned long long)o->s.block, qd,
             (unsigned long long)o->s.size);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    json_error_t je;
    json_t *root = json_loadf(p, 0, &je);
    pclose(p);
    json_t *job = json_array_get(json_object_get(root, "jobs"), 0);
    json_t *bw =
        json_object_get(json_object_get(job, !strcmp(rw, "read") ? "read" : "write"), "bw_bytes");
    double gbps = json_is_number(bw) ? json_number_value(bw) / 1e9 : -1;
    json_decref(root);
    return gbps;
}

/* The queue depths fio is run at: 1, 4, ztier's, and a deeper one (8x ztier's, at most the
 * blocks in the file and 1024). Some devices, virtual disks especially, write faster at a low
 * depth. Some read faster the more memory the transfers spread over: fio reuses one buffer
 * per transfer in flight, where ztier reads into distinct buffers; the deeper run spreads
 * fio's buffers over more memory (on the development VM that still leaves fio below ztier:
 * see docs/benchmarks.md). */
static int fio_depths(const nvme_opts *o, int depth[FIO_DEPTHS])
{
    int n = 0;
    uint64_t blocks = o->s.size / o->s.block, deep = (uint64_t)o->s.qd * 8;
    deep = deep < blocks ? deep : blocks;
    const int want[FIO_DEPTHS] = {1, 4, o->s.qd, (int)(deep < 1024 ? deep : 1024)};
    for (int k = 0; k < FIO_DEPTHS; k++)
        if ((k == FIO_DEPTHS - 1 || want[k] <= o->s.qd) && (n == 0 || want[k] > depth[n - 1]))
            depth[n++] = want[k];
    return n;
}

/* fio's best GB/s over fio_depths (the depth in *best_qd); negative when a run failed. */
static double best_fio(const nvme_opts *o, const fio_target *t, const char *rw, int *best_qd)
{
    int depth[FIO_DEPTHS], n = fio_depths(o, depth);
    double best = 0;
    for (int k = 0; k < n; k++) {
        double g = run_fio(o, t, rw, depth[k]);
        if (g < 0)
            return g;
        if (g > best)
            best = g, *best_qd = depth[k];
    }
    return best;
}

/* The depth that won most rounds. */
static int usual_depth(const int *qd, int reps)
{
    int best = qd[0], best_count = 0;
    for (int i = 0; i < reps; i++) {
        int c = 0;
        for (int j = 0; j < reps; j++)
            c += qd[j] == qd[i];
        if (c > best_count)
            best = qd[i], best_count = c;
    }
    return best;
}

double bench_nvme_run(bench_nvme_file *z, int write)
{
    zt_swap_io io;
    zt_error err = {0};
    double t0 = bench_now();
    zt_status st = write ? zt_swap_write(z->sw, &z->x, z->buf, z->size, &io, &err)
                         : zt_swap_read(z->sw, &z->x, z->buf, z->size, &io, &err);
    if (st == ZT_OK)
        st = zt_swap_wait(z->sw, &io, &err);
    if (st != ZT_OK) {
        fprintf(stderr, "ztier bench: %s\n", err.msg);
        return -1;
    }
    return (double)z->size / (bench_now() - t0) / 1e9;
}

/* fio's best (1 without fio: t NULL) and ztier's GB/s for one direction, fio first when
 * fio_first. */
static void measure_pair(bench_nvme_file *z, const nvme_opts *o, const fio_target *t, int write,
                         int fio_first, double *fio, double *ztier, int *fio_qd)
{
    if (!fio_first)
        *ztier = bench_nvme_run(z, write);
    *fio = t ? best_fio(o, t, write ? "write" : "read", fio_qd) : 1;
    if (fio_first)
        *ztier = bench_nvme_run(z, write);
}

int bench_nvme_open(bench_nvme_file *z, const bench_nvme_spec *o, const char *cmd)
{
    zt_swap_config c;
    memset(&c, 0, sizeof c);
    memset(z, 0, sizeof *z);
    c.paths[0] = o->path;
    c.n_paths = 1;
    c.tag = "bench";
    c.rank = o->rank;
    c.block_size = o->block;
    c.queue_depth = o->qd;
    c.threads = o->qd < 16 ? o->qd : 16;
    c.engine = o->engine;
    z->size = o->size;
    zt_error err = {0};
    if (zt_swap_create(&c, o->size, &z->sw, &err) != ZT_OK ||
        zt_swap_alloc(z->sw, o->size, "benchmark", &z->x, &err) != ZT_OK ||
        posix_memalign(&z->buf, 4096, o->size) != 0) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg[0] ? err.msg : "out of memory");
        return -1;
    }
    /* incompressible data, as optimizer state is (a mostly-zero buffer is written and read
     * faster than real data by a virtual disk whose host compresses) */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i + 8 <= o->size; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy((char *)z->buf + i, &x, 8);
    }
    size_t len = o->size;
    zt_swap_register_buffers(z->sw, &z->buf, &len, 1); /* as the runtime does */
    return 0;
}

void bench_nvme_close(bench_nvme_file *z)
{
    zt_swap_destroy(z->sw);
    free(z->buf);
    z->sw = NULL, z->buf = NULL;
}

static void report(const nvme_opts *o, const char *engine, int have_fio,
                   const double v[4][MAX_REPS], const int fio_qd[2][MAX_REPS])
{
    double r[2][MAX_REPS];
    for (int i = 0; i < o->reps; i++) {
        r[0][i] = v[1][i] / v[0][i]; /* ztier write / fio write */
        r[1][i] = v[3][i] / v[2][i];
    }
    double fw = have_fio ? bench_median(v[0], o->reps) : -1, zw = bench_median(v[1], o->reps);
    double fr = have_fio ? bench_median(v[2], o->reps) : -1, zr = bench_median(v[3], o->reps);
    double rw = have_fio ? bench_median(r[0], o->reps) : -1,
           rr = have_fio ? bench_median(r[1], o->reps) : -1;
    char sz[32], bs[32];
    printf("ztier bench nvme: %s in '%s', block %s, queue depth %d, O_DIRECT, engine %s, "
           "%d interleaved rounds\n",
           bench_fmt_bytes(o->s.size, sz, sizeof sz), o->s.path,
           bench_fmt_bytes(o->s.block, bs, sizeof bs), o->s.qd, engine, o->reps);
    int wq = usual_depth(fio_qd[0], o->reps), rq = usual_depth(fio_qd[1], o->reps);
    if (have_fio) {
        int depth[FIO_DEPTHS], n = fio_depths(o, depth);
        printf("  limit: fio (io_uring, O_DIRECT, same file size and block), the best of queue "
               "depths");
        for (int k = 0; k < n; k++)
            printf(" %d", depth[k]);
        printf(" in each round\n");
        printf("  %-8s %12s %12s %10s %s\n", "", "ztier GB/s", "fio GB/s", "ratio",
               "fio's best depth (most rounds)");
        printf("  %-8s %12.3f %12.3f %10.3f %d%s\n", "write", zw, fw, rw, wq,
               rw > 1.05 ? "  (above 1.05: fio is not this device's limit)" : "");
        printf("  %-8s %12.3f %12.3f %10.3f %d%s\n", "read", zr, fr, rr, rq,
               rr > 1.05 ? "  (above 1.05: fio is not this device's limit)" : "");
    } else {
        printf("  %-8s %12s %12s %10s\n", "", "ztier GB/s", "fio GB/s", "ratio");
        printf("  %-8s %12.3f %12s %10s\n", "write", zw, "-", "-");
        printf("  %-8s %12.3f %12s %10s\n", "read", zr, "-", "-");
        printf("  fio is not installed (apt-get install fio): no reference figures\n");
    }
    if (!o->json)
        return;
    if (have_fio)
        printf("{\"size\":%llu,\"block_size\":%llu,\"queue_depth\":%d,\"engine\":\"%s\","
               "\"read_gbps\":%.4f,\"write_gbps\":%.4f,\"fio_read_gbps\":%.4f,"
               "\"fio_write_gbps\":%.4f,\"read_ratio\":%.4f,\"write_ratio\":%.4f,"
               "\"fio_read_depth\":%d,\"fio_write_depth\":%d}\n",
               (unsigned long long)o->s.size, (unsigned long long)o->s.block, o->s.qd, engine, zr,
               zw, fr, fw, rr, rw, rq, wq);
    else
        printf("{\"size\":%llu,\"block_size\":%llu,\"queue_depth\":%d,\"engine\":\"%s\","
               "\"read_gbps\":%.4f,\"write_gbps\":%.4f,\"fio_read_gbps\":null,"
               "\"fio_write_gbps\":null,\"read_ratio\":null,\"write_ratio\":null}\n",
               (unsigned long long)o->s.size, (unsigned long long)o->s.block, o->s.qd, engine, zr,
               zw);
}

int cmd_bench_nvme(int argc, char **argv)
{
    nvme_opts o;
    if (parse(argc, argv, &o) != 0)
        return 2;
    bench_nvme_file z;
    if (bench_nvme_open(&z, &o.s, "ztier bench nvme") != 0) {
        bench_nvme_close(&z);
        return 1;
    }
    int have_fio = system("fio --version >/dev/null 2>&1") == 0;
    double v[4][MAX_REPS] = {{0}};   /* fio write, ztier write, fio read, ztier read */
    int fio_qd[2][MAX_REPS] = {{0}}; /* the depth of fio's best write, read */
    fio_target t;
    t.file = zt_swap_locate(z.sw, &z.x, 0, &t.offset); /* one folder: one file, contiguous */
    bench_nvme_run(&z, 1), bench_nvme_run(&z, 0);      /* warm-up: allocation, first touch */
    if (have_fio)
        run_fio(&o, &t, "write", o.s.qd), run_fio(&o, &t, "read", o.s.qd);
    int ok = 1;
    for (int i = 0; i < o.reps && ok; i++) {
        int fio_first = i % 2 == 0; /* writes, then reads */
        measure_pair(&z, &o, have_fio ? &t : NULL, 1, fio_first, &v[0][i], &v[1][i], &fio_qd[0][i]);
        measure_pair(&z, &o, have_fio ? &t : NULL, 0, fio_first, &v[2][i], &v[3][i], &fio_qd[1][i]);
        ok = v[1][i] > 0 && v[3][i] > 0 && v[0][i] > 0 && v[2][i] > 0;
    }
    const char *engine = zt_swap_engine_name(z.sw);
    if (ok)
        report(&o, engine, have_fio, (const double(*)[MAX_REPS])v, (const int(*)[MAX_REPS])fio_qd);
    else
        fprintf(stderr, "ztier bench nvme: a run failed (see above)\n");
    bench_nvme_close(&z);
    return ok ? 0 : 1;
}

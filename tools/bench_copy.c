/* SPDX-License-Identifier: MIT */
/* `ztier bench copy`: host<->device copies of a device backend, and the runtime's own fetch
 * path, against the physical limit measured in the same run over the same pinned buffers:
 *   - the limit: with cuda, cudaMemcpyAsync of pinned memory straight through the CUDA
 *     runtime (bench_copy_cuda.c); with the host backend, whose "device" is host memory,
 *     memcpy;
 *   - backend: the backend's memcpy_async (what every ztier copy goes through);
 *   - fetch: zt_fetch of one layer of --size bytes whose parameters live in (pinned) host
 *     memory, which gathers it to the device each time (prefetching off), timed from the
 *     call to the data being usable.
 * Rounds are interleaved (limit, backend, fetch, ...); medians and ratios to the limit are
 * printed, and a ratio above 1.05 is flagged: it means the limit is not one. */
#include "tools/bench_common.h"
#include "tools/bench_copy.h"
#include "tools/commands.h"

#include "ztier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZT_HAVE_CUDA
/* bench_copy_cuda.c: one synchronous pinned copy through the CUDA runtime; GB/s, < 0 on
 * error. h2d: 1 host->device, 0 device->host. */
double bench_cuda_raw_copy(void *dev_ptr, void *host_ptr, size_t bytes, int h2d);
#endif

double bench_copy_backend(bench_copy_bufs *c, zt_copy_kind kind)
{
    zt_error err;
    double t0 = bench_now();
    zt_status st =
        kind == ZT_COPY_H2D
            ? zt_device_copy_sync(c->dev, c->device, c->host, c->bytes, kind, c->stream, &err)
            : zt_device_copy_sync(c->dev, c->host, c->device, c->bytes, kind, c->stream, &err);
    if (st != ZT_OK)
        return fprintf(stderr, "ztier bench: a copy: %s\n", err.msg), -1;
    return (double)c->bytes / (bench_now() - t0) / 1e9;
}

double bench_copy_both(bench_copy_bufs *c)
{
    zt_error err = {0};
    double t0 = bench_now();
    zt_status st =
        zt_device_memcpy_async(c->dev, c->device, c->host, c->bytes, ZT_COPY_H2D, c->stream, &err);
    if (st == ZT_OK)
        st = zt_device_memcpy_async(c->dev, c->host2, c->device2, c->bytes, ZT_COPY_D2H, c->stream2,
                                    &err);
    if (st == ZT_OK)
        st = zt_device_stream_synchronize(c->dev, c->stream, &err);
    if (st == ZT_OK)
        st = zt_device_stream_synchronize(c->dev, c->stream2, &err);
    if (st != ZT_OK)
        return fprintf(stderr, "ztier bench: copies both ways at once: %s\n", err.msg), -1;
    return 2.0 * (double)c->bytes / (bench_now() - t0) / 1e9;
}

double bench_copy_limit(bench_copy_bufs *c, zt_copy_kind kind)
{
#ifdef ZT_HAVE_CUDA
    if (c->cuda)
        return bench_cuda_raw_copy(c->device, c->host, c->bytes, kind == ZT_COPY_H2D);
#endif
    double t0 = bench_now();
    if (kind == ZT_COPY_H2D)
        memcpy(c->device, c->host, c->bytes);
    else
        memcpy(c->host2, c->device, c->bytes);
    return (double)c->bytes / (bench_now() - t0) / 1e9;
}

int bench_copy_open(bench_copy_bufs *c, const char *backend, size_t bytes, int local_rank,
                    int local_size, const char *cmd)
{
    zt_error err = {0};
    const zt_device_iface *iface = zt_device_find(backend, &err);
    zt_device_config dc = {(uint64_t)bytes * 2, -1, 1, NULL, local_rank, local_size};
    memset(c, 0, sizeof *c);
    c->bytes = bytes;
    c->cuda = iface && !strcmp(iface->name, "cuda");
    if (!iface || iface->create(&dc, &c->dev, &err) != ZT_OK ||
        zt_device_stream_create(c->dev, &c->stream, &err) != ZT_OK ||
        zt_device_stream_create(c->dev, &c->stream2, &err) != ZT_OK ||
        zt_device_host_alloc(c->dev, bytes, &c->host, &err) != ZT_OK ||
        zt_device_host_alloc(c->dev, bytes, &c->host2, &err) != ZT_OK ||
        zt_device_alloc(c->dev, bytes, &c->device, &err) != ZT_OK ||
        zt_device_alloc(c->dev, bytes, &c->device2, &err) != ZT_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        return -1;
    }
    memset(c->host, 1, bytes);
    memset(c->host2, 2, bytes);
    return 0;
}

void bench_copy_close(bench_copy_bufs *c)
{
    if (!c->dev)
        return;
    if (c->device)
        zt_device_free(c->dev, c->device);
    if (c->device2)
        zt_device_free(c->dev, c->device2);
    if (c->host)
        zt_device_host_free(c->dev, c->host);
    if (c->host2)
        zt_device_host_free(c->dev, c->host2);
    if (c->stream)
        zt_device_stream_destroy(c->dev, c->stream);
    if (c->stream2)
        zt_device_stream_destroy(c->dev, c->stream2);
    zt_device_destroy(c->dev);
    c->dev = NULL;
}

/* ---- the runtime's fetch path ---------------------------------------------------------- */

typedef struct fetch_ctx {
    zt_runtime *rt;
    int layer;
    size_t bytes;
} fetch_ctx;

static int fetch_setup(fetch_ctx *f, const char *backend, size_t bytes)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
             " \"offload_optimizer\": {\"device\": \"cpu\"},"
             " \"stage3_param_persistence_threshold\": 0, \"stage3_prefetch_bucket_size\": 0},"
             " \"ztier\": {\"device_backend\": \"%s\", \"hbm_capacity\": %llu,"
             " \"optimizer_threads\": 1}}",
             backend, (unsigned long long)bytes * 3);
    zt_options opts = ZT_OPTIONS_INIT;
    opts.log_level = 0;
    int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
    zt_init init = {ZT_INIT_CONSTANT, 0.5f, 0, 0, NULL, NULL};
    int p;
    f->bytes = (size_t)shape[0] * sizeof(float);
    if (zt_runtime_create(&opts, cfg, &f->rt) != ZT_OK ||
        zt_layer_add(f->rt, "layer", &f->layer) != ZT_OK ||
        zt_param_add(f->rt, f->layer, "w", shape, 1, &init, &p) != ZT_OK ||
        zt_runtime_commit(f->rt) != ZT_OK) {
        fprintf(stderr, "ztier bench copy: the fetch path: %s\n", zt_last_error(f->rt));
        return -1;
    }
    return 0;
}

/* One inference fetch: the layer is gathered from its host home (nothing keeps it). */
static double time_fetch(fetch_ctx *f)
{
    zt_layer_view v;
    double t0 = bench_now();
    if (zt_fetch(f->rt, f->layer, ZT_INFERENCE, &v) != ZT_OK)
        return -1;
    double t = bench_now() - t0;
    zt_release(f->rt, f->layer, ZT_INFERENCE);
    return (double)f->bytes / t / 1e9;
}

static void print_row(const char *name, double gbps, double ratio)
{
    printf("  %-14s %10.2f %10.2f%s\n", name, gbps, ratio,
           ratio > 1.05 ? "  (above the limit: the limit is wrong)" : "");
}

int cmd_bench_copy(int argc, char **argv)
{
    static const char *const known[] = {"size", "backend", "reps", NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return 2;
    uint64_t size = 256u << 20;
    const char *s = bench_arg(argc, argv, "size");
    if (s && (bench_parse_size(s, &size) != 0 || size < 4096)) {
        fprintf(stderr, "ztier bench copy: --size '%s' is not a size of 4K or more (e.g. 256M)\n",
                s);
        return 2;
    }
    const char *backend = bench_arg(argc, argv, "backend");
    backend = backend ? backend : "host";
    int reps = bench_arg(argc, argv, "reps") ? atoi(bench_arg(argc, argv, "reps")) : 5;
    reps = reps < 3 ? 3 : reps > 64 ? 64 : reps;
    bench_copy_bufs c = {0};
    fetch_ctx f = {0};
    if (bench_copy_open(&c, backend, (size_t)size, 0, 1, "ztier bench copy") != 0 ||
        fetch_setup(&f, backend, (size_t)size) != 0) {
        bench_copy_close(&c);
        zt_runtime_destroy(f.rt);
        return 1;
    }
    /* warm-up */
    bench_copy_limit(&c, ZT_COPY_H2D), bench_copy_backend(&c, ZT_COPY_H2D), time_fetch(&f);
    double lh[64], ld[64], h2d[64], d2h[64], fe[64], rh[64], rd[64], rf[64], nw[64];
    for (int i = 0; i < reps; i++) {
        lh[i] = bench_copy_limit(&c, ZT_COPY_H2D);
        h2d[i] = bench_copy_backend(&c, ZT_COPY_H2D);
        fe[i] = time_fetch(&f);
        ld[i] = bench_copy_limit(&c, ZT_COPY_D2H);
        d2h[i] = bench_copy_backend(&c, ZT_COPY_D2H);
        rh[i] = h2d[i] / lh[i];
        rf[i] = fe[i] / lh[i];
        rd[i] = d2h[i] / ld[i];
        nw[i] = bench_fresh_touch((size_t)size); /* new pages: what a missed cache pays */
    }
    const char *limit = c.cuda ? "pinned cudaMemcpyAsync" : "memcpy";
    char buf[32];
    printf("ztier bench copy: backend %s, %s per copy, %d interleaved rounds; limit: %s of "
           "the same pinned buffers\n",
           c.dev->iface->name, bench_fmt_bytes(size, buf, sizeof buf), reps, limit);
    printf("  %-14s %10s %10s\n", "copy", "GB/s", "vs limit");
    print_row("limit h2d", bench_median(lh, reps), 1.0);
    print_row("backend h2d", bench_median(h2d, reps), bench_median(rh, reps));
    print_row("fetch h2d", bench_median(fe, reps), bench_median(rf, reps));
    print_row("limit d2h", bench_median(ld, reps), 1.0);
    print_row("backend d2h", bench_median(d2h, reps), bench_median(rd, reps));
    print_row("new pages", bench_median(nw, reps), bench_median(nw, reps) / bench_median(lh, reps));
    if (bench_flag(argc, argv, "json"))
        printf("{\"backend\":\"%s\",\"bytes\":%llu,\"reps\":%d,\"limit\":\"%s\","
               "\"limit_h2d_gbps\":%.3f,\"limit_d2h_gbps\":%.3f,\"h2d_gbps\":%.3f,"
               "\"d2h_gbps\":%.3f,\"fetch_h2d_gbps\":%.3f,\"h2d_ratio\":%.3f,"
               "\"d2h_ratio\":%.3f,\"fetch_ratio\":%.3f,\"fresh_gbps\":%.3f}\n",
               c.dev->iface->name, (unsigned long long)size, reps, limit, bench_median(lh, reps),
               bench_median(ld, reps), bench_median(h2d, reps), bench_median(d2h, reps),
               bench_median(fe, reps), bench_median(rh, reps), bench_median(rd, reps),
               bench_median(rf, reps), bench_median(nw, reps));
    bench_copy_close(&c);
    zt_runtime_destroy(f.rt);
    return 0;
}

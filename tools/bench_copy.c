/* `ztier bench copy`: host<->device copy bandwidth of a device backend against memcpy over
 * the same buffers, interleaved (memcpy, h2d, d2h, ...), medians and pairwise ratios. */
#include "runtime/device/device.h"
#include "tools/bench_common.h"
#include "tools/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct copy_ctx {
    zt_device *dev;
    zt_stream *stream;
    void *host, *device, *host2;
    size_t bytes;
} copy_ctx;

static double time_copy(copy_ctx *c, zt_copy_kind kind)
{
    zt_error err;
    double t0 = bench_now();
    if (kind == ZT_COPY_H2D)
        zt_device_copy_sync(c->dev, c->device, c->host, c->bytes, kind, c->stream, &err);
    else
        zt_device_copy_sync(c->dev, c->host, c->device, c->bytes, kind, c->stream, &err);
    return (double)c->bytes / (bench_now() - t0) / 1e9;
}

static double time_memcpy(copy_ctx *c)
{
    double t0 = bench_now();
    memcpy(c->host2, c->host, c->bytes);
    return (double)c->bytes / (bench_now() - t0) / 1e9;
}

static int setup(copy_ctx *c, const char *backend, size_t bytes)
{
    zt_error err = {0};
    const zt_device_iface *iface = zt_device_find(backend, &err);
    zt_device_config dc = {(uint64_t)bytes * 2, 0, 1};
    c->bytes = bytes;
    if (!iface || iface->create(&dc, &c->dev, &err) != ZT_OK ||
        iface->stream_create(c->dev, &c->stream, &err) != ZT_OK ||
        iface->host_alloc(c->dev, bytes, &c->host, &err) != ZT_OK ||
        iface->host_alloc(c->dev, bytes, &c->host2, &err) != ZT_OK ||
        iface->alloc(c->dev, bytes, &c->device, &err) != ZT_OK) {
        fprintf(stderr, "ztier bench copy: %s\n", err.msg);
        return -1;
    }
    memset(c->host, 1, bytes);
    memset(c->host2, 2, bytes);
    return 0;
}

static void teardown(copy_ctx *c)
{
    if (!c->dev)
        return;
    const zt_device_iface *iface = c->dev->iface;
    iface->free(c->dev, c->device);
    if (c->host)
        iface->host_free(c->dev, c->host);
    if (c->host2)
        iface->host_free(c->dev, c->host2);
    if (c->stream)
        iface->stream_destroy(c->dev, c->stream);
    iface->destroy(c->dev);
}

int cmd_bench_copy(int argc, char **argv)
{
    static const char *const known[] = {"size", "backend", "reps", NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return 2;
    uint64_t size = 256u << 20;
    const char *s = bench_arg(argc, argv, "size");
    if (s && (bench_parse_size(s, &size) != 0 || size == 0)) {
        fprintf(stderr, "ztier bench copy: --size '%s' is not a size (e.g. 256M)\n", s);
        return 2;
    }
    const char *backend = bench_arg(argc, argv, "backend");
    int reps = bench_arg(argc, argv, "reps") ? atoi(bench_arg(argc, argv, "reps")) : 5;
    reps = reps < 3 ? 3 : reps > 64 ? 64 : reps;
    copy_ctx c = {0};
    if (setup(&c, backend ? backend : "host", (size_t)size) != 0) {
        teardown(&c);
        return 1;
    }
    time_memcpy(&c), time_copy(&c, ZT_COPY_H2D), time_copy(&c, ZT_COPY_D2H); /* warm-up */
    double mc[64], h2d[64], d2h[64], rh[64], rd[64];
    for (int i = 0; i < reps; i++) {
        mc[i] = time_memcpy(&c);
        h2d[i] = time_copy(&c, ZT_COPY_H2D);
        d2h[i] = time_copy(&c, ZT_COPY_D2H);
        rh[i] = h2d[i] / mc[i];
        rd[i] = d2h[i] / mc[i];
    }
    char buf[32];
    printf("ztier bench copy: backend %s, %s per copy, %d interleaved rounds, 1 thread\n",
           c.dev->iface->name, bench_fmt_bytes(size, buf, sizeof buf), reps);
    printf("  %-8s %10s %10s\n", "copy", "GB/s", "vs memcpy");
    printf("  %-8s %10.2f %10s\n", "memcpy", bench_median(mc, reps), "1.00");
    printf("  %-8s %10.2f %10.2f\n", "h2d", bench_median(h2d, reps), bench_median(rh, reps));
    printf("  %-8s %10.2f %10.2f\n", "d2h", bench_median(d2h, reps), bench_median(rd, reps));
    if (bench_flag(argc, argv, "json"))
        printf("{\"backend\":\"%s\",\"bytes\":%llu,\"reps\":%d,\"memcpy_gbps\":%.3f,"
               "\"h2d_gbps\":%.3f,\"d2h_gbps\":%.3f,\"h2d_ratio\":%.3f,\"d2h_ratio\":%.3f}\n",
               c.dev->iface->name, (unsigned long long)size, reps, bench_median(mc, reps),
               bench_median(h2d, reps), bench_median(d2h, reps), bench_median(rh, reps),
               bench_median(rd, reps));
    teardown(&c);
    return 0;
}

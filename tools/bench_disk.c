/* SPDX-License-Identifier: MIT */
/* The disk's own bandwidth, measured through the swap space (O_DIRECT, 1 MiB blocks,
 * queue depth 32): the limit the offload benchmarks compare their floors against. */
#include "tools/bench_disk.h"
#include "tiers/swap.h"
#include "tools/bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_disk_bandwidth(const char *path, uint64_t size, double *read_bps, double *write_bps)
{
    zt_swap_config c;
    memset(&c, 0, sizeof c);
    c.paths[0] = path, c.n_paths = 1, c.tag = "bench-disk", c.block_size = 1 << 20;
    c.queue_depth = 32, c.threads = 8;
    zt_swap *sw = NULL;
    zt_swap_extent x;
    zt_swap_io io;
    zt_error err = {0};
    void *buf = NULL;
    int ok = zt_swap_create(&c, size, &sw, &err) == ZT_OK &&
             zt_swap_alloc(sw, size, "bandwidth probe", &x, &err) == ZT_OK &&
             posix_memalign(&buf, 4096, size) == 0;
    if (ok) {
        memset(buf, 1, size);
        double t0 = bench_now();
        ok = zt_swap_write(sw, &x, buf, size, &io, &err) == ZT_OK &&
             zt_swap_wait(sw, &io, &err) == ZT_OK;
        double t1 = bench_now();
        ok = ok && zt_swap_read(sw, &x, buf, size, &io, &err) == ZT_OK &&
             zt_swap_wait(sw, &io, &err) == ZT_OK;
        *write_bps = (double)size / (t1 - t0);
        *read_bps = (double)size / (bench_now() - t1);
    }
    if (!ok)
        fprintf(stderr, "ztier bench: measuring '%s': %s\n", path, err.msg);
    free(buf);
    zt_swap_destroy(sw);
    return ok ? 0 : -1;
}

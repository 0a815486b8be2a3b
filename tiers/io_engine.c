/* SPDX-License-Identifier: MIT */
/* zt_io_engine_start (io.h): the engine a short-lived reader or writer runs. */
#include "tiers/io.h"

int zt_io_engine_start(const int *fds, int n_fds, int queue_depth, zt_io_engine_kind kind,
                       const zt_io_iface **iface, zt_io_engine **out, char *why, size_t why_len)
{
    if (kind != ZT_IO_ENGINE_THREADS &&
        zt_io_uring_engine.create(fds, n_fds, queue_depth, 1, out, why, why_len) == 0) {
        *iface = &zt_io_uring_engine;
        return 0;
    }
    int rc = zt_io_threads_engine.create(fds, n_fds, queue_depth, 2, out, why, why_len);
    if (rc == 0)
        *iface = &zt_io_threads_engine;
    return rc;
}

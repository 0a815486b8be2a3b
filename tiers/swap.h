/* SPDX-License-Identifier: MIT */
/* The NVMe tier: a swap space of preallocated files (one per folder, stable names, a lock so
 * two runs never share it, removed on destroy) with extents carved from it in blocks that
 * are striped over all folders. Reads and writes are asynchronous: they are split into
 * blocks, run by an I/O engine (io_uring, or a thread pool where io_uring is unavailable)
 * and waited for with zt_swap_wait. Optional CRC-32 per block detects damaged data. */
#ifndef ZT_TIERS_SWAP_H
#define ZT_TIERS_SWAP_H

#include "core/error.h"
#include "tiers/io.h"

#define ZT_MAX_NVME_PATHS 8 /* folders a swap space stripes over */
#define ZT_PATH_MAX 1024    /* bytes of a folder path, NUL included */

#include <pthread.h>
#include <stdint.h>

typedef struct zt_swap zt_swap;

typedef struct zt_swap_config {
    const char *paths[ZT_MAX_NVME_PATHS];
    int n_paths;
    const char *tag; /* part of the file names: "param", "optim", "bench" */
    int rank;
    uint64_t block_size; /* bytes, a multiple of 4096 */
    int queue_depth;
    int threads; /* thread-pool engine workers */
    zt_io_engine_kind engine;
    int allow_buffered; /* fall back to buffered I/O where O_DIRECT is unsupported */
    int verify_checksums;
} zt_swap_config;

typedef struct zt_swap_extent {
    uint64_t first_block, n_blocks;
    const char *owner; /* tensor name for messages; not owned */
} zt_swap_extent;

/* One read or write in flight. Storage is the caller's; it must stay put until
 * zt_swap_wait returns. */
typedef struct zt_swap_io {
    zt_swap *sw;
    int op;
    const zt_swap_extent *x;
    int pending;
    int error;            /* first -errno, or -EBADMSG for a checksum mismatch */
    uint64_t bad_offset;  /* byte offset inside the extent of the failed block */
    uint64_t first_block; /* block of the extent where this transfer starts */
    zt_io_piece *pieces;
    int n_pieces;
    double t_start;
    uint64_t bytes;
} zt_swap_io;

typedef struct zt_swap_stats {
    uint64_t capacity, used;
    uint64_t read_bytes, write_bytes;
    double read_s, write_s; /* time callers spent waiting for transfers */
    int max_inflight;
    uint64_t fixed_ios; /* transfers from registered buffers */
} zt_swap_stats;

/* Checks the folders, takes their locks and preallocates capacity bytes striped over them.
 * A swap file of this tag and rank left by a killed run is reclaimed (logged at info level);
 * those of other tags or ranks are left alone. On failure nothing is left behind and the
 * message names the folder and the fix. */
zt_status zt_swap_create(const zt_swap_config *cfg, uint64_t capacity, zt_swap **out,
                         zt_error *err);

/* Bytes of swap capacity that an extent of `bytes` occupies (whole blocks). */
uint64_t zt_swap_footprint(uint64_t bytes, uint64_t block_size);

/* Bytes of each file of a swap space of `capacity` bytes (one file per folder, whole blocks,
 * at least one): what zt_swap_create preallocates in each folder. */
uint64_t zt_swap_file_bytes(const zt_swap_config *cfg, uint64_t capacity);

/* One swap space a run will create (zt_swap_check_run). */
typedef struct zt_swap_need {
    const zt_swap_config *cfg;
    uint64_t capacity;
    const char *what; /* for the message: "parameters", "optimizer state", ... */
} zt_swap_need;

/* Before a run creates its swap spaces: for each filesystem their folders are on, the bytes
 * all of them will take there, times `copies` (the ranks of this node, which write the same
 * folders), against its free space (other ztier swap files counted as free, as they may be
 * stale; zt_swap_create's own check and preallocation stay the final judge). ZT_ERR_NOSPACE
 * names a folder of the filesystem, the run's total there, its parts and what is free. */
zt_status zt_swap_check_run(const zt_swap_need *needs, int n, int copies, zt_error *err);

zt_status zt_swap_alloc(zt_swap *sw, uint64_t bytes, const char *owner, zt_swap_extent *out,
                        zt_error *err);

/* Start moving len bytes between buf and the extent's start. buf must be 4096-aligned and
 * hold len rounded up to 4096 bytes (the extra bytes are transferred too). */
zt_status zt_swap_read(zt_swap *sw, const zt_swap_extent *x, void *buf, uint64_t len,
                       zt_swap_io *io, zt_error *err);
zt_status zt_swap_write(zt_swap *sw, const zt_swap_extent *x, const void *buf, uint64_t len,
                        zt_swap_io *io, zt_error *err);
/* The same for a range that starts `offset` bytes into the extent; offset must be a
 * multiple of the block size. */
zt_status zt_swap_read_at(zt_swap *sw, const zt_swap_extent *x, uint64_t offset, void *buf,
                          uint64_t len, zt_swap_io *io, zt_error *err);
zt_status zt_swap_write_at(zt_swap *sw, const zt_swap_extent *x, uint64_t offset, const void *buf,
                           uint64_t len, zt_swap_io *io, zt_error *err);
uint64_t zt_swap_block_size(const zt_swap *sw);
/* Waits for a transfer; errors name the tensor, the file and the offset. */
zt_status zt_swap_wait(zt_swap *sw, zt_swap_io *io, zt_error *err);
/* 1 when the transfer has completed (zt_swap_wait then returns at once), else 0. */
int zt_swap_done(zt_swap *sw, const zt_swap_io *io);

/* Registers up to 16 buffers with the io_uring engine before the first transfer, so reads and
 * writes from them skip per-request page pinning. A no-op (0) with the thread-pool engine;
 * otherwise 0 or -errno (the swap works unregistered either way). */
int zt_swap_register_buffers(zt_swap *sw, void *const *bufs, const size_t *lens, int n);

void zt_swap_get_stats(zt_swap *sw, zt_swap_stats *out);
const char *zt_swap_engine_name(const zt_swap *sw);
/* The file that holds byte `offset` of an extent, and the offset in it (for tests/messages). */
const char *zt_swap_locate(const zt_swap *sw, const zt_swap_extent *x, uint64_t offset,
                           uint64_t *file_offset);

/* Waits for nothing: the caller must have waited for its transfers. Closes and removes the
 * files and locks. NULL is a no-op. */
void zt_swap_destroy(zt_swap *sw);

#endif

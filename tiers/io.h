/* SPDX-License-Identifier: MIT */
/* I/O engines: execute aligned reads and writes ("pieces") on a set of open files. An engine
 * owns its own threads, so transfers progress while the caller computes; completions are
 * reported through a callback from the engine's thread. Inside the I/O layer results are
 * byte counts or -errno (liburing style); short transfers are completed by the engine. */
#ifndef ZT_TIERS_IO_H
#define ZT_TIERS_IO_H

#include <stddef.h>
#include <stdint.h>

enum { ZT_IO_READ = 0, ZT_IO_WRITE = 1 };

/* Which engine a swap space runs (zt_swap_config.engine). */
typedef enum zt_io_engine_kind {
    ZT_IO_ENGINE_AUTO = 0, /* io_uring, falling back to threads with a log line saying why */
    ZT_IO_ENGINE_URING,
    ZT_IO_ENGINE_THREADS
} zt_io_engine_kind;

typedef struct zt_io_piece zt_io_piece;
typedef void (*zt_io_done_fn)(zt_io_piece *piece, int result); /* result: 0 or -errno */

struct zt_io_piece {
    int op;          /* ZT_IO_READ / ZT_IO_WRITE */
    int file;        /* index into the engine's files */
    uint64_t offset; /* byte offset in the file, aligned for O_DIRECT */
    void *buf;
    uint32_t len;
    uint32_t done; /* bytes transferred so far (short transfers resume from here) */
    int buf_index; /* registered buffer index, or -1 */
    zt_io_done_fn on_done;
    void *user;
    zt_io_piece *next; /* engine-internal queue link */
};

typedef struct zt_io_engine zt_io_engine;

typedef struct zt_io_iface {
    const char *name;
    /* fds stay owned by the caller and open until destroy. why: filled when creation fails. */
    int (*create)(const int *fds, int n_fds, int queue_depth, int threads, zt_io_engine **out,
                  char *why, size_t why_len);
    /* Optional (may be NULL): pins buffers for zero-copy I/O; returns 0 or -errno. */
    int (*register_buffers)(zt_io_engine *e, void *const *bufs, const size_t *lens, int n);
    /* Queues a piece; never blocks. The piece must stay valid until on_done runs. */
    void (*submit)(zt_io_engine *e, zt_io_piece *p);
    /* Waits for every queued piece, then stops the engine's threads. */
    void (*destroy)(zt_io_engine *e);
} zt_io_iface;

extern const zt_io_iface zt_io_uring_engine;
/* Pieces the io_uring engine ran from registered buffers. */
uint64_t zt_io_uring_fixed_ios(const zt_io_engine *e);
extern const zt_io_iface zt_io_threads_engine;

/* An engine for a few files of a short-lived reader or writer (a checkpoint file): io_uring
 * with queue_depth pieces in flight, unless kind is ZT_IO_ENGINE_THREADS or io_uring cannot
 * be set up here, then the thread pool (2 workers). 0, or -errno with why filled. */
int zt_io_engine_start(const int *fds, int n_fds, int queue_depth, zt_io_engine_kind kind,
                       const zt_io_iface **iface, zt_io_engine **out, char *why, size_t why_len);

/* Injected I/O failures, for tests. Defined only in the tests' archive (ztier_test: the
 * engines compiled with ZT_TEST_HOOKS); the shipped libraries have none of them, so a program
 * that calls them links only against ztier_test. */
/* The n-th piece from now (0 = next) of kind op completes with -err. */
void zt_io_test_fail(int op, int err, int after_n);
/* 1 while the injected failure has not hit a piece yet. */
int zt_io_test_failure_pending(void);
/* Applies a pending injected failure to a piece about to run; returns -err or 0. */
int zt_io_test_take_failure(int op);

#endif

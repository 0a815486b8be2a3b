/* SPDX-License-Identifier: MIT */
/* A persistent pool of worker threads running blocking parallel-for loops. The calling thread
 * takes part; between loops the workers sleep on a condition variable (no spinning, no thread
 * creation per loop). With a NUMA node given, the workers run only on that node's cores. */
#ifndef ZT_CORE_THREADPOOL_H
#define ZT_CORE_THREADPOOL_H

#include "core/error.h"

#include <stdint.h>

typedef struct zt_threadpool zt_threadpool;

/* Processes items [begin, end). worker is 0..size-1 and identifies the thread (0 is the caller
 * of zt_threadpool_run), so fn can index per-thread scratch without locks. */
typedef void (*zt_parallel_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/* Starts threads - 1 workers (threads >= 1 counts the caller; smaller values mean 1).
 * numa_node >= 0 binds the workers to that node's cores (an error if the node does not
 * exist; a log line and no binding if libnuma reports NUMA unavailable); < 0: no binding.
 * On success *out owns the threads until zt_threadpool_destroy. */
zt_status zt_threadpool_create(int threads, int numa_node, zt_threadpool **out, zt_error *err);

/* Binds the workers to NUMA node numa_node from their next loop on, as create does (the same
 * errors; < 0 changes nothing), and makes it the node their own allocations prefer. For a
 * pool made before the node was known (the runtime's, before its GPU is open). */
zt_status zt_threadpool_bind(zt_threadpool *pool, int numa_node, zt_error *err);

/* Runs fn over [0, n_items) in chunks of `chunk` items (< 1 means 1), handed out in order to
 * whichever thread is free, and returns when every chunk is done. pool NULL, one thread, or
 * n_items <= chunk: fn runs once on the caller's thread. A call made while the pool is busy
 * (from fn itself, or from another thread) also runs on its caller's thread alone. */
void zt_threadpool_run(zt_threadpool *pool, int64_t n_items, int64_t chunk, zt_parallel_fn fn,
                       void *ctx);

/* Threads taking part in a loop, the caller included; 1 for NULL. */
int zt_threadpool_size(const zt_threadpool *pool);

/* Wakes and joins the workers (no loop may be running); NULL is a no-op. */
void zt_threadpool_destroy(zt_threadpool *pool);

#endif

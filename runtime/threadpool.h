/* A persistent pool of worker threads running parallel-for loops. The calling thread takes
 * part, workers sleep on a condition variable between loops (no spinning, no fork/join per
 * call), and with a NUMA node given the workers run on that node's cores. */
#ifndef ZT_RUNTIME_THREADPOOL_H
#define ZT_RUNTIME_THREADPOOL_H

#include "runtime/error.h"

#include <stdint.h>

typedef struct zt_threadpool zt_threadpool;

/* fn processes items [begin, end); worker is 0..threads-1 (0 is the caller). */
typedef void (*zt_parallel_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/* threads >= 1 counts the caller; numa_node < 0: no binding. */
zt_status zt_threadpool_create(int threads, int numa_node, zt_threadpool **out, zt_error *err);

/* Runs fn over [0, n_items) in chunks of `chunk` items; returns when all are done. Calls
 * must not overlap (one loop at a time per pool). */
void zt_threadpool_run(zt_threadpool *pool, int64_t n_items, int64_t chunk, zt_parallel_fn fn,
                       void *ctx);

int zt_threadpool_size(const zt_threadpool *pool);

/* Joins the workers; NULL is a no-op. */
void zt_threadpool_destroy(zt_threadpool *pool);

#endif

/* SPDX-License-Identifier: MIT */
/* Workers wait for a new generation number under the pool's mutex; zt_threadpool_run
 * publishes a loop, bumps the generation, works through chunks itself and waits until every
 * worker has reported back, so the next loop never starts while a worker is in the last one. */
#include "core/threadpool.h"
#include "core/log.h"

#include <numa.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct worker_arg {
    zt_threadpool *pool;
    int index;
    int node; /* the node this worker has bound itself to; -1: none */
} worker_arg;

struct zt_threadpool {
    int threads;
    int numa_node; /* -1: not bound; guarded by lock (zt_threadpool_bind changes it) */
    pthread_t *tids;
    worker_arg *args;
    pthread_mutex_t lock;
    pthread_cond_t start, finished;
    uint64_t generation; /* bumped for every loop; guarded by lock */
    int busy;            /* workers still in the current loop; guarded by lock */
    int stop;
    atomic_int running; /* a loop is in progress (nested or concurrent calls run alone) */
    /* the current loop, written before the generation is bumped */
    zt_parallel_fn fn;
    void *ctx;
    int64_t n_items, chunk;
    atomic_llong next; /* first item of the next chunk to hand out */
};

static void run_chunks(zt_threadpool *p, int worker)
{
    for (;;) {
        int64_t begin = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
        if (begin >= p->n_items)
            return;
        int64_t end = p->n_items - begin > p->chunk ? begin + p->chunk : p->n_items;
        p->fn(p->ctx, begin, end, worker);
    }
}

/* Moves the calling worker onto the pool's node, if that changed: its CPUs, and the node
 * preferred for the memory the worker itself allocates. Called with the lock held. */
static void follow_node(worker_arg *a)
{
    int node = a->pool->numa_node;
    if (node < 0 || node == a->node)
        return;
    a->node = node;
    if (numa_run_on_node(node) != 0)
        ZT_LOGW("threadpool", "worker %d: cannot bind to NUMA node %d", a->index, node);
    numa_set_preferred(node);
}

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    zt_threadpool *p = a->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    follow_node(a);
    for (;;) {
        while (p->generation == seen && !p->stop)
            pthread_cond_wait(&p->start, &p->lock);
        if (p->stop)
            break;
        seen = p->generation;
        follow_node(a); /* zt_threadpool_bind since the last loop */
        pthread_mutex_unlock(&p->lock);
        run_chunks(p, a->index);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->finished);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static zt_status check_numa_node(int node, int *bound, zt_error *err)
{
    *bound = -1;
    if (node < 0)
        return ZT_OK;
    if (numa_available() < 0) {
        ZT_LOGI("threadpool", "libnuma reports no NUMA support; threads are not bound to node %d",
                node);
        return ZT_OK;
    }
    if (node > numa_max_node())
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "NUMA node %d does not exist (nodes 0..%d)", node,
                      numa_max_node());
    *bound = node;
    return ZT_OK;
}

zt_status zt_threadpool_create(int threads, int numa_node, zt_threadpool **out, zt_error *err)
{
    int bound;
    zt_status st = check_numa_node(numa_node, &bound, err);
    if (st != ZT_OK)
        return st;
    if (threads < 1)
        threads = 1;
    zt_threadpool *p = calloc(1, sizeof *p);
    if (!p)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating a thread pool");
    p->threads = 1; /* destroy joins only the workers that started */
    p->numa_node = bound;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->finished, NULL);
    atomic_init(&p->running, 0);
    atomic_init(&p->next, 0);
    p->tids = calloc((size_t)threads, sizeof *p->tids);
    p->args = calloc((size_t)threads, sizeof *p->args);
    if (!p->tids || !p->args) {
        zt_threadpool_destroy(p);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating a thread pool");
    }
    for (int i = 1; i < threads; i++) {
        p->args[i] = (worker_arg){p, i, -1};
        if (pthread_create(&p->tids[i], NULL, worker_main, &p->args[i]) != 0) {
            zt_threadpool_destroy(p);
            return ZT_ERR(err, ZT_ERR_NOMEM, "cannot start thread %d of %d for the pool", i,
                          threads);
        }
        p->threads = i + 1;
    }
    if (bound >= 0)
        ZT_LOGI("threadpool", "%d threads, workers bound to NUMA node %d", threads, bound);
    *out = p;
    return ZT_OK;
}

zt_status zt_threadpool_bind(zt_threadpool *p, int numa_node, zt_error *err)
{
    int bound;
    zt_status st = check_numa_node(numa_node, &bound, err);
    if (st != ZT_OK || bound < 0 || !p)
        return st;
    pthread_mutex_lock(&p->lock);
    p->numa_node = bound;
    pthread_mutex_unlock(&p->lock);
    return ZT_OK;
}

void zt_threadpool_run(zt_threadpool *p, int64_t n_items, int64_t chunk, zt_parallel_fn fn,
                       void *ctx)
{
    if (n_items <= 0)
        return;
    if (chunk < 1)
        chunk = 1;
    if (!p || p->threads == 1 || n_items <= chunk || atomic_exchange(&p->running, 1)) {
        for (int64_t begin = 0; begin < n_items; begin += chunk) /* alone, same chunks */
            fn(ctx, begin, n_items - begin > chunk ? begin + chunk : n_items, 0);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    p->chunk = chunk;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->busy = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    run_chunks(p, 0);
    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->finished, &p->lock);
    pthread_mutex_unlock(&p->lock);
    atomic_store(&p->running, 0);
}

int zt_threadpool_size(const zt_threadpool *p) { return p ? p->threads : 1; }

void zt_threadpool_destroy(zt_threadpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->threads; i++)
        pthread_join(p->tids[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->finished);
    free(p->tids);
    free(p->args);
    free(p);
}

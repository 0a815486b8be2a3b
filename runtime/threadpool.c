#include "runtime/threadpool.h"
#include "runtime/log.h"

#include <numa.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct worker_arg {
    zt_threadpool *pool;
    int index;
} worker_arg;

struct zt_threadpool {
    int threads;
    int numa_node;
    pthread_t *tids;
    worker_arg *args;
    pthread_mutex_t lock;
    pthread_cond_t start, finished;
    uint64_t generation; /* bumped for every loop */
    int busy;            /* workers still in the current loop */
    int stop;
    /* the current loop */
    zt_parallel_fn fn;
    void *ctx;
    int64_t n_items, chunk;
    atomic_llong next;
};

static void run_chunks(zt_threadpool *p, int worker)
{
    for (;;) {
        int64_t begin = atomic_fetch_add(&p->next, p->chunk);
        if (begin >= p->n_items)
            return;
        int64_t end = begin + p->chunk < p->n_items ? begin + p->chunk : p->n_items;
        p->fn(p->ctx, begin, end, worker);
    }
}

static void *worker_main(void *arg)
{
    worker_arg *a = arg;
    zt_threadpool *p = a->pool;
    if (p->numa_node >= 0)
        numa_run_on_node(p->numa_node);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->generation == seen && !p->stop)
            pthread_cond_wait(&p->start, &p->lock);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        run_chunks(p, a->index);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->finished);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

zt_status zt_threadpool_create(int threads, int numa_node, zt_threadpool **out, zt_error *err)
{
    if (threads < 1)
        threads = 1;
    zt_threadpool *p = calloc(1, sizeof *p);
    if (!p)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating a thread pool");
    p->threads = threads;
    p->numa_node = numa_node >= 0 && numa_available() >= 0 ? numa_node : -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->finished, NULL);
    p->tids = calloc((size_t)threads, sizeof *p->tids);
    p->args = calloc((size_t)threads, sizeof *p->args);
    if (!p->tids || !p->args) {
        zt_threadpool_destroy(p);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating a thread pool");
    }
    for (int i = 1; i < threads; i++) {
        p->args[i] = (worker_arg){p, i};
        if (pthread_create(&p->tids[i], NULL, worker_main, &p->args[i]) != 0) {
            p->threads = i; /* destroy joins the ones that started */
            zt_threadpool_destroy(p);
            return ZT_ERR(err, ZT_ERR_NOMEM, "cannot start thread %d of %d for the pool", i,
                          threads);
        }
    }
    *out = p;
    return ZT_OK;
}

void zt_threadpool_run(zt_threadpool *p, int64_t n_items, int64_t chunk, zt_parallel_fn fn,
                       void *ctx)
{
    if (n_items <= 0)
        return;
    if (chunk < 1)
        chunk = 1;
    if (p->threads == 1 || n_items <= chunk) {
        fn(ctx, 0, n_items, 0);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    p->busy = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    run_chunks(p, 0);
    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->finished, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

int zt_threadpool_size(const zt_threadpool *p) { return p->threads; }

void zt_threadpool_destroy(zt_threadpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->threads && p->tids; i++)
        pthread_join(p->tids[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->finished);
    free(p->tids);
    free(p->args);
    free(p);
}

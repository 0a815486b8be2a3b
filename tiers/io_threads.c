/* SPDX-License-Identifier: MIT */
/* The thread-pool engine: worker threads run pread/pwrite on queued pieces. The fallback
 * where io_uring cannot be set up (seccomp, old kernels) or when asked for by config. */
#include "tiers/io.h"
#include "core/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64

struct zt_io_engine {
    const int *fds;
    int n_fds, n_threads, stop;
    pthread_t threads[MAX_THREADS];
    pthread_mutex_t lock;
    pthread_cond_t work;
    zt_io_piece *head, *tail;
};

static int transfer(const zt_io_engine *e, zt_io_piece *p)
{
#ifdef ZT_TEST_HOOKS
    int injected = zt_io_test_take_failure(p->op);
    if (injected)
        return injected;
#endif
    while (p->done < p->len) {
        char *buf = (char *)p->buf + p->done;
        size_t len = p->len - p->done;
        off_t off = (off_t)(p->offset + p->done);
        ssize_t n = p->op == ZT_IO_READ ? pread(e->fds[p->file], buf, len, off)
                                        : pwrite(e->fds[p->file], buf, len, off);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO; /* end of file: the swap file is shorter than it should be */
        p->done += (uint32_t)n;
    }
    return 0;
}

static void *worker(void *arg)
{
    zt_io_engine *e = arg;
    zt_trace_thread_name("io thread");
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (!e->head && !e->stop)
            pthread_cond_wait(&e->work, &e->lock);
        if (!e->head)
            break;
        zt_io_piece *p = e->head;
        if (!(e->head = p->next))
            e->tail = NULL;
        pthread_mutex_unlock(&e->lock);
        p->on_done(p, transfer(e, p));
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static int threads_create(const int *fds, int n_fds, int queue_depth, int threads,
                          zt_io_engine **out, char *why, size_t why_len)
{
    (void)why, (void)why_len;
    zt_io_engine *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->fds = fds;
    e->n_fds = n_fds;
    /* as many threads as requested, but no more than the queue depth allows in flight */
    e->n_threads = threads < 1 ? 1 : threads > queue_depth ? queue_depth : threads;
    e->n_threads = e->n_threads > MAX_THREADS ? MAX_THREADS : e->n_threads;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->work, NULL);
    for (int i = 0; i < e->n_threads; i++)
        if (pthread_create(&e->threads[i], NULL, worker, e) != 0) {
            e->n_threads = i;
            break;
        }
    if (e->n_threads == 0) {
        free(e);
        return -EAGAIN;
    }
    *out = e;
    return 0;
}

static void threads_submit(zt_io_engine *e, zt_io_piece *p)
{
    p->next = NULL;
    pthread_mutex_lock(&e->lock);
    if (e->tail)
        e->tail->next = p;
    else
        e->head = p;
    e->tail = p;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->lock);
}

static void threads_destroy(zt_io_engine *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->stop = 1;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->lock);
    for (int i = 0; i < e->n_threads; i++)
        pthread_join(e->threads[i], NULL);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->work);
    free(e);
}

const zt_io_iface zt_io_threads_engine = {
    /* .name = */ "threads",
    /* .create = */ threads_create,
    /* .register_buffers = */ NULL,
    /* .submit = */ threads_submit,
    /* .destroy = */ threads_destroy,
};

#ifdef ZT_TEST_HOOKS
#include <stdatomic.h>

static atomic_int fail_op = -1, fail_err, fail_after;

void zt_io_test_fail(int op, int err, int after_n)
{
    atomic_store(&fail_err, err);
    atomic_store(&fail_after, after_n);
    atomic_store(&fail_op, op);
}

int zt_io_test_failure_pending(void) { return atomic_load(&fail_op) != -1; }

int zt_io_test_take_failure(int op)
{
    if (atomic_load(&fail_op) != op)
        return 0;
    if (atomic_fetch_sub(&fail_after, 1) > 0)
        return 0;
    atomic_store(&fail_op, -1);
    return -atomic_load(&fail_err);
}
#endif

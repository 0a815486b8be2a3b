/* SPDX-License-Identifier: MIT */
/* The io_uring engine: one thread owns a ring with the files registered, keeps up to
 * queue_depth pieces in flight, resubmits the rest of short transfers, and sleeps in
 * io_uring_wait_cqe (no polling). New pieces wake it through an eventfd watched by the ring. */
#include "tiers/io.h"
#include "core/log.h"
#include "core/trace.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define WAKE_TAG ((uint64_t)1) /* user_data of the eventfd poll; pieces are pointers */

struct zt_io_engine {
    struct io_uring ring;
    int efd;
    pthread_t thread;
    pthread_mutex_t lock;
    zt_io_piece *head, *tail;
    int queue_depth, inflight, stop, poll_armed;
    struct iovec regions[16]; /* buffers registered with the ring */
    int n_regions;
    uint64_t fixed_ios; /* pieces that used a registered buffer */
};

/* Index of the registered region holding [buf, buf + len), or -1. */
static int region_of(const zt_io_engine *e, const void *buf, size_t len)
{
    for (int i = 0; i < e->n_regions; i++) {
        const char *b = e->regions[i].iov_base;
        if ((const char *)buf >= b && (const char *)buf + len <= b + e->regions[i].iov_len)
            return i;
    }
    return -1;
}

static void push(zt_io_engine *e, zt_io_piece *p, int front)
{
    p->next = NULL;
    if (front) {
        p->next = e->head;
        e->head = p;
        if (!e->tail)
            e->tail = p;
    } else {
        if (e->tail)
            e->tail->next = p;
        else
            e->head = p;
        e->tail = p;
    }
}

static zt_io_piece *pop(zt_io_engine *e)
{
    zt_io_piece *p = e->head;
    if (p && !(e->head = p->next))
        e->tail = NULL;
    return p;
}

static void prep(zt_io_engine *e, struct io_uring_sqe *sqe, zt_io_piece *p)
{
    char *buf = (char *)p->buf + p->done;
    unsigned len = p->len - p->done;
    uint64_t off = p->offset + p->done;
    int region = region_of(e, buf, len);
    if (region >= 0) { /* pages pinned once at registration, not per request */
        if (p->op == ZT_IO_READ)
            io_uring_prep_read_fixed(sqe, p->file, buf, len, off, region);
        else
            io_uring_prep_write_fixed(sqe, p->file, buf, len, off, region);
        e->fixed_ios++;
    } else if (p->op == ZT_IO_READ) {
        io_uring_prep_read(sqe, p->file, buf, len, off);
    } else {
        io_uring_prep_write(sqe, p->file, buf, len, off);
    }
    sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data(sqe, p);
}

/* Moves queued pieces into the submission queue while there is room. */
static void fill_sq(zt_io_engine *e)
{
    pthread_mutex_lock(&e->lock);
    if (!e->poll_armed) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
        if (sqe) {
            io_uring_prep_poll_add(sqe, e->efd, POLLIN);
            io_uring_sqe_set_data64(sqe, WAKE_TAG);
            e->poll_armed = 1;
        }
    }
    while (e->head && e->inflight < e->queue_depth) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
        if (!sqe)
            break;
        zt_io_piece *p = pop(e);
#ifdef ZT_TEST_HOOKS
        int injected = zt_io_test_take_failure(p->op);
        if (injected) { /* complete it as failed without touching the disk */
            pthread_mutex_unlock(&e->lock);
            io_uring_prep_nop(sqe);
            io_uring_sqe_set_data(sqe, p);
            p->done = UINT32_MAX; /* marks the injected failure for the completion */
            p->buf_index = injected;
            pthread_mutex_lock(&e->lock);
            e->inflight++;
            continue;
        }
#endif
        prep(e, sqe, p);
        e->inflight++;
    }
    pthread_mutex_unlock(&e->lock);
}

static void complete(zt_io_engine *e, zt_io_piece *p, int res)
{
    pthread_mutex_lock(&e->lock);
    e->inflight--;
    pthread_mutex_unlock(&e->lock);
#ifdef ZT_TEST_HOOKS
    if (p->done == UINT32_MAX) {
        p->done = 0;
        int err = p->buf_index;
        p->buf_index = -1;
        p->on_done(p, err);
        return;
    }
#endif
    if (res == -EAGAIN || res == -EINTR || (res > 0 && p->done + (uint32_t)res < p->len)) {
        p->done += res > 0 ? (uint32_t)res : 0; /* short or interrupted: resubmit the rest */
        pthread_mutex_lock(&e->lock);
        push(e, p, 1);
        pthread_mutex_unlock(&e->lock);
        return;
    }
    if (res >= 0)
        p->done += (uint32_t)res;
    p->on_done(p, res < 0 ? res : res == 0 && p->done < p->len ? -EIO : 0);
}

static void *ring_thread(void *arg)
{
    zt_io_engine *e = arg;
    zt_trace_thread_name("io_uring completions");
    for (;;) {
        fill_sq(e);
        io_uring_submit(&e->ring);
        pthread_mutex_lock(&e->lock);
        int done = e->stop && !e->head && e->inflight == 0;
        pthread_mutex_unlock(&e->lock);
        if (done)
            break;
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&e->ring, &cqe) != 0)
            continue;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&e->ring, head, cqe)
        {
            seen++;
            if (io_uring_cqe_get_data64(cqe) == WAKE_TAG) {
                uint64_t v;
                if (read(e->efd, &v, sizeof v) < 0 && errno != EAGAIN)
                    ZT_LOGW("io_uring", "reading the wake-up eventfd: %s", strerror(errno));
                e->poll_armed = 0;
                continue;
            }
            complete(e, io_uring_cqe_get_data(cqe), cqe->res);
        }
        io_uring_cq_advance(&e->ring, seen);
    }
    return NULL;
}

static int uring_create(const int *fds, int n_fds, int queue_depth, int threads, zt_io_engine **out,
                        char *why, size_t why_len)
{
    (void)threads;
    zt_io_engine *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->queue_depth = queue_depth;
    int rc = io_uring_queue_init((unsigned)queue_depth + 2, &e->ring, 0);
    if (rc < 0) {
        snprintf(why, why_len, "io_uring_queue_init: %s", strerror(-rc));
        free(e);
        return rc;
    }
    rc = io_uring_register_files(&e->ring, fds, (unsigned)n_fds);
    if (rc < 0) {
        snprintf(why, why_len, "io_uring_register_files: %s", strerror(-rc));
        io_uring_queue_exit(&e->ring);
        free(e);
        return rc;
    }
    e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&e->lock, NULL);
    if (e->efd < 0 || pthread_create(&e->thread, NULL, ring_thread, e) != 0) {
        snprintf(why, why_len, "cannot start the io_uring thread");
        if (e->efd >= 0)
            close(e->efd);
        io_uring_queue_exit(&e->ring);
        free(e);
        return -EAGAIN;
    }
    *out = e;
    return 0;
}

static void wake(zt_io_engine *e)
{
    uint64_t one = 1;
    if (write(e->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        ZT_LOGW("io_uring", "waking the completion thread: %s", strerror(errno));
}

static void uring_submit(zt_io_engine *e, zt_io_piece *p)
{
    pthread_mutex_lock(&e->lock);
    push(e, p, 0);
    pthread_mutex_unlock(&e->lock);
    wake(e);
}

/* Registers buffers for fixed reads and writes. Called before the first transfer; the ring
 * thread is then asleep in io_uring_wait_cqe, which does not block registration. */
static int uring_register_buffers(zt_io_engine *e, void *const *bufs, const size_t *lens, int n)
{
    if (n > 16)
        return -EINVAL;
    struct iovec iov[16];
    for (int i = 0; i < n; i++)
        iov[i] = (struct iovec){bufs[i], lens[i]};
    pthread_mutex_lock(&e->lock);
    int busy = e->inflight > 0 || e->head != NULL || e->n_regions > 0;
    pthread_mutex_unlock(&e->lock);
    if (busy)
        return -EBUSY;
    int rc = io_uring_register_buffers(&e->ring, iov, (unsigned)n);
    if (rc == 0) {
        memcpy(e->regions, iov, sizeof(struct iovec) * (size_t)n);
        e->n_regions = n;
    }
    return rc;
}

uint64_t zt_io_uring_fixed_ios(const zt_io_engine *e) { return e->fixed_ios; }

static void uring_destroy(zt_io_engine *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->stop = 1;
    pthread_mutex_unlock(&e->lock);
    wake(e);
    pthread_join(e->thread, NULL);
    io_uring_queue_exit(&e->ring);
    close(e->efd);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

const zt_io_iface zt_io_uring_engine = {
    /* .name = */ "io_uring",
    /* .create = */ uring_create,
    /* .register_buffers = */ uring_register_buffers,
    /* .submit = */ uring_submit,
    /* .destroy = */ uring_destroy,
};

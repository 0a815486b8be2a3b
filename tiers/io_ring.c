/* SPDX-License-Identifier: MIT */
/* The buffer ring (io_ring.h): per slot a piece and a busy flag, set at submission and cleared
 * by the engine's completion under the ring's lock. */
#include "tiers/io_ring.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct ring_slot {
    zt_io_piece piece;
    unsigned char *buf;
    int busy;
    struct zt_io_ring *ring;
} ring_slot;

struct zt_io_ring {
    int fd;
    const zt_io_iface *io;
    zt_io_engine *engine;
    ring_slot *slots;
    int n_slots;
    size_t slot_bytes;
    pthread_mutex_t lock;
    pthread_cond_t done;
    int failed; /* the first failed transfer's errno */
};

static void on_done(zt_io_piece *piece, int result)
{
    ring_slot *s = piece->user;
    zt_io_ring *r = s->ring;
    pthread_mutex_lock(&r->lock);
    if (result < 0 && !r->failed)
        r->failed = -result;
    s->busy = 0;
    pthread_cond_broadcast(&r->done);
    pthread_mutex_unlock(&r->lock);
}

int zt_io_ring_create(int fd, int n_slots, size_t slot_bytes, zt_io_engine_kind kind,
                      zt_io_ring **out, char *why, size_t why_len)
{
    *out = NULL;
    zt_io_ring *r = calloc(1, sizeof *r);
    if (!r || !(r->slots = calloc((size_t)n_slots, sizeof *r->slots))) {
        free(r);
        return -ENOMEM;
    }
    r->fd = fd;
    r->n_slots = n_slots;
    r->slot_bytes = slot_bytes;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->done, NULL);
    for (int i = 0; i < n_slots; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 4096, slot_bytes) != 0) {
            zt_io_ring_destroy(r);
            return -ENOMEM;
        }
        r->slots[i] = (ring_slot){.buf = p, .ring = r};
    }
    int rc = zt_io_engine_start(&r->fd, 1, n_slots, kind, &r->io, &r->engine, why, why_len);
    if (rc != 0) {
        zt_io_ring_destroy(r);
        return rc;
    }
    *out = r;
    return 0;
}

int zt_io_ring_register(zt_io_ring *r)
{
    enum { MAX_REGIONS = 16 };
    if (!r->io->register_buffers || r->n_slots > MAX_REGIONS)
        return -EOPNOTSUPP;
    void *bufs[MAX_REGIONS];
    size_t lens[MAX_REGIONS];
    for (int i = 0; i < r->n_slots; i++)
        bufs[i] = r->slots[i].buf, lens[i] = r->slot_bytes;
    return r->io->register_buffers(r->engine, bufs, lens, r->n_slots);
}

uint64_t zt_io_ring_fixed_ios(const zt_io_ring *r)
{
    return r->io == &zt_io_uring_engine ? zt_io_uring_fixed_ios(r->engine) : 0;
}

unsigned char *zt_io_ring_buf(zt_io_ring *r, int slot) { return r->slots[slot].buf; }

void zt_io_ring_submit(zt_io_ring *r, int slot, int op, uint64_t offset, size_t len)
{
    ring_slot *s = &r->slots[slot];
    s->piece = (zt_io_piece){.op = op,
                             .file = 0,
                             .offset = offset,
                             .buf = s->buf,
                             .len = (uint32_t)len,
                             .buf_index = -1,
                             .on_done = on_done,
                             .user = s};
    s->busy = 1;
    r->io->submit(r->engine, &s->piece);
}

int zt_io_ring_wait(zt_io_ring *r, int slot)
{
    pthread_mutex_lock(&r->lock);
    while (r->slots[slot].busy)
        pthread_cond_wait(&r->done, &r->lock);
    int failed = r->failed;
    pthread_mutex_unlock(&r->lock);
    return failed;
}

void zt_io_ring_destroy(zt_io_ring *r)
{
    if (!r)
        return;
    if (r->engine)
        r->io->destroy(r->engine); /* waits for every transfer in flight */
    for (int i = 0; i < r->n_slots; i++)
        free(r->slots[i].buf);
    free(r->slots);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->done);
    free(r);
}

/* SPDX-License-Identifier: MIT */
#include "tiers/staging_pool.h"
#include "core/align.h"
#include "tiers/numa_place.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct zt_staging_pool {
    int count, in_use, peak;
    size_t size;
    char *base;
    int *free_list;       /* stack of free indices */
    unsigned char *taken; /* [count]: 1 while buffer i is acquired (a release checks it) */
    int n_free;
    int locked; /* pinned through pin */
    zt_pinner *pin;
};

uint64_t zt_staging_pool_footprint(int count, size_t size)
{
    return (uint64_t)count * zt_round_up(size, ZT_PAGE_BYTES);
}

zt_status zt_staging_pool_create(int count, size_t size, zt_pinner *pin, int numa_node,
                                 zt_staging_pool **out, zt_error *err)
{
    size = zt_round_up(size, ZT_PAGE_BYTES);
    zt_staging_pool *p = calloc(1, sizeof *p);
    if (!p || count < 1)
        return free(p), ZT_ERR(err, ZT_ERR_NOMEM, "pinned pool: cannot create %d buffers", count);
    p->count = count;
    p->size = size;
    p->free_list = calloc((size_t)count, sizeof(int));
    p->taken = calloc((size_t)count, 1);
    p->base = mmap(NULL, size * (size_t)count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (!p->free_list || !p->taken || p->base == MAP_FAILED) {
        if (p->base != MAP_FAILED)
            munmap(p->base, size * (size_t)count);
        free(p->free_list);
        free(p->taken);
        free(p);
        return ZT_ERR(err, ZT_ERR_NOMEM, "pinned pool: cannot map %d x %zu bytes", count, size);
    }
    if (size >= (2u << 20))
        madvise(p->base, size * (size_t)count, MADV_HUGEPAGE);
    zt_numa_place(p->base, size * (size_t)count, numa_node, "NVMe staging buffers");
    p->pin = pin;
    p->locked = zt_pin(pin, p->base, size * (size_t)count, "NVMe staging buffers");
    for (int i = 0; i < count; i++)
        p->free_list[i] = count - 1 - i;
    p->n_free = count;
    *out = p;
    return ZT_OK;
}

void *zt_staging_acquire(zt_staging_pool *p)
{
    if (p->n_free == 0)
        return NULL;
    int i = p->free_list[--p->n_free];
    p->taken[i] = 1;
    if (++p->in_use > p->peak)
        p->peak = p->in_use;
    return p->base + (size_t)i * p->size;
}

zt_status zt_staging_release(zt_staging_pool *p, void *buf, zt_error *err)
{
    if (!buf)
        return ZT_OK;
    /* a buffer given back twice would be handed out twice: two transfers in one buffer */
    uintptr_t at = (uintptr_t)buf, base = (uintptr_t)p->base;
    size_t i = (at - base) / p->size;
    if (at < base || i >= (size_t)p->count || (at - base) % p->size != 0)
        return ZT_ERR(err, ZT_ERR_INTERNAL,
                      "NVMe staging pool: %p released to it is none of its %d buffers (a bug "
                      "in ztier: please report it)",
                      buf, p->count);
    if (!p->taken[i])
        return ZT_ERR(err, ZT_ERR_INTERNAL,
                      "NVMe staging pool: buffer %zu of %d released twice (a bug in ztier: "
                      "please report it); the second release is ignored",
                      i, p->count);
    p->taken[i] = 0;
    p->free_list[p->n_free++] = (int)i;
    p->in_use--;
    return ZT_OK;
}

size_t zt_staging_size(const zt_staging_pool *p) { return p->size; }

void zt_staging_region(const zt_staging_pool *p, void **base, size_t *len)
{
    *base = p->base;
    *len = p->size * (size_t)p->count;
}
int zt_staging_in_use(const zt_staging_pool *p) { return p->in_use; }
uint64_t zt_staging_bytes(const zt_staging_pool *p)
{
    return (uint64_t)p->size * (uint64_t)p->count;
}

void zt_staging_pool_destroy(zt_staging_pool *p)
{
    if (!p)
        return;
    if (p->locked)
        zt_unpin(p->pin, p->base);
    munmap(p->base, p->size * (size_t)p->count);
    free(p->free_list);
    free(p->taken);
    free(p);
}

/* SPDX-License-Identifier: MIT */
#include "tiers/host_tier.h"
#include "core/align.h"
#include "tiers/numa_place.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)
/* Pages each large allocation's start moves on from the last one's, within its first huge
 * page: odd, so 512 allocations in a row start at 512 different pages. */
#define STAGGER_PAGES 129u

uint64_t zt_host_tier_footprint(uint64_t bytes)
{
    return zt_round_up(bytes ? bytes : 1, ZT_PAGE_BYTES);
}

uint64_t zt_host_tier_stride(uint64_t bytes)
{
    uint64_t size = zt_host_tier_footprint(bytes);
    return size >= HUGE_PAGE ? size + (uint64_t)STAGGER_PAGES * ZT_PAGE_BYTES : size;
}

/* The offset from a huge page boundary at which the next large allocation starts. */
static uint64_t next_offset(zt_host_tier *t)
{
    uint64_t pages = HUGE_PAGE / ZT_PAGE_BYTES;
    return (uint64_t)(t->allocations++ * STAGGER_PAGES % pages) * ZT_PAGE_BYTES;
}

/* A large shard: a block aligned to a huge page with the shard starting `offset` bytes in
 * (less than a huge page; the pages before it are never touched, so never backed), the whole
 * huge pages after the start advised for transparent huge pages (fewer TLB misses). The
 * optimizer streams several shards at the same index at once (master, m, v, gradient): with
 * every shard at the start of a huge page their bytes at one index would share cache sets
 * and memory banks, which on the development VM costs a quarter of the Adam pass's
 * bandwidth (`ztier bench adam`). */
static void *alloc_large(uint64_t size, uint64_t offset)
{
    void *base = NULL;
    if (posix_memalign(&base, HUGE_PAGE, size + offset) != 0)
        return NULL;
    uintptr_t p = (uintptr_t)base + offset;
    uintptr_t huge_begin = (uintptr_t)zt_round_up(p, HUGE_PAGE);
    uintptr_t huge_end = (p + size) / HUGE_PAGE * HUGE_PAGE;
    if (huge_end > huge_begin)
        madvise((void *)huge_begin, huge_end - huge_begin, MADV_HUGEPAGE);
    return (void *)p;
}

zt_status zt_host_tier_alloc_as(zt_host_tier *t, uint64_t bytes, const char *owner, unsigned flags,
                                void **out, zt_error *err)
{
    uint64_t size = zt_host_tier_footprint(bytes);
    if (t->capacity && t->current + size > t->capacity)
        return ZT_ERR(err, ZT_ERR_NOMEM,
                      "host tier full allocating %llu bytes for '%s': %llu of %llu bytes in use; "
                      "raise ztier.host_capacity or move state to NVMe (offload_*.device = "
                      "\"nvme\")",
                      (unsigned long long)size, owner, (unsigned long long)t->current,
                      (unsigned long long)t->capacity);
    void *p = NULL;
    if (size >= HUGE_PAGE)
        p = alloc_large(size, next_offset(t));
    else if (posix_memalign(&p, ZT_PAGE_BYTES, size) != 0)
        p = NULL;
    if (!p)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of host memory allocating %llu bytes for '%s'",
                      (unsigned long long)size, owner);
    if (t->numa_bind) /* before any write faults the pages in: the policy places them then */
        zt_numa_place(p, size, t->numa_node, owner);
    /* The zeroing is the pages' first touch (the kernel backs each one): unzeroed memory is
     * backed later, by whoever writes it first (a load's threads, as its reads land). */
    if (!(flags & ZT_HOST_UNZEROED))
        memset(p, 0, size);
    t->current += size;
    if (t->current > t->peak)
        t->peak = t->current;
    if (flags & ZT_HOST_PINNED)
        zt_pin(t->pin, p, size, owner);
    *out = p;
    return ZT_OK;
}

zt_status zt_host_tier_alloc(zt_host_tier *t, uint64_t bytes, const char *owner, void **out,
                             zt_error *err)
{
    return zt_host_tier_alloc_as(t, bytes, owner, 0, out, err);
}

zt_status zt_host_tier_alloc_pinned(zt_host_tier *t, uint64_t bytes, const char *owner, void **out,
                                    zt_error *err)
{
    return zt_host_tier_alloc_as(t, bytes, owner, ZT_HOST_PINNED, out, err);
}

void zt_host_tier_free(zt_host_tier *t, void *ptr, uint64_t bytes)
{
    if (!ptr)
        return;
    zt_unpin(t->pin, ptr);
    uint64_t size = zt_host_tier_footprint(bytes);
    t->current -= size;
    /* a large shard starts less than a huge page into its huge-page-aligned block */
    free(size >= HUGE_PAGE ? (void *)((uintptr_t)ptr / HUGE_PAGE * HUGE_PAGE) : ptr);
}

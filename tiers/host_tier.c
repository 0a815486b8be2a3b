#include "tiers/host_tier.h"
#include "core/align.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)

uint64_t zt_host_tier_footprint(uint64_t bytes)
{
    return zt_round_up(bytes ? bytes : 1, ZT_PAGE_BYTES);
}

zt_status zt_host_tier_alloc(zt_host_tier *t, uint64_t bytes, const char *owner, void **out,
                             zt_error *err)
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
    /* Large shards are streamed by the optimizer: 2 MiB alignment lets transparent huge
     * pages back them (fewer TLB misses), where the system allows it. */
    size_t align = size >= HUGE_PAGE ? HUGE_PAGE : ZT_PAGE_BYTES;
    if (posix_memalign(&p, align, size) != 0)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of host memory allocating %llu bytes for '%s'",
                      (unsigned long long)size, owner);
    if (size >= HUGE_PAGE)
        madvise(p, size / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
    memset(p, 0, size);
    t->current += size;
    if (t->current > t->peak)
        t->peak = t->current;
    *out = p;
    return ZT_OK;
}

zt_status zt_host_tier_alloc_pinned(zt_host_tier *t, uint64_t bytes, const char *owner,
                                    void **out, zt_error *err)
{
    zt_status st = zt_host_tier_alloc(t, bytes, owner, out, err);
    if (st == ZT_OK)
        zt_pin(t->pin, *out, zt_host_tier_footprint(bytes), owner);
    return st;
}

void zt_host_tier_free(zt_host_tier *t, void *ptr, uint64_t bytes)
{
    if (!ptr)
        return;
    zt_unpin(t->pin, ptr);
    t->current -= zt_host_tier_footprint(bytes);
    free(ptr);
}

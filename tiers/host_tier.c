#include "tiers/host_tier.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HOST_TIER_ALIGN 4096u
#define HUGE_PAGE (2u << 20)

static uint64_t round_up(uint64_t bytes)
{
    return (bytes + HOST_TIER_ALIGN - 1) / HOST_TIER_ALIGN * HOST_TIER_ALIGN;
}

uint64_t zt_host_tier_footprint(uint64_t bytes) { return round_up(bytes ? bytes : 1); }

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
    size_t align = size >= HUGE_PAGE ? HUGE_PAGE : HOST_TIER_ALIGN;
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

void zt_host_tier_free(zt_host_tier *t, void *ptr, uint64_t bytes)
{
    if (!ptr)
        return;
    t->current -= zt_host_tier_footprint(bytes);
    free(ptr);
}

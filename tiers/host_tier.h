/* SPDX-License-Identifier: MIT */
/* Host tier: page-aligned, zeroed (unless asked not to) allocations for shards whose home is host memory, counted
 * against an optional byte bound (ztier.host_capacity) with current/peak statistics.
 * Allocations of a huge page (2 MiB) or more are backed by transparent huge pages where the
 * system allows, and each starts at a different page offset within its first huge page, so
 * that shards streamed side by side do not alias in caches and memory banks. */
#ifndef ZT_TIERS_HOST_TIER_H
#define ZT_TIERS_HOST_TIER_H

#include "tiers/pinner.h"

#include <stdint.h>

typedef struct zt_host_tier {
    uint64_t capacity; /* 0 = unbounded */
    uint64_t current;
    uint64_t peak;
    uint64_t allocations; /* large allocations made: the next one's start offset */
    zt_pinner *pin;       /* pins what the device copies from or to; NULL: nothing is pinned */
    int numa_bind;        /* 1: every allocation is placed on numa_node (tiers/numa_place.h) */
    int numa_node;
} zt_host_tier;

/* The node t's allocations are placed on; -1: none. Other host buffers of the rank (the NVMe
 * staging pool, the gradient landing buffers) are placed on the same one. */
static inline int zt_host_tier_node(const zt_host_tier *t)
{
    return t->numa_bind ? t->numa_node : -1;
}

/* Bytes an allocation of `bytes` counts for (whole pages). */
uint64_t zt_host_tier_footprint(uint64_t bytes);

/* The distance between buffers of `bytes` laid side by side in one allocation: whole pages,
 * and for buffers of a huge page or more, as many pages more as large allocations move on
 * from each other, so that neighbours streamed together do not alias either. */
uint64_t zt_host_tier_stride(uint64_t bytes);

/* Allocates `bytes` (rounded up to the page size) zeroed, on t's NUMA node if it has one;
 * owner names the tensor in errors. */
zt_status zt_host_tier_alloc(zt_host_tier *t, uint64_t bytes, const char *owner, void **out,
                             zt_error *err);
/* The same, for memory the device copies from or to: pinned through t->pin where the limit
 * and the system allow (else pageable, counted and logged by the pinner). */
zt_status zt_host_tier_alloc_pinned(zt_host_tier *t, uint64_t bytes, const char *owner, void **out,
                                    zt_error *err);
/* What zt_host_tier_alloc_as does beyond a plain allocation. */
enum {
    ZT_HOST_PINNED = 1, /* as zt_host_tier_alloc_pinned */
    /* Not zeroed, so not touched: the pages are backed (and placed on t's NUMA node) when
     * first written. Only for memory whose every byte is written before any is read: the
     * homes a checkpoint load fills after zt_runtime_expect_load, whose own threads then
     * touch the pages as the reads land, instead of commit touching them all beforehand. */
    ZT_HOST_UNZEROED = 2,
};
zt_status zt_host_tier_alloc_as(zt_host_tier *t, uint64_t bytes, const char *owner, unsigned flags,
                                void **out, zt_error *err);
/* Frees memory from zt_host_tier_alloc(_pinned, _as); bytes must be the size it was allocated
 * with. */
void zt_host_tier_free(zt_host_tier *t, void *ptr, uint64_t bytes);

#endif

/* SPDX-License-Identifier: MIT */
/* The device tier: device memory under the backend's budget, with room made on demand. Who
 * may be evicted is not this module's decision: the owner of evictable buffers (the
 * prefetcher) registers a callback that frees one of them.
 *
 * Frees are stream-ordered: with a fence stream set, a freed buffer goes back to the budget
 * only once the fence stream has run everything queued on it before the free. The runtime's
 * fence is the stream that waits for each of the caller's release events, so no buffer is
 * reused while the caller's stream may still read or write it. Deferred frees are reclaimed
 * without waiting at every allocation; an allocation that does not fit waits for the oldest
 * before it evicts anything. One thread uses a tier at a time. */
#ifndef ZT_TIERS_DEVICE_TIER_H
#define ZT_TIERS_DEVICE_TIER_H

#include "device/device.h"

#include <stdint.h>

/* Frees one evictable buffer; returns 0 when there is none left to free. */
typedef int (*zt_evict_fn)(void *user);

typedef struct zt_deferred_free {
    void *ptr;
    zt_event *fence; /* recorded on the fence stream at the free */
} zt_deferred_free;

typedef struct zt_device_tier {
    zt_device *dev;
    zt_evict_fn evict; /* may be NULL: nothing is evictable */
    void *evict_user;
    /* A second owner of evictable buffers, asked once `evict` has nothing left: the activation
     * store's read-ahead (may be NULL) */
    zt_evict_fn evict_last;
    void *evict_last_user;
    zt_stream *fence;           /* NULL: frees are immediate */
    zt_deferred_free *deferred; /* oldest first */
    int n_deferred, cap_deferred;
    zt_event **spare; /* events of reclaimed frees, for reuse */
    int n_spare, cap_spare;
    uint64_t fence_waits; /* allocations that waited for a deferred free */
} zt_device_tier;

/* Allocates bytes of device memory. With may_evict, a full budget makes the tier call the
 * evict callback (then evict_last) until the bytes fit or nothing is left to evict; without, it fails at once
 * (a prefetch gives up rather than displace other work). Either way it first waits for
 * deferred frees. ZT_ERR_DEVICE_NOMEM names the request, the use and the fix. */
zt_status zt_device_tier_alloc(zt_device_tier *t, size_t bytes, int may_evict, void **ptr,
                               zt_error *err);
/* Frees ptr once the fence stream passes this point (at once without a fence). NULL is a
 * no-op. Never fails: if the fence cannot be recorded, it waits for the fence stream. */
void zt_device_tier_free(zt_device_tier *t, void *ptr);
/* The same for a buffer that work outside the fence stream may still write (a copy on
 * another stream): the fence stream first waits for `after` (an event recorded after that
 * work). */
void zt_device_tier_free_after(zt_device_tier *t, void *ptr, zt_event *after);
/* Gives back the deferred frees whose fence has passed; with wait, all of them (waiting).
 * Returns how many are still deferred. */
int zt_device_tier_reclaim(zt_device_tier *t, int wait);
/* Waits for every deferred free and releases the tier's events. */
void zt_device_tier_fini(zt_device_tier *t);

/* Bytes in use now (deferred frees included), at most so far, and the budget. */
void zt_device_tier_usage(const zt_device_tier *t, uint64_t *current, uint64_t *peak,
                          uint64_t *capacity);

#endif

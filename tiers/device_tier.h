/* The device tier: device memory under the backend's budget, with room made on demand. Who
 * may be evicted is not this module's decision: the owner of evictable buffers (the
 * prefetcher) registers a callback that frees one of them. */
#ifndef ZT_TIERS_DEVICE_TIER_H
#define ZT_TIERS_DEVICE_TIER_H

#include "runtime/device/device.h"

#include <stdint.h>

/* Frees one evictable buffer; returns 0 when there is none left to free. */
typedef int (*zt_evict_fn)(void *user);

typedef struct zt_device_tier {
    zt_device *dev;
    zt_evict_fn evict; /* may be NULL: nothing is evictable */
    void *evict_user;
} zt_device_tier;

/* Allocates bytes of device memory. With may_evict, a full budget makes the tier call the
 * evict callback until the bytes fit or nothing is left to evict; without, it fails at once
 * (a prefetch gives up rather than displace other work). ZT_ERR_DEVICE_NOMEM names the
 * request, the use and the fix. */
zt_status zt_device_tier_alloc(zt_device_tier *t, size_t bytes, int may_evict, void **ptr,
                               zt_error *err);
void zt_device_tier_free(zt_device_tier *t, void *ptr); /* NULL is a no-op */

/* Bytes in use now, at most so far, and the budget. */
void zt_device_tier_usage(const zt_device_tier *t, uint64_t *current, uint64_t *peak,
                          uint64_t *capacity);

#endif

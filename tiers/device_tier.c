#include "tiers/device_tier.h"

zt_status zt_device_tier_alloc(zt_device_tier *t, size_t bytes, int may_evict, void **ptr,
                               zt_error *err)
{
    for (;;) {
        zt_status st = t->dev->iface->alloc(t->dev, bytes, ptr, err);
        if (st != ZT_ERR_DEVICE_NOMEM || !may_evict || !t->evict || !t->evict(t->evict_user))
            return st;
    }
}

void zt_device_tier_free(zt_device_tier *t, void *ptr)
{
    if (ptr)
        t->dev->iface->free(t->dev, ptr);
}

void zt_device_tier_usage(const zt_device_tier *t, uint64_t *current, uint64_t *peak,
                          uint64_t *capacity)
{
    *current = t->dev ? t->dev->bytes_in_use : 0;
    *peak = t->dev ? t->dev->bytes_peak : 0;
    *capacity = t->dev ? t->dev->capacity : 0;
}

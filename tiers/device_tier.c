/* SPDX-License-Identifier: MIT */
#include "tiers/device_tier.h"
#include "core/log.h"

#include <stdlib.h>

/* The oldest deferred free: returned to the backend, its event kept for reuse. */
static void give_back_oldest(zt_device_tier *t)
{
    zt_deferred_free d = t->deferred[0];
    t->n_deferred--;
    for (int i = 0; i < t->n_deferred; i++)
        t->deferred[i] = t->deferred[i + 1];
    zt_device_free(t->dev, d.ptr);
    if (t->n_spare < t->cap_spare)
        t->spare[t->n_spare++] = d.fence;
    else
        zt_device_event_destroy(t->dev, d.fence);
}

int zt_device_tier_reclaim(zt_device_tier *t, int wait)
{
    while (t->n_deferred) {
        zt_event *e = t->deferred[0].fence;
        if (wait) {
            zt_error err = {0};
            if (zt_device_event_synchronize(t->dev, e, &err) != ZT_OK)
                ZT_LOGE("device", "waiting for a deferred free: %s", err.msg);
        } else if (zt_device_event_query(t->dev, e) == 0) {
            break; /* frees pass the fence in order */
        }
        give_back_oldest(t);
    }
    return t->n_deferred;
}

/* A try that fails for want of room is not an error of the call when waiting or evicting
 * then makes room: its message reaches err only when it is the outcome. */
zt_status zt_device_tier_alloc(zt_device_tier *t, size_t bytes, int may_evict, void **ptr,
                               zt_error *err)
{
    zt_error tried = {0};
    for (;;) {
        zt_device_tier_reclaim(t, 0);
        zt_status st = zt_device_alloc(t->dev, bytes, ptr, &tried);
        if (st == ZT_OK)
            return ZT_OK;
        if (st == ZT_ERR_DEVICE_NOMEM && t->n_deferred) { /* room on its way back comes first */
            zt_event *e = t->deferred[0].fence;
            zt_device_event_synchronize(t->dev, e, NULL);
            t->fence_waits++;
            continue;
        }
        if (st == ZT_ERR_DEVICE_NOMEM && may_evict &&
            ((t->evict && t->evict(t->evict_user)) ||
             (t->evict_last && t->evict_last(t->evict_last_user))))
            continue;
        if (err)
            *err = tried;
        return st;
    }
}

static zt_status grow(void **arr, int *cap, size_t elem)
{
    int n = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)n * elem);
    if (!p)
        return ZT_ERR_NOMEM;
    *arr = p, *cap = n;
    return ZT_OK;
}

/* An event recorded on the fence stream now, or NULL when that fails. */
static zt_event *fence_now(zt_device_tier *t)
{
    zt_error err = {0};
    zt_event *e = t->n_spare ? t->spare[--t->n_spare] : NULL;
    if (!e && zt_device_event_create(t->dev, &e, &err) != ZT_OK)
        return NULL;
    if (zt_device_event_record(t->dev, e, t->fence, &err) != ZT_OK) {
        zt_device_event_destroy(t->dev, e);
        return NULL;
    }
    return e;
}

void zt_device_tier_free(zt_device_tier *t, void *ptr) { zt_device_tier_free_after(t, ptr, NULL); }

void zt_device_tier_free_after(zt_device_tier *t, void *ptr, zt_event *after)
{
    if (!ptr)
        return;
    if (after && t->fence && zt_device_stream_wait_event(t->dev, t->fence, after, NULL) != ZT_OK)
        zt_device_event_synchronize(t->dev, after, NULL);
    else if (after && !t->fence)
        zt_device_event_synchronize(t->dev, after, NULL);
    if (!t->fence) {
        zt_device_free(t->dev, ptr);
        return;
    }
    if (t->n_deferred == t->cap_deferred &&
        grow((void **)&t->deferred, &t->cap_deferred, sizeof *t->deferred) != ZT_OK)
        goto wait;
    if (t->n_spare == t->cap_spare && t->cap_spare < t->cap_deferred &&
        grow((void **)&t->spare, &t->cap_spare, sizeof *t->spare) != ZT_OK)
        goto wait;
    zt_event *e = fence_now(t);
    if (!e)
        goto wait;
    t->deferred[t->n_deferred++] = (zt_deferred_free){ptr, e};
    zt_device_tier_reclaim(t, 0);
    return;
wait: /* no memory to defer it: wait for the fence instead */
    zt_device_stream_synchronize(t->dev, t->fence, NULL);
    zt_device_free(t->dev, ptr);
}

void zt_device_tier_fini(zt_device_tier *t)
{
    if (t->dev)
        zt_device_tier_reclaim(t, 1);
    for (int i = 0; i < t->n_spare; i++)
        zt_device_event_destroy(t->dev, t->spare[i]);
    free(t->deferred);
    free(t->spare);
    t->deferred = NULL, t->spare = NULL;
    t->n_deferred = t->cap_deferred = t->n_spare = t->cap_spare = 0;
}

void zt_device_tier_usage(const zt_device_tier *t, uint64_t *current, uint64_t *peak,
                          uint64_t *capacity)
{
    *current = t->dev ? t->dev->bytes_in_use : 0;
    *peak = t->dev ? t->dev->bytes_peak : 0;
    *capacity = t->dev ? t->dev->capacity : 0;
}

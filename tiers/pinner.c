/* SPDX-License-Identifier: MIT */
#include "tiers/pinner.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

/* Counts a refusal; the first one is logged: a warning where copies to a GPU slow down,
 * information on the host backend (whose "device" is host memory: only the page locking is
 * lost). */
static int refuse(zt_pinner *p, uint64_t bytes, const char *owner, const char *why)
{
    p->refused += bytes;
    if (p->warned++)
        return 0;
    int host = !strcmp(p->dev->iface->name, "host");
    ZT_LOG(host ? ZT_LOG_INFO : ZT_LOG_WARN, "pin",
           "%llu bytes of '%s' stay pageable (%s): %s; further refusals are counted in "
           "zt_stats.pinned_refused_bytes",
           (unsigned long long)bytes, owner, why,
           host ? "the host backend only loses the page locking"
                : "copies between them and the device run slower");
    return 0;
}

int zt_pin(zt_pinner *p, void *ptr, uint64_t bytes, const char *owner)
{
    if (!p || !p->dev || !zt_device_can_pin(p->dev) || !ptr || !bytes)
        return 0;
    if (p->pinned + bytes > p->limit)
        return refuse(p, bytes, owner, "over ztier.pinned_limit: raise it to pin more");
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 16;
        zt_pin_entry *e = realloc(p->entries, (size_t)cap * sizeof *e);
        if (!e)
            return refuse(p, bytes, owner, "out of host memory for the pin table");
        p->entries = e, p->cap = cap;
    }
    zt_error err = {0};
    if (zt_device_host_register(p->dev, ptr, bytes, &err) != ZT_OK)
        return refuse(p, bytes, owner, err.msg); /* the message names the limit to raise */
    p->entries[p->n++] = (zt_pin_entry){ptr, bytes};
    p->pinned += bytes;
    if (p->pinned > p->peak)
        p->peak = p->pinned;
    return 1;
}

void zt_unpin(zt_pinner *p, void *ptr)
{
    if (!p || !ptr)
        return;
    for (int i = 0; i < p->n; i++)
        if (p->entries[i].ptr == ptr) {
            zt_device_host_unregister(p->dev, ptr, p->entries[i].bytes);
            p->pinned -= p->entries[i].bytes;
            p->entries[i] = p->entries[--p->n];
            return;
        }
}

void zt_pinner_fini(zt_pinner *p)
{
    while (p->n)
        zt_unpin(p, p->entries[p->n - 1].ptr);
    free(p->entries);
    p->entries = NULL;
    p->cap = 0;
}

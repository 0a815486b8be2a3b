/* SPDX-License-Identifier: MIT */
/* A shard's home: the tier where a piece of state lives between uses (device memory, host
 * memory or NVMe), and the synchronous moves between a home and host or device memory. */
#ifndef ZT_TIERS_HOME_H
#define ZT_TIERS_HOME_H

#include "device/device.h"
#include "tiers/host_tier.h"
#include "tiers/swap.h"

#include <stdint.h>

/* Where a kind of state lives. "none" for offload_* means: not offloaded (device). */
typedef enum zt_tier_kind { ZT_TIER_DEVICE = 0, ZT_TIER_HOST = 1, ZT_TIER_NVME = 2 } zt_tier_kind;

typedef struct zt_home {
    zt_tier_kind kind;
    uint64_t bytes;
    void *ptr;     /* DEVICE: device memory; HOST: host memory */
    zt_swap *swap; /* NVME: the swap space holding it */
    zt_swap_extent ext;
    const char *owner; /* tensor name for messages; not owned */
    int shared;        /* a second name for another home's memory (zt_home_share): freeing
                          it frees nothing */
} zt_home;

/* The tiers homes are carved from. */
typedef struct zt_homes {
    zt_device *dev;
    zt_stream *stream;
    zt_host_tier *host;
    zt_swap *swap; /* where NVME homes are carved from (set per kind of state) */
    int pin;       /* HOST homes are pinned (the device copies from them) */
    int unzeroed;  /* HOST homes are not zeroed (ZT_HOST_UNZEROED: the caller writes every
                      byte before any is read); DEVICE homes are zeroed all the same */
} zt_homes;

zt_status zt_home_alloc(zt_homes *h, zt_tier_kind kind, uint64_t bytes, const char *owner,
                        zt_home *out, zt_error *err);
void zt_home_free(zt_homes *h, zt_home *home);

/* Makes *out name the memory of home `of` (which must outlive it), under its own owner
 * name: two kinds of state that always hold the same bytes kept once. */
void zt_home_share(const zt_home *of, const char *owner, zt_home *out);

/* Host pointer of a HOST home (usable in place), NULL for other tiers. */
void *zt_home_host_ptr(const zt_home *home);

/* Copies the whole home into / out of host memory. Synchronous. For NVME homes the host
 * buffer must be 4096-aligned and hold the size rounded up to 4096. */
zt_status zt_home_load(zt_homes *h, const zt_home *home, void *dst, zt_error *err);
zt_status zt_home_store(zt_homes *h, zt_home *home, const void *src, zt_error *err);

/* Queues a copy of a HOST or DEVICE home into device memory on the homes' stream (the
 * caller synchronizes). NVME homes go through zt_swap_read into a staging buffer first. */
zt_status zt_home_to_device(zt_homes *h, const zt_home *home, void *dst, zt_error *err);

/* Starts / finishes moving an NVME home into or out of a host buffer (asynchronous). */
zt_status zt_home_read_start(const zt_home *home, void *dst, zt_swap_io *io, zt_error *err);
zt_status zt_home_write_start(const zt_home *home, const void *src, zt_swap_io *io, zt_error *err);
zt_status zt_home_io_wait(const zt_home *home, zt_swap_io *io, zt_error *err);

#endif

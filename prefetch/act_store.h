/* SPDX-License-Identifier: MIT */
/* The activation store: the checkpoints a trainer keeps from a layer's forward to its
 * backward (zt_act_save / zt_act_load / zt_act_free), moved off the device between the two.
 *
 * Each layer that registered a size has a home of that size, made at create: device memory
 * (the copy stays on the device, for comparison), pinned host memory, or an extent of the
 * activation swap on NVMe. A save copies the caller's buffer into the home on the store's
 * stream (for NVMe through a pinned staging buffer that the swap then writes); a load hands
 * back a device buffer holding the bytes, which a free gives back. Loads come in the reverse
 * order of the saves (a stack): after each load the store starts bringing the next
 * `ahead` layers back (NVMe reads into staging buffers, then copies to device buffers taken
 * from the device tier without evicting anything), so a backward pass finds them on the
 * device. A load the read-ahead did not reach allocates with eviction, as a fetch does.
 *
 * Every decision depends only on the call sequence; one thread uses a store at a time. */
#ifndef ZT_PREFETCH_ACT_STORE_H
#define ZT_PREFETCH_ACT_STORE_H

#include "device/device.h"
#include "tiers/device_tier.h"
#include "tiers/home.h"
#include "tiers/swap.h"

#include <stdint.h>

typedef struct zt_act_store zt_act_store;

typedef struct zt_act_env {
    zt_device *dev;
    zt_stream *stream; /* the store's copies */
    zt_device_tier *dtier;
    zt_homes homes;    /* host homes (pinned when homes.pin) and NVMe extents (homes.swap) */
    zt_tier_kind tier; /* where saved activations live */
    int ahead;         /* layers brought back ahead of the load that needs them */
    int staging;       /* NVMe: pinned staging buffers (at least 2) */
    int sync_saves;    /* a stream-ordered save waits for its copy (synchronize boundary) */
    int profile;       /* per-layer spans (bytes, time) in the trace */
} zt_act_env;

typedef struct zt_act_stats {
    uint64_t saves, loads;
    uint64_t saved_bytes, loaded_bytes;
    uint64_t h2d_bytes, d2h_bytes;      /* copies between the device and host memory */
    uint64_t device_bytes, device_peak; /* the store's device buffers now / at most */
    uint64_t home_bytes;                /* reserved in the home tier */
    uint64_t prefetch_hits;             /* loads whose bytes were already on their way */
    uint64_t evictions;                 /* read-ahead copies dropped for room (evict_last) */
    double wait_s;                      /* time loads waited on the host for their bytes */
} zt_act_stats;

/* bytes[i]: the most layer i will save (0: it saves nothing). Makes every home. */
zt_status zt_act_store_create(const zt_act_env *env, int n_layers, const uint64_t *bytes,
                              zt_act_store **out, zt_error *err);
/* Waits for every copy and transfer, gives back every buffer. NULL is a no-op. */
void zt_act_store_destroy(zt_act_store *s);

/* Copies `bytes` of device memory at src into the layer's home. caller NULL: returns once src
 * may be overwritten. Else the caller's stream waits for the copy before its later work. */
zt_status zt_act_store_save(zt_act_store *s, int layer, const void *src, uint64_t bytes,
                            zt_stream *caller, zt_error *err);
/* The layer's saved bytes in device memory (*ptr, *bytes), valid until zt_act_free. caller
 * NULL: complete on return; else complete for the caller's later work on its stream. */
zt_status zt_act_store_load(zt_act_store *s, int layer, zt_stream *caller, void **ptr,
                            uint64_t *bytes, zt_error *err);
/* Gives the loaded buffer back (after the caller's stream's work so far when caller is set). */
zt_status zt_act_store_free(zt_act_store *s, int layer, zt_stream *caller, zt_error *err);
/* Forgets every saved, loaded or in-flight activation (an abandoned step), waiting for the
 * copies and transfers; a failure that stopped the store is cleared. */
void zt_act_store_discard(zt_act_store *s);
/* Layers saved, loaded or in flight (zt_step refuses to run over them). */
int zt_act_store_outstanding(const zt_act_store *s);
/* The registered size of a layer (0: none). */
uint64_t zt_act_store_capacity(const zt_act_store *s, int layer);

void zt_act_store_stats(const zt_act_store *s, zt_act_stats *out);

#endif

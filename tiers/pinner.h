/* SPDX-License-Identifier: MIT */
/* Pinning host memory that the device copies from or to, through the device backend
 * (cudaHostRegister with cuda, mlock with the host backend), within a byte limit
 * (ztier.pinned_limit). A buffer that cannot be pinned (over the limit, or refused by the
 * system) stays pageable: its copies still work, only slower (with CUDA, synchronous). Each
 * refusal is counted, and the first one is logged with its cause and the fix. One thread
 * pins at a time (commit and destroy). */
#ifndef ZT_TIERS_PINNER_H
#define ZT_TIERS_PINNER_H

#include "device/device.h"

#include <stdint.h>

typedef struct zt_pin_entry {
    void *ptr;
    uint64_t bytes;
} zt_pin_entry;

typedef struct zt_pinner {
    zt_device *dev; /* NULL, or a backend without host_register: nothing is pinned */
    uint64_t limit; /* bytes that may be pinned at once */
    uint64_t pinned, peak;
    uint64_t refused;      /* bytes left pageable */
    zt_pin_entry *entries; /* what is pinned now */
    int n, cap;
    int warned;
} zt_pinner;

/* Pins [ptr, ptr + bytes) (owner names it in the log); 1 when pinned, 0 when left pageable. */
int zt_pin(zt_pinner *p, void *ptr, uint64_t bytes, const char *owner);
/* Unpins ptr if zt_pin pinned it; otherwise nothing. */
void zt_unpin(zt_pinner *p, void *ptr);
/* Unpins whatever is left and frees the table. */
void zt_pinner_fini(zt_pinner *p);

#endif

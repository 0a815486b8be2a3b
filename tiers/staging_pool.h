/* SPDX-License-Identifier: MIT */
/* A bounded pool of page-aligned staging buffers for NVMe <-> device transfers: a fixed
 * count of equal buffers (offload_param.buffer_count) in one mapping, pinned through the
 * pinner when given (pin.h: the device backend, within ztier.pinned_limit), with transparent
 * huge pages requested. It never grows: when every buffer is in use, acquire returns NULL
 * and the caller makes progress on the transfers that hold them. */
#ifndef ZT_TIERS_STAGING_POOL_H
#define ZT_TIERS_STAGING_POOL_H

#include "tiers/pinner.h"

#include <stddef.h>
#include <stdint.h>

typedef struct zt_staging_pool zt_staging_pool;

/* numa_node >= 0: the buffers are placed on that node (tiers/numa_place.h) before they are
 * pinned; < 0: where the system puts them. */
zt_status zt_staging_pool_create(int count, size_t size, zt_pinner *pin, int numa_node,
                                 zt_staging_pool **out, zt_error *err);
/* Bytes a pool of count buffers of size bytes maps (buffers are whole pages). */
uint64_t zt_staging_pool_footprint(int count, size_t size);
void *zt_staging_acquire(zt_staging_pool *p); /* NULL when all are in use */
/* Gives buf (from acquire; NULL: nothing) back. A buffer not acquired from p, or released
 * already, is refused (ZT_ERR_INTERNAL, the pool unchanged) instead of being handed out to two
 * transfers at once. */
zt_status zt_staging_release(zt_staging_pool *p, void *buf, zt_error *err);
size_t zt_staging_size(const zt_staging_pool *p);
/* The one mapping every buffer of the pool lives in (for registering it with io_uring). */
void zt_staging_region(const zt_staging_pool *p, void **base, size_t *len);
int zt_staging_in_use(const zt_staging_pool *p);
uint64_t zt_staging_bytes(const zt_staging_pool *p);
void zt_staging_pool_destroy(zt_staging_pool *p); /* NULL is a no-op */

#endif

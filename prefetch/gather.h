/* The staged pipeline that brings one layer's full parameters into device memory:
 *   NONE -> COPYING (shard copied from its home into its slot of a full-size device
 *   buffer, on the prefetch stream) -> COMM (all-gather issued) -> READY.
 * Each call of zt_gather_advance moves a layer one stage, waiting only for the stage before
 * it; collectives are therefore issued at points that depend on the call sequence alone,
 * identical on every rank. */
#ifndef ZT_PREFETCH_GATHER_H
#define ZT_PREFETCH_GATHER_H

#include "runtime/runtime.h"

/* evict: on device-memory exhaustion, evict other prefetched layers and retry (the fetch
 * path); the prefetcher itself passes 0 and simply gives up. */
zt_status zt_gather_advance(zt_runtime *rt, zt_layer *L, int evict, zt_error *err);
/* Advances until READY (evicting when needed). */
zt_status zt_gather_complete(zt_runtime *rt, zt_layer *L, zt_error *err);
/* Waits for any stage in flight and frees the buffer (state NONE). Never fails. */
void zt_gather_drop(zt_runtime *rt, zt_layer *L);

#endif

/* Layer-ahead prefetch: on each fetch, the layers the trace expects next are moved one
 * stage further through the gather pipeline, within a byte window
 * (stage3_prefetch_bucket_size) and a live limit (stage3_max_live_parameters); a released
 * layer stays gathered when the trace says it is needed again within
 * stage3_max_reuse_distance elements. All decisions depend only on the call sequence and
 * the config, so every rank issues the same collectives in the same order. */
#ifndef ZT_PREFETCH_PREFETCH_H
#define ZT_PREFETCH_PREFETCH_H

#include "runtime/runtime.h"

/* At zt_fetch(layer, pass): checks the call against the trace (re-recording on a change). */
void zt_prefetch_observe(zt_runtime *rt, int layer, zt_pass pass);
/* Moves the window after `current` (-1: none) one stage on. */
void zt_prefetch_advance(zt_runtime *rt, int current);
/* At a release that leaves the layer unheld: 1 to keep its gathered parameters. */
int zt_prefetch_keep(const zt_runtime *rt, const zt_layer *L);
/* Before the optimizer writes new parameters: drops every unheld gathered layer. */
void zt_prefetch_drop_unheld(zt_runtime *rt);
/* After the step: closes the trace's step and starts the next step's first window. */
void zt_prefetch_after_step(zt_runtime *rt);

/* Frees the unheld gathered layer needed furthest in the future; 0 if there is none. */
int zt_prefetch_evict_one(zt_runtime *rt);
/* Device allocation for a fetch: on exhaustion, evicts prefetched layers and retries. */
zt_status zt_device_alloc_evicting(zt_runtime *rt, size_t bytes, void **ptr, zt_error *err);

#endif

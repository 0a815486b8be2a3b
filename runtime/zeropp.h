/* ZeRO++ quantized collectives and the node topology they account traffic by (zeropp.c). */
#ifndef ZT_RUNTIME_ZEROPP_H
#define ZT_RUNTIME_ZEROPP_H

#include "runtime/runtime.h"

/* Sets rt->node_size from ztier.ranks_per_node or the launcher's local size. */
void zt_topology_init(zt_runtime *rt);
/* Counts a collective in which this rank sends bytes_per_peer to every other rank. */
void zt_comm_count(zt_runtime *rt, uint64_t bytes_per_peer);

/* The node and cross-node communicators hpZ and hierarchical qgZ need. Collective. */
zt_status zt_zeropp_init(zt_runtime *rt, zt_error *err);
/* After a full all-gather: keep this rank's slice of the layer for the node-local gather. */
void zt_hpz_keep(zt_runtime *rt, zt_layer *L);
/* Starts the node-local all-gather of the secondary slices into L->gathered (L->req). */
zt_status zt_hpz_issue(zt_runtime *rt, zt_layer *L, zt_error *err);
/* Frees the layer's secondary slice. */
void zt_hpz_release(zt_runtime *rt, zt_layer *L);

/* qwZ: quantize this rank's shard (own_slot, working dtype) and start the all-gather of
 * int8 blocks + scales (completes through L->req). */
zt_status zt_qwz_start(zt_runtime *rt, zt_layer *L, const void *own_slot, zt_error *err);
/* After the all-gather: dequantize every rank's shard into L->gathered. */
void zt_qwz_finish(zt_runtime *rt, zt_layer *L);
void zt_qwz_free(zt_layer *L);

/* qgZ: reduce the layer's full fp32 gradients (host memory) with an int4 all-to-all and add
 * this rank's summed shard to its accumulator. Synchronous. */
zt_status zt_qgz_reduce(zt_runtime *rt, zt_layer *L, const float *grads, zt_error *err);

#endif

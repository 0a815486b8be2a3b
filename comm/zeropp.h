/* SPDX-License-Identifier: MIT */
/* ZeRO++ on top of a communicator and its node topology (topology.h, which counts the bytes
 * this rank sends inside and across nodes): the three collectives:
 *  - qwZ: an all-gather of int8 blocks plus fp32 scales instead of the parameters; every rank
 *    (its own slot too) dequantizes, so all ranks compute with the same weights;
 *  - qgZ: a gradient reduce-scatter done as int4 all-to-alls summed in fp32: two levels
 *    (inside nodes, then across them) where the topology says so, one level otherwise;
 *  - hpZ: the all-gather of node-local slices (the slices themselves live in device memory,
 *    kept by the gather pipeline).
 * Every buffer is in the memory of the topology's device backend (host memory with the host
 * backend, GPU memory with cuda), which the comm backend moves (mpi: host memory; nccl:
 * device memory). The transfer buffers come from the caller, one scratch buffer per call of
 * the size the *_scratch_bytes functions give, so that they are allocated (and counted)
 * wherever the caller keeps device memory; quantization runs through the device's kernels
 * (core/quant_elem.h's math: CPU kernels on a host stream, CUDA kernels on a GPU stream) on
 * the stream the caller gives, synchronized before each host-driven collective. Nothing here
 * knows about layers or the runtime: callers pass buffers, sizes and the topology. */
#ifndef ZT_RUNTIME_COMM_ZEROPP_H
#define ZT_RUNTIME_COMM_ZEROPP_H

#include "core/threadpool.h"
#include "comm/comm.h"
#include "comm/topology.h"
#include "device/device.h"

#include <stdint.h>

/* qwZ: quantizes one rank's shard (n elements of dtype at own, device memory) on stream s
 * and starts the all-gather of every rank's packed shard (completes through req). Its
 * buffers are in scratch (device memory of zt_qwz_scratch_bytes), which must stay until
 * zt_qwz_finish returns, or until req is waited for when the gather is abandoned. */
typedef struct zt_qwz {
    void *send, *recv; /* in the caller's scratch; recv is NULL when no qwZ is in flight */
} zt_qwz;
size_t zt_qwz_scratch_bytes(int size, int64_t n, int block);
zt_status zt_qwz_start(zt_qwz *q, zt_topology *t, const void *own, zt_dtype dtype, int64_t n,
                       int block, void *scratch, zt_stream *s, zt_comm_req *req, zt_error *err);
/* After the all-gather: dequantizes every rank's shard into full (size * n elements) on s
 * and waits for it; the scratch is free again. */
zt_status zt_qwz_finish(zt_qwz *q, const zt_topology *t, void *full, zt_dtype dtype, int64_t n,
                        int block, zt_stream *s, zt_error *err);

/* qgZ: reduces the full fp32 gradients of a layer (size * n elements, device memory, complete
 * on s) and adds this rank's summed shard of n elements to acc (device memory); name is for
 * messages. In two parts, so that its last exchange (between nodes, or the only one) stays in
 * flight while the caller goes on: zt_qgz_start quantizes the gradients, completes the
 * exchange inside the node of the two-level form (its ranks share memory) and issues the last
 * all-to-all; zt_qgz_wait waits for it, then zt_qgz_finish adds this rank's sum to acc. The head scratch
 * (zt_qgz_head_bytes; 0 for one level) is free again once zt_qgz_start returns, so several
 * reductions in flight can share one; the tail (zt_qgz_tail_bytes) is the last exchange's
 * and stays in use until zt_qgz_finish. two_level_ranks: ranks per node of the two-level
 * form, 0 for one level. */
typedef struct zt_qgz {
    zt_comm *comm; /* the last exchange's */
    zt_comm_req req;
    const char *recv; /* in the tail: `parts` packed pieces of n elements */
    int parts;
    int64_t n;
    int block;
} zt_qgz;

size_t zt_qgz_head_bytes(int size, int two_level_ranks, int64_t n, int block);
size_t zt_qgz_tail_bytes(int size, int two_level_ranks, int64_t n, int block);
zt_status zt_qgz_start(zt_qgz *q, zt_topology *t, const float *grads, int64_t n, int block,
                       void *head, void *tail, const char *name, zt_stream *s, zt_error *err);
zt_status zt_qgz_wait(zt_qgz *q, zt_error *err);
zt_status zt_qgz_finish(zt_qgz *q, zt_topology *t, float *acc, const char *name, zt_stream *s,
                        zt_error *err);

/* hpZ: starts the all-gather of the node's slices (bytes each) into full. */
zt_status zt_hpz_gather(zt_topology *t, const void *slice, void *full, size_t bytes,
                        zt_comm_req *req, zt_error *err);

#endif

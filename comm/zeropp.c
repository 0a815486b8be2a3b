/* SPDX-License-Identifier: MIT */
/* ZeRO++ collectives over a topology (see zeropp.h). */
#include "comm/zeropp.h"
#include "core/convert.h"
#include "core/log.h"
#include "core/quant.h"

#include <string.h>

/* ---- scratch and kernels ---- */

/* Buffers carved from a caller's scratch start at this alignment. */
#define SCRATCH_ALIGN 256

static size_t scratch_round(size_t bytes)
{
    return (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

/* The next `bytes` of a scratch buffer (at *used, which moves on). */
static void *carve(void *scratch, size_t *used, size_t bytes)
{
    char *p = (char *)scratch + *used;
    *used += scratch_round(bytes);
    return p;
}

static zt_status dsync(const zt_topology *t, zt_stream *s, zt_error *err)
{
    return zt_device_stream_synchronize(t->dev, s, err);
}

/* ---- qwZ ---- */

static size_t values_bytes(int64_t n, int bits)
{
    size_t v = bits == 8 ? (size_t)n : (size_t)(n + 1) / 2;
    return (v + 15) / 16 * 16;
}

/* Bytes of one rank's packed block: int8 (or int4) values, then fp32 scales, 16-aligned. */
static size_t packed_bytes(int64_t n, int block, int bits)
{
    return values_bytes(n, bits) + sizeof(float) * (size_t)zt_quant_blocks(n, block);
}

size_t zt_qwz_scratch_bytes(int size, int64_t n, int block)
{
    size_t pb = packed_bytes(n, block, 8);
    return scratch_round(pb) + scratch_round(pb * (size_t)size);
}

zt_status zt_qwz_start(zt_qwz *q, zt_topology *t, const void *own, zt_dtype dtype, int64_t n,
                       int block, void *scratch, zt_stream *s, zt_comm_req *req, zt_error *err)
{
    size_t pb = packed_bytes(n, block, 8), used = 0;
    const zt_device_iface *d = t->dev->iface;
    q->send = carve(scratch, &used, pb);
    q->recv = carve(scratch, &used, pb * (size_t)t->size);
    char *p = q->send; /* padding bytes are sent too */
    zt_status st = d->memset_async(t->dev, p, 0, pb, s, err);
    if (st == ZT_OK)
        st = d->quant8_async(t->dev, own, dtype, (size_t)n, block, (int8_t *)p,
                             (float *)(p + values_bytes(n, 8)), s, err);
    if (st == ZT_OK) /* the collective is driven by the host */
        st = dsync(t, s, err);
    if (st != ZT_OK) {
        zt_error_prefix(err, "qwZ quantization of %lld elements: ", (long long)n);
        return st;
    }
    zt_topology_count(t, pb);
    return zt_comm_allgather(t->world, q->send, q->recv, pb, ZT_COMM_U8, req, err);
}

zt_status zt_qwz_finish(zt_qwz *q, const zt_topology *t, void *full, zt_dtype dtype, int64_t n,
                        int block, zt_stream *s, zt_error *err)
{
    size_t pb = packed_bytes(n, block, 8), vb = values_bytes(n, 8);
    zt_status st = ZT_OK;
    for (int r = 0; st == ZT_OK && r < t->size; r++) {
        const char *p = (const char *)q->recv + pb * (size_t)r;
        st = zt_device_dequant8_async(
            t->dev, (const int8_t *)p, (const float *)(p + vb), (size_t)n, block,
            (char *)full + (size_t)r * (size_t)n * zt_dtype_size(dtype), dtype, s, err);
    }
    if (st == ZT_OK)
        st = dsync(t, s, err);
    q->send = q->recv = NULL;
    return st;
}

/* ---- qgZ ---- */

/* Quantizes n fp32 values into a packed int4 block list at p (queued on s). */
static zt_status pack4(const zt_topology *t, const float *x, int64_t n, int block, char *p,
                       zt_stream *s, zt_error *err)
{
    return zt_device_quant4_async(t->dev, x, (size_t)n, block, (uint8_t *)p,
                                  (float *)(p + values_bytes(n, 4)), s, err);
}

static zt_status unpack4_add(const zt_topology *t, const char *p, int64_t n, int block, float *acc,
                             zt_stream *s, zt_error *err)
{
    return zt_device_dequant4_add_async(t->dev, (const uint8_t *)p,
                                        (const float *)(p + values_bytes(n, 4)), (size_t)n, block,
                                        acc, s, err);
}

/* One level: every rank sends every owner its piece. Any world size and node layout. The
 * head is empty; the tail holds what is sent and received. */
static size_t flat_tail(int size, int64_t shard, int block)
{
    return 2 * scratch_round(packed_bytes(shard, block, 4) * (size_t)size);
}

/* Issues the exchange of the packed pieces in send (complete on s once synchronised) to
 * their owners, into recv, on c: the last exchange, which zt_qgz_finish completes. */
static zt_status issue_last(zt_qgz *q, zt_topology *t, zt_comm *c, const char *send, char *recv,
                            int parts, int64_t shard, int block, zt_stream *s, zt_error *err)
{
    zt_status st = dsync(t, s, err);
    if (st != ZT_OK)
        return st;
    *q = (zt_qgz){.comm = c, .recv = recv, .parts = parts, .n = shard, .block = block};
    return zt_comm_alltoall(c, send, recv, packed_bytes(shard, block, 4), ZT_COMM_U8, &q->req, err);
}

static zt_status qgz_flat(zt_qgz *q, zt_topology *t, const float *grads, int64_t shard, int block,
                          void *tail, zt_stream *s, zt_error *err)
{
    size_t pb = packed_bytes(shard, block, 4), used = 0;
    char *send = carve(tail, &used, pb * (size_t)t->size);
    char *recv = carve(tail, &used, pb * (size_t)t->size);
    zt_status st = zt_device_memset_async(t->dev, send, 0, pb * (size_t)t->size, s, err);
    for (int r = 0; st == ZT_OK && r < t->size; r++)
        st = pack4(t, grads + (size_t)r * (size_t)shard, shard, block, send + pb * (size_t)r, s,
                   err);
    if (st == ZT_OK)
        zt_topology_count(t, pb);
    return st == ZT_OK ? issue_last(q, t, t->world, send, recv, t->size, shard, block, s, err) : st;
}

/* Two levels (N nodes of L ranks each, in any placement: the rank with local index j on node
 * m is the layout's members[m * L + j]): inside the node, local rank j gathers the node's sum
 * of the N shards owned by the ranks with local index j (int4 all-to-all over the node's
 * ranks, fp32 sum); across nodes, those partial sums go to their owners (int4 all-to-all
 * among the ranks with local index j, in node order; fp32 sum). Inter-node traffic is 1/L of
 * the one-level exchange. The head holds the node's exchange and sums, the tail the
 * exchange between nodes. */
static size_t two_level_head(int size, int Ln, int64_t shard, int block)
{
    int64_t nshard = (int64_t)(size / Ln) * shard;
    return 2 * scratch_round(packed_bytes(nshard, block, 4) * (size_t)Ln) +
           2 * scratch_round((size_t)nshard * sizeof(float));
}

static size_t two_level_tail(int size, int Ln, int64_t shard, int block)
{
    return 2 * scratch_round(packed_bytes(shard, block, 4) * (size_t)(size / Ln));
}

static zt_status qgz_hierarchical(zt_qgz *q, zt_topology *t, const float *grads, int64_t shard,
                                  int block, void *head, void *tail, zt_stream *s, zt_error *err)
{
    const zt_device_iface *d = t->dev->iface;
    const int *member = t->layout.members; /* node by node: equal nodes of Ln */
    int Ln = t->node_size, N = t->size / Ln;
    size_t p1 = packed_bytes((int64_t)N * shard, block, 4), p2 = packed_bytes(shard, block, 4);
    size_t nshard = (size_t)N * (size_t)shard, used = 0;
    char *send = carve(head, &used, p1 * (size_t)Ln);
    char *recv = carve(head, &used, p1 * (size_t)Ln);
    float *group = carve(head, &used, nshard * sizeof(float));
    float *partial = carve(head, &used, nshard * sizeof(float));
    size_t tail_used = 0;
    char *send2 = carve(tail, &tail_used, p2 * (size_t)N);
    char *recv2 = carve(tail, &tail_used, p2 * (size_t)N);
    zt_status st = d->memset_async(t->dev, send, 0, p1 * (size_t)Ln, s, err);
    if (st == ZT_OK)
        st = d->memset_async(t->dev, partial, 0, nshard * sizeof(float), s, err);
    for (int j = 0; st == ZT_OK && j < Ln; j++) { /* to local peer j: the shards of (m, j) */
        for (int m = 0; st == ZT_OK && m < N; m++)
            st = d->memcpy_async(t->dev, group + (size_t)m * (size_t)shard,
                                 grads + (size_t)member[m * Ln + j] * (size_t)shard,
                                 sizeof(float) * (size_t)shard, ZT_COPY_D2D, s, err);
        if (st == ZT_OK)
            st = pack4(t, group, (int64_t)nshard, block, send + p1 * (size_t)j, s, err);
    }
    if (st == ZT_OK)
        st = dsync(t, s, err);
    if (st == ZT_OK) { /* inside the node (shared memory): completed here */
        zt_comm_req req = {0};
        t->bytes_intra += p1 * (uint64_t)(Ln - 1);
        st = zt_comm_alltoall(t->intra, send, recv, p1, ZT_COMM_U8, &req, err);
        if (st == ZT_OK)
            st = zt_comm_wait(t->intra, &req, err);
    }
    for (int i = 0; st == ZT_OK && i < Ln; i++)
        st = unpack4_add(t, recv + p1 * (size_t)i, (int64_t)nshard, block, partial, s, err);
    if (st == ZT_OK) /* requantize: to node m, its owner's part */
        st = d->memset_async(t->dev, send2, 0, p2 * (size_t)N, s, err);
    for (int m = 0; st == ZT_OK && m < N; m++)
        st = pack4(t, partial + (size_t)m * (size_t)shard, shard, block, send2 + p2 * (size_t)m, s,
                   err);
    if (st == ZT_OK)
        t->bytes_inter += p2 * (uint64_t)(N - 1);
    return st == ZT_OK ? issue_last(q, t, t->inter, send2, recv2, N, shard, block, s, err) : st;
}

size_t zt_qgz_head_bytes(int size, int two_level_ranks, int64_t n, int block)
{
    return two_level_ranks > 0 ? two_level_head(size, two_level_ranks, n, block) : 0;
}

size_t zt_qgz_tail_bytes(int size, int two_level_ranks, int64_t n, int block)
{
    return two_level_ranks > 0 ? two_level_tail(size, two_level_ranks, n, block)
                               : flat_tail(size, n, block);
}

zt_status zt_qgz_start(zt_qgz *q, zt_topology *t, const float *grads, int64_t n, int block,
                       void *head, void *tail, const char *name, zt_stream *s, zt_error *err)
{
    zt_status st = t->inter ? qgz_hierarchical(q, t, grads, n, block, head, tail, s, err)
                            : qgz_flat(q, t, grads, n, block, tail, s, err);
    if (st != ZT_OK)
        zt_error_prefix(err, "qgZ of '%s': ", name);
    return st;
}

zt_status zt_qgz_wait(zt_qgz *q, zt_error *err) { return zt_comm_wait(q->comm, &q->req, err); }

zt_status zt_qgz_finish(zt_qgz *q, zt_topology *t, float *acc, const char *name, zt_stream *s,
                        zt_error *err)
{
    zt_status st = ZT_OK;
    size_t pb = packed_bytes(q->n, q->block, 4);
    for (int m = 0; st == ZT_OK && m < q->parts; m++) /* sum in fp32 */
        st = unpack4_add(t, q->recv + pb * (size_t)m, q->n, q->block, acc, s, err);
    if (st == ZT_OK)
        st = dsync(t, s, err);
    if (st != ZT_OK)
        zt_error_prefix(err, "qgZ of '%s': ", name);
    return st;
}

/* ---- hpZ ---- */

zt_status zt_hpz_gather(zt_topology *t, const void *slice, void *full, size_t bytes,
                        zt_comm_req *req, zt_error *err)
{
    t->bytes_intra += bytes * (uint64_t)(t->node_size - 1);
    return zt_comm_allgather(t->intra, slice, full, bytes, ZT_COMM_U8, req, err);
}

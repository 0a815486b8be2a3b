/* ZeRO++ collectives over a topology (see zeropp.h). */
#include "runtime/comm/zeropp.h"
#include "core/convert.h"
#include "core/log.h"
#include "runtime/comm/quant.h"

#include <stdlib.h>
#include <string.h>

/* Nodes of equal size, more than one of them, more than one rank each. */
static int uniform_nodes(const zt_topology *t)
{
    int rpn = t->node_size;
    return t->size > rpn && rpn > 1 && t->size % rpn == 0 && (t->rank / rpn + 1) * rpn <= t->size;
}

zt_status zt_topology_open(zt_topology *t, zt_comm *world, int ranks_per_node, int hpz,
                           int qgz, zt_error *err)
{
    memset(t, 0, sizeof *t);
    t->world = world;
    t->rank = world->rank;
    t->size = world->size;
    int rpn = ranks_per_node;
    const char *env = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (rpn <= 0 && env && atoi(env) > 0)
        rpn = atoi(env);
    if (rpn <= 0 || rpn > t->size)
        rpn = t->size;
    int first = t->rank / rpn * rpn;
    t->node_size = first + rpn <= t->size ? rpn : t->size - first;
    t->local_rank = t->rank - first;
    int want_hpz = hpz > 1 && t->size > 1, hier = qgz && uniform_nodes(t);
    if (want_hpz && hpz != t->node_size)
        ZT_LOGW("zeropp", "zero_hpz_partition_size = %d: ztier keeps secondary shards per node "
                          "(%d ranks here, from ztier.ranks_per_node)", hpz, t->node_size);
    /* split is collective: every rank takes part when any of these is on (config is shared) */
    zt_status st = ZT_OK;
    if (want_hpz || hier)
        st = world->iface->split(world, t->rank - t->local_rank, t->rank, &t->intra, err);
    if (st == ZT_OK && hier)
        st = world->iface->split(world, t->local_rank, t->rank, &t->inter, err);
    return st;
}

void zt_topology_close(zt_topology *t)
{
    if (t->inter)
        t->inter->iface->destroy(t->inter);
    if (t->intra)
        t->intra->iface->destroy(t->intra);
    t->inter = t->intra = NULL;
}

void zt_topology_count(zt_topology *t, uint64_t bytes_per_peer)
{
    t->bytes_intra += bytes_per_peer * (uint64_t)(t->node_size - 1);
    t->bytes_inter += bytes_per_peer * (uint64_t)(t->size - t->node_size);
}

/* ---- device memory and kernels ---- */

static zt_status dalloc(const zt_topology *t, size_t bytes, void **p, zt_error *err)
{
    return t->dev->iface->alloc(t->dev, bytes ? bytes : 1, p, err);
}

static void dfree(zt_device *dev, void *p)
{
    if (p)
        dev->iface->free(dev, p);
}

static zt_status dsync(const zt_topology *t, zt_stream *s, zt_error *err)
{
    return t->dev->iface->stream_synchronize(t->dev, s, err);
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

zt_status zt_qwz_start(zt_qwz *q, zt_topology *t, const void *own, zt_dtype dtype, int64_t n,
                       int block, zt_stream *s, zt_comm_req *req, zt_error *err)
{
    size_t pb = packed_bytes(n, block, 8);
    const zt_device_iface *d = t->dev->iface;
    q->dev = t->dev;
    zt_status st = dalloc(t, pb, &q->send, err);
    if (st == ZT_OK)
        st = dalloc(t, pb * (size_t)t->size, &q->recv, err);
    char *p = q->send;
    if (st == ZT_OK) /* padding bytes are sent too */
        st = d->memset_async(t->dev, p, 0, pb, s, err);
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
    return t->world->iface->allgather(t->world, q->send, q->recv, pb, ZT_COMM_U8, req, err);
}

zt_status zt_qwz_finish(zt_qwz *q, const zt_topology *t, void *full, zt_dtype dtype, int64_t n,
                        int block, zt_stream *s, zt_error *err)
{
    size_t pb = packed_bytes(n, block, 8), vb = values_bytes(n, 8);
    zt_status st = ZT_OK;
    for (int r = 0; st == ZT_OK && r < t->size; r++) {
        const char *p = (const char *)q->recv + pb * (size_t)r;
        st = t->dev->iface->dequant8_async(
            t->dev, (const int8_t *)p, (const float *)(p + vb), (size_t)n, block,
            (char *)full + (size_t)r * (size_t)n * zt_dtype_size(dtype), dtype, s, err);
    }
    if (st == ZT_OK)
        st = dsync(t, s, err);
    zt_qwz_free(q);
    return st;
}

void zt_qwz_free(zt_qwz *q)
{
    if (q->dev) {
        dfree(q->dev, q->send);
        dfree(q->dev, q->recv);
    }
    q->send = q->recv = NULL;
}

/* ---- qgZ ---- */

/* Quantizes n fp32 values into a packed int4 block list at p (queued on s). */
static zt_status pack4(const zt_topology *t, const float *x, int64_t n, int block, char *p,
                       zt_stream *s, zt_error *err)
{
    return t->dev->iface->quant4_async(t->dev, x, (size_t)n, block, (uint8_t *)p,
                                       (float *)(p + values_bytes(n, 4)), s, err);
}

static zt_status unpack4_add(const zt_topology *t, const char *p, int64_t n, int block,
                             float *acc, zt_stream *s, zt_error *err)
{
    return t->dev->iface->dequant4_add_async(t->dev, (const uint8_t *)p,
                                             (const float *)(p + values_bytes(n, 4)), (size_t)n,
                                             block, acc, s, err);
}

static zt_status alltoall_sync(zt_comm *c, const void *send, void *recv, size_t bytes,
                               zt_error *err)
{
    zt_comm_req req = {0};
    zt_status st = c->iface->alltoall(c, send, recv, bytes, ZT_COMM_U8, &req, err);
    return st == ZT_OK ? c->iface->wait(c, &req, err) : st;
}

/* One level: every rank sends every owner its piece. Any world size and node layout. */
static zt_status qgz_flat(zt_topology *t, const float *grads, int64_t shard, int block,
                          float *acc, zt_stream *s, zt_error *err)
{
    size_t pb = packed_bytes(shard, block, 4);
    char *send = NULL, *recv = NULL;
    zt_status st = dalloc(t, pb * (size_t)t->size, (void **)&send, err);
    if (st == ZT_OK)
        st = dalloc(t, pb * (size_t)t->size, (void **)&recv, err);
    if (st == ZT_OK)
        st = t->dev->iface->memset_async(t->dev, send, 0, pb * (size_t)t->size, s, err);
    for (int r = 0; st == ZT_OK && r < t->size; r++)
        st = pack4(t, grads + (size_t)r * (size_t)shard, shard, block, send + pb * (size_t)r, s,
                   err);
    if (st == ZT_OK)
        st = dsync(t, s, err);
    if (st == ZT_OK) {
        zt_topology_count(t, pb);
        st = alltoall_sync(t->world, send, recv, pb, err);
    }
    for (int q = 0; st == ZT_OK && q < t->size; q++) /* sum in fp32 */
        st = unpack4_add(t, recv + pb * (size_t)q, shard, block, acc, s, err);
    if (st == ZT_OK)
        st = dsync(t, s, err);
    dfree(t->dev, send), dfree(t->dev, recv);
    return st;
}

/* Two levels (equal nodes of L ranks, N nodes; rank = node * L + local): inside the node,
 * local rank j gathers the node's sum of the N shards owned by ranks with local index j
 * (int4 all-to-all, fp32 sum); across nodes, those partial sums go to their owners (int4
 * all-to-all among the ranks with local index j, fp32 sum). Inter-node traffic is 1/L of
 * the one-level exchange. */
static zt_status qgz_hierarchical(zt_topology *t, const float *grads, int64_t shard, int block,
                                  float *acc, zt_stream *s, zt_error *err)
{
    const zt_device_iface *d = t->dev->iface;
    int Ln = t->node_size, N = t->size / Ln;
    size_t p1 = packed_bytes((int64_t)N * shard, block, 4), p2 = packed_bytes(shard, block, 4);
    size_t nshard = (size_t)N * (size_t)shard;
    char *send = NULL, *recv = NULL;
    float *group = NULL, *partial = NULL;
    zt_status st = dalloc(t, p1 * (size_t)Ln, (void **)&send, err);
    if (st == ZT_OK)
        st = dalloc(t, p1 * (size_t)Ln, (void **)&recv, err);
    if (st == ZT_OK)
        st = dalloc(t, nshard * sizeof(float), (void **)&group, err);
    if (st == ZT_OK)
        st = dalloc(t, nshard * sizeof(float), (void **)&partial, err);
    if (st == ZT_OK)
        st = d->memset_async(t->dev, send, 0, p1 * (size_t)Ln, s, err);
    if (st == ZT_OK)
        st = d->memset_async(t->dev, partial, 0, nshard * sizeof(float), s, err);
    for (int j = 0; st == ZT_OK && j < Ln; j++) { /* to local peer j: the shards of m*Ln + j */
        for (int m = 0; st == ZT_OK && m < N; m++)
            st = d->memcpy_async(t->dev, group + (size_t)m * (size_t)shard,
                                 grads + (size_t)(m * Ln + j) * (size_t)shard,
                                 sizeof(float) * (size_t)shard, ZT_COPY_D2D, s, err);
        if (st == ZT_OK)
            st = pack4(t, group, (int64_t)nshard, block, send + p1 * (size_t)j, s, err);
    }
    if (st == ZT_OK)
        st = dsync(t, s, err);
    if (st == ZT_OK) {
        t->bytes_intra += p1 * (uint64_t)(Ln - 1);
        st = alltoall_sync(t->intra, send, recv, p1, err);
    }
    for (int i = 0; st == ZT_OK && i < Ln; i++)
        st = unpack4_add(t, recv + p1 * (size_t)i, (int64_t)nshard, block, partial, s, err);
    if (st == ZT_OK) /* requantize: to node m, its owner's part (send is free again) */
        st = d->memset_async(t->dev, send, 0, p2 * (size_t)N, s, err);
    for (int m = 0; st == ZT_OK && m < N; m++)
        st = pack4(t, partial + (size_t)m * (size_t)shard, shard, block, send + p2 * (size_t)m,
                   s, err);
    if (st == ZT_OK)
        st = dsync(t, s, err);
    if (st == ZT_OK) {
        t->bytes_inter += p2 * (uint64_t)(N - 1);
        st = alltoall_sync(t->inter, send, recv, p2, err);
    }
    for (int m = 0; st == ZT_OK && m < N; m++)
        st = unpack4_add(t, recv + p2 * (size_t)m, shard, block, acc, s, err);
    if (st == ZT_OK)
        st = dsync(t, s, err);
    dfree(t->dev, send), dfree(t->dev, recv), dfree(t->dev, group), dfree(t->dev, partial);
    return st;
}

zt_status zt_qgz_reduce(zt_topology *t, const float *grads, int64_t n, int block, float *acc,
                        const char *name, zt_stream *s, zt_error *err)
{
    zt_status st = t->inter ? qgz_hierarchical(t, grads, n, block, acc, s, err)
                            : qgz_flat(t, grads, n, block, acc, s, err);
    if (st != ZT_OK)
        zt_error_prefix(err, "qgZ of '%s': ", name);
    return st;
}

/* ---- hpZ ---- */

zt_status zt_hpz_gather(zt_topology *t, const void *slice, void *full, size_t bytes,
                        zt_comm_req *req, zt_error *err)
{
    t->bytes_intra += bytes * (uint64_t)(t->node_size - 1);
    return t->intra->iface->allgather(t->intra, slice, full, bytes, ZT_COMM_U8, req, err);
}

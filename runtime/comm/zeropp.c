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
                       int block, zt_comm_req *req, zt_error *err)
{
    size_t pb = packed_bytes(n, block, 8);
    q->send = calloc(1, pb); /* padding bytes are sent too */
    q->recv = malloc(pb * (size_t)t->size);
    if (!q->send || !q->recv)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory quantizing %lld elements for qwZ",
                      (long long)n);
    char *p = q->send;
    zt_quant8_parallel(t->pool, zt_quant_variant_best(), own, dtype, n, block, (int8_t *)p,
                       (float *)(p + values_bytes(n, 8)));
    zt_topology_count(t, pb);
    return t->world->iface->allgather(t->world, q->send, q->recv, pb, ZT_COMM_U8, req, err);
}

void zt_qwz_finish(zt_qwz *q, const zt_topology *t, void *full, zt_dtype dtype, int64_t n,
                   int block)
{
    size_t pb = packed_bytes(n, block, 8), vb = values_bytes(n, 8);
    for (int r = 0; r < t->size; r++) {
        const char *p = (const char *)q->recv + pb * (size_t)r;
        zt_dequant8_parallel(t->pool, zt_quant_variant_best(), (const int8_t *)p,
                             (const float *)(p + vb), n, block,
                             (char *)full + (size_t)r * (size_t)n * zt_dtype_size(dtype), dtype);
    }
    zt_qwz_free(q);
}

void zt_qwz_free(zt_qwz *q)
{
    free(q->send);
    free(q->recv);
    q->send = q->recv = NULL;
}

/* ---- qgZ ---- */

/* Quantizes n fp32 values into a packed int4 block list at p. */
static void pack4(const float *x, int64_t n, int block, char *p)
{
    zt_quant4(x, n, block, (uint8_t *)p, (float *)(p + values_bytes(n, 4)));
}

static void unpack4_add(const char *p, int64_t n, int block, float *acc)
{
    zt_dequant4_add((const uint8_t *)p, (const float *)(p + values_bytes(n, 4)), n, block, acc);
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
                          float *acc, const char *name, zt_error *err)
{
    size_t pb = packed_bytes(shard, block, 4);
    char *send = calloc(pb, (size_t)t->size), *recv = malloc(pb * (size_t)t->size);
    zt_status st = send && recv ? ZT_OK
                                : ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for qgZ of '%s'", name);
    for (int r = 0; st == ZT_OK && r < t->size; r++)
        pack4(grads + (size_t)r * (size_t)shard, shard, block, send + pb * (size_t)r);
    if (st == ZT_OK) {
        zt_topology_count(t, pb);
        st = alltoall_sync(t->world, send, recv, pb, err);
    }
    for (int q = 0; st == ZT_OK && q < t->size; q++) /* sum in fp32 */
        unpack4_add(recv + pb * (size_t)q, shard, block, acc);
    free(send), free(recv);
    return st;
}

/* Two levels (equal nodes of L ranks, N nodes; rank = node * L + local): inside the node,
 * local rank j gathers the node's sum of the N shards owned by ranks with local index j
 * (int4 all-to-all, fp32 sum); across nodes, those partial sums go to their owners (int4
 * all-to-all among the ranks with local index j, fp32 sum). Inter-node traffic is 1/L of
 * the one-level exchange. */
static zt_status qgz_hierarchical(zt_topology *t, const float *grads, int64_t shard, int block,
                                  float *acc, const char *name, zt_error *err)
{
    int Ln = t->node_size, N = t->size / Ln;
    size_t p1 = packed_bytes((int64_t)N * shard, block, 4), p2 = packed_bytes(shard, block, 4);
    size_t nshard = (size_t)N * (size_t)shard;
    char *send = calloc(p1, (size_t)Ln), *recv = malloc(p1 * (size_t)Ln);
    float *group = malloc(nshard * sizeof(float)), *partial = calloc(nshard, sizeof(float));
    zt_status st = send && recv && group && partial
                       ? ZT_OK
                       : ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for qgZ of '%s'", name);
    for (int j = 0; st == ZT_OK && j < Ln; j++) { /* to local peer j: the shards of m*Ln + j */
        for (int m = 0; m < N; m++)
            memcpy(group + (size_t)m * (size_t)shard,
                   grads + (size_t)(m * Ln + j) * (size_t)shard, sizeof(float) * (size_t)shard);
        pack4(group, (int64_t)nshard, block, send + p1 * (size_t)j);
    }
    if (st == ZT_OK) {
        t->bytes_intra += p1 * (uint64_t)(Ln - 1);
        st = alltoall_sync(t->intra, send, recv, p1, err);
    }
    for (int i = 0; st == ZT_OK && i < Ln; i++)
        unpack4_add(recv + p1 * (size_t)i, (int64_t)nshard, block, partial);
    for (int m = 0; st == ZT_OK && m < N; m++) /* requantize: to node m, its owner's part */
        pack4(partial + (size_t)m * (size_t)shard, shard, block, send + p2 * (size_t)m);
    if (st == ZT_OK) {
        t->bytes_inter += p2 * (uint64_t)(N - 1);
        st = alltoall_sync(t->inter, send, recv, p2, err);
    }
    for (int m = 0; st == ZT_OK && m < N; m++)
        unpack4_add(recv + p2 * (size_t)m, shard, block, acc);
    free(send), free(recv), free(group), free(partial);
    return st;
}

zt_status zt_qgz_reduce(zt_topology *t, const float *grads, int64_t n, int block, float *acc,
                        const char *name, zt_error *err)
{
    return t->inter ? qgz_hierarchical(t, grads, n, block, acc, name, err)
                    : qgz_flat(t, grads, n, block, acc, name, err);
}

/* ---- hpZ ---- */

zt_status zt_hpz_gather(zt_topology *t, const void *slice, void *full, size_t bytes,
                        zt_comm_req *req, zt_error *err)
{
    t->bytes_intra += bytes * (uint64_t)(t->node_size - 1);
    return t->intra->iface->allgather(t->intra, slice, full, bytes, ZT_COMM_U8, req, err);
}

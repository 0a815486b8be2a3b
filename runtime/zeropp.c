/* ZeRO++ communication on host memory (the host device backend with the mpi comm backend):
 *  - qwZ: a layer's all-gather sends each rank's shard as int8 blocks plus fp32 scales, and
 *    every rank (its own slot included) works with the dequantized values, so all ranks see
 *    identical weights;
 *  - qgZ: the gradient reduce-scatter becomes int4 all-to-alls, dequantized and summed in
 *    fp32: two levels (inside nodes, then across them) where nodes are of equal size, one
 *    level otherwise (uneven nodes);
 *  - hpZ: after a layer's all-gather, each rank keeps its 1/node_size slice of the full
 *    layer (device memory, counted in the device tier); the next gather of that layer in the
 *    same step (the backward pass) is an all-gather inside the node only. Secondary slices
 *    are dropped before the optimizer changes the parameters.
 * Byte counters split what this rank sends into traffic inside its node and across nodes,
 * by ztier.ranks_per_node (or the launcher's local size). */
#include "runtime/zeropp.h"
#include "runtime/comm/quant.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

void zt_topology_init(zt_runtime *rt)
{
    int rpn = rt->cfg.ranks_per_node;
    const char *env = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (rpn <= 0 && env && atoi(env) > 0)
        rpn = atoi(env);
    if (rpn <= 0 || rpn > rt->world)
        rpn = rt->world;
    int node = rt->rank / rpn;
    int first = node * rpn;
    rt->node_size = first + rpn <= rt->world ? rpn : rt->world - first;
    rt->local_rank = rt->rank - first;
}

/* Nodes of equal size, more than one of them, more than one rank each. */
static int uniform_nodes(const zt_runtime *rt)
{
    int rpn = rt->node_size;
    return rt->world > rpn && rpn > 1 && rt->world % rpn == 0 &&
           (rt->rank / rpn + 1) * rpn <= rt->world;
}

zt_status zt_zeropp_init(zt_runtime *rt, zt_error *err)
{
    int hpz = rt->cfg.zero_hpz_partition_size > 1 && rt->world > 1;
    int hier = rt->cfg.zero_quantized_gradients && uniform_nodes(rt);
    if (hpz && rt->cfg.zero_hpz_partition_size != rt->node_size)
        ZT_LOGW("zeropp", "zero_hpz_partition_size = %d: ztier keeps secondary shards per node "
                          "(%d ranks here, from ztier.ranks_per_node)",
                rt->cfg.zero_hpz_partition_size, rt->node_size);
    /* split is collective: every rank takes part when any of these is on (config is shared) */
    zt_status st = ZT_OK;
    if (hpz || hier)
        st = rt->comm->iface->split(rt->comm, rt->rank - rt->local_rank, rt->rank, &rt->intra, err);
    if (st == ZT_OK && hier)
        st = rt->comm->iface->split(rt->comm, rt->local_rank, rt->rank, &rt->inter, err);
    return st;
}

void zt_hpz_keep(zt_runtime *rt, zt_layer *L)
{
    if (rt->cfg.zero_hpz_partition_size <= 1 || !rt->intra || L->persistent || L->secondary ||
        L->flat_numel % rt->node_size != 0)
        return;
    size_t part = (size_t)(L->flat_numel / rt->node_size) * zt_dtype_size(rt->dtype);
    zt_error ignored = {0};
    if (rt->dev->iface->alloc(rt->dev, part, &L->secondary, &ignored) != ZT_OK) {
        L->secondary = NULL; /* no room: the backward gather crosses nodes as usual */
        return;
    }
    memcpy(L->secondary, (char *)L->gathered + part * (size_t)rt->local_rank, part);
}

zt_status zt_hpz_issue(zt_runtime *rt, zt_layer *L, zt_error *err)
{
    size_t part = (size_t)(L->flat_numel / rt->node_size) * zt_dtype_size(rt->dtype);
    L->from_secondary = 1;
    rt->stats.comm_bytes_intra += part * (uint64_t)(rt->node_size - 1);
    return rt->intra->iface->allgather(rt->intra, L->secondary, L->gathered, part, ZT_COMM_U8,
                                       &L->req, err);
}

void zt_hpz_release(zt_runtime *rt, zt_layer *L)
{
    rt->dev->iface->free(rt->dev, L->secondary);
    L->secondary = NULL;
    L->from_secondary = 0;
}

void zt_comm_count(zt_runtime *rt, uint64_t bytes_per_peer)
{
    rt->stats.comm_bytes_intra += bytes_per_peer * (uint64_t)(rt->node_size - 1);
    rt->stats.comm_bytes_inter += bytes_per_peer * (uint64_t)(rt->world - rt->node_size);
}

/* Bytes of one rank's packed block: int8 (or int4) values, then fp32 scales, 16-aligned. */
static size_t packed_bytes(int64_t n, int block, int bits)
{
    size_t values = bits == 8 ? (size_t)n : (size_t)(n + 1) / 2;
    values = (values + 15) / 16 * 16;
    return values + sizeof(float) * (size_t)zt_quant_blocks(n, block);
}

static size_t values_bytes(int64_t n, int bits)
{
    size_t v = bits == 8 ? (size_t)n : (size_t)(n + 1) / 2;
    return (v + 15) / 16 * 16;
}

zt_status zt_qwz_start(zt_runtime *rt, zt_layer *L, const void *own_slot, zt_error *err)
{
    int block = rt->cfg.quant_block_size;
    size_t pb = packed_bytes(L->shard_numel, block, 8);
    L->qsend = calloc(1, pb); /* padding bytes are sent too */
    L->qrecv = malloc(pb * (size_t)rt->world);
    if (!L->qsend || !L->qrecv)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory quantizing layer '%s'", L->name);
    char *p = L->qsend;
    zt_quant8(zt_quant_variant_best(), own_slot, rt->dtype, L->shard_numel, block, (int8_t *)p,
              (float *)(p + values_bytes(L->shard_numel, 8)));
    zt_comm_count(rt, pb);
    return rt->comm->iface->allgather(rt->comm, L->qsend, L->qrecv, pb, ZT_COMM_U8, &L->req, err);
}

void zt_qwz_finish(zt_runtime *rt, zt_layer *L)
{
    int block = rt->cfg.quant_block_size;
    size_t pb = packed_bytes(L->shard_numel, block, 8), vb = values_bytes(L->shard_numel, 8);
    size_t dsize = zt_dtype_size(rt->dtype);
    for (int r = 0; r < rt->world; r++) {
        const char *p = (const char *)L->qrecv + pb * (size_t)r;
        zt_dequant8(zt_quant_variant_best(), (const int8_t *)p, (const float *)(p + vb),
                    L->shard_numel, block,
                    (char *)L->gathered + (size_t)r * (size_t)L->shard_numel * dsize, rt->dtype);
    }
    zt_qwz_free(L);
}

void zt_qwz_free(zt_layer *L)
{
    free(L->qsend);
    free(L->qrecv);
    L->qsend = L->qrecv = NULL;
}

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
static zt_status qgz_flat(zt_runtime *rt, zt_layer *L, const float *grads, zt_error *err)
{
    int block = rt->cfg.quant_block_size;
    int64_t shard = L->shard_numel;
    size_t pb = packed_bytes(shard, block, 4);
    char *send = calloc(pb, (size_t)rt->world), *recv = malloc(pb * (size_t)rt->world);
    zt_status st = send && recv ? ZT_OK
                                : ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for qgZ of '%s'", L->name);
    for (int r = 0; st == ZT_OK && r < rt->world; r++)
        pack4(grads + (size_t)r * (size_t)shard, shard, block, send + pb * (size_t)r);
    if (st == ZT_OK) {
        zt_comm_count(rt, pb);
        st = alltoall_sync(rt->comm, send, recv, pb, err);
    }
    for (int q = 0; st == ZT_OK && q < rt->world; q++) /* sum in fp32 */
        unpack4_add(recv + pb * (size_t)q, shard, block, L->grad_acc);
    free(send), free(recv);
    return st;
}

/* Two levels (equal nodes of L ranks, N nodes; rank = node * L + local): inside the node,
 * local rank j gathers the node's sum of the N shards owned by ranks with local index j
 * (int4 all-to-all, fp32 sum); across nodes, those partial sums go to their owners (int4
 * all-to-all among the ranks with local index j, fp32 sum). Inter-node traffic is 1/L of
 * the one-level exchange. */
static zt_status qgz_hierarchical(zt_runtime *rt, zt_layer *L, const float *grads, zt_error *err)
{
    int block = rt->cfg.quant_block_size, Ln = rt->node_size, N = rt->world / Ln;
    int64_t shard = L->shard_numel;
    size_t p1 = packed_bytes((int64_t)N * shard, block, 4), p2 = packed_bytes(shard, block, 4);
    size_t nshard = (size_t)N * (size_t)shard;
    char *send = calloc(p1, (size_t)Ln), *recv = malloc(p1 * (size_t)Ln);
    float *group = malloc(nshard * sizeof(float)), *partial = calloc(nshard, sizeof(float));
    zt_status st = send && recv && group && partial
                       ? ZT_OK
                       : ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for qgZ of '%s'", L->name);
    for (int j = 0; st == ZT_OK && j < Ln; j++) { /* to local peer j: the shards of m*Ln + j */
        for (int m = 0; m < N; m++)
            memcpy(group + (size_t)m * (size_t)shard,
                   grads + (size_t)(m * Ln + j) * (size_t)shard, sizeof(float) * (size_t)shard);
        pack4(group, (int64_t)nshard, block, send + p1 * (size_t)j);
    }
    if (st == ZT_OK) {
        rt->stats.comm_bytes_intra += p1 * (uint64_t)(Ln - 1);
        st = alltoall_sync(rt->intra, send, recv, p1, err);
    }
    for (int i = 0; st == ZT_OK && i < Ln; i++)
        unpack4_add(recv + p1 * (size_t)i, (int64_t)nshard, block, partial);
    for (int m = 0; st == ZT_OK && m < N; m++) /* requantize: to node m, its owner's part */
        pack4(partial + (size_t)m * (size_t)shard, shard, block, send + p2 * (size_t)m);
    if (st == ZT_OK) {
        rt->stats.comm_bytes_inter += p2 * (uint64_t)(N - 1);
        st = alltoall_sync(rt->inter, send, recv, p2, err);
    }
    for (int m = 0; st == ZT_OK && m < N; m++)
        unpack4_add(recv + p2 * (size_t)m, shard, block, L->grad_acc);
    free(send), free(recv), free(group), free(partial);
    return st;
}

zt_status zt_qgz_reduce(zt_runtime *rt, zt_layer *L, const float *grads, zt_error *err)
{
    return rt->inter ? qgz_hierarchical(rt, L, grads, err) : qgz_flat(rt, L, grads, err);
}

/* ZeRO++ communication on host memory (the host device backend with the mpi comm backend):
 *  - qwZ: a layer's all-gather sends each rank's shard as int8 blocks plus fp32 scales, and
 *    every rank (its own slot included) works with the dequantized values, so all ranks see
 *    identical weights;
 *  - qgZ: the gradient reduce-scatter becomes an all-to-all of int4 blocks (each rank
 *    quantizes the piece of its gradient that every other rank owns), dequantized and summed
 *    in fp32 into the owner's accumulator. One level: uneven node sizes work as they are.
 *  - hpZ: after a layer's all-gather, each rank keeps its 1/node_size slice of the full
 *    layer (device memory, counted in the device tier); the next gather of that layer in the
 *    same step (the backward pass) is an all-gather inside the node only. Secondary slices
 *    are dropped before the optimizer changes the parameters.
 * Byte counters split what this rank sends into traffic inside its node and across nodes,
 * by ztier.ranks_per_node (or the launcher's local size). */
#include "runtime/zeropp.h"
#include "runtime/comm/quant.h"
#include "runtime/log.h"

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

zt_status zt_hpz_init(zt_runtime *rt, zt_error *err)
{
    if (rt->cfg.zero_hpz_partition_size <= 1 || rt->world == 1)
        return ZT_OK;
    if (rt->cfg.zero_hpz_partition_size != rt->node_size)
        ZT_LOGW("zeropp", "zero_hpz_partition_size = %d: ztier keeps secondary shards per node "
                          "(%d ranks here, from ztier.ranks_per_node)",
                rt->cfg.zero_hpz_partition_size, rt->node_size);
    return rt->comm->iface->split(rt->comm, rt->rank - rt->local_rank, rt->rank, &rt->intra, err);
}

void zt_hpz_keep(zt_runtime *rt, zt_layer *L)
{
    if (!rt->intra || L->persistent || L->secondary || L->flat_numel % rt->node_size != 0)
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
    L->qsend = malloc(pb);
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

zt_status zt_qgz_reduce(zt_runtime *rt, zt_layer *L, const float *grads, zt_error *err)
{
    int block = rt->cfg.quant_block_size;
    int64_t shard = L->shard_numel;
    size_t pb = packed_bytes(shard, block, 4), vb = values_bytes(shard, 4);
    char *send = malloc(pb * (size_t)rt->world), *recv = malloc(pb * (size_t)rt->world);
    if (!send || !recv) {
        free(send), free(recv);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory quantizing gradients of '%s'", L->name);
    }
    for (int r = 0; r < rt->world; r++) { /* the piece rank r owns */
        char *p = send + pb * (size_t)r;
        zt_quant4(grads + (size_t)r * (size_t)shard, shard, block, (uint8_t *)p,
                  (float *)(p + vb));
    }
    zt_comm_count(rt, pb);
    zt_comm_req req = {0};
    zt_status st = rt->comm->iface->alltoall(rt->comm, send, recv, pb, ZT_COMM_U8, &req, err);
    if (st == ZT_OK)
        st = rt->comm->iface->wait(rt->comm, &req, err);
    for (int q = 0; st == ZT_OK && q < rt->world; q++) { /* sum in fp32 */
        const char *p = recv + pb * (size_t)q;
        zt_dequant4_add((const uint8_t *)p, (const float *)(p + vb), shard, block, L->grad_acc);
    }
    free(send), free(recv);
    return st;
}

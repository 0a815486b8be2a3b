/* SPDX-License-Identifier: MIT */
/* Gradient reduction (zt_reducer): the gradients of a backward release summed over ranks
 * into this rank's fp32 accumulator (reduce-scatter, or qgZ's int4 all-to-all, or on the
 * device with the device optimizer), and, for the stream-ordered calls, the caller's
 * streams, the fence after them and the pending reductions: on a single rank a release
 * queues the gradients' copy into a pinned landing buffer on ztier's stream, and the copied
 * shard is added to the accumulator (first in, first out) by the first call that finds the
 * copy done, or by the next call that needs the sums. Under several ranks the collective
 * runs on the host (MPI) after the caller's event, or on the device (NCCL) after it without
 * a host wait. A host-memory collective (MPI, not qgZ) is issued and left in flight: the
 * release returns while it runs behind the caller's next layers, and it is added to the
 * accumulator in issue order once ZT_REDUCTIONS_IN_FLIGHT are in flight, or by the next
 * call that needs the sums (zt_step, a checkpoint). Every wait for the device is counted
 * (zt_stats.host_syncs). */
#include "core/align.h"
#include "core/convert.h"
#include "core/log.h"
#include "core/time.h"
#include "core/trace.h"
#include "runtime/plan.h"
#include "runtime/runtime.h"
#include "tiers/numa_place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Waits for a stream, counted. */
zt_status zt_rt_sync_stream(zt_runtime *rt, zt_stream *s)
{
    rt->stats.host_syncs++;
    return zt_device_stream_synchronize(rt->device.dev, s, &rt->err);
}

zt_status zt_rt_sync_event(zt_runtime *rt, zt_event *e)
{
    rt->stats.host_syncs++;
    return zt_device_event_synchronize(rt->device.dev, e, &rt->err);
}

/* grad_acc += shard (of dtype; the sum of `micro` micro-steps), on the optimizer pool. The
 * step's last accumulation also takes the gradient norm's sums while each chunk is in cache,
 * so zt_step need not read the accumulator again for them. */
static void accumulate_shard(zt_runtime *rt, zt_layer *L, const void *shard, zt_dtype dtype,
                             int micro)
{
    int last = L->accum_count + micro >= rt->cfg.gradient_accumulation_steps;
    int64_t bad = 0;
    /* the step's first micro-step overwrites: the sums are not zeroed between steps */
    double sum = zt_grad_accumulate(
        rt->cpu.pool, rt->cpu.adam_variant, L->grad_acc, rt->reg.acc_dtype, shard, dtype,
        L->shard_numel, zt_rt_grad_average_factor(rt), last ? &bad : NULL, L->accum_count == 0);
    L->norm_valid = last;
    L->norm_sumsq = sum;
    L->norm_bad = bad;
}

/* A communicator whose collectives run on the device (nccl): ordered after device work by
 * an event and device work after them, with no host wait either way. */
static int device_ordered(const zt_runtime *rt) { return zt_comm_device_ordered(rt->dist.comm); }

/* The input of the next collective is ready once `e` is: the comm's stream waits for it on
 * the device, or (host-memory backends) the host does. */
static zt_status comm_after(zt_runtime *rt, zt_event *e)
{
    if (device_ordered(rt))
        return zt_comm_wait_event(rt->dist.comm, rt->device.dev, e, &rt->err);
    return zt_rt_sync_event(rt, e);
}

/* ... once what is queued on s now is done. */
static zt_status comm_after_stream(zt_runtime *rt, zt_stream *s)
{
    zt_status st = rt->reduce.comm_ready
                       ? ZT_OK
                       : zt_device_event_create(rt->device.dev, &rt->reduce.comm_ready, &rt->err);
    if (st == ZT_OK)
        st = zt_device_event_record(rt->device.dev, rt->reduce.comm_ready, s, &rt->err);
    return st == ZT_OK ? comm_after(rt, rt->reduce.comm_ready) : st;
}

/* The host waited for the reduction of n layers from L since t0: communication the caller
 * was exposed to (zt_stats.comm_wait_s, a "comm" span on the caller's track). */
static void waited_n(zt_runtime *rt, double t0, const zt_layer *L, int n)
{
    rt->stats.comm_wait_s += zt_now_s() - t0;
    if (n > 1)
        zt_trace_span("comm", t0, "wait for the reduction of %d layers from %s", n, L->name);
    else
        zt_trace_span("comm", t0, "wait for the reduction of %s", L->name);
}

static void waited(zt_runtime *rt, double t0, const zt_layer *L) { waited_n(rt, t0, L, 1); }

/* A collective's result (the reduction of n layers from L) is needed on rt->device.stream:
 * it waits for it on the device, or (host backends) the host waits for the collective. */
static zt_status stream_after_comm(zt_runtime *rt, zt_comm_req *req, const zt_layer *L, int n)
{
    double t0 = zt_now_s();
    zt_status st = zt_comm_complete_on(rt->dist.comm, req, rt->device.stream, &rt->err);
    if (!device_ordered(rt))
        waited_n(rt, t0, L, n);
    return st;
}

/* The dtype gradients of dt cross the links in: 16-bit ones in 16 bits (half the bytes; NCCL's
 * ring and MPI's reduction round each add over ranks to 16 bits, an error docs/configuration.md
 * bounds), or widened to fp32 first where communication_data_type (or fp32_allreduce) asks for
 * exact sums. */
static zt_dtype wire_dtype(const zt_runtime *rt, zt_dtype dt)
{
    return zt_config_reduce_dtype(&rt->cfg, dt);
}

/* 16-bit gradients (src, of dt) widened to fp32 on the device before they are summed over
 * ranks (an fp32 wire, or qgZ, which quantizes fp32), so no rank's contribution is rounded to
 * 16 bits in the sum. */
static zt_status widen(zt_runtime *rt, zt_layer *L, const void *src, zt_dtype dt, void **wide)
{
    size_t n = (size_t)L->flat_numel;
    zt_status st = zt_prefetcher_alloc(rt->prefetch, n * sizeof(float), wide, &rt->err);
    if (st == ZT_OK)
        st = zt_device_cast_async(rt->device.dev, *wide, ZT_F32, src, dt, n, rt->device.stream,
                                  &rt->err);
    if (st == ZT_OK)
        st = comm_after_stream(rt, rt->device.stream);
    return st;
}

/* The sum of the layer's gradients over ranks is at the start of buf: copies this rank's
 * shard to the host and adds it to the fp32 accumulator. */
static zt_status add_reduced(zt_runtime *rt, zt_layer *L, void *buf, zt_dtype dt, int micro)
{
    if (L->opt_device) /* summed on the device, on ztier's stream */
        return zt_dev_opt_accumulate(rt, L, buf, dt, micro);
    void *host = rt->opt.staging_lp; /* holds one fp32 shard */
    size_t bytes = (size_t)L->shard_numel * zt_dtype_size(dt);
    zt_status st = zt_device_copy_sync(rt->device.dev, host, buf, bytes, ZT_COPY_D2H,
                                       rt->device.stream, &rt->err);
    if (st != ZT_OK)
        return st;
    rt->stats.d2h_bytes += bytes;
    rt->stats.reduced_bytes += (uint64_t)L->flat_numel * zt_dtype_size(dt);
    accumulate_shard(rt, L, host, dt, micro);
    L->accum_count += micro;
    return ZT_OK;
}

/* Issues the sum over ranks of `count` elements per rank, in place at the start of buf: a
 * reduce-scatter, or for replicated (persistent) layers an all-reduce. */
static zt_status issue_collective(zt_runtime *rt, void *buf, int64_t count, zt_dtype dt,
                                  int allreduce, zt_comm_req *req)
{
    uint64_t bytes = (uint64_t)count * zt_dtype_size(dt);
    if (allreduce)
        zt_topology_count_allreduce(&rt->dist.topo, bytes);
    else
        zt_topology_count(&rt->dist.topo, bytes);
    return allreduce /* replicated: every rank needs the whole sum */
               ? zt_comm_allreduce(rt->dist.comm, buf, buf, (size_t)count, zt_comm_dtype_of(dt),
                                   ZT_REDUCE_SUM, req, &rt->err)
               : zt_comm_reduce_scatter(rt->dist.comm, buf, buf, (size_t)count,
                                        zt_comm_dtype_of(dt), ZT_REDUCE_SUM, req, &rt->err);
}

static zt_status issue_sum(zt_runtime *rt, zt_layer *L, void *buf, zt_dtype dt, zt_comm_req *req)
{
    return issue_collective(rt, buf, L->shard_numel, dt, L->persistent, req);
}

/* Sums over ranks (in place at the start of buf), copies this rank's shard to the host and
 * adds it to the fp32 accumulator. *left: the collective did not complete and buf is left to
 * it (comm.h's rule): the caller must not free it. */
static zt_status reduce_in_place(zt_runtime *rt, zt_layer *L, void *buf, zt_dtype dt, int micro,
                                 int *left)
{
    zt_comm_req req = {0};
    zt_status st = issue_sum(rt, L, buf, dt, &req);
    if (st == ZT_OK)
        st = stream_after_comm(rt, &req, L, 1);
    *left = st != ZT_OK && zt_comm_pending(&req);
    return st == ZT_OK ? add_reduced(rt, L, buf, dt, micro) : st;
}

/* comm.h's rule, for the reductions' own buffers: a collective that did not complete may
 * still write them, so they stay allocated until the process ends (the runtime is beyond
 * use), taken out of the step's buffers that free_qgz and free_packs free. A qgZ slot (its
 * tail and sum) and the head scratch, which qgZ's exchange inside the node used: */
static void leave_qgz(zt_runtime *rt, zt_qgz_slot *slot)
{
    *slot = (zt_qgz_slot){0};
    rt->reduce.qgz.head = NULL;
}

/* A bucket's buffer. */
static void leave_pack(zt_runtime *rt, const void *pack)
{
    for (int k = 0; k < rt->reduce.packs.n; k++)
        if (rt->reduce.packs.buf[k] == pack)
            rt->reduce.packs.buf[k] = NULL;
}

/* ---- qgZ's buffers ---- */

/* qgZ's device buffers (rt->reduce.qgz): the head scratch, which every qgZ reduction uses
 * until its last exchange is issued, and ZT_QGZ_SLOTS slots, each the last exchange's tail
 * and, unless the sum goes straight into a device accumulator (the optimizer on the device),
 * an fp32 shard for the sum; the k-th qgZ release since the step uses slot k mod
 * ZT_QGZ_SLOTS. They are made at the first qgZ release of a step, sized for the largest
 * layer qgZ reduces, and freed by the step: so only that release agrees with the other ranks
 * on whether every rank could make them (an agreement is a round trip between nodes), not
 * every release. ztier estimate replays the same. */
static void free_qgz(zt_runtime *rt)
{
    zt_qgz_buffers *q = &rt->reduce.qgz;
    zt_device_tier_free(&rt->tiers.dtier, q->head);
    for (int k = 0; k < ZT_QGZ_SLOTS; k++) {
        zt_device_tier_free(&rt->tiers.dtier, q->slot[k].tail);
        zt_device_tier_free(&rt->tiers.dtier, q->slot[k].sum);
    }
    *q = (zt_qgz_buffers){0};
}

/* The largest shard qgZ reduces: every buffer's size grows with it. */
static int64_t qgz_largest_shard(const zt_runtime *rt)
{
    int64_t n = 0;
    for (int i = 0; i < rt->reg.n_layers; i++) {
        const zt_layer *L = &rt->reg.layers[i];
        if (!L->persistent && L->shard_numel > n)
            n = L->shard_numel;
    }
    return n;
}

static zt_status make_qgz(zt_runtime *rt)
{
    zt_qgz_buffers *q = &rt->reduce.qgz;
    int ranks = zt_topology_qgz_nodes(&rt->dist.topo), size = rt->dist.topo.size;
    int block = rt->cfg.quant_block_size;
    int64_t n = qgz_largest_shard(rt);
    size_t head = zt_qgz_head_bytes(size, ranks, n, block);
    size_t tail = zt_qgz_tail_bytes(size, ranks, n, block);
    size_t sum = rt->opt.on_device ? 0 : (size_t)n * sizeof(float);
    zt_status st = head ? zt_prefetcher_alloc(rt->prefetch, head, &q->head, &rt->err) : ZT_OK;
    for (int k = 0; st == ZT_OK && k < ZT_QGZ_SLOTS; k++) {
        st = zt_prefetcher_alloc(rt->prefetch, tail, &q->slot[k].tail, &rt->err);
        if (st == ZT_OK && sum)
            st = zt_prefetcher_alloc(rt->prefetch, sum, &q->slot[k].sum, &rt->err);
    }
    if (st != ZT_OK)
        free_qgz(rt);
    q->made = st == ZT_OK;
    return st;
}

static int slot_in_flight(const zt_runtime *rt, int slot)
{
    for (int i = 0; i < rt->reduce.n_inflight; i++)
        if (rt->reduce.inflight[(rt->reduce.inflight_head + i) % ZT_REDUCTIONS_IN_FLIGHT]
                .qgz_slot == slot)
            return 1;
    return 0;
}

static zt_status complete_inflight(zt_runtime *rt);

/* The sum over ranks of a bucket's layers (of dt) is at the start of buf, each layer's shard
 * after the one before: each is added to its accumulator, in release order. */
static zt_status add_bucket(zt_runtime *rt, const zt_bucket_entry *e, int n, void *buf, zt_dtype dt)
{
    size_t off = 0;
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < n; i++) {
        zt_layer *L = &rt->reg.layers[e[i].layer];
        st = add_reduced(rt, L, (char *)buf + off, dt, e[i].micro);
        off += (size_t)L->shard_numel * zt_dtype_size(dt);
    }
    return st;
}

/* This release's slot (*made: the buffers were made for it, the step's first), its sum
 * zeroed. A slot still in flight is completed first. */
static zt_status qgz_buffers_for(zt_runtime *rt, zt_layer *L, int *slot, int *made)
{
    zt_qgz_buffers *q = &rt->reduce.qgz;
    zt_status st = ZT_OK;
    *made = !q->made;
    if (*made)
        st = make_qgz(rt);
    *slot = q->next++ % ZT_QGZ_SLOTS;
    while (st == ZT_OK && slot_in_flight(rt, *slot)) /* released ZT_QGZ_SLOTS ago */
        st = complete_inflight(rt);
    void *sum = q->slot[*slot].sum;
    if (st == ZT_OK && sum)
        st = zt_device_memset_async(rt->device.dev, sum, 0, (size_t)L->shard_numel * sizeof(float),
                                    rt->device.stream, &rt->err);
    if (st != ZT_OK)
        zt_error_prefix(&rt->err, "qgZ's buffers: ");
    return st;
}

/* The end of a qgZ reduction into the host accumulator: the sum, from the slot, through the
 * host staging buffer. */
static zt_status qgz_add_sum(zt_runtime *rt, zt_layer *L, const void *sum)
{
    size_t bytes = (size_t)L->shard_numel * sizeof(float);
    zt_status st = zt_device_copy_sync(rt->device.dev, rt->opt.staging, sum, bytes, ZT_COPY_D2H,
                                       rt->device.stream, &rt->err);
    if (st != ZT_OK)
        return st;
    rt->stats.d2h_bytes += bytes;
    accumulate_shard(rt, L, rt->opt.staging, ZT_F32, 1);
    L->accum_count++;
    return ZT_OK;
}

/* qgZ done at once: the int4 reduction of fp32 gradients in device memory; its sum goes
 * straight into a device accumulator (the optimizer on the device), else through the slot's
 * sum into the host accumulator, as an unquantized reduction's does. */
static zt_status qgz_now(zt_runtime *rt, zt_layer *L, const float *grads, int slot)
{
    const zt_qgz_slot *s = &rt->reduce.qgz.slot[slot];
    float *acc = L->opt_device ? L->grad_acc : s->sum, *sum = s->sum;
    zt_qgz q = {0};
    zt_status st = zt_qgz_start(&q, &rt->dist.topo, grads, L->shard_numel, rt->cfg.quant_block_size,
                                rt->reduce.qgz.head, s->tail, L->name, rt->device.stream, &rt->err);
    double t0 = zt_now_s();
    if (st == ZT_OK)
        st = zt_qgz_wait(&q, &rt->err);
    waited(rt, t0, L);
    /* a collective of it failed (zt_qgz_start waits for the exchange inside the node on the
     * head scratch, zt_qgz_wait for the last one on the slot's tail): it may not have
     * completed */
    if (st == ZT_ERR_COMM)
        leave_qgz(rt, &rt->reduce.qgz.slot[slot]);
    if (st == ZT_OK)
        st = zt_qgz_finish(&q, &rt->dist.topo, acc, L->name, rt->device.stream, &rt->err);
    if (L->opt_device) {
        L->accum_count += st == ZT_OK;
        return st;
    }
    return st == ZT_OK ? qgz_add_sum(rt, L, sum) : st;
}

/* ---- reductions in flight (several ranks, a host-memory comm) ---- */

/* The collective runs on the comm's threads while the caller goes on: a host-memory comm
 * (MPI; on the device, nccl orders it without a host wait already), the sum added on the
 * host (the device optimizer adds it on ztier's stream at once), and overlap_comm on. */
static int can_defer(const zt_runtime *rt)
{
    return rt->dist.world > 1 && !device_ordered(rt) && !rt->opt.dev_layers && rt->cfg.overlap_comm;
}

/* Waits for the oldest reduction in flight and adds it to its accumulator. Its buffers are
 * freed (a qgZ slot's are kept for the next release) unless its collective never completed:
 * MPI may still write to them, so they stay allocated until the process ends. */
static zt_status complete_inflight(zt_runtime *rt)
{
    zt_inflight_reduction *r = &rt->reduce.inflight[rt->reduce.inflight_head];
    zt_layer *L = &rt->reg.layers[r->layer];
    zt_qgz_slot *slot = r->qgz_slot >= 0 ? &rt->reduce.qgz.slot[r->qgz_slot] : NULL;
    rt->reduce.inflight_head = (rt->reduce.inflight_head + 1) % ZT_REDUCTIONS_IN_FLIGHT;
    rt->reduce.n_inflight--;
    double t0 = zt_now_s();
    zt_status st =
        slot ? zt_qgz_wait(&r->qgz, &rt->err) : zt_comm_wait(rt->dist.comm, &r->req, &rt->err);
    waited_n(rt, t0, L, r->n_entries ? r->n_entries : 1);
    int finished = st == ZT_OK;
    if (st == ZT_OK && slot) {
        st =
            zt_qgz_finish(&r->qgz, &rt->dist.topo, slot->sum, L->name, rt->device.stream, &rt->err);
        if (st == ZT_OK)
            st = qgz_add_sum(rt, L, slot->sum);
    } else if (st == ZT_OK && r->n_entries) {
        st = add_bucket(rt, r->entries, r->n_entries, r->sum, r->dt);
    } else if (st == ZT_OK) {
        st = add_reduced(rt, L, r->sum, r->dt, r->micro);
    }
    if (st != ZT_OK && r->n_entries)
        zt_error_prefix(&rt->err,
                        "the gradient reduction of %d layers from '%s' (released earlier): ",
                        r->n_entries, L->name);
    else if (st != ZT_OK)
        zt_error_prefix(&rt->err,
                        "the gradient reduction of layer '%s' (released earlier): ", L->name);
    free(r->entries);
    r->entries = NULL;
    if (finished) {
        zt_device_tier_free(&rt->tiers.dtier, r->wide);
        zt_device_tier_free(&rt->tiers.dtier, r->grads);
    } else if (slot) {
        leave_qgz(rt, slot); /* left to MPI, as the head may be: all stay allocated */
    } else if (r->n_entries) {
        leave_pack(rt, r->sum); /* a bucket's slot: left to MPI too */
    }
    return st;
}

/* Every reduction in flight completed; the first failure is returned (one completed to make
 * room counts), and the rest are still waited for (they are collectives every rank issued). */
static zt_status complete_all_inflight(zt_runtime *rt)
{
    zt_error first = rt->reduce.inflight_err;
    rt->reduce.inflight_err = (zt_error){0};
    while (rt->reduce.n_inflight)
        if (complete_inflight(rt) != ZT_OK && first.status == ZT_OK)
            first = rt->err;
    if (first.status != ZT_OK)
        rt->err = first;
    return first.status;
}

/* A slot of the ring for a new reduction in flight; when ZT_REDUCTIONS_IN_FLIGHT are, the
 * oldest completes first (its failure is reported after this collective, which every rank
 * issues alike, in *done). */
static zt_inflight_reduction *inflight_slot(zt_runtime *rt, zt_status *done)
{
    *done = ZT_OK;
    if (rt->reduce.n_inflight == ZT_REDUCTIONS_IN_FLIGHT)
        *done = complete_inflight(rt);
    int k = (rt->reduce.inflight_head + rt->reduce.n_inflight) % ZT_REDUCTIONS_IN_FLIGHT;
    return &rt->reduce.inflight[k];
}

/* Issues the sum of `sum` (micro micro-steps) and leaves it in flight; once issued (*taken),
 * the reduction owns `grads` and `wide` (NULL each, or sum is one of them; a stage-1 layer's
 * own sums stay its own). */
static zt_status defer_sum(zt_runtime *rt, zt_layer *L, void *sum, void *grads, void *wide,
                           zt_dtype dt, int micro, int *taken)
{
    zt_status done;
    zt_inflight_reduction *r = inflight_slot(rt, &done);
    *r = (zt_inflight_reduction){.layer = (int)(L - rt->reg.layers),
                                 .grads = grads,
                                 .wide = wide,
                                 .sum = sum,
                                 .micro = micro,
                                 .dt = dt,
                                 .qgz_slot = -1};
    zt_status st = issue_sum(rt, L, sum, dt, &r->req);
    *taken = st == ZT_OK;
    if (st == ZT_OK)
        rt->reduce.n_inflight++;
    return done != ZT_OK ? done : st;
}

/* qgZ up to its last exchange, which is left in flight in the release's slot (the gradients
 * are quantized by then: the caller frees them). */
static zt_status defer_qgz(zt_runtime *rt, zt_layer *L, const float *grads, int slot)
{
    zt_status done;
    zt_inflight_reduction *r = inflight_slot(rt, &done);
    *r = (zt_inflight_reduction){.layer = (int)(L - rt->reg.layers), .qgz_slot = slot};
    zt_status st = zt_qgz_start(
        &r->qgz, &rt->dist.topo, grads, L->shard_numel, rt->cfg.quant_block_size,
        rt->reduce.qgz.head, rt->reduce.qgz.slot[slot].tail, L->name, rt->device.stream, &rt->err);
    if (st == ZT_OK)
        rt->reduce.n_inflight++;
    return done != ZT_OK ? done : st;
}

int zt_rt_reclaim_reduction(void *ctx)
{
    zt_runtime *rt = ctx;
    if (!rt->reduce.n_inflight)
        return 0;
    zt_error caller = rt->err;
    if (complete_inflight(rt) != ZT_OK && rt->reduce.inflight_err.status == ZT_OK)
        rt->reduce.inflight_err = rt->err;
    rt->err = caller;
    return 1;
}

static void free_held(zt_runtime *rt, zt_bucket_entry *e, int n);
static void free_packs(zt_runtime *rt);

void zt_rt_drop_reductions(zt_runtime *rt)
{
    free_held(rt, rt->reduce.open.e, rt->reduce.open.n); /* never issued: on no rank */
    rt->reduce.open = (zt_reduce_bucket){0};
    rt->reduce.inflight_err = (zt_error){0};
    for (int i = 0; i < rt->reg.n_layers; i++)
        rt->reg.layers[i].local_count = 0; /* the step's own sums go with it */
    while (rt->reduce.n_inflight) {
        zt_error ignored = rt->err;
        complete_inflight(rt);
        rt->err = ignored;
    }
    free_qgz(rt);
    free_packs(rt);
}

/* Stage 1: the released gradients added to this rank's own fp32 sums of the step, on ztier's
 * stream (the first micro-step's overwrite them); *due is set at the step's last
 * micro-step, when the sums are reduce-scattered. */
static zt_status add_local(zt_runtime *rt, zt_layer *L, int *due)
{
    size_t n = (size_t)L->flat_numel;
    zt_status st = L->local_count == 0
                       ? zt_device_cast_async(rt->device.dev, L->grad_local.ptr, ZT_F32, L->grads,
                                              rt->reg.dtype, n, rt->device.stream, &rt->err)
                       : zt_device_accumulate_async(rt->device.dev, L->grad_local.ptr, L->grads,
                                                    rt->reg.dtype, n, rt->device.stream, &rt->err);
    L->local_count += st == ZT_OK;
    *due = st == ZT_OK && L->local_count >= rt->cfg.gradient_accumulation_steps;
    if (*due) /* the collective reads them after ztier's stream has summed them */
        st = comm_after_stream(rt, rt->device.stream);
    return st;
}

/* ---- reduction buckets (reduce_bucket_size; several ranks, not qgZ) ---- */

/* One held release summed over ranks on its own: widened first when its wire is fp32 and it
 * is not, then issued and left in flight where the others are, or summed at once. Its gradients are freed, or handed
 * to the reduction in flight. */
static zt_status reduce_held(zt_runtime *rt, const zt_bucket_entry *e)
{
    zt_layer *L = &rt->reg.layers[e->layer];
    void *buf = e->src, *wide = NULL, *grads = e->owned ? e->src : NULL;
    zt_dtype dt = e->dt;
    zt_status st = ZT_OK;
    if (wire_dtype(rt, dt) != dt) { /* what can fail before the collective is agreed on first */
        st = widen(rt, L, e->src, dt, &wide);
        st = zt_comm_agree(rt->dist.comm, st, "the gradient reduction", &rt->err);
        buf = wide, dt = ZT_F32;
    }
    if (st == ZT_OK && can_defer(rt)) {
        int taken = 0;
        st = defer_sum(rt, L, buf, grads, wide, dt, e->micro, &taken);
        if (taken)
            grads = wide = NULL;
    } else if (st == ZT_OK) {
        int left = 0;
        st = reduce_in_place(rt, L, buf, dt, e->micro, &left);
        if (left) /* the collective's, which reads and writes buf (wide, or the gradients) */
            grads = wide = NULL;
    }
    zt_device_tier_free(&rt->tiers.dtier, wide); /* after rt->device.stream's use of them */
    zt_device_tier_free(&rt->tiers.dtier, grads);
    return st;
}

static void free_held(zt_runtime *rt, zt_bucket_entry *e, int n)
{
    for (int i = 0; i < n; i++)
        if (e[i].owned)
            zt_device_tier_free(&rt->tiers.dtier, e[i].src);
    free(e);
}

/* The dtype a bucket is packed and summed in: its releases' 16-bit dtype when every one of
 * them crosses the links in it, else fp32 (a stage-1 layer's sums are fp32 already). */
static zt_dtype bucket_dtype(const zt_runtime *rt, const zt_reduce_bucket *b)
{
    zt_dtype dt = wire_dtype(rt, b->e[0].dt);
    for (int i = 1; i < b->n; i++)
        if (wire_dtype(rt, b->e[i].dt) != dt)
            return ZT_F32;
    return dt;
}

/* Every rank's piece of each held release, packed rank by rank into `pack` of dt (parts: the
 * ranks, or 1 for an all-reduce): [rank 0: layer a, layer b, ...][rank 1: ...]. */
static zt_status pack_bucket(zt_runtime *rt, const zt_reduce_bucket *b, int parts, void *pack,
                             zt_dtype dt)
{
    char *dst = pack;
    zt_status st = ZT_OK;
    for (int r = 0; r < parts; r++)
        for (int i = 0; st == ZT_OK && i < b->n; i++) {
            const zt_bucket_entry *e = &b->e[i];
            size_t n = (size_t)rt->reg.layers[e->layer].shard_numel;
            const char *src = (const char *)e->src + (size_t)r * n * zt_dtype_size(e->dt);
            st = e->dt == dt
                     ? zt_device_memcpy_async(rt->device.dev, dst, src, n * zt_dtype_size(dt),
                                              ZT_COPY_D2D, rt->device.stream, &rt->err)
                     : zt_device_cast_async(rt->device.dev, dst, dt, src, e->dt, n,
                                            rt->device.stream, &rt->err);
            dst += n * zt_dtype_size(dt);
        }
    return st;
}

static void free_packs(zt_runtime *rt)
{
    zt_bucket_buffers *q = &rt->reduce.packs;
    for (int k = 0; k < q->n; k++)
        zt_device_tier_free(&rt->tiers.dtier, q->buf[k]);
    *q = (zt_bucket_buffers){0};
}

/* The step's bucket buffers, made at its first bucket: each rank says whether it could, and
 * where one could not, every rank reduces this step's releases one by one. */
static zt_status make_packs(zt_runtime *rt)
{
    zt_bucket_buffers *q = &rt->reduce.packs;
    int slots = 0;
    size_t bytes = (size_t)zt_plan_bucket_elems(rt, rt->dist.world, &slots) * sizeof(float);
    zt_error caller = rt->err, mine = {0};
    zt_status st = ZT_OK;
    q->made = 1;
    for (int k = 0; st == ZT_OK && k < slots; k++) {
        st = zt_prefetcher_alloc(rt->prefetch, bytes, &q->buf[k], &mine);
        q->n += st == ZT_OK;
    }
    int exchanged = 0;
    st = zt_comm_agree_exchanged(rt->dist.comm, st, "the gradient buckets", &exchanged, &rt->err);
    if (st == ZT_OK || !exchanged) {
        if (st != ZT_OK)
            free_packs(rt), q->made = 1;
        return st;
    }
    ZT_LOGI("reduce",
            "no room on some rank for %d x %zu bytes of gradient bucket buffers "
            "(zero_optimization.reduce_bucket_size): this step's releases are reduced one by one",
            slots, bytes);
    free_packs(rt);
    q->made = 1;
    rt->err = caller;
    return ZT_OK;
}

/* This bucket's buffer (NULL: none this step), the bucket before it in that slot completed
 * (the first failure of those completed is returned; the buffer is free all the same, unless
 * its collective never completed: then there is none). */
static zt_status pack_slot(zt_runtime *rt, void **buf)
{
    zt_bucket_buffers *q = &rt->reduce.packs;
    zt_status st = q->made ? ZT_OK : make_packs(rt);
    *buf = NULL;
    if (st != ZT_OK || q->n == 0)
        return st;
    int k = q->next++ % q->n;
    zt_error first = {0};
    for (int busy = 1; busy;) {
        busy = 0;
        for (int i = 0; i < rt->reduce.n_inflight; i++)
            busy |=
                rt->reduce.inflight[(rt->reduce.inflight_head + i) % ZT_REDUCTIONS_IN_FLIGHT].sum ==
                q->buf[k];
        if (busy && complete_inflight(rt) != ZT_OK && first.status == ZT_OK)
            first = rt->err;
    }
    *buf = q->buf[k]; /* NULL when MPI may still write it */
    if (first.status != ZT_OK)
        rt->err = first;
    return first.status;
}

/* Each held release reduced on its own (no bucket buffers this step); every one is a
 * collective all ranks issue, so all are, and the first failure is returned. */
static zt_status reduce_one_by_one(zt_runtime *rt, zt_reduce_bucket *b)
{
    zt_status first = ZT_OK;
    zt_error kept = {0};
    for (int i = 0; i < b->n; i++)
        if (reduce_held(rt, &b->e[i]) != ZT_OK && first == ZT_OK)
            first = rt->err.status, kept = rt->err;
    free(b->e);
    if (first != ZT_OK)
        rt->err = kept;
    return first;
}

/* The held releases in one collective: packed into the slot's buffer (sized for fp32), summed
 * over ranks, each shard added to its accumulator (left in flight where the others are). */
static zt_status issue_packed(zt_runtime *rt, zt_reduce_bucket *b, void *pack)
{
    const zt_layer *head = &rt->reg.layers[b->e[0].layer];
    int parts = b->allreduce ? 1 : rt->dist.world;
    zt_dtype dt = bucket_dtype(rt, b);
    zt_status st = pack_bucket(rt, b, parts, pack, dt);
    for (int i = 0; i < b->n; i++) /* freed after the pack's copies of them */
        if (b->e[i].owned)
            zt_device_tier_free(&rt->tiers.dtier, b->e[i].src);
    if (st == ZT_OK)
        st = comm_after_stream(rt, rt->device.stream);
    int64_t count = b->elems / parts;
    if (st == ZT_OK && can_defer(rt)) {
        zt_status done;
        zt_inflight_reduction *r = inflight_slot(rt, &done);
        *r = (zt_inflight_reduction){.layer = b->e[0].layer,
                                     .entries = b->e,
                                     .n_entries = b->n,
                                     .sum = pack,
                                     .dt = dt,
                                     .qgz_slot = -1};
        st = issue_collective(rt, pack, count, dt, b->allreduce, &r->req);
        if (st == ZT_OK) {
            rt->stats.reduce_buckets++;
            rt->reduce.n_inflight++;
            return done;
        }
        r->entries = NULL;
    } else if (st == ZT_OK) {
        zt_comm_req req = {0};
        st = issue_collective(rt, pack, count, dt, b->allreduce, &req);
        rt->stats.reduce_buckets += st == ZT_OK;
        if (st == ZT_OK)
            st = stream_after_comm(rt, &req, head, b->n);
        if (st != ZT_OK && zt_comm_pending(&req))
            leave_pack(rt, pack);
        if (st == ZT_OK)
            st = add_bucket(rt, b->e, b->n, pack, dt);
    }
    free(b->e);
    return st;
}

/* The open bucket's collective, in the step's next bucket buffer, or each release on its own
 * when the step has none. A reduction completed to free that buffer may have failed: that is
 * reported after this bucket's collective, which every rank issues alike. */
static zt_status issue_bucket(zt_runtime *rt, zt_reduce_bucket *b)
{
    void *pack = NULL;
    zt_status prior = pack_slot(rt, &pack);
    zt_error prior_err = rt->err;
    if (!pack && prior != ZT_OK) { /* the ranks could not agree on the buffers */
        free_held(rt, b->e, b->n);
        return prior;
    }
    zt_status st = pack ? issue_packed(rt, b, pack) : reduce_one_by_one(rt, b);
    if (prior != ZT_OK)
        rt->err = prior_err;
    return prior != ZT_OK ? prior : st;
}

/* The open bucket's releases summed over ranks now (full, another kind's release, zt_step). */
static zt_status issue_open(zt_runtime *rt)
{
    zt_reduce_bucket b = rt->reduce.open;
    rt->reduce.open = (zt_reduce_bucket){0};
    if (b.n == 0)
        return ZT_OK;
    if (b.n > 1)
        return issue_bucket(rt, &b);
    zt_status st = reduce_held(rt, &b.e[0]);
    free(b.e);
    return st;
}

/* Holds a release's gradients (src, of dt; owned: the released buffer, taken from the layer)
 * in the open bucket. The bucket is issued first when the layer would take it past
 * reduce_bucket_size (DeepSpeed's rule: a bucket of several never holds more), when it holds
 * the layer already (the next micro-step) or when the layer needs the other kind of
 * collective; and after, once it reaches the size (a layer that large goes alone). */
static zt_status hold(zt_runtime *rt, zt_layer *L, void *src, zt_dtype dt, int owned, int micro)
{
    zt_reduce_bucket *b = &rt->reduce.open;
    int close = b->n && (b->allreduce != L->persistent ||
                         b->elems + L->flat_numel > rt->cfg.reduce_bucket_size);
    for (int i = 0; i < b->n; i++)
        close |= b->e[i].layer == (int)(L - rt->reg.layers);
    zt_status st = close ? issue_open(rt) : ZT_OK;
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 8;
        zt_bucket_entry *e = realloc(b->e, (size_t)cap * sizeof *e);
        if (!e) /* the others are left waiting in their collective: as a dead rank would */
            return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of host memory for a gradient bucket");
        b->e = e, b->cap = cap;
    }
    b->e[b->n++] = (zt_bucket_entry){(int)(L - rt->reg.layers), src, dt, owned, micro};
    b->elems += L->flat_numel;
    b->allreduce = L->persistent;
    if (owned)
        L->grads = NULL;
    if (st == ZT_OK && b->elems >= rt->cfg.reduce_bucket_size)
        st = issue_open(rt);
    return st;
}

/* The sums of a stage-1 layer's micro-steps, held for the bucket's reduce-scatter. */
static zt_status reduce_local(zt_runtime *rt, zt_layer *L)
{
    int micro = L->local_count;
    L->local_count = 0;
    return hold(rt, L, L->grad_local.ptr, ZT_F32, 0, micro);
}

zt_status zt_rt_flush_local_sums(zt_runtime *rt)
{
    zt_status st = ZT_OK;
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        if (L->local_count > 0) { /* a step before the configured micro-steps were done */
            st = comm_after_stream(rt, rt->device.stream);
            if (st == ZT_OK)
                st = reduce_local(rt, L);
        }
    }
    return st;
}

/* Sums the layer's gradients over ranks into this rank's fp32 accumulator: held for the
 * bucket (several ranks; in 16 bits unless the wire is fp32), or by qgZ (from fp32), or on one
 * rank at once. What can fail before qgZ's collective (widening, growing its buffers) is
 * agreed on first, so a rank that fails there
 * stops every rank at once instead of leaving them in the collective. */
static zt_status reduce_grads(zt_runtime *rt, zt_layer *L)
{
    if (L->grad_local.ptr) { /* stage 1: summed here until the step's last micro-step */
        int due = 0;
        zt_status st = add_local(rt, L, &due);
        return st == ZT_OK && due ? reduce_local(rt, L) : st;
    }
    int qgz = rt->cfg.zero_quantized_gradients && rt->dist.world > 1 && !L->persistent;
    if (rt->dist.world > 1 && !qgz)
        return hold(rt, L, L->grads, rt->reg.dtype, 1, 1);
    if (!qgz) { /* one rank: the gradients are the sum */
        int left = 0;
        zt_status st = reduce_in_place(rt, L, L->grads, rt->reg.dtype, 1, &left);
        if (left) /* not freed by the release (comm.h's rule) */
            L->grads = NULL;
        return st;
    }
    void *buf = L->grads, *wide = NULL;
    int grew = 0, slot = -1;
    zt_status st = ZT_OK;
    if (rt->reg.dtype != ZT_F32) {
        st = widen(rt, L, L->grads, rt->reg.dtype, &wide);
        buf = wide;
    }
    if (st == ZT_OK)
        st = qgz_buffers_for(rt, L, &slot, &grew);
    if (rt->reg.dtype != ZT_F32 || grew) /* the same on every rank: the sizes decide */
        st = zt_comm_agree(rt->dist.comm, st, "the gradient reduction", &rt->err);
    if (st == ZT_OK && can_defer(rt))
        st = defer_qgz(rt, L, buf, slot);
    else if (st == ZT_OK)
        st = qgz_now(rt, L, buf, slot);
    zt_device_tier_free(&rt->tiers.dtier, wide);
    return st;
}

/* ---- pending reductions (single rank, stream-ordered release) ---- */

static zt_pending_reduction *pending_at(zt_runtime *rt, int k)
{
    return &rt->reduce.pending[(rt->reduce.pending_head + k) % rt->reduce.n_landing];
}

/* Adds the oldest pending reduction to its accumulator; with wait, waits for its copy. 0 when
 * it is not done yet (only without wait). */
static int complete_oldest(zt_runtime *rt, int wait)
{
    zt_pending_reduction *p = pending_at(rt, 0);
    zt_event *copied = rt->reduce.landing_copied[p->buf];
    int done = zt_device_event_query(rt->device.dev, copied);
    if (done == 0 && !wait)
        return 0;
    zt_layer *L = &rt->reg.layers[p->layer];
    zt_error e = {0};
    if (done == 0) {
        rt->stats.host_syncs++;
        done = zt_device_event_synchronize(rt->device.dev, copied, &e) == ZT_OK ? 1 : -1;
    }
    if (done < 0 && rt->async_err.status == ZT_OK) /* the copy failed: this step's sums are */
        ZT_ERR(&rt->async_err, ZT_ERR_DEVICE,      /* incomplete */
               "the copy of layer '%s''s gradients to the host failed (%s); the gradients of "
               "this step are incomplete: load a checkpoint",
               L->name, e.msg[0] ? e.msg : "event query failed");
    if (done > 0) {
        accumulate_shard(rt, L, rt->reduce.landing[p->buf], rt->reg.dtype, 1);
        L->accum_count++;
        size_t bytes = (size_t)L->shard_numel * zt_dtype_size(rt->reg.dtype);
        rt->stats.d2h_bytes += bytes;
        rt->stats.reduced_bytes += bytes;
    }
    rt->reduce.pending_head = (rt->reduce.pending_head + 1) % rt->reduce.n_landing;
    rt->reduce.n_pending--;
    return 1;
}

void zt_rt_poll_reductions(zt_runtime *rt)
{
    while (rt->reduce.n_pending && complete_oldest(rt, 0))
        ;
}

/* The single rank's pending copies added, and the caller's streams past their last
 * release. */
static zt_status finish_landing(zt_runtime *rt)
{
    while (rt->reduce.n_pending)
        complete_oldest(rt, 1);
    zt_status st = ZT_OK;
    if (rt->reduce
            .caller_done) { /* rt->device.stream waits for every caller release: wait for it */
        st = zt_rt_sync_stream(rt, rt->device.stream);
        zt_device_tier_reclaim(&rt->tiers.dtier, 0);
    }
    return st;
}

zt_status zt_rt_finish_reductions(zt_runtime *rt)
{
    zt_status held = issue_open(rt); /* every rank alike: the step's last bucket */
    zt_error held_err = rt->err;
    zt_status st = finish_landing(rt);
    zt_status inflight = complete_all_inflight(rt);
    free_qgz(rt); /* fenced: freed once ztier's stream is past the last qgZ sum */
    free_packs(rt);
    if (held != ZT_OK)
        rt->err = held_err;
    return held != ZT_OK ? held : st != ZT_OK ? st : inflight;
}

/* Pinned landing buffers, made at the first stream-ordered backward release. */
static zt_status open_landing(zt_runtime *rt)
{
    size_t largest = 0;
    for (int i = 0; i < rt->reg.n_layers; i++) {
        size_t b = (size_t)rt->reg.layers[i].shard_numel * zt_dtype_size(rt->reg.dtype);
        largest = b > largest ? b : largest;
    }
    int n = rt->cfg.gradient_landing_buffers;
    rt->reduce.landing = calloc((size_t)n, sizeof *rt->reduce.landing);
    rt->reduce.landing_copied = calloc((size_t)n, sizeof *rt->reduce.landing_copied);
    rt->reduce.pending = calloc((size_t)n, sizeof *rt->reduce.pending);
    if (!rt->reduce.landing || !rt->reduce.landing_copied || !rt->reduce.pending) {
        zt_rt_free_landing(rt);
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of host memory for the landing buffers");
    }
    rt->reduce.landing_bytes = largest;
    rt->reduce.n_landing = n;
    zt_status st = ZT_OK;
    size_t bytes = zt_round_up(largest ? largest : 1, ZT_PAGE_BYTES);
    for (int k = 0; k < n && st == ZT_OK; k++) {
        if (posix_memalign(&rt->reduce.landing[k], ZT_PAGE_BYTES, bytes) != 0) {
            rt->reduce.landing[k] = NULL;
            st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of host memory");
            break;
        }
        zt_numa_place(rt->reduce.landing[k], bytes, zt_host_tier_node(&rt->tiers.host),
                      "gradient landing buffers");
        zt_pin(&rt->tiers.pinner, rt->reduce.landing[k], bytes, "gradient landing buffers");
        st = zt_device_event_create(rt->device.dev, &rt->reduce.landing_copied[k], &rt->err);
    }
    if (st != ZT_OK) {
        zt_error_prefix(&rt->err,
                        "%d gradient landing buffers of %zu bytes "
                        "(ztier.gradient_landing_buffers): ",
                        n, largest);
        zt_rt_free_landing(rt);
    }
    return st;
}

void zt_rt_free_landing(zt_runtime *rt)
{
    for (int k = 0; k < rt->reduce.n_landing; k++) {
        zt_unpin(&rt->tiers.pinner, rt->reduce.landing[k]);
        free(rt->reduce.landing[k]);
        if (rt->reduce.landing_copied[k])
            zt_device_event_destroy(rt->device.dev, rt->reduce.landing_copied[k]);
    }
    free(rt->reduce.landing), free(rt->reduce.landing_copied), free(rt->reduce.pending);
    rt->reduce.landing = NULL, rt->reduce.landing_copied = NULL, rt->reduce.pending = NULL;
    rt->reduce.n_landing = rt->reduce.n_pending = rt->reduce.pending_head = 0;
}

/* A landing buffer no pending reduction uses (waiting for the oldest when all are). */
static int free_landing(zt_runtime *rt)
{
    if (rt->reduce.n_pending == rt->reduce.n_landing)
        complete_oldest(rt, 1);
    for (int k = 0; k < rt->reduce.n_landing; k++) {
        int used = 0;
        for (int j = 0; j < rt->reduce.n_pending; j++)
            used |= pending_at(rt, j)->buf == k;
        if (!used)
            return k;
    }
    return -1; /* not reached: n_pending < n_landing */
}

/* Single rank: the gradients are the shard. Their copy to a landing buffer is queued on
 * rt->device.stream (which already waits for the caller's release) and added later. */
static zt_status queue_reduction(zt_runtime *rt, zt_layer *L)
{
    zt_status st = rt->reduce.landing ? ZT_OK : open_landing(rt);
    if (st != ZT_OK)
        return st;
    int k = free_landing(rt);
    size_t bytes = (size_t)L->shard_numel * zt_dtype_size(rt->reg.dtype);
    st = zt_device_memcpy_async(rt->device.dev, rt->reduce.landing[k], L->grads, bytes, ZT_COPY_D2H,
                                rt->device.stream, &rt->err);
    if (st == ZT_OK)
        st = zt_device_event_record(rt->device.dev, rt->reduce.landing_copied[k], rt->device.stream,
                                    &rt->err);
    if (st != ZT_OK)
        return st;
    *pending_at(rt, rt->reduce.n_pending) = (zt_pending_reduction){(int)(L - rt->reg.layers), k};
    rt->reduce.n_pending++;
    return ZT_OK;
}

/* rt->device.stream (the fence of every free, the stream of the gradient copies) waits for the
 * caller's stream to reach this point. */
zt_status zt_rt_fence_after_caller(zt_runtime *rt, zt_stream *caller)
{
    zt_status st = ZT_OK;
    rt->gather_env.fenced_drops = 1;
    if (!rt->reduce.caller_done)
        st = zt_device_event_create(rt->device.dev, &rt->reduce.caller_done, &rt->err);
    if (st == ZT_OK)
        st = zt_device_event_record(rt->device.dev, rt->reduce.caller_done, caller, &rt->err);
    if (st == ZT_OK)
        st = zt_device_stream_wait_event(rt->device.dev, rt->device.stream, rt->reduce.caller_done,
                                         &rt->err);
    return st;
}

zt_status zt_rt_reduce_release(zt_runtime *rt, zt_layer *L, zt_stream *caller)
{
    zt_status st = ZT_OK;
    if (L->opt_device && (rt->dist.world == 1 || !caller)) {
        /* summed on the device after the caller's stream: one rank has no collective, and
         * the blocking form's caller finished its work; the blocking form returns with the
         * sum done (and so its buffers free at once, as ztier estimate replays) */
        st = reduce_grads(rt, L);
        if (st == ZT_OK && !caller)
            st = zt_rt_sync_stream(rt, rt->device.stream);
    } else if (caller && rt->dist.world == 1) {
        st = queue_reduction(rt, L);
    } else {
        if (caller) /* the collective reads them: after the caller's work on them */
            st = comm_after(rt, rt->reduce.caller_done);
        else /* the layer's own earlier micro-steps are summed first (in flight ones are, in
              * issue order, behind this one's) */
            zt_rt_poll_reductions(rt), st = finish_landing(rt);
        if (st == ZT_OK)
            st = reduce_grads(rt, L);
    }
    zt_device_tier_free(&rt->tiers.dtier, L->grads); /* after rt->device.stream's copy of them */
    L->grads = NULL;
    return st;
}

/* ---- caller streams ---- */

zt_status zt_rt_stream_create(zt_runtime *rt, zt_stream **out)
{
    zt_caller_streams *cs = &rt->reduce.callers;
    if (cs->n == cs->cap) {
        int cap = cs->cap ? cs->cap * 2 : 4;
        zt_stream **s = realloc(cs->s, (size_t)cap * sizeof *s);
        if (!s)
            return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of host memory for a stream");
        cs->s = s, cs->cap = cap;
    }
    zt_status st = zt_device_stream_create(rt->device.dev, out, &rt->err);
    if (st == ZT_OK)
        cs->s[cs->n++] = *out;
    return st;
}

int zt_rt_stream_known(const zt_runtime *rt, const zt_stream *s)
{
    if (rt->device.iface != &zt_device_host)
        return 1; /* a cudaStream_t of the caller's: the backend cannot tell */
    for (int i = 0; i < rt->reduce.callers.n; i++)
        if (rt->reduce.callers.s[i] == s)
            return 1;
    return 0;
}

zt_status zt_rt_stream_destroy(zt_runtime *rt, zt_stream *s)
{
    zt_caller_streams *cs = &rt->reduce.callers;
    for (int i = 0; i < cs->n; i++)
        if (cs->s[i] == s) {
            /* its work up to the last release is what rt->device.stream and the frees wait for:
             * both pass that point before the stream goes */
            zt_rt_forget_stream(rt, s);
            zt_status st = zt_device_stream_synchronize(rt->device.dev, s, &rt->err);
            if (st == ZT_OK)
                st = zt_device_stream_synchronize(rt->device.dev, rt->device.stream, &rt->err);
            zt_device_stream_destroy(rt->device.dev, s);
            cs->s[i] = cs->s[--cs->n];
            return st;
        }
    return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                  "zt_stream_destroy: %p is not a stream made by zt_stream_create on this "
                  "runtime (or it was destroyed already)",
                  (void *)s);
}

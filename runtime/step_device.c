/* SPDX-License-Identifier: MIT */
/* The optimizer on the device (ztier.device_optimizer, offload_optimizer.device "none"; or
 * the layers of the device's share of offload_optimizer.ratio, runtime/opt_split.h):
 * master, m, v and the fp32 gradient accumulators live in device memory; released gradients
 * are added to the accumulators on ztier's stream (no copy to the host), and the step's norm
 * and Adam run as device kernels (the backend's accumulate/sumsq/adam slots: CUDA kernels,
 * or the host backend's CPU twins, which CI runs). The host waits once per step, for the two
 * sums of the norm; everything else is ordered on ztier's stream. */
#include "runtime/runtime.h"
#include "core/convert.h"
#include "core/time.h"
#include "core/trace.h"
#include "optimizer/adam.h"

#include <string.h>

zt_status zt_dev_opt_open(zt_runtime *rt, uint64_t param_tmp_bytes)
{
    const zt_device_iface *d = rt->device.dev->iface;
    rt->opt.dev_layers = 0;
    for (int i = 0; i < rt->reg.n_layers; i++)
        rt->opt.dev_layers += rt->reg.layers[i].opt_device;
    /* a split "auto" refines keeps the split's engine even with every layer on the device */
    rt->opt.on_device = rt->opt.dev_layers == rt->reg.n_layers && !rt->opt.resplit;
    zt_status st =
        d->alloc(rt->device.dev, ZT_DEVICE_STEP_STATS_BYTES, &rt->opt.dev_step_stats, &rt->err);
    rt->opt.dev_param_tmp_bytes = param_tmp_bytes;
    if (st == ZT_OK && param_tmp_bytes)
        st = d->alloc(rt->device.dev, param_tmp_bytes, &rt->opt.dev_param_tmp, &rt->err);
    if (st != ZT_OK)
        zt_error_prefix(&rt->err, "the device optimizer's buffers: ");
    return st;
}

void zt_dev_opt_close(zt_runtime *rt)
{
    if (!rt->device.dev)
        return;
    zt_device_free(rt->device.dev, rt->opt.dev_step_stats);
    zt_device_free(rt->device.dev, rt->opt.dev_param_tmp);
    rt->opt.dev_step_stats = rt->opt.dev_param_tmp = NULL;
}

zt_status zt_dev_opt_alloc_acc(zt_runtime *rt, zt_layer *L)
{
    size_t bytes = (size_t)L->shard_numel * sizeof(float);
    void *p = NULL;
    zt_status st = zt_device_alloc(rt->device.dev, bytes, &p, &rt->err);
    L->grad_acc = p;
    return st == ZT_OK ? zt_dev_opt_zero_acc(rt, L) : st;
}

zt_status zt_dev_opt_zero_acc(zt_runtime *rt, zt_layer *L)
{
    L->accum_count = 0;
    return zt_device_memset_async(rt->device.dev, L->grad_acc, 0,
                                  (size_t)L->shard_numel * sizeof(float), rt->device.stream,
                                  &rt->err);
}

zt_status zt_dev_opt_accumulate(zt_runtime *rt, zt_layer *L, const void *shard, zt_dtype dt,
                                int micro)
{
    zt_status st = zt_device_accumulate_async(rt->device.dev, L->grad_acc, shard, dt,
                                              (size_t)L->shard_numel, rt->device.stream, &rt->err);
    if (st == ZT_OK) {
        L->accum_count += micro;
        rt->stats.reduced_bytes += (uint64_t)L->shard_numel * zt_dtype_size(dt);
    }
    return st;
}

zt_status zt_dev_opt_grad_stats(zt_runtime *rt, float scale, double out[2])
{
    const zt_device_iface *d = rt->device.dev->iface;
    double *sums = rt->opt.dev_step_stats;
    /* the sums and Adam's count start from zero every step */
    zt_status st = d->memset_async(rt->device.dev, sums, 0, ZT_DEVICE_STEP_SCRATCH_AT,
                                   rt->device.stream, &rt->err);
    for (int i = 0; st == ZT_OK && i < rt->reg.n_layers; i++) {
        zt_layer *L = &rt->reg.layers[i];
        if (!L->opt_device || (L->persistent && rt->dist.rank != 0))
            continue; /* the CPU's (host_grad_stats); replicated: counted once */
        st = d->sumsq_async(rt->device.dev, L->grad_acc, (size_t)L->shard_numel, scale, sums,
                            (double *)((char *)rt->opt.dev_step_stats + ZT_DEVICE_STEP_SCRATCH_AT),
                            rt->device.stream, &rt->err);
    }
    double got[2] = {0, 0};
    if (st == ZT_OK) /* the one wait of the step */
        st = zt_device_copy_sync(rt->device.dev, got, sums, 2 * sizeof(double), ZT_COPY_D2H,
                                 rt->device.stream, &rt->err);
    out[0] += got[0]; /* added to the CPU's share's with a split */
    out[1] += got[1];
    return st;
}

/* The new working-dtype parameters go straight into a device home, or through the device
 * buffer to the host (and on to an NVMe home). */
static zt_status store_params(zt_runtime *rt, zt_layer *L)
{
    size_t bytes = (size_t)L->shard_numel * zt_dtype_size(rt->reg.dtype);
    void *host = zt_home_host_ptr(&L->param_home);
    void *dst = host ? host : rt->opt.staging_lp;
    zt_status st = zt_device_copy_sync(rt->device.dev, dst, rt->opt.dev_param_tmp, bytes,
                                       ZT_COPY_D2H, rt->device.stream, &rt->err);
    rt->stats.d2h_bytes += bytes;
    if (st == ZT_OK && !host)
        st = zt_home_store(&rt->tiers.homes, &L->param_home, rt->opt.staging_lp, &rt->err);
    return st;
}

zt_status zt_dev_opt_update(zt_runtime *rt, zt_layer *L, const zt_adam_hparams *h)
{
    zt_adam_consts c;
    zt_adam_consts_init(&c, h);
    int direct = L->param_home.kind == ZT_TIER_DEVICE;
    void *out = direct ? L->param_home.ptr : rt->opt.dev_param_tmp;
    unsigned long long *count =
        (unsigned long long *)((char *)rt->opt.dev_step_stats + ZT_DEVICE_STEP_COUNT_AT);
    double t0 = zt_now_s();
    zt_status st = zt_device_adam_async(rt->device.dev, &c, L->master.ptr, L->exp_avg.ptr,
                                        L->exp_avg_sq.ptr, L->grad_acc, out, rt->reg.dtype,
                                        (size_t)L->shard_numel, count, rt->device.stream, &rt->err);
    if (st == ZT_OK && !direct)
        st = store_params(rt, L);
    zt_trace_span("optimizer", t0, "device adam %s (%lld elements)", L->name,
                  (long long)L->shard_numel);
    return st;
}

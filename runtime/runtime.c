/* SPDX-License-Identifier: MIT */
/* Runtime lifecycle: the configuration, the modules it opens (comm at create; device,
 * optimizer and topology at commit), their teardown, and the counters gathered from them. */
#include "runtime/runtime.h"
#include "core/log.h"
#include "core/numa.h"
#include "core/trace.h"
#include "runtime/checkpoint_dir.h"
#include "runtime/config_batch.h"
#include "runtime/config_parse.h"
#include "runtime/config_schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Merge order, lowest first: defaults, the file (opts->config_path, else $ZT_CONFIG), the
 * JSON text, zt_config_set calls (runtime_config_set below), then the environment. */
static zt_status load_config(zt_runtime *rt, const zt_options *opts, const char *config_json)
{
    zt_config_defaults(&rt->cfg);
    const char *path = opts->config_path ? opts->config_path : getenv("ZT_CONFIG");
    zt_status st = ZT_OK;
    if (path && *path)
        st = zt_config_load_file(&rt->cfg, path, &rt->err);
    if (st == ZT_OK && config_json)
        st = zt_config_parse(&rt->cfg, config_json, "config text", &rt->err);
    if (st == ZT_OK)
        st = zt_config_apply_env(&rt->cfg, &rt->err);
    if (st == ZT_OK)
        st = zt_config_validate(&rt->cfg, &rt->err);
    if (st == ZT_OK && opts->log_level < 0 && rt->cfg.log_level >= 0)
        zt_log_configure(rt->cfg.log_level, opts->log_fn, opts->log_user);
    return st;
}

zt_status zt_rt_config_set(zt_runtime *rt, const char *path, const zt_config_value *value)
{
    zt_config next = rt->cfg;
    zt_status st = zt_config_set_typed(&next, path, value, &rt->err);
    if (st == ZT_OK)
        st = zt_config_apply_env(&next, &rt->err); /* the environment keeps the last word */
    if (st == ZT_OK && strcmp(next.comm_backend, rt->cfg.comm_backend) != 0)
        st = ZT_ERR(&rt->err, ZT_ERR_USAGE,
                    "%s: ztier.comm_backend cannot change after zt_runtime_create "
                    "(the ranks are already connected); set it in the config text or file",
                    zt_config_setter_name(value->type));
    if (st != ZT_OK)
        return st;
    if (rt->log.level_option < 0 && next.log_level >= 0 && next.log_level != rt->cfg.log_level)
        zt_log_configure(next.log_level, rt->log.fn, rt->log.user);
    rt->cfg = next;
    return ZT_OK;
}

static zt_status open_comm(zt_runtime *rt, const zt_options *opts)
{
    zt_status st = zt_comm_create(rt->cfg.comm_backend, &rt->dist.comm, &rt->err);
    if (st != ZT_OK)
        return st;
    rt->dist.rank = rt->dist.comm->rank;
    rt->dist.world = rt->dist.comm->size;
    if ((opts->rank >= 0 && opts->rank != rt->dist.rank) ||
        (opts->world_size >= 0 && opts->world_size != rt->dist.world))
        return ZT_ERR(&rt->err, ZT_ERR_CONFIG,
                      "zt_options asks for rank %d of %d but the %s comm backend reports rank "
                      "%d of %d; leave rank/world_size at -1 or launch matching ranks",
                      opts->rank, opts->world_size, rt->dist.comm->iface->name, rt->dist.rank,
                      rt->dist.world);
    return ZT_OK;
}

static zt_status open_device(zt_runtime *rt)
{
    rt->device.iface = zt_device_find(rt->cfg.device_backend, &rt->err);
    if (!rt->device.iface)
        return rt->err.status;
    zt_device_config dc = {
        zt_config_device_budget(&rt->cfg), rt->cfg.device_index, 1, rt->cpu.pool, 0, 1};
    zt_status st = ZT_OK;
    if (rt->dist.world > 1 && dc.device_index < 0) /* collective: every rank at commit */
        st = zt_comm_local_rank(rt->dist.comm, &dc.local_rank, &dc.local_size, &rt->err);
    if (st != ZT_OK)
        return st;
    st = rt->device.iface->create(&dc, &rt->device.dev, &rt->err);
    rt->tiers.dtier.dev = rt->device.dev;
    if (st == ZT_OK)
        st = zt_device_stream_create(rt->device.dev, &rt->device.stream, &rt->err);
    rt->tiers.dtier.fence = rt->device.stream; /* waits for every caller release (layer_exec.c) */
    if (st == ZT_OK)
        st = zt_device_stream_create(rt->device.dev, &rt->device.prefetch_stream, &rt->err);
    rt->tiers.homes.dev = rt->device.dev;
    rt->tiers.homes.stream = rt->device.stream;
    rt->tiers.homes.host = &rt->tiers.host;
    rt->tiers.host.capacity = (uint64_t)rt->cfg.host_capacity;
    rt->tiers.pinner.dev = rt->device.dev;
    rt->tiers.pinner.limit = (uint64_t)rt->cfg.pinned_limit;
    rt->tiers.host.pin = &rt->tiers.pinner;
    return st;
}

/* The NUMA node the GPU hangs off, as sysfs gives it; -1 where not known or not usable (said
 * in the log: the placement is lost, training is not changed). */
static int gpu_numa_node(const zt_runtime *rt)
{
    const char *bus = rt->device.dev->pci_bus_id;
    int node = bus[0] ? zt_numa_node_of_gpu(bus) : -1, bound = -1;
    zt_error why = {0};
    if (node < 0)
        ZT_LOGI("numa",
                "%s: host buffers and optimizer threads are not bound to a NUMA node "
                "(ztier.numa_node binds them)",
                bus[0] ? "sysfs gives no NUMA node for the GPU" : "no GPU");
    else if (zt_numa_check_node(node, "the GPU's NUMA node", &bound, &why) != ZT_OK)
        ZT_LOGW("numa", "GPU %d at PCI %s: %s; host buffers and threads stay unbound",
                rt->device.dev->index, bus, why.msg); /* e.g. a cpuset without that node */
    return bound;
}

/* The NUMA node of the rank's host buffers and optimizer threads: ztier.numa_node, else the
 * GPU's. Applied to the host tier (and through it to every pinned buffer; see
 * tiers/numa_place.h) and to the optimizer pool, made before the GPU was open. */
static zt_status place_on_numa_node(zt_runtime *rt)
{
    int bound = -1;
    zt_status st = ZT_OK;
    if (rt->cfg.numa_node >= 0)
        st = zt_numa_check_node(rt->cfg.numa_node, "ztier.numa_node", &bound, &rt->err);
    else
        bound = gpu_numa_node(rt);
    if (st != ZT_OK || bound < 0)
        return st;
    rt->tiers.host.numa_bind = 1;
    rt->tiers.host.numa_node = bound;
    st = zt_threadpool_bind(rt->cpu.pool, bound, &rt->err);
    if (st == ZT_OK)
        ZT_LOGI("numa", "host buffers and optimizer threads on NUMA node %d (%s)", bound,
                rt->cfg.numa_node >= 0 ? "ztier.numa_node" : "the GPU's node");
    return st;
}

/* The collectives on device memory: with the cuda backend and several ranks (comm "auto"),
 * or comm "nccl", an NCCL communicator over the MPI one that joined the ranks at create,
 * opened now that the rank's GPU is chosen (NCCL binds a communicator to the current GPU). */
static zt_status open_device_comm(zt_runtime *rt)
{
    const char *want = rt->cfg.comm_backend;
    int cuda = strcmp(rt->cfg.device_backend, "cuda") == 0;
    int nccl = strcmp(want, "nccl") == 0 || (cuda && rt->dist.world > 1 && !strcmp(want, "auto"));
    if (!nccl)
        return ZT_OK;
    if (!cuda)
        return ZT_ERR(&rt->err, ZT_ERR_CONFIG,
                      "ztier.comm_backend \"nccl\" moves device memory: it needs "
                      "ztier.device_backend \"cuda\"");
#ifdef ZT_HAVE_NCCL
    zt_comm *c = NULL;
    zt_status st = zt_comm_nccl_open(rt->dist.comm, rt->device.dev->index, &c, &rt->err);
    if (st == ZT_OK) {
        rt->dist.comm = c; /* which owns the MPI communicator now */
        ZT_LOGI("runtime", "rank %d of %d: collectives over NCCL on GPU %d", rt->dist.rank,
                rt->dist.world, rt->device.dev->index);
    }
    return st;
#else
    return ZT_ERR(&rt->err, ZT_ERR_UNSUPPORTED,
                  "ztier.device_backend \"cuda\" with %d ranks sums device memory over NCCL, "
                  "which this build lacks: rebuild with ZT_NCCL=ON where NCCL is installed",
                  rt->dist.world);
#endif
}

static zt_status open_optimizer(zt_runtime *rt)
{
    int threads = rt->cfg.optimizer_threads;
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    zt_status st = zt_threadpool_create(threads, -1, &rt->cpu.pool, &rt->err);
    if (st != ZT_OK)
        return st;
    if (zt_adam_variant_parse(rt->cfg.adam_variant, &rt->cpu.adam_variant) != 0)
        return ZT_ERR(&rt->err, ZT_ERR_CONFIG,
                      "ztier.adam_variant = \"%s\": this CPU or build lacks it; use \"auto\", "
                      "\"scalar\", \"avx2\" or \"avx512\" as the CPU supports",
                      rt->cfg.adam_variant);
    rt->cpu.threads = threads;
    return ZT_OK;
}

/* offload_optimizer.ratio as run (after commit) or as configured. */
static float split_ratio(const zt_runtime *rt)
{
    if (rt->state == ZT_RT_COMMITTED)
        return rt->opt.cpu_ratio;
    if (zt_config_device_optimizer(&rt->cfg))
        return 0.0f;
    return rt->cfg.offload_optimizer.device == ZT_TIER_HOST ? rt->cfg.offload_optimizer.ratio
                                                            : 1.0f;
}

void zt_rt_optimizer_info(const zt_runtime *rt, zt_optimizer_info *out)
{
    const zt_config *c = &rt->cfg;
    zt_batch_sizes batch;
    zt_error ignored; /* a refused combination: commit reports it; here the sizes as given */
    if (zt_config_batch_sizes(c, rt->dist.world, &batch, &ignored) != ZT_OK)
        batch = (zt_batch_sizes){c->train_batch_size, c->train_micro_batch_size_per_gpu,
                                 c->gradient_accumulation_steps};
    double b1 = c->beta1, b2 = c->beta2;
    zt_lr_schedule_betas(&c->sched, rt->train.steps, &b1, &b2); /* OneCycle's, if cycling */
    zt_optimizer_info o = {sizeof o,
                           c->optimizer == ZT_OPT_ADAMW,
                           c->lr,
                           (float)b1,
                           (float)b2,
                           c->eps,
                           c->weight_decay,
                           c->gradient_clipping,
                           batch.accumulation,
                           rt->state == ZT_RT_COMMITTED ? rt->opt.dev_layers == rt->reg.n_layers
                                                        : zt_config_device_optimizer(c),
                           {0},
                           batch.train_batch,
                           batch.micro_batch,
                           split_ratio(rt)};
    snprintf(o.scheduler, sizeof o.scheduler, "%s", zt_lr_schedule_name(c->sched.type));
    *out = o;
}

/* The schedule and its parameters, by DeepSpeed's names. */
static void describe_schedule(const zt_config *c, char *buf, size_t len)
{
    const zt_lr_schedule *s = &c->sched;
    const char *name = zt_lr_schedule_name(s->type);
    const char *curve = s->warmup_type == ZT_WARMUP_LINEAR ? "linear" : "log";
    switch (s->type) {
    case ZT_LR_WARMUP:
    case ZT_LR_WARMUP_DECAY: {
        char total[48] = "";
        if (s->type == ZT_LR_WARMUP_DECAY)
            snprintf(total, sizeof total, ", total_num_steps %lld", (long long)s->total_num_steps);
        snprintf(buf, len, "%s (warmup_min_lr %g, warmup_max_lr %g, warmup_num_steps %lld %s%s)",
                 name, (double)s->warmup_min_lr, (double)s->warmup_max_lr,
                 (long long)s->warmup_num_steps, curve, total);
        return;
    }
    case ZT_LR_WARMUP_COSINE:
        snprintf(buf, len,
                 "%s (of lr %g: warmup_min_ratio %g, warmup_num_steps %lld %s, total_num_steps "
                 "%lld, cos_min_ratio %g)",
                 name, (double)c->lr, (double)s->warmup_min_ratio, (long long)s->warmup_num_steps,
                 curve, (long long)s->total_num_steps, (double)s->cos_min_ratio);
        return;
    case ZT_LR_ONE_CYCLE: {
        char mom[96] = "off";
        if (s->cycle_momentum)
            snprintf(mom, sizeof mom, "beta1 %g..%g, decay_mom_rate %g", (double)s->cycle_min_mom,
                     (double)s->cycle_max_mom, (double)s->decay_mom_rate);
        long long second = (long long)(s->cycle_second_step_size >= 0 ? s->cycle_second_step_size
                                                                      : s->cycle_first_step_size);
        long long stairs2 =
            (long long)(s->cycle_second_stair_count >= 0 ? s->cycle_second_stair_count
                                                         : s->cycle_first_stair_count);
        char stairs[80] = "";
        if (s->cycle_first_stair_count > 0 || stairs2 > 0)
            snprintf(stairs, sizeof stairs,
                     ", cycle_first_stair_count %lld, cycle_second_stair_count %lld",
                     (long long)s->cycle_first_stair_count, stairs2);
        snprintf(buf, len,
                 "%s (cycle_min_lr %g, cycle_max_lr %g, cycle_first_step_size %lld, "
                 "cycle_second_step_size %lld%s, decay_lr_rate %g, decay_step_size %lld, momentum "
                 "cycling %s)",
                 name, (double)s->cycle_min_lr, (double)s->cycle_max_lr,
                 (long long)s->cycle_first_step_size, second, stairs, (double)s->decay_lr_rate,
                 (long long)s->decay_step_size, mom);
        return;
    }
    default:
        snprintf(buf, len, "none");
    }
}

static void describe_precision(const zt_runtime *rt, char *buf, size_t len)
{
    const zt_config *c = &rt->cfg;
    if (c->bf16)
        snprintf(buf, len, "bf16 (fp32 master)");
    else if (!c->fp16)
        snprintf(buf, len, "fp32");
    else if (c->fp16_loss_scale > 0)
        snprintf(buf, len, "fp16 (fp32 master), fixed loss scale %g", (double)c->fp16_loss_scale);
    else
        snprintf(buf, len,
                 "fp16 (fp32 master), dynamic loss scale from %g (window %d, hysteresis %d, "
                 "min %g)",
                 (double)rt->train.loss_scale, c->fp16_loss_scale_window, c->fp16_hysteresis,
                 (double)c->fp16_min_loss_scale);
    zt_dtype dt = zt_config_dtype(c);
    size_t used = strlen(buf);
    if (rt->dist.world > 1 && dt != ZT_F32 && used < len) /* each add over ranks rounded */
        snprintf(buf + used, len - used, ", gradients summed over ranks in %s",
                 zt_config_reduce_dtype(c, dt) == ZT_F32 ? "fp32 (communication_data_type)"
                 : dt == ZT_BF16                         ? "bf16"
                                                         : "fp16");
}

/* One line at the default level (rank 0) with what training runs with; the placement and
 * kernels at info. */
void zt_rt_log_optimizer(const zt_runtime *rt)
{
    const zt_config *c = &rt->cfg;
    if (c->log_effective_settings && rt->dist.rank == 0) {
        char lr[96], betas[64], clip[32] = "off", precision[224], sched[320];
        int cycled = c->sched.type == ZT_LR_ONE_CYCLE && c->sched.cycle_momentum;
        if (c->sched.type == ZT_LR_CONSTANT)
            snprintf(lr, sizeof lr, "lr %g", (double)c->lr);
        else
            snprintf(lr, sizeof lr, "lr per step from the schedule");
        if (cycled)
            snprintf(betas, sizeof betas, "betas (cycled by the schedule, 0.99)");
        else
            snprintf(betas, sizeof betas, "betas (%g, %g)", (double)c->beta1, (double)c->beta2);
        if (c->gradient_clipping > 0)
            snprintf(clip, sizeof clip, "at norm %g", (double)c->gradient_clipping);
        describe_precision(rt, precision, sizeof precision);
        describe_schedule(c, sched, sizeof sched);
        ZT_LOGW("runtime",
                "effective settings: %s, %s (zt_step_args.lr overrides), %s, eps %g, weight "
                "decay %g%s, %s, gradient clipping %s, %d accumulation steps, schedule %s "
                "(ztier.log_effective_settings false hides this line)",
                c->optimizer == ZT_OPT_ADAMW ? "AdamW" : "Adam (L2 weight decay)", lr, betas,
                (double)c->eps, (double)c->weight_decay,
                c->weight_decay_set ? "" : " (the type's default)", precision, clip,
                c->gradient_accumulation_steps, sched);
    }
    static const char *const tiers[] = {"host memory", "host memory", "NVMe"};
    if (zt_config_device_optimizer(c))
        ZT_LOGI("optimizer", "state, gradient sums and Adam in device memory (%s kernels)",
                c->device_backend);
    else
        ZT_LOGI("optimizer", "state in %s, %d threads, %s kernels",
                tiers[c->offload_optimizer.device], rt->cpu.threads,
                zt_adam_variant_name(rt->cpu.adam_variant));
}

/* When this rank's configuration is unusable but the launcher started several ranks, join
 * them anyway (default backend) so the agreement below tells every rank to stop. */
static void open_comm_for_agreement(zt_runtime *rt)
{
    if (rt->dist.comm || zt_launcher_world_size() <= 1)
        return;
    zt_error ignored = {0};
    if (zt_comm_create("auto", &rt->dist.comm, &ignored) != ZT_OK)
        rt->dist.comm = NULL;
}

/* Reads the configuration and joins the ranks; everything the configuration shapes (device,
 * optimizer, node topology) opens at commit, so zt_config_set can still change it. */
zt_status zt_rt_create(zt_runtime *rt, const zt_options *opts, const char *config_json)
{
    zt_log_configure(opts->log_level, opts->log_fn, opts->log_user);
    rt->log.level_option = opts->log_level;
    rt->log.fn = opts->log_fn;
    rt->log.user = opts->log_user;
    zt_status st = load_config(rt, opts, config_json);
    if (st == ZT_OK)
        st = open_comm(rt, opts);
    if (st != ZT_OK)
        open_comm_for_agreement(rt);
    st = zt_comm_agree(rt->dist.comm, st, "zt_runtime_create", &rt->err);
    if (st != ZT_OK)
        return st;
    rt->state = ZT_RT_REGISTERING;
    ZT_LOGI("runtime", "rank %d of %d, comm %s", rt->dist.rank, rt->dist.world,
            rt->dist.comm->iface->name);
    return ZT_OK;
}

/* ztier.trace_path, with "{rank}" replaced by the rank; under several ranks without it,
 * ".<rank>" is appended so ranks never share a file. */
static zt_status open_trace(zt_runtime *rt)
{
    char path[ZT_PATH_MAX + 32];
    const char *p = rt->cfg.trace_path, *at = strstr(p, "{rank}");
    if (at)
        snprintf(path, sizeof path, "%.*s%d%s", (int)(at - p), p, rt->dist.rank, at + 6);
    else if (rt->dist.world > 1)
        snprintf(path, sizeof path, "%s.%d", p, rt->dist.rank);
    else
        snprintf(path, sizeof path, "%s", p);
    return zt_trace_open(path, &rt->err);
}

void zt_rt_resolve_model_autos(zt_runtime *rt)
{
    int shared, of;
    int64_t h = zt_rt_hidden_size(rt, &shared, &of);
    char set[512];
    if (zt_config_resolve_model_autos(&rt->cfg, h, set, sizeof set) > 0) {
        if (rt->cfg.hidden_size > 0)
            ZT_LOGI("config", "\"auto\" sizes from ztier.hidden_size %lld: %s", (long long)h, set);
        else
            ZT_LOGI("config",
                    "\"auto\" sizes from hidden size %lld (a dimension of %d of the %d 2-D "
                    "parameters; ztier.hidden_size sets it): %s",
                    (long long)h, shared, of, set);
    } else if (h <= 0 && rt->cfg.n_auto_keys > zt_config_auto_report(&rt->cfg, NULL, 0))
        ZT_LOGI("config",
                "\"auto\" sizes keep ztier's defaults: no 2-D parameter to take a hidden size "
                "from (ztier.hidden_size sets it)");
}

zt_status zt_rt_open(zt_runtime *rt)
{
    /* keys set one by one are checked against each other once, here */
    zt_status st = zt_config_validate(&rt->cfg, &rt->err);
    if (st == ZT_OK)
        st = zt_config_check_schedule(&rt->cfg, &rt->err);
    if (st == ZT_OK) /* DeepSpeed's batch rules need the ranks, known from here */
        st = zt_config_apply_batch(&rt->cfg, rt->dist.world, &rt->err);
    if (st != ZT_OK)
        return st;
    zt_rt_resolve_model_autos(rt);
    char autos[1024];
    if (zt_config_auto_report(&rt->cfg, autos, sizeof autos) > 0)
        ZT_LOGW("config",
                "\"auto\" with no value from the trainer, so ztier's defaults: %s; give them with "
                "zt_config_set before zt_runtime_commit (lr and weight decay may also come with "
                "each zt_step)",
                autos);
    const zt_config *c = &rt->cfg;
    if (!c->optimizer_given)
        ZT_LOGW("config",
                "no \"optimizer\" section: AdamW with ztier's defaults (lr %g, betas [%g, %g], eps "
                "%g, weight decay %g); give one, or the values with zt_config_set before "
                "zt_runtime_commit (lr and weight decay may also come with each zt_step)",
                (double)c->lr, (double)c->beta1, (double)c->beta2, (double)c->eps,
                (double)c->weight_decay);
    if (rt->cfg.trace_path[0]) {
        if ((st = open_trace(rt)) != ZT_OK)
            return st;
        rt->tracing = 1;
        zt_trace_thread_name("caller");
    }
    st = open_optimizer(rt); /* first: the host backend's kernels run on its pool */
    if (st == ZT_OK)
        st = open_device(rt);
    if (st == ZT_OK) /* before commit allocates anything */
        st = place_on_numa_node(rt);
    if (st == ZT_OK)
        st = open_device_comm(rt);
    if (st != ZT_OK)
        return st;
    rt->reg.dtype = zt_config_dtype(&rt->cfg);
    rt->reg.acc_dtype = rt->cfg.grad_accum_bf16 ? ZT_BF16 : ZT_F32;
    rt->train.loss_scale = 1.0f;
    if (rt->cfg.fp16) {
        rt->train.loss_scale = rt->cfg.fp16_loss_scale > 0
                                   ? rt->cfg.fp16_loss_scale
                                   : (float)(1u << rt->cfg.fp16_initial_scale_power);
        rt->train.hysteresis_left = rt->cfg.fp16_hysteresis;
    }
    st = zt_topology_open(&rt->dist.topo, rt->dist.comm, rt->cfg.ranks_per_node,
                          rt->cfg.zero_hpz_partition_size, rt->cfg.zero_quantized_gradients,
                          &rt->err);
    if (st != ZT_OK)
        return st;
    rt->dist.topo.dev = rt->device.dev; /* ZeRO++'s buffers and kernels */
    const zt_topology *t = &rt->dist.topo;
    if (rt->dist.rank == 0 && rt->dist.world > 1) /* what was turned off warned on every rank */
        ZT_LOGI("runtime", "node layout: %s (%s); ZeRO++: hpZ %s, qgZ %s, qwZ %s", t->layout.desc,
                t->source, t->hpz ? "on" : "off",
                !rt->cfg.zero_quantized_gradients ? "off"
                : t->two_level                    ? "on, two levels"
                                                  : "on, one level",
                rt->cfg.zero_quantized_weights ? "on" : "off");
    ZT_LOGI("runtime", "device backend %s, dtype %s", rt->device.iface->name,
            rt->reg.dtype == ZT_F32    ? "fp32"
            : rt->reg.dtype == ZT_BF16 ? "bf16"
                                       : "fp16");
    return ZT_OK;
}

static void free_layer(zt_runtime *rt, zt_layer *L)
{
    if (rt->device.dev) {
        zt_device_tier_free(&rt->tiers.dtier, L->grads);
        zt_home_free(&rt->tiers.homes, &L->param_home);
        zt_home_free(&rt->tiers.homes, &L->replica);
        zt_home_free(&rt->tiers.homes, &L->grad_local);
    }
    zt_home_free(&rt->tiers.homes, &L->master);
    zt_home_free(&rt->tiers.homes, &L->exp_avg);
    zt_home_free(&rt->tiers.homes, &L->exp_avg_sq);
    if (L->opt_device && rt->device.dev)
        zt_device_free(rt->device.dev, L->grad_acc);
    else
        zt_host_tier_free(&rt->tiers.host, L->grad_acc,
                          (uint64_t)L->shard_numel * zt_dtype_size(rt->reg.acc_dtype));
    free(L->views);
    free(L->param_ids);
    free(L->name);
}

void zt_rt_destroy(zt_runtime *rt)
{
    zt_ckpt_removals_wait(); /* a save's older checkpoints, removed behind it */
    /* first what may still move data: the optimizer's write-backs refer to the layers'
     * homes, the gathers to the homes and the staging pool */
    zt_fwd_destroy(&rt->fwd,
                   rt->device.dev); /* its events may be recorded on the caller's streams */
    zt_nvme_step_destroy(rt->opt.nvme_step);
    /* the caller's streams made here go first: rt->device.stream may wait for them */
    for (int i = 0; i < rt->reduce.callers.n; i++) {
        zt_device_stream_synchronize(rt->device.dev, rt->reduce.callers.s[i], NULL);
        if (rt->device.stream)
            zt_device_stream_synchronize(rt->device.dev, rt->device.stream, NULL);
        zt_device_stream_destroy(rt->device.dev, rt->reduce.callers.s[i]);
    }
    free(rt->reduce.callers.s);
    zt_rt_drop_reductions(rt); /* their gradients are device-tier buffers */
    zt_rt_act_close(rt);
    zt_prefetcher_destroy(rt->prefetch);
    if (rt->device.stream)
        zt_device_stream_synchronize(rt->device.dev, rt->device.stream, NULL);
    if (rt->device.prefetch_stream)
        zt_device_stream_synchronize(rt->device.dev, rt->device.prefetch_stream, NULL);
    for (int i = 0; i < rt->reg.n_layers; i++)
        free_layer(rt, &rt->reg.layers[i]);
    if (rt->device.dev) {
        zt_dev_opt_close(rt);
        zt_device_tier_fini(&rt->tiers.dtier);
        zt_rt_free_landing(rt);
        if (rt->reduce.caller_done)
            zt_device_event_destroy(rt->device.dev, rt->reduce.caller_done);
        if (rt->reduce.comm_ready)
            zt_device_event_destroy(rt->device.dev, rt->reduce.comm_ready);
    }
    for (int i = 0; i < rt->reg.n_params; i++)
        free(rt->reg.params[i].name);
    free(rt->reg.layers);
    free(rt->reg.params);
    free(rt->opt.shards);
    zt_swap_destroy(rt->tiers.param_swap); /* first: they hold registrations of the buffers below */
    zt_swap_destroy(rt->tiers.optim_swap);
    if (rt->opt.staging)
        zt_host_tier_free(&rt->tiers.host, rt->opt.staging, rt->opt.staging_bytes);
    if (rt->opt.block)
        zt_host_tier_free(&rt->tiers.host, rt->opt.block, rt->opt.block_bytes);
    zt_staging_pool_destroy(rt->tiers.param_staging);
    zt_pinner_fini(&rt->tiers.pinner);
    if (rt->device.stream)
        zt_device_stream_destroy(rt->device.dev, rt->device.stream);
    if (rt->device.prefetch_stream)
        zt_device_stream_destroy(rt->device.dev, rt->device.prefetch_stream);
    zt_threadpool_destroy(rt->cpu.pool); /* after the streams: their kernels use it */
    if (rt->device.dev)
        zt_device_destroy(rt->device.dev);
    zt_topology_close(&rt->dist.topo);
    if (rt->dist.comm)
        zt_comm_destroy(rt->dist.comm);
    if (rt->tracing)
        zt_trace_close();
}

void zt_rt_stats(const zt_runtime *rt, zt_stats *out)
{
    zt_stats s = rt->stats; /* the driver's own counters */
    zt_device_tier_usage(&rt->tiers.dtier, &s.device_bytes_current, &s.device_bytes_peak,
                         &s.device_bytes_capacity);
    s.host_bytes_current = rt->tiers.host.current;
    s.host_bytes_peak = rt->tiers.host.peak;
    s.h2d_bytes += rt->gather_env.h2d_bytes;
    s.host_syncs += rt->gather_env.host_syncs + rt->tiers.dtier.fence_waits;
    s.gathered_bytes = rt->gather_env.gathered_bytes;
    s.comm_wait_s += rt->gather_env.comm_wait_s;
    s.allgather_buckets = rt->gather_env.buckets;
    s.comm_bytes_intra = rt->dist.topo.bytes_intra;
    s.comm_bytes_inter = rt->dist.topo.bytes_inter;
    s.pinned_bytes = rt->tiers.param_staging ? zt_staging_bytes(rt->tiers.param_staging) : 0;
    s.host_pinned_bytes = rt->tiers.pinner.pinned;
    s.host_pinned_peak_bytes = rt->tiers.pinner.peak;
    s.pinned_refused_bytes = rt->tiers.pinner.refused;
    if (rt->prefetch) {
        zt_prefetch_stats ps;
        zt_prefetcher_stats(rt->prefetch, &ps);
        s.prefetch_hits = ps.prefetch_hits;
        s.evictions = ps.evictions;
        s.trace_deviations = ps.deviations;
        s.hpz_slices_dropped = ps.slices_dropped;
    }
    zt_rt_act_stats(rt, &s);
    zt_swap *swaps[2] = {rt->tiers.param_swap, rt->tiers.optim_swap};
    for (int i = 0; i < 2; i++) {
        if (!swaps[i])
            continue;
        zt_swap_stats ss;
        zt_swap_get_stats(swaps[i], &ss);
        s.nvme_bytes_current += ss.used;
        s.nvme_bytes_peak += ss.used; /* preallocated at commit: current is the peak */
        s.nvme_read_bytes += ss.read_bytes;
        s.nvme_write_bytes += ss.write_bytes;
        s.nvme_read_s += ss.read_s;
        s.nvme_write_s += ss.write_s;
    }
    *out = s;
}

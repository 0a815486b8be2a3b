/* SPDX-License-Identifier: MIT */
/* The runtime: the registry of layers and parameters, and the driver that composes the
 * modules below it for each public call. zt_runtime holds handles to the modules — the
 * communicator and topology, the device and its tier, the host tier, the swap spaces, the
 * prefetcher, the optimizer — and never reaches into their state. Only runtime/ and api/
 * include this header. The API layer (api/) checks arguments and state; these functions
 * assume valid ids. */
#ifndef ZT_RUNTIME_RUNTIME_H
#define ZT_RUNTIME_RUNTIME_H

#include "core/convert.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "optimizer/adam.h"
#include "optimizer/nvme_step.h"
#include "prefetch/act_store.h"
#include "prefetch/prefetch.h"
#include "comm/comm.h"
#include "comm/zeropp.h"
#include "runtime/config.h"
#include "device/device.h"
#include "tiers/device_tier.h"
#include "tiers/home.h"
#include "tiers/host_tier.h"
#include "tiers/staging_pool.h"
#include "runtime/fwd_time.h"

#include <stdint.h>

/* Elements are laid out in a layer's flat buffer at multiples of this (64 bytes of fp32),
 * so every parameter starts cache-line aligned in fp32 and bf16. */
#define ZT_PARAM_ALIGN_ELEMS 16

typedef struct zt_param {
    char *name;
    int layer;
    int ndim;
    int64_t shape[ZT_MAX_DIMS];
    int64_t numel;
    int64_t offset; /* element offset inside the layer's flat buffer */
    zt_init init;
} zt_param;

typedef struct zt_layer {
    char *name;
    int *param_ids;
    int n_params, cap_params;

    int64_t flat_numel;  /* padded so it splits evenly over ranks */
    int64_t shard_numel; /* flat_numel / world_size; flat_numel when persistent */
    int persistent;      /* below stage3_param_persistence_threshold: replicated on every rank
                            and resident in device memory, never gathered or released */
    int replicated;      /* stages 1 and 2: sharded like stage 3 (optimizer state, gradient
                            sums), and a full replica of the parameters stays in device memory,
                            all-gathered once after each step, never per use */
    int tied_after;      /* zt_layer_tie: used again after this layer's forward and held in
                            backward from that layer's backward on; -1: not tied */

    /* This rank's shard: working-dtype parameters and fp32 optimizer state. */
    zt_home param_home;
    zt_home replica; /* replicated layers: the full working-dtype parameters in device memory;
                        param_home is this rank's slice of it */
    /* Stage 1 with gradient accumulation: the fp32 sums of this rank's own micro-steps, the
     * whole layer in device memory, reduce-scattered once per step (at the step's last
     * micro-step, or by zt_step); local_count: micro-steps in it */
    zt_home grad_local;
    int local_count;
    zt_home master, exp_avg, exp_avg_sq;
    void *grad_acc;  /* gradient accumulation shard of rt->reg.acc_dtype: host memory, or fp32 in
                       device memory with the device optimizer (opt_device) */
    int opt_device;  /* master, m, v, grad_acc and Adam in device memory: the device optimizer's,
                        or the device's share of offload_optimizer.ratio (opt_split.h) */
    int accum_count; /* backward releases since the last step */
    /* The gradient norm's sums of grad_acc, folded into its last accumulation of the step
     * (valid until grad_acc changes otherwise); zt_step then skips its pass over the layer. */
    double norm_sumsq;
    int64_t norm_bad;
    int norm_valid;

    uint64_t act_bytes;    /* zt_act_register: the most its activation checkpoint holds */
    void *grads;           /* device: full flat gradients while a backward pass holds it */
    double fetched_at[3];  /* per pass: when the caller got it (the trace's layer spans) */
    zt_tensor_view *views; /* 2 * n_params: forward views, then backward views */
    /* The caller streams a blocking zt_release waits for (mixing the forms, api/ztier.h):
     * per pass, the stream of the latest zt_fetch_async while held; grads_stream: the one
     * the gradients were zeroed on (NULL: on rt->device.stream, waited for); act_stream:
     * that of zt_act_load_async, until zt_act_free. */
    zt_stream *fetch_stream[3];
    zt_stream *grads_stream;
    zt_stream *act_stream;
} zt_layer;

/* A backward release whose gradients are on their way to a landing buffer (single rank,
 * stream-ordered release): added to the layer's fp32 accumulator once the copy is done. */
typedef struct zt_pending_reduction {
    int layer;
    int buf; /* landing buffer index */
} zt_pending_reduction;

/* A backward release held in the open reduction bucket (reduce_bucket_size, several ranks):
 * its gradients, summed over ranks with the bucket's other layers in one collective. */
typedef struct zt_bucket_entry {
    int layer;
    void *src;   /* device: the layer's full flat gradients, or a stage-1 layer's sums */
    zt_dtype dt; /* of src */
    int owned;   /* src is the released gradients: freed once packed */
    int micro;   /* micro-steps src covers */
} zt_bucket_entry;

/* The releases held until their elements reach reduce_bucket_size, a layer comes again (the
 * next micro-step) or zt_step: one kind of collective per bucket, a reduce-scatter
 * (partitioned layers) or an all-reduce (persistent ones). */
typedef struct zt_reduce_bucket {
    zt_bucket_entry *e;
    int n, cap;
    int64_t elems; /* flat elements held */
    int allreduce;
} zt_reduce_bucket;

/* The fp32 buffers buckets are packed into (runtime/reduce.c): made at the step's first
 * bucket of several releases, sized for the largest bucket the layers allow, and freed by the
 * step (only that bucket agrees with the other ranks on whether each could make them); the
 * k-th bucket since uses slot k mod n, after the bucket before it in that slot completed. */
#define ZT_BUCKET_SLOTS 2

typedef struct zt_bucket_buffers {
    int made;                   /* tried this step (made, or no room on some rank: none) */
    void *buf[ZT_BUCKET_SLOTS]; /* n of them; NULL: one collective per release this step */
    int n, next;
} zt_bucket_buffers;

/* A backward release's gradient collective in flight (several ranks, a host-memory comm):
 * completed in issue order, at the latest by the next zt_step, while later layers compute.
 * It owns the gradients (and their fp32 copy when widened) until then; a bucket's, its
 * entries (sum: the slot it is packed in). */
typedef struct zt_inflight_reduction {
    int layer;
    zt_bucket_entry *entries; /* a bucket's layers, each's shard at its offset in sum */
    int n_entries;            /* 0: one layer's */
    zt_comm_req req;
    void *grads;  /* device: the released gradients */
    void *wide;   /* device: their fp32 copy, summed in place of them; NULL when not widened */
    void *sum;    /* device: what is summed in place (grads, wide or a stage-1 layer's sums) */
    int micro;    /* micro-steps the sum covers */
    zt_dtype dt;  /* of what is summed */
    int qgz_slot; /* a qgZ reduction: its last exchange, in that slot's buffers; else -1 */
    zt_qgz qgz;
} zt_inflight_reduction;

/* Reductions kept in flight at most: a release beyond it completes the oldest first. The
 * count, not the time, decides when one completes, so device memory (and with it every
 * eviction, and so every collective) stays a function of the call sequence on every rank. */
#define ZT_REDUCTIONS_IN_FLIGHT 8

/* qgZ's device buffers (runtime/reduce.c), made at the step's first qgZ release for the
 * largest layer: the head scratch all share, and per slot (one per qgZ reduction in flight)
 * the last exchange's tail and the sum. */
#define ZT_QGZ_SLOTS 4

typedef struct zt_qgz_slot {
    void *tail, *sum; /* sum: NULL when the optimizer is on the device */
} zt_qgz_slot;

typedef struct zt_qgz_buffers {
    int made;
    void *head; /* NULL for one-level qgZ (it needs none) */
    zt_qgz_slot slot[ZT_QGZ_SLOTS];
    int next; /* qgZ releases since the step: the next one's slot, modulo */
} zt_qgz_buffers;

/* Caller streams made by zt_stream_create (host backend: the only streams it accepts). */
typedef struct zt_caller_streams {
    zt_stream **s;
    int n, cap;
} zt_caller_streams;

typedef enum zt_rt_state { ZT_RT_FAILED = 0, ZT_RT_REGISTERING, ZT_RT_COMMITTED } zt_rt_state;

/* Where log lines go: zt_options' callback and level (level_option >= 0 wins over the
 * config's). */
typedef struct zt_rt_log {
    int level_option;
    zt_log_fn fn;
    void *user;
} zt_rt_log;

/* The registry (runtime/registry.c): layers and parameters in the order they were added,
 * and the dtypes of their buffers. */
typedef struct zt_registry {
    zt_param *params;
    int n_params, cap_params;
    zt_layer *layers;
    int n_layers, cap_layers;
    zt_dtype dtype;     /* working dtype of parameters and gradients */
    zt_dtype acc_dtype; /* of the gradient accumulators: fp32, or bf16 (ztier.grad_accum_dtype) */
} zt_registry;

/* The ranks: the world communicator and the node layout over it. */
typedef struct zt_rt_dist {
    zt_comm *comm;
    zt_topology topo; /* node layout, ZeRO++ communicators, bytes sent */
    int rank, world;
} zt_rt_dist;

/* The device backend and ztier's two streams on it. */
typedef struct zt_rt_device {
    const zt_device_iface *iface;
    zt_device *dev;
    zt_stream *stream;          /* synchronous copies: gradients, optimizer writes */
    zt_stream *prefetch_stream; /* shard copies of the gather pipeline */
} zt_rt_device;

/* The CPU's share: the optimizer's thread pool and the Adam kernel chosen for this CPU. */
typedef struct zt_rt_cpu {
    zt_threadpool *pool;
    int threads;
    zt_adam_variant adam_variant;
} zt_rt_cpu;

/* The tiers a shard can live in, and the memory moved between them. */
typedef struct zt_rt_tiers {
    zt_device_tier dtier;
    zt_host_tier host;
    zt_pinner pinner;               /* host memory the device copies from or to */
    zt_homes homes;                 /* the tiers a shard can live in (homes.swap: unset) */
    zt_swap *param_swap;            /* NVMe swap for parameters (offload_param.device = nvme) */
    zt_swap *optim_swap;            /* NVMe swap for master, m, v (offload_optimizer = nvme) */
    zt_staging_pool *param_staging; /* buffers for NVMe -> device parameter reads */
} zt_rt_tiers;

/* Gradient reduction of stream-ordered releases (runtime/layer_exec.c): the caller's
 * streams, the landing buffers a single rank's gradients are copied to, and the reductions
 * waiting for their copies. */
typedef struct zt_reducer {
    zt_caller_streams callers;
    zt_event *caller_done;     /* recorded on the caller's stream at an async release */
    zt_event *comm_ready;      /* device-ordered comm (nccl): its input is ready */
    void **landing;            /* gradient_landing_buffers host buffers (pinned), a shard */
    zt_event **landing_copied; /* per buffer: its copy from the device is done */
    size_t landing_bytes;
    int n_landing;
    zt_pending_reduction *pending; /* first in first out, n_landing slots */
    int pending_head, n_pending;
    zt_inflight_reduction inflight[ZT_REDUCTIONS_IN_FLIGHT]; /* first in first out */
    int inflight_head, n_inflight;
    zt_error inflight_err; /* the first failure of one completed to make room; for zt_step */
    zt_qgz_buffers qgz;    /* qgZ's, from the first backward release to the step */
    zt_reduce_bucket open; /* releases waiting for their bucket's collective */
    zt_bucket_buffers packs;
} zt_reducer;

struct zt_opt_engine_ops;

/* The optimizer engine (runtime/opt_engine.c): the placement's operations, chosen once at
 * commit, and the state they work on. */
typedef struct zt_opt_engine {
    const struct zt_opt_engine_ops *ops;
    int on_device;             /* every layer's accumulators and Adam in device memory */
    int dev_layers;            /* layers whose optimizer is on the device (step_device.c) */
    float cpu_ratio;           /* the share of this rank's optimizer elements Adam updates on
                                the CPU (1: all; offload_optimizer.ratio as run) */
    float auto_ratio;          /* offload_optimizer.ratio "auto": the choice (with cpu_rate > 0) */
    double cpu_rate, dev_rate; /* "auto": Adam elements/s measured at commit */
    /* "auto" with ztier.overlap_step "on": the split follows the forward time (opt_split.h);
     * split_max_layers: the most leading layers the device budget holds the state of */
    int resplit, split_max_layers, resplit_warned;
    zt_nvme_step *nvme_step; /* when the optimizer state is on NVMe */
    zt_opt_shard *shards;    /* n_layers: what the NVMe step updates */
    /* an overlapped step over state in host memory: its hyper-parameters, layers updated */
    zt_adam_hparams host_step_h;
    int host_step_pending, host_step_updated;
    void *block; /* the NVMe step's buffers, one host allocation */
    size_t block_bytes, buf_bytes;
    float *buf[ZT_NVME_STEP_MAX_BUFS]; /* master, m, v of `sets` sets in block (masters NULL:
                                          plan opt_bufs_per_set 2) */
    int sets;
    void *staging;        /* host buffer: one fp32 shard in transit (largest shard) */
    void *staging_lp;     /* second half of it: the same shard in the working dtype */
    size_t staging_bytes; /* size of both halves */
    void *dev_step_stats; /* device: two doubles, a counter, the sums' scratch */
    void *dev_param_tmp;  /* device: one shard's new parameters bound for an off-device home */
    uint64_t dev_param_tmp_bytes;
} zt_opt_engine;

/* The training state the step advances. */
typedef struct zt_train_state {
    int64_t steps;
    float loss_scale;
    int good_steps; /* fp16: steps since the last overflow */
    int hysteresis_left;
    /* Layers whose update by the step is done and whose gradients are cleared: n_layers
     * except while an overlapped step is in progress (ztier.overlap_step), which updates
     * layer i when something first needs it (zt_rt_step_through). */
    int step_cleared;
    int stepping;           /* inside zt_rt_step */
    int lr_override_warned; /* a trainer's lr replaced the config's schedule (said once) */
} zt_train_state;

/* Integers a trainer keeps with its checkpoints (zt_checkpoint_meta_set): saved in each
 * manifest's "meta", replaced by a checkpoint's at load. */
#define ZT_CKPT_META_MAX 16
#define ZT_CKPT_META_KEY 48
typedef struct zt_ckpt_meta {
    int n;
    char key[ZT_CKPT_META_MAX][ZT_CKPT_META_KEY];
    int64_t value[ZT_CKPT_META_MAX];
} zt_ckpt_meta;

/* Activation checkpoints (runtime/activations.c): the store, its stream and NVMe swap. */
typedef struct zt_rt_acts {
    zt_act_store *store; /* NULL: no layer registered activations */
    zt_stream *stream;
    zt_swap *swap;
} zt_rt_acts;

/* The handle: the state of the API, the configuration, the error, the registry and the
 * modules (each owning its state; zt_rt_stats asks each for its counters). */
struct zt_runtime {
    zt_rt_state state;
    zt_error err; /* last error of this handle */
    /* The first failure of work that outlived its call (the optimizer's write-backs): it
     * leaves the state inconsistent, so every later reader of that state gets it, until a
     * checkpoint is loaded. */
    zt_error async_err;
    /* zt_runtime_expect_load: commit left the parameters and optimizer state uninitialised
     * for the load that follows; until one succeeds, nothing may read them. */
    int load_pending;
    zt_config cfg;
    zt_rt_log log;
    zt_registry reg;
    zt_rt_dist dist;
    zt_rt_device device;
    zt_rt_cpu cpu;
    zt_rt_tiers tiers;
    zt_gather_env gather_env;
    zt_prefetcher *prefetch;
    zt_rt_acts acts;
    zt_reducer reduce;
    zt_opt_engine opt;
    zt_fwd_timer fwd; /* the step's forward time (runtime/fwd_time.h) */
    zt_train_state train;
    zt_ckpt_meta meta;
    zt_stats stats; /* the driver's own counters (the modules report theirs) */
    int tracing;    /* this runtime holds the process's timeline trace open */
};

/* Stores a layer's fp32 master shard (a host buffer of shard_numel floats, 4096-aligned for
 * NVMe homes) and the working-dtype parameters derived from it (through rt->opt.staging_lp). */
zt_status zt_layer_set_master(zt_runtime *rt, zt_layer *L, const float *master);

/* The elements [*first, *last) of a parameter that lie in this rank's shard of its layer,
 * and where they start in that shard; *first == *last when none do. */
void zt_param_in_shard(const zt_runtime *rt, const zt_param *p, int64_t *first, int64_t *last,
                       int64_t *shard_offset);

/* lifecycle (runtime/runtime.c) */
zt_status zt_rt_create(zt_runtime *rt, const zt_options *opts, const char *config_json);
/* Changes the configuration before commit (zt_config_set and the typed zt_config_set_*). */
struct zt_config_value;
zt_status zt_rt_config_set(zt_runtime *rt, const char *path, const struct zt_config_value *value);
/* Opens what the configuration shapes: device, optimizer threads, node topology. At commit. */
zt_status zt_rt_open(zt_runtime *rt);
/* The optimizer as it will run (from the configuration), and its log lines at commit: the
 * effective settings at the default level (ztier.log_effective_settings), placement at info. */
void zt_rt_optimizer_info(const zt_runtime *rt, zt_optimizer_info *out);
void zt_rt_log_optimizer(const zt_runtime *rt);
void zt_rt_destroy(zt_runtime *rt);
zt_status zt_rt_layer_add(zt_runtime *rt, const char *name, int *layer_id);
zt_status zt_rt_layer_tie(zt_runtime *rt, int layer, int after_layer);
zt_status zt_rt_param_add(zt_runtime *rt, int layer, const char *name, const int64_t *shape,
                          int ndim, const zt_init *init, int *param_id);
/* The hidden size behind "auto" sizes (ztier.hidden_size, else the dimension most 2-D
 * parameters share; 0 when none): *shared of *of 2-D parameters have it (runtime/registry.c). */
int64_t zt_rt_hidden_size(const zt_runtime *rt, int *shared, int *of);
/* Gives the "auto" sizes that come from the model their values (zt_rt_open, estimates). */
void zt_rt_resolve_model_autos(zt_runtime *rt);
/* Every counter, asked of each module (zt_stats_get). */
void zt_rt_stats(const zt_runtime *rt, zt_stats *out);

/* commit: placement by the plan and initial values (runtime/commit.c) */
zt_status zt_rt_commit(zt_runtime *rt);

/* per-layer fetch/release (runtime/layer_exec.c); caller: the caller's stream, NULL for
 * the blocking calls */
zt_status zt_rt_fetch(zt_runtime *rt, int layer, zt_pass pass, zt_stream *caller,
                      zt_layer_view *view);
zt_status zt_rt_release(zt_runtime *rt, int layer, zt_pass pass, zt_stream *caller);
/* gradient reduction (runtime/reduce.c): the gradients of a backward pass that ended,
 * summed over ranks into the layer's accumulator (after the caller's stream, when given) */
zt_status zt_rt_reduce_release(zt_runtime *rt, zt_layer *L, zt_stream *caller);
/* ztier's stream (the fence of every device free, the stream of the gradient copies) waits
 * for the caller's stream to reach this point. */
zt_status zt_rt_fence_after_caller(zt_runtime *rt, zt_stream *caller);
/* A caller stream about to be destroyed: no layer refers to it any more. */
void zt_rt_forget_stream(zt_runtime *rt, const zt_stream *s);
/* Waits for a stream / an event, counted in zt_stats.host_syncs. */
zt_status zt_rt_sync_stream(zt_runtime *rt, zt_stream *s);
zt_status zt_rt_sync_event(zt_runtime *rt, zt_event *e);
/* Adds the pending reductions whose copies are done to their accumulators, without
 * waiting. */
void zt_rt_poll_reductions(zt_runtime *rt);
/* Waits for the caller's streams up to their last release and completes every pending
 * reduction: the accumulators are whole and no device buffer is in use by a caller. */
zt_status zt_rt_finish_reductions(zt_runtime *rt);
/* Stage 1: the sums of layers whose micro-steps stopped short of the configured count are
 * reduced now (zt_step, on every rank alike). */
zt_status zt_rt_flush_local_sums(zt_runtime *rt);
/* Frees the landing buffers and their events (destroy). */
void zt_rt_free_landing(zt_runtime *rt);
/* Waits for the reductions still in flight and frees their buffers, ignoring failures
 * (destroy; a collective that never completed keeps its buffers). */
void zt_rt_drop_reductions(zt_runtime *rt);

/* The device tier's reclaim hook (zt_gather_env.reclaim): completes the oldest reduction in
 * flight, freeing its gradients; 0 when none is. Its failure is kept for zt_step. */
int zt_rt_reclaim_reduction(void *rt);
/* Caller streams (zt_stream_create and friends; runtime/reduce.c). */
zt_status zt_rt_stream_create(zt_runtime *rt, zt_stream **out);
zt_status zt_rt_stream_destroy(zt_runtime *rt, zt_stream *s);
/* 1 when s may be passed as a caller stream (cuda: any stream; host: one made here). */
int zt_rt_stream_known(const zt_runtime *rt, const zt_stream *s);
int zt_rt_layers_held(const zt_runtime *rt);
/* The names of held layers and their passes, for messages ("'h3' (backward), ..."). */
void zt_rt_describe_held(const zt_runtime *rt, char *out, size_t len);

/* optimizer step (runtime/step.c) */
zt_status zt_rt_step(zt_runtime *rt, const zt_step_args *args, zt_step_info *info);
/* The factor that turns summed gradients into the step's average (1 / (accumulation steps x
 * ranks x loss scale)): the norm's scale. */
static inline float zt_rt_grad_average_factor(const zt_runtime *rt)
{
    return 1.0f / ((float)rt->cfg.gradient_accumulation_steps * (float)rt->dist.world *
                   rt->train.loss_scale);
}
/* The parameter's fp32 master values into dst: on root only (dst unused elsewhere), or on
 * every rank when root < 0. Collective. */
/* state: 0 the fp32 master, 1 Adam's m, 2 Adam's v; root -1: every rank receives it */
zt_status zt_rt_param_read(zt_runtime *rt, int param_id, int state, int root, float *dst,
                           int64_t numel);
zt_status zt_rt_param_write(zt_runtime *rt, int param_id, const float *src, int64_t numel);
/* Completes the pending gradient reductions (waiting for the caller's streams up to their
 * last release), waits for the optimizer's background transfers and reports any failure of
 * theirs (kept in rt->async_err, and reported again at every later call until a checkpoint
 * load); every reader or writer of the model's state calls it first. */
zt_status zt_rt_drain_optimizer(zt_runtime *rt);
/* Keeps the first failure of background work (st, described by e) in rt->async_err and
 * reports the kept one into the handle's error; returns its status. */
zt_status zt_rt_keep_async(zt_runtime *rt, zt_status st, const zt_error *e);
/* The kept failure of background work, after collecting what has completed (zt_async_error).
 * Does not wait. */
zt_status zt_rt_async_error(zt_runtime *rt);
/* With an overlapped step in progress: updates the layers up to `layer` (in order) and
 * clears their gradients. Whatever reads a layer's parameters, optimizer state or gradient
 * sums after zt_step calls it first (the gather through zt_rt_param_home_ready, the
 * backward release, the readers of the whole state through zt_rt_step_complete). */
zt_status zt_rt_step_through(zt_runtime *rt, int layer);
zt_status zt_rt_step_complete(zt_runtime *rt);
/* zt_gather_env.home_ready: a gather is about to read this parameter home. A fetch
 * (demand) updates the layer first; a prefetch of a layer the step has not updated yet is
 * declined (0), so that the update waits for data read while the caller computed the layers
 * before it, not for a read just issued. A failure is kept in rt->async_err (and the gather
 * goes on, so every rank issues the same collectives); the fetch reports it. */
int zt_rt_param_home_ready(void *rt, const zt_home *home, int demand);

/* the optimizer on the device (runtime/step_device.c), used for layers with opt_device set:
 * accumulators in device memory, the norm's sums and Adam as device kernels on ztier's
 * stream. The step's sums and counter take ZT_DEVICE_STEP_STATS_BYTES of device memory. */
/* Layout: the norm's two sums (doubles), Adam's count of non-finite gradients (this step's:
 * zeroed with the sums), then the sums' scratch (ZT_SUMSQ_SCRATCH_DOUBLES). */
#define ZT_DEVICE_STEP_COUNT_AT 16
#define ZT_DEVICE_STEP_SCRATCH_AT 32
#define ZT_DEVICE_STEP_STATS_BYTES (ZT_DEVICE_STEP_SCRATCH_AT + 8 * ZT_SUMSQ_SCRATCH_DOUBLES)
/* The step's sums and the new-parameter buffer of param_tmp_bytes (the plan's
 * device_param_tmp; 0: none), at commit; close frees them. */
zt_status zt_dev_opt_open(zt_runtime *rt, uint64_t param_tmp_bytes);
void zt_dev_opt_close(zt_runtime *rt);
/* A layer's fp32 accumulator in device memory, zeroed; zeroing it again (on the stream). */
zt_status zt_dev_opt_alloc_acc(zt_runtime *rt, zt_layer *L);
zt_status zt_dev_opt_zero_acc(zt_runtime *rt, zt_layer *L);
/* acc += the reduced shard (device memory, dtype dt), on ztier's stream. */
zt_status zt_dev_opt_accumulate(zt_runtime *rt, zt_layer *L, const void *shard, zt_dtype dt,
                                int micro);
/* out[0]: sum of squares of the scaled accumulators, out[1]: non-finite count (this rank). */
zt_status zt_dev_opt_grad_stats(zt_runtime *rt, float scale, double out[2]);
/* Adam on the layer's shard; the new parameters reach their home. */
zt_status zt_dev_opt_update(zt_runtime *rt, zt_layer *L, const zt_adam_hparams *h);

/* parameter initialisation (runtime/param_init.c): values of elements [first, first+count)
 * of a parameter, independent of sharding; fails only when a callback does. */
zt_status zt_param_init_fill(const zt_param *p, int64_t first, int64_t count, float *dst,
                             zt_error *err);

/* The swap space settings of one kind of state: the folders of off, the aio and ztier keys
 * (runtime/commit.c). */
zt_swap_config zt_rt_swap_config(const zt_runtime *rt, const zt_offload_config *off,
                                 const char *tag);

/* activation checkpoints (runtime/activations.c): the sizes layers register, the store and
 * its swap space opened at commit from activation_checkpointing, the calls passed to the
 * store (prefetch/act_store.h), its counters */
zt_status zt_rt_act_register(zt_runtime *rt, int layer, uint64_t bytes);
/* "none", "cpu" or "nvme": where the configuration sends the checkpoints. */
const char *zt_rt_act_home(const zt_runtime *rt);
/* Device memory the activation store needs at least (added to commit's budget check): the
 * saved copies themselves with device "none", else one load of the largest layer. */
uint64_t zt_rt_act_device_min(const zt_runtime *rt);
/* For `ztier estimate`: the layers that registered, their homes' bytes, the store's device
 * buffers at least and at most (a load and prefetch_layers read ahead of it). */
void zt_rt_act_estimate(const zt_runtime *rt, int *layers, uint64_t *home, uint64_t *device_min,
                        uint64_t *device_max);
/* At commit, after the prefetcher: the tier, its swap space and the store; the keys of
 * activation_checkpointing that change nothing here are reported. */
zt_status zt_rt_act_open(zt_runtime *rt);
/* The activation swap's configuration into *c and the bytes it will hold (0: none on NVMe). */
uint64_t zt_rt_act_swap_bytes(const zt_runtime *rt, zt_swap_config *c);
void zt_rt_act_close(zt_runtime *rt);

zt_status zt_rt_act_save(zt_runtime *rt, int layer, const void *src, uint64_t bytes,
                         zt_stream *caller);
zt_status zt_rt_act_load(zt_runtime *rt, int layer, zt_stream *caller, void **ptr, uint64_t *bytes);
zt_status zt_rt_act_free(zt_runtime *rt, int layer, zt_stream *caller);
void zt_rt_act_discard(zt_runtime *rt);
/* Layers whose activations are saved and not freed (0 without a store). */
int zt_rt_act_outstanding(const zt_runtime *rt);
void zt_rt_act_stats(const zt_runtime *rt, zt_stats *out);

#endif

/* The runtime object and the internal functions the API layer calls. The API layer (api/)
 * checks arguments and copies errors into the handle; these functions assume valid ids and
 * report state errors (wrong order) themselves. */
#ifndef ZT_RUNTIME_RUNTIME_H
#define ZT_RUNTIME_RUNTIME_H

#include "optimizer/adam.h"
#include "core/convert.h"
#include "runtime/comm/comm.h"
#include "runtime/config.h"
#include "runtime/device/device.h"
#include "core/error.h"
#include "tiers/home.h"
#include "core/threadpool.h"
#include "prefetch/trace.h"
#include "tiers/host_tier.h"
#include "tiers/pinned.h"

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

/* Where a layer's gathered parameters stand (see prefetch/gather.h). */
typedef enum zt_gather_state {
    ZT_GATHER_NONE = 0,
    ZT_GATHER_READING, /* NVMe -> pinned staging buffer in flight */
    ZT_GATHER_COPYING,
    ZT_GATHER_COMM,
    ZT_GATHER_READY
} zt_gather_state;

typedef struct zt_layer {
    char *name;
    int *param_ids;
    int n_params, cap_params;

    int64_t flat_numel;  /* padded so it splits evenly over ranks */
    int64_t shard_numel; /* flat_numel / world_size; flat_numel when persistent */
    int persistent;      /* below stage3_param_persistence_threshold: replicated on every rank
                            and resident in device memory, never gathered or released */

    /* This rank's shard: working-dtype parameters and fp32 optimizer state. */
    zt_home param_home;
    zt_home master, exp_avg, exp_avg_sq;
    float *grad_acc; /* fp32 gradient accumulation shard, host memory */
    int accum_count; /* backward releases since the last step */

    /* While fetched or prefetched. */
    int holds[3];   /* outstanding fetches per pass (forward, backward, inference) */
    void *gathered; /* device: full flat parameters, working dtype */
    zt_gather_state gstate;
    zt_event *copied;  /* the shard's copy into `gathered` is done */
    zt_comm_req req;   /* the all-gather in flight */
    void *nvme_buf;    /* staging buffer of an NVMe read in flight */
    void *qsend, *qrecv; /* qwZ: packed int8 shard and the gathered packed shards */
    void *secondary;     /* hpZ: this rank's 1/node_size slice of the gathered layer */
    int from_secondary;  /* the gather in flight reads the node's secondary slices */
    zt_swap_io nvme_io;
    void *grads;    /* device: full flat gradients, working dtype (backward only) */
    zt_tensor_view *views; /* 2 * n_params: forward views, then backward views */
} zt_layer;

/* Outstanding fetches of a layer, over every pass. */
static inline int zt_layer_holds(const zt_layer *L)
{
    return L->holds[ZT_FORWARD] + L->holds[ZT_BACKWARD] + L->holds[ZT_INFERENCE];
}

typedef enum zt_rt_state { ZT_RT_FAILED = 0, ZT_RT_REGISTERING, ZT_RT_COMMITTED } zt_rt_state;

/* One buffer set of the NVMe-pipelined optimizer step and the transfers it has in flight.
 * The last write-backs of a step stay in flight until the optimizer state is needed again. */
typedef struct zt_opt_set {
    zt_swap_io io[3]; /* master, m, v */
    int state;        /* 0 idle, 1 reading, 2 writing */
    zt_layer *L;      /* the sub-group it holds */
    int64_t begin, n;
} zt_opt_set;

struct zt_runtime {
    zt_rt_state state;
    zt_error err; /* last error of this handle */
    zt_config cfg;
    int log_level_option; /* zt_options.log_level: >= 0 wins over the config's */
    zt_log_fn log_fn;
    void *log_user;
    int rank, world;
    int node_size; /* ranks on this rank's node (for the intra/inter-node byte counters) */
    int local_rank; /* index of this rank inside its node */
    zt_comm *intra; /* the ranks of this node (hpZ, hierarchical qgZ), or NULL */
    zt_comm *inter; /* the ranks with this local index on every node (qgZ), or NULL */
    zt_dtype dtype; /* working dtype of parameters and gradients */

    zt_param *params;
    int n_params, cap_params;
    zt_layer *layers;
    int n_layers, cap_layers;

    const zt_device_iface *dev_iface;
    zt_device *dev;
    zt_stream *stream;          /* synchronous copies: gradients, optimizer writes */
    zt_stream *prefetch_stream; /* shard copies of the gather pipeline */
    zt_trace trace;
    struct zt_sched_layer *sched; /* n_layers: the prefetch scheduler's view (prefetch.c) */
    zt_comm *comm;
    zt_host_tier host;
    zt_homes homes;          /* the tiers a shard can live in (homes.swap: unset) */
    zt_swap *param_swap;     /* NVMe swap for parameters (offload_param.device = nvme) */
    zt_swap *optim_swap;     /* NVMe swap for master, m, v (offload_optimizer.device = nvme) */
    zt_pinned_pool *param_staging; /* buffers for NVMe -> device parameter reads */
    float *opt_buf[9];       /* 3 sets x (master, m, v) sub-group buffers for the NVMe step */
    zt_opt_set opt_sets[3];
    int opt_preread; /* sub-groups of the next step already being read into sets 0..n-1 */
    size_t opt_buf_bytes;
    zt_threadpool *pool;
    int optimizer_threads;
    zt_adam_variant adam_variant;
    void *staging;        /* host buffer: one fp32 shard in transit (largest shard) */
    void *staging_lp;     /* second half of it: the same shard in the working dtype */
    size_t staging_bytes; /* size of both halves */

    int64_t steps;
    float loss_scale;
    int good_steps; /* fp16: steps since the last overflow */
    int hysteresis_left;
    zt_stats stats;
};

/* Stores a layer's fp32 master shard (a host buffer of shard_numel floats, 4096-aligned for
 * NVMe homes) and the working-dtype parameters derived from it (through rt->staging_lp). */
zt_status zt_layer_set_master(zt_runtime *rt, zt_layer *L, const float *master);

/* The elements [*first, *last) of a parameter that lie in this rank's shard of its layer,
 * and where they start in that shard; *first == *last when none do. */
void zt_param_in_shard(const zt_runtime *rt, const zt_param *p, int64_t *first, int64_t *last,
                       int64_t *shard_offset);

/* lifecycle (runtime/runtime.c) */
zt_status zt_rt_create(zt_runtime *rt, const zt_options *opts, const char *config_json);
/* Changes the configuration before commit (zt_config_set). */
zt_status zt_rt_config_set(zt_runtime *rt, const char *path, const char *value);
/* Opens what the configuration shapes: device, optimizer threads, node topology. At commit. */
zt_status zt_rt_open(zt_runtime *rt);
/* The optimizer as it will run (from the configuration), and its log line at commit. */
void zt_rt_optimizer_info(const zt_runtime *rt, zt_optimizer_info *out);
void zt_rt_log_optimizer(const zt_runtime *rt);
void zt_rt_destroy(zt_runtime *rt);
zt_status zt_rt_layer_add(zt_runtime *rt, const char *name, int *layer_id);
zt_status zt_rt_param_add(zt_runtime *rt, int layer, const char *name, const int64_t *shape,
                          int ndim, const zt_init *init, int *param_id);

/* commit: layout, placement and initial values (runtime/commit.c) */
zt_status zt_rt_commit(zt_runtime *rt);

/* per-layer fetch/release (runtime/layer_exec.c) */
zt_status zt_rt_fetch(zt_runtime *rt, int layer, zt_pass pass, zt_layer_view *view);
zt_status zt_rt_release(zt_runtime *rt, int layer, zt_pass pass);
int zt_rt_layers_held(const zt_runtime *rt);

/* optimizer step (runtime/step.c) */
zt_status zt_rt_step(zt_runtime *rt, const zt_step_args *args, zt_step_info *info);
zt_status zt_rt_param_read(zt_runtime *rt, int param_id, float *dst, int64_t numel);
zt_status zt_rt_param_write(zt_runtime *rt, int param_id, const float *src, int64_t numel);
/* The names of held layers and their passes, for messages ("'h3' (backward), ..."). */
void zt_rt_describe_held(const zt_runtime *rt, char *out, size_t len);

/* parameter initialisation (runtime/param_init.c): values of elements [first, first+count)
 * of a parameter, independent of sharding; fails only when a callback does. */
zt_status zt_param_init_fill(const zt_param *p, int64_t first, int64_t count, float *dst,
                             zt_error *err);

#endif

/* SPDX-License-Identifier: MIT */
/* ztier — a runtime for training models whose state does not fit in accelerator memory.
 *
 * The caller registers layers and their parameters, commits, and then calls
 * zt_fetch()/zt_release() around each layer's forward and backward computation and
 * zt_step() once per optimizer step. ztier owns every parameter, gradient and
 * optimizer-state shard and keeps each on device memory, pinned host memory or NVMe.
 *
 * Conventions (every call):
 *  - returns a zt_status; ZT_OK is 0. On failure zt_last_error(rt) says why, naming the
 *    object (layer, parameter, file, JSON path) and the fix. The library does not log an
 *    error it returns: printing it is the caller's choice. Logged are only events that are
 *    not errors of a call (a skipped fp16 step, a fallback, a configuration warning).
 *  - outputs go through pointers; inputs are never retained unless the call says so.
 *  - calls on one zt_runtime must not run concurrently from several threads.
 */
#ifndef ZTIER_H
#define ZTIER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Versions (the policy: docs/abi.md). Semantic versions: the major changes on every change
 * that breaks a program built against an older header of the same major (and with it the
 * soname, libztier.so.<major>, so such a program fails to load instead of misbehaving); the
 * minor on additions; the patch on fixes. A program checks at run time that the library it
 * loaded is the one it was compiled for, before any other call:
 *     int v = zt_version();
 *     if (v / 10000 != ZT_VERSION_MAJOR || v < ZT_VERSION)
 *         ... refuse to run: "built against ztier %d.%d.%d, loaded %s", ZT_VERSION_MAJOR,
 *             ZT_VERSION_MINOR, ZT_VERSION_PATCH, zt_version_string()
 * (the same major, and not older than the header, which may declare calls the library lacks).
 * CMakeLists.txt reads the version (and so the soname) from these three lines. */
#define ZT_VERSION_MAJOR 1
#define ZT_VERSION_MINOR 4
#define ZT_VERSION_PATCH 3
#define ZT_VERSION_CODE(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define ZT_VERSION ZT_VERSION_CODE(ZT_VERSION_MAJOR, ZT_VERSION_MINOR, ZT_VERSION_PATCH)
/* The revision of this header's API, passed in zt_options.api_version (ZT_OPTIONS_INIT): it
 * grows by one with every release that changes the API (an addition or a break).
 * zt_runtime_create refuses a caller compiled against a newer header than the library's (its
 * calls and fields may not exist here) or against a header of an older major (api_version 1:
 * ztier 0.1, whose zt_init_fn returned void). Structs the library writes into carry a
 * struct_size the caller sets (their _INIT macros); they only ever gain fields at the end. */
#define ZT_API_VERSION 4
#define ZT_MAX_DIMS 8

#if defined(__GNUC__)
#define ZT_API __attribute__((visibility("default")))
#else
#define ZT_API
#endif

typedef enum zt_status {
    ZT_OK = 0,
    ZT_ERR_ARGUMENT = 1,     /* an argument is invalid: NULL pointer, unknown id, bad shape */
    ZT_ERR_USAGE = 2,        /* a call in the wrong order or state (fetch before commit, ...) */
    ZT_ERR_CONFIG = 3,       /* the configuration is invalid; the message names the JSON path */
    ZT_ERR_NOMEM = 4,        /* host memory could not be allocated or a host pool is exhausted */
    ZT_ERR_DEVICE_NOMEM = 5, /* device memory (or the host backend's HBM budget) is exhausted */
    ZT_ERR_IO = 6,           /* a read or write failed (EIO, short transfer) */
    ZT_ERR_NOSPACE = 7,      /* a swap or checkpoint path has too little free space */
    ZT_ERR_CORRUPT = 8,      /* data read back is damaged: checksum mismatch, truncated file */
    ZT_ERR_UNSUPPORTED = 9,  /* the feature or backend is not available in this build/machine */
    ZT_ERR_COMM = 10,        /* a collective failed, or another rank reported an error */
    ZT_ERR_DEVICE = 11,      /* the device backend reported an error */
    ZT_ERR_INTERNAL = 12,    /* a bug in ztier; please report it with the message */
    ZT_STATUS_COUNT
} zt_status;

typedef enum zt_dtype { ZT_F32 = 0, ZT_BF16 = 1, ZT_F16 = 2 } zt_dtype;
/* ZT_FORWARD / ZT_BACKWARD: the passes of a training step; their order is recorded in the
 * first step and drives prefetching afterwards. ZT_INFERENCE: a forward without gradients
 * outside the training order (validation, sampling, between steps or during one): it is not
 * recorded, never counts as a change of order, and its layers are gathered on demand. */
typedef enum zt_pass { ZT_FORWARD = 0, ZT_BACKWARD = 1, ZT_INFERENCE = 2 } zt_pass;

typedef struct zt_runtime zt_runtime;

/* Log callback: level is 0 error, 1 warn, 2 info, 3 debug; msg is only valid during the call. */
typedef void (*zt_log_fn)(void *user, int level, const char *msg);

/* Options for zt_runtime_create. Start from ZT_OPTIONS_INIT and set what you need. */
typedef struct zt_options {
    size_t struct_size;      /* sizeof(zt_options): lets newer libraries read older callers */
    int api_version;         /* ZT_API_VERSION */
    const char *config_path; /* JSON file (DeepSpeed schema); NULL: $ZT_CONFIG or none */
    int log_level;           /* -1: $ZT_LOG or "warn"; else 0..3 as zt_log_fn */
    zt_log_fn log_fn;        /* NULL: messages go to stderr */
    void *log_user;
    int rank;       /* -1: from the comm backend */
    int world_size; /* -1: from the comm backend */
} zt_options;

#define ZT_OPTIONS_INIT                                                  \
    {                                                                    \
        sizeof(zt_options), ZT_API_VERSION, NULL, -1, NULL, NULL, -1, -1 \
    }

/* Parameter initialisation. Initial values depend only on (seed, parameter name, element
 * index), never on world size or placement, so every configuration starts identically. */
typedef enum zt_init_kind {
    ZT_INIT_ZEROS = 0,
    ZT_INIT_CONSTANT, /* every element = a */
    ZT_INIT_NORMAL,   /* mean a, standard deviation b */
    ZT_INIT_UNIFORM,  /* uniform in [a, b) */
    ZT_INIT_CALLBACK, /* fn fills elements [first, first + count) of the flattened tensor */
    ZT_INIT_COPY      /* copied from the caller's array: user points to numel floats (the
                         whole tensor, row-major), read during zt_runtime_commit */
} zt_init_kind;

/* Fills dst[0, count) with elements [first, first + count) of the flattened tensor and
 * returns ZT_OK; any other status stops zt_runtime_commit with that status and a message
 * naming the parameter and the range. */
typedef zt_status (*zt_init_fn)(void *user, const char *param_name, int64_t first, int64_t count,
                                float *dst);

typedef struct zt_init {
    zt_init_kind kind;
    float a, b;
    uint64_t seed;
    zt_init_fn fn; /* ZT_INIT_CALLBACK only; called synchronously from zt_runtime_commit */
    void *user;    /* passed to fn; ZT_INIT_COPY: the source array (kept until commit) */
} zt_init;

/* One tensor of a fetched layer. data/grad point into memory owned by ztier (device memory
 * of the active backend) and stay valid until the matching zt_release. */
typedef struct zt_tensor_view {
    const char *name;
    int param_id;
    zt_dtype dtype;
    int ndim;
    int64_t shape[ZT_MAX_DIMS];
    int64_t numel;
    void *data; /* full (gathered) parameter values; do not write */
    void *grad; /* ZT_BACKWARD only: zeroed at fetch; add this micro-step's gradient into it */
} zt_tensor_view;

/* zt_layer_view and zt_tensor_view have no struct_size: the program indexes the library's
 * params array with its own sizeof, so both stay as they are for a major version (new facts
 * come as new calls; docs/abi.md). */
typedef struct zt_layer_view {
    int layer;
    int n_params;
    const zt_tensor_view *params; /* n_params entries in registration order; owned by ztier */
} zt_layer_view;

typedef struct zt_step_args {
    size_t struct_size; /* sizeof(zt_step_args) */
    float lr;           /* learning rate for this step, in [0, 1000]; < 0: the configured lr */
    float weight_decay; /* weight decay for this step, in [0, 1000]; < 0: the configured one */
} zt_step_args;

#define ZT_STEP_ARGS_INIT                  \
    {                                      \
        sizeof(zt_step_args), -1.0f, -1.0f \
    }

/* The optimizer as it will run (zt_optimizer_get): the configuration after defaults, the
 * DeepSpeed type rules ("Adam" has weight decay 0 unless given) and every override. */
typedef struct zt_optimizer_info {
    size_t struct_size; /* sizeof(zt_optimizer_info) */
    int adamw;          /* 1: decoupled weight decay (AdamW); 0: decay added to the gradient */
    /* beta1, beta2: those the next zt_step uses: while the scheduler OneCycle cycles momentum
     * (cycle_momentum), its (beta1, 0.99) for that step, not the configured ones (a step
     * given a zt_step_args.lr skips the schedule and uses the configured betas) */
    float lr, beta1, beta2, eps, weight_decay;
    float gradient_clipping; /* max global gradient norm; 0: off */
    /* micro-steps averaged per step: as given, else derived from the batch sizes below as
     * DeepSpeed derives it, else 1 */
    int gradient_accumulation_steps;
    /* 1: Adam, its state and the gradient sums are in device memory (offload_optimizer
     * "none" with ztier.device_optimizer on, or auto with the cuda backend; or, after commit,
     * offload_optimizer.ratio 0); 0: on the CPU, or split (offload_ratio below) */
    int on_device;
    /* DeepSpeed's learning-rate schedule of the config's "scheduler" section ("WarmupLR",
     * "WarmupDecayLR", "WarmupCosineLR", "OneCycle"), applied by zt_step when the trainer
     * passes no lr; "" for none (lr above is then the lr of every step) */
    char scheduler[24];
    /* DeepSpeed's train_batch_size (samples per step over all ranks) and
     * train_micro_batch_size_per_gpu, as given or derived for this run's ranks with
     * DeepSpeed's rules (the trainer feeds the micro batch; ztier only checks the sizes);
     * 0 when the config gives neither */
    int train_batch_size, train_micro_batch_size_per_gpu;
    /* zero_optimization.offload_optimizer.ratio as run: the share of this rank's optimizer
     * elements (whole layers) that the CPU's Adam updates, the rest by Adam on the device,
     * concurrently; after commit the split made (1: all on the CPU, 0: all on the device, as
     * on_device), before it the configured ratio (-1: "auto", chosen at commit) */
    float offload_ratio;
} zt_optimizer_info;

#define ZT_OPTIMIZER_INFO_INIT                   \
    {                                            \
        .struct_size = sizeof(zt_optimizer_info) \
    }

/* What zt_step did. Start from ZT_STEP_INFO_INIT: zt_step writes only the fields that fit in
 * struct_size (and sets struct_size to the bytes it wrote). */
typedef struct zt_step_info {
    size_t struct_size; /* sizeof(zt_step_info) */
    int64_t step;       /* optimizer steps taken so far (skipped steps not counted) */
    float grad_norm;    /* global L2 norm of the averaged gradient, before clipping */
    float clip_coef;    /* factor applied to gradients (1 when not clipped) */
    int skipped;        /* 1 when the step was skipped because a gradient was inf/nan */
    float loss_scale;   /* fp16: the loss scale to use for the next micro-steps; else 1 */
    int micro_steps;    /* backward passes accumulated into this step */
    /* the learning rate of this step: zt_step_args.lr, else the config's schedule at this
     * step, else optimizer.params.lr (a skipped step: the one it would have used) */
    float lr;
} zt_step_info;

#define ZT_STEP_INFO_INIT                   \
    {                                       \
        .struct_size = sizeof(zt_step_info) \
    }

/* Counters since creation (zeros before commit). current/peak are bytes resident in a tier
 * now / at most.
 * Set struct_size (ZT_STATS_INIT) so newer libraries never write past an older struct. */
typedef struct zt_stats {
    size_t struct_size;
    uint64_t device_bytes_current, device_bytes_peak, device_bytes_capacity;
    uint64_t host_bytes_current, host_bytes_peak;
    uint64_t nvme_bytes_current, nvme_bytes_peak;
    uint64_t h2d_bytes, d2h_bytes; /* copies between host and device */
    uint64_t nvme_read_bytes, nvme_write_bytes;
    double nvme_read_s, nvme_write_s;       /* time spent waiting for NVMe transfers (the activation
                                         checkpoints' waits: act_wait_s) */
    uint64_t gathered_bytes, reduced_bytes; /* full layers all-gathered; gradients reduced */
    uint64_t prefetch_hits;                 /* fetches whose layer was already on its way */
    uint64_t evictions;                     /* prefetched layers freed to make room */
    /* Bytes this rank's collectives address to ranks of its node / of other nodes, by a model:
     * each collective as if every rank sent each peer its part directly (an all-gather: its
     * shard to every peer; a reduce-scatter: each peer's part of the sum; an all-reduce: the
     * ring's 2 (n-1)/n of the buffer, split by the peers' nodes; ZeRO++: each stage's sends).
     * Not the bytes on the links: the MPI or NCCL algorithm decides those (Open MPI's recursive
     * doubling under --map-by node carried 0.5-0.6 x comm_bytes_inter; docs/multinode.md). */
    uint64_t comm_bytes_intra, comm_bytes_inter; /* a model (above), not link bytes */
    uint64_t trace_deviations;                   /* steps whose layer order left the recorded one */
    double fetch_wait_s;                         /* time zt_fetch waited (stall) */
    double step_s;                               /* time spent in zt_step */
    uint64_t fetches, releases, steps, skipped_steps;
    /* parameter bytes kept resident in device memory on every rank because their layer is
     * below zero_optimization.stage3_param_persistence_threshold (never offloaded) */
    uint64_t persistent_bytes;
    uint32_t persistent_layers;
    uint64_t pinned_bytes; /* host staging buffers of NVMe parameter reads */
    /* Waits of the host for the device inside zt_fetch/zt_release and the frees they make
     * (a blocking call's own waits included). With the stream-ordered calls there are none
     * per layer, on one rank or over NCCL (ZeRO++ and NVMe homes aside): see
     * zt_fetch_async. */
    uint64_t host_syncs;
    /* Host memory the device copies from or to (parameters' host homes, staging buffers,
     * gradient landing buffers), pinned through the device backend (cudaHostRegister; mlock
     * on the host backend) within ztier.pinned_limit: bytes pinned now, at most, and bytes
     * left pageable because the limit or the system refused (logged once). */
    uint64_t host_pinned_bytes, host_pinned_peak_bytes, pinned_refused_bytes;
    /* With an overlapped step (ztier.overlap_step; see zt_step): layers whose update zt_step
     * left to the first later call that needed them (a fetch, most often, so the update's
     * NVMe transfers overlap the next forward pass), and the time those calls spent. */
    uint64_t overlapped_updates;
    double overlapped_update_s;
    /* hpZ: node-local slices freed to make room for other device allocations (each one's
     * backward gather then crosses nodes as without hpZ) */
    uint64_t hpz_slices_dropped;
    /* ZeRO stages 1 and 2: the full parameters every rank keeps in device memory (the layers
     * that are not persistent; all-gathered once after each step) */
    uint64_t replicated_bytes;
    uint32_t replicated_layers;
    /* Time the calls waited for collectives on the host: all-gathers a fetch needed and
     * gradient reductions a release, zt_step or a checkpoint completed (the communication
     * the trainer was exposed to; "comm" spans on its track in the trace). Collectives the
     * device orders (nccl) are not waited for on the host and not counted. */
    double comm_wait_s;
    /* Stages 1 and 2: all-gathers after the step that packed several layers
     * (zero_optimization.allgather_bucket_size) */
    uint64_t allgather_buckets;
    /* Gradient reductions that packed several backward releases into one collective
     * (zero_optimization.reduce_bucket_size) */
    uint64_t reduce_buckets;
    /* Activation checkpoints (zt_act_save and the rest): saves and the bytes saved, the
     * store's device buffers now and at most (loaded and read-ahead ones; with
     * activation_checkpointing.device "none" the saved copies themselves), bytes reserved in
     * its home tier (host memory or NVMe), loads whose bytes were already on the device or on
     * their way there, and the time loads waited for their bytes on the host. */
    uint64_t act_saves, act_saved_bytes;
    uint64_t act_device_bytes, act_device_peak_bytes, act_home_bytes;
    uint64_t act_prefetch_hits;
    double act_wait_s;
    uint64_t act_evictions; /* read-ahead copies dropped for another allocation's room */
    /* The latest step's forward time (docs/configuration.md, "The forward time"): from the
     * step's first forward zt_fetch to its first backward zt_fetch, on the trainer's stream
     * (the stream-ordered calls: timed device events) or on the host's clock (the blocking
     * calls); 0 before a step has had both. */
    double forward_s;
    /* offload_optimizer.ratio "auto": times the split moved layers' optimizer state between
     * device and host memory at a step boundary (from the forward time) */
    uint64_t optimizer_resplits;
} zt_stats;

#define ZT_STATS_INIT                   \
    {                                   \
        .struct_size = sizeof(zt_stats) \
    }

/* ---- version and status ---- */
ZT_API int zt_version(void);                      /* ZT_VERSION of the library actually loaded */
ZT_API const char *zt_version_string(void);       /* "1.0.0"; static storage */
ZT_API const char *zt_status_string(zt_status s); /* static storage; never NULL */

/* ---- lifecycle ---- */

/* Creates a runtime from options and an optional JSON config text (merged over the file of
 * opts->config_path or $ZT_CONFIG; see zt_config_set for the order). Reads the
 * configuration and joins the ranks; the device, the optimizer and every tier open at
 * zt_runtime_commit. Collective under MPI. Synchronous.
 * On failure *out is still set when possible: that handle only answers zt_last_error()
 * and must be passed to zt_runtime_destroy(). *out is NULL only if memory ran out. */
ZT_API zt_status zt_runtime_create(const zt_options *opts, const char *config_json,
                                   zt_runtime **out);

/* Changes one configuration key, or merges a JSON object, before zt_runtime_commit.
 * value is JSON text, parsed as JSON first:
 *   zt_config_set(rt, "optimizer.params.lr", "3e-4");                 (the number 3e-4)
 *   zt_config_set(rt, "optimizer.params.betas", "[0.9, 0.95]");
 *   zt_config_set(rt, "zero_optimization.offload_param", "{\"device\": \"cpu\"}");
 *   zt_config_set(rt, NULL, "{\"gradient_clipping\": 1.0}");          (a whole document)
 * Only text that is not valid JSON is taken as a plain string ("nvme", "/mnt/nvme"), so a
 * string that happens to be JSON is read as JSON: "1234" is a number, "null" is null (no
 * value), "\"q\"" is the string q, "true" a boolean. For text that comes from users (paths,
 * names, command-line values) use the typed setters below, which never parse their value.
 * path: a dotted path of the DeepSpeed schema (see docs/config.md), or NULL/"" to merge the
 * object in value. Same checks and messages as the config file (a key given twice in value
 * is warned with both positions, the last one wins), except that an unknown key is an error.
 * Merge order, later wins: defaults, the config file (zt_options.config_path, else
 * $ZT_CONFIG), the config_json text of zt_runtime_create, zt_config_set* calls in call order,
 * then the environment variables (ZT_HBM_CAPACITY, ZT_NVME_PATH, ...). A rejected call
 * changes nothing. Not collective, but every rank must end with the same configuration.
 * ZT_ERR_USAGE after commit, and for ztier.comm_backend (the ranks are joined at create). */
ZT_API zt_status zt_config_set(zt_runtime *rt, const char *path, const char *value);

/* Typed setters: set the one key at path (a dotted path, not an object) to value as given,
 * never parsed: zt_config_set_string(rt, "zero_optimization.offload_param.nvme_path",
 * "1234") sets the folder "1234". Same checks, merge order and rules as zt_config_set (a
 * rejected call changes nothing). The type must fit the key (docs/config.md), else
 * ZT_ERR_CONFIG names the key, what it expects and the setter to use:
 *   _string: strings, names ("nvme", "AdamW"), paths; one folder for nvme_path (several:
 *            zt_config_set with a JSON list); a byte size ("2G") for byte-count keys;
 *            "auto" where DeepSpeed's "auto" is accepted;
 *   _int:    integer keys and byte counts; also number keys;
 *   _double: number keys (a finite value);
 *   _bool:   true/false keys (0 is false, anything else true).
 * value of _string is copied (NULL is ZT_ERR_CONFIG). Synchronous. */
ZT_API zt_status zt_config_set_string(zt_runtime *rt, const char *path, const char *value);
ZT_API zt_status zt_config_set_int(zt_runtime *rt, const char *path, int64_t value);
ZT_API zt_status zt_config_set_double(zt_runtime *rt, const char *path, double value);
ZT_API zt_status zt_config_set_bool(zt_runtime *rt, const char *path, int value);

/* The last error message of this handle, with context; "" after a successful call.
 * Owned by the handle; valid until the next call on it. rt == NULL gives a fixed text. */
ZT_API const char *zt_last_error(const zt_runtime *rt);
/* The status of the last failed call on this handle (the one zt_last_error describes); ZT_OK
 * after a successful call. For a caller that reports several calls' failures in one place:
 * ZT_ERR_COMM there means another rank was lost or reported its own error. */
ZT_API zt_status zt_last_status(const zt_runtime *rt);

/* Frees everything the runtime owns and removes its swap files. NULL is a no-op. */
ZT_API void zt_runtime_destroy(zt_runtime *rt);

/* ---- registration (before commit) ---- */

/* Adds a layer; name is copied. *layer_id receives a dense id starting at 0. */
ZT_API zt_status zt_layer_add(zt_runtime *rt, const char *name, int *layer_id);

/* Adds a parameter to a layer. shape (ndim entries, each >= 1) and name are copied;
 * init may be NULL (zeros) and is copied (its fn/user are kept until commit). */
ZT_API zt_status zt_param_add(zt_runtime *rt, int layer, const char *name, const int64_t *shape,
                              int ndim, const zt_init *init, int *param_id);

/* Declares a tied layer: `layer`'s parameters are used a second time right after the
 * forward computation of layer `after_layer` (> layer), as GPT-2's token embedding is the
 * output head after the last layer. The trainer then fetches `layer` again there in the
 * forward pass, and in the backward pass fetches it before the backward pass of
 * `after_layer` and holds it until its own backward computation ends (its gradient collects
 * both uses; docs/embedding.md). Fetch and release work the same with or without it; what
 * changes is commit's device budget check, which replays this call order (as `ztier
 * estimate` does) and refuses a budget the held layer and the largest layer backward
 * between need together, where without the declaration it counts one layer at a time.
 * A layer is tied once. ZT_ERR_ARGUMENT for an unknown id or after_layer <= layer;
 * ZT_ERR_USAGE after commit or for a second tie of the same layer to another. */
ZT_API zt_status zt_layer_tie(zt_runtime *rt, int layer, int after_layer);

/* Freezes the model, plans placement, allocates every tier and initialises parameters.
 * Synchronous. After it, registration calls return ZT_ERR_USAGE. */
ZT_API zt_status zt_runtime_commit(zt_runtime *rt);

/* Says, before zt_runtime_commit, that a zt_checkpoint_load follows commit (a resume): commit
 * then leaves the parameters and the optimizer state uninitialised (no initialiser runs,
 * no ZT_INIT_CALLBACK is called, their host memory is not even zeroed), since the load
 * overwrites every value; on a large model that initialisation costs more than the load. Until a zt_checkpoint_load succeeds, the
 * calls that read or change the values (zt_fetch, zt_fetch_async, zt_step, zt_param_read,
 * zt_param_read_state, zt_param_read_to, zt_param_write, zt_checkpoint_save) return
 * ZT_ERR_USAGE naming the missing load; a load that fails leaves it so (load another
 * checkpoint, or destroy the runtime and commit without this call). ZT_ERR_USAGE after
 * commit. Local: every rank calls it or none. */
ZT_API zt_status zt_runtime_expect_load(zt_runtime *rt);

/* ---- per layer ---- */

/* Makes the layer's full parameters available (and, for ZT_BACKWARD, zeroed gradient
 * buffers). Blocks until that layer is ready. view is filled; its arrays are owned by the
 * runtime and valid until zt_release(rt, layer, pass). A layer can be fetched again while
 * held, also for another pass (nested fetches need as many releases): a layer used twice in
 * a step, such as an embedding tied to the output projection, is fetched for each use and
 * released after each. ZT_INFERENCE fetches (no gradients) may come between training steps
 * or inside one. Collective under several ranks: every rank fetches the same layers for the
 * same passes in the same order. */
ZT_API zt_status zt_fetch(zt_runtime *rt, int layer, zt_pass pass, zt_layer_view *view);

/* Ends the use of a fetched layer. For ZT_BACKWARD the gradients written since the fetch
 * are reduced and accumulated into this rank's fp32 gradient shard before it returns. */
ZT_API zt_status zt_release(zt_runtime *rt, int layer, zt_pass pass);

/* ---- stream-ordered per-layer calls ----
 *
 * A trainer that computes on a stream (CUDA: its cudaStream_t; the host device backend: a
 * stream from zt_stream_create, whose work is host functions queued with zt_stream_launch)
 * passes that stream, and ztier orders its own work against it instead of waiting on the
 * host — NCCL's habit: each call returns once its work is enqueued.
 *
 * zt_fetch_async: the view is filled at once; the parameters and the zeroed gradient
 * buffers are complete for every operation queued on `stream` after the call (ztier
 * enqueues a wait for the layer's copy and the gradients' memset on `stream`). The host
 * waits only for what only the host can do: a layer not requested yet whose NVMe read or
 * collective has to finish. Do not read view data on the host before `stream` reaches the
 * point of the call.
 *
 * zt_release_async: ends the use at the current end of `stream`. The layer's buffers are
 * reused or freed, and for ZT_BACKWARD its gradients copied off the device and summed,
 * only after `stream` has run everything queued on it before the call, so the caller
 * queues its last kernels on the layer and releases without synchronizing. `stream` is
 * the only stream ztier orders the reuse after: work on another stream that reads the
 * view or writes the gradients must be ordered before the release on `stream` (record an
 * event on that stream and make `stream` wait for it with cudaStreamWaitEvent) or be
 * complete; else ztier may free or overwrite the buffers under it (the CPU stand-in of CI
 * reports such a stream as unordered with ztier's free). On one rank, and over NCCL, the
 * call never waits for the device (the collectives are ordered on the GPU). Over MPI the
 * gradient collective runs on the host, so the backward release waits for `stream` before
 * it.
 *
 * Between the two forms: zt_fetch and zt_release block (the caller's own work on the layer
 * must be complete before zt_release). The forms mix per call: a layer fetched with
 * zt_fetch may be released with zt_release_async, and one fetched with zt_fetch_async may
 * be released with the blocking zt_release, which then first waits on the host for the
 * stream of the latest zt_fetch_async of that layer and pass (and the stream its gradients
 * were zeroed on): everything queued there before the release, ztier's memset and the
 * caller's kernels included, is done before it sums or frees anything (each wait counted in
 * zt_stats.host_syncs). Such a stream must stay valid until that release. zt_step, zt_param_read/zt_param_write and the
 * checkpoint calls first wait for every stream given to zt_release_async up to its last
 * release and add every gradient still on its way; they are the points where the host
 * waits, once per step. A failure found after a call returned (a gradient copy that failed)
 * is kept and reported by zt_async_error and by zt_step. Every wait of the host for the
 * device inside fetch/release is counted in zt_stats.host_syncs. */

/* Stream-ordered zt_fetch (see above). stream: never NULL. */
ZT_API zt_status zt_fetch_async(zt_runtime *rt, int layer, zt_pass pass, void *stream,
                                zt_layer_view *view);
/* Stream-ordered zt_release (see above). stream: never NULL. */
ZT_API zt_status zt_release_async(zt_runtime *rt, int layer, zt_pass pass, void *stream);

/* A stream of the runtime's device backend (after commit): a cudaStream_t with cuda, a
 * worker thread with the host backend (the only streams the host backend accepts). Its
 * work: your kernels (cuda), or host functions (zt_stream_launch). */
ZT_API zt_status zt_stream_create(zt_runtime *rt, void **stream);
/* Waits for the stream's work, then destroys it. Streams still alive are destroyed with
 * the runtime. */
ZT_API zt_status zt_stream_destroy(zt_runtime *rt, void *stream);
/* Queues fn(arg) on the stream: it runs after the work queued before it, and work queued
 * later waits for it. fn must not call ztier or the device API (cudaLaunchHostFunc's rule). */
ZT_API zt_status zt_stream_launch(zt_runtime *rt, void *stream, void (*fn)(void *), void *arg);
/* Waits until the stream has run everything queued on it. */
ZT_API zt_status zt_stream_synchronize(zt_runtime *rt, void *stream);

/* ---- activation checkpoints ----
 *
 * What a trainer keeps from a layer's forward for its backward (under full activation
 * checkpointing, the layer's input) can wait off the device: ztier copies it to pinned host
 * memory or NVMe (activation_checkpointing.device "cpu" or "nvme"; DeepSpeed's
 * cpu_checkpointing is "cpu"; "none" keeps the copies in device memory) and brings it back
 * in the reverse order, activation_checkpointing.prefetch_layers ahead of the backward that
 * needs it, into device memory of the same budget as the parameters: the read-ahead takes
 * only free room (it never evicts a parameter) and gives it back to an allocation that finds
 * nothing else to evict; a load it did not reach evicts as a fetch.
 *
 *   before commit:          zt_act_register(rt, layer, bytes)      the most it will save
 *   after layer's forward:  zt_act_save(rt, layer, x, bytes)       x: device memory
 *   before its backward:    zt_act_load(rt, layer, &ptr, &bytes)   ptr: device memory
 *   after its backward:     zt_act_free(rt, layer)
 *
 * layer is a registered layer's id. Each save is loaded once, in the reverse order of the
 * saves, and freed once before the layer saves again: anything else (a save larger than
 * registered, a second load, a load out of order, a free before the load) is
 * ZT_ERR_ARGUMENT or ZT_ERR_USAGE naming the layer, and changes nothing. A transfer that fails
 * (an NVMe write or read, a copy) is returned by the call that meets it, naming the layer
 * (a save's NVMe write runs behind the next calls), and then by every activation call until
 * zt_act_discard, which forgets the step's activations: abandon the step, discard, run it
 * again (the parameters and gradients are untouched by these calls). zt_step refuses to run
 * while activations are saved and not freed. Local calls (no collective).
 *
 * The _async forms order ztier's copies against the caller's stream, like zt_fetch_async:
 * a save copies what the stream computed so far and the stream's later work waits for the
 * copy (so it may overwrite x); activation_checkpointing.synchronize_checkpoint_boundary
 * makes it wait on the host instead. A load's bytes are complete for the stream's later
 * work; a free gives the buffer back after the stream's work so far. The forms mix as the
 * per-layer calls' do: the blocking zt_act_free of a checkpoint loaded with
 * zt_act_load_async first waits on the host for that load's stream. */
ZT_API zt_status zt_act_register(zt_runtime *rt, int layer, size_t bytes);
ZT_API zt_status zt_act_save(zt_runtime *rt, int layer, const void *src, size_t bytes);
ZT_API zt_status zt_act_load(zt_runtime *rt, int layer, void **ptr, size_t *bytes);
ZT_API zt_status zt_act_free(zt_runtime *rt, int layer);
ZT_API zt_status zt_act_save_async(zt_runtime *rt, int layer, const void *src, size_t bytes,
                                   void *stream);
ZT_API zt_status zt_act_load_async(zt_runtime *rt, int layer, void *stream, void **ptr,
                                   size_t *bytes);
ZT_API zt_status zt_act_free_async(zt_runtime *rt, int layer, void *stream);
ZT_API zt_status zt_act_discard(zt_runtime *rt);
/* Where the checkpoints go, as configured: "none", "cpu" or "nvme" (static storage;
 * activation_checkpointing.device, else "cpu" with cpu_checkpointing). Any time after create:
 * a trainer decides from it whether to hand its checkpoints over at all. */
ZT_API zt_status zt_act_home(const zt_runtime *rt, const char **home);

/* ---- optimizer ---- */

/* Applies one optimizer step with the accumulated gradients (averaged over
 * gradient_accumulation_steps and ranks), then zeroes them. No layer may be held.
 * Synchronous. args may be NULL (the configured lr and weight decay); info may be NULL, else
 * its struct_size must be set (ZT_STEP_INFO_INIT; 0 is ZT_ERR_ARGUMENT). The
 * lr of a step is args->lr when >= 0, else the config's "scheduler" at the optimizer steps
 * taken so far (DeepSpeed's formulas; OneCycle also sets Adam's betas; skipped steps do not
 * advance it, as in DeepSpeed), else optimizer.params.lr. A
 * step with inf/nan gradients is skipped and changes nothing but the loss scale. A lr or
 * weight decay that is NaN, infinite or above 1000 is ZT_ERR_ARGUMENT.
 * Overlapped step (ztier.overlap_step: "auto", the default, with the optimizer state on
 * NVMe; "on" also with it in host memory; "off"): zt_step decides the step (norm, clipping,
 * skipping, the loss scale) and returns with the layers' CPU updates still to run; each
 * layer is updated by the first later call that needs it (the fetch that reads its
 * parameters, which also updates the next layer; its backward release; zt_param_read, a
 * checkpoint save, the next zt_step), in registration order, so the NVMe transfers overlap
 * the next forward pass. The results are bit-identical to the serial step. A fetch that runs
 * updates copies their new parameters to device memory and waits for that copy (counted in
 * zt_stats.host_syncs). A failure of such an update is returned by the call that ran it and
 * kept like a failed write-back (see zt_async_error). */
ZT_API zt_status zt_step(zt_runtime *rt, const zt_step_args *args, zt_step_info *info);

/* ---- checkpoints ---- */

/* Saves every rank's fp32 master weights and Adam state (from whatever tier holds them) and
 * the step counters as a new checkpoint in the root folder `dir` (created if needed):
 * dir/step-NNNNNNNN/ holds the files and dir/latest lists the committed checkpoints, newest
 * first. The new folder is written beside the previous checkpoints, synced, and committed by
 * an atomic replacement of dir/latest; a save that fails or is killed at any point leaves
 * the previous checkpoint the latest one and loadable. The newest ztier.checkpoint_keep
 * checkpoints (default 2) are kept, older ones removed. Collective: every rank calls it (the
 * folder must be on a filesystem every rank sees: a rank that does not see the folder rank 0
 * made returns ZT_ERR_IO, on every rank, naming the ranks and the fix, before any file is
 * written). Synchronous; no layer may be held.
 * Rank 0 commits and then tells the others: a rank that loses contact with it after writing
 * its own file (a network split, a dead rank 0) returns ZT_ERR_COMM with a message saying it
 * cannot know whether the save was committed and how to tell from dir/latest (the new
 * checkpoint or the previous one is the latest; either loads). */
ZT_API zt_status zt_checkpoint_save(zt_runtime *rt, const char *dir);

/* Restores a checkpoint saved by the same model on the same number of ranks; afterwards
 * training continues bit-identically. dir is a root folder (its latest checkpoint is loaded)
 * or one checkpoint's folder (dir/step-NNNNNNNN). Every field of the manifest and every file
 * is checked first: a truncated, damaged, edited or foreign checkpoint returns
 * ZT_ERR_CORRUPT / ZT_ERR_ARGUMENT naming the cause before any state changes; no checkpoint
 * at dir (no such folder, or one without a checkpoint) returns ZT_ERR_IO naming the path.
 * Collective; synchronous; no layer may be held. */
ZT_API zt_status zt_checkpoint_load(zt_runtime *rt, const char *dir);

/* Integers a trainer keeps with its checkpoints: its model's hyper-parameters that the
 * shapes do not show (GPT-2's head count, its vocabulary before padding), a data position.
 * Every later zt_checkpoint_save writes them into the manifest's "meta" object, which
 * `ztier checkpoint inspect` prints and `ztier checkpoint export --format llmc` reads;
 * zt_checkpoint_load sets the keys the loaded checkpoint holds to its values (the others keep
 * theirs), so _get after a load returns what was saved.
 * key: 1 to 47 characters of [A-Za-z0-9._-]; at most 16 keys; setting a key again replaces
 * its value. Local (no collective): every rank should set the same. _get of a key that was
 * neither set nor loaded is ZT_ERR_ARGUMENT (zt_last_error names it). Any time after create. */
ZT_API zt_status zt_checkpoint_meta_set(zt_runtime *rt, const char *key, int64_t value);
ZT_API zt_status zt_checkpoint_meta_get(zt_runtime *rt, const char *key, int64_t *value);

/* ---- introspection ---- */
/* Copies the counters into *out (out->struct_size must be set, e.g. ZT_STATS_INIT). */
ZT_API zt_status zt_stats_get(const zt_runtime *rt, zt_stats *out);
/* Every counter of *s (the fields of zt_stats up to s->struct_size), from one list of their
 * names and units: ZT_STATS_TEXT writes a line per counter ("name value unit  # what"),
 * ZT_STATS_JSON one JSON object {"name": value, ...}. Writes at most len bytes into buf,
 * always terminated when len > 0; returns the length of the whole text (call again with a
 * larger buffer when it is >= len), or -1 when s or its struct_size is invalid. */
typedef enum zt_stats_format_kind { ZT_STATS_TEXT = 0, ZT_STATS_JSON = 1 } zt_stats_format_kind;
ZT_API int zt_stats_format(const zt_stats *s, zt_stats_format_kind kind, char *buf, size_t len);
ZT_API zt_status zt_runtime_rank(const zt_runtime *rt, int *rank, int *world_size);
/* The GPU the cuda device backend computes on, after commit: ztier.device_index, or with
 * several ranks on one machine and no index set, the rank's local index there (a GPU each);
 * -1 with the host backend. A thread that launches kernels on streams from zt_stream_create
 * makes it current first (cudaSetDevice), as CUDA requires. */
ZT_API zt_status zt_runtime_device(const zt_runtime *rt, int *device);
ZT_API zt_status zt_layer_count(const zt_runtime *rt, int *count);
/* Optimizer steps taken so far (restored by zt_checkpoint_load). */
ZT_API zt_status zt_step_count(const zt_runtime *rt, int64_t *steps);
/* The optimizer as configured (any time after create; zt_step_args override per step).
 * out->struct_size must be set (ZT_OPTIMIZER_INFO_INIT). Commit also logs the settings
 * training runs with, one line at the default level (ztier.log_effective_settings). */
ZT_API zt_status zt_optimizer_get(const zt_runtime *rt, zt_optimizer_info *out);

/* Failures of work that outlives its call. zt_step returns while the last NVMe write-backs of
 * the optimizer state are still in flight; if one fails, the state on NVMe is inconsistent.
 * zt_async_error collects what has completed, without waiting, and returns the first such
 * failure (ZT_OK when none; zt_last_error says which tensor, file and offset). The failure
 * stays: every later call that reads or writes the optimizer state (zt_step, zt_param_read,
 * zt_param_write, zt_checkpoint_save) returns it too, until zt_checkpoint_load restores a
 * consistent state. Per-layer calls go on (under several ranks their collectives stay in
 * step) and report nothing. */
ZT_API zt_status zt_async_error(zt_runtime *rt);

/* Copies the current fp32 master values of a parameter (all elements, gathered from every
 * rank) into dst (numel floats, caller-owned) on every rank. Collective; synchronous; no layer
 * may be held. Only the parameter's elements move: each rank sends its shard's part of the
 * parameter to every other rank (a replicated layer, below
 * stage3_param_persistence_threshold, moves nothing). */
ZT_API zt_status zt_param_read(zt_runtime *rt, int param_id, float *dst, int64_t numel);

/* zt_param_read for any of a parameter's optimizer states: its fp32 master, Adam's first
 * moment m or second moment v (all elements, on every rank), from whatever tier holds them.
 * For inspection and tests (a checkpoint restores them bitwise). Collective; synchronous; no
 * layer may be held. */
typedef enum zt_param_state {
    ZT_STATE_MASTER = 0,
    ZT_STATE_ADAM_M = 1,
    ZT_STATE_ADAM_V = 2
} zt_param_state;
ZT_API zt_status zt_param_read_state(zt_runtime *rt, int param_id, zt_param_state state, float *dst,
                                     int64_t numel);

/* zt_param_read for one rank: the values land in dst (numel floats, caller-owned) on rank
 * `root` only; the other ranks only send their part (their dst and numel are not used, dst
 * may be NULL). Every rank passes the same root. For exporters and other readers of the
 * whole model that write it from one rank: each element crosses the network once, so reading
 * every parameter moves about the model's fp32 bytes, where zt_param_read on every rank
 * moves that much to each of them. Collective; synchronous; no layer may be held. */
ZT_API zt_status zt_param_read_to(zt_runtime *rt, int param_id, int root, float *dst,
                                  int64_t numel);

/* The mirror of zt_param_read: sets a parameter's fp32 master values (and the working-dtype
 * copy every later fetch sees) from src (numel floats, the whole tensor, caller-owned,
 * identical on every rank). The optimizer state (Adam m, v, step count) is left as it is.
 * Collective; synchronous; no layer may be held. Non-finite values are ZT_ERR_ARGUMENT. */
ZT_API zt_status zt_param_write(zt_runtime *rt, int param_id, const float *src, int64_t numel);

#ifdef __cplusplus
}
#endif
#endif /* ZTIER_H */

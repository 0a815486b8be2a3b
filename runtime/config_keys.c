/* SPDX-License-Identifier: MIT */
/* The table of configuration keys ztier understands: JSON path, type, where the value
 * lands in zt_config, and what is allowed. DeepSpeed keys ztier knowingly ignores are
 * listed too, so that they are logged as "not used" instead of being reported as typos. */
#include "runtime/config_keys.h"
#include "runtime/config.h"

#include <stddef.h>

#define F(field) offsetof(zt_config, field)
#define OP(field) (offsetof(zt_config, offload_param) + offsetof(zt_offload_config, field))
#define OO(field) (offsetof(zt_config, offload_optimizer) + offsetof(zt_offload_config, field))
#define AO(field) (offsetof(zt_config, act_offload) + offsetof(zt_offload_config, field))
#define S(field) (offsetof(zt_config, sched) + offsetof(zt_lr_schedule, field))
#define NOMAX ZT_KEY_NO_MAX

/* path, kind, offset, min, max, enum values, "auto" allowed, multiple of, doc (one line for
 * people: tools/config_doc.c prints it into docs/config.md) */
#define NUM(path, kind, off, min, max, auto_ok, doc)     \
    {                                                    \
        path, kind, off, min, max, NULL, auto_ok, 0, doc \
    }
#define BOOL(path, off, auto_ok, doc)                       \
    {                                                       \
        path, ZT_KEY_BOOL, off, 0, 1, NULL, auto_ok, 0, doc \
    }
#define ENUM(path, kind, off, values, doc)       \
    {                                            \
        path, kind, off, 0, 0, values, 0, 0, doc \
    }
#define IGNORE(path, doc)                              \
    {                                                  \
        path, ZT_KEY_IGNORED, 0, 0, 0, NULL, 0, 0, doc \
    }
#define DROP(path, doc)                                \
    {                                                  \
        path, ZT_KEY_DROPPED, 0, 0, 0, NULL, 0, 0, doc \
    }
#define LEGACY(path, doc)                             \
    {                                                 \
        path, ZT_KEY_LEGACY, 0, 0, 1, NULL, 0, 0, doc \
    }
#define UNUSED "DeepSpeed key, accepted and not used"

static const char *const offload_devices[] = {"none", "cpu", "nvme", NULL};
static const char *const optimizer_types[] = {"AdamW", "Adam", NULL}; /* = zt_optimizer_kind */
static const char *const device_backends[] = {"host", "cuda", NULL};
static const char *const comm_backends[] = {"auto", "single", "mpi", "nccl", NULL};
static const char *const io_engines[] = {"auto", "io_uring", "threads", NULL};
static const char *const adam_variants[] = {"auto", "scalar", "avx2", "avx512", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const on_off_auto[] = {"auto", "on", "off",
                                          NULL}; /* = zt_device_optimizer_mode */
static const char *const accum_dtypes[] = {"fp32", "bf16", NULL};
static const char *const comm_dtypes[] = {"auto", "fp32", "bf16", "fp16",
                                          NULL}; /* = zt_comm_data_type */
static const char *const lr_schedules[] = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
                                           "OneCycle", NULL};      /* = zt_lr_schedule_kind */
static const char *const warmup_types[] = {"log", "linear", NULL}; /* = zt_warmup_type */

/* The keys of offload_param and offload_optimizer; the docs of the four that differ. */
#define OFFLOAD_KEYS(prefix, X, device_doc, path_doc, pin_doc, count_doc)               \
    ENUM(prefix ".device", ZT_KEY_ENUM, X(device), offload_devices, device_doc),        \
        {prefix ".nvme_path", ZT_KEY_PATHS, X(nvme_path), 0, 0, NULL, 0, 0, path_doc},  \
        BOOL(prefix ".pin_memory", X(pin_memory), 0, pin_doc),                          \
        NUM(prefix ".buffer_count", ZT_KEY_I64, X(buffer_count), 1, 1e6, 0, count_doc), \
        NUM(prefix ".buffer_size", ZT_KEY_I64, X(buffer_size), 4096, NOMAX, 0,          \
            "Accepted and not used"),                                                   \
        NUM(prefix ".max_in_cpu", ZT_KEY_I64, X(max_in_cpu), 0, NOMAX, 0,               \
            "Accepted and not used"),                                                   \
        BOOL(prefix ".fast_init", X(fast_init), 0, "Accepted, no effect"),              \
        IGNORE(prefix ".pipeline", UNUSED), IGNORE(prefix ".pipeline_read", UNUSED),    \
        IGNORE(prefix ".pipeline_write", UNUSED)

#define STR_(x) #x
#define STR(x) STR_(x)
#define NVME_PATH_DOC(what)                                                                       \
    "Folder for the NVMe swap files of " what                                                     \
    ", or a list of up to " STR(ZT_MAX_NVME_PATHS) " folders striped over; required with device " \
                                                   "\"nvme\" (ZT_NVME_PATH overrides)"
#define ALIAS_DOC(key) "DeepSpeed's other name of zero_optimization." key

const zt_config_key zt_config_keys[] = {
    NUM("zero_optimization.stage", ZT_KEY_INT, F(stage), 0, 3, 0,
        "ZeRO stage: 3 (parameters, gradients and optimizer state partitioned), 2 (gradients "
        "and optimizer state partitioned: parameters replicated, gradients reduce-scattered in "
        "backward, the updated partitions all-gathered after the step), 1 (as 2 in ztier: see "
        "docs/configuration.md) or 0 (plain data parallelism: every layer replicated, gradients "
        "all-reduced, the whole optimizer on every rank; nothing offloaded); offload_param "
        "needs 3"),
    OFFLOAD_KEYS("zero_optimization.offload_param", OP,
                 "Home of the parameters: \"none\" device memory, \"cpu\" host memory, \"nvme\" "
                 "swap files in nvme_path",
                 NVME_PATH_DOC("the parameters"),
                 "Pin the parameters' host homes and NVMe staging buffers (within "
                 "ztier.pinned_limit); false leaves them pageable (with cuda: blocking copies, "
                 "warned at commit)",
                 "Staging buffers for parameters read from NVMe, one shard each"),
    IGNORE("zero_optimization.offload_param.ratio", UNUSED),
    OFFLOAD_KEYS("zero_optimization.offload_optimizer", OO,
                 "Home of the optimizer state (fp32 master, Adam's m and v): \"none\" not "
                 "offloaded (device memory, or host memory: see ztier.device_optimizer), \"cpu\" "
                 "host memory, \"nvme\" swap files in nvme_path; with these two Adam runs on "
                 "the CPU",
                 NVME_PATH_DOC("the optimizer state"),
                 "Accepted and not used (only offload_param.pin_memory is read)",
                 "Buffers of the NVMe-pipelined step, one sub-group's state each as in "
                 "DeepSpeed: every 3 make a set, 3 to 32 sets; each set beyond 3 reads one more "
                 "sub-group ahead during backward"),
    NUM("zero_optimization.offload_optimizer.ratio", ZT_KEY_FLOAT, OO(ratio), 0, 1,
        ZT_AUTO_MEASURED,
        "With device \"cpu\": the fraction of this rank's optimizer state (by elements, whole "
        "layers, the last ones) updated by the CPU's Adam, the rest (the first layers) by the "
        "device optimizer in device memory, concurrently (DeepSpeed's Twin-Flow); 1 all on the "
        "CPU; \"auto\" chosen at commit from the measured CPU and device Adam rates, and "
        "with ztier.overlap_step \"on\" refined after each step so that the CPU's share fits "
        "the measured forward time, within what the device budget holds "
        "(docs/configuration.md)"),
    NUM("zero_optimization.stage3_prefetch_bucket_size", ZT_KEY_I64, F(stage3_prefetch_bucket_size),
        0, NOMAX, ZT_AUTO_MODEL,
        "Elements the prefetcher gathers ahead of the layer being fetched, in the recorded "
        "layer order"),
    NUM("zero_optimization.stage3_max_live_parameters", ZT_KEY_I64, F(stage3_max_live_parameters),
        0, NOMAX, 1,
        "Most gathered elements (of layers that are not persistent) the prefetcher keeps at once"),
    NUM("zero_optimization.stage3_max_reuse_distance", ZT_KEY_I64, F(stage3_max_reuse_distance), 0,
        NOMAX, 1,
        "A released layer stays gathered when the recorded order needs it again within this "
        "many elements"),
    NUM("zero_optimization.stage3_param_persistence_threshold", ZT_KEY_I64,
        F(stage3_param_persistence_threshold), 0, NOMAX, ZT_AUTO_MODEL,
        "Layers with fewer elements stay in device memory on every rank (no gather, "
        "all-reduced gradients) whatever offload_param says; 0 offloads every layer"),
    /* DeepSpeed's pydantic model accepts these field names as well as the stage3_ aliases */
    NUM("zero_optimization.prefetch_bucket_size", ZT_KEY_I64, F(stage3_prefetch_bucket_size), 0,
        NOMAX, ZT_AUTO_MODEL, ALIAS_DOC("stage3_prefetch_bucket_size")),
    NUM("zero_optimization.max_live_parameters", ZT_KEY_I64, F(stage3_max_live_parameters), 0,
        NOMAX, 1, ALIAS_DOC("stage3_max_live_parameters")),
    NUM("zero_optimization.max_reuse_distance", ZT_KEY_I64, F(stage3_max_reuse_distance), 0, NOMAX,
        1, ALIAS_DOC("stage3_max_reuse_distance")),
    NUM("zero_optimization.param_persistence_threshold", ZT_KEY_I64,
        F(stage3_param_persistence_threshold), 0, NOMAX, ZT_AUTO_MODEL,
        ALIAS_DOC("stage3_param_persistence_threshold")),
    NUM("zero_optimization.reduce_bucket_size", ZT_KEY_I64, F(reduce_bucket_size), 1, NOMAX,
        ZT_AUTO_MODEL,
        "Elements of released gradients summed over ranks in one collective (several ranks, "
        "not qgZ): held until the next layer would pass it, a layer comes again or zt_step; a "
        "larger layer goes alone, 1 reduces each on its own (DeepSpeed's default: 5e8)"),
    /* 0 (accepted by DeepSpeed, common in public configs) means the default */
    NUM("zero_optimization.sub_group_size", ZT_KEY_I64, F(sub_group_size), 0, NOMAX, 1,
        "Elements per sub-group of the NVMe-pipelined optimizer step (capped at 16M, in whole "
        "swap blocks); 0 means the default"),
    BOOL("zero_optimization.overlap_comm", F(overlap_comm), 0,
         "Gradient reductions over MPI left in flight behind the caller's next layers; false "
         "completes each at its release (a bucket's at the release that closes it)"),
    BOOL("zero_optimization.contiguous_gradients", F(contiguous_gradients), 0,
         "Accepted, no effect: ztier's gradient sums are contiguous either way (one buffer per "
         "layer, a bucket packed into one)"),
    BOOL("zero_optimization.zero_quantized_weights", F(zero_quantized_weights), 0,
         "ZeRO++ qwZ: all-gather parameters as int8 blocks (several ranks; not persistent layers)"),
    BOOL("zero_optimization.zero_quantized_gradients", F(zero_quantized_gradients), 0,
         "ZeRO++ qgZ: reduce gradients as int4 blocks (several ranks; a two-level all-to-all on "
         "nodes of equal size)"),
    NUM("zero_optimization.zero_hpz_partition_size", ZT_KEY_INT, F(zero_hpz_partition_size), 1,
        1 << 20, 0,
        "ZeRO++ hpZ: above 1, keep node-local secondary shards (the nodes found at commit, or "
        "ztier.ranks_per_node's; off on every rank with one warning on unequal nodes)"),
    IGNORE("zero_optimization.round_robin_gradients", UNUSED),
    IGNORE("zero_optimization.stage3_gather_16bit_weights_on_model_save", UNUSED),
    IGNORE("zero_optimization.stage3_gather_fp16_weights_on_model_save", UNUSED),
    IGNORE("zero_optimization.gather_16bit_weights_on_model_save", UNUSED),
    IGNORE("zero_optimization.stage3_model_persistence_threshold", UNUSED),
    IGNORE("zero_optimization.model_persistence_threshold", UNUSED),
    IGNORE("zero_optimization.stage3_module_granularity_threshold", UNUSED),
    IGNORE("zero_optimization.allgather_partitions", UNUSED),
    NUM("zero_optimization.allgather_bucket_size", ZT_KEY_I64, F(allgather_bucket_size), 1, NOMAX,
        ZT_AUTO_MODEL,
        "Stages 1 and 2: the replicas' all-gather after the step packs consecutive layers into "
        "one collective up to this many elements of their partitions (with its buffers: "
        "ranks + 1 times that, in device memory, while it runs; no room: one per layer)"),
    IGNORE("zero_optimization.reduce_scatter", UNUSED),
    IGNORE("zero_optimization.memory_efficient_linear", UNUSED),
    IGNORE("zero_optimization.ignore_unused_parameters", UNUSED),
    IGNORE("zero_optimization.elastic_checkpoint", UNUSED),
    IGNORE("zero_optimization.load_from_fp32_weights", UNUSED),
    IGNORE("zero_optimization.zero_quantized_nontrainable_weights", UNUSED),
    IGNORE("zero_optimization.log_trace_cache_warnings", UNUSED),
    IGNORE("zero_optimization.use_multi_rank_bucket_allreduce", UNUSED),
    DROP("zero_optimization.mics_shard_size",
         "MiCS is not built: parameters are sharded over all ranks (ZeRO-3)"),
    DROP("zero_optimization.mics_hierarchical_params_gather",
         "MiCS is not built: parameters are gathered over all ranks"),
    IGNORE("zero_optimization.legacy_stage1", UNUSED),
    LEGACY("zero_optimization.cpu_offload",
           "Deprecated DeepSpeed switch: true is read as offload_optimizer.device \"cpu\" "
           "(warned; giving both is an error)"),
    LEGACY("zero_optimization.cpu_offload_param",
           "Deprecated DeepSpeed switch: true is read as offload_param.device \"cpu\" (warned; "
           "giving both is an error)"),
    LEGACY("zero_optimization.cpu_offload_params",
           "Deprecated DeepSpeed switch: true is read as offload_param.device \"cpu\" (warned; "
           "giving both is an error)"),
    LEGACY("zero_optimization.cpu_offload_use_pin_memory",
           "Deprecated DeepSpeed switch: read as offload_param.pin_memory and "
           "offload_optimizer.pin_memory (warned; giving both is an error)"),
    {"aio.block_size", ZT_KEY_I64, F(aio_block_size), 4096, 1 << 30, NULL, 0, 4096,
     "Bytes per NVMe swap block: the unit of each transfer and of ztier.verify_checksums"},
    NUM("aio.queue_depth", ZT_KEY_INT, F(aio_queue_depth), 1, 4096, 0,
        "Transfers in flight per swap space with io_uring; the thread-pool engine runs at most "
        "this many workers"),
    NUM("aio.intra_op_parallelism", ZT_KEY_INT, F(aio_intra_op_parallelism), 1, 256, 0,
        "Workers of the thread-pool I/O engine (at most queue_depth; io_uring does not use it)"),
    NUM("aio.thread_count", ZT_KEY_INT, F(aio_intra_op_parallelism), 1, 256, 0, /* older name */
        "DeepSpeed's older name of aio.intra_op_parallelism"),
    BOOL("aio.single_submit", F(aio_single_submit), 0, "Accepted and not used"),
    BOOL("aio.overlap_events", F(aio_overlap_events), 0, "Accepted and not used"),
    IGNORE("aio.use_gds", UNUSED),
    ENUM("optimizer.type", ZT_KEY_ENUM, F(optimizer_type), optimizer_types,
         "\"AdamW\", or \"Adam\": decoupled decay too unless adam_w_mode is false, and weight "
         "decay 0 unless given"),
    NUM("optimizer.params.lr", ZT_KEY_FLOAT, F(lr), 0, 1e3, ZT_AUTO_WARNED,
        "Learning rate (zt_step_args may set it per step)"),
    {"optimizer.params.betas", ZT_KEY_BETAS, F(beta1), 0, 1, NULL, ZT_AUTO_WARNED, 0,
     "Adam's [beta1, beta2]"},
    NUM("optimizer.params.eps", ZT_KEY_FLOAT, F(eps), 0, 1, ZT_AUTO_WARNED, "Adam's epsilon"),
    NUM("optimizer.params.weight_decay", ZT_KEY_FLOAT, F(weight_decay), 0, 1e3, ZT_AUTO_WARNED,
        "Weight decay: 0.01 for \"AdamW\" and 0 for \"Adam\" unless given (zt_step_args may set "
        "it per step)"),
    BOOL("optimizer.params.adam_w_mode", F(adam_w_mode), 0,
         "With \"Adam\": true decays weights decoupled (AdamW), false adds the decay to the "
         "gradient (L2)"),
    IGNORE("optimizer.params.torch_adam", UNUSED),
    DROP("optimizer.params.bias_correction", "ztier's Adam always corrects the moments' bias"),
    IGNORE("optimizer.params.amsgrad",
           "false is accepted; true is refused: ztier's Adam has no AMSGrad variant"),
    IGNORE("optimizer.params.fused", UNUSED),
    BOOL("bf16.enabled", F(bf16), ZT_AUTO_WARNED,
         "The trainer's parameters and gradients in bf16 (fp32 master and optimizer state); not "
         "with fp16.enabled"),
    IGNORE("bf16.immediate_grad_update", UNUSED),
    IGNORE("bf16.check_grad_overflow", UNUSED),
    BOOL("fp16.enabled", F(fp16), ZT_AUTO_WARNED,
         "The trainer's parameters and gradients in fp16, with loss scaling (fp32 master and "
         "optimizer state); not with bf16.enabled"),
    NUM("fp16.loss_scale", ZT_KEY_FLOAT, F(fp16_loss_scale), 0, NOMAX, 0,
        "A fixed loss scale; 0 means dynamic"),
    NUM("fp16.initial_scale_power", ZT_KEY_INT, F(fp16_initial_scale_power), 0, 62, 0,
        "The dynamic loss scale starts at 2 to this power"),
    NUM("fp16.loss_scale_window", ZT_KEY_INT, F(fp16_loss_scale_window), 1, 1 << 30, 0,
        "The dynamic loss scale doubles after this many steps without overflow"),
    NUM("fp16.hysteresis", ZT_KEY_INT, F(fp16_hysteresis), 1, 1 << 20, 0,
        "The dynamic loss scale halves after this many overflowing (skipped) steps"),
    NUM("fp16.min_loss_scale", ZT_KEY_FLOAT, F(fp16_min_loss_scale), 0, NOMAX, 0,
        "The dynamic loss scale never halves below this"),
    IGNORE("fp16.consecutive_hysteresis", UNUSED),
    IGNORE("fp16.auto_cast", UNUSED),
    DROP("fp16.fp16_master_weights_and_grads", "the master weights and gradient sums stay fp32"),
    ENUM("scheduler.type", ZT_KEY_ENUM, F(sched.type), lr_schedules,
         "DeepSpeed's learning-rate schedule, applied by zt_step when the trainer passes no lr "
         "(a zt_step_args.lr overrides it, warned once); unset: the optimizer's lr throughout"),
    NUM("scheduler.params.warmup_min_lr", ZT_KEY_FLOAT, S(warmup_min_lr), 0, 1e3, 1,
        "WarmupLR, WarmupDecayLR: the lr the warmup starts from"),
    NUM("scheduler.params.warmup_max_lr", ZT_KEY_FLOAT, S(warmup_max_lr), 0, 1e3, ZT_AUTO_WARNED,
        "WarmupLR, WarmupDecayLR: the lr the warmup ends at; not given: optimizer.params.lr "
        "for WarmupLR, 0.001 for WarmupDecayLR (DeepSpeed's defaults); \"auto\": "
        "optimizer.params.lr"),
    NUM("scheduler.params.warmup_num_steps", ZT_KEY_I64, S(warmup_num_steps), 1, NOMAX,
        ZT_AUTO_WARNED,
        "Optimizer steps of the warmup (at least 2 are taken, as in DeepSpeed, which refuses 0)"),
    ENUM("scheduler.params.warmup_type", ZT_KEY_ENUM, S(warmup_type), warmup_types,
         "The warmup's curve: \"log\" or \"linear\""),
    NUM("scheduler.params.total_num_steps", ZT_KEY_I64, S(total_num_steps), 0, NOMAX,
        ZT_AUTO_WARNED,
        "WarmupDecayLR, WarmupCosineLR (required): optimizer steps of the whole run; \"auto\" "
        "must get a value (zt_config_set) before commit"),
    NUM("scheduler.params.warmup_min_ratio", ZT_KEY_FLOAT, S(warmup_min_ratio), 0, 1, 0,
        "WarmupCosineLR: the warmup's first lr, as a ratio of optimizer.params.lr"),
    NUM("scheduler.params.cos_min_ratio", ZT_KEY_FLOAT, S(cos_min_ratio), 0, 1, 0,
        "WarmupCosineLR: the cosine's last lr, as a ratio of optimizer.params.lr"),
    NUM("scheduler.params.cycle_min_lr", ZT_KEY_FLOAT, S(cycle_min_lr), 0, 1e3, 0,
        "OneCycle (required): the cycle's lowest lr, and the lr of the decay after it"),
    NUM("scheduler.params.cycle_max_lr", ZT_KEY_FLOAT, S(cycle_max_lr), 0, 1e3, 0,
        "OneCycle (required): the cycle's highest lr"),
    NUM("scheduler.params.decay_lr_rate", ZT_KEY_FLOAT, S(decay_lr_rate), 0, 1e6, 0,
        "OneCycle: after the cycle, lr = cycle_min_lr / (1 + rate * steps / decay_step_size)"),
    NUM("scheduler.params.cycle_first_step_size", ZT_KEY_I64, S(cycle_first_step_size), 1, NOMAX, 0,
        "OneCycle: optimizer steps of the cycle's rising half"),
    NUM("scheduler.params.cycle_second_step_size", ZT_KEY_I64, S(cycle_second_step_size), 0, NOMAX,
        0,
        "OneCycle: optimizer steps of the cycle's falling half (0: none, the lr drops back to "
        "cycle_min_lr at once); not given or null: cycle_first_step_size"),
    NUM("scheduler.params.cycle_first_stair_count", ZT_KEY_I64, S(cycle_first_stair_count), 0,
        NOMAX, 0,
        "OneCycle: the rising half moves the lr (and momentum) in this many equal stairs, "
        "each held flat; 0: continuously"),
    NUM("scheduler.params.cycle_second_stair_count", ZT_KEY_I64, S(cycle_second_stair_count), 0,
        NOMAX, 0,
        "OneCycle: stairs of the falling half; 0: continuously; not given or null: "
        "cycle_first_stair_count"),
    NUM("scheduler.params.decay_step_size", ZT_KEY_I64, S(decay_step_size), 0, NOMAX, 0,
        "OneCycle: steps per unit of the decay after the cycle; 0: no decay (cycle_min_lr, "
        "cycle_max_mom)"),
    BOOL("scheduler.params.cycle_momentum", S(cycle_momentum), 0,
         "OneCycle: cycle Adam's beta1 inversely to the lr, with beta2 0.99 (as DeepSpeed)"),
    NUM("scheduler.params.cycle_min_mom", ZT_KEY_FLOAT, S(cycle_min_mom), 0, 1, 0,
        "OneCycle: beta1 at the top of the cycle"),
    NUM("scheduler.params.cycle_max_mom", ZT_KEY_FLOAT, S(cycle_max_mom), 0, 1, 0,
        "OneCycle: beta1 at the bottom of the cycle and during the decay"),
    NUM("scheduler.params.decay_mom_rate", ZT_KEY_FLOAT, S(decay_mom_rate), 0, 1e6, 0,
        "OneCycle: after the cycle, beta1 = cycle_max_mom * (1 + rate * steps / "
        "decay_step_size)"),
    NUM("gradient_clipping", ZT_KEY_FLOAT, F(gradient_clipping), 0, NOMAX, ZT_AUTO_WARNED,
        "Clip the global gradient norm to this; 0 turns clipping off"),
    NUM("gradient_accumulation_steps", ZT_KEY_INT, F(gradient_accumulation_steps), 1, 1 << 20,
        ZT_AUTO_WARNED,
        "Micro-steps (backward passes) averaged per zt_step; not given: derived from the batch "
        "sizes as DeepSpeed does (train_batch_size / (micro batch x ranks)), else 1"),
    NUM("train_batch_size", ZT_KEY_INT, F(train_batch_size), 1, 1 << 30, 1,
        "Samples per optimizer step over all ranks; with train_micro_batch_size_per_gpu it "
        "sets gradient_accumulation_steps; must equal micro batch x accumulation x ranks "
        "(DeepSpeed's rule; checked at commit); null or \"auto\": not given"),
    NUM("train_micro_batch_size_per_gpu", ZT_KEY_INT, F(train_micro_batch_size_per_gpu), 1, 1 << 30,
        1,
        "Samples per micro-step on each rank (the trainer's batch; ztier only checks it): see "
        "train_batch_size; null or \"auto\": not given"),
    ENUM("ztier.device_backend", ZT_KEY_ENUM_STR, F(device_backend), device_backends,
         "\"host\": device memory is budgeted host memory (the stand-in \"HBM\"); \"cuda\": a GPU"),
    ENUM("ztier.comm_backend", ZT_KEY_ENUM_STR, F(comm_backend), comm_backends,
         "\"auto\": mpi when the launcher started several ranks (with cuda, nccl over it), else "
         "single; fixed at zt_runtime_create"),
    /* any budget: commit refuses one below what the largest layer needs */
    NUM("ztier.hbm_capacity", ZT_KEY_BYTES, F(hbm_capacity), 1, NOMAX, 0,
        "Device memory budget; unset: 8 GiB on the host backend, the GPU's free memory less a "
        "reserve on cuda; commit names the layer a too small one cannot hold (ZT_HBM_CAPACITY)"),
    NUM("ztier.host_capacity", ZT_KEY_BYTES, F(host_capacity), 0, NOMAX, 0,
        "Bound on the host tier's bytes (an allocation past it fails naming its owner); 0: no "
        "bound"),
    ENUM("ztier.io_engine", ZT_KEY_ENUM, F(io_engine), io_engines,
         "NVMe I/O engine: \"auto\" io_uring, or the thread pool (warned) where io_uring cannot "
         "be set up; \"io_uring\" fails there (ZT_IO_ENGINE)"),
    BOOL("ztier.verify_checksums", F(verify_checksums), 0,
         "Keep a CRC-32 of every NVMe block written and check it when read back (a mismatch is "
         "ZT_ERR_CORRUPT)"),
    BOOL("ztier.allow_buffered_io", F(allow_buffered_io), 0,
         "Use buffered I/O on a swap folder without O_DIRECT (tmpfs, ...), with a warning; "
         "else such a folder is an error"),
    NUM("ztier.optimizer_threads", ZT_KEY_INT, F(optimizer_threads), 0, 4096, 0,
        "Threads of the pool that runs Adam, the norm, gradient sums and quantization (the "
        "caller counts as one); 0: every online core (ZT_THREADS)"),
    ENUM("ztier.adam_variant", ZT_KEY_ENUM_STR, F(adam_variant), adam_variants,
         "CPU Adam kernel: \"auto\" the best this CPU has; a named one fails where the CPU or "
         "build lacks it (ZT_ADAM_VARIANT)"),
    NUM("ztier.ranks_per_node", ZT_KEY_INT, F(ranks_per_node), 0, 1 << 20, 0,
        "Ranks per node for ZeRO++ (hpZ, qgZ's two levels), as groups of consecutive ranks; 0: "
        "the nodes the comm backend finds (MPI_Comm_split_type), in any rank placement"),
    NUM("ztier.quant_block_size", ZT_KEY_INT, F(quant_block_size), 16, 1 << 16, 0,
        "Elements per ZeRO++ quantization block (qwZ, qgZ)"),
    {"ztier.trace_path", ZT_KEY_PATH, F(trace_path), 0, 0, NULL, 0, 0,
     "Write a timeline trace here (docs/trace.md); \"{rank}\" becomes the rank, else several "
     "ranks append .<rank>; \"\": none (ZT_TRACE)"},
    NUM("ztier.device_index", ZT_KEY_INT, F(device_index), -1, 1024, 0,
        "cuda: the GPU to use; -1: with several ranks on the machine the rank's local index, "
        "else the caller's current device"),
    NUM("ztier.numa_node", ZT_KEY_INT, F(numa_node), -1, 1023, 1,
        "NUMA node of the rank's pinned host buffers (parameter and optimizer homes, staging, "
        "landing and activation buffers), optimizer and NVMe I/O threads; -1 or \"auto\": the "
        "GPU's node (from its PCI address under /sys; none with the host backend); a node the "
        "process cannot use is an error"),
    ENUM("ztier.device_optimizer", ZT_KEY_ENUM, F(device_optimizer), on_off_auto,
         "With offload_optimizer.device \"none\", where Adam runs: \"auto\" on the device with "
         "cuda, on the CPU with host; \"on\" on the device; \"off\" on the CPU (state in host "
         "memory)"),
    ENUM("ztier.grad_accum_dtype", ZT_KEY_ENUM, F(grad_accum_bf16), accum_dtypes,
         "Gradient accumulators in \"fp32\", or \"bf16\" (each micro-step's sum rounded once; "
         "half the memory; not with the optimizer on the device)"),
    NUM("ztier.pinned_limit", ZT_KEY_BYTES, F(pinned_limit), 0, NOMAX, 1,
        "Most host memory ztier pins; refusals are logged once and counted in zt_stats"),
    ENUM("ztier.overlap_step", ZT_KEY_ENUM, F(overlap_step), on_off_auto,
         "zt_step leaves each layer's update to the first later call that needs it: \"auto\" "
         "with the optimizer state on NVMe, \"on\" also in host memory, \"off\" never"),
    NUM("ztier.gradient_landing_buffers", ZT_KEY_INT, F(gradient_landing_buffers), 1, 64, 0,
        "Pinned host buffers for the gradients of stream-ordered backward releases; more "
        "releases in flight wait (zt_stats.host_syncs)"),
    NUM("ztier.hidden_size", ZT_KEY_I64, F(hidden_size), 0, NOMAX, 0,
        "Hidden size behind the sizes given as \"auto\" (as the HF integration: "
        "reduce_bucket_size h*h, stage3_prefetch_bucket_size 0.9*h*h, "
        "stage3_param_persistence_threshold 10*h); 0: the dimension most registered 2-D "
        "parameters share"),
    NUM("ztier.checkpoint_keep", ZT_KEY_INT, F(checkpoint_keep), 1, 1000, 0,
        "The newest committed checkpoints kept per checkpoint folder"),
    BOOL("ztier.checkpoint_reuse_files", F(checkpoint_reuse_files), 0,
         "A save overwrites the files of the checkpoint the previous save removed (kept as "
         "folder/.reuse: one more checkpoint of disk between saves, none more during one) "
         "instead of writing new files: overwriting written blocks is faster than allocating "
         "new ones (about 1.5x on the development VM's ext4)"),
    ENUM("ztier.log_level", ZT_KEY_ENUM, F(log_level), log_levels,
         "Log level; unset: warn. ZT_LOG overrides it, and zt_options.log_level both"),
    BOOL("ztier.log_effective_settings", F(log_effective_settings), 0,
         "Commit prints one line at the default level with the settings training runs with "
         "(optimizer, lr, precision, clipping, accumulation, schedule); false: not"),
    /* activation_checkpointing: DeepSpeed's keys and ztier's own (zt_act_save) */
    ENUM("activation_checkpointing.device", ZT_KEY_ENUM, AO(device), offload_devices,
         "ztier: where zt_act_save keeps activation checkpoints between a layer's forward and "
         "backward: \"none\" device memory, \"cpu\" pinned host memory, \"nvme\" swap files "
         "in nvme_path"),
    {"activation_checkpointing.nvme_path", ZT_KEY_PATHS, AO(nvme_path), 0, 0, NULL, 0, 0,
     "ztier: folder (or list of folders) of the activation swap files with device \"nvme\"; "
     "unset: offload_param's nvme_path, else offload_optimizer's"},
    NUM("activation_checkpointing.buffer_count", ZT_KEY_I64, AO(buffer_count), 2, 64, 0,
        "ztier: pinned staging buffers of the activations' NVMe writes and reads, the largest "
        "registered layer's size each"),
    NUM("activation_checkpointing.prefetch_layers", ZT_KEY_INT, F(act_prefetch_layers), 0, 64, 0,
        "ztier: layers whose checkpoints are brought back to the device ahead of the load "
        "that needs them (in free device memory only)"),
    BOOL("activation_checkpointing.cpu_checkpointing", F(act_cpu_checkpointing), 0,
         "Keep activation checkpoints in pinned host memory (= device \"cpu\"; a device "
         "given explicitly wins)"),
    BOOL("activation_checkpointing.partition_activations", F(act_partition), 0,
         "Not supported (true is warned): ztier has no tensor parallelism, so no rank holds a "
         "copy of another rank's activations to split; each rank keeps its own whole"),
    BOOL("activation_checkpointing.contiguous_memory_optimization", F(act_contiguous), 0,
         "Accepted, always on: each layer's checkpoint has one preallocated home, made at "
         "commit from zt_act_register, so nothing fragments"),
    NUM("activation_checkpointing.number_checkpoints", ZT_KEY_I64, F(act_number_checkpoints), 0,
        NOMAX, 0,
        "Checkpoints expected per step; ztier sizes the store from zt_act_register and warns "
        "at commit when this differs from the layers registered"),
    BOOL("activation_checkpointing.synchronize_checkpoint_boundary", F(act_sync), 0,
         "zt_act_save_async waits on the host for its copy (as zt_act_save)"),
    BOOL("activation_checkpointing.profile", F(act_profile), 0,
         "Spans per activation save, load and NVMe transfer (layer, bytes, time) in the "
         "trace of ztier.trace_path"),
    /* DeepSpeed settings (whole subtrees) for things outside ztier's scope. */
    IGNORE("steps_per_print", UNUSED),
    IGNORE("wall_clock_breakdown", UNUSED),
    IGNORE("memory_breakdown", UNUSED),
    IGNORE("dump_state", UNUSED),
    IGNORE("zero_allow_untested_optimizer", UNUSED),
    IGNORE("zero_force_ds_cpu_optimizer", UNUSED),
    IGNORE("flops_profiler", UNUSED),
    IGNORE("tensorboard", UNUSED),
    IGNORE("wandb", UNUSED),
    IGNORE("csv_monitor", UNUSED),
    IGNORE("comms_logger", UNUSED),
    ENUM("communication_data_type", ZT_KEY_ENUM, F(comm_dtype), comm_dtypes,
         "The dtype gradients are summed over ranks in: unset or \"auto\" the parameters' "
         "(16-bit ones in 16 bits, each rank's add rounded once; docs/configuration.md), "
         "\"fp32\" widened first (exact sums); \"bf16\"/\"fp16\" only with that dtype enabled"),
    IGNORE("seq_parallel_communication_data_type", UNUSED),
    DROP("data_types", "the gradient sums' dtype is ztier.grad_accum_dtype"),
    DROP("prescale_gradients", "gradients are summed over ranks, then averaged"),
    DROP("gradient_predivide_factor", "gradients are summed over ranks, then averaged"),
    IGNORE("sparse_gradients", UNUSED),
    BOOL("fp32_allreduce", F(fp32_allreduce), 0,
         "true: 16-bit gradients are widened and summed over ranks in fp32 (as "
         "communication_data_type \"fp32\")"),
    DROP("amp", "no automatic mixed precision: fp16/bf16 sections set the working dtype"),
    IGNORE("checkpoint", UNUSED "; see zt_checkpoint_save"),
    IGNORE("elasticity", UNUSED),
    IGNORE("autotuning", UNUSED),
    IGNORE("compression_training", UNUSED),
    IGNORE("data_efficiency", UNUSED),
    IGNORE("curriculum_learning", UNUSED),
    IGNORE("sequence_parallel_size", UNUSED),
    IGNORE("dataloader_drop_last", UNUSED),
    IGNORE("nebula", UNUSED),
    IGNORE("hybrid_engine", UNUSED "; generation for RLHF is the trainer's"),
    {NULL, 0, 0, 0, 0, NULL, 0, 0, NULL},
};

const char *const zt_config_objects[] = {
    "zero_optimization",
    "zero_optimization.offload_param",
    "zero_optimization.offload_optimizer",
    "aio",
    "optimizer",
    "optimizer.params",
    "bf16",
    "fp16",
    "scheduler",
    "scheduler.params",
    "ztier",
    "activation_checkpointing",
    NULL,
};

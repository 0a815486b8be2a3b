/* The table of configuration keys ztier understands: JSON path, type, where the value
 * lands in zt_config, and what is allowed. DeepSpeed keys ztier knowingly ignores are
 * listed too, so that they are logged as "not used" instead of being reported as typos. */
#include "runtime/config_keys.h"
#include "runtime/config.h"

#include <stddef.h>

#define F(field) offsetof(zt_config, field)
#define OP(field) (offsetof(zt_config, offload_param) + offsetof(zt_offload_config, field))
#define OO(field) (offsetof(zt_config, offload_optimizer) + offsetof(zt_offload_config, field))
#define NOMAX ZT_KEY_NO_MAX

/* path, kind, offset, min, max, enum values, "auto" allowed, multiple of */
#define NUM(path, kind, off, min, max, auto_ok) {path, kind, off, min, max, NULL, auto_ok, 0}
#define BOOL(path, off, auto_ok) {path, ZT_KEY_BOOL, off, 0, 1, NULL, auto_ok, 0}
#define ENUM(path, kind, off, values) {path, kind, off, 0, 0, values, 0, 0}
#define IGNORE(path) {path, ZT_KEY_IGNORED, 0, 0, 0, NULL, 0, 0}
#define LEGACY(path) {path, ZT_KEY_LEGACY, 0, 0, 1, NULL, 0, 0}

static const char *const offload_devices[] = {"none", "cpu", "nvme", NULL};
static const char *const optimizer_types[] = {"AdamW", "Adam", NULL}; /* = zt_optimizer_kind */
static const char *const device_backends[] = {"host", "cuda", NULL};
static const char *const comm_backends[] = {"auto", "single", "mpi", "nccl", NULL};
static const char *const io_engines[] = {"auto", "io_uring", "threads", NULL};
static const char *const adam_variants[] = {"auto", "scalar", "avx2", "avx512", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const on_off_auto[] = {"auto", "on", "off", NULL}; /* = zt_device_optimizer_mode */
static const char *const accum_dtypes[] = {"fp32", "bf16", NULL};

#define OFFLOAD_KEYS(prefix, X)                                                                \
    ENUM(prefix ".device", ZT_KEY_ENUM, X(device), offload_devices),                           \
        {prefix ".nvme_path", ZT_KEY_PATHS, X(nvme_path), 0, 0, NULL, 0, 0},                   \
        BOOL(prefix ".pin_memory", X(pin_memory), 0),                                          \
        NUM(prefix ".buffer_count", ZT_KEY_I64, X(buffer_count), 1, 1e6, 0),                   \
        NUM(prefix ".buffer_size", ZT_KEY_I64, X(buffer_size), 4096, NOMAX, 0),                \
        NUM(prefix ".max_in_cpu", ZT_KEY_I64, X(max_in_cpu), 0, NOMAX, 0),                     \
        BOOL(prefix ".fast_init", X(fast_init), 0), IGNORE(prefix ".pipeline"),                \
        IGNORE(prefix ".pipeline_read"), IGNORE(prefix ".pipeline_write"),                     \
        IGNORE(prefix ".ratio")

const zt_config_key zt_config_keys[] = {
    NUM("zero_optimization.stage", ZT_KEY_INT, F(stage), 0, 3, 0),
    OFFLOAD_KEYS("zero_optimization.offload_param", OP),
    OFFLOAD_KEYS("zero_optimization.offload_optimizer", OO),
    NUM("zero_optimization.stage3_prefetch_bucket_size", ZT_KEY_I64,
        F(stage3_prefetch_bucket_size), 0, NOMAX, 1),
    NUM("zero_optimization.stage3_max_live_parameters", ZT_KEY_I64,
        F(stage3_max_live_parameters), 0, NOMAX, 1),
    NUM("zero_optimization.stage3_max_reuse_distance", ZT_KEY_I64, F(stage3_max_reuse_distance),
        0, NOMAX, 1),
    NUM("zero_optimization.stage3_param_persistence_threshold", ZT_KEY_I64,
        F(stage3_param_persistence_threshold), 0, NOMAX, 1),
    /* DeepSpeed's pydantic model accepts these field names as well as the stage3_ aliases */
    NUM("zero_optimization.prefetch_bucket_size", ZT_KEY_I64, F(stage3_prefetch_bucket_size), 0,
        NOMAX, 1),
    NUM("zero_optimization.max_live_parameters", ZT_KEY_I64, F(stage3_max_live_parameters), 0,
        NOMAX, 1),
    NUM("zero_optimization.max_reuse_distance", ZT_KEY_I64, F(stage3_max_reuse_distance), 0,
        NOMAX, 1),
    NUM("zero_optimization.param_persistence_threshold", ZT_KEY_I64,
        F(stage3_param_persistence_threshold), 0, NOMAX, 1),
    NUM("zero_optimization.reduce_bucket_size", ZT_KEY_I64, F(reduce_bucket_size), 1, NOMAX, 1),
    /* 0 (accepted by DeepSpeed, common in public configs) means the default */
    NUM("zero_optimization.sub_group_size", ZT_KEY_I64, F(sub_group_size), 0, NOMAX, 1),
    BOOL("zero_optimization.overlap_comm", F(overlap_comm), 0),
    BOOL("zero_optimization.contiguous_gradients", F(contiguous_gradients), 0),
    BOOL("zero_optimization.zero_quantized_weights", F(zero_quantized_weights), 0),
    BOOL("zero_optimization.zero_quantized_gradients", F(zero_quantized_gradients), 0),
    NUM("zero_optimization.zero_hpz_partition_size", ZT_KEY_INT, F(zero_hpz_partition_size), 1,
        1 << 20, 0),
    IGNORE("zero_optimization.round_robin_gradients"),
    IGNORE("zero_optimization.stage3_gather_16bit_weights_on_model_save"),
    IGNORE("zero_optimization.stage3_gather_fp16_weights_on_model_save"),
    IGNORE("zero_optimization.gather_16bit_weights_on_model_save"),
    IGNORE("zero_optimization.stage3_model_persistence_threshold"),
    IGNORE("zero_optimization.model_persistence_threshold"),
    IGNORE("zero_optimization.stage3_module_granularity_threshold"),
    IGNORE("zero_optimization.allgather_partitions"),
    IGNORE("zero_optimization.allgather_bucket_size"),
    IGNORE("zero_optimization.reduce_scatter"),
    IGNORE("zero_optimization.memory_efficient_linear"),
    IGNORE("zero_optimization.ignore_unused_parameters"),
    IGNORE("zero_optimization.elastic_checkpoint"),
    IGNORE("zero_optimization.load_from_fp32_weights"),
    IGNORE("zero_optimization.zero_quantized_nontrainable_weights"),
    IGNORE("zero_optimization.log_trace_cache_warnings"),
    IGNORE("zero_optimization.use_multi_rank_bucket_allreduce"),
    IGNORE("zero_optimization.mics_shard_size"),
    IGNORE("zero_optimization.mics_hierarchical_params_gather"),
    IGNORE("zero_optimization.legacy_stage1"),
    LEGACY("zero_optimization.cpu_offload"),
    LEGACY("zero_optimization.cpu_offload_param"),
    LEGACY("zero_optimization.cpu_offload_params"),
    LEGACY("zero_optimization.cpu_offload_use_pin_memory"),
    {"aio.block_size", ZT_KEY_I64, F(aio_block_size), 4096, 1 << 30, NULL, 0, 4096},
    NUM("aio.queue_depth", ZT_KEY_INT, F(aio_queue_depth), 1, 4096, 0),
    NUM("aio.intra_op_parallelism", ZT_KEY_INT, F(aio_intra_op_parallelism), 1, 256, 0),
    NUM("aio.thread_count", ZT_KEY_INT, F(aio_intra_op_parallelism), 1, 256, 0), /* older name */
    BOOL("aio.single_submit", F(aio_single_submit), 0),
    BOOL("aio.overlap_events", F(aio_overlap_events), 0),
    IGNORE("aio.use_gds"),
    ENUM("optimizer.type", ZT_KEY_ENUM, F(optimizer_type), optimizer_types),
    NUM("optimizer.params.lr", ZT_KEY_FLOAT, F(lr), 0, 1e3, 1),
    {"optimizer.params.betas", ZT_KEY_BETAS, F(beta1), 0, 1, NULL, 1, 0},
    NUM("optimizer.params.eps", ZT_KEY_FLOAT, F(eps), 0, 1, 1),
    NUM("optimizer.params.weight_decay", ZT_KEY_FLOAT, F(weight_decay), 0, 1e3, 1),
    BOOL("optimizer.params.adam_w_mode", F(adam_w_mode), 0),
    IGNORE("optimizer.params.torch_adam"),
    IGNORE("optimizer.params.bias_correction"),
    IGNORE("optimizer.params.amsgrad"),
    IGNORE("optimizer.params.fused"),
    BOOL("bf16.enabled", F(bf16), 1),
    IGNORE("bf16.immediate_grad_update"),
    IGNORE("bf16.check_grad_overflow"),
    BOOL("fp16.enabled", F(fp16), 1),
    NUM("fp16.loss_scale", ZT_KEY_FLOAT, F(fp16_loss_scale), 0, NOMAX, 0),
    NUM("fp16.initial_scale_power", ZT_KEY_INT, F(fp16_initial_scale_power), 0, 62, 0),
    NUM("fp16.loss_scale_window", ZT_KEY_INT, F(fp16_loss_scale_window), 1, 1 << 30, 0),
    NUM("fp16.hysteresis", ZT_KEY_INT, F(fp16_hysteresis), 1, 1 << 20, 0),
    NUM("fp16.min_loss_scale", ZT_KEY_FLOAT, F(fp16_min_loss_scale), 0, NOMAX, 0),
    IGNORE("fp16.consecutive_hysteresis"),
    IGNORE("fp16.auto_cast"),
    IGNORE("fp16.fp16_master_weights_and_grads"),
    NUM("gradient_clipping", ZT_KEY_FLOAT, F(gradient_clipping), 0, NOMAX, 1),
    NUM("gradient_accumulation_steps", ZT_KEY_INT, F(gradient_accumulation_steps), 1, 1 << 20, 1),
    ENUM("ztier.device_backend", ZT_KEY_ENUM_STR, F(device_backend), device_backends),
    ENUM("ztier.comm_backend", ZT_KEY_ENUM_STR, F(comm_backend), comm_backends),
    /* any budget: commit refuses one below what the largest layer needs */
    NUM("ztier.hbm_capacity", ZT_KEY_BYTES, F(hbm_capacity), 1, NOMAX, 0),
    NUM("ztier.host_capacity", ZT_KEY_BYTES, F(host_capacity), 0, NOMAX, 0),
    ENUM("ztier.io_engine", ZT_KEY_ENUM, F(io_engine), io_engines),
    BOOL("ztier.verify_checksums", F(verify_checksums), 0),
    BOOL("ztier.allow_buffered_io", F(allow_buffered_io), 0),
    NUM("ztier.optimizer_threads", ZT_KEY_INT, F(optimizer_threads), 0, 4096, 0),
    ENUM("ztier.adam_variant", ZT_KEY_ENUM_STR, F(adam_variant), adam_variants),
    NUM("ztier.ranks_per_node", ZT_KEY_INT, F(ranks_per_node), 0, 1 << 20, 0),
    NUM("ztier.quant_block_size", ZT_KEY_INT, F(quant_block_size), 16, 1 << 16, 0),
    {"ztier.trace_path", ZT_KEY_PATH, F(trace_path), 0, 0, NULL, 0, 0},
    NUM("ztier.device_index", ZT_KEY_INT, F(device_index), -1, 1024, 0),
    ENUM("ztier.device_optimizer", ZT_KEY_ENUM, F(device_optimizer), on_off_auto),
    ENUM("ztier.grad_accum_dtype", ZT_KEY_ENUM, F(grad_accum_bf16), accum_dtypes),
    NUM("ztier.pinned_limit", ZT_KEY_BYTES, F(pinned_limit), 0, NOMAX, 1),
    ENUM("ztier.overlap_step", ZT_KEY_ENUM, F(overlap_step), on_off_auto),
    NUM("ztier.gradient_landing_buffers", ZT_KEY_INT, F(gradient_landing_buffers), 1, 64, 0),
    NUM("ztier.checkpoint_keep", ZT_KEY_INT, F(checkpoint_keep), 1, 1000, 0),
    ENUM("ztier.log_level", ZT_KEY_ENUM, F(log_level), log_levels),
    /* DeepSpeed settings (whole subtrees) for things outside ztier's scope. */
    IGNORE("train_batch_size"),
    IGNORE("train_micro_batch_size_per_gpu"),
    IGNORE("steps_per_print"),
    IGNORE("wall_clock_breakdown"),
    IGNORE("memory_breakdown"),
    IGNORE("dump_state"),
    IGNORE("scheduler"),
    IGNORE("zero_allow_untested_optimizer"),
    IGNORE("zero_force_ds_cpu_optimizer"),
    IGNORE("activation_checkpointing"),
    IGNORE("flops_profiler"),
    IGNORE("tensorboard"),
    IGNORE("wandb"),
    IGNORE("csv_monitor"),
    IGNORE("comms_logger"),
    IGNORE("communication_data_type"),
    IGNORE("seq_parallel_communication_data_type"),
    IGNORE("data_types"),
    IGNORE("prescale_gradients"),
    IGNORE("gradient_predivide_factor"),
    IGNORE("sparse_gradients"),
    IGNORE("fp32_allreduce"),
    IGNORE("amp"),
    IGNORE("checkpoint"),
    IGNORE("elasticity"),
    IGNORE("autotuning"),
    IGNORE("compression_training"),
    IGNORE("data_efficiency"),
    IGNORE("curriculum_learning"),
    IGNORE("sequence_parallel_size"),
    IGNORE("dataloader_drop_last"),
    IGNORE("nebula"),
    {NULL, 0, 0, 0, 0, NULL, 0, 0},
};

const char *const zt_config_objects[] = {
    "zero_optimization", "zero_optimization.offload_param", "zero_optimization.offload_optimizer",
    "aio", "optimizer", "optimizer.params", "bf16", "fp16", "ztier", NULL,
};

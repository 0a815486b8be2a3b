/* The table of configuration keys ztier understands: JSON path, type, where the value
 * lands in zt_config, and what is allowed. DeepSpeed keys ztier knowingly ignores are
 * listed separately so they are not reported as typos. */
#include "runtime/config_schema.h"

#include <stddef.h>

#define F(field) offsetof(zt_config, field)
#define OP(field) (offsetof(zt_config, offload_param) + offsetof(zt_offload_config, field))
#define OO(field) (offsetof(zt_config, offload_optimizer) + offsetof(zt_offload_config, field))
#define I64MAX 9.2e18

static const char *const offload_devices[] = {"none", "cpu", "nvme", NULL};
static const char *const optimizer_types[] = {"adamw", "adam", NULL};
static const char *const device_backends[] = {"host", "cuda", NULL};
static const char *const comm_backends[] = {"auto", "single", "mpi", "nccl", NULL};
static const char *const io_engines[] = {"auto", "io_uring", "threads", NULL};
static const char *const adam_variants[] = {"auto", "scalar", "avx2", "avx512", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};

/* path, kind, offset, min, max, enum values, "auto" allowed */
const zt_config_key zt_config_keys[] = {
    {"zero_optimization.stage", ZT_KEY_INT, F(stage), 0, 3, NULL, 0},
    {"zero_optimization.offload_param.device", ZT_KEY_ENUM, OP(device), 0, 0, offload_devices, 0},
    {"zero_optimization.offload_param.nvme_path", ZT_KEY_PATHS, OP(nvme_path), 0, 0, NULL, 0},
    {"zero_optimization.offload_param.pin_memory", ZT_KEY_BOOL, OP(pin_memory), 0, 1, NULL, 0},
    {"zero_optimization.offload_param.buffer_count", ZT_KEY_I64, OP(buffer_count), 1, 1e6, NULL, 0},
    {"zero_optimization.offload_param.buffer_size", ZT_KEY_I64, OP(buffer_size), 4096, I64MAX, NULL, 0},
    {"zero_optimization.offload_param.max_in_cpu", ZT_KEY_I64, OP(max_in_cpu), 0, I64MAX, NULL, 0},
    {"zero_optimization.offload_param.fast_init", ZT_KEY_BOOL, OP(fast_init), 0, 1, NULL, 0},
    {"zero_optimization.offload_optimizer.device", ZT_KEY_ENUM, OO(device), 0, 0, offload_devices, 0},
    {"zero_optimization.offload_optimizer.nvme_path", ZT_KEY_PATHS, OO(nvme_path), 0, 0, NULL, 0},
    {"zero_optimization.offload_optimizer.pin_memory", ZT_KEY_BOOL, OO(pin_memory), 0, 1, NULL, 0},
    {"zero_optimization.offload_optimizer.buffer_count", ZT_KEY_I64, OO(buffer_count), 1, 1e6, NULL, 0},
    {"zero_optimization.offload_optimizer.buffer_size", ZT_KEY_I64, OO(buffer_size), 4096, I64MAX, NULL, 0},
    {"zero_optimization.offload_optimizer.max_in_cpu", ZT_KEY_I64, OO(max_in_cpu), 0, I64MAX, NULL, 0},
    {"zero_optimization.offload_optimizer.fast_init", ZT_KEY_BOOL, OO(fast_init), 0, 1, NULL, 0},
    {"zero_optimization.offload_optimizer.pipeline_read", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.offload_optimizer.pipeline_write", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.offload_optimizer.ratio", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.stage3_prefetch_bucket_size", ZT_KEY_I64, F(stage3_prefetch_bucket_size), 0, I64MAX, NULL, 1},
    {"zero_optimization.stage3_max_live_parameters", ZT_KEY_I64, F(stage3_max_live_parameters), 0, I64MAX, NULL, 1},
    {"zero_optimization.stage3_max_reuse_distance", ZT_KEY_I64, F(stage3_max_reuse_distance), 0, I64MAX, NULL, 1},
    {"zero_optimization.stage3_param_persistence_threshold", ZT_KEY_I64, F(stage3_param_persistence_threshold), 0, I64MAX, NULL, 1},
    {"zero_optimization.reduce_bucket_size", ZT_KEY_I64, F(reduce_bucket_size), 1, I64MAX, NULL, 1},
    {"zero_optimization.sub_group_size", ZT_KEY_I64, F(sub_group_size), 1, I64MAX, NULL, 1},
    {"zero_optimization.overlap_comm", ZT_KEY_BOOL, F(overlap_comm), 0, 1, NULL, 0},
    {"zero_optimization.contiguous_gradients", ZT_KEY_BOOL, F(contiguous_gradients), 0, 1, NULL, 0},
    {"zero_optimization.zero_quantized_weights", ZT_KEY_BOOL, F(zero_quantized_weights), 0, 1, NULL, 0},
    {"zero_optimization.zero_quantized_gradients", ZT_KEY_BOOL, F(zero_quantized_gradients), 0, 1, NULL, 0},
    {"zero_optimization.zero_hpz_partition_size", ZT_KEY_INT, F(zero_hpz_partition_size), 1, 1 << 20, NULL, 0},
    {"zero_optimization.round_robin_gradients", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.allgather_partitions", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.allgather_bucket_size", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.reduce_scatter", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.memory_efficient_linear", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.ignore_unused_parameters", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_optimization.cpu_offload", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"aio.block_size", ZT_KEY_I64, F(aio_block_size), 4096, 1 << 30, NULL, 0},
    {"aio.queue_depth", ZT_KEY_INT, F(aio_queue_depth), 1, 4096, NULL, 0},
    {"aio.intra_op_parallelism", ZT_KEY_INT, F(aio_intra_op_parallelism), 1, 256, NULL, 0},
    {"aio.thread_count", ZT_KEY_INT, F(aio_intra_op_parallelism), 1, 256, NULL, 0},
    {"aio.single_submit", ZT_KEY_BOOL, F(aio_single_submit), 0, 1, NULL, 0},
    {"aio.overlap_events", ZT_KEY_BOOL, F(aio_overlap_events), 0, 1, NULL, 0},
    {"aio.use_gds", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"optimizer.type", ZT_KEY_ENUM, F(optimizer), 0, 0, optimizer_types, 0},
    {"optimizer.params.lr", ZT_KEY_FLOAT, F(lr), 0, 1e3, NULL, 1},
    {"optimizer.params.betas", ZT_KEY_BETAS, F(beta1), 0, 1, NULL, 1},
    {"optimizer.params.eps", ZT_KEY_FLOAT, F(eps), 0, 1, NULL, 1},
    {"optimizer.params.weight_decay", ZT_KEY_FLOAT, F(weight_decay), 0, 1e3, NULL, 1},
    {"optimizer.params.adam_w_mode", ZT_KEY_BOOL, F(adam_w_mode), 0, 1, NULL, 0},
    {"optimizer.params.torch_adam", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"optimizer.params.bias_correction", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"optimizer.params.amsgrad", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"bf16.enabled", ZT_KEY_BOOL, F(bf16), 0, 1, NULL, 1},
    {"fp16.enabled", ZT_KEY_BOOL, F(fp16), 0, 1, NULL, 1},
    {"fp16.loss_scale", ZT_KEY_FLOAT, F(fp16_loss_scale), 0, 1e30, NULL, 0},
    {"fp16.initial_scale_power", ZT_KEY_INT, F(fp16_initial_scale_power), 0, 62, NULL, 0},
    {"fp16.loss_scale_window", ZT_KEY_INT, F(fp16_loss_scale_window), 1, 1 << 30, NULL, 0},
    {"fp16.hysteresis", ZT_KEY_INT, F(fp16_hysteresis), 1, 1 << 20, NULL, 0},
    {"fp16.min_loss_scale", ZT_KEY_FLOAT, F(fp16_min_loss_scale), 0, 1e30, NULL, 0},
    {"fp16.consecutive_hysteresis", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"fp16.auto_cast", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"gradient_clipping", ZT_KEY_FLOAT, F(gradient_clipping), 0, 1e30, NULL, 1},
    {"gradient_accumulation_steps", ZT_KEY_INT, F(gradient_accumulation_steps), 1, 1 << 20, NULL, 1},
    {"ztier.device_backend", ZT_KEY_ENUM_STR, F(device_backend), 0, 0, device_backends, 0},
    {"ztier.comm_backend", ZT_KEY_ENUM_STR, F(comm_backend), 0, 0, comm_backends, 0},
    {"ztier.hbm_capacity", ZT_KEY_BYTES, F(hbm_capacity), 1 << 20, I64MAX, NULL, 0},
    {"ztier.host_capacity", ZT_KEY_BYTES, F(host_capacity), 0, I64MAX, NULL, 0},
    {"ztier.io_engine", ZT_KEY_ENUM, F(io_engine), 0, 0, io_engines, 0},
    {"ztier.verify_checksums", ZT_KEY_BOOL, F(verify_checksums), 0, 1, NULL, 0},
    {"ztier.allow_buffered_io", ZT_KEY_BOOL, F(allow_buffered_io), 0, 1, NULL, 0},
    {"ztier.optimizer_threads", ZT_KEY_INT, F(optimizer_threads), 0, 4096, NULL, 0},
    {"ztier.adam_variant", ZT_KEY_ENUM_STR, F(adam_variant), 0, 0, adam_variants, 0},
    {"ztier.ranks_per_node", ZT_KEY_INT, F(ranks_per_node), 0, 1 << 20, NULL, 0},
    {"ztier.quant_block_size", ZT_KEY_INT, F(quant_block_size), 16, 1 << 16, NULL, 0},
    {"ztier.trace_path", ZT_KEY_PATH, F(trace_path), 0, 0, NULL, 0},
    {"ztier.log_level", ZT_KEY_ENUM, F(log_level), 0, 0, log_levels, 0},
    /* DeepSpeed keys (whole subtrees) that configure things outside ztier's scope. */
    {"train_batch_size", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"train_micro_batch_size_per_gpu", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"steps_per_print", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"wall_clock_breakdown", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"scheduler", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_allow_untested_optimizer", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"activation_checkpointing", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"flops_profiler", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"tensorboard", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"wandb", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"comms_logger", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"communication_data_type", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"prescale_gradients", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"gradient_predivide_factor", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {"zero_force_ds_cpu_optimizer", ZT_KEY_IGNORED, 0, 0, 0, NULL, 0},
    {NULL, 0, 0, 0, 0, NULL, 0},
};

/* Objects whose members are looked up in the table (everything else must be a leaf). */
const char *const zt_config_objects[] = {
    "zero_optimization", "zero_optimization.offload_param", "zero_optimization.offload_optimizer",
    "aio", "optimizer", "optimizer.params", "bf16", "fp16", "ztier", NULL,
};

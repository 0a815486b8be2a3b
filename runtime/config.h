/* SPDX-License-Identifier: MIT */
/* Runtime configuration: DeepSpeed's ds_config.json schema plus ztier-only settings under
 * "ztier". zt_config_defaults() gives the values used for absent keys. */
#ifndef ZT_RUNTIME_CONFIG_H
#define ZT_RUNTIME_CONFIG_H

#include "core/error.h"
#include "optimizer/lr_schedule.h" /* zt_lr_schedule */
#include "tiers/home.h"            /* zt_tier_kind */
#include "tiers/swap.h"            /* ZT_MAX_NVME_PATHS, ZT_PATH_MAX, zt_io_engine_kind */

#include <stdint.h>

typedef enum zt_optimizer_kind { ZT_OPT_ADAMW = 0, ZT_OPT_ADAM = 1 } zt_optimizer_kind;

typedef struct zt_offload_config {
    zt_tier_kind device;                            /* "none" -> DEVICE, "cpu" -> HOST, "nvme" */
    char nvme_path[ZT_MAX_NVME_PATHS][ZT_PATH_MAX]; /* a string or a list of strings */
    int n_nvme_paths;
    int pin_memory;       /* bool */
    int64_t buffer_count; /* pinned staging buffers */
    int64_t buffer_size;  /* bytes per staging buffer */
    int64_t max_in_cpu;   /* bytes of params kept in host memory */
    int fast_init;        /* accepted, no effect */
    /* offload_optimizer.ratio: the fraction of this rank's optimizer state updated on the CPU
     * (the rest by the device optimizer, concurrently); ZT_RATIO_AUTO: chosen at commit from
     * measured rates (runtime/opt_split.c). Unused in offload_param. */
    float ratio;
} zt_offload_config;

#define ZT_RATIO_AUTO (-1.0f)

#define ZT_CONFIG_MAX_AUTO 24

typedef struct zt_config {
    /* zero_optimization */
    int stage; /* 0..3; ztier implements 3 and 0 (1, 2: error) */
    zt_offload_config offload_param;
    zt_offload_config offload_optimizer;
    int64_t stage3_prefetch_bucket_size;        /* elements */
    int64_t stage3_max_live_parameters;         /* elements */
    int64_t stage3_max_reuse_distance;          /* elements */
    int64_t stage3_param_persistence_threshold; /* elements */
    int64_t reduce_bucket_size;                 /* elements */
    int64_t allgather_bucket_size;              /* elements */
    int64_t sub_group_size;                     /* elements */
    int overlap_comm;                           /* reductions left in flight */
    int contiguous_gradients;                   /* accepted (always contiguous) */
    int zero_quantized_weights;                 /* bool */
    int zero_quantized_gradients;               /* bool */
    int zero_hpz_partition_size;                /* >= 1 */

    /* aio */
    int64_t aio_block_size; /* bytes */
    int aio_queue_depth;
    int aio_intra_op_parallelism;
    int aio_single_submit;
    int aio_overlap_events;

    /* optimizer */
    zt_optimizer_kind optimizer_type; /* optimizer.type as written */
    int adam_w_mode;                  /* "Adam" with decoupled decay (DeepSpeed default) */
    float lr, beta1, beta2, eps, weight_decay;
    int weight_decay_set;        /* weight_decay was given (else: type's default) */
    int optimizer_given;         /* a key under "optimizer" was given (else: warned at commit) */
    zt_optimizer_kind optimizer; /* resolved: AdamW for "AdamW" and "Adam" with
                                               adam_w_mode, else Adam (L2 decay) */

    /* precision */
    int bf16;              /* bf16.enabled */
    int fp16;              /* fp16.enabled */
    float fp16_loss_scale; /* 0 = dynamic */
    int fp16_initial_scale_power;
    int fp16_loss_scale_window;
    int fp16_hysteresis;
    float fp16_min_loss_scale;

    /* scheduler: type -1 (ZT_LR_CONSTANT) when there is none */
    zt_lr_schedule sched;
    unsigned
        sched_given; /* bit i: scheduler.params' parameter i was given (zt_lr_schedule_param) */

    float gradient_clipping;            /* 0 = off */
    int gradient_accumulation_steps;    /* >= 1; derived at commit from the batch sizes when not
                                        given (zt_config_apply_batch) */
    int accumulation_given;             /* gradient_accumulation_steps was given (perhaps "auto") */
    int train_batch_size;               /* 0: not given (null and "auto" too) */
    int train_micro_batch_size_per_gpu; /* 0: not given (null and "auto" too) */

    /* activation_checkpointing: where zt_act_save keeps activations (device, nvme_path,
     * buffer_count of act_offload are read; DeepSpeed's cpu_checkpointing is device "cpu") */
    zt_offload_config act_offload;
    int act_prefetch_layers;        /* layers brought back ahead of the load needing them */
    int act_cpu_checkpointing;      /* bool */
    int act_partition;              /* partition_activations: not supported (warned) */
    int act_contiguous;             /* contiguous_memory_optimization: always (one home each) */
    int act_sync;                   /* synchronize_checkpoint_boundary */
    int act_profile;                /* per-layer spans in the trace */
    int64_t act_number_checkpoints; /* 0: not given */

    /* ztier */
    char device_backend[16]; /* "host" | "cuda" */
    char comm_backend[16];   /* "single" | "mpi" | "nccl" | "auto" */
    int64_t hbm_capacity;    /* host backend device budget, bytes */
    int64_t host_capacity;   /* bound on host-tier bytes; 0 = unbounded */
    zt_io_engine_kind io_engine;
    int verify_checksums;         /* crc32c per block on NVMe */
    int allow_buffered_io;        /* fall back to buffered I/O without O_DIRECT */
    int optimizer_threads;        /* 0 = all cores */
    char adam_variant[16];        /* "auto" | "scalar" | "avx2" | "avx512" */
    int ranks_per_node;           /* 0 = the nodes the comm backend finds */
    int quant_block_size;         /* elements per ZeRO++ quantization block */
    char trace_path[ZT_PATH_MAX]; /* "" = no trace */
    int device_index;             /* cuda: -1 = the caller's current device */
    int numa_node;                /* host buffers' and threads' node; -1 = the GPU's, if known */
    int gradient_landing_buffers; /* async releases whose copies may be pending */
    int overlap_step; /* zt_overlap_mode: each layer updated when the next step first needs it */
    int64_t pinned_limit;       /* bytes of host memory that may be pinned */
    int device_optimizer;       /* zt_device_optimizer_mode */
    int grad_accum_bf16;        /* gradient accumulators in bf16 (else fp32) */
    int comm_dtype;             /* communication_data_type: zt_comm_data_type */
    int fp32_allreduce;         /* DeepSpeed's fp32_allreduce: as comm_dtype fp32 */
    int checkpoint_keep;        /* committed checkpoints kept per root folder */
    int checkpoint_reuse_files; /* a save overwrites the last removed checkpoint's files */
    int log_level;              /* -1 = unset */
    int log_effective_settings; /* commit prints the settings training runs with (bool) */
    int64_t hidden_size;        /* for "auto" sizes; 0 = from the registered model */
    /* Keys given as "auto" with no value since, whose default changes training
     * (ZT_AUTO_WARNED: reported at commit, zt_config_auto_report) or that come from the
     * model (ZT_AUTO_MODEL: zt_config_resolve_model_autos): indices into zt_config_keys. */
    int auto_keys[ZT_CONFIG_MAX_AUTO];
    int n_auto_keys;
} zt_config;

/* Upper bound of byte counts and of keys without one. */
#define ZT_CONFIG_NO_MAX 9.2e18

/* ztier.device_optimizer: where the optimizer runs when its state is not offloaded. */
typedef enum zt_device_optimizer_mode {
    ZT_DEVOPT_AUTO = 0, /* on the device with the cuda backend, on the CPU with the host one */
    ZT_DEVOPT_ON = 1,
    ZT_DEVOPT_OFF = 2
} zt_device_optimizer_mode;

/* ztier.overlap_step: whether zt_step leaves the layers' CPU updates to the calls that next
 * need them (runtime/step.c). */
typedef enum zt_overlap_mode {
    ZT_OVERLAP_AUTO = 0, /* on for the state on NVMe, off for the state in host memory */
    ZT_OVERLAP_ON = 1,
    ZT_OVERLAP_OFF = 2
} zt_overlap_mode;

/* communication_data_type: the dtype gradients are summed over ranks in. */
typedef enum zt_comm_data_type {
    ZT_COMM_DATA_AUTO = 0, /* the parameters': 16-bit gradients cross the links in 16 bits */
    ZT_COMM_DATA_F32 = 1,  /* 16-bit gradients widened first: the sums exact in fp32 */
    ZT_COMM_DATA_BF16 = 2, /* = auto, with bf16.enabled (checked) */
    ZT_COMM_DATA_F16 = 3   /* = auto, with fp16.enabled (checked) */
} zt_comm_data_type;

/* The dtype gradients released in `grads` are summed over ranks in: fp32 when the
 * configuration asks for it (communication_data_type "fp32", fp32_allreduce), else their own. */
zt_dtype zt_config_reduce_dtype(const zt_config *cfg, zt_dtype grads);

void zt_config_defaults(zt_config *cfg);

/* 1 when the optimizer state, the gradient accumulators and Adam live in device memory:
 * offload_optimizer.device is "none" and ztier.device_optimizer is on (or auto with the
 * cuda backend). */
int zt_config_device_optimizer(const zt_config *cfg);

/* The working dtype of parameters and gradients the configuration asks for. */
zt_dtype zt_config_dtype(const zt_config *cfg);

/* The device memory budget to give the device backend: ztier.hbm_capacity; unset, 8 GiB on
 * the host backend (its stand-in "HBM"), 0 on cuda, whose backend then takes the GPU's free
 * memory less a reserve for the caller's own allocations (device/cuda.c). */
uint64_t zt_config_device_budget(const zt_config *cfg);

/* Parses a byte count: "1048576", "512K", "2G", "1.5GiB", "4GB" (K/M/G/T are powers of
 * 1024). Returns 0 and sets *out, or -1 (leaving *out alone) when s is not such a count. */
int zt_config_parse_bytes(const char *s, int64_t *out);

#endif

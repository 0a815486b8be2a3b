/* SPDX-License-Identifier: MIT */
/* The configuration's defaults and byte-count parsing (parsing the JSON: config_parse.c). */
#include "runtime/config.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void zt_config_defaults(zt_config *c)
{
    memset(c, 0, sizeof *c);
    c->stage = 3;
    zt_offload_config off = {0};
    off.device = ZT_TIER_DEVICE;
    off.pin_memory = 1;
    off.buffer_count = 4;
    off.buffer_size = 100000000;
    off.max_in_cpu = 1000000000;
    off.ratio = 1.0f;
    c->offload_param = off;
    c->offload_optimizer = off;
    c->act_offload = off;
    c->act_prefetch_layers = 1;
    c->stage3_prefetch_bucket_size = 50000000;
    c->stage3_max_live_parameters = 1000000000;
    c->stage3_max_reuse_distance = 1000000000;
    c->stage3_param_persistence_threshold = 100000;
    c->reduce_bucket_size = 5000000; /* DeepSpeed: 5e8 (docs/configuration.md, "ZeRO stages") */
    c->allgather_bucket_size = 500000000;
    c->sub_group_size = 1000000000;
    c->overlap_comm = c->contiguous_gradients = 1;
    c->zero_hpz_partition_size = 1;
    c->aio_block_size = 1 << 20;
    c->aio_queue_depth = 32;
    c->aio_intra_op_parallelism = 1;
    c->aio_overlap_events = 1;
    c->optimizer_type = c->optimizer = ZT_OPT_ADAMW;
    c->adam_w_mode = 1;
    c->lr = 1e-3f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->weight_decay = 0.01f;
    c->fp16_initial_scale_power = 16;
    c->fp16_loss_scale_window = 1000;
    c->fp16_hysteresis = 2;
    c->fp16_min_loss_scale = 1.0f;
    c->gradient_accumulation_steps = 1;
    zt_lr_schedule_defaults(&c->sched);
    c->log_effective_settings = 1;
    strcpy(c->device_backend, "host");
    strcpy(c->comm_backend, "auto");
    c->hbm_capacity = 0; /* unset: zt_config_device_budget */
    strcpy(c->adam_variant, "auto");
    c->log_level = -1;
    c->quant_block_size = 256;
    c->checkpoint_keep = 2;
    c->device_index = -1;
    c->numa_node = -1;
    c->gradient_landing_buffers = 4;
    /* half of the machine's memory: pinned pages cannot be swapped or moved */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    c->pinned_limit = pages > 0 && page > 0 ? (int64_t)pages * page / 2 : (int64_t)1 << 30;
}

int zt_config_device_optimizer(const zt_config *cfg)
{
    if (cfg->offload_optimizer.device != ZT_TIER_DEVICE)
        return 0;
    return cfg->device_optimizer == ZT_DEVOPT_ON ||
           (cfg->device_optimizer == ZT_DEVOPT_AUTO && !strcmp(cfg->device_backend, "cuda"));
}

int zt_config_parse_bytes(const char *s, int64_t *out)
{
    static const char units[] = "KMGT";
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || errno || !isfinite(v) || v < 0)
        return -1;
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    if (u) {
        v = ldexp(v, 10 * (int)(u - units + 1));
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v != floor(v) || v >= ZT_CONFIG_NO_MAX)
        return -1;
    *out = (int64_t)v;
    return 0;
}

uint64_t zt_config_device_budget(const zt_config *cfg)
{
    if (cfg->hbm_capacity > 0)
        return (uint64_t)cfg->hbm_capacity;
    return strcmp(cfg->device_backend, "host") == 0 ? (uint64_t)8 << 30 : 0;
}

zt_dtype zt_config_dtype(const zt_config *cfg)
{
    return cfg->bf16 ? ZT_BF16 : cfg->fp16 ? ZT_F16 : ZT_F32;
}

zt_dtype zt_config_reduce_dtype(const zt_config *cfg, zt_dtype grads)
{
    return cfg->comm_dtype == ZT_COMM_DATA_F32 || cfg->fp32_allreduce ? ZT_F32 : grads;
}

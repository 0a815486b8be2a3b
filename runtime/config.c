/* SPDX-License-Identifier: MIT */
/* The configuration's defaults and byte-count parsing (parsing the JSON: config_parse.c). */
#include "runtime/config.h"
#include "runtime/config_keys.h"
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
    c->offload_param = off;
    c->offload_optimizer = off;
    c->stage3_prefetch_bucket_size = 50000000;
    c->stage3_max_live_parameters = 1000000000;
    c->stage3_max_reuse_distance = 1000000000;
    c->stage3_param_persistence_threshold = 100000;
    c->reduce_bucket_size = 500000000;
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

#define SCHED_PARAMS "scheduler.params."

void zt_config_note_given(zt_config *cfg, const char *path)
{
    int i = strncmp(path, SCHED_PARAMS, strlen(SCHED_PARAMS)) == 0
                ? zt_lr_schedule_param(path + strlen(SCHED_PARAMS))
                : -1;
    if (i >= 0)
        cfg->sched_given |= 1u << i;
}

/* 1 while the key at this offset was given as "auto" and got no value since. */
static int still_auto(const zt_config *cfg, size_t offset)
{
    for (int i = 0; i < cfg->n_auto_keys; i++)
        if (zt_config_keys[cfg->auto_keys[i]].offset == offset)
            return 1;
    return 0;
}

void zt_config_resolve_schedule(zt_config *cfg)
{
    if (still_auto(cfg, offsetof(zt_config, sched.warmup_max_lr)))
        cfg->sched.warmup_max_lr = cfg->lr;
}

static int given(const zt_config *cfg, const char *name)
{
    return (cfg->sched_given >> zt_lr_schedule_param(name)) & 1u;
}

/* A required parameter that is missing: the key, what it is for, and how to give it. */
static zt_status required(zt_error *err, const char *type, const char *name, int was_auto)
{
    return ZT_ERR(err, ZT_ERR_CONFIG,
                  "scheduler.params.%s is %s: %s needs it (it has no default in DeepSpeed "
                  "either); give it in the config, or with zt_config_set(rt, "
                  "\"scheduler.params.%s\", \"<value>\") before zt_runtime_commit",
                  name, was_auto ? "\"auto\" with no value given since" : "not set", type, name);
}

zt_status zt_config_check_schedule(const zt_config *cfg, zt_error *err)
{
    const zt_lr_schedule *s = &cfg->sched;
    const char *type = zt_lr_schedule_name(s->type);
    char list[512];
    if (s->type == ZT_LR_CONSTANT) {
        if (cfg->sched_given)
            ZT_LOGW("config",
                    "scheduler.params are given but scheduler.type is not: no schedule is "
                    "applied (as in DeepSpeed), the lr is optimizer.params.lr; set "
                    "scheduler.type to apply them");
        return ZT_OK;
    }
    for (int i = 0; i < ZT_LR_PARAMS; i++)
        if ((cfg->sched_given >> i & 1u) && !zt_lr_schedule_takes(s->type, i)) {
            zt_lr_schedule_param_list(s->type, list, sizeof list);
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "scheduler.params.%s: %s takes no such parameter (DeepSpeed refuses "
                          "it too); it takes %s: remove the key or change scheduler.type",
                          zt_lr_schedule_param_name(i), type, list);
        }
    if (s->type == ZT_LR_ONE_CYCLE) {
        if (!given(cfg, "cycle_min_lr"))
            return required(err, type, "cycle_min_lr", 0);
        if (!given(cfg, "cycle_max_lr"))
            return required(err, type, "cycle_max_lr", 0);
        if (s->cycle_momentum && cfg->beta2 != 0.99f)
            ZT_LOGW("config",
                    "scheduler OneCycle with cycle_momentum cycles Adam's beta1 and sets beta2 "
                    "to 0.99, as DeepSpeed does: optimizer.params.betas[1] = %g is not used; set "
                    "scheduler.params.cycle_momentum to false to keep the configured betas",
                    (double)cfg->beta2);
        return ZT_OK;
    }
    if (s->type == ZT_LR_WARMUP)
        return ZT_OK;
    if (s->total_num_steps == 0)
        return required(err, type, "total_num_steps",
                        still_auto(cfg, offsetof(zt_config, sched.total_num_steps)));
    int64_t warmup = s->warmup_num_steps > 2 ? s->warmup_num_steps : 2;
    if (s->type == ZT_LR_WARMUP_COSINE && s->total_num_steps == warmup)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "scheduler.params.total_num_steps = %lld equals warmup_num_steps (taken as "
                      "at least 2): WarmupCosineLR's cosine would span 0 steps (DeepSpeed divides "
                      "by zero); make total_num_steps larger",
                      (long long)s->total_num_steps);
    if (s->total_num_steps < warmup)
        ZT_LOGW("config",
                "scheduler.params.total_num_steps = %lld is less than warmup_num_steps = %lld "
                "(%s, as DeepSpeed warns)",
                (long long)s->total_num_steps, (long long)warmup, type);
    return ZT_OK;
}

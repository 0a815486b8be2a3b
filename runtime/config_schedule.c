/* SPDX-License-Identifier: MIT */
/* The scheduler section's given parameters, derived "auto" values and commit-time rules. */
#include "runtime/config_schedule.h"
#include "runtime/config_keys.h"
#include "runtime/config_auto.h"
#include "core/log.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SCHED_PARAMS "scheduler.params."

void zt_config_note_given(zt_config *cfg, const char *path)
{
    int i = strncmp(path, SCHED_PARAMS, strlen(SCHED_PARAMS)) == 0
                ? zt_lr_schedule_param(path + strlen(SCHED_PARAMS))
                : -1;
    if (i >= 0)
        cfg->sched_given |= 1u << i;
    if (strcmp(path, "gradient_accumulation_steps") == 0)
        cfg->accumulation_given = 1;
}

static int given(const zt_config *cfg, const char *name)
{
    return (cfg->sched_given >> zt_lr_schedule_param(name)) & 1u;
}

/* warmup_max_lr: "auto" with no value since is the optimizer's lr, as the HF Trainer fills
 * it; not given, DeepSpeed's default, which is the optimizer's lr for WarmupLR and 0.001
 * for WarmupDecayLR (their constructors' defaults). */
void zt_config_resolve_schedule(zt_config *cfg)
{
    if (zt_config_still_auto(cfg, offsetof(zt_config, sched.warmup_max_lr)))
        cfg->sched.warmup_max_lr = cfg->lr;
    else if (!given(cfg, "warmup_max_lr"))
        cfg->sched.warmup_max_lr = cfg->sched.type == ZT_LR_WARMUP ? cfg->lr : 0.001f;
}

/* A required parameter that is missing: the key, what it is for, and how to give it. */
static zt_status required(zt_error *err, const char *type, const char *name, int was_auto)
{
    return ZT_ERR(err, ZT_ERR_CONFIG,
                  "scheduler.params.%s %s: %s needs it (it has no default in DeepSpeed "
                  "either); give it in the config, or with zt_config_set(rt, "
                  "\"scheduler.params.%s\", \"<value>\") before zt_runtime_commit",
                  name,
                  was_auto ? "was given as \"auto\" and got no value after that" : "is not set",
                  type, name);
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
                        zt_config_still_auto(cfg, offsetof(zt_config, sched.total_num_steps)));
    int64_t warmup = s->warmup_num_steps > 2 ? s->warmup_num_steps : 2;
    if (s->total_num_steps < warmup)
        ZT_LOGW("config",
                "scheduler.params.total_num_steps = %lld is less than warmup_num_steps = %lld "
                "(%s, as DeepSpeed warns)",
                (long long)s->total_num_steps, (long long)warmup, type);
    return ZT_OK;
}

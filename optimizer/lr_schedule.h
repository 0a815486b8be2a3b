/* SPDX-License-Identifier: MIT */
/* DeepSpeed's learning-rate schedules (the config's "scheduler" section), as pure functions of
 * the optimizer steps taken: WarmupLR, WarmupDecayLR, WarmupCosineLR and OneCycle with the
 * parameter names, defaults and formulas of deepspeed/runtime/lr_schedules.py, OneCycle's
 * stairs and momentum cycling of Adam's betas included. tests/unit/test_lr_schedule.c holds
 * them to tables DeepSpeed's own classes computed (tests/deepspeed/gen_tables.py).
 *
 * The step count: DeepSpeed builds the scheduler with last_batch_iteration -1, which sets the
 * lr of the first step, and advances it after every applied optimizer step (not after one
 * skipped for an fp16 overflow). The step after `done` applied steps therefore runs with
 * last_batch_iteration = done - 1; every function below takes `done`. Nothing here allocates
 * or keeps pointers. */
#ifndef ZT_OPTIMIZER_LR_SCHEDULE_H
#define ZT_OPTIMIZER_LR_SCHEDULE_H

#include <stdint.h>

/* The order of DeepSpeed's names in zt_lr_schedule_name (and the config table's enum). */
typedef enum zt_lr_schedule_kind {
    ZT_LR_CONSTANT = -1, /* no scheduler: the optimizer's lr */
    ZT_LR_WARMUP = 0,
    ZT_LR_WARMUP_DECAY = 1,
    ZT_LR_WARMUP_COSINE = 2,
    ZT_LR_ONE_CYCLE = 3,
    ZT_LR_KINDS
} zt_lr_schedule_kind;

typedef enum zt_warmup_type { ZT_WARMUP_LOG = 0, ZT_WARMUP_LINEAR = 1 } zt_warmup_type;

/* scheduler.type and scheduler.params (the fields' types are those of the config table). */
typedef struct zt_lr_schedule {
    int type;                              /* zt_lr_schedule_kind */
    float warmup_min_lr, warmup_max_lr;    /* WarmupLR, WarmupDecayLR */
    int64_t warmup_num_steps;              /* >= 1; taken as at least 2, as DeepSpeed does */
    int warmup_type;                       /* zt_warmup_type */
    int64_t total_num_steps;               /* WarmupDecayLR, WarmupCosineLR; 0: not given */
    float warmup_min_ratio, cos_min_ratio; /* WarmupCosineLR: of the optimizer's lr */
    float cycle_min_lr, cycle_max_lr, decay_lr_rate; /* OneCycle */
    int64_t cycle_first_step_size;                   /* >= 1 */
    int64_t cycle_second_step_size;                  /* -1 (not given, null): = first */
    /* the lr and momentum move in that many stairs over each half; 0: continuously;
     * second -1 (not given, null): = first, as DeepSpeed's None */
    int64_t cycle_first_stair_count, cycle_second_stair_count;
    int64_t decay_step_size; /* 0: no decay */
    int cycle_momentum;      /* bool */
    float cycle_min_mom, cycle_max_mom, decay_mom_rate;
} zt_lr_schedule;

/* DeepSpeed's defaults; type ZT_LR_CONSTANT. (WarmupLR's warmup_max_lr, when not given, is
 * the optimizer's lr: the config sets it, zt_config_resolve_schedule.) */
void zt_lr_schedule_defaults(zt_lr_schedule *s);

/* "WarmupLR", ..., "OneCycle"; "" for ZT_LR_CONSTANT or anything else. */
const char *zt_lr_schedule_name(int type);

/* The lr of the step after `done` applied optimizer steps; base_lr is the optimizer's lr
 * (WarmupCosineLR's ratios multiply it; ZT_LR_CONSTANT returns it). */
double zt_lr_schedule_lr(const zt_lr_schedule *s, int64_t done, double base_lr);

/* OneCycle with cycle_momentum: Adam's betas of the same step, DeepSpeed's (momentum, 0.99),
 * into *beta1 and *beta2, and returns 1; every other schedule returns 0 and leaves them. */
int zt_lr_schedule_betas(const zt_lr_schedule *s, int64_t done, double *beta1, double *beta2);

/* The scheduler.params names: ZT_LR_PARAMS of them, index i is bit i of a given-mask. */
#define ZT_LR_PARAMS 19
/* Index of a parameter name ("warmup_num_steps"), -1 when DeepSpeed has none such. */
int zt_lr_schedule_param(const char *name);
const char *zt_lr_schedule_param_name(int index);
/* 1 when DeepSpeed's schedule `type` takes the parameter. */
int zt_lr_schedule_takes(int type, int index);
/* The names `type` takes, comma-separated, into buf. */
void zt_lr_schedule_param_list(int type, char *buf, unsigned len);

#endif

/* SPDX-License-Identifier: MIT */
/* The config's "scheduler" section beyond its keys: which parameters were given, "auto"
 * values derived from others, and the rules checked at commit. */
#ifndef ZT_RUNTIME_CONFIG_SCHEDULE_H
#define ZT_RUNTIME_CONFIG_SCHEDULE_H

#include "runtime/config.h"

/* Notes that a key was given (whatever its value, "auto" too): the scheduler's parameters. */
void zt_config_note_given(zt_config *cfg, const char *path);

/* Derived values: scheduler.params.warmup_max_lr given as "auto" (and no value since) is the
 * optimizer's lr, as the HF Trainer fills it. Run after every change of the keys. */
void zt_config_resolve_schedule(zt_config *cfg);

/* The scheduler's rules, checked at commit: a parameter its type does not take, a required
 * one missing (total_num_steps, also when still "auto"; OneCycle's cycle_min_lr and
 * cycle_max_lr) or a cosine span of zero steps is ZT_ERR_CONFIG naming the key and the fix;
 * what DeepSpeed also warns about, parameters without a type and OneCycle's beta2 of 0.99
 * are warned at the default level. */
zt_status zt_config_check_schedule(const zt_config *cfg, zt_error *err);

#endif

/* SPDX-License-Identifier: MIT */
/* DeepSpeed's batch rules: train_batch_size, train_micro_batch_size_per_gpu and
 * gradient_accumulation_steps, any of them left out, derived from the others and checked
 * against each other for the run's data-parallel ranks (DeepSpeedConfig's
 * _set_batch_related_parameters and _batch_assertion; tests/config/test_batch_rules.c holds
 * them to a table DeepSpeed's code computed). */
#ifndef ZT_RUNTIME_CONFIG_BATCH_H
#define ZT_RUNTIME_CONFIG_BATCH_H

#include "runtime/config.h"

typedef struct zt_batch_sizes {
    int train_batch;  /* samples per optimizer step over all ranks; 0: none given */
    int micro_batch;  /* samples per micro-step on each rank; 0: none given */
    int accumulation; /* micro-steps per optimizer step */
} zt_batch_sizes;

/* The three for `world` ranks, as DeepSpeed derives them (floor divisions included). Neither
 * batch size given: the accumulation as given (or 1) and batch sizes 0 (ztier needs none;
 * DeepSpeed would refuse the config). A combination DeepSpeed refuses (a value below 1, or
 * train_batch != micro x accumulation x world) is ZT_ERR_CONFIG naming the three numbers and
 * which were derived. Touches nothing else. */
zt_status zt_config_batch_sizes(const zt_config *cfg, int world, zt_batch_sizes *out,
                                zt_error *err);

/* zt_config_batch_sizes, then the derived accumulation into cfg (a gradient_accumulation_steps
 * left "auto" is resolved by it and leaves the report of "auto" defaults). At commit. */
zt_status zt_config_apply_batch(zt_config *cfg, int world, zt_error *err);

#endif

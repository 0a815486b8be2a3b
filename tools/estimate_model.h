/* SPDX-License-Identifier: MIT */
/* The model arguments of `ztier estimate`, shared with `ztier plan`: the options, the model
 * registered as a run registers it, and one micro-step's fetches and releases. */
#ifndef ZT_TOOLS_ESTIMATE_MODEL_H
#define ZT_TOOLS_ESTIMATE_MODEL_H

#include "runtime/estimate.h"

#include <stddef.h>

typedef struct est_options {
    const char *config, *layers, *ds_config, *device_memory;
    int vocab, world, ranks_per_node, json;
    int stage;      /* --stage, or -1: the configuration's */
    int batch, seq; /* --batch, --seq: the activations too (0: not given) */
} est_options;

/* A registered model and one micro-step's calls. */
typedef struct est_model {
    zt_runtime *rt;
    zt_est_event *events;
    int n_events;
    int64_t params;
    char name[128];
} est_model;

/* Reads the model arguments (the caller checked the argument names); -1: not a valid set. */
int est_parse(int argc, char **argv, est_options *o);
/* Registers the model with the parameters and optimizer state at pdev, odev (NULL: the
 * configuration's). */
int est_build(est_model *m, const est_options *o, const char *pdev, const char *odev, char *err,
              size_t len);
/* est_build, then the replay of EST_STEPS steps under `budget` (0: the configuration's). */
int est_estimate(const est_options *o, const char *pdev, const char *odev, uint64_t budget,
                 est_model *m, zt_estimate *e, char *err, size_t len);
void est_free_model(est_model *m);
/* This machine's MemAvailable (/proc/meminfo) in bytes; 0 when unknown. */
uint64_t est_mem_available(void);

#endif

/* SPDX-License-Identifier: MIT */
/* The activation memory of `ztier estimate --config ... --batch B --seq T`: for each GPT-2
 * activation checkpointing policy, the bytes the trainer's model allocates (its own count,
 * the allocation it makes), what ztier's activation store keeps off the device and holds on
 * it, the device total with the parameters' peak, and the largest batch at that sequence
 * within the device budget. */
#ifndef ZT_TOOLS_ESTIMATE_ACTS_H
#define ZT_TOOLS_ESTIMATE_ACTS_H

#include "gpt2_model.h"

#include <jansson.h>
#include <stdint.h>

typedef struct est_acts_in {
    gpt2_config c;
    int rows, seq;        /* the batch per rank and the sequence */
    int prefetch_layers;  /* activation_checkpointing.prefetch_layers */
    uint64_t params_peak; /* the parameters' device peak (the schedule's) */
    uint64_t budget;      /* device budget */
    int att_keep;         /* gpt2_att_keep of the trainer's ops: GPT2_ATT_LSE on a GPU */
} est_acts_in;

void est_acts_print(const est_acts_in *in);
json_t *est_acts_json(const est_acts_in *in);

#endif

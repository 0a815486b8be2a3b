/* SPDX-License-Identifier: MIT */
/* The activation memory of `ztier estimate --config ... --batch B --seq T`: for each GPT-2
 * activation checkpointing policy, the bytes the trainer's model allocates (its own count, with
 * activations in bf16 on a GPU at --precision bf16 and fp32 otherwise,
 * the allocation it makes), what ztier's activation store keeps off the device and holds on
 * it, the device total with the parameters' peak (and with bf16.enabled the GPU trainer's
 * fp32 scratch for the bf16 layers, gpt2_bf16_scratch_bytes_on), the largest batch at that
 * sequence within the device budget, and whether the batch fits and with which policy. */
#ifndef ZT_TOOLS_ESTIMATE_ACTS_H
#define ZT_TOOLS_ESTIMATE_ACTS_H

#include "gpt2_model.h"

#include <jansson.h>
#include <stdint.h>

typedef struct est_acts_in {
    gpt2_config c;
    int rows, seq;         /* the batch per rank and the sequence */
    int prefetch_layers;   /* activation_checkpointing.prefetch_layers */
    uint64_t params_peak;  /* the parameters' device peak (the schedule's) */
    uint64_t budget;       /* device budget */
    uint64_t bf16_scratch; /* bf16.enabled: the trainer's fp32 copies of the bf16 layers (0: off) */
    const char *placement; /* where the configuration puts the parameters, for the verdict */
    int att_keep;          /* gpt2_att_keep of the trainer's ops: GPT2_ATT_LSE on a GPU */
    int act_bytes;         /* the trainer's ops' act_bytes: 2 on a GPU in bf16, else 4 */
    int fused_dgelu;       /* the trainer's ops fuse fcproj's backward with GELU's: on a GPU */
} est_acts_in;

void est_acts_print(const est_acts_in *in);
json_t *est_acts_json(const est_acts_in *in);

#endif

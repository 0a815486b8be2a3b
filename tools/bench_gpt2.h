/* SPDX-License-Identifier: MIT */
/* `ztier bench gpt2 --backend cuda` (bench_gpt2_cuda.c, built with CUDA). */
#ifndef ZT_TOOLS_BENCH_GPT2_H
#define ZT_TOOLS_BENCH_GPT2_H

#include "dataloader.h"
#include "gpt2_model.h"

/* overlap: ztier.overlap_step of the offloaded run ("auto", "on" or "off"); hbm: its
 * ztier.hbm_capacity (e.g. "8G"), or NULL for all free device memory; precision: a
 * gpt2_precision (the matmuls'). */
int bench_gpt2_cuda(const gpt2_config *c, const char *name, int B, int T, int steps,
                    const char *offload, const char *overlap, const char *hbm, int precision,
                    int stage, const token_data *d, int json);

#endif

/* SPDX-License-Identifier: MIT */
/* `ztier bench gpt2 --backend cuda` (bench_gpt2_cuda.c, built with CUDA), and the timed step
 * the GPT-2 benchmarks share. */
#ifndef ZT_TOOLS_BENCH_GPT2_H
#define ZT_TOOLS_BENCH_GPT2_H

#include "dataloader.h"
#include "gpt2_model.h"
#include "gpt2_ztier.h"

#include <stdint.h>

/* One training step of model over g's runtime (forward, backward, zt_step) on batch `step`
 * of d (in, tg: B * T ints of scratch): its seconds, or -1 after a message naming `cmd`. */
double bench_gpt2_step(const char *cmd, gpt2_ztier *g, gpt2_model *model, const token_data *d,
                       int64_t step, int B, int T, int *in, int *tg);

/* overlap: ztier.overlap_step of the offloaded run ("auto", "on" or "off"); hbm: its
 * ztier.hbm_capacity (e.g. "8G"), or NULL for all free device memory; precision: a
 * gpt2_precision (the matmuls'). */
int bench_gpt2_cuda(const gpt2_config *c, const char *name, int B, int T, int steps,
                    const char *offload, const char *overlap, const char *hbm, int precision,
                    int stage, const token_data *d, int json);

#endif

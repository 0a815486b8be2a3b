/* `ztier bench gpt2 --backend cuda` (bench_gpt2_cuda.c, built with CUDA). */
#ifndef ZT_TOOLS_BENCH_GPT2_H
#define ZT_TOOLS_BENCH_GPT2_H

#include "dataloader.h"
#include "gpt2_model.h"

/* overlap: ztier.overlap_step of the offloaded run ("auto", "on" or "off"). */
int bench_gpt2_cuda(const gpt2_config *c, const char *name, int B, int T, int steps,
                    const char *offload, const char *overlap, const token_data *d, int json);

#endif

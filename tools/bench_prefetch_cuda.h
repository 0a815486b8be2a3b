/* `ztier bench prefetch --backend cuda` (bench_prefetch_cuda.c, built with CUDA). */
#ifndef ZT_TOOLS_BENCH_PREFETCH_CUDA_H
#define ZT_TOOLS_BENCH_PREFETCH_CUDA_H

int bench_prefetch_cuda(int layers, int hidden, int batch, int steps, const char *offload,
                        const char *nvme, int json);

#endif

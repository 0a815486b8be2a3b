/* SPDX-License-Identifier: MIT */
/* Races between a kernel's CUDA threads for ThreadSanitizer to report (the TSan build, which
 * stands in for compute-sanitizer's racecheck): on global memory (race_global), which the
 * stand-in's own checks do not see, and on __shared__ memory without its barrier
 * (block_sum_no_barrier), which they also name. tsan_expect.sh runs this and requires a
 * ThreadSanitizer report naming each kernel. */
#include "cudasim.h"
#include "sim_kernels.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void)
{
    cudasim_set_abort_on_finding(0);
    float *y = NULL, *x = NULL, *out = NULL;
    if (cudaMalloc((void **)&y, 65 * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&x, 256 * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&out, sizeof(float)) != cudaSuccess ||
        cudaMemset(x, 0, 256 * sizeof(float)) != cudaSuccess)
        return 1;
    int rc = sim_race_global(y, NULL) | sim_block_sum_no_barrier(x, out, 1, NULL);
    cudaDeviceSynchronize();
    cudaFree(y), cudaFree(x), cudaFree(out);
    printf("launched: %d\n", rc);
    return rc;
}

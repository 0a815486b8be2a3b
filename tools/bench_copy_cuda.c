/* SPDX-License-Identifier: MIT */
/* The physical limit for `ztier bench copy --backend cuda`: one pinned copy straight through
 * the CUDA runtime (cudaMemcpyAsync on a fresh non-blocking stream, then a synchronize),
 * bypassing ztier's backend. */
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <time.h>

double bench_cuda_raw_copy(void *dev_ptr, void *host_ptr, size_t bytes, int h2d);

double bench_cuda_raw_copy(void *dev_ptr, void *host_ptr, size_t bytes, int h2d)
{
    static cudaStream_t s;
    if (!s && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return -1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    cudaError_t r = h2d ? cudaMemcpyAsync(dev_ptr, host_ptr, bytes, cudaMemcpyHostToDevice, s)
                        : cudaMemcpyAsync(host_ptr, dev_ptr, bytes, cudaMemcpyDeviceToHost, s);
    if (r == cudaSuccess)
        r = cudaStreamSynchronize(s);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (r != cudaSuccess)
        return -1;
    double t = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    return (double)bytes / t / 1e9;
}

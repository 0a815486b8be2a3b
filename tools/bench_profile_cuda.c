/* SPDX-License-Identifier: MIT */
/* The CUDA ops `ztier bench profile` times the model's compute on (bench_profile.h). */
#include "tools/bench_profile.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

int profile_cuda_open(profile_cuda *c, int device)
{
    char why[256] = "";
    cudaStream_t s = NULL;
    memset(c, 0, sizeof *c);
    cudaError_t e = device >= 0 ? cudaSetDevice(device) : cudaSuccess;
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return fprintf(stderr, PROFILE_CMD ": a CUDA stream: %s\n", cudaGetErrorString(e)), -1;
    c->stream = s;
    if (gpt2_ops_cuda_create(&c->ops, s, device, GPT2_BF16, why, sizeof why) != 0)
        return fprintf(stderr, PROFILE_CMD ": the CUDA ops: %s\n", why), -1;
    return 0;
}

void profile_cuda_sync(void *stream) { cudaStreamSynchronize((cudaStream_t)stream); }

void profile_cuda_close(profile_cuda *c)
{
    if (c->ops.ctx)
        gpt2_ops_cuda_destroy(&c->ops);
    if (c->stream)
        cudaStreamDestroy((cudaStream_t)c->stream);
    memset(c, 0, sizeof *c);
}

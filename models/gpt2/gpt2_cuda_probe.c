/* SPDX-License-Identifier: MIT */
/* Whether a GPU is usable and its bf16 peak (gpt2_ops.h): the CUDA runtime only, no cuBLAS, so
 * that a program asking (zt_gpt2 --device auto, `ztier bench profile`) loads cuBLAS only once
 * it creates the CUDA ops (gpt2_cuda_load.c). */
#include "gpt2_ops.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

double gpt2_cuda_bf16_peak(char *name, size_t len)
{
    struct cudaDeviceProp p;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess)
        return 0;
    snprintf(name, len, "%s", p.name);
    if (strstr(p.name, "H100") || strstr(p.name, "H200"))
        return strstr(p.name, "PCIe") ? 756e12 : 989e12;
    if (strstr(p.name, "A100"))
        return 312e12;
    return 0;
}

/* Whether anything of a GPU is on this machine: a device node (/dev/nvidia<N>, or WSL's
 * /dev/dxg) or the driver's library. */
static int gpu_traces(void)
{
    glob_t g;
    int nodes = glob("/dev/nvidia[0-9]*", 0, NULL, &g) == 0;
    if (nodes)
        globfree(&g);
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver)
        dlclose(driver);
    return nodes || driver || access("/dev/dxg", F_OK) == 0;
}

int gpt2_cuda_usable(char *name, size_t name_len, char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n < 1)
        e = cudaErrorNoDevice;
    struct cudaDeviceProp prop;
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&prop, 0);
    /* No device, or "driver insufficient" where there is no driver and no GPU at all: the
     * runtime's text would send a person looking for a driver update. */
    if (e == cudaErrorNoDevice || (e == cudaErrorInsufficientDriver && !gpu_traces())) {
        snprintf(why, len, "no GPU found");
        return 0;
    }
    if (e != cudaSuccess) {
        snprintf(why, len, "no usable GPU: %s", cudaGetErrorString(e));
        return 0;
    }
    snprintf(name, name_len, "%s", prop.name);
    return 1;
}

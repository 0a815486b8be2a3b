/* SPDX-License-Identifier: MIT */
/* The program's side of libztier-gpt2-cuda.so (gpt2_cuda_module.h): opens it on first use and
 * forwards gpt2_ops_cuda_create/destroy (gpt2_ops.h) and the cuBLAS SGEMM to it. */
#include "gpt2_cuda_module.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODULE_FILE "libztier-gpt2-cuda.so"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const gpt2_cuda_module *module;
static char failure[1536];

/* Opens path and checks its table; 0, or -1 with what went wrong appended to failure. */
static int try_open(const char *path)
{
    if (access(path, F_OK) != 0)
        return -1;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    size_t used = strlen(failure);
    if (!h) {
        snprintf(failure + used, sizeof failure - used, "; %s", dlerror());
        return -1;
    }
    const gpt2_cuda_module *(*entry)(void) =
        (const gpt2_cuda_module *(*)(void))dlsym(h, "ztier_gpt2_cuda_module_v1");
    const gpt2_cuda_module *m = entry ? entry() : NULL;
    if (!m || m->abi != GPT2_CUDA_MODULE_ABI) {
        snprintf(failure + used, sizeof failure - used,
                 "; %s is from another build of ztier (table %u, this program's %u): rebuild "
                 "them together",
                 path, m ? m->abi : 0u, GPT2_CUDA_MODULE_ABI);
        dlclose(h);
        return -1;
    }
    module = m; /* kept open for the process's life */
    return 0;
}

static void open_module(void)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    const char *env = getenv("ZT_GPT2_CUDA_MODULE");
    snprintf(failure, sizeof failure, "cannot open " MODULE_FILE " (the GPT-2 CUDA ops)");
    if (env && *env) {
        if (try_open(env) != 0 && access(env, F_OK) != 0)
            snprintf(failure + strlen(failure), sizeof failure - strlen(failure),
                     "; ZT_GPT2_CUDA_MODULE=%s: no such file", env);
        return;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(path, sizeof path, "%s/" MODULE_FILE, exe); /* beside the program */
        if (try_open(path) == 0)
            return;
        snprintf(path, sizeof path, "%s/%s/" MODULE_FILE, exe, GPT2_CUDA_INSTALL_REL);
        if (try_open(path) == 0)
            return;
    }
    if (try_open(GPT2_CUDA_BUILD_PATH) == 0) /* where this build wrote it */
        return;
    snprintf(failure + strlen(failure), sizeof failure - strlen(failure),
             "; looked beside the program, in %s/ from it and at %s: set ZT_GPT2_CUDA_MODULE "
             "to its path",
             GPT2_CUDA_INSTALL_REL, GPT2_CUDA_BUILD_PATH);
}

const gpt2_cuda_module *gpt2_cuda_module_get(char *why, size_t len)
{
    pthread_once(&once, open_module);
    if (!module && why)
        snprintf(why, len, "%s", failure);
    return module;
}

int gpt2_ops_cuda_create(gpt2_ops *out, void *stream, int device, gpt2_precision p, char *why,
                         size_t len)
{
    const gpt2_cuda_module *m = gpt2_cuda_module_get(why, len);
    return m ? m->ops_create(out, stream, device, p, why, len) : -1;
}

void gpt2_ops_cuda_destroy(gpt2_ops *ops)
{
    const gpt2_cuda_module *m = gpt2_cuda_module_get(NULL, 0);
    if (m)
        m->ops_destroy(ops);
}

void *gpt2_cuda_blas_create(void *stream, char *why, size_t len)
{
    const gpt2_cuda_module *m = gpt2_cuda_module_get(why, len);
    void *h = m ? m->blas_create(stream) : NULL;
    if (m && !h)
        snprintf(why, len, "cublasCreate or cublasSetStream failed");
    return h;
}

int gpt2_cuda_blas_sgemm(void *blas, int ta, int tb, int m, int n, int k, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, float *C,
                         int ldc)
{
    return module->blas_sgemm(blas, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gpt2_cuda_blas_destroy(void *blas)
{
    if (blas && module)
        module->blas_destroy(blas);
}

/* SPDX-License-Identifier: MIT */
/* zt_module_get for libztier.so: each backend that needs the CUDA runtime, NCCL or MPI is a
 * module, libztier-<name>.so, opened with dlopen the first time it is asked for
 * (core/module.h). It is looked for next to libztier.so first (the directory of the file this
 * code was loaded from, through dladdr: a build tree, or any install prefix, works without
 * LD_LIBRARY_PATH), then by name on the loader's path (LD_LIBRARY_PATH, the ld.so cache, the
 * system directories). A module stays loaded until the process exits (RTLD_NODELETE): it may
 * hold exit handlers (the mpi module finalises MPI at exit) and threads. */
#include "core/log.h"
#include "core/module.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The CUDA runtime the cuda and nccl modules were linked with (CMake passes the build's). */
#ifndef ZT_CUDART_SONAME
#define ZT_CUDART_SONAME "libcudart.so"
#endif
#ifndef ZT_CUDART_PACKAGE
#define ZT_CUDART_PACKAGE "cuda-cudart"
#endif
#define CUDART_NEEDS                                                                           \
    "the CUDA runtime, " ZT_CUDART_SONAME " (NVIDIA's " ZT_CUDART_PACKAGE " package from the " \
    "CUDA repository for Debian, or a CUDA toolkit's lib64 directory on LD_LIBRARY_PATH)"

/* The modules libztier.so knows, with what each needs beyond libztier.so, for the message
 * when it cannot be loaded. */
static const struct known {
    const char *name;
    const char *file;
    const char *needs;
} known[] = {
    {"cuda", ZT_MODULE_FILE("cuda"), CUDART_NEEDS},
    {"nccl", ZT_MODULE_FILE("nccl"),
     "NCCL, libnccl.so.2 (NVIDIA's libnccl2 package from the CUDA repository for Debian), "
     "and " CUDART_NEEDS},
    {"mpi", ZT_MODULE_FILE("mpi"), "Open MPI, libmpi.so.40 (Debian package libopenmpi3)"},
};
#define N_KNOWN (sizeof known / sizeof known[0])

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const zt_module *g_loaded[N_KNOWN];

/* The directory libztier.so was loaded from ("" when unknown). */
static void own_dir(char *dir, size_t cap)
{
    Dl_info info;
    dir[0] = 0;
    if (!dladdr((void *)&zt_module_get, &info) || !info.dli_fname)
        return;
    const char *slash = strrchr(info.dli_fname, '/');
    if (slash)
        snprintf(dir, cap, "%.*s", (int)(slash - info.dli_fname), info.dli_fname);
}

/* Records the error; NULL for the caller to return. */
#define LOAD_FAIL(...) (ZT_ERR(err, ZT_ERR_UNSUPPORTED, __VA_ARGS__), (const zt_module *)NULL)

static const zt_module *load(const struct known *k, zt_error *err)
{
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
    char dir[PATH_MAX], path[PATH_MAX + 64];
    own_dir(dir, sizeof dir);
    void *h = NULL;
    if (dir[0]) {
        snprintf(path, sizeof path, "%s/%s", dir, k->file);
        if (access(path, F_OK) == 0) {
            h = dlopen(path, flags);
            if (!h) /* there, but it or a library it needs does not load */
                return LOAD_FAIL("cannot load %s, the %s backend's module: %s. It needs %s: "
                                 "install it, or put its directory on LD_LIBRARY_PATH",
                                 path, k->name, dlerror(), k->needs);
        }
    }
    if (!h) {
        snprintf(path, sizeof path, "%s", k->file);
        h = dlopen(k->file, flags);
        if (!h)
            return LOAD_FAIL("%s, the %s backend's module, was not found next to libztier.so "
                             "(%s) nor on the loader's path (%s): install it beside libztier.so "
                             "(`cmake --install` does, with the library); it needs %s",
                             k->file, k->name, dir[0] ? dir : "directory unknown", dlerror(),
                             k->needs);
    }
    char sym[64];
    snprintf(sym, sizeof sym, "ztier_%s_module_v1", k->name);
    const zt_module *(*entry)(void) = (const zt_module *(*)(void))dlsym(h, sym);
    const zt_module *m = entry ? entry() : NULL;
    if (!m)
        return LOAD_FAIL("%s has no entry point %s: it is not a ztier %s module, or one of "
                         "another ztier version; install the one built with this libztier.so",
                         path, sym, k->name);
    if (m->abi != ZT_MODULE_ABI || !m->name || strcmp(m->name, k->name) != 0)
        return LOAD_FAIL("%s was built for module ABI %u (backend '%s'), this libztier.so has "
                         "ABI %u (backend '%s'): install the module built with this libztier.so",
                         path, (unsigned)m->abi, m->name ? m->name : "?", (unsigned)ZT_MODULE_ABI,
                         k->name);
    Dl_info info;
    ZT_LOGI("module", "the %s backend from %s", k->name,
            dladdr((void *)entry, &info) && info.dli_fname ? info.dli_fname : path);
    return m;
}

const zt_module *zt_module_get(const char *name, zt_error *err)
{
    for (size_t i = 0; i < N_KNOWN; i++) {
        if (strcmp(known[i].name, name) != 0)
            continue;
        pthread_mutex_lock(&g_lock);
        if (!g_loaded[i]) /* a failure is not remembered: the next call tries again */
            g_loaded[i] = load(&known[i], err);
        const zt_module *m = g_loaded[i];
        pthread_mutex_unlock(&g_lock);
        return m;
    }
    ZT_ERR(err, ZT_ERR_UNSUPPORTED, "no backend module is called '%s' (known: cuda, mpi, nccl)",
           name);
    return NULL;
}

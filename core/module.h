/* SPDX-License-Identifier: MIT */
/* Backends that need libraries a CPU-only program should not load: the cuda device backend
 * (the CUDA runtime), the nccl comm backend (NCCL, the CUDA runtime) and the mpi comm backend
 * (Open MPI). In libztier.so each is a module, libztier-<name>.so, opened with dlopen the first
 * time the configuration selects it (module_load.c); libztier.so itself needs none of those
 * libraries. libztier.a and the tests' archive link them in instead (module_builtin.c). Either
 * way zt_module_get gives the backend's description, with the same table behind it.
 *
 * A module calls back into libztier.so for the few internals marked ZT_MODULE_API (errors,
 * logging, the trace, the device budget, dtype helpers): exported so that a module shares the
 * process's log sink and trace, not part of the public API, no compatibility promise beyond
 * ZT_MODULE_ABI. */
#ifndef ZT_CORE_MODULE_H
#define ZT_CORE_MODULE_H

#include "core/error.h"
#include "core/export.h"

#include <stdint.h>

/* The layout of zt_module and of the tables behind it (device.h's zt_device_iface and
 * zt_device, comm.h's zt_comm_backend, zt_comm_iface and zt_comm) and the ZT_MODULE_API
 * functions' signatures. Bumped on any change to them: libztier.so refuses a module built with
 * another value, since it would call through a table of another shape. */
#define ZT_MODULE_ABI 3

typedef struct zt_module {
    uint32_t abi;      /* ZT_MODULE_ABI of the headers the module was compiled with */
    const char *name;  /* "cuda", "mpi", "nccl" */
    const void *iface; /* cuda: const zt_device_iface *; mpi, nccl: const zt_comm_backend * */
} zt_module;

/* Each module's one entry point, ztier_<name>_module_v1: returns its description (static
 * storage). The _v1 is the entry point's own convention (a function of no arguments returning
 * a zt_module pointer); the table's shape is checked through zt_module.abi. */
ZT_MODULE_API const zt_module *ztier_cuda_module_v1(void);
ZT_MODULE_API const zt_module *ztier_mpi_module_v1(void);
ZT_MODULE_API const zt_module *ztier_nccl_module_v1(void);

/* The backend `name` ("cuda", "mpi", "nccl"), loading its module on first use (thread-safe;
 * a module stays loaded until the process exits). NULL with ZT_ERR_UNSUPPORTED when the
 * module, or a library it needs, cannot be loaded: the message names the module, where it was
 * looked for, the library it needs with the package that provides it, and the loader's own
 * words. Callers check first that the build has the backend (ZT_HAVE_CUDA, ...). */
const zt_module *zt_module_get(const char *name, zt_error *err);

/* The file name of a backend's module, "libztier-<name>.so". */
#define ZT_MODULE_FILE(name) "libztier-" name ".so"

#endif

/* SPDX-License-Identifier: MIT */
/* zt_module_get for libztier.a and the tests' archive: the backends this build has are linked
 * in, so nothing is loaded at run time (core/module.h). */
#include "core/module.h"

#include <string.h>

const zt_module *zt_module_get(const char *name, zt_error *err)
{
    const zt_module *m = NULL;
#ifdef ZT_HAVE_CUDA
    if (strcmp(name, "cuda") == 0)
        m = ztier_cuda_module_v1();
#endif
#ifdef ZT_HAVE_MPI
    if (strcmp(name, "mpi") == 0)
        m = ztier_mpi_module_v1();
#endif
#ifdef ZT_HAVE_NCCL
    if (strcmp(name, "nccl") == 0)
        m = ztier_nccl_module_v1();
#endif
    if (!m)
        ZT_ERR(err, ZT_ERR_UNSUPPORTED, "backend '%s' is not linked into this build", name);
    return m;
}

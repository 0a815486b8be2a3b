/* SPDX-License-Identifier: MIT */
/* `ztier info`: version, what this build contains, and what this machine offers. */
#include "optimizer/adam.h"
#include "tools/commands.h"

#include "ztier.h"

#include <stdio.h>
#include <unistd.h>

int cmd_info(int argc, char **argv)
{
    (void)argv;
    if (argc > 0) {
        fprintf(stderr, "usage: ztier info\n");
        return 2;
    }
    printf("ztier %s\n", zt_version_string());
    printf("device backends: host%s\n",
#ifdef ZT_HAVE_CUDA
           ", cuda"
#else
           ""
#endif
    );
    printf("comm backends:   single%s%s\n",
#ifdef ZT_HAVE_MPI
           ", mpi",
#else
           "",
#endif
#ifdef ZT_HAVE_NCCL
           ", nccl"
#else
           ""
#endif
    );
    printf("cpu:             %ld cores online; avx2=%d fma=%d avx512f=%d avx512bf16=%d\n",
           sysconf(_SC_NPROCESSORS_ONLN), __builtin_cpu_supports("avx2"),
           __builtin_cpu_supports("fma"), __builtin_cpu_supports("avx512f"),
           __builtin_cpu_supports("avx512bf16"));
    printf("adam variant:    %s (best for this CPU)\n",
           zt_adam_variant_name(zt_adam_variant_best()));
    return 0;
}

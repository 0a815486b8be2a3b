/* SPDX-License-Identifier: MIT */
/* With every rank on this machine, ztier names Open MPI's pml (ob1) before MPI_Init instead of
 * letting it start UCX and libfabric to choose (comm/mpi.c, prefer_local_pml), and leaves the
 * choice alone where the user made one: argv[1] "default" expects OMPI_MCA_pml=ob1 after the
 * runtime is created, "user" sets OMPI_MCA_pml=^cm first and expects it kept, "auto" sets
 * ZT_MPI_PML=auto and expects OMPI_MCA_pml unset. Each then sums its rank over the job, so
 * MPI works with the choice. */
#include "comm/comm.h"

#include "ztier.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (zt_launcher_world_size() < 2 || argc < 2) {
        fprintf(stderr, "run under mpirun with 2 ranks: test_mpi_local_pml default|user|auto\n");
        return 77;
    }
    const char *mode = argv[1];
    const char *want = strcmp(mode, "default") == 0 ? "ob1"
                       : strcmp(mode, "user") == 0  ? "^cm"
                                                    : NULL;
    if (strcmp(mode, "user") == 0)
        setenv("OMPI_MCA_pml", "^cm", 1);
    if (strcmp(mode, "auto") == 0)
        setenv("ZT_MPI_PML", "auto", 1);
    zt_runtime *rt = NULL;
    if (zt_runtime_create(NULL, "{}", &rt) != ZT_OK) {
        printf("FAILED: create: %s\n", zt_last_error(rt));
        return 1;
    }
    int initialized = 0, rank = -1, size = 0, sum = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    const char *pml = getenv("OMPI_MCA_pml");
    int ok = initialized && sum == size * (size - 1) / 2 &&
             (want ? pml && strcmp(pml, want) == 0 : pml == NULL);
    printf("rank %d (%s): OMPI_MCA_pml=%s, expected %s, sum of ranks %d: %s\n", rank, mode,
           pml ? pml : "(unset)", want ? want : "(unset)", sum, ok ? "ok" : "FAILED");
    zt_runtime_destroy(rt);
    return ok ? 0 : 1;
}

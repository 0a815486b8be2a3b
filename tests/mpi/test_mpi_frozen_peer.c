/* SPDX-License-Identifier: MIT */
/* A rank that freezes (SIGSTOP) in the middle of training must not keep the others alive:
 * every other rank gets ZT_ERR_COMM from a ztier call once $ZT_COMM_TIMEOUT has passed,
 * destroys its runtime, cannot create another one (ZT_ERR_COMM at once rather than a hang)
 * and returns an error from main, and its process really exits (ztier's exit handler must
 * not block in MPI_Finalize on the frozen peer). Run by frozen_peer.sh, which checks every
 * rank's exit status, bounds and times the whole job and cleans up:
 *   test_mpi_frozen_peer <frozen_rank> <micro|step> [zeropp]
 * "micro" freezes before a micro-step (the others block in the backward pass's gradient
 * reduction), "step" between the micro-step and zt_step (the others block in zt_step).
 * "zeropp" trains with quantized gradients and hpZ on nodes of 2 ranks, so the runtime also
 * has intra- and inter-node communicators (split from the world one) to get stuck in and
 * to destroy.
 * Exit status: 2 = the expected ZT_ERR_COMM everywhere, 1 = anything else. */
#include "ref_mlp.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STEPS 8
#define FREEZE_STEP 3
/* ZeRO++ on nodes of 2 ranks: the runtime splits intra- and inter-node communicators */
#define ZEROPP_ZERO ", \"zero_quantized_gradients\": true, \"zero_hpz_partition_size\": 2"
#define ZEROPP_ZTIER ", \"ranks_per_node\": 2"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int report(zt_runtime *rt, int rank, const char *what, zt_status st)
{
    int expected = st == ZT_ERR_COMM;
    printf("rank %d: %s -> %s at %.3f: %s [%s]\n", rank, what,
           expected ? "ZT_ERR_COMM" : zt_status_string(st), now_s(), zt_last_error(rt),
           expected ? "as expected" : "WRONG");
    fflush(stdout);
    return expected;
}

static int fail(zt_runtime *rt, int rank, const char *what, zt_status st)
{
    int ok = report(rt, rank, what, st);
    zt_runtime_destroy(rt);
    zt_runtime *again = NULL;
    st = zt_runtime_create(NULL, NULL, &again);
    ok = report(again, rank, "creating another runtime", st) && ok;
    zt_runtime_destroy(again);
    return ok ? 2 : 1;
}

static void freeze(int rank, int step, const char *where)
{
    printf("rank %d: freezing before %s of step %d at %.3f\n", rank, where, step, now_s());
    fflush(stdout);
    raise(SIGSTOP);
}

/* Trains until a ztier call fails, with rank `frozen` stopping itself at FREEZE_STEP. */
static int train(zt_runtime *rt, const minimal_model *m, int frozen, const char *where)
{
    int rank = 0, world = 1;
    zt_runtime_rank(rt, &rank, &world);
    int rows = m->d.batch / world;
    for (int s = 0; s < STEPS; s++) {
        float loss;
        zt_status st;
        if (rank == frozen && s == FREEZE_STEP && !strcmp(where, "micro"))
            freeze(rank, s, "the micro-step");
        if ((st = minimal_micro_step(rt, m, s, rank * rows, rows, &loss)) != ZT_OK)
            return fail(rt, rank, "micro-step", st);
        if (rank == frozen && s == FREEZE_STEP && !strcmp(where, "step"))
            freeze(rank, s, "zt_step");
        if ((st = zt_step(rt, NULL, NULL)) != ZT_OK)
            return fail(rt, rank, "zt_step", st);
    }
    printf("rank %d: trained %d steps although rank %d froze [WRONG]\n", rank, STEPS, frozen);
    zt_runtime_destroy(rt);
    return 1;
}

int main(int argc, char **argv)
{
    int zeropp = argc == 4 && !strcmp(argv[3], "zeropp");
    if ((argc != 3 && !zeropp) || (strcmp(argv[2], "micro") && strcmp(argv[2], "step"))) {
        fprintf(stderr, "usage: test_mpi_frozen_peer <frozen_rank> <micro|step> [zeropp]\n");
        return 1;
    }
    int frozen = atoi(argv[1]);
    const mlp_dims dims = {16, 48, 4, 48};
    const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};
    const char *cfg =
        ref_mlp_config(&hp, "cpu", "cpu", 1, zeropp ? ZEROPP_ZERO : "", zeropp ? ZEROPP_ZTIER : "");
    zt_runtime *rt = NULL;
    minimal_model m;
    int rank = 0, world = 1;
    if (zt_runtime_create(NULL, cfg, &rt) != ZT_OK || minimal_register(rt, &dims, 42, &m) ||
        zt_runtime_commit(rt) != ZT_OK || zt_runtime_rank(rt, &rank, &world) != ZT_OK) {
        fprintf(stderr, "setup: %s\n", zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    if (world < 2 || dims.batch % world || frozen < 0 || frozen >= world) {
        fprintf(stderr, "needs 2+ ranks dividing %d and a frozen rank among them\n", dims.batch);
        zt_runtime_destroy(rt);
        return 77;
    }
    printf("rank %d: pid %d\n", rank, (int)getpid());
    fflush(stdout);
    return train(rt, &m, frozen, argv[2]);
}

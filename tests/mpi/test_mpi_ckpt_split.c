/* SPDX-License-Identifier: MIT */
/* A network split during a checkpoint save, as the ranks see it: rank 0 commits the save,
 * then stalls (the ZT_TEST_DELAY_AT hook, tests' archive only) for longer than ranks 2 and 3
 * wait for a collective, but not rank 1. So rank 1 hears rank 0's word and ranks 2 and 3 do
 * not. Each must report what it knows: rank 0 and rank 1 that the save was committed
 * (ZT_OK), ranks 2 and 3 that they cannot know (ZT_ERR_COMM with a message saying so and
 * naming the `latest` file), never that it failed. Then `latest` names the new checkpoint
 * first and the previous one after it, and a fresh runtime on every rank loads it to the
 * values every rank read just before the save. 4 ranks. */
#include "comm/comm.h"
#include "ref_mlp.h"
#include "runtime/runtime.h"
#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHORT_TIMEOUT "3" /* ranks 2, 3: a collective may take 3 s */
#define STALL "6"         /* rank 0 after committing, before it tells the others */

static const mlp_dims dims = {16, 32, 4, 16};

static zt_status make_runtime(zt_runtime **rt, minimal_model *m)
{
    const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};
    zt_status st = zt_runtime_create(NULL, ref_mlp_config(&hp, "cpu", "cpu", 1, "", ""), rt);
    if (st == ZT_OK)
        st = minimal_register(*rt, &dims, 7, m);
    return st == ZT_OK ? zt_runtime_commit(*rt) : st;
}

static zt_status train_step(zt_runtime *rt, const minimal_model *m, int step)
{
    int rank = 0, world = 1;
    zt_runtime_rank(rt, &rank, &world);
    int rows = dims.batch / world;
    float loss;
    zt_status st = minimal_micro_step(rt, m, step, rank * rows, rows, &loss);
    return st == ZT_OK ? zt_step(rt, NULL, NULL) : st;
}

/* Every parameter's fp32 values, one after the other (collective). */
static float *read_params(zt_runtime *rt, const minimal_model *m, size_t *n)
{
    size_t total = 0;
    for (int l = 0; l < MLP_LAYERS; l++)
        total += (size_t)m->n_in[l] * m->n_out[l] + (size_t)m->n_out[l];
    float *all = malloc(total * sizeof *all), *p = all;
    for (int l = 0; all && l < MLP_LAYERS; l++) {
        int64_t w = (int64_t)m->n_in[l] * m->n_out[l], b = m->n_out[l];
        if (zt_param_read(rt, m->weight[l], p, w) != ZT_OK ||
            zt_param_read(rt, m->bias[l], p + w, b) != ZT_OK) {
            free(all);
            return NULL;
        }
        p += w + b;
    }
    *n = total;
    return all;
}

static int check(int rank, const char *what, int ok, const char *detail)
{
    printf("rank %d: %s: %s [%s]\n", rank, what, detail, ok ? "as expected" : "WRONG");
    fflush(stdout);
    return ok;
}

/* The first two lines of root/latest. */
static int read_latest(const char *root, char *first, char *second, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/latest", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(first, (int)len, f) && fgets(second, (int)len, f);
    fclose(f);
    first[strcspn(first, "\n")] = second[strcspn(second, "\n")] = 0;
    return ok;
}

int main(void)
{
    if (zt_launcher_world_size() != 4) {
        fprintf(stderr, "run under mpirun with 4 ranks\n");
        return 77;
    }
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    int rank = r ? atoi(r) : 0;
    setenv("ZT_COMM_TIMEOUT", rank >= 2 ? SHORT_TIMEOUT : "60", 1);
    zt_runtime *rt = NULL;
    minimal_model m;
    char root[512] = "";
    if (rank == 0)
        scratch_make("ckpt-split", root, sizeof root);
    zt_status st = make_runtime(&rt, &m);
    if (st == ZT_OK)
        st = zt_comm_broadcast_sync(rt->dist.comm, root, sizeof root, ZT_COMM_U8, 0, &rt->err);
    for (int s = 0; st == ZT_OK && s < 2; s++) { /* saves step 1, then step 2 below */
        st = train_step(rt, &m, s);
        if (st == ZT_OK && s == 0)
            st = zt_checkpoint_save(rt, root);
    }
    size_t n = 0;
    float *saved = st == ZT_OK ? read_params(rt, &m, &n) : NULL;
    if (!saved) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }

    /* the save whose last word reaches ranks 0 and 1 only */
    if (rank == 0)
        setenv("ZT_TEST_DELAY_AT", "checkpoint verdict", 1), setenv("ZT_TEST_DELAY_S", STALL, 1);
    st = zt_checkpoint_save(rt, root);
    unsetenv("ZT_TEST_DELAY_AT");
    const char *msg = zt_last_error(rt);
    int ok;
    if (rank < 2) {
        ok = check(rank, "save", st == ZT_OK, st == ZT_OK ? "committed" : msg);
    } else {
        ok = check(rank, "save",
                   st == ZT_ERR_COMM && strstr(msg, "cannot know whether") &&
                       strstr(msg, "/latest") && strstr(msg, "step-00000002") &&
                       !strstr(msg, "failed on"),
                   msg);
    }

    /* Ranks 2 and 3 gave up on rank 0's word, which arrives once its stall ends: it must have
     * arrived before they destroy the runtime (else MPI stays unusable in this process). */
    char mark[600];
    snprintf(mark, sizeof mark, "%s/rank0-spoke", root);
    if (rank == 0) {
        FILE *f = fopen(mark, "w");
        ok = f && fclose(f) == 0 && ok;
    } else if (rank >= 2) {
        struct stat sb;
        for (int i = 0; i < 600 && stat(mark, &sb) != 0; i++)
            usleep(50000);
        sleep(1);
    }
    zt_runtime_destroy(rt);

    char first[128] = "", second[128] = "";
    int listed = read_latest(root, first, second, sizeof first);
    char detail[300];
    snprintf(detail, sizeof detail, "'%s', then '%s'", first, second);
    ok = check(rank, "latest",
               listed && !strcmp(first, "step-00000002") && !strcmp(second, "step-00000001"),
               detail) &&
         ok;

    /* every rank loads it: the values read before the save */
    rt = NULL;
    st = make_runtime(&rt, &m);
    if (st == ZT_OK)
        st = zt_checkpoint_load(rt, root);
    size_t n2 = 0;
    float *loaded = st == ZT_OK ? read_params(rt, &m, &n2) : NULL;
    int same =
        loaded && n2 == n && !memcmp(loaded, saved, n * sizeof *saved) && rt->train.steps == 2;
    ok = check(rank, "load", same, st == ZT_OK ? "step 2's parameters" : zt_last_error(rt)) && ok;
    free(saved), free(loaded);
    zt_runtime_destroy(rt);
    if (rank == 0 && ok)
        scratch_remove(root);
    return ok ? 0 : 1;
}

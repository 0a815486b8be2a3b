/* SPDX-License-Identifier: MIT */
/* Checkpoints across world sizes and stages (run under mpirun; reshard.sh drives it):
 *   test_mpi_reshard save DIR <param_device> <optimizer_device> <stage>
 * trains the minimal MLP K steps on this run's ranks, saves a checkpoint into DIR, writes the
 * parameters' fp32 master, Adam m and v (zt_param_read_state) to DIR.at-save.{0,1,2}, trains K
 * more steps and writes DIR.final;
 *   test_mpi_reshard load DIR <param_device> <optimizer_device> <stage>
 * loads DIR on this run's ranks (any number, any stage and placement): master, m and v must be
 * bitwise DIR.at-save's; it trains the same K steps on the same global batch and must end within
 * 1e-5 relative L2 of DIR.final (the sum over ranks adds in another order on another world
 * size; within the master, m and v restored bitwise, only that order differs);
 *   test_mpi_reshard resume DIR <param_device> <optimizer_device> <stage>
 * the same after zt_runtime_expect_load (commit initialises nothing: the load puts the pieces
 * straight into host homes, no image);
 *   test_mpi_reshard refuse DIR <param_device> <optimizer_device> <stage>
 * loads DIR, whose files reshard.sh damaged: the load must fail and change nothing (master, m,
 * v and the step count as before it). An optional last argument sets the hidden width (the
 * save's and the load's must agree); with it, a load also checks the bytes the ranks read
 * (zt_ckpt_reader_bytes, summed): at least the checkpoint's files (each checked whole)
 * and at most 1.1 times them (no byte read twice, but for whole blocks around the pieces). */
#include "mlp_weights.h"
#include "comm/comm.h"
#include "ref_mlp.h"
#include "runtime/checkpoint_dir.h"
#include "runtime/checkpoint_reader.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

enum { K = 4 };

static mlp_dims dims = {16, 48, 4, 48}; /* the batch splits over 1, 2, 3 and 4 ranks */
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

static int train(zt_runtime *rt, const minimal_model *m, int64_t from, int rank, int world)
{
    int rows = dims.batch / world;
    for (int64_t s = from; s < from + K; s++) {
        float loss;
        if (minimal_micro_step(rt, m, s, rank * rows, rows, &loss) != ZT_OK ||
            zt_step(rt, NULL, NULL) != ZT_OK)
            return -1;
    }
    return 0;
}

/* The weights to a file, or back from one into w's arrays (0, or -1). */
static int weights_file(const char *path, mlp_weights *w, int write)
{
    FILE *f = fopen(path, write ? "wb" : "rb");
    int ok = f != NULL;
    for (int i = 0; ok && i < 2 * MLP_LAYERS; i++)
        ok = (write ? fwrite(w->w[i], sizeof(float), (size_t)w->n[i], f)
                    : fread(w->w[i], sizeof(float), (size_t)w->n[i], f)) == (size_t)w->n[i];
    return (f ? fclose(f) : 0) == 0 && ok ? 0 : -1;
}

/* ||a - b|| / ||b|| over every weight. */
static double rel_l2(const mlp_weights *a, const mlp_weights *b)
{
    double d = 0, r = 0;
    for (int i = 0; i < 2 * MLP_LAYERS; i++)
        for (int64_t j = 0; j < a->n[i]; j++) {
            double x = a->w[i][j], y = b->w[i][j];
            d += (x - y) * (x - y), r += y * y;
        }
    return sqrt(d / (r > 0 ? r : 1));
}

/* The bytes of the checkpoint's rank files (in the folder dir's `latest` names). */
static uint64_t checkpoint_bytes(const char *dir)
{
    char folder[1200];
    zt_error err = {0};
    if (zt_ckpt_resolve(dir, folder, sizeof folder, &err) != ZT_OK)
        return 0;
    uint64_t n = 0;
    DIR *d = opendir(folder);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[1600];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        if (!strncmp(e->d_name, "rank-", 5) && stat(path, &sb) == 0)
            n += (uint64_t)sb.st_size;
    }
    if (d)
        closedir(d);
    return n;
}

/* The ranks' bytes read by the load against the checkpoint's files (see the top). */
static int check_bytes_read(zt_runtime *rt, const char *dir, uint64_t before, int rank)
{
    int64_t read = (int64_t)(zt_ckpt_reader_bytes() - before);
    if (zt_comm_allreduce_sync(rt->dist.comm, &read, 1, ZT_COMM_I64, ZT_REDUCE_SUM, &rt->err) !=
        ZT_OK)
        return 0;
    uint64_t files = checkpoint_bytes(dir);
    int ok = files > 0 && (uint64_t)read >= files && (double)read <= 1.1 * (double)files;
    if (rank == 0)
        printf("the ranks read %lld bytes of %llu in the checkpoint's files%s\n", (long long)read,
               (unsigned long long)files, ok ? "" : ": FAILED (each byte once)");
    return ok;
}

/* A refused load changes nothing: master, m and v as before it, the step count 0. */
static int refused(zt_runtime *rt, const minimal_model *m, const char *dir, int rank)
{
    mlp_weights before[3], after;
    memset(before, 0, sizeof before), memset(&after, 0, sizeof after);
    int ok = 1;
    for (int state = 0; ok && state < 3; state++)
        ok = mlp_weights_read_state(rt, m, (zt_param_state)state, &before[state]) == ZT_OK;
    zt_status st = ok ? zt_checkpoint_load(rt, dir) : ZT_OK;
    if (ok && st == ZT_OK)
        printf("rank %d: FAILED: the damaged checkpoint loaded\n", rank), ok = 0;
    else if (ok)
        printf("rank %d: refused: %s\n", rank, zt_last_error(rt));
    int64_t steps = -1;
    ok = ok && zt_step_count(rt, &steps) == ZT_OK && steps == 0;
    for (int state = 0; ok && state < 3; state++) {
        ok = mlp_weights_read_state(rt, m, (zt_param_state)state, &after) == ZT_OK &&
             mlp_weights_max_rel_diff(&after, &before[state]) == 0;
        mlp_weights_free(&after);
        if (!ok)
            printf("rank %d: FAILED: the refused load changed the state\n", rank);
    }
    for (int state = 0; state < 3; state++)
        mlp_weights_free(&before[state]);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 6 || argc > 7 ||
        (strcmp(argv[1], "save") && strcmp(argv[1], "load") && strcmp(argv[1], "resume") &&
         strcmp(argv[1], "refuse"))) {
        fprintf(stderr,
                "usage: %s save|load|resume|refuse DIR param_device optimizer_device stage "
                "[hidden]\n",
                argv[0]);
        return 2;
    }
    if (argc == 7)
        dims.hidden = atoi(argv[6]);
    int save = !strcmp(argv[1], "save"), stage = atoi(argv[5]);
    const char *dir = argv[2];
    char swap[600];
    snprintf(swap, sizeof swap, "%s.swap-%d", dir, (int)getpid()); /* each rank its own */
    mkdir(swap, 0755);
    setenv("ZT_NVME_PATH", swap, 1);
    zt_runtime *rt = NULL;
    minimal_model m;
    int rank = 0, world = 1;
    int ok =
        zt_runtime_create(NULL, ref_mlp_config(&hp, argv[3], argv[4], 1, "", ""), &rt) == ZT_OK &&
        zt_config_set_int(rt, "zero_optimization.stage", stage) == ZT_OK &&
        minimal_register(rt, &dims, 42, &m) == ZT_OK &&
        (strcmp(argv[1], "resume") || zt_runtime_expect_load(rt) == ZT_OK) &&
        zt_runtime_commit(rt) == ZT_OK;
    zt_runtime_rank(rt, &rank, &world);
    int64_t from = 0;
    mlp_weights x = {0}, want = {0}; /* this run's, the saving run's */
    char path[700];
    if (ok && !strcmp(argv[1], "refuse")) {
        ok = refused(rt, &m, dir, rank);
        zt_runtime_destroy(rt);
        rmdir(swap);
        return ok ? 0 : 1;
    }
    uint64_t read_before = zt_ckpt_reader_bytes();
    ok = ok && (save ? train(rt, &m, 0, rank, world) == 0 && zt_checkpoint_save(rt, dir) == ZT_OK
                     : zt_checkpoint_load(rt, dir) == ZT_OK && zt_step_count(rt, &from) == ZT_OK &&
                           (argc < 7 || check_bytes_read(rt, dir, read_before, rank)));
    static const char *names[] = {"fp32 master", "Adam m", "Adam v"};
    for (int state = 0; ok && state < 3; state++) {
        snprintf(path, sizeof path, "%s.at-save.%d", dir, state);
        ok = mlp_weights_read_state(rt, &m, (zt_param_state)state, &x) == ZT_OK;
        if (ok && save)
            ok = rank || weights_file(path, &x, 1) == 0;
        /* want: sized by a second read, then overwritten from the file */
        else if (ok)
            ok = mlp_weights_read_state(rt, &m, (zt_param_state)state, &want) == ZT_OK &&
                 weights_file(path, &want, 0) == 0;
        if (ok && !save && mlp_weights_max_rel_diff(&x, &want) != 0) {
            printf("rank %d of %d: the loaded %s differs from the saved one\n", rank, world,
                   names[state]);
            ok = 0;
        }
        mlp_weights_free(&x), mlp_weights_free(&want);
    }
    if (ok && !save)
        printf("rank %d of %d, stage %d, %s/%s: step %lld loaded, fp32 master, Adam m and v "
               "bitwise the saved ones\n",
               rank, world, stage, argv[3], argv[4], (long long)from);
    ok = ok && train(rt, &m, save ? K : from, rank, world) == 0 &&
         mlp_weights_read(rt, &m, &x) == ZT_OK;
    snprintf(path, sizeof path, "%s.final", dir);
    if (ok && save) {
        ok = rank || weights_file(path, &x, 1) == 0;
    } else if (ok) { /* want: sized by a read, then overwritten from the file */
        ok = mlp_weights_read(rt, &m, &want) == ZT_OK && weights_file(path, &want, 0) == 0;
        double err = ok ? rel_l2(&x, &want) : 1;
        printf("rank %d of %d: after %d more steps %.3g relative L2 from the uninterrupted run\n",
               rank, world, K, err);
        ok = ok && err <= 1e-5;
    }
    if (!ok)
        printf("rank %d of %d: FAILED: %s\n", rank, world, zt_last_error(rt));
    mlp_weights_free(&x), mlp_weights_free(&want);
    zt_runtime_destroy(rt);
    rmdir(swap);
    return ok ? 0 : 1;
}

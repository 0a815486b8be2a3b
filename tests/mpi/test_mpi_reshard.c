/* SPDX-License-Identifier: MIT */
/* Checkpoints across world sizes and stages (run under mpirun; reshard.sh drives it):
 *   test_mpi_reshard save DIR <param_device> <optimizer_device> <stage>
 * trains the minimal MLP K steps on this run's ranks, saves a checkpoint into DIR, writes the
 * parameters (zt_param_read) to DIR.at-save, trains K more steps and writes DIR.final;
 *   test_mpi_reshard load DIR <param_device> <optimizer_device> <stage>
 * loads DIR on this run's ranks (any number, any stage and placement): the parameters must be
 * bitwise DIR.at-save; it trains the same K steps on the same global batch and must end within
 * 1e-5 relative L2 of DIR.final (the sum over ranks adds in another order on another world
 * size; within the master, m and v restored bitwise, only that order differs). */
#include "ref_mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { K = 4 };

static const mlp_dims dims = {16, 48, 4, 48}; /* the batch splits over 1, 2, 3 and 4 ranks */
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

/* Every parameter, concatenated (collective). NULL on failure. */
static float *read_params(zt_runtime *rt, const minimal_model *m, int64_t *n)
{
    float *all = malloc(sizeof(float) * 8192);
    *n = 0;
    for (int l = 0; all && l < MLP_LAYERS; l++)
        for (int k = 0; k < 2; k++) {
            int64_t len = k ? m->n_out[l] : (int64_t)m->n_in[l] * m->n_out[l];
            if (zt_param_read(rt, k ? m->bias[l] : m->weight[l], all + *n, len) != ZT_OK)
                return free(all), NULL;
            *n += len;
        }
    return all;
}

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

static int write_file(const char *path, const float *x, int64_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(x, sizeof(float), (size_t)n, f) == (size_t)n;
    return (f ? fclose(f) : 0) == 0 && ok ? 0 : -1;
}

static float *read_file(const char *path, int64_t n)
{
    float *x = malloc(sizeof(float) * (size_t)n);
    FILE *f = fopen(path, "rb");
    int ok = x && f && fread(x, sizeof(float), (size_t)n, f) == (size_t)n;
    if (f)
        fclose(f);
    return ok ? x : (free(x), NULL);
}

static double rel_l2(const float *a, const float *b, int64_t n)
{
    double d = 0, r = 0;
    for (int64_t i = 0; i < n; i++)
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
    return sqrt(d / (r > 0 ? r : 1));
}

int main(int argc, char **argv)
{
    if (argc != 6 || (strcmp(argv[1], "save") && strcmp(argv[1], "load"))) {
        fprintf(stderr, "usage: %s save|load DIR param_device optimizer_device stage\n", argv[0]);
        return 2;
    }
    int save = !strcmp(argv[1], "save"), stage = atoi(argv[5]);
    const char *dir = argv[2];
    char swap[600], path[700];
    snprintf(swap, sizeof swap, "%s.swap-%d", dir, (int)getpid()); /* each rank its own */
    mkdir(swap, 0755);
    setenv("ZT_NVME_PATH", swap, 1);
    zt_runtime *rt = NULL;
    minimal_model m;
    int rank = 0, world = 1;
    int ok =
        zt_runtime_create(NULL, ref_mlp_config(&hp, argv[3], argv[4], 1, "", ""), &rt) == ZT_OK &&
        zt_config_set_int(rt, "zero_optimization.stage", stage) == ZT_OK &&
        minimal_register(rt, &dims, 42, &m) == ZT_OK && zt_runtime_commit(rt) == ZT_OK;
    zt_runtime_rank(rt, &rank, &world);
    int64_t n = 0, from = 0;
    float *x = NULL, *want = NULL;
    if (ok && save) {
        ok = train(rt, &m, 0, rank, world) == 0 && zt_checkpoint_save(rt, dir) == ZT_OK &&
             (x = read_params(rt, &m, &n)) != NULL;
        snprintf(path, sizeof path, "%s.at-save", dir);
        ok = ok && (rank || write_file(path, x, n) == 0);
        free(x), x = NULL;
    } else if (ok) {
        ok = zt_checkpoint_load(rt, dir) == ZT_OK && zt_step_count(rt, &from) == ZT_OK &&
             (x = read_params(rt, &m, &n)) != NULL;
        snprintf(path, sizeof path, "%s.at-save", dir);
        ok = ok && (want = read_file(path, n)) != NULL;
        if (ok && memcmp(x, want, sizeof(float) * (size_t)n) != 0) {
            printf("rank %d of %d: the loaded parameters differ from the saved ones\n", rank,
                   world);
            ok = 0;
        }
        free(x), free(want), x = want = NULL;
    }
    if (ok && !save)
        printf("rank %d of %d, stage %d, %s/%s: step %lld loaded, parameters bitwise the saved "
               "ones\n",
               rank, world, stage, argv[3], argv[4], (long long)from);
    ok = ok && train(rt, &m, save ? K : from, rank, world) == 0 &&
         (x = read_params(rt, &m, &n)) != NULL;
    snprintf(path, sizeof path, "%s.final", dir);
    if (ok && save) {
        ok = rank || write_file(path, x, n) == 0;
    } else if (ok) {
        ok = (want = read_file(path, n)) != NULL;
        double err = ok ? rel_l2(x, want, n) : 1;
        printf("rank %d of %d: after %d more steps %.3g relative L2 from the uninterrupted run\n",
               rank, world, K, err);
        ok = ok && err <= 1e-5;
    }
    if (!ok)
        printf("rank %d of %d: FAILED: %s\n", rank, world, zt_last_error(rt));
    free(x), free(want);
    zt_runtime_destroy(rt);
    rmdir(swap);
    return ok ? 0 : 1;
}

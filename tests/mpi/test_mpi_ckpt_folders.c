/* SPDX-License-Identifier: MIT */
/* Checkpoint folders the ranks do not share, as every rank sees it. 2 ranks.
 *  - A missing checkpoint (no such folder; a folder without one; `latest` naming a removed
 *    folder): every rank's load returns ZT_ERR_IO with a message naming the path and saying
 *    it is not there (not ZT_ERR_CORRUPT "data corrupted", nor another rank's failure).
 *  - Node-local folders: rank 0 and rank 1 each pass a folder of their own for the same save,
 *    as the same path on two nodes' own disks would be. The first save into a shared folder
 *    commits; the next one, with rank 1 looking at its own folder, fails on every rank with
 *    ZT_ERR_IO naming rank 1 and the fix (a folder every rank sees), within the
 *    collective timeout; rank 0's root keeps the previous checkpoint as its latest, with no
 *    partial folder left, and every rank loads it back to the values saved. */
#include "comm/comm.h"
#include "ref_mlp.h"
#include "rank_check.h"
#include "runtime/runtime.h"
#include "scratch.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const mlp_dims dims = {16, 32, 4, 16};

/* The runtime (the minimal model on 2 ranks) and the scratch folder rank 0 makes. */
static zt_status open_runtime(zt_runtime **rt, minimal_model *m, char *base, size_t len)
{
    const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f};
    zt_status st = zt_runtime_create(NULL, ref_mlp_config(&hp, "cpu", "cpu", 1, "", ""), rt);
    st = st == ZT_OK ? minimal_register(*rt, &dims, 3, m) : st;
    st = st == ZT_OK ? zt_runtime_commit(*rt) : st;
    if (st == ZT_OK && (*rt)->dist.rank == 0)
        scratch_make("ckpt-folders", base, len);
    return st == ZT_OK
               ? zt_comm_broadcast_sync((*rt)->dist.comm, base, len, ZT_COMM_U8, 0, &(*rt)->err)
               : st;
}

/* One step of training on this rank's rows of the batch. */
static zt_status train_step(zt_runtime *rt, const minimal_model *m, int step)
{
    float loss;
    int rows = dims.batch / rt->dist.world;
    zt_status st = minimal_micro_step(rt, m, step, rt->dist.rank * rows, rows, &loss);
    return st == ZT_OK ? zt_step(rt, NULL, NULL) : st;
}

/* The first layer's weights (collective). */
static zt_status first_weights(zt_runtime *rt, const minimal_model *m, float *out)
{
    return zt_param_read(rt, m->weight[0], out, (int64_t)m->n_in[0] * m->n_out[0]);
}

static int barrier(zt_runtime *rt)
{
    return zt_comm_agree(rt->dist.comm, ZT_OK, "test barrier", &rt->err) == ZT_OK;
}

/* A load of dir that must say no checkpoint is there, naming `names`, on this rank. */
static void expect_missing(zt_runtime *rt, const char *dir, const char *says, const char *names)
{
    zt_status st = zt_checkpoint_load(rt, dir);
    const char *msg = zt_last_error(rt);
    printf("rank %d: load of %s: status %d: %s\n", rt->dist.rank, dir, (int)st, msg);
    CHECK(st == ZT_ERR_IO, "rank %d: a missing checkpoint at %s is status %d, want ZT_ERR_IO (%d)",
          rt->dist.rank, dir, (int)st, (int)ZT_ERR_IO);
    CHECK(strstr(msg, says) && strstr(msg, names), "rank %d: the message does not say '%s' of %s",
          rt->dist.rank, says, names);
    CHECK(!strstr(msg, "failed on rank"), "rank %d: blames another rank", rt->dist.rank);
}

/* Entries of dir whose name starts with prefix. */
static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    if (zt_launcher_world_size() != 2) {
        fprintf(stderr, "run under mpirun with 2 ranks\n");
        return 77;
    }
    setenv("ZT_COMM_TIMEOUT", "30", 1);
    zt_runtime *rt = NULL;
    minimal_model m;
    char base[512] = "";
    zt_status st = open_runtime(&rt, &m, base, sizeof base);
    if (st != ZT_OK) {
        fprintf(stderr, "setup: %s\n", zt_last_error(rt));
        return 1;
    }
    int rank = rt->dist.rank;
    char none[600], empty[600], gone[600], node_a[600], node_b[600], path[700];
    snprintf(none, sizeof none, "%s/none", base);
    snprintf(empty, sizeof empty, "%s/empty", base);
    snprintf(gone, sizeof gone, "%s/gone", base);
    snprintf(node_a, sizeof node_a, "%s/node-a", base);
    snprintf(node_b, sizeof node_b, "%s/node-b", base);
    if (rank == 0)
        mkdir(empty, 0755), mkdir(node_a, 0755), mkdir(node_b, 0755);
    CHECK(barrier(rt), "barrier");

    /* ---- a missing checkpoint, on every rank ---- */
    expect_missing(rt, none, "no checkpoint at", none);
    expect_missing(rt, empty, "no checkpoint in", empty);
    st = train_step(rt, &m, 0);
    if (st == ZT_OK)
        st = zt_checkpoint_save(rt, gone);
    CHECK(st == ZT_OK, "rank %d: save into %s: %s", rank, gone, zt_last_error(rt));
    snprintf(path, sizeof path, "rm -rf '%s/step-00000001'", gone);
    if (rank == 0)
        CHECK(system(path) == 0, "removing the saved folder");
    CHECK(barrier(rt), "barrier");
    expect_missing(rt, gone, "is missing", "step-00000001");

    /* ---- node-local folders ---- */
    st = zt_checkpoint_save(rt, node_a); /* a folder both ranks see: committed */
    CHECK(st == ZT_OK, "rank %d: save into the shared %s: %s", rank, node_a, zt_last_error(rt));
    float saved[16 * 32], loaded[16 * 32];
    CHECK(first_weights(rt, &m, saved) == ZT_OK, "reading the parameters");
    CHECK(train_step(rt, &m, 1) == ZT_OK, "a step");
    const char *mine = rank == 0 ? node_a : node_b; /* the same path on two nodes' own disks */
    st = zt_checkpoint_save(rt, mine);
    const char *msg = zt_last_error(rt);
    printf("rank %d: save into %s: status %d: %s\n", rank, mine, (int)st, msg);
    CHECK(st == ZT_ERR_IO, "rank %d: a save into folders not shared is status %d, want ZT_ERR_IO",
          rank, (int)st);
    CHECK(strstr(msg, "rank 1 of 2 does not see the folder") && strstr(msg, mine) &&
              strstr(msg, "filesystem all nodes mount") && strstr(msg, "previous checkpoint"),
          "rank %d: the message does not name rank 1, the folder and the fix", rank);
    CHECK(barrier(rt), "barrier");
    CHECK(count_entries(node_a, ".partial-") == 0 && count_entries(node_b, ".partial-") == 0,
          "rank %d: a partial folder is left", rank);
    CHECK(count_entries(node_a, "step-") == 1, "rank %d: %s does not hold the one checkpoint", rank,
          node_a);
    st = zt_checkpoint_load(rt, node_a); /* the previous checkpoint is the latest */
    CHECK(st == ZT_OK, "rank %d: load of %s: %s", rank, node_a, zt_last_error(rt));
    CHECK(first_weights(rt, &m, loaded) == ZT_OK && !memcmp(saved, loaded, sizeof saved) &&
              rt->train.steps == 1,
          "rank %d: the loaded checkpoint is not the one saved before", rank);
    zt_runtime_destroy(rt);
    if (rank == 0 && failures == 0)
        scratch_remove(base);
    printf("rank %d: %s\n", rank, failures ? "FAILED" : "ok");
    return failures != 0;
}

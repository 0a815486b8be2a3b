/* SPDX-License-Identifier: MIT */
/* GPT-2's llm.c export of a checkpoint under mpirun (4 ranks as 2 nodes of 2, every layer
 * sharded): a d2c128 model (vocab 256) saved, loaded into a new runtime and exported. The
 * bytes the ranks send during the export (zt_stats' counters, summed over ranks) are at most
 * 1.2x the model's fp32 bytes, across nodes and in all; the old path's bytes (the layer's
 * all-gather to every rank per parameter) are printed beside them. Rank 0's file holds the
 * single-process values bit for bit: llm.c's header, then every tensor in llm.c's order equal
 * to its initial values (a pure function of seed, name and index, computed here). Exports
 * that rank 0 cannot write (a folder in place of the file; /dev/full) end on every rank
 * within seconds, rank 0's with ZT_ERR_IO naming the file, and a later export still works. */
#include "gpt2_ztier.h"
#include "runtime/runtime.h"
#include "scratch.h"
#include "rank_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const config =
    "{\"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0}, "
    "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"weight_decay\": 0.1}}, "
    "\"ztier\": {\"ranks_per_node\": 2}}";

static zt_status open_model(gpt2_ztier *g, const gpt2_config *c)
{
    zt_runtime *rt = NULL;
    zt_status st = zt_runtime_create(NULL, config, &rt);
    if (st == ZT_OK)
        st = gpt2_ztier_register(g, rt, c, 11);
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    if (st != ZT_OK) {
        fprintf(stderr, "setup: %s\n", rt ? zt_last_error(rt) : zt_status_string(st));
        zt_runtime_destroy(rt);
    }
    return st;
}

/* Sums a counter over the ranks. */
static double summed(zt_runtime *rt, uint64_t mine)
{
    double all = (double)mine;
    zt_comm_allreduce_sync(rt->dist.comm, &all, 1, ZT_COMM_F64, ZT_REDUCE_SUM, &rt->err);
    return all;
}

/* Tensor k of layer l as read from f, against its initial values. */
static void check_tensor(gpt2_ztier *g, FILE *f, int l, int k)
{
    const zt_param *p = &g->rt->reg.params[g->param_ids[l][k]];
    float *want = malloc((size_t)p->numel * sizeof(float));
    float *got = malloc((size_t)p->numel * sizeof(float));
    zt_param_init_fill(p, 0, p->numel, want, &g->rt->err);
    CHECK(fread(got, sizeof(float), (size_t)p->numel, f) == (size_t)p->numel &&
              memcmp(got, want, (size_t)p->numel * sizeof(float)) == 0,
          "the file's '%s' differs from its single-process values", p->name);
    free(want), free(got);
}

static void check_file(gpt2_ztier *g, const char *path)
{
    const gpt2_config *c = &g->c;
    FILE *f = fopen(path, "rb");
    int32_t header[256];
    CHECK(f && fread(header, sizeof header, 1, f) == 1 && header[0] == 20240326 &&
              header[2] == c->max_seq && header[6] == c->channels,
          "header of %s", path);
    if (!f)
        return;
    for (int k = 0; k < 2; k++) /* llm.c's order: wte, wpe, each block tensor, ln_f */
        check_tensor(g, f, 0, k);
    for (int k = 0; k < GPT2_BLOCK_PARAMS; k++)
        for (int l = 1; l <= c->layers; l++)
            check_tensor(g, f, l, k);
    for (int k = 0; k < 2; k++)
        check_tensor(g, f, c->layers + 1, k);
    CHECK(fgetc(f) == EOF, "%s is longer than the model", path);
    fclose(f);
}

int main(void)
{
    gpt2_config c;
    gpt2_config_named("d2c128", 256, &c);
    gpt2_ztier g;
    if (open_model(&g, &c) != ZT_OK)
        return 1;
    int rank = g.rt->dist.rank, world = g.rt->dist.world;
    if (world < 2) {
        fprintf(stderr, "run under mpirun with 2 or more ranks\n");
        zt_runtime_destroy(g.rt);
        gpt2_ztier_free(&g);
        return 77;
    }
    char dir[512] = "";
    if (rank == 0)
        scratch_make("gpt2-export", dir, sizeof dir);
    zt_comm_broadcast_sync(g.rt->dist.comm, dir, sizeof dir, ZT_COMM_U8, 0, &g.rt->err);
    char ckpt[600], file[600];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(file, sizeof file, "%s/model.bin", dir);
    CHECK(zt_checkpoint_save(g.rt, ckpt) == ZT_OK, "save: %s", zt_last_error(g.rt));
    zt_runtime_destroy(g.rt);
    gpt2_ztier_free(&g);

    if (open_model(&g, &c) != ZT_OK)
        return 1;
    zt_runtime *rt = g.rt;
    CHECK(zt_checkpoint_load(rt, ckpt) == ZT_OK, "load: %s", zt_last_error(rt));
    uint64_t model_bytes = 0, old_all = 0, old_inter = 0;
    for (int id = 0; id < rt->reg.n_params; id++) {
        const zt_layer *L = &rt->reg.layers[rt->reg.params[id].layer];
        uint64_t shard = (uint64_t)L->shard_numel * 4;
        model_bytes += (uint64_t)rt->reg.params[id].numel * 4;
        old_all += shard * (uint64_t)world * (uint64_t)(world - 1);
        old_inter += shard * (uint64_t)world * (uint64_t)(world - rt->dist.topo.node_size);
    }
    zt_stats s0 = ZT_STATS_INIT, s1 = ZT_STATS_INIT;
    zt_stats_get(rt, &s0);
    CHECK(gpt2_export_llmc(&g, file) == ZT_OK, "export: %s", zt_last_error(rt));
    zt_stats_get(rt, &s1);
    double inter = summed(rt, s1.comm_bytes_inter - s0.comm_bytes_inter);
    double all = inter + summed(rt, s1.comm_bytes_intra - s0.comm_bytes_intra);
    if (rank == 0) {
        printf("GPT-2 d2c128 export on %d ranks (nodes of 2): model %.2f MB; sent %.2f MB "
               "(%.2f MB across nodes); the layer's all-gather per parameter sent %.2f MB "
               "(%.2f MB across nodes)\n",
               world, (double)model_bytes / 1e6, all / 1e6, inter / 1e6, (double)old_all / 1e6,
               (double)old_inter / 1e6);
        check_file(&g, file);
    }
    CHECK(all <= 1.2 * (double)model_bytes, "the export sent %.0f B, over 1.2 x %llu", all,
          (unsigned long long)model_bytes);
    CHECK(inter <= 1.2 * (double)model_bytes, "the export sent %.0f B across nodes", inter);
    CHECK(all > 0, "nothing was counted");

    /* rank 0 cannot write: it reports, the others are not left waiting */
    const char *bad[2] = {dir, "/dev/full"};
    for (int i = 0; i < 2; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        zt_status st = gpt2_export_llmc(&g, bad[i]);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        const char *msg = gpt2_ztier_error(&g);
        if (rank == 0)
            CHECK(st == ZT_ERR_IO && strstr(msg, bad[i]), "export to %s: %s (%s)", bad[i],
                  zt_status_string(st), msg);
        else
            CHECK(st == ZT_OK, "export to %s on rank %d: %s", bad[i], rank, msg);
        CHECK(s < 10, "the export to %s took %.1f s", bad[i], s);
        if (rank == 0)
            printf("export to %s: %s after %.2f s: %s\n", bad[i], zt_status_string(st), s, msg);
    }
    CHECK(gpt2_export_llmc(&g, file) == ZT_OK, "export again: %s", gpt2_ztier_error(&g));
    if (rank == 0)
        check_file(&g, file);

    double total = summed(rt, (uint64_t)failures);
    if (rank == 0) {
        printf("gpt2 export (%d ranks): %s\n", world, total == 0 ? "all checks passed" : "FAILED");
        scratch_remove(dir);
    }
    zt_runtime_destroy(rt);
    gpt2_ztier_free(&g);
    return total == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/* zt_param_read and zt_param_read_to under mpirun (ranks_per_node = 2), fp32 or bf16
 * parameters (argv[1]): a sharded layer whose parameters span shard boundaries (and one that
 * lies in a single shard), a layer whose last parameter ends at a shard boundary, and a
 * replicated layer below the persistence threshold. Every read, on every rank and to each
 * root, equals the single-process values bit for bit: the initial values (a pure function of
 * seed, name and index, computed here on the whole tensor) and values written through
 * zt_param_write (bit patterns every float of which differs). The bytes the ranks send
 * (zt_stats' counters, summed over ranks): reading every parameter to one rank moves exactly
 * the sharded parameters' bytes held off that rank, at most 1.2x the model's bytes; to every
 * rank (world - 1) times the model's sharded bytes; the old path's bytes (the layer's
 * all-gather per parameter) are printed beside them. Bad roots are ZT_ERR_ARGUMENT. */
#include "runtime/runtime.h"
#include "rank_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct spec {
    const char *layer, *name;
    int64_t rows, cols;
} spec;

/* "spread" (3556 elements): on 4 ranks p0 runs over the first boundary, p1 sits inside one
 * shard, p2 spans the rest (on 2 ranks p2 spans both); "edge": e0 fills 16 * 2 * 28 elements, a multiple of every world's shard
 * alignment; "small" (14 elements): replicated. */
static const spec specs[] = {
    {"spread", "spread.p0", 1000, 1}, {"spread", "spread.p1", 37, 1},
    {"spread", "spread.p2", 50, 50},  {"edge", "edge.e0", 28, 32},
    {"edge", "edge.e1", 96, 1},       {"small", "small.b0", 5, 1},
    {"small", "small.b1", 9, 1},
};
#define N_PARAMS ((int)(sizeof specs / sizeof specs[0]))

typedef struct model {
    int id[N_PARAMS];
    int64_t n[N_PARAMS];
} model;

static zt_runtime *make_runtime(const char *dtype, model *m)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 100}, "
             "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.01}}, "
             "\"bf16\": {\"enabled\": %s}, \"ztier\": {\"ranks_per_node\": 2}}",
             strcmp(dtype, "bf16") == 0 ? "true" : "false");
    zt_runtime *rt = NULL;
    zt_status st = zt_runtime_create(NULL, cfg, &rt);
    int layer = -1;
    const char *last = "";
    for (int k = 0; st == ZT_OK && k < N_PARAMS; k++) {
        if (strcmp(last, specs[k].layer) != 0)
            st = zt_layer_add(rt, specs[k].layer, &layer);
        last = specs[k].layer;
        int64_t shape[2] = {specs[k].rows, specs[k].cols};
        zt_init init = {ZT_INIT_NORMAL, 0.0f, 0.5f, 7, NULL, NULL};
        m->n[k] = specs[k].rows * specs[k].cols;
        if (st == ZT_OK)
            st = zt_param_add(rt, layer, specs[k].name, shape, specs[k].cols > 1 ? 2 : 1, &init,
                              &m->id[k]);
    }
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    if (st != ZT_OK) {
        fprintf(stderr, "setup: %s\n", rt ? zt_last_error(rt) : zt_status_string(st));
        zt_runtime_destroy(rt);
        return NULL;
    }
    return rt;
}

/* Bits every one of which differs from its neighbours', finite and of varied exponents. */
static float pattern(int k, int64_t i)
{
    uint32_t u = (uint32_t)(k * 7919 + 1) * 2654435761u ^ (uint32_t)i * 40503u;
    u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 50) << 23);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int same_bits(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

static uint64_t sent_total(zt_runtime *rt)
{
    zt_stats s = ZT_STATS_INIT;
    zt_stats_get(rt, &s);
    double mine = (double)(s.comm_bytes_intra + s.comm_bytes_inter), all = mine;
    zt_comm_allreduce_sync(rt->dist.comm, &all, 1, ZT_COMM_F64, ZT_REDUCE_SUM, &rt->err);
    return (uint64_t)all;
}

/* Every parameter read on every rank and to each root equals ref (whole tensors). */
static void check_reads(zt_runtime *rt, const model *m, float *const *ref, const char *what)
{
    int rank = rt->dist.rank, world = rt->dist.world;
    for (int k = 0; k < N_PARAMS; k++) {
        float *got = malloc((size_t)m->n[k] * sizeof(float));
        memset(got, 0xff, (size_t)m->n[k] * sizeof(float));
        CHECK(zt_param_read(rt, m->id[k], got, m->n[k]) == ZT_OK, "%s", zt_last_error(rt));
        CHECK(same_bits(got, ref[k], m->n[k]), "%s: zt_param_read('%s') differs on rank %d", what,
              specs[k].name, rank);
        for (int root = 0; root < world; root++) {
            memset(got, 0xff, (size_t)m->n[k] * sizeof(float));
            /* only the root passes a buffer */
            CHECK(zt_param_read_to(rt, m->id[k], root, rank == root ? got : NULL, m->n[k]) == ZT_OK,
                  "%s", zt_last_error(rt));
            CHECK(rank != root || same_bits(got, ref[k], m->n[k]),
                  "%s: zt_param_read_to('%s', root %d) differs", what, specs[k].name, root);
        }
        free(got);
    }
}

int main(int argc, char **argv)
{
    const char *dtype = argc > 1 ? argv[1] : "fp32";
    model m;
    zt_runtime *rt = make_runtime(dtype, &m);
    if (!rt)
        return 1;
    int rank = rt->dist.rank, world = rt->dist.world;
    if (world < 2) {
        fprintf(stderr, "run under mpirun with 2 or more ranks\n");
        zt_runtime_destroy(rt);
        return 77;
    }
    float *ref[N_PARAMS];
    uint64_t model_bytes = 0, sharded_bytes = 0, off_root0 = 0, old_path = 0;
    int spanning = 0;
    for (int k = 0; k < N_PARAMS; k++) {
        const zt_param *p = &rt->reg.params[m.id[k]];
        const zt_layer *L = &rt->reg.layers[p->layer];
        ref[k] = malloc((size_t)m.n[k] * sizeof(float));
        zt_param_init_fill(p, 0, m.n[k], ref[k], &rt->err);
        model_bytes += (uint64_t)m.n[k] * 4;
        CHECK(L->persistent == (strcmp(specs[k].layer, "small") == 0), "'%s' persistent: %d",
              specs[k].name, L->persistent);
        if (L->persistent)
            continue;
        sharded_bytes += (uint64_t)m.n[k] * 4;
        int64_t end0 = L->shard_numel; /* rank 0's shard: [0, shard_numel) */
        int64_t on0 = p->offset >= end0              ? 0
                      : p->offset + p->numel <= end0 ? p->numel
                                                     : end0 - p->offset;
        off_root0 += (uint64_t)(p->numel - on0) * 4;
        spanning += p->offset / L->shard_numel != (p->offset + p->numel - 1) / L->shard_numel;
        old_path += (uint64_t)L->shard_numel * 4 * (uint64_t)world * (uint64_t)(world - 1);
    }
    CHECK(spanning > 0, "no parameter crosses a shard boundary");
    check_reads(rt, &m, ref, "initial values");

    /* every rank writes the same whole tensors; each keeps its shard's part */
    for (int k = 0; k < N_PARAMS; k++) {
        for (int64_t i = 0; i < m.n[k]; i++)
            ref[k][i] = pattern(k, i);
        CHECK(zt_param_write(rt, m.id[k], ref[k], m.n[k]) == ZT_OK, "%s", zt_last_error(rt));
    }
    check_reads(rt, &m, ref, "written values");

    /* the bytes of reading every parameter once to rank 0, then once to every rank */
    uint64_t b0 = sent_total(rt);
    for (int k = 0; k < N_PARAMS; k++) {
        float *got = rank == 0 ? malloc((size_t)m.n[k] * sizeof(float)) : NULL;
        CHECK(zt_param_read_to(rt, m.id[k], 0, got, m.n[k]) == ZT_OK, "%s", zt_last_error(rt));
        free(got);
    }
    uint64_t b1 = sent_total(rt);
    for (int k = 0; k < N_PARAMS; k++) {
        float *got = malloc((size_t)m.n[k] * sizeof(float));
        CHECK(zt_param_read(rt, m.id[k], got, m.n[k]) == ZT_OK, "%s", zt_last_error(rt));
        free(got);
    }
    uint64_t b2 = sent_total(rt);
    if (rank == 0)
        printf("%s, %d ranks: reading every parameter (model %llu B) sent %llu B to rank 0, "
               "%llu B to every rank; the layer's all-gather per parameter sent %llu B\n",
               dtype, world, (unsigned long long)model_bytes, (unsigned long long)(b1 - b0),
               (unsigned long long)(b2 - b1), (unsigned long long)old_path);
    CHECK(b1 - b0 == off_root0, "to rank 0: %llu B sent, want %llu", (unsigned long long)(b1 - b0),
          (unsigned long long)off_root0);
    CHECK((double)(b1 - b0) <= 1.2 * (double)model_bytes, "to rank 0: %llu B > 1.2 x %llu",
          (unsigned long long)(b1 - b0), (unsigned long long)model_bytes);
    CHECK(b2 - b1 == sharded_bytes * (uint64_t)(world - 1), "to every rank: %llu B, want %llu",
          (unsigned long long)(b2 - b1), (unsigned long long)(sharded_bytes * (world - 1)));

    /* bad roots fail alike on every rank, before any collective */
    float one[5];
    CHECK(zt_param_read_to(rt, m.id[5], world, one, 5) == ZT_ERR_ARGUMENT &&
              strstr(zt_last_error(rt), "root"),
          "root %d: %s", world, zt_last_error(rt));
    CHECK(zt_param_read_to(rt, m.id[5], -1, one, 5) == ZT_ERR_ARGUMENT, "root -1: %s",
          zt_last_error(rt));

    double total = failures;
    zt_comm_allreduce_sync(rt->dist.comm, &total, 1, ZT_COMM_F64, ZT_REDUCE_SUM, &rt->err);
    if (rank == 0)
        printf("param read (%s, %d ranks): %s\n", dtype, world,
               total == 0 ? "all checks passed" : "FAILED");
    for (int k = 0; k < N_PARAMS; k++)
        free(ref[k]);
    zt_runtime_destroy(rt);
    return total == 0 ? 0 : 1;
}

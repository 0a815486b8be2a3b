/* SPDX-License-Identifier: MIT */
/* ZeRO++ on node layouts one machine cannot give (4 ranks, forced through ZT_TEST_NODE_OF,
 * the tests' archive's hook; MPI_Comm_split_type puts every rank here on one node):
 *  - 2+1+1 ranks: qwZ + qgZ + hpZ commit within 5 s on every rank, one warning for the job
 *    (rank 0's; the ranks' counts summed over the world are 1) with the layout and what was
 *    turned off (hpZ, qgZ's second level), and train to
 *    parameters bitwise equal to the one-node run of the same configuration (hpZ changes no
 *    value, one-level qgZ is what one node runs);
 *  - `--map-by node` (ranks 0,2 on one node, 1,3 on the other): hpZ's node group is {0,2} or
 *    {1,3} and qgZ's cross-node group {0,1} or {2,3} (their members' world ranks, exchanged
 *    over them); no warning; hpZ alone trains to the plain run's parameters bitwise; all of
 *    ZeRO++ counts as many bytes across nodes as the consecutive placement (0,1 | 2,3) and
 *    trains to within 10% of the unquantized run (a qgZ that summed another node's shards
 *    would not);
 *  - with the layout found by the backend (no override): one node, whatever the launcher,
 *    and the node of each rank is the lowest rank on it (0). */
#include "ref_mlp.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEPS 8

static const mlp_dims dims = {16, 48, 4, 48};
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

typedef struct run {
    double commit_s, inter_bytes;
    int warnings, layout_warnings; /* [zeropp] warnings; those naming the layout */
    int64_t job_warnings[2];       /* the same, summed over every rank */
    int hpz, two_level, n_nodes;
    int64_t intra[4], inter[4]; /* world ranks of the node group and the cross-node group */
    int n_intra, n_inter;
    float *params[2 * MLP_LAYERS];
} run;

typedef struct capture {
    int warnings, layout_warnings;
    const char *layout; /* the description a warning must name */
} capture;

static void on_log(void *user, int level, const char *msg)
{
    capture *c = user;
    if (level == 1 && strstr(msg, "[zeropp]")) {
        c->warnings++;
        c->layout_warnings += c->layout && strstr(msg, c->layout) && strstr(msg, "hpZ") &&
                              strstr(msg, "every rank does the same") != NULL;
        fprintf(stderr, "%s\n", msg);
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The world ranks of c's members (c may be NULL: none). */
static int members(zt_comm *c, int rank, int64_t *out)
{
    if (!c)
        return 0;
    int64_t me = rank;
    zt_error err = {0};
    if (zt_comm_allgather_sync(c, &me, out, 1, ZT_COMM_I64, &err) != ZT_OK)
        return -1;
    return c->size;
}

static int train(const char *node_of, const char *qw, const char *qg, int hpz,
                 const char *warn_layout, run *o)
{
    memset(o, 0, sizeof *o);
    if (node_of)
        setenv("ZT_TEST_NODE_OF", node_of, 1);
    else
        unsetenv("ZT_TEST_NODE_OF");
    char zero[256];
    snprintf(zero, sizeof zero,
             ", \"stage3_max_reuse_distance\": 0, \"zero_quantized_weights\": %s,"
             " \"zero_quantized_gradients\": %s, \"zero_hpz_partition_size\": %d",
             qw, qg, hpz);
    capture cap = {0, 0, warn_layout};
    zt_options opts = ZT_OPTIONS_INIT;
    opts.log_fn = on_log;
    opts.log_user = &cap;
    zt_runtime *rt = NULL;
    minimal_model m;
    zt_status st = zt_runtime_create(
        &opts, ref_mlp_config(&hp, "cpu", "cpu", 1, zero, ", \"quant_block_size\": 64"), &rt);
    if (st == ZT_OK && minimal_register(rt, &dims, 42, &m))
        st = ZT_ERR_INTERNAL;
    double t0 = now();
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    o->commit_s = now() - t0;
    if (st != ZT_OK) {
        fprintf(stderr, "WRONG: setup (%s, %s/%s/%d): %s\n", node_of ? node_of : "found", qw, qg,
                hpz, zt_last_error(rt));
        zt_runtime_destroy(rt);
        return -1;
    }
    int rank, world;
    zt_runtime_rank(rt, &rank, &world);
    const zt_topology *t = &rt->dist.topo;
    o->hpz = t->hpz, o->two_level = t->two_level, o->n_nodes = t->layout.n_nodes;
    o->n_intra = members(t->intra, rank, o->intra);
    o->n_inter = members(t->inter, rank, o->inter);
    int64_t mine[2] = {cap.warnings, cap.layout_warnings}, all[2 * 64] = {0};
    zt_error err = {0};
    if (world > 64 || zt_comm_allgather_sync(t->world, mine, all, 2, ZT_COMM_I64, &err) != ZT_OK)
        st = ZT_ERR_COMM;
    for (int r = 0; r < world && r < 64; r++)
        o->job_warnings[0] += all[2 * r], o->job_warnings[1] += all[2 * r + 1];
    int rows = dims.batch / world;
    zt_stats s0 = ZT_STATS_INIT, s1 = ZT_STATS_INIT;
    for (int s = 0; s < STEPS && st == ZT_OK; s++) {
        float loss;
        if (s == 1)
            zt_stats_get(rt, &s0);
        st = minimal_micro_step(rt, &m, s, rank * rows, rows, &loss);
        if (st == ZT_OK)
            st = zt_step(rt, NULL, NULL);
    }
    zt_stats_get(rt, &s1);
    o->inter_bytes = (double)(s1.comm_bytes_inter - s0.comm_bytes_inter) / (STEPS - 1);
    for (int k = 0; k < 2 * MLP_LAYERS && st == ZT_OK; k++) {
        int l = k / 2;
        int64_t n = k % 2 ? m.n_out[l] : (int64_t)m.n_in[l] * m.n_out[l];
        o->params[k] = malloc(sizeof(float) * (size_t)n);
        st = zt_param_read(rt, k % 2 ? m.bias[l] : m.weight[l], o->params[k], n);
    }
    if (st != ZT_OK)
        fprintf(stderr, "WRONG: training (%s): %s\n", node_of ? node_of : "found",
                zt_last_error(rt));
    zt_runtime_destroy(rt);
    o->warnings = cap.warnings, o->layout_warnings = cap.layout_warnings;
    return st == ZT_OK ? 0 : -1;
}

static int64_t numel(int k)
{
    int l = k / 2, out = l == MLP_LAYERS - 1 ? dims.out : dims.hidden;
    return k % 2 ? out : (int64_t)(l ? dims.hidden : dims.in) * out;
}

/* Relative L2 distance of a's parameters from b's. */
static double rel_diff(const run *a, const run *b)
{
    double num = 0, den = 0;
    for (int k = 0; k < 2 * MLP_LAYERS; k++)
        for (int64_t i = 0; i < numel(k); i++) {
            double d = (double)a->params[k][i] - b->params[k][i];
            num += d * d, den += (double)b->params[k][i] * b->params[k][i];
        }
    return sqrt(num / den);
}

static int expect(int ok, int rank, const char *what)
{
    printf("rank %d: %s %s\n", rank, what, ok ? "ok" : "WRONG");
    return !ok;
}

int main(void)
{
    int rank = atoi(getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : "0");
    run found, one_node, uneven, plain, hpz_map, map, by_slot, unquantized;
    if (train(NULL, "true", "true", 4, NULL, &found) ||
        train("0,0,0,0", "true", "true", 2, NULL, &one_node) ||
        train("0,0,1,2", "true", "true", 2, "3 nodes of 2+1+1 ranks", &uneven) ||
        train("0,1,0,1", "false", "false", 1, NULL, &plain) ||
        train("0,1,0,1", "false", "false", 2, NULL, &hpz_map) ||
        train("0,1,0,1", "true", "true", 2, NULL, &map) ||
        train("0,0,1,1", "true", "true", 2, NULL, &by_slot) ||
        train("0,1,0,1", "false", "false", 1, NULL, &unquantized))
        return 1;
    int bad = 0;
    char what[256];
    /* found by the backend: one machine, one node */
    bad += expect(
        found.n_nodes == 1 && found.hpz && !found.two_level && found.warnings == 0, rank,
        "layout found by MPI_Comm_split_type: 1 node, hpZ on (over its 4 ranks), no warning");
    /* 2+1+1 */
    const int64_t *job = uneven.job_warnings;
    snprintf(what, sizeof what,
             "2+1+1: commit in %.2f s (< 5), %lld layout warning(s) of %lld over all ranks (1 of "
             "1, from rank 0: here %d), hpZ %d and two-level qgZ %d (both 0), no node groups "
             "(%d, %d)",
             uneven.commit_s, (long long)job[1], (long long)job[0], uneven.warnings, uneven.hpz,
             uneven.two_level, uneven.n_intra, uneven.n_inter);
    bad += expect(uneven.commit_s < 5.0 && job[0] == 1 && job[1] == 1 &&
                      uneven.warnings == (rank == 0) && !uneven.hpz && !uneven.two_level &&
                      !uneven.n_intra && !uneven.n_inter,
                  rank, what);
    snprintf(what, sizeof what, "2+1+1: parameters %.3g from the one-node run's (0)",
             rel_diff(&uneven, &one_node));
    bad += expect(rel_diff(&uneven, &one_node) == 0.0, rank, what);
    /* --map-by node */
    int64_t lo = rank % 2,
            node_group_ok = map.n_intra == 2 && map.intra[0] == lo && map.intra[1] == lo + 2;
    int64_t cross = rank / 2 * 2;
    int cross_ok = map.n_inter == 2 && map.inter[0] == cross && map.inter[1] == cross + 1;
    snprintf(what, sizeof what,
             "map-by-node: hpZ %d, two-level qgZ %d, node group {%lld,%lld}, cross-node group "
             "{%lld,%lld}, %d warning(s)",
             map.hpz, map.two_level, (long long)map.intra[0], (long long)map.intra[1],
             (long long)map.inter[0], (long long)map.inter[1], map.warnings);
    bad += expect(map.hpz && map.two_level && node_group_ok && cross_ok && map.warnings == 0, rank,
                  what);
    snprintf(what, sizeof what, "map-by-node: hpZ alone %.3g from the plain run (0)",
             rel_diff(&hpz_map, &plain));
    bad += expect(rel_diff(&hpz_map, &plain) == 0.0 && hpz_map.n_intra == 2, rank, what);
    snprintf(what, sizeof what,
             "map-by-node: ZeRO++ %.0f bytes/step across nodes, by-slot %.0f (equal), "
             "unquantized %.0f; parameters %.3g from the unquantized run (<= 0.10)",
             map.inter_bytes, by_slot.inter_bytes, unquantized.inter_bytes,
             rel_diff(&map, &unquantized));
    bad += expect(map.inter_bytes == by_slot.inter_bytes &&
                      map.inter_bytes < 0.5 * unquantized.inter_bytes &&
                      rel_diff(&map, &unquantized) <= 0.10,
                  rank, what);
    return bad ? 1 : 0;
}

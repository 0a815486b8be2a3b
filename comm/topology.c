/* SPDX-License-Identifier: MIT */
/* The node layout and ZeRO++'s decisions on it (see topology.h). */
#include "comm/topology.h"
#include "core/log.h"
#include "core/test_hooks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct id_rank {
    int64_t id;
    int rank;
} id_rank;

static int by_id_then_rank(const void *a, const void *b)
{
    const id_rank *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int by_rank(const void *a, const void *b)
{
    const id_rank *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Appends to a fixed buffer; what does not fit ends in "...". */
static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= cap - used && cap >= 4)
        memcpy(buf + cap - 4, "...", 4);
}

static const char *plural(int n, const char *one, const char *many) { return n == 1 ? one : many; }

static void describe(zt_layout *l)
{
    char *d = l->desc;
    d[0] = 0;
    if (l->equal)
        append(d, sizeof l->desc, "%d %s x %d %s", l->n_nodes, plural(l->n_nodes, "node", "nodes"),
               l->equal, plural(l->equal, "rank", "ranks"));
    else {
        append(d, sizeof l->desc, "%d nodes of ", l->n_nodes);
        for (int m = 0; m < l->n_nodes; m++)
            append(d, sizeof l->desc, m ? "+%d" : "%d", l->start[m + 1] - l->start[m]);
        append(d, sizeof l->desc, " ranks");
    }
    int consecutive = 1;
    for (int r = 0; r < l->size; r++)
        consecutive &= l->members[r] == r;
    if (consecutive || l->n_nodes == 1)
        return;
    append(d, sizeof l->desc, ", nodes");
    for (int m = 0; m < l->n_nodes; m++)
        for (int i = l->start[m]; i < l->start[m + 1]; i++)
            append(d, sizeof l->desc, "%s%d%s", i == l->start[m] ? " {" : ",", l->members[i],
                   i + 1 == l->start[m + 1] ? "}" : "");
}

/* hpZ and two-level qgZ need nodes of one size (whether a gather reads the node's slices
 * must be the same on every rank, and the two-level exchange pairs the ranks of equal local
 * index across nodes), with more than one rank each (else there is nothing inside a node). */
static void decide(zt_layout *l, int hpz, int qgz)
{
    int want_hpz = hpz > 1 && l->size > 1, fit = l->equal > 1;
    l->hpz = want_hpz && fit;
    l->two_level = qgz && fit && l->n_nodes > 1;
    int qgz_off = qgz && l->n_nodes > 1 && !l->equal; /* single-rank nodes: one level is all */
    l->off[0] = 0;
    if (want_hpz && !fit)
        append(l->off, sizeof l->off, "hpZ (zero_hpz_partition_size = %d) is off", hpz);
    if (qgz_off)
        append(l->off, sizeof l->off, "%sqgZ runs in one level over all ranks",
               l->off[0] ? " and " : "");
    if (l->off[0])
        append(l->off, sizeof l->off, ": %s nodes of equal size, more than one rank each",
               want_hpz && !fit && qgz_off ? "they need" : "it needs");
}

zt_status zt_layout_make(const int64_t *node_id, int size, int hpz, int qgz, zt_layout *out,
                         zt_error *err)
{
    memset(out, 0, sizeof *out);
    /* node_of, local_of, members, start (size + 1 at most), a scratch of size */
    int *ints = calloc((size_t)size * 5 + 1, sizeof *ints);
    id_rank *pairs = calloc((size_t)size, sizeof *pairs);
    id_rank *first = calloc((size_t)size, sizeof *first);
    if (!ints || !pairs || !first) {
        free(ints), free(pairs), free(first);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for the node layout of %d ranks", size);
    }
    out->size = size;
    out->node_of = ints;
    out->local_of = ints + size;
    out->members = ints + 2 * size;
    out->start = ints + 3 * size;
    for (int r = 0; r < size; r++)
        pairs[r] = (id_rank){node_id[r], r};
    qsort(pairs, (size_t)size, sizeof *pairs, by_id_then_rank);
    /* one entry per node: its lowest rank (first in its run), its run's index as id */
    int n = 0;
    for (int i = 0; i < size; i++)
        if (i == 0 || pairs[i].id != pairs[i - 1].id)
            first[n] = (id_rank){n, pairs[i].rank}, n++;
    qsort(first, (size_t)n, sizeof *first, by_rank); /* node m: the m-th lowest first rank */
    int *scratch = out->start + size + 1, *node_of_run = scratch;
    for (int m = 0; m < n; m++)
        node_of_run[first[m].id] = m;
    for (int i = 0, run = -1; i < size; i++) {
        run += i == 0 || pairs[i].id != pairs[i - 1].id;
        out->node_of[pairs[i].rank] = node_of_run[run];
    }
    out->n_nodes = n;
    for (int r = 0; r < size; r++)
        out->start[out->node_of[r] + 1]++;
    for (int m = 0; m < n; m++)
        out->start[m + 1] += out->start[m];
    int *fill = scratch; /* the ranks placed so far, per node */
    memset(fill, 0, sizeof(int) * (size_t)n);
    for (int r = 0; r < size; r++) {
        int m = out->node_of[r];
        out->local_of[r] = fill[m]++;
        out->members[out->start[m] + out->local_of[r]] = r;
    }
    free(pairs), free(first);
    out->equal = out->start[1];
    for (int m = 1; m < n; m++)
        if (out->start[m + 1] - out->start[m] != out->equal)
            out->equal = 0;
    describe(out);
    decide(out, hpz, qgz);
    return ZT_OK;
}

void zt_layout_free(zt_layout *l)
{
    free(l->node_of);
    l->node_of = l->local_of = l->members = l->start = NULL;
}

void zt_layout_consecutive(int size, int ranks_per_node, int64_t *node_id)
{
    for (int r = 0; r < size; r++)
        node_id[r] = ranks_per_node > 0 ? r / ranks_per_node : 0;
}

int zt_qgz_two_level(int size, int node_ranks)
{
    return node_ranks > 1 && size > node_ranks && size % node_ranks == 0;
}

/* Every rank's node id: the test's table (ztier_test only), ztier.ranks_per_node's groups,
 * or the comm backend's (collective). */
static zt_status node_ids(zt_topology *t, int ranks_per_node, int64_t *ids, zt_error *err)
{
#ifdef ZT_TEST_HOOKS /* the tests' archive only: no trace of it in the shipped libraries */
    int forced = zt_test_node_of(t->size, ids);
    if (forced) {
        t->source = "from ZT_TEST_NODE_OF, a test's override";
        if (forced != t->size)
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "ZT_TEST_NODE_OF gives the node of %d ranks, this world has %d", forced,
                          t->size);
        return ZT_OK;
    }
#endif
    if (ranks_per_node > 0) {
        t->source = "from ztier.ranks_per_node: groups of consecutive ranks";
        zt_layout_consecutive(t->size, ranks_per_node, ids);
        return ZT_OK;
    }
    return zt_comm_node_ids(t->world, ids, &t->source, err);
}

zt_status zt_topology_open(zt_topology *t, zt_comm *world, int ranks_per_node, int hpz, int qgz,
                           zt_error *err)
{
    memset(t, 0, sizeof *t);
    t->world = world;
    t->rank = world->rank;
    t->size = world->size;
    int64_t *ids = calloc((size_t)t->size, sizeof *ids);
    if (!ids)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for the node of %d ranks", t->size);
    zt_status st = node_ids(t, ranks_per_node, ids, err);
    if (st == ZT_OK)
        st = zt_layout_make(ids, t->size, hpz, qgz, &t->layout, err);
    free(ids);
    if (st != ZT_OK)
        return st;
    const zt_layout *l = &t->layout;
    int node = l->node_of[t->rank];
    t->node_size = l->start[node + 1] - l->start[node];
    t->local_rank = l->local_of[t->rank];
    t->hpz = l->hpz;
    t->two_level = l->two_level;
    /* the same layout on every rank, the same decision: rank 0 says it for the job (once, not
     * once per rank), none asks the others */
    if (l->off[0] && t->rank == 0)
        ZT_LOGW("zeropp", "%s (%s): %s; every rank does the same", l->desc, t->source, l->off);
    else if (!l->off[0] && t->hpz && hpz != l->equal && t->rank == 0)
        ZT_LOGW("zeropp",
                "zero_hpz_partition_size = %d: ztier keeps secondary shards per node (%d ranks "
                "per node here: %s, %s)",
                hpz, l->equal, l->desc, t->source);
    /* split is collective: every rank takes part when any of these is on (all decide alike) */
    if (t->hpz || t->two_level) /* the node's ranks, in rank order (hpZ's slices, qgZ's stage 1) */
        st = zt_comm_split(world, node, t->rank, &t->intra, err);
    if (st == ZT_OK && t->two_level) /* one rank of each node, in node order (qgZ's stage 2) */
        st = zt_comm_split(world, t->local_rank, node, &t->inter, err);
    return st;
}

void zt_topology_close(zt_topology *t)
{
    if (t->inter)
        zt_comm_destroy(t->inter);
    if (t->intra)
        zt_comm_destroy(t->intra);
    t->inter = t->intra = NULL;
    zt_layout_free(&t->layout);
}

void zt_topology_count_allreduce(zt_topology *t, uint64_t bytes)
{
    uint64_t size = (uint64_t)(t->size > 0 ? t->size : 1);
    t->bytes_intra += 2 * bytes * (uint64_t)(t->node_size - 1) / size;
    t->bytes_inter += 2 * bytes * (uint64_t)(t->size - t->node_size) / size;
}

void zt_topology_count(zt_topology *t, uint64_t bytes_per_peer)
{
    t->bytes_intra += bytes_per_peer * (uint64_t)(t->node_size - 1);
    t->bytes_inter += bytes_per_peer * (uint64_t)(t->size - t->node_size);
}

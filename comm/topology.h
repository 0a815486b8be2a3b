/* SPDX-License-Identifier: MIT */
/* The node layout and what ZeRO++ makes of it. At commit every rank learns which node each
 * rank is on (the comm backend's node of each rank, exchanged so that every rank holds the
 * same table; or ztier.ranks_per_node's consecutive groups), and every decision that follows
 * (whether hpZ and two-level qgZ apply, which ranks form each node group) is a pure function
 * of that table: the ranks agree without another round, whatever the placement (nodes of
 * unequal size, ranks spread round-robin by `mpirun --map-by node`). */
#ifndef ZT_COMM_TOPOLOGY_H
#define ZT_COMM_TOPOLOGY_H

#include "comm/comm.h"

#include <stdint.h>

#define ZT_LAYOUT_TEXT_MAX 256

/* A layout of `size` ranks on n_nodes nodes; nodes are numbered by their lowest rank (rank 0
 * is on node 0), the ranks of a node kept in rank order. */
typedef struct zt_layout {
    int size, n_nodes;
    int *node_of;  /* [size] the node of each rank */
    int *local_of; /* [size] each rank's index among its node's ranks */
    int *members;  /* [size] the ranks node by node: node m's are members[start[m] .. start[m+1]) */
    int *start;    /* [n_nodes + 1] */
    int equal;     /* ranks per node when every node has as many, else 0 */
    int hpz;       /* hpZ applies: it was asked for and the nodes are equal, > 1 rank each */
    int two_level; /* qgZ's two-level form applies: asked for, equal nodes of > 1 rank, > 1 node */
    char desc[ZT_LAYOUT_TEXT_MAX]; /* "2 nodes x 2 ranks", "3 nodes of 2+1+1 ranks", with the
                                      node groups where they are not consecutive ranks */
    char off[ZT_LAYOUT_TEXT_MAX];  /* what was asked for and turned off, and why; "" if none */
} zt_layout;

/* The layout of `size` ranks where rank r is on the node named node_id[r] (any ids: equal ids,
 * one node), and ZeRO++'s decisions on it for hpz (zero_hpz_partition_size: > 1 asks for hpZ)
 * and qgz (1: qgZ on). Pure; every rank that calls it with the same table gets the same layout.
 * Allocates the arrays (zt_layout_free). */
zt_status zt_layout_make(const int64_t *node_id, int size, int hpz, int qgz, zt_layout *out,
                         zt_error *err);
void zt_layout_free(zt_layout *l);

/* Node ids for consecutive groups of ranks_per_node ranks (the last one may be smaller). */
void zt_layout_consecutive(int size, int ranks_per_node, int64_t *node_id);

/* 1 when qgZ takes its two-level form on consecutive equal nodes of node_ranks ranks (for
 * estimates without a gathered layout: ztier.ranks_per_node, else one node). */
int zt_qgz_two_level(int size, int node_ranks);

typedef struct zt_topology {
    zt_comm *world;         /* not owned */
    zt_comm *intra, *inter; /* owned; NULL unless hpZ or two-level qgZ needs them: intra the
                               ranks of this node (rank order), inter the ranks with this
                               rank's local index (node order) */
    int rank, size;
    int node_size;                     /* ranks on this rank's node */
    int local_rank;                    /* index of this rank inside its node */
    int hpz, two_level;                /* the layout's decisions (the same on every rank) */
    zt_layout layout;                  /* every rank's node, the same table on every rank */
    const char *source;                /* where the layout came from, for messages */
    uint64_t bytes_intra, bytes_inter; /* sent by this rank */
    zt_device *dev; /* where the buffers live and the kernels run; not owned (set after open) */
} zt_topology;

/* Learns the node layout and, when hpZ (hpz: zero_hpz_partition_size, > 1 to use it) or
 * two-level qgZ (qgz: 1 when on) needs them, splits the node and cross-node communicators.
 * The layout: ranks_per_node > 0 groups consecutive ranks; else the comm backend's node of
 * each rank (zt_comm_node_ids). Collective: every rank calls it with the same arguments.
 * Where hpZ or two-level qgZ cannot apply, rank 0 warns once (for the whole job). */
zt_status zt_topology_open(zt_topology *t, zt_comm *world, int ranks_per_node, int hpz, int qgz,
                           zt_error *err);
void zt_topology_close(zt_topology *t);

/* Ranks per node of two-level qgZ's, 0 when it runs in one level. */
static inline int zt_topology_qgz_nodes(const zt_topology *t)
{
    return t->two_level ? t->node_size : 0;
}

/* Counts a collective in which this rank sends bytes_per_peer to every other rank. */
void zt_topology_count(zt_topology *t, uint64_t bytes_per_peer);
/* Counts an all-reduce of `bytes` as a ring's volume: a reduce-scatter and an all-gather of
 * bytes / size to every other rank, 2 x bytes x (size - 1) / size in all. */
void zt_topology_count_allreduce(zt_topology *t, uint64_t bytes);

#endif

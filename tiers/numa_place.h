/* SPDX-License-Identifier: MIT */
/* The one place host buffers are put on a NUMA node (the node of the rank's GPU, or
 * ztier.numa_node; core/numa.h chooses it): the host tier's shards and staging buffers, the
 * NVMe staging pool, the gradient landing buffers and the activation store's host buffers;
 * and the threads the NVMe I/O engines start (zt_numa_scope below).
 *
 * The policy is MPOL_PREFERRED, not MPOL_BIND: the pages come from the node while it has
 * room, and from another node once it is full, instead of the allocation failing (with
 * MPOL_BIND the kernel's OOM killer ends the process at the first touch). Every buffer is
 * placed before it is first written and before it is pinned, so its pages are faulted in, and
 * locked, on the node; pages a reused heap block already had are moved there (MPOL_MF_MOVE).
 * Transparent huge pages follow the same policy. */
#ifndef ZT_TIERS_NUMA_PLACE_H
#define ZT_TIERS_NUMA_PLACE_H

#include <sched.h>
#include <stdint.h>

/* Places the whole pages of [ptr, ptr + bytes) (ptr page-aligned) on node; node < 0: nothing
 * (the system's default placement). A refusal by the kernel is logged once, naming owner,
 * and leaves the buffer where the system puts it. */
void zt_numa_place(void *ptr, uint64_t bytes, int node, const char *owner);

/* Threads the calling thread starts while a scope is entered inherit its CPUs and memory
 * policy (Linux copies both at pthread_create): entering puts the caller on node (its cores,
 * MPOL_PREFERRED for what it allocates), leaving puts back what it had. For the threads of
 * modules that start their own (the NVMe I/O engines) without telling them of nodes.
 * node < 0: both do nothing. */
typedef struct zt_numa_scope {
    int entered;
    cpu_set_t cpus;
    int mode;
    unsigned long mask[16]; /* nodes 0..1023, as ztier.numa_node allows */
} zt_numa_scope;

void zt_numa_scope_enter(zt_numa_scope *s, int node);
void zt_numa_scope_leave(zt_numa_scope *s);

#endif

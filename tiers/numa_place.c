/* SPDX-License-Identifier: MIT */
#include "tiers/numa_place.h"
#include "core/align.h"
#include "core/log.h"

#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <stdatomic.h>
#include <string.h>

void zt_numa_place(void *ptr, uint64_t bytes, int node, const char *owner)
{
    static atomic_int warned;
    if (node < 0 || !ptr || !bytes)
        return;
    struct bitmask *mask = numa_allocate_nodemask();
    if (!mask)
        return;
    numa_bitmask_setbit(mask, (unsigned)node);
    long rc = mbind(ptr, zt_round_up(bytes, ZT_PAGE_BYTES), MPOL_PREFERRED, mask->maskp,
                    mask->size + 1, MPOL_MF_MOVE);
    int e = errno;
    numa_bitmask_free(mask);
    if (rc != 0 && atomic_fetch_add(&warned, 1) == 0)
        ZT_LOGW("numa",
                "cannot place %llu bytes of '%s' on NUMA node %d (mbind: %s): they stay where "
                "the system puts them; further refusals are not logged",
                (unsigned long long)bytes, owner, node, strerror(e));
}

void zt_numa_scope_enter(zt_numa_scope *s, int node)
{
    s->entered = 0;
    if (node < 0 || sched_getaffinity(0, sizeof s->cpus, &s->cpus) != 0 ||
        get_mempolicy(&s->mode, s->mask, sizeof s->mask * 8, NULL, 0) != 0)
        return;
    s->entered = 1;
    if (numa_run_on_node(node) != 0)
        ZT_LOGW("numa", "cannot run on NUMA node %d: the I/O threads started now stay unbound",
                node);
    numa_set_preferred(node);
}

void zt_numa_scope_leave(zt_numa_scope *s)
{
    if (!s->entered)
        return;
    sched_setaffinity(0, sizeof s->cpus, &s->cpus);
    set_mempolicy(s->mode, s->mode == MPOL_DEFAULT ? NULL : s->mask, sizeof s->mask * 8);
    s->entered = 0;
}

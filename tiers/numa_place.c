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

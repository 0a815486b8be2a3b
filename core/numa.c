/* SPDX-License-Identifier: MIT */
#include "core/numa.h"
#include "core/log.h"
#include "core/test_hooks.h"

#include <numa.h>
#include <stdio.h>

int zt_numa_node_of_pci(const char *sysfs_root, const char *bus_id)
{
    unsigned domain, bus, dev, fn;
    char tail;
    if (!bus_id || sscanf(bus_id, "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4)
        return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", sysfs_root,
             domain, bus, dev, fn);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int node = -1;
    if (fscanf(f, "%d", &node) != 1 || node < 0)
        node = -1;
    fclose(f);
    return node;
}

int zt_numa_node_of_gpu(const char *bus_id)
{
    return zt_numa_node_of_pci(zt_test_sysfs_root(), bus_id);
}

void zt_numa_describe_nodes(char *buf, size_t len)
{
    struct bitmask *allowed = numa_get_mems_allowed();
    size_t used = 0;
    buf[0] = '\0';
    for (int n = 0; allowed && n <= numa_max_node() && used < len; n++)
        if (numa_bitmask_isbitset(allowed, (unsigned)n)) {
            int w = snprintf(buf + used, len - used, "%s%d", used ? ", " : "", n);
            used += w > 0 ? (size_t)w : 0;
        }
    if (allowed)
        numa_bitmask_free(allowed);
}

static int node_allowed(int node)
{
    if (node > numa_max_node())
        return 0;
    struct bitmask *allowed = numa_get_mems_allowed();
    int ok = allowed && numa_bitmask_isbitset(allowed, (unsigned)node);
    if (allowed)
        numa_bitmask_free(allowed);
    return ok;
}

zt_status zt_numa_check_node(int node, const char *key, int *bound, zt_error *err)
{
    *bound = -1;
    if (node < 0)
        return ZT_OK;
    if (numa_available() < 0) { /* bound to nothing: the placement the user asked is not had */
        ZT_LOGW("numa",
                "%s = %d, but libnuma reports no NUMA support on this machine: host buffers and "
                "optimizer threads stay where the system puts them",
                key, node);
        return ZT_OK;
    }
    if (!node_allowed(node)) {
        char nodes[256];
        zt_numa_describe_nodes(nodes, sizeof nodes);
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "%s = %d: this process has no NUMA node %d (the nodes it may use: %s); "
                      "set one of those, or -1 (\"auto\": the GPU's node)",
                      key, node, node, nodes[0] ? nodes : "none");
    }
    /* libnuma caches each node's CPU mask on first use without a lock: two threads binding at
     * once (the pool's workers, a thread starting I/O engines) may both fill it and leak one
     * mask. Fill it here, on the one thread that checks the node before anything binds. */
    struct bitmask *cpus = numa_allocate_cpumask();
    if (cpus) {
        numa_node_to_cpus(node, cpus);
        numa_free_cpumask(cpus);
    }
    *bound = node;
    return ZT_OK;
}

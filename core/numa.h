/* SPDX-License-Identifier: MIT */
/* Which NUMA node a rank's host memory and CPU threads belong on: the node of its GPU, read
 * from the GPU's PCI bus id under /sys, or the node the configuration names, checked against
 * the nodes this process may use (libnuma). The placing itself is tiers/numa_place.h's. */
#ifndef ZT_CORE_NUMA_H
#define ZT_CORE_NUMA_H

#include "core/error.h"

#include <stddef.h>

/* The node sysfs gives for PCI device bus_id ("0000:3B:00.0" as CUDA writes it, or with an
 * 8-digit domain; any case) under sysfs_root ("/sys"): <root>/bus/pci/devices/<domain:bus:
 * dev.fn in lower-case hex, 4-digit domain>/numa_node. -1 where the file says -1 (a machine
 * without NUMA, or firmware that does not tell), is missing or unreadable, or bus_id does not
 * parse. */
int zt_numa_node_of_pci(const char *sysfs_root, const char *bus_id);

/* The same under the machine's /sys (a test's fake tree in the tests' archive:
 * $ZT_TEST_SYSFS_ROOT, core/test_hooks.h). */
int zt_numa_node_of_gpu(const char *bus_id);

/* Checks a node to bind to; key names the setting in messages ("ztier.numa_node").
 * node < 0: *bound = -1 (no binding). A node this process may not allocate on (not in
 * numa_get_mems_allowed: absent, or outside its cpuset): ZT_ERR_CONFIG naming the node and
 * the nodes there are. libnuma reporting no NUMA support: a warning, *bound = -1. Else
 * *bound = node. */
zt_status zt_numa_check_node(int node, const char *key, int *bound, zt_error *err);

/* "0, 1" or "0-3": the nodes this process may allocate on, into buf. */
void zt_numa_describe_nodes(char *buf, size_t len);

#endif

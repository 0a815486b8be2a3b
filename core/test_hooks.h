/* SPDX-License-Identifier: MIT */
/* Fault points for tests of crash safety. In the tests' archive (ztier_test, whose objects
 * that call hooks are compiled with ZT_TEST_HOOKS; zt_test_hooks in CMakeLists.txt), a
 * process whose $ZT_TEST_CRASH_AT is n kills itself with SIGKILL at the n-th crash point it
 * passes (counting from 1), as `kill -9` would at that moment; $ZT_TEST_NODE_OF forces a
 * node layout (zt_test_node_of); a process whose $ZT_TEST_DELAY_AT names a delay point sleeps
 * $ZT_TEST_DELAY_S seconds there each time it passes it (a rank that stalls, or that its
 * peers cannot reach for that long). The shipped libraries (ztier, ztier_static) compile the
 * calls away and have no such function. */
#ifndef ZT_CORE_TEST_HOOKS_H
#define ZT_CORE_TEST_HOOKS_H

#include <stdint.h>

#ifdef ZT_TEST_HOOKS
void zt_test_crash_point(const char *where);
/* The node layout a test forces (comm/topology.c): $ZT_TEST_NODE_OF, a comma-separated node
 * id per rank ("0,0,1,2": ranks 0 and 1 on one node, 2 and 3 on one each), instead of the
 * one the comm backend finds (on one machine, one node). Fills node_id with up to size ids and
 * returns how many the variable gives (more than size: size + 1), 0 when it is not set. */
int zt_test_node_of(int size, int64_t *node_id);
void zt_test_delay_point(const char *where);
/* $ZT_TEST_ADAM_RATES "cpu,device": the Adam rates (elements/s) that offload_optimizer.ratio
 * "auto" takes instead of those it measured (runtime/opt_split.c). 1 when set. */
int zt_test_adam_rates(double *cpu, double *device);
/* $ZT_TEST_FORWARD_S "s0,s1,...": the forward time (seconds) the runtime records for its
 * i-th measured step instead of the one it measured (runtime/fwd_time.c); the last one
 * for every later step. 1 when set. */
int zt_test_forward_s(int64_t i, double *s);
/* The root of the sysfs tree core/numa.c reads a GPU's NUMA node from: $ZT_TEST_SYSFS_ROOT
 * (a test's fake tree), else "/sys". */
const char *zt_test_sysfs_root(void);
#else
#define zt_test_crash_point(where) ((void)0)
#define zt_test_node_of(size, node_id) ((void)(size), (void)(node_id), 0)
#define zt_test_delay_point(where) ((void)0)
#define zt_test_adam_rates(cpu, device) ((void)(cpu), (void)(device), 0)
#define zt_test_forward_s(i, s) ((void)(i), (void)(s), 0)
#define zt_test_sysfs_root() "/sys"
#endif

#endif

/* SPDX-License-Identifier: MIT */
/* Compiled only into the tests' archive, ztier_test (zt_test_hooks in CMakeLists.txt). */
#include "core/test_hooks.h"
#include "core/log.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ZT_TEST_HOOKS
#error "core/test_hooks.c belongs to the tests' archive only (built with ZT_TEST_HOOKS)"
#endif

void zt_test_crash_point(const char *where)
{
    static long passed;
    const char *at = getenv("ZT_TEST_CRASH_AT");
    if (!at || atol(at) <= 0)
        return;
    if (++passed == atol(at)) {
        ZT_LOGD("test", "crash point %ld: %s", passed, where);
        raise(SIGKILL);
    }
}

int zt_test_node_of(int size, int64_t *node_id)
{
    const char *s = getenv("ZT_TEST_NODE_OF");
    if (!s || !*s)
        return 0;
    int n = 0;
    for (char *end = NULL; *s; s = *end ? end + 1 : end, n++) {
        long long v = strtoll(s, &end, 10);
        if (end == s) /* not a number: counted, so that the count is wrong and says so */
            return size + 1;
        if (n < size)
            node_id[n] = v;
    }
    return n > size ? size + 1 : n;
}

void zt_test_delay_point(const char *where)
{
    const char *at = getenv("ZT_TEST_DELAY_AT"), *secs = getenv("ZT_TEST_DELAY_S");
    if (!at || strcmp(at, where) != 0 || !secs || atof(secs) <= 0)
        return;
    ZT_LOGD("test", "delay point '%s': %s s", where, secs);
    double s = atof(secs);
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0)
        ;
}

int zt_test_adam_rates(double *cpu, double *device)
{
    const char *s = getenv("ZT_TEST_ADAM_RATES");
    char *end = NULL;
    if (!s || !*s)
        return 0;
    double c = strtod(s, &end);
    if (*end != ',' || c <= 0 || strtod(end + 1, NULL) <= 0)
        return 0;
    *cpu = c;
    *device = strtod(end + 1, NULL);
    ZT_LOGD("test", "Adam rates %g (CPU), %g (device) from ZT_TEST_ADAM_RATES", c, *device);
    return 1;
}

int zt_test_forward_s(int64_t i, double *s)
{
    const char *p = getenv("ZT_TEST_FORWARD_S");
    if (!p || !*p)
        return 0;
    double v = 0;
    for (int64_t k = 0; *p; k++) {
        char *end = NULL;
        double x = strtod(p, &end);
        if (end == p || x < 0)
            return 0;
        v = x;
        if (k == i || *end != ',')
            break;
        p = end + 1;
    }
    *s = v;
    ZT_LOGD("test", "forward time %g s for measured step %lld from ZT_TEST_FORWARD_S", v,
            (long long)i);
    return 1;
}

const char *zt_test_sysfs_root(void)
{
    const char *root = getenv("ZT_TEST_SYSFS_ROOT");
    return root && *root ? root : "/sys";
}

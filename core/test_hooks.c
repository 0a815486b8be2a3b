/* SPDX-License-Identifier: MIT */
/* Compiled only into the tests' archive, ztier_test (zt_test_hooks in CMakeLists.txt). */
#include "core/test_hooks.h"
#include "core/log.h"

#include <signal.h>
#include <stdlib.h>

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

#include "core/test_hooks.h"

#ifdef ZT_TEST_HOOKS
#include "core/log.h"

#include <signal.h>
#include <stdlib.h>

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
#else
typedef int zt_test_hooks_unused; /* ISO C forbids an empty translation unit */
#endif

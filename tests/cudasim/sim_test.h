/* SPDX-License-Identifier: MIT */
/* What the stand-in's tests share: reading back a finding the test provoked, and skipping,
 * in the ThreadSanitizer build, the tests whose bug is a data race on purpose (TSan reports
 * it, as cudasim_tsan_finds_races shows; here it would fail the run). */
#ifndef ZT_TESTS_SIM_TEST_H
#define ZT_TESTS_SIM_TEST_H

#include "cudasim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

/* At least one finding since the last reset, the last naming both needles (needle2 may be
 * NULL); resets. */
static inline void expect_finding(const char *needle1, const char *needle2)
{
    assert_true(cudasim_findings() >= 1);
    const char *msg = cudasim_last_finding();
    if (!strstr(msg, needle1) || (needle2 && !strstr(msg, needle2)))
        fail_msg("finding \"%s\" does not name \"%s\"%s%s", msg, needle1, needle2 ? " and " : "",
                 needle2 ? needle2 : "");
    cudasim_reset_findings();
}

#if defined(__SANITIZE_THREAD__)
#define SKIP_RACE_UNDER_TSAN()                                                    \
    do {                                                                          \
        print_message("a data race on purpose: skipped under ThreadSanitizer\n"); \
        skip();                                                                   \
    } while (0)
#else
#define SKIP_RACE_UNDER_TSAN() ((void)0)
#endif

#endif

/* SPDX-License-Identifier: MIT */
/* EXPECT: a check that does not stop the test. A false condition prints the line and the
 * message, and counts one more in the including file's `static int failures`. */
#ifndef ZT_TESTS_EXPECT_H
#define ZT_TESTS_EXPECT_H

#include <stdio.h>

#define EXPECT(cond, ...)                           \
    do {                                            \
        if (!(cond)) {                              \
            printf("  FAIL (line %d): ", __LINE__); \
            printf(__VA_ARGS__);                    \
            printf("\n");                           \
            failures++;                             \
        }                                           \
    } while (0)

#endif

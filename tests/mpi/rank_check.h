/* SPDX-License-Identifier: MIT */
/* CHECK for the MPI test programs: a failed condition is printed with its line and counted in
 * `failures`, and the rank goes on (so every rank reaches the collectives the others wait in);
 * the program returns failures != 0 at its end. */
#ifndef ZT_TESTS_MPI_RANK_CHECK_H
#define ZT_TESTS_MPI_RANK_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                 \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "rank check failed at line %d: ", __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                \
            fprintf(stderr, "\n");                                       \
            failures++;                                                  \
        }                                                                \
    } while (0)

#endif

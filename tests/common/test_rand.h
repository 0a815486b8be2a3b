/* SPDX-License-Identifier: MIT */
/* Reproducible test inputs: uniform floats from a xorshift64 state the test seeds, so every
 * run and every machine draws the same values. */
#ifndef ZT_TESTS_TEST_RAND_H
#define ZT_TESTS_TEST_RAND_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* A float in [lo, hi), moving *state on. */
static inline float test_rand_float(uint64_t *state, float lo, float hi)
{
    uint64_t s = *state;
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    *state = s;
    return (float)((double)(s >> 11) * 0x1.0p-53 * ((double)hi - lo) + lo);
}

/* n such floats in a new array (free it); exits when out of memory. */
static inline float *test_rand_floats(uint64_t *state, size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p)
        exit(1);
    for (size_t i = 0; i < n; i++)
        p[i] = test_rand_float(state, lo, hi);
    return p;
}

#endif

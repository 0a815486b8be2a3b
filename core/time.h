/* SPDX-License-Identifier: MIT */
/* The monotonic clock every timing in ztier reads. */
#ifndef ZT_CORE_TIME_H
#define ZT_CORE_TIME_H

#include <time.h>

/* Seconds of CLOCK_MONOTONIC. */
static inline double zt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif

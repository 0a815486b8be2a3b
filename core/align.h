/* SPDX-License-Identifier: MIT */
/* Rounding sizes up to alignments (pages for O_DIRECT and the host tier). */
#ifndef ZT_CORE_ALIGN_H
#define ZT_CORE_ALIGN_H

#include <stdint.h>

#define ZT_PAGE_BYTES 4096u

/* x rounded up to a multiple of m (m > 0). */
static inline uint64_t zt_round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }

#endif

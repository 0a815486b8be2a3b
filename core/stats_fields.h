/* SPDX-License-Identifier: MIT */
/* The one list of zt_stats' counters: name, place, type, unit and meaning of each, in the
 * struct's order. zt_stats_format prints from it; tests check that it covers every byte of
 * zt_stats, so a counter added to the struct and not here fails them. */
#ifndef ZT_CORE_STATS_FIELDS_H
#define ZT_CORE_STATS_FIELDS_H

#include "ztier.h"

#include <stddef.h>

typedef enum zt_stat_kind { ZT_STAT_U64, ZT_STAT_U32, ZT_STAT_F64 } zt_stat_kind;

typedef struct zt_stats_field {
    const char *name;
    size_t offset;
    zt_stat_kind kind;
    const char *unit; /* "B", "s" or "" (a count) */
    const char *what;
} zt_stats_field;

/* Terminated by a NULL name. */
extern const zt_stats_field zt_stats_fields[];
size_t zt_stats_field_size(zt_stat_kind kind);

#endif

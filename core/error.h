/* SPDX-License-Identifier: MIT */
/* Internal error records: a status plus a message with file:line, filled by the module that
 * found the problem and copied into the runtime's last-error text by the API layer. */
#ifndef ZT_CORE_ERROR_H
#define ZT_CORE_ERROR_H

#include "core/export.h"
#include "ztier.h"

#include <stddef.h>

#define ZT_ERROR_MSG_MAX 1024

typedef struct zt_error {
    zt_status status;
    char msg[ZT_ERROR_MSG_MAX];
} zt_error;

/* Records status s and a printf-style message; returns s so callers can `return ZT_ERR(...)`.
 * e may be NULL (the error is then only returned). Never allocates. */
ZT_MODULE_API zt_status zt_error_set(zt_error *e, zt_status s, const char *file, int line,
                                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Prepends context ("layer 'h3': ") to an already recorded message. */
ZT_MODULE_API void zt_error_prefix(zt_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void zt_error_clear(zt_error *e);

/* Shortens s in place to at most max characters by eliding the middle of its longest
 * '...'-quoted part (a path, a name) with "...", else the middle of the text: a message
 * keeps its start (what failed) and its end (why, and the fix). */
void zt_text_shorten(char *s, size_t max);

#define ZT_ERR(e, s, ...) zt_error_set((e), (s), __FILE__, __LINE__, __VA_ARGS__)

/* Maps -errno from the I/O layer to a status: ENOSPC/EDQUOT -> NOSPACE, ENOMEM -> NOMEM, ... */
zt_status zt_status_from_errno(int err);

#endif

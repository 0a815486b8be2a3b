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

/* Records status s and a printf-style message followed by " [file:line]"; returns s so callers
 * can `return ZT_ERR(...)`. e may be NULL (the error is then only returned). A message longer
 * than the record loses the middle (of its longest quoted part first), never its start (what
 * failed), its end (why, the fix) or the [file:line]. Allocates only for a text above 4 KiB
 * (if that fails, the text's end is cut, the [file:line] still kept). */
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

/* Writes s between quote characters q (0: none) into buf (n >= ZT_QUOTE_MAX bytes; less is
 * cut): a text of more than 80 bytes keeps its first 60 and last 20 (whole UTF-8 characters)
 * with "..." between, followed by " (N characters)". For user values quoted in messages (a
 * path, a JSON value), so a long one never pushes the reason out. Returns buf. */
#define ZT_QUOTE_MAX 128
const char *zt_text_quote(char *buf, size_t n, const char *s, char q);

#define ZT_ERR(e, s, ...) zt_error_set((e), (s), __FILE__, __LINE__, __VA_ARGS__)

/* Maps -errno from the I/O layer to a status: ENOSPC/EDQUOT -> NOSPACE, ENOMEM -> NOMEM, ... */
zt_status zt_status_from_errno(int err);

#endif

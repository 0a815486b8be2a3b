/* SPDX-License-Identifier: MIT */
#include "core/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The longest '...' quoted part of s (a path, a name), as [*start, *end) inside the quotes;
 * 0 when there is none. */
static int longest_quoted(const char *s, size_t *start, size_t *end)
{
    size_t best = 0;
    for (const char *open = strchr(s, '\''); open; open = strchr(open + 1, '\'')) {
        const char *close = strchr(open + 1, '\'');
        if (!close)
            break;
        if ((size_t)(close - open - 1) > best) {
            best = (size_t)(close - open - 1);
            *start = (size_t)(open + 1 - s), *end = (size_t)(close - s);
        }
        open = close;
    }
    return best > 0;
}

void zt_text_shorten(char *s, size_t max)
{
    static const char dots[] = "...";
    size_t len = strlen(s), a = 0, b = 0;
    while (len > max) {
        size_t excess = len - max;
        int quoted = longest_quoted(s, &a, &b) && b - a > 24;
        if (!quoted) /* no long name to shorten: drop the middle of the text */
            a = 0, b = len;
        size_t seg = b - a, keep = seg > excess + 3 + 16 ? seg - excess - 3 : 16;
        if (keep + 3 >= seg)
            keep = seg > 8 ? seg / 2 : 0;
        size_t head = keep / 2, tail = keep - head;
        memcpy(s + a + head, dots, 3);
        memmove(s + a + head + 3, s + b - tail, len - (b - tail) + 1);
        len = strlen(s);
        if (keep == 0)
            break;
    }
    s[max < len ? max : len] = '\0';
}

zt_status zt_error_set(zt_error *e, zt_status s, const char *file, int line, const char *fmt, ...)
{
    if (!e)
        return s;
    e->status = s;
    char text[4 * ZT_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
    snprintf(text + len, sizeof text - len, " [%s:%d]", base_name(file), line);
    /* long paths are shortened in the middle, so the cause and the fix always fit */
    zt_text_shorten(text, sizeof e->msg - 1);
    memcpy(e->msg, text, strlen(text) + 1);
    return s;
}

void zt_error_prefix(zt_error *e, const char *fmt, ...)
{
    if (!e)
        return;
    char text[2 * ZT_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, ZT_ERROR_MSG_MAX, fmt, ap);
    va_end(ap);
    size_t plen = n < 0 ? 0 : (size_t)n < ZT_ERROR_MSG_MAX ? (size_t)n : ZT_ERROR_MSG_MAX - 1;
    memcpy(text + plen, e->msg, strlen(e->msg) + 1);
    zt_text_shorten(text, sizeof e->msg - 1);
    memcpy(e->msg, text, strlen(text) + 1);
}

void zt_error_clear(zt_error *e)
{
    if (!e)
        return;
    e->status = ZT_OK;
    e->msg[0] = '\0';
}

zt_status zt_status_from_errno(int err)
{
    if (err < 0)
        err = -err;
    switch (err) {
    case 0:
        return ZT_OK;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return ZT_ERR_NOSPACE;
    case ENOMEM:
        return ZT_ERR_NOMEM;
    case EINVAL:
        return ZT_ERR_ARGUMENT;
    case EOPNOTSUPP:
    case ENOSYS:
        return ZT_ERR_UNSUPPORTED;
    case EBADMSG:
        return ZT_ERR_CORRUPT;
    default:
        return ZT_ERR_IO;
    }
}

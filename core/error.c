/* SPDX-License-Identifier: MIT */
#include "core/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The longest '...' quoted part of s (a path, a name), as [*start, *end) inside the quotes;
 * 0 when there is none. A quote inside a word (ztier's) neither opens nor closes one. */
static int longest_quoted(const char *s, size_t *start, size_t *end)
{
    size_t best = 0;
    for (const char *open = strchr(s, '\''); open; open = strchr(open + 1, '\'')) {
        if (open > s && word_char(open[-1]))
            continue;
        const char *close = strchr(open + 1, '\'');
        while (close && word_char(close[1]))
            close = strchr(close + 1, '\'');
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

static int is_continuation(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

const char *zt_text_quote(char *buf, size_t n, const char *s, char q)
{
    size_t len = strlen(s), head = 60, tail = len - 20, chars = 0;
    char quote[2] = {q, '\0'};
    if (len <= 80) {
        snprintf(buf, n, "%s%s%s", quote, s, quote);
        return buf;
    }
    while (head > 0 && is_continuation(s[head])) /* whole UTF-8 characters at both cuts */
        head--;
    while (tail < len && is_continuation(s[tail]))
        tail++;
    for (size_t i = 0; i < len; i++)
        chars += !is_continuation(s[i]);
    snprintf(buf, n, "%s%.*s...%s%s (%zu characters)", quote, (int)head, s, s + tail, quote, chars);
    return buf;
}

zt_status zt_error_set(zt_error *e, zt_status s, const char *file, int line, const char *fmt, ...)
{
    if (!e)
        return s;
    e->status = s;
    char stack[4 * ZT_ERROR_MSG_MAX], where[96], *text = stack;
    int wlen = snprintf(where, sizeof where, " [%s:%d]", base_name(file), line);
    size_t room = sizeof stack - (size_t)wlen - 4; /* the [file:line] always fits after */
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(stack, room, fmt, ap);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (len >= room) { /* a long text: formatted whole, so its end (why, the fix) stays */
        char *big = malloc(len + (size_t)wlen + 1);
        if (big && vsnprintf(big, len + 1, fmt, again) == n)
            text = big;
        else
            free(big), len = room - 1, memcpy(stack + len - 3, "...", 3);
    }
    va_end(again);
    va_end(ap);
    memcpy(text + len, where, (size_t)wlen + 1);
    /* long texts are shortened in the middle, so the cause, the fix and [file:line] fit */
    zt_text_shorten(text, sizeof e->msg - 1);
    memcpy(e->msg, text, strlen(text) + 1);
    if (text != stack)
        free(text);
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

/* SPDX-License-Identifier: MIT */
/* The JSON scanner of config_scan.h: a recursive descent over the text that checks the
 * grammar as strictly as jansson (numbers, escapes, UTF-8, no \u0000, depth 2048), so that
 * a value it skips could not have hidden a syntax error, and keeps the keys of each object
 * it scans to find repeated ones. */
#include "runtime/config_scan.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 2048 /* jansson's JSON_PARSER_MAX_DEPTH */

typedef struct scanner {
    const unsigned char *s;
    size_t len, at;
    int line;          /* of s[at] */
    size_t line_start; /* offset of that line's first byte */
    const zt_json_scan_ops *ops;
} scanner;

/* A key of the object being scanned: its decoded name and where it was written. */
typedef struct key_seen {
    char *name;
    size_t name_len, order, offset, line_start;
    int line;
} key_seen;

static int peek(const scanner *sc) { return sc->at < sc->len ? sc->s[sc->at] : -1; }

static void skip_ws(scanner *sc)
{
    for (; sc->at < sc->len; sc->at++) {
        unsigned char c = sc->s[sc->at];
        if (c == '\n')
            sc->line++, sc->line_start = sc->at + 1;
        else if (c != ' ' && c != '\t' && c != '\r')
            return;
    }
}

static zt_json_pos position(const scanner *sc, int line, size_t line_start, size_t offset)
{
    zt_json_pos p = {line, 1};
    for (size_t i = line_start; i < offset; i++)
        p.column += (sc->s[i] & 0xC0) != 0x80; /* characters, as jansson counts them */
    return p;
}

/* ---- strings ---- */

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 when invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : 2;
    if (p[0] < 0xC2 || p[0] > 0xF4 || len > n)
        return 0;
    uint32_t cp = p[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80)
        return out[0] = (char)cp, 1;
    if (cp < 0x800)
        return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        return out[2] = (char)(0x80 | (cp & 0x3F)), 3;
    }
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One \uXXXX escape (a surrogate pair counts as one) at s[at] just after the 'u'; the code
 * point in *cp; the bytes it took in *used. -1 where jansson refuses it. */
static int unicode_escape(const scanner *sc, size_t at, uint32_t *cp, size_t *used)
{
    unsigned hi, lo;
    if (at + 4 > sc->len || hex4(sc->s + at, &hi) != 0 || hi == 0 || (hi >= 0xDC00 && hi <= 0xDFFF))
        return -1;
    *cp = hi, *used = 4;
    if (hi < 0xD800 || hi > 0xDBFF)
        return 0;
    if (at + 10 > sc->len || sc->s[at + 4] != '\\' || sc->s[at + 5] != 'u' ||
        hex4(sc->s + at + 6, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
        return -1;
    *cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00), *used = 10;
    return 0;
}

/* A string at s[at] == '"'. With out, its decoded text (malloc'd, NUL-terminated; the
 * caller frees it) and length. */
static int scan_string(scanner *sc, char **out, size_t *out_len)
{
    size_t start = ++sc->at, n = 0;
    char *text = NULL;
    if (out) { /* decoded text is never longer than the written one */
        size_t end = start;
        while (end < sc->len && sc->s[end] != '"')
            end += sc->s[end] == '\\' ? 2 : 1;
        if (!(text = malloc(end - start + 1)))
            return -1;
    }
    while (sc->at < sc->len) {
        unsigned char c = sc->s[sc->at];
        if (c == '"') {
            sc->at++;
            if (out)
                text[n] = '\0', *out = text, *out_len = n;
            return 0;
        }
        if (c < 0x20)
            break;
        if (c >= 0x80) {
            size_t len = utf8_len(sc->s + sc->at, sc->len - sc->at);
            if (!len)
                break;
            if (text)
                memcpy(text + n, sc->s + sc->at, len), n += len;
            sc->at += len;
            continue;
        }
        if (c != '\\') {
            if (text)
                text[n++] = (char)c;
            sc->at++;
            continue;
        }
        int e = sc->at + 1 < sc->len ? sc->s[sc->at + 1] : -1;
        const char *simple = strchr("\"\\/bfnrt", e > 0 ? e : 'x');
        if (simple && e > 0) {
            if (text)
                text[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            sc->at += 2;
            continue;
        }
        uint32_t cp;
        size_t used;
        if (e != 'u' || unicode_escape(sc, sc->at + 2, &cp, &used) != 0)
            break;
        if (text)
            n += put_utf8(text + n, cp);
        sc->at += 2 + used;
    }
    free(text);
    return -1;
}

/* ---- numbers and literals ---- */

static size_t digits(const scanner *sc, size_t at)
{
    size_t n = 0;
    while (at + n < sc->len && sc->s[at + n] >= '0' && sc->s[at + n] <= '9')
        n++;
    return n;
}

/* jansson refuses an integer outside long long and a real beyond double's range. */
static int number_fits(const scanner *sc, size_t start, size_t end, int integer)
{
    char small[64], *num = end - start < sizeof small ? small : malloc(end - start + 1);
    if (!num)
        return 0;
    memcpy(num, sc->s + start, end - start);
    num[end - start] = '\0';
    errno = 0;
    double d = integer ? (double)strtoll(num, NULL, 10) : strtod(num, NULL);
    int fits = errno != ERANGE || (!integer && d != HUGE_VAL && d != -HUGE_VAL);
    if (num != small)
        free(num);
    return fits;
}

static int scan_number(scanner *sc)
{
    size_t at = sc->at + (sc->s[sc->at] == '-');
    size_t n = digits(sc, at);
    int integer = 1, exponent = 0;
    if (n == 0 || (n > 1 && sc->s[at] == '0'))
        return -1;
    at += n;
    if (at < sc->len && sc->s[at] == '.') {
        if ((n = digits(sc, at + 1)) == 0)
            return -1;
        at += 1 + n, integer = 0;
    }
    if (at < sc->len && (sc->s[at] == 'e' || sc->s[at] == 'E')) {
        at += 1 + (at + 1 < sc->len && (sc->s[at + 1] == '+' || sc->s[at + 1] == '-'));
        if ((n = digits(sc, at)) == 0)
            return -1;
        at += n, integer = 0, exponent = 1;
    }
    /* only a long number or one with an exponent can be out of range */
    if ((at - sc->at > 18 || exponent) && !number_fits(sc, sc->at, at, integer))
        return -1;
    sc->at = at;
    return 0;
}

static int scan_literal(scanner *sc, const char *word)
{
    size_t n = strlen(word);
    if (sc->len - sc->at < n || memcmp(sc->s + sc->at, word, n) != 0)
        return -1;
    sc->at += n;
    return 0;
}

/* ---- values ---- */

static int scan_value(scanner *sc, int depth, const char *path);

/* The object's keys sorted by name, then by order: repeated names are neighbours. */
static int key_cmp(const void *a, const void *b)
{
    const key_seen *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c == 0 && x->name_len != y->name_len)
        c = x->name_len < y->name_len ? -1 : 1;
    return c ? c : x->order < y->order ? -1 : 1;
}

static char *join(const char *prefix, const char *name)
{
    size_t n = strlen(prefix) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%s%s", prefix, *prefix ? "." : "", name);
    return p;
}

static void report_duplicates(const scanner *sc, key_seen *keys, size_t n, const char *path)
{
    if (!sc->ops->duplicate || n < 2)
        return;
    qsort(keys, n, sizeof *keys, key_cmp);
    for (size_t i = 1; i < n; i++) {
        if (keys[i].name_len != keys[i - 1].name_len ||
            memcmp(keys[i].name, keys[i - 1].name, keys[i].name_len) != 0)
            continue;
        char *full = join(path, keys[i].name);
        if (full)
            sc->ops->duplicate(
                sc->ops->user, full,
                position(sc, keys[i - 1].line, keys[i - 1].line_start, keys[i - 1].offset),
                position(sc, keys[i].line, keys[i].line_start, keys[i].offset));
        free(full);
    }
}

/* A member's value: asks whether to skip an object or array (path != NULL: scanned). */
static int scan_member_value(scanner *sc, int depth, const char *path, const char *name)
{
    if (!path)
        return scan_value(sc, depth, NULL);
    char *full = join(path, name);
    if (!full)
        return -1;
    int c = peek(sc), skip = 0, rc;
    if ((c == '{' || c == '[') && sc->ops->skip)
        skip = sc->ops->skip(sc->ops->user, full, name);
    size_t start = sc->at;
    rc = scan_value(sc, depth, skip ? NULL : full);
    free(full);
    if (rc == 0 && skip && sc->ops->skipped)
        sc->ops->skipped(sc->ops->user, start, sc->at);
    return rc;
}

/* An object at '{'; path NULL: syntax only. */
static int scan_object(scanner *sc, int depth, const char *path)
{
    key_seen *keys = NULL;
    size_t n = 0, cap = 0;
    int rc = -1;
    sc->at++;
    skip_ws(sc);
    if (peek(sc) == '}') {
        sc->at++;
        return 0;
    }
    for (;;) {
        skip_ws(sc);
        if (peek(sc) != '"')
            break;
        key_seen k = {NULL, 0, n, sc->at, sc->line_start, sc->line};
        if (path && n == cap) {
            key_seen *more = realloc(keys, sizeof *keys * (cap = cap ? 2 * cap : 8));
            if (!more)
                break;
            keys = more;
        }
        if (scan_string(sc, path ? &k.name : NULL, &k.name_len) != 0)
            break;
        if (path)
            keys[n++] = k;
        skip_ws(sc);
        if (peek(sc) != ':')
            break;
        sc->at++;
        skip_ws(sc);
        if (scan_member_value(sc, depth, path, k.name) != 0)
            break;
        skip_ws(sc);
        int c = peek(sc);
        sc->at++;
        if (c == '}') {
            rc = 0;
            break;
        }
        if (c != ',')
            break;
    }
    if (rc == 0 && path)
        report_duplicates(sc, keys, n, path);
    for (size_t i = 0; i < n; i++)
        free(keys[i].name);
    free(keys);
    return rc;
}

/* An array at '['; its elements' paths are "path[i]". */
static int scan_array(scanner *sc, int depth, const char *path)
{
    sc->at++;
    skip_ws(sc);
    if (peek(sc) == ']') {
        sc->at++;
        return 0;
    }
    for (size_t i = 0;; i++) {
        char *item = NULL;
        if (path) {
            size_t len = strlen(path) + 24;
            if (!(item = malloc(len)))
                return -1;
            snprintf(item, len, "%s[%zu]", path, i);
        }
        int rc = scan_value(sc, depth, item);
        free(item);
        if (rc != 0)
            return -1;
        skip_ws(sc);
        int c = peek(sc);
        sc->at++;
        if (c == ']')
            return 0;
        if (c != ',')
            return -1;
    }
}

static int scan_value(scanner *sc, int depth, const char *path)
{
    skip_ws(sc);
    switch (peek(sc)) {
    case '{':
        return depth >= MAX_DEPTH ? -1 : scan_object(sc, depth + 1, path);
    case '[':
        return depth >= MAX_DEPTH ? -1 : scan_array(sc, depth + 1, path);
    case '"':
        return scan_string(sc, NULL, NULL);
    case 't':
        return scan_literal(sc, "true");
    case 'f':
        return scan_literal(sc, "false");
    case 'n':
        return scan_literal(sc, "null");
    case -1:
        return -1;
    default:
        return scan_number(sc);
    }
}

int zt_json_scan(const char *text, size_t len, const char *prefix, const zt_json_scan_ops *ops)
{
    scanner sc = {(const unsigned char *)text, len, 0, 1, 0, ops};
    if (scan_value(&sc, 0, prefix ? prefix : "") != 0)
        return -1;
    skip_ws(&sc);
    return sc.at == sc.len ? 0 : -1;
}

void zt_json_blank(char *text, size_t start, size_t end)
{
    if (start >= end)
        return;
    text[start] = '0';
    for (size_t i = start + 1; i < end; i++)
        if (text[i] != '\n' && text[i] != '\r')
            text[i] = ' ';
}

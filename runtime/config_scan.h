/* SPDX-License-Identifier: MIT */
/* A pass over JSON text before jansson builds it (config_parse.c): every object member's
 * dotted path and position, keys given twice in one object (jansson keeps the last one
 * silently), and values the caller will not read, whose bytes it may blank out so that
 * jansson never builds them (50 MB of numbers under an ignored key would take a gigabyte). */
#ifndef ZT_RUNTIME_CONFIG_SCAN_H
#define ZT_RUNTIME_CONFIG_SCAN_H

#include <stddef.h>

/* A place in the text: line and column from 1, the column counted in characters as jansson
 * counts them in its syntax errors. */
typedef struct zt_json_pos {
    int line, column;
} zt_json_pos;

typedef struct zt_json_scan_ops {
    /* A member of an object whose value is an object or an array. path is its dotted path
     * ("zero_optimization.offload_param"; "a[2].b" inside arrays), name the key as written
     * (decoded; it may hold dots). Return 1 to skip the value: its contents are checked for
     * syntax only, and `skipped` gets its bytes; 0 to scan it like the rest. */
    int (*skip)(void *user, const char *path, const char *name);
    /* The bytes [start, end) of a skipped value. The callee may overwrite them in the text
     * (zt_json_blank): the scan has passed them. */
    void (*skipped)(void *user, size_t start, size_t end);
    /* The key at path is given twice in one object: at `first` and again at `again`; the
     * later one is the one jansson keeps. Called once per repetition, when the object ends. */
    void (*duplicate)(void *user, const char *path, zt_json_pos first, zt_json_pos again);
    void *user;
} zt_json_scan_ops;

/* Scans text[0, len): one JSON value of any type, whitespace around it. Member paths start
 * with prefix ("" at the root: "a.b"; "p": "p.a.b"). Returns 0, or -1 where the text is not
 * valid JSON or nests deeper than jansson accepts (2048): no further callbacks then, and
 * jansson says what is wrong. Synchronous; allocates only while it runs. */
int zt_json_scan(const char *text, size_t len, const char *prefix, const zt_json_scan_ops *ops);

/* Overwrites the value text[start, end) with 0 followed by spaces, its line breaks kept,
 * so that jansson reads the number 0 there and reports the same lines for what follows. */
void zt_json_blank(char *text, size_t start, size_t end);

#endif

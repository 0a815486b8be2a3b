/* SPDX-License-Identifier: MIT */
/* Prints docs/config.md: every key of the configuration table (runtime/config_keys.c) with
 * its type, what is allowed, its default (from zt_config_defaults) and its one-line doc.
 *   build/tools/zt_config_doc > docs/config.md
 * tests/docs checks that the file in the tree is this program's output. Exits 1, printing
 * nothing, when a key has no doc. */
#include "runtime/config.h"
#include "runtime/config_keys.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The object a key belongs to: its path up to the last dot ("" at the top level). */
static void parent_of(const char *path, char *out, size_t n)
{
    const char *dot = strrchr(path, '.');
    snprintf(out, n, "%.*s", dot ? (int)(dot - path) : 0, path);
}

static const char *type_name(const zt_config_key *k)
{
    switch (k->kind) {
    case ZT_KEY_INT:
    case ZT_KEY_I64:
        return "integer";
    case ZT_KEY_FLOAT:
        return "number";
    case ZT_KEY_BOOL:
        return "bool";
    case ZT_KEY_BYTES:
        return "bytes";
    case ZT_KEY_ENUM:
    case ZT_KEY_ENUM_STR:
        return "string";
    case ZT_KEY_PATH:
        return "path";
    case ZT_KEY_PATHS:
        return "path or list";
    case ZT_KEY_BETAS:
        return "[number, number]";
    case ZT_KEY_IGNORED:
    case ZT_KEY_DROPPED:
    case ZT_KEY_LEGACY:
        break;
    }
    return "";
}

static void allowed(const zt_config_key *k, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    switch (k->kind) {
    case ZT_KEY_INT:
    case ZT_KEY_I64:
    case ZT_KEY_FLOAT:
    case ZT_KEY_BYTES:
        if (k->max >= ZT_KEY_NO_MAX)
            len = (size_t)snprintf(buf, n, ">= %.17g", k->min);
        else
            len = (size_t)snprintf(buf, n, "%.17g to %.17g", k->min, k->max);
        if (k->multiple && len < n)
            len += (size_t)snprintf(buf + len, n - len, ", a multiple of %d", k->multiple);
        if (k->kind == ZT_KEY_BYTES && len < n)
            len += (size_t)snprintf(buf + len, n - len, "; or a string like \"2G\", \"512M\"");
        break;
    case ZT_KEY_BOOL:
        len = (size_t)snprintf(buf, n, "true, false");
        break;
    case ZT_KEY_ENUM:
    case ZT_KEY_ENUM_STR:
        for (int i = 0; k->values[i] && len < n; i++)
            len += (size_t)snprintf(buf + len, n - len, "%s\"%s\"", i ? ", " : "", k->values[i]);
        break;
    case ZT_KEY_PATH:
        len = (size_t)snprintf(buf, n, "a path; \"\" for none");
        break;
    case ZT_KEY_PATHS:
        len = (size_t)snprintf(buf, n, "a folder, or a list of 1 to %d", ZT_MAX_NVME_PATHS);
        break;
    case ZT_KEY_BETAS:
        len = (size_t)snprintf(buf, n, "each in [0, 1)");
        break;
    case ZT_KEY_IGNORED:
    case ZT_KEY_DROPPED:
    case ZT_KEY_LEGACY:
        break;
    }
    if (k->auto_ok == ZT_AUTO_MODEL && len < n)
        snprintf(buf + len, n - len, "; \"auto\": from the hidden size (ztier.hidden_size)");
    else if (k->auto_ok == ZT_AUTO_MEASURED && len < n)
        snprintf(buf + len, n - len, "; \"auto\": measured at commit");
    else if (k->auto_ok && len < n)
        snprintf(buf + len, n - len, "; \"auto\": the default%s",
                 k->auto_ok == ZT_AUTO_WARNED ? " (it changes training: warned at commit unless "
                                                "a value is given by then)"
                                              : "");
}

/* The value zt_config_defaults gives the key; "unset" where that is outside what the key
 * allows (a sentinel the doc explains). */
static void default_text(const zt_config_key *k, const zt_config *cfg, char *buf, size_t n)
{
    const char *field = (const char *)cfg + k->offset;
    if (k->offset == offsetof(zt_config, pinned_limit) && k->kind == ZT_KEY_BYTES) {
        snprintf(buf, n, "half the RAM"); /* the one default that depends on the machine */
        return;
    }
    switch (k->kind) {
    case ZT_KEY_INT: {
        int v = *(const int *)field;
        if (v < k->min || v > k->max)
            snprintf(buf, n, "unset");
        else
            snprintf(buf, n, "%d", v);
        return;
    }
    case ZT_KEY_I64:
    case ZT_KEY_BYTES: {
        int64_t v = *(const int64_t *)field;
        if ((double)v < k->min || (double)v > k->max)
            snprintf(buf, n, "unset");
        else
            snprintf(buf, n, "%lld", (long long)v);
        return;
    }
    case ZT_KEY_FLOAT:
        snprintf(buf, n, "%g", (double)*(const float *)field);
        return;
    case ZT_KEY_BOOL:
        snprintf(buf, n, "%s", *(const int *)field ? "true" : "false");
        return;
    case ZT_KEY_ENUM: {
        int v = *(const int *)field, count = 0;
        while (k->values[count])
            count++;
        if (v < 0 || v >= count)
            snprintf(buf, n, "unset");
        else
            snprintf(buf, n, "\"%s\"", k->values[v]);
        return;
    }
    case ZT_KEY_ENUM_STR:
    case ZT_KEY_PATH:
        snprintf(buf, n, "\"%.200s\"", field);
        return;
    case ZT_KEY_PATHS: {
        const zt_offload_config *off =
            (const zt_offload_config *)(field - offsetof(zt_offload_config, nvme_path));
        snprintf(buf, n, "%.200s", off->n_nvme_paths ? off->nvme_path[0] : "none");
        return;
    }
    case ZT_KEY_BETAS:
        snprintf(buf, n, "[%g, %g]", (double)cfg->beta1, (double)cfg->beta2);
        return;
    case ZT_KEY_IGNORED:
    case ZT_KEY_DROPPED:
    case ZT_KEY_LEGACY:
        break;
    }
    buf[0] = '\0';
}

/* A table cell: '|' escaped. */
static void cell(const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            putchar('\\');
        putchar(*s);
    }
}

static int is_setting(const zt_config_key *k)
{
    return k->kind != ZT_KEY_IGNORED && k->kind != ZT_KEY_DROPPED && k->kind != ZT_KEY_LEGACY;
}

static void settings_table(const char *parent, const zt_config *cfg)
{
    char p[256], buf[256];
    printf("| key | type | allowed | default | what it does |\n");
    printf("| --- | --- | --- | --- | --- |\n");
    for (const zt_config_key *k = zt_config_keys; k->path; k++) {
        parent_of(k->path, p, sizeof p);
        if (!is_setting(k) || strcmp(p, parent) != 0)
            continue;
        printf("| `%s` | %s | ", k->path, type_name(k));
        allowed(k, buf, sizeof buf);
        cell(buf);
        printf(" | ");
        default_text(k, cfg, buf, sizeof buf);
        cell(buf);
        printf(" | ");
        cell(k->doc);
        printf(" |\n");
    }
}

static void notes_table(zt_key_kind kind)
{
    printf("| key | note |\n| --- | --- |\n");
    for (const zt_config_key *k = zt_config_keys; k->path; k++) {
        if (k->kind != kind)
            continue;
        printf("| `%s` | ", k->path);
        cell(k->doc);
        printf(" |\n");
    }
}

int main(void)
{
    int missing = 0;
    for (const zt_config_key *k = zt_config_keys; k->path; k++)
        if (!k->doc || !*k->doc || strchr(k->doc, '\n')) {
            fprintf(stderr,
                    "zt_config_doc: key '%s' has no one-line doc in "
                    "runtime/config_keys.c\n",
                    k->path);
            missing = 1;
        }
    if (missing)
        return 1;

    zt_config cfg;
    zt_config_defaults(&cfg);
    printf("# Configuration keys\n\n");
    printf("<!-- Generated by tools/config_doc.c from runtime/config_keys.c; do not edit. -->\n");
    printf("This page is generated from the key table in `runtime/config_keys.c` and the "
           "defaults of\n`zt_config_defaults` (`runtime/config.c`). After changing either, "
           "regenerate it from the\nrepository root with\n\n");
    printf("```sh\ncmake --build build --target zt_config_doc && "
           "build/tools/zt_config_doc > docs/config.md\n```\n\n");
    printf("(the `config_doc` test fails while the two differ). How a file, `zt_config_set` "
           "and the\nenvironment combine, and the rules between keys, are in "
           "[configuration.md](configuration.md).\n\n");
    printf("Integer keys also take integral reals (`5e8`); byte counts also take a string "
           "with K, M, G\nor T (powers of 1024); enum strings match in any case.\n");

    /* one table per object, in the order the table first names it */
    char seen[64][256];
    int n_seen = 0;
    for (const zt_config_key *k = zt_config_keys; k->path; k++) {
        char p[256];
        parent_of(k->path, p, sizeof p);
        int dup = !is_setting(k);
        for (int i = 0; i < n_seen && !dup; i++)
            dup = strcmp(seen[i], p) == 0;
        if (dup || n_seen == 64)
            continue;
        snprintf(seen[n_seen++], sizeof seen[0], "%s", p);
        printf("\n## %s\n\n", *p ? p : "Top level");
        settings_table(p, &cfg);
    }
    printf("\n## Deprecated DeepSpeed switches\n\n");
    printf("Read as the keys that replaced them, with a warning.\n\n");
    notes_table(ZT_KEY_LEGACY);
    printf("\n## DeepSpeed settings ztier does not apply\n\n");
    printf("They would change training: accepted so that a DeepSpeed config loads, and, set to "
           "anything\nbut DeepSpeed's default (null, false, \"enabled\": false; "
           "bias_correction true,\ngradient_predivide_factor 1), warned about at the default log "
           "level, saying what ztier\ndoes instead.\n\n");
    notes_table(ZT_KEY_DROPPED);
    printf("\n## DeepSpeed keys ztier does not use\n\n");
    printf("Accepted so that a DeepSpeed config loads as is, and logged at info level; a key "
           "naming an\nobject stands for everything under it.\n\n");
    notes_table(ZT_KEY_IGNORED);
    return 0;
}

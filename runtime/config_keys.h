/* SPDX-License-Identifier: MIT */
/* The configuration key table shared by the parser and the validator (config_parse.c): every
 * key's JSON path, kind, place in zt_config (an offset: this header needs no zt_config), and
 * what is allowed. */
#ifndef ZT_RUNTIME_CONFIG_KEYS_H
#define ZT_RUNTIME_CONFIG_KEYS_H

#include <stddef.h>

/* Upper bound of keys that have none (fits int64_t and float; = ZT_CONFIG_NO_MAX). */
#define ZT_KEY_NO_MAX 9.2e18

typedef enum zt_key_kind {
    ZT_KEY_INT,      /* int field, integral JSON number (5e8 accepted when integral) */
    ZT_KEY_I64,      /* int64_t field */
    ZT_KEY_FLOAT,    /* float field */
    ZT_KEY_BOOL,     /* int field: true/false or 0/1 */
    ZT_KEY_BYTES,    /* int64_t field: integer or "2G"-style string */
    ZT_KEY_ENUM,     /* int field: index into values (case-insensitive) */
    ZT_KEY_ENUM_STR, /* char[16] field: one of values */
    ZT_KEY_PATH,     /* char[ZT_PATH_MAX] field */
    ZT_KEY_PATHS,    /* nvme_path: a string or a list of strings (zt_offload_config) */
    ZT_KEY_BETAS,    /* [beta1, beta2], both in [0, 1) */
    ZT_KEY_IGNORED,  /* a DeepSpeed key (or whole subtree) ztier knowingly does not use */
    ZT_KEY_DROPPED,  /* a DeepSpeed setting that changes training and that ztier does not
                        apply: accepted with a warning at the default level (doc: what ztier
                        does instead) */
    ZT_KEY_LEGACY    /* a deprecated DeepSpeed bool, mapped to its modern keys (config.c) */
} zt_key_kind;

typedef struct zt_config_key {
    const char *path; /* full dotted JSON path */
    zt_key_kind kind;
    size_t offset;             /* of the field in zt_config */
    double min, max;           /* numeric kinds: inclusive range */
    const char *const *values; /* ENUM / ENUM_STR: NULL-terminated, shown as written here */
    int auto_ok;     /* DeepSpeed's "auto" means: keep ztier's default (1), and that default changes
                    training, so commit warns unless a value was given since (ZT_AUTO_WARNED) */
    int multiple;    /* numeric kinds: the value must be a multiple of this (0: any) */
    const char *doc; /* one line for people: what the key does (docs/config.md) */
} zt_config_key;

#define ZT_AUTO_WARNED 2
/* "auto" means: derived at commit from the model's hidden size as the HF/DeepSpeed integration
 * does (zt_config_resolve_model_autos) */
#define ZT_AUTO_MODEL 3
/* "auto" means: measured at commit (a float field set to -1 here; offload_optimizer.ratio) */
#define ZT_AUTO_MEASURED 4

/* Terminated by a NULL path. A canonical key comes before its aliases (same offset). */
extern const zt_config_key zt_config_keys[];
/* Objects whose members are looked up in the table; NULL-terminated. */
extern const char *const zt_config_objects[];

#endif

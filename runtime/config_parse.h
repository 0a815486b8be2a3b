/* SPDX-License-Identifier: MIT */
/* Reading the configuration: DeepSpeed JSON text or files, single keys from code
 * (zt_config_set), environment overrides, and the checks of the final struct. */
#ifndef ZT_RUNTIME_CONFIG_PARSE_H
#define ZT_RUNTIME_CONFIG_PARSE_H

#include "runtime/config.h"

/* Parses JSON text over the defaults already in *cfg. A key given twice in one object is
 * warned with both places (line:column) and the last one wins; the values of keys nobody
 * reads (DeepSpeed keys ztier ignores, unknown keys) are never built. Unknown keys are logged
 * as warnings
 * naming the full path ("zero_optimization.stage3_prefetch_bucketsize") and the closest
 * known key; DeepSpeed keys ztier does not use are logged at info; invalid values return
 * ZT_ERR_CONFIG with a message naming the path, the value and what is allowed. DeepSpeed's
 * "auto" keeps the value in *cfg where ztier has a default for it, and is an error elsewhere.
 * `origin` names the source in messages (a file path or "config text"). */
zt_status zt_config_parse(zt_config *cfg, const char *json_text, const char *origin, zt_error *err);

/* Sets one key, or a whole object, from code (zt_config_set): path is a dotted JSON path
 * ("zero_optimization.offload_param.device") or NULL/"" for a whole document; value is JSON
 * text ("3e-4", "true", "[0.9, 0.95]", "{...}") or, when it is not valid JSON, a string
 * ("nvme"). Same validation and messages as a file, except that an unknown key is an error
 * (ZT_ERR_CONFIG with the closest known key) rather than a warning, and that rules between
 * keys (zt_config_validate) are left for the caller to check once all keys are set. */
zt_status zt_config_set_value(zt_config *cfg, const char *path, const char *value, zt_error *err);

/* The value of one zt_config_set* call: JSON text (zt_config_set) or a typed value
 * (zt_config_set_string/_int/_double/_bool), never parsed. */
typedef enum zt_config_type {
    ZT_CONFIG_JSON = 0,
    ZT_CONFIG_STRING,
    ZT_CONFIG_INT,
    ZT_CONFIG_DOUBLE,
    ZT_CONFIG_BOOL
} zt_config_type;

typedef struct zt_config_value {
    zt_config_type type;
    const char *text; /* JSON, STRING (borrowed) */
    int64_t i;        /* INT; BOOL: 0 or 1 */
    double d;         /* DOUBLE */
} zt_config_value;

/* zt_config_set_value for any zt_config_value. A typed value sets the one key at path (an
 * object or no path is ZT_ERR_CONFIG) and must fit the key's kind: a mismatch is
 * ZT_ERR_CONFIG naming the key, what it expects and the setter to use. Numbers widen
 * (an int for a float key), a byte count takes an int or a size string ("2G"), a key of
 * folder paths takes one string, and "auto" as a string meets the key's own rule. */
/* "zt_config_set", "zt_config_set_string", ...: the public call of a value type. */
const char *zt_config_setter_name(zt_config_type t);

zt_status zt_config_set_typed(zt_config *cfg, const char *path, const zt_config_value *v,
                              zt_error *err);

/* Reads and parses a file (ZT_ERR_CONFIG naming the path when it cannot be read). */
zt_status zt_config_load_file(zt_config *cfg, const char *path, zt_error *err);

/* Applies environment overrides: ZT_LOG (log level), ZT_HBM_CAPACITY (bytes, K/M/G),
 * ZT_NVME_PATH (replaces both offload nvme paths; several folders separated by ':'),
 * ZT_IO_ENGINE, ZT_ADAM_VARIANT, ZT_TRACE (ztier.trace_path). An invalid value is ZT_ERR_CONFIG naming the variable. */
zt_status zt_config_apply_env(zt_config *cfg, zt_error *err);

/* Checks the final struct: every field against the key table's range (for structs edited by
 * the caller or the environment), and cross-field rules (stage 3, at most one of fp16/bf16,
 * an nvme device needs a path, backend combinations). Synchronous; touches nothing. */
zt_status zt_config_validate(const zt_config *cfg, zt_error *err);

/* The keys given as "auto" whose ztier default changes training and that got no value since,
 * with the values they have ("optimizer.params.lr = 0.001, gradient_clipping = 0"), into
 * buf; returns how many (0: buf is ""). */
int zt_config_auto_report(const zt_config *cfg, char *buf, size_t len);

/* Gives the sizes left "auto" that come from the model (ZT_AUTO_MODEL) their value for
 * hidden size h, as the HF/DeepSpeed integration does: reduce_bucket_size h*h,
 * stage3_prefetch_bucket_size 0.9*h*h, stage3_param_persistence_threshold 10*h. Writes
 * "key = value, ..." into buf and returns how many were set (h <= 0: none, they keep
 * ztier's defaults and stay listed). */
int zt_config_resolve_model_autos(zt_config *cfg, int64_t h, char *buf, size_t len);

#endif

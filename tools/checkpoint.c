/* SPDX-License-Identifier: MIT */
/* `ztier checkpoint inspect DIR` (export: checkpoint_export.c): what a checkpoint holds and whether it is intact, without
 * the model or a runtime. DIR is a checkpoint root (the newest checkpoint its `latest` names)
 * or one step folder. Prints the world size, ZeRO stage, step, the model's layers and
 * parameters and the bytes of each parameter state, then checks the manifest's checksum and
 * every rank file's size and CRC-32 against it. Exit status 0 when everything is intact, 1
 * when anything is not (each named on its own line), 2 for a usage error. */
#include "runtime/checkpoint_dir.h"
#include "runtime/checkpoint_manifest.h"
#include "tools/checkpoint_read.h"
#include "tools/bench_common.h"
#include "tools/commands.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: ztier checkpoint inspect DIR\n"
                    "       ztier checkpoint export DIR --format safetensors|llmc "
                    "[--dtype fp32|bf16] [--out FILE]\n"
                    "DIR: a checkpoint root, as the trainer's --checkpoint names it (its latest "
                    "checkpoint), or one step folder in it\n");
    return 2;
}

/* The trainer's meta values (zt_checkpoint_meta_set), on one line. */
static void print_meta(json_t *meta)
{
    const char *key;
    json_t *v;
    if (!json_is_object(meta) || json_object_size(meta) == 0)
        return;
    printf("  meta:");
    json_object_foreach(meta, key, v) printf(" %s=%lld", key, (long long)json_integer_value(v));
    printf("\n");
}

/* The model as the manifest records it: layers, parameters (elements of their shapes) and
 * elements as laid out (each layer's flat_numel at the saving world size). */
static void model_size(json_t *layers, int64_t *params, int64_t *laid_out)
{
    *params = *laid_out = 0;
    size_t i, k, d;
    json_t *L, *p, *dim;
    json_array_foreach(layers, i, L)
    {
        *laid_out += json_integer_value(json_object_get(L, "flat_numel"));
        json_array_foreach(json_object_get(L, "params"), k, p)
        {
            int64_t n = 1;
            json_array_foreach(json_object_get(p, "shape"), d, dim) n *= json_integer_value(dim);
            *params += n;
        }
    }
}

/* Each rank's file against the manifest's size and CRC-32; the number that are not. */
static int check_files(const char *folder, json_t *files)
{
    int bad = 0;
    size_t r;
    json_t *e;
    json_array_foreach(files, r, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        json_int_t want_bytes = json_integer_value(json_object_get(e, "bytes"));
        json_int_t want_crc = json_integer_value(json_object_get(e, "crc32"));
        char path[PATH_MAX + 128], why[128] = "", a[32];
        snprintf(path, sizeof path, "%s/%s", folder, name ? name : "?");
        uint64_t bytes = 0;
        uint32_t crc = 0;
        if (!name || ckpt_file_crc(path, &bytes, &crc, why, sizeof why) != 0) {
            printf("  %-28s DAMAGED: cannot be read (%s)\n", name ? name : "(no name)",
                   name ? why : "the manifest gives none");
            bad++;
        } else if ((json_int_t)bytes != want_bytes) {
            printf("  %-28s DAMAGED: %llu bytes, the manifest says %lld (truncated or "
                   "overwritten)\n",
                   name, (unsigned long long)bytes, (long long)want_bytes);
            bad++;
        } else if ((json_int_t)crc != want_crc) {
            printf("  %-28s DAMAGED: CRC-32 %08x, the manifest says %08llx (its bytes changed)\n",
                   name, crc, (unsigned long long)want_crc);
            bad++;
        } else {
            printf("  %-28s %10s, CRC-32 %08x: intact\n", name, bench_fmt_bytes(bytes, a, sizeof a),
                   crc);
        }
    }
    return bad;
}

static int inspect(const char *dir)
{
    char folder[PATH_MAX], path[PATH_MAX + 32], a[32];
    zt_error err = {0};
    if (zt_ckpt_resolve(dir, folder, sizeof folder, &err) != ZT_OK) {
        printf("%s: DAMAGED or not a checkpoint: %s\n", dir, err.msg);
        return 1;
    }
    snprintf(path, sizeof path, "%s/manifest.json", folder);
    json_error_t je;
    json_t *m = json_load_file(path, 0, &je);
    if (!m) {
        printf("%s: DAMAGED: line %d: %s\n", path, je.line, je.text);
        return 1;
    }
    char sum[16];
    zt_manifest_checksum(m, sum);
    const char *saved = json_string_value(json_object_get(m, "checksum"));
    int manifest_ok = saved && !strcmp(saved, sum);
    json_t *layers = json_object_get(m, "layers"), *files = json_object_get(m, "files");
    json_t *stage = json_object_get(m, "zero_stage");
    int64_t params = 0, laid_out = 0;
    if (json_is_array(layers))
        model_size(layers, &params, &laid_out);
    printf("checkpoint %s\n", folder);
    printf("  step %lld, world size %lld, ZeRO stage %s, %s\n",
           (long long)json_integer_value(json_object_get(m, "step")),
           (long long)json_integer_value(json_object_get(m, "world_size")),
           json_is_integer(stage) ? (json_integer_value(stage) == 0   ? "0"
                                     : json_integer_value(stage) == 1 ? "1"
                                     : json_integer_value(stage) == 2 ? "2"
                                                                      : "3")
                                  : "not recorded",
           json_is_true(json_object_get(m, "fp16")) ? "fp16 loss scaling" : "no loss scaling");
    printf("  %zu layers, %lld parameters (%lld elements as laid out)\n",
           json_is_array(layers) ? json_array_size(layers) : 0, (long long)params,
           (long long)laid_out);
    print_meta(json_object_get(m, "meta"));
    printf("  each parameter state (fp32 master, Adam m, Adam v): %s\n",
           bench_fmt_bytes((uint64_t)laid_out * 4, a, sizeof a));
    printf("  manifest: %s\n", manifest_ok ? "checksum matches"
                                           : "DAMAGED: its checksum does not match its contents "
                                             "(edited or corrupted)");
    int bad = !manifest_ok;
    if (json_is_array(files) && json_array_size(files) > 0) {
        printf("  files:\n");
        bad += check_files(folder, files);
    } else {
        printf("  files: DAMAGED: the manifest lists none\n");
        bad++;
    }
    json_decref(m);
    printf("%s\n", bad ? "DAMAGED: do not load this checkpoint; load an older one (another "
                         "step folder of the root)"
                       : "intact");
    return bad ? 1 : 0;
}

int cmd_checkpoint(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[0], "inspect"))
        return inspect(argv[1]);
    if (argc >= 1 && !strcmp(argv[0], "export"))
        return cmd_checkpoint_export(argc, argv);
    return usage();
}

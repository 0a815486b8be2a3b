/* SPDX-License-Identifier: MIT */
/* `ztier checkpoint inspect DIR` (export: checkpoint_export.c): what a checkpoint holds and
 * whether a load would take it, without a runtime. DIR is a checkpoint root (the newest
 * checkpoint its `latest` names) or one step folder. Prints the world size, ZeRO stage, step,
 * the model's layers and parameters and the bytes of each parameter state, then runs the
 * checks a load runs (zt_ckpt_validate: every manifest field, the model where it is the GPT-2
 * trainer's, every rank file's size, CRC-32 and header). Exit status 0 when everything is
 * intact, 1 with the first failed check named in the load's words, 2 for a usage error. */
#include "runtime/checkpoint_dir.h"
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

/* The files as the manifest lists them, once every check passed. */
static void list_files(json_t *files)
{
    size_t r;
    json_t *e;
    char a[32];
    printf("  files:\n");
    json_array_foreach(files, r, e)
    {
        printf(
            "  %-28s %10s, CRC-32 %08llx: intact\n", json_string_value(json_object_get(e, "name")),
            bench_fmt_bytes((uint64_t)json_integer_value(json_object_get(e, "bytes")), a, sizeof a),
            (unsigned long long)json_integer_value(json_object_get(e, "crc32")));
    }
}

/* What the manifest says, as it says it (the checks come after: a damaged one prints what it
 * holds, e.g. a stage out of range as that number). */
static void summary(const char *folder, json_t *m)
{
    char a[32];
    json_t *layers = json_object_get(m, "layers"), *stage = json_object_get(m, "zero_stage");
    int64_t params = 0, laid_out = 0;
    if (json_is_array(layers))
        model_size(layers, &params, &laid_out);
    printf("checkpoint %s\n", folder);
    printf("  step %lld, world size %lld, ZeRO stage ",
           (long long)json_integer_value(json_object_get(m, "step")),
           (long long)json_integer_value(json_object_get(m, "world_size")));
    if (json_is_integer(stage))
        printf("%lld", (long long)json_integer_value(stage));
    else
        printf("not recorded");
    printf(", %s\n",
           json_is_true(json_object_get(m, "fp16")) ? "fp16 loss scaling" : "no loss scaling");
    printf("  %zu layers, %lld parameters (%lld elements as laid out)\n",
           json_is_array(layers) ? json_array_size(layers) : 0, (long long)params,
           (long long)laid_out);
    print_meta(json_object_get(m, "meta"));
    printf("  each parameter state (fp32 master, Adam m, Adam v): %s\n",
           bench_fmt_bytes((uint64_t)laid_out * 4, a, sizeof a));
}

/* Prints what the checkpoint holds, then runs a load's checks on it (ckpt_open:
 * zt_ckpt_validate) and prints the first that fails, in the load's words. */
static int inspect(const char *dir)
{
    char folder[PATH_MAX], path[PATH_MAX + 32];
    zt_error err = {0};
    if (zt_ckpt_resolve(dir, folder, sizeof folder, &err) != ZT_OK) {
        printf("%s: DAMAGED or not a checkpoint: %s\n", dir, err.msg);
        return 1;
    }
    snprintf(path, sizeof path, "%s/manifest.json", folder);
    json_t *m = json_load_file(path, 0, NULL);
    if (json_is_object(m))
        summary(folder, m);
    json_decref(m);
    ckpt_view v;
    char why[2 * PATH_MAX];
    int bad = ckpt_open(dir, &v, why, sizeof why) != 0;
    if (bad)
        printf("DAMAGED: %s\n"
               "DAMAGED: a load refuses this checkpoint; load an older one (another step folder "
               "of the root)\n",
               why);
    else
        list_files(json_object_get(v.manifest, "files")), printf("intact\n");
    ckpt_close(&v);
    return bad;
}

int cmd_checkpoint(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[0], "inspect"))
        return inspect(argv[1]);
    if (argc >= 1 && !strcmp(argv[0], "export"))
        return cmd_checkpoint_export(argc, argv);
    return usage();
}

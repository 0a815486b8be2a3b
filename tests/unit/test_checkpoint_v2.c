/* SPDX-License-Identifier: MIT */
/* A checkpoint of format version 2, written by ztier 1.3.0's own code (tests/data/ckpt-v2, made
 * by tests/data/make_ckpt_v2.c at main 2eedf1c), read by this version:
 *  - zt_checkpoint_load takes it: every parameter's fp32 values bitwise those of 1.3.0's own
 *    export of it (tests/data/ckpt-v2.safetensors, read here with jansson, not ztier);
 *  - `ztier checkpoint inspect` says intact;
 *  - `ztier checkpoint export` says at info level that it reads every file whole (a version 2
 *    checkpoint has no CRC-32 per piece) and writes the same bytes as 1.3.0's export;
 *  - saved again (version 3, "pieces_crc32" in its manifest), its export, which reads only
 *    the master values, is again byte for byte 1.3.0's export of the version 2 checkpoint.
 *   test_checkpoint_v2 <ztier> <tests/data>        (the ztier command-line tool) */
#include "gpt2_runtime.h"
#include "gpt2_ztier.h"
#include "runtime/runtime.h"
#include "expect.h"
#include "scratch.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *const config =
    "{\"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0}, "
    "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}}";

static int failures;

/* A whole file into memory (*n bytes); NULL when it cannot be read. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

/* Runs cmd (its output in out); its exit status. */
static int shell(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, len - 1, p) : 0;
    out[n] = '\0';
    int rc = p ? pclose(p) : -1;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Every parameter of rt against the safetensors file st (its 8-byte header length, the JSON
 * header, the data), bitwise. */
static void check_values(zt_runtime *rt, const char *st, size_t st_len)
{
    uint64_t hlen = 0;
    memcpy(&hlen, st, 8);
    json_t *h = json_loadb(st + 8, (size_t)hlen, 0, NULL);
    EXPECT(h, "the reference's header does not parse");
    for (int p = 0; h && p < rt->reg.n_params; p++) {
        const zt_param *P = &rt->reg.params[p];
        json_t *e = json_object_get(h, P->name);
        json_t *at = json_object_get(e, "data_offsets");
        size_t from = 8 + (size_t)hlen + (size_t)json_integer_value(json_array_get(at, 0));
        size_t to = 8 + (size_t)hlen + (size_t)json_integer_value(json_array_get(at, 1));
        EXPECT(e && to - from == (size_t)P->numel * 4 && to <= st_len, "%s: not in the reference",
               P->name);
        float *got = malloc((size_t)P->numel * sizeof *got);
        zt_status s = zt_param_read(rt, p, got, P->numel);
        EXPECT(s == ZT_OK, "reading %s: %s", P->name, zt_last_error(rt));
        if (e && to - from == (size_t)P->numel * 4 && to <= st_len)
            EXPECT(!memcmp(got, st + from, to - from), "%s differs from 1.3.0's export", P->name);
        free(got);
    }
    json_decref(h);
}

/* `ztier checkpoint export ckpt-v2` in dir (so the file records the same folder name as the
 * reference's), its output in out; then whether the file is the reference's bytes. */
static int export_same(const char *ztier, const char *dir, const char *ref, size_t ref_len,
                       char *out, size_t len)
{
    char cmd[2048], path[1100];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && ZT_LOG=info '%s' checkpoint export ckpt-v2 --format safetensors "
             "--out out.safetensors 2>&1",
             dir, ztier);
    int rc = shell(cmd, out, len);
    EXPECT(rc == 0, "export exited %d:\n%s", rc, out);
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    size_t n = 0;
    char *got = slurp(path, &n);
    int same = got && n == ref_len && !memcmp(got, ref, n);
    free(got);
    return same;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_checkpoint_v2 <ztier> <tests/data>\n");
        return 2;
    }
    const char *ztier = argv[1], *data = argv[2];
    char base[512], cmd[4096], out[16384], ref_path[1100];
    scratch_make("ckpt-v2", base, sizeof base);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/v2' '%s/v3' && cp -a '%s/ckpt-v2' '%s/v2/'", base, base,
             data, base);
    if (system(cmd) != 0)
        return fprintf(stderr, "setup: %s failed\n", cmd), 1;
    snprintf(ref_path, sizeof ref_path, "%s/ckpt-v2.safetensors", data);
    size_t ref_len = 0;
    char *ref = slurp(ref_path, &ref_len);
    if (!ref || ref_len < 8)
        return fprintf(stderr, "setup: cannot read %s\n", ref_path), 1;

    /* the model make_ckpt_v2.c saved, initialised from another seed */
    gpt2_config c = {
        .vocab = 8, .padded_vocab = 64, .max_seq = 4, .layers = 1, .heads = 1, .channels = 8};
    zt_runtime *rt = NULL;
    gpt2_ztier g;
    zt_status st = gpt2_test_runtime(config, &c, 5, &rt, &g);
    if (st != ZT_OK)
        return fprintf(stderr, "setup: %s\n", rt ? zt_last_error(rt) : zt_status_string(st)), 1;

    printf("load of the version 2 checkpoint:\n");
    char root[700];
    snprintf(root, sizeof root, "%s/v2/ckpt-v2", base);
    st = zt_checkpoint_load(rt, root);
    EXPECT(st == ZT_OK, "the load refused it: %s", zt_last_error(rt));
    check_values(rt, ref, ref_len);

    printf("inspect:\n");
    snprintf(cmd, sizeof cmd, "'%s' checkpoint inspect '%s' 2>&1", ztier, root);
    int rc = shell(cmd, out, sizeof out);
    EXPECT(rc == 0 && strstr(out, "\nintact\n"), "inspect exited %d:\n%s", rc, out);

    printf("export of the version 2 checkpoint:\n");
    snprintf(cmd, sizeof cmd, "%s/v2", base);
    EXPECT(export_same(ztier, cmd, ref, ref_len, out, sizeof out),
           "its export is not 1.3.0's bytes:\n%s", out);
    EXPECT(strstr(out, "is a version 2 checkpoint, which records no CRC-32 of its pieces"),
           "the export does not say it reads the files whole:\n%s", out);

    printf("saved again (version 3) and exported:\n");
    snprintf(root, sizeof root, "%s/v3/ckpt-v2", base);
    st = zt_checkpoint_save(rt, root);
    EXPECT(st == ZT_OK, "the save failed: %s", zt_last_error(rt));
    snprintf(cmd, sizeof cmd, "grep -c '\"version\": 3' '%s/step-00000000/manifest.json'", root);
    EXPECT(shell(cmd, out, sizeof out) == 0, "the new save is not version 3");
    snprintf(cmd, sizeof cmd, "%s/v3", base);
    EXPECT(export_same(ztier, cmd, ref, ref_len, out, sizeof out),
           "the version 3 export is not 1.3.0's bytes:\n%s", out);
    EXPECT(!strstr(out, "records no CRC-32"), "a version 3 export read the files whole:\n%s", out);

    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
    free(ref);
    printf("%s\n", failures ? "FAILED" : "version 2 loads and exports as 1.3.0 wrote it");
    if (!failures)
        scratch_remove(base);
    return failures != 0;
}

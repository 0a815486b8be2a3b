/* SPDX-License-Identifier: MIT */
/* Damaged checkpoints, as a load, `ztier checkpoint inspect` and `ztier checkpoint export`
 * see them. A GPT-2 (tiny) checkpoint is saved once; each row of the table below damages a
 * copy of it (a file cut, a flipped byte, a file gone or added, a manifest field edited with
 * its checksum made to match again, as a deliberate edit would). For every row:
 *  - zt_checkpoint_load refuses it, with a message holding the row's fragment (the check
 *    this test expects to fire, written here independently of the code);
 *  - inspect exits 1 and prints the load's message itself (the same check, in its words);
 *  - export exits 1, prints the load's message, and leaves its target as it was (no
 *    partial file); where the damage is in the rank file's data, the export (which reads only
 *    the header and the master values, each piece checked against the manifest's CRC-32)
 *    names the file and the piece instead, and a damaged Adam m or v byte, which it does not
 *    read, does not stop it (the load and inspect still refuse it).
 * The undamaged checkpoint loads, inspects "intact" (exit 0) and exports.
 *   test_checkpoint_damage <ztier>        (the ztier command-line tool) */
#include "gpt2_runtime.h"
#include "gpt2_ztier.h"
#include "runtime/checkpoint_manifest.h"
#include "expect.h"
#include "scratch.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const config =
    "{\"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0}, "
    "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}}";

static int failures;
static char base[512], step_dir[64];
static const char *ztier;

/* ---- damage: files ---- */

static void path_in(const char *root, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s/%s", root, step_dir, name);
}

static void flip(const char *root, long at)
{
    char p[800];
    path_in(root, "rank-00000-of-00001.zts", p, sizeof p);
    FILE *f = fopen(p, "r+b");
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

static void sh(const char *root, const char *fmt)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, root, step_dir, root, step_dir);
    if (system(cmd) != 0)
        printf("  (setup command failed: %s)\n", cmd);
}

static void d_truncate(const char *r) { sh(r, "truncate -s 1000 %s/%s/rank-00000-of-00001.zts"); }
static void d_grow(const char *r) { sh(r, "printf abcd >> %s/%s/rank-00000-of-00001.zts"); }
static void d_header(const char *r) { flip(r, 20); }
static void d_data(const char *r) { flip(r, 5000); }
/* A byte of layer 0's Adam m (part 1) or v (part 2): the file is the 48-byte header, then per
 * layer its master, m and v parts of shard_numel floats each (docs/checkpoints.md). */
static void flip_part(const char *root, int part)
{
    char p[800];
    path_in(root, "manifest.json", p, sizeof p);
    json_t *m = json_load_file(p, 0, NULL);
    json_t *L = json_array_get(json_object_get(m, "layers"), 0);
    long shard = (long)json_integer_value(json_object_get(L, "shard_numel"));
    json_decref(m);
    flip(root, 48 + part * shard * 4 + 100);
}
static void d_adam_m(const char *r) { flip_part(r, 1); }
static void d_adam_v(const char *r) { flip_part(r, 2); }
static void d_missing(const char *r) { sh(r, "rm %s/%s/rank-00000-of-00001.zts"); }
static void d_extra(const char *r)
{
    sh(r, "cp %s/%s/rank-00000-of-00001.zts %s/%s/rank-00001-of-00002.zts");
}
static void d_no_manifest(const char *r) { sh(r, "rm %s/%s/manifest.json"); }
static void d_bad_json(const char *r) { sh(r, "truncate -s 300 %s/%s/manifest.json"); }
static void d_not_object(const char *r) { sh(r, "echo '[1, 2]' > %s/%s/manifest.json"); }
static void d_latest_bad(const char *r) { sh(r, "echo 'not a folder' > %s/latest"); }
static void d_latest_gone(const char *r) { sh(r, "echo step-00000099 > %s/latest"); }

/* ---- damage: manifest fields (the checksum made to match again unless said) ---- */

static json_t *layer(json_t *m, int i)
{
    return json_array_get(json_object_get(m, "layers"), (size_t)i);
}
static json_t *param(json_t *m, int i, int k)
{
    return json_array_get(json_object_get(layer(m, i), "params"), (size_t)k);
}
static json_t *file0(json_t *m) { return json_array_get(json_object_get(m, "files"), 0); }
static void set(json_t *o, const char *key, json_t *v) { json_object_set_new(o, key, v); }

static void e_stage7(json_t *m) { set(m, "zero_stage", json_integer(7)); }
static void e_stage_neg(json_t *m) { set(m, "zero_stage", json_integer(-1)); }
static void e_stage_text(json_t *m) { set(m, "zero_stage", json_string("3")); }
static void e_world2(json_t *m) { set(m, "world_size", json_integer(2)); }
static void e_world0(json_t *m) { set(m, "world_size", json_integer(0)); }
static void e_world2_files(json_t *m)
{
    set(m, "world_size", json_integer(2));
    json_t *f = json_object_get(m, "files");
    json_array_append_new(f, json_deep_copy(file0(m)));
    set(json_array_get(f, 0), "name", json_string("rank-00000-of-00002.zts"));
    set(json_array_get(f, 1), "name", json_string("rank-00001-of-00002.zts"));
}
static void e_step_neg(json_t *m) { set(m, "step", json_integer(-1)); }
static void e_step5(json_t *m) { set(m, "step", json_integer(5)); }
static void e_scale0(json_t *m) { set(m, "loss_scale", json_real(0)); }
static void e_scale_no_fp16(json_t *m) { set(m, "loss_scale", json_real(1024)); }
static void e_fp16_text(json_t *m) { set(m, "fp16", json_string("yes")); }
static void e_good_neg(json_t *m) { set(m, "good_steps", json_integer(-1)); }
static void e_version4(json_t *m) { set(m, "version", json_integer(4)); }
static void e_format(json_t *m) { set(m, "format", json_string("other")); }
static void e_name_dotdot(json_t *m)
{
    set(file0(m), "name", json_string("../step-00000000/rank-00000-of-00001.zts"));
}
static void e_name_abs(json_t *m) { set(file0(m), "name", json_string("/etc/passwd")); }
static void e_bytes(json_t *m)
{
    set(file0(m), "bytes",
        json_integer(json_integer_value(json_object_get(file0(m), "bytes")) + 4));
}
static void e_piece_crc(json_t *m)
{
    json_t *f = file0(m);
    const char *was = json_string_value(json_object_get(f, "pieces_crc32"));
    char *hex = strdup(was ? was : "00000000000000000"); /* none before format 3 */
    hex[8] = hex[8] == '0' ? '1' : '0';                  /* layer 0's master values' */
    set(f, "pieces_crc32", json_string(hex));
    free(hex);
}
static void e_piece_short(json_t *m)
{
    json_t *f = file0(m);
    const char *was = json_string_value(json_object_get(f, "pieces_crc32"));
    char *hex = strdup(was ? was : "00000000000000000"); /* none before format 3 */
    hex[strlen(hex) - 8] = '\0';
    set(f, "pieces_crc32", json_string(hex));
    free(hex);
}
static void e_crc(json_t *m)
{
    set(file0(m), "crc32",
        json_integer(json_integer_value(json_object_get(file0(m), "crc32")) ^ 1));
}
static void e_no_files(json_t *m) { set(m, "files", json_array()); }
static void e_wte_overlap(json_t *m) /* wte [64, 32] grown over wpe, which starts at 2048 */
{
    set(param(m, 0, 0), "shape", json_pack("[i,i]", 72, 32));
}
static void e_swap_layers(json_t *m)
{
    json_t *layers = json_object_get(m, "layers"), *h0 = json_incref(layer(m, 1));
    json_array_set(layers, 1, layer(m, 2));
    json_array_set_new(layers, 2, h0);
}
static void e_layer_name(json_t *m) { set(layer(m, 3), "name", json_string("ln_x")); }
static void e_param_name(json_t *m) { set(param(m, 3, 0), "name", json_string("ln_f.scale")); }
static void e_param_dup(json_t *m)
{
    set(param(m, 1, 1), "name",
        json_string(json_string_value(json_object_get(param(m, 1, 0), "name"))));
}
static void e_offset(json_t *m)
{
    json_t *p = param(m, 0, 1);
    set(p, "offset", json_integer(json_integer_value(json_object_get(p, "offset")) + 16));
}
static void e_shape_zero(json_t *m) { set(param(m, 3, 0), "shape", json_pack("[i]", 0)); }
static void e_flat_small(json_t *m) { set(layer(m, 0), "flat_numel", json_integer(100)); }
static void e_shard(json_t *m) { set(layer(m, 1), "shard_numel", json_integer(3)); }
static void e_no_params(json_t *m) { json_object_del(layer(m, 2), "params"); }
static void e_no_layers(json_t *m) { set(m, "layers", json_array()); }
static void e_layer_dropped(json_t *m) { json_array_remove(json_object_get(m, "layers"), 3); }
static void e_meta(json_t *m) { set(json_object_get(m, "meta"), "gpt2.heads", json_string("2")); }

typedef struct damage {
    const char *what;
    void (*files)(const char *root);
    void (*edit)(json_t *m);
    int stale_sum;     /* the edit leaves the checksum as it was */
    const char *check; /* what the load's message must hold */
    /* The export's, where it differs from the load's: it reads only the master values, each
     * piece checked on its own ("OK": it exports, having read none of the damage). */
    const char *export_check;
} damage;

static const damage table[] = {
    {"rank file truncated", d_truncate, NULL, 0, "truncated or from another save", NULL},
    {"rank file grown", d_grow, NULL, 0, "truncated or from another save", NULL},
    {"a byte of the header flipped", d_header, NULL, 0, "is damaged (CRC-32",
     "of its header, bytes 0 to 48"},
    {"a byte of the data flipped", d_data, NULL, 0, "is damaged (CRC-32",
     "of its fp32 master values of layer 0, bytes 48 to "},
    {"a byte of Adam m flipped", d_adam_m, NULL, 0, "is damaged (CRC-32", "OK"},
    {"a byte of Adam v flipped", d_adam_v, NULL, 0, "is damaged (CRC-32", "OK"},
    {"rank file missing", d_missing, NULL, 0, "is missing", NULL},
    {"a rank file the manifest does not list", d_extra, NULL, 0, "does not list", NULL},
    {"manifest missing", d_no_manifest, NULL, 0, "is missing (was the folder removed?)", NULL},
    {"manifest not JSON", d_bad_json, NULL, 0, "cannot be read: line", NULL},
    {"manifest not an object", d_not_object, NULL, 0, "is not a JSON object", NULL},
    {"latest damaged", d_latest_bad, NULL, 0, "is damaged: line 1", NULL},
    {"latest names a folder that is gone", d_latest_gone, NULL, 0, "is missing", NULL},
    {"an edit without its checksum", NULL, e_step5, 1, "its checksum is", NULL},
    {"zero_stage 7", NULL, e_stage7, 0, "\"zero_stage\" is 7", NULL},
    {"zero_stage -1", NULL, e_stage_neg, 0, "\"zero_stage\" is -1", NULL},
    {"zero_stage a string", NULL, e_stage_text, 0, "\"zero_stage\" is \"3\"", NULL},
    {"world_size 2, one file", NULL, e_world2, 0, "\"files\" is", NULL},
    {"world_size 0", NULL, e_world0, 0, "\"world_size\" is 0", NULL},
    {"world_size 2, two files listed", NULL, e_world2_files, 0,
     "'rank-00000-of-00001.zts', which its manifest does not list", NULL},
    {"step -1", NULL, e_step_neg, 0, "\"step\" is -1", NULL},
    {"step other than the files'", NULL, e_step5, 0, "\"step\": 5", NULL},
    {"loss_scale 0", NULL, e_scale0, 0, "\"loss_scale\" is 0", NULL},
    {"a loss scale without fp16", NULL, e_scale_no_fp16, 0, "without fp16 loss scaling", NULL},
    {"fp16 a string", NULL, e_fp16_text, 0, "\"fp16\" is \"yes\"", NULL},
    {"good_steps -1", NULL, e_good_neg, 0, "\"good_steps\" is -1", NULL},
    {"version 4 (newer than this reader)", NULL, e_version4, 0, "\"version\" is 4", NULL},
    {"another format", NULL, e_format, 0, "is not a ztier checkpoint manifest", NULL},
    {"a file name with ../", NULL, e_name_dotdot, 0, "\"files[0].name\" is \"../", NULL},
    {"an absolute file name", NULL, e_name_abs, 0, "\"files[0].name\" is \"/etc/passwd\"", NULL},
    {"a file's size", NULL, e_bytes, 0, "truncated or from another save", NULL},
    {"a file's CRC-32", NULL, e_crc, 0, "is not its pieces'", NULL},
    {"a piece's CRC-32", NULL, e_piece_crc, 0, "is not its pieces'", NULL},
    {"a piece's CRC-32 missing", NULL, e_piece_short, 0, "\"files[0].pieces_crc32\" is", NULL},
    {"no files listed", NULL, e_no_files, 0, "\"files\" is []", NULL},
    {"wte's shape grown over wpe", NULL, e_wte_overlap, 0, "'wte' has another shape there", NULL},
    {"two layers swapped", NULL, e_swap_layers, 0, "a layer is 'h.1' there and 'h.0' here", NULL},
    {"a layer renamed", NULL, e_layer_name, 0, "a layer is 'ln_x' there and 'ln_f' here", NULL},
    {"a parameter renamed", NULL, e_param_name, 0, "'ln_f.scale' there and 'ln_f.weight' here",
     NULL},
    {"two parameters of one name", NULL, e_param_dup, 0, "two parameters have that name", NULL},
    {"a parameter moved", NULL, e_offset, 0, "\"layers[0].params[1].offset\"", NULL},
    {"a size of 0", NULL, e_shape_zero, 0, "\"layers[3].params[0].shape\" is [0]", NULL},
    {"flat_numel under the parameters", NULL, e_flat_small, 0, "\"layers[0].flat_numel\" is 100",
     NULL},
    {"shard_numel neither whole nor a share", NULL, e_shard, 0, "\"layers[1].shard_numel\" is 3",
     NULL},
    {"a layer without params", NULL, e_no_params, 0, "a layer needs a \"name\" string", NULL},
    {"no layers", NULL, e_no_layers, 0, "\"layers\" is []", NULL},
    {"a layer dropped", NULL, e_layer_dropped, 0, "holds 3 layers, this model has 4", NULL},
    {"a meta value not an integer", NULL, e_meta, 0, "\"meta\"", NULL},
};

static void edit_manifest(const char *root, const damage *d)
{
    char p[800];
    path_in(root, "manifest.json", p, sizeof p);
    json_t *m = json_load_file(p, 0, NULL);
    d->edit(m);
    if (!d->stale_sum) {
        char sum[16];
        zt_manifest_checksum(m, sum);
        set(m, "checksum", json_string(sum));
    }
    json_dump_file(m, p, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(m);
}

/* Runs `ztier checkpoint <args>`; its exit status, its output in out. */
static int tool(const char *args, char *out, size_t len)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s checkpoint %s 2>&1", ztier, args);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, len - 1, p) : 0;
    out[n] = '\0';
    int rc = p ? pclose(p) : -1;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void read_text(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    out[n] = '\0';
    if (f)
        fclose(f);
}

/* One copy of the good checkpoint, damaged as d says (NULL: undamaged), through all three. */
static void run_case(zt_runtime *rt, int i, const damage *d)
{
    char root[700], cmd[2400], target[800], out[16384], text[64];
    snprintf(root, sizeof root, "%s/case-%02d", base, i);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s/good' '%s'", root, base, root);
    if (system(cmd) != 0)
        printf("  (copy failed)\n");
    if (d && d->files)
        d->files(root);
    if (d && d->edit)
        edit_manifest(root, d);
    printf("%s:\n", d ? d->what : "undamaged");

    zt_status st = zt_checkpoint_load(rt, root);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", zt_last_error(rt));
    if (d) {
        printf("  load: %s\n", msg);
        EXPECT(st != ZT_OK, "a load took it");
        EXPECT(strstr(msg, d->check), "the load's message lacks '%s'", d->check);
    } else {
        EXPECT(st == ZT_OK, "the load refused it: %s", msg);
    }

    snprintf(cmd, sizeof cmd, "inspect '%s'", root);
    int rc = tool(cmd, out, sizeof out);
    if (d) {
        EXPECT(rc == 1, "inspect exited %d, not 1:\n%s", rc, out);
        EXPECT(strstr(out, msg), "inspect does not name the load's check:\n%s", out);
    } else {
        EXPECT(rc == 0 && strstr(out, "\nintact\n"), "inspect exited %d:\n%s", rc, out);
    }

    snprintf(target, sizeof target, "%s.safetensors", root);
    FILE *f = fopen(target, "w");
    fputs("old", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "export '%s' --format safetensors --out '%s'", root, target);
    rc = tool(cmd, out, sizeof out);
    read_text(target, text, sizeof text);
    char partial[820];
    snprintf(partial, sizeof partial, "%s.partial", target);
    const char *xc = d ? d->export_check : NULL;
    if (xc && !strcmp(xc, "OK")) {
        EXPECT(rc == 0 && strcmp(text, "old") != 0, "export exited %d:\n%s", rc, out);
    } else if (d) {
        EXPECT(rc == 1, "export exited %d, not 1:\n%s", rc, out);
        EXPECT(strstr(out, xc ? xc : msg), "export does not name %s:\n%s",
               xc ? xc : "the load's check", out);
        EXPECT(!xc || strstr(out, "rank-00000-of-00001.zts"), "export does not name the file");
        EXPECT(!strcmp(text, "old") && access(partial, F_OK) != 0,
               "the failed export changed its target");
    } else {
        EXPECT(rc == 0 && strcmp(text, "old") != 0, "export exited %d:\n%s", rc, out);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_checkpoint_damage <ztier>\n");
        return 2;
    }
    ztier = argv[1];
    scratch_make("ckpt-damage", base, sizeof base);
    gpt2_config c;
    gpt2_config_named("tiny", 64, &c);
    zt_runtime *rt = NULL;
    gpt2_ztier g;
    zt_status st = gpt2_test_runtime(config, &c, 5, &rt, &g);
    char good[600];
    snprintf(good, sizeof good, "%s/good", base);
    if (st == ZT_OK)
        st = zt_checkpoint_save(rt, good);
    if (st != ZT_OK) {
        fprintf(stderr, "setup: %s\n", rt ? zt_last_error(rt) : zt_status_string(st));
        return 1;
    }
    char latest[700];
    snprintf(latest, sizeof latest, "%s/latest", good);
    read_text(latest, step_dir, sizeof step_dir);
    step_dir[strcspn(step_dir, "\n")] = '\0';

    run_case(rt, 0, NULL);
    int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++)
        run_case(rt, i + 1, &table[i]);
    run_case(rt, n + 1, NULL); /* the refusals changed nothing */
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
    printf("%d kinds of damage: %s\n", n, failures ? "FAILED" : "each refused by all three");
    if (!failures)
        scratch_remove(base);
    return failures != 0;
}

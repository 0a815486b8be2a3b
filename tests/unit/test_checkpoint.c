/* SPDX-License-Identifier: MIT */
/* Checkpoints: save at step 5, resume in a fresh runtime, and steps 6-10 equal the
 * uninterrupted run bitwise; truncated, damaged, incomplete, edited and foreign checkpoints
 * are refused with a message naming the cause (the field, for an edited manifest), and the
 * runtime stays usable; the root folder keeps the newest checkpoints and `latest` names
 * them. */
#include "runtime/checkpoint_manifest.h"
#include "ref_mlp.h"
#include "rt_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

static zt_runtime *create(const char *pdev, const char *odev, minimal_model *m, mlp_dims d)
{
    return rt_fixture_mlp(NULL, ref_mlp_config(&hp, pdev, odev, 1, "", ""), &d, 42, m);
}

/* extra_zero: more keys of zero_optimization (", \"stage\": 2") */
static zt_runtime *create_zero(const char *pdev, const char *odev, const char *extra_zero,
                               minimal_model *m)
{
    mlp_dims d = dims;
    return rt_fixture_mlp(NULL, ref_mlp_config(&hp, pdev, odev, 1, extra_zero, ""), &d, 42, m);
}

static void train(zt_runtime *rt, const minimal_model *m, int from, int to)
{
    for (int s = from; s < to; s++) {
        float loss;
        assert_int_equal(minimal_micro_step(rt, m, s, 0, dims.batch, &loss), ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    }
}

static float *read_all(zt_runtime *rt, const minimal_model *m, int64_t *total)
{
    float *buf = malloc(sizeof(float) * 8192);
    int64_t off = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        int64_t nw = (int64_t)m->n_in[l] * m->n_out[l], nb = m->n_out[l];
        assert_int_equal(zt_param_read(rt, m->weight[l], buf + off, nw), ZT_OK);
        off += nw;
        assert_int_equal(zt_param_read(rt, m->bias[l], buf + off, nb), ZT_OK);
        off += nb;
    }
    *total = off;
    return buf;
}

static char dir[512];

static int make_dir(void **state)
{
    (void)state;
    const char *base = getenv("ZT_TEST_TMPDIR") ? getenv("ZT_TEST_TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/ckpt-%d", base, (int)getpid());
    return 0;
}

static int remove_dir(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void resume_equals_uninterrupted(const char *pdev, const char *odev)
{
    minimal_model m;
    zt_runtime *a = create(pdev, odev, &m, dims);
    train(a, &m, 0, 5);
    assert_int_equal(zt_checkpoint_save(a, dir), ZT_OK);
    train(a, &m, 5, 10);
    int64_t n = 0, n2 = 0;
    float *want = read_all(a, &m, &n);
    zt_runtime_destroy(a);

    zt_runtime *b = create(pdev, odev, &m, dims);
    assert_int_equal(zt_checkpoint_load(b, dir), ZT_OK);
    train(b, &m, 5, 10);
    zt_step_info info = ZT_STEP_INFO_INIT;
    float *got = read_all(b, &m, &n2);
    assert_int_equal(n, n2);
    assert_memory_equal(want, got, sizeof(float) * (size_t)n); /* bitwise */
    assert_int_equal(zt_step(b, NULL, &info), ZT_OK);
    assert_int_equal(info.step, 11); /* the step counter was restored too */
    free(want), free(got);
    zt_runtime_destroy(b);
}

static void test_resume_is_bitwise_host(void **state)
{
    (void)state;
    resume_equals_uninterrupted("cpu", "cpu");
}

static void test_resume_is_bitwise_device(void **state)
{
    (void)state;
    resume_equals_uninterrupted("none", "none");
}

static int truncate_file_for_test(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return -1;
    return truncate(path, sb.st_size - 100);
}

static void test_resume_is_bitwise_nvme(void **state)
{
    (void)state;
    static char swap[600];
    snprintf(swap, sizeof swap, "%s-swap", dir);
    mkdir(swap, 0755);
    setenv("ZT_NVME_PATH", swap, 1);
    resume_equals_uninterrupted("nvme", "nvme");
    /* m and v alone on NVMe: the fp32 parameters in host or device memory are the master */
    resume_equals_uninterrupted("cpu", "nvme");
    resume_equals_uninterrupted("none", "nvme");
    unsetenv("ZT_NVME_PATH");
    rmdir(swap);
}

/* root/<name of the latest checkpoint>/<file> */
static void latest_file(const char *file, char *out, size_t len)
{
    char list[600], name[64] = "";
    snprintf(list, sizeof list, "%s/latest", dir);
    FILE *f = fopen(list, "r");
    assert_non_null(f);
    assert_non_null(fgets(name, sizeof name, f));
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    snprintf(out, len, "%s/%s/%s", dir, name, file);
}

static void corrupt_shard(int truncate)
{
    char path[700];
    latest_file("rank-00000-of-00001.zts", path, sizeof path);
    if (truncate) {
        assert_int_equal(truncate_file_for_test(path), 0);
        return;
    }
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 1000, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 1000, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void expect_refused(zt_runtime *rt, const minimal_model *m, zt_status want,
                           const char *fragment)
{
    int64_t n = 0, n2 = 0;
    float *before = read_all(rt, m, &n);
    assert_int_equal(zt_checkpoint_load(rt, dir), want);
    if (!strstr(zt_last_error(rt), fragment))
        fail_msg("message '%s' lacks '%s'", zt_last_error(rt), fragment);
    float *after = read_all(rt, m, &n2);
    assert_memory_equal(before, after, sizeof(float) * (size_t)n); /* nothing changed */
    train((zt_runtime *)rt, m, 0, 1);                              /* still usable */
    free(before), free(after);
}

static void test_damaged_checkpoints_are_refused(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = create("cpu", "cpu", &m, dims);
    train(rt, &m, 0, 2);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    corrupt_shard(0);
    expect_refused(rt, &m, ZT_ERR_CORRUPT, "is damaged");
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    corrupt_shard(1);
    expect_refused(rt, &m, ZT_ERR_CORRUPT, "truncated");
    char manifest[700];
    latest_file("manifest.json", manifest, sizeof manifest);
    unlink(manifest);
    expect_refused(rt, &m, ZT_ERR_IO, "is missing");
    char list[600];
    snprintf(list, sizeof list, "%s/latest", dir);
    unlink(list);
    expect_refused(rt, &m, ZT_ERR_IO, "first save was interrupted");
    zt_runtime_destroy(rt);
}

static void test_foreign_model_is_refused(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = create("cpu", "cpu", &m, dims);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    zt_runtime_destroy(rt);
    mlp_dims other = dims;
    other.hidden = 40;
    rt = create("cpu", "cpu", &m, other);
    assert_int_equal(zt_checkpoint_load(rt, dir), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "different model"));
    assert_int_equal(zt_checkpoint_save(rt, "/proc/ztier-cannot-write-here"), ZT_ERR_IO);
    assert_non_null(strstr(zt_last_error(rt), "/proc/ztier-cannot-write-here"));
    zt_runtime_destroy(rt);
}

/* ---- an edited manifest: every field is checked, and so is its checksum ---- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 1 << 20);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

static void spill(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Sets manifest member `key` to the JSON value `value`; with fix_checksum the checksum is
 * recomputed as ztier would, so only the field checks can catch the edit. */
static void edit_manifest(const char *path, const char *original, const char *key,
                          const char *value, int fix_checksum)
{
    json_error_t je;
    json_t *m = json_loads(original, 0, &je), *v = json_loads(value, JSON_DECODE_ANY, &je);
    assert_non_null(m);
    assert_non_null(v);
    json_object_set_new(m, key, v);
    if (fix_checksum) {
        char sum[16];
        zt_manifest_checksum(m, sum);
        json_object_set_new(m, "checksum", json_string(sum));
    }
    assert_int_equal(json_dump_file(m, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17)), 0);
    json_decref(m);
}

/* A runtime trained 2 steps and saved: *rt, and its manifest's path and text. */
static char *saved_manifest(zt_runtime **rt, minimal_model *m, char *path, size_t len)
{
    *rt = create("cpu", "cpu", m, dims);
    train(*rt, m, 0, 2);
    assert_int_equal(zt_checkpoint_save(*rt, dir), ZT_OK);
    latest_file("manifest.json", path, len);
    return slurp(path);
}

static void test_edited_manifests_are_refused(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value;
        int fix;
        const char *fragment;
    } cases[] = {
        {"step", "1", 0, "checksum"},              /* edited by hand */
        {"step", "1", 1, "holds step 2"},          /* the shards hold another step */
        {"step", "\"2\"", 1, "\"step\" is \"2\""}, /* wrong type */
        {"step", "-5", 1, "\"step\" is -5"},       /* out of range */
        {"loss_scale", "0.5", 1, "loss_scale"},    /* would silently scale fp32 gradients */
        {"loss_scale", "\"1\"", 1, "loss_scale"},
        {"good_steps", "1.5", 1, "\"good_steps\" is 1.5"},
        {"fp16", "3", 1, "\"fp16\" is 3"},
        {"files", "[{\"name\": \"rank-00000-of-00001.zts\", \"bytes\": 1, \"crc32\": \"x\"}]", 1,
         "files[0].crc32"},
        {"version", "7", 1, "\"version\" is 7"},
    };
    minimal_model m;
    zt_runtime *rt = NULL;
    char path[700];
    char *original = saved_manifest(&rt, &m, path, sizeof path);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        edit_manifest(path, original, cases[i].key, cases[i].value, cases[i].fix);
        expect_refused(rt, &m, ZT_ERR_CORRUPT, cases[i].fragment);
    }
    /* An integer loss scale of 1 is the same number as 1.0: it loads, and steps still apply. */
    edit_manifest(path, original, "loss_scale", "1", 1);
    assert_int_equal(zt_checkpoint_load(rt, dir), ZT_OK);
    int64_t steps = 0;
    assert_int_equal(zt_step_count(rt, &steps), ZT_OK);
    assert_int_equal(steps, 2);
    float loss;
    zt_step_info info = ZT_STEP_INFO_INIT;
    assert_int_equal(minimal_micro_step(rt, &m, 2, 0, dims.batch, &loss), ZT_OK);
    assert_int_equal(zt_step(rt, NULL, &info), ZT_OK);
    assert_int_equal(info.skipped, 0);
    assert_true(info.loss_scale == 1.0f);
    assert_int_equal(info.step, 3);
    spill(path, original);
    free(original);
    zt_runtime_destroy(rt);
}

/* Each parameter's offset in its layer is checked too: moved, or missing, the checkpoint is
 * refused though the checksum matches (rewritten as ztier would). */
static void test_parameter_offsets_are_checked(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = NULL;
    char path[700];
    char *original = saved_manifest(&rt, &m, path, sizeof path);
    for (int missing = 0; missing < 2; missing++) {
        json_error_t je;
        json_t *man = json_loads(original, 0, &je);
        assert_non_null(man);
        json_t *bias = json_array_get(
            json_object_get(json_array_get(json_object_get(man, "layers"), 0), "params"), 1);
        json_int_t at = json_integer_value(json_object_get(bias, "offset"));
        assert_true(at > 0);
        if (missing)
            json_object_del(bias, "offset");
        else
            json_object_set_new(bias, "offset", json_integer(at + 16));
        char sum[16];
        zt_manifest_checksum(man, sum);
        json_object_set_new(man, "checksum", json_string(sum));
        assert_int_equal(json_dump_file(man, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17)), 0);
        json_decref(man);
        expect_refused(rt, &m, ZT_ERR_CORRUPT,
                       missing ? "layers[0].params[1].offset" : "where it must start");
    }
    spill(path, original);
    assert_int_equal(zt_checkpoint_load(rt, dir), ZT_OK);
    free(original);
    zt_runtime_destroy(rt);
}

/* A checkpoint records the stage that saved it and loads under another: stage 3 (parameters
 * in host memory) to stage 2 (replicated on the device) and back, resumed bitwise as the
 * uninterrupted stage-3 run; stage 0 lays its layers out alike on one rank and loads too. */
static void test_checkpoints_load_under_any_stage(void **state)
{
    (void)state;
    static const char *const stages[][3] = {{"cpu", "cpu", ", \"stage\": 3"},
                                            {"none", "cpu", ", \"stage\": 2"},
                                            {"none", "nvme", ", \"stage\": 1"},
                                            {"none", "none", ", \"stage\": 0"}};
    static char swap[600];
    snprintf(swap, sizeof swap, "%s-swap", dir);
    mkdir(swap, 0755);
    setenv("ZT_NVME_PATH", swap, 1);
    minimal_model m;
    zt_runtime *a = create_zero(stages[0][0], stages[0][1], stages[0][2], &m);
    train(a, &m, 0, 10);
    int64_t n = 0, n2 = 0;
    float *want = read_all(a, &m, &n);
    zt_runtime_destroy(a);
    for (int from = 0; from < 4; from++)
        for (int to = 0; to < 4; to++) {
            if (from == to)
                continue;
            a = create_zero(stages[from][0], stages[from][1], stages[from][2], &m);
            train(a, &m, 0, 5);
            assert_int_equal(zt_checkpoint_save(a, dir), ZT_OK);
            zt_runtime_destroy(a);
            char path[700], want_stage[32];
            latest_file("manifest.json", path, sizeof path);
            char *manifest = slurp(path);
            snprintf(want_stage, sizeof want_stage, "\"zero_stage\": %d", 3 - from);
            assert_non_null(strstr(manifest, want_stage));
            free(manifest);
            zt_runtime *b = create_zero(stages[to][0], stages[to][1], stages[to][2], &m);
            assert_int_equal(zt_checkpoint_load(b, dir), ZT_OK);
            train(b, &m, 5, 10);
            float *got = read_all(b, &m, &n2);
            assert_int_equal(n, n2);
            assert_memory_equal(want, got, sizeof(float) * (size_t)n); /* bitwise */
            free(got);
            zt_runtime_destroy(b);
        }
    free(want);
    unsetenv("ZT_NVME_PATH");
    rmdir(swap);
}

/* ---- the root folder: newest checkpoints kept, any of them loadable by folder ---- */

static int count_checkpoint_folders(void)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, "step-", 5) == 0;
    closedir(d);
    return n;
}

static void test_root_keeps_newest_checkpoints(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = rt_fixture_mlp(
        NULL, ref_mlp_config(&hp, "cpu", "cpu", 1, "", ", \"checkpoint_keep\": 3"), &dims, 42, &m);
    int64_t n = 0, n2 = 0;
    float *at4 = NULL;
    for (int s = 1; s <= 5; s++) {
        train(rt, &m, s - 1, s);
        assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
        if (s == 4)
            at4 = read_all(rt, &m, &n);
    }
    assert_int_equal(count_checkpoint_folders(), 3);
    char path[700];
    latest_file("manifest.json", path, sizeof path);
    assert_non_null(strstr(path, "/step-00000005/"));
    /* the same step saved twice gets its own folder, and becomes the latest */
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    latest_file("manifest.json", path, sizeof path);
    assert_non_null(strstr(path, "/step-00000005.1/"));
    assert_int_equal(count_checkpoint_folders(), 3);
    /* an older checkpoint loads by its folder (5.1, 5 and 4 are kept) */
    char folder[600];
    snprintf(folder, sizeof folder, "%s/step-00000004", dir);
    assert_int_equal(zt_checkpoint_load(rt, folder), ZT_OK);
    float *got = read_all(rt, &m, &n2);
    assert_memory_equal(at4, got, sizeof(float) * (size_t)n);
    free(at4), free(got);
    zt_runtime_destroy(rt);
}

/* ---- a full disk: the save fails, the previous checkpoint stays the latest ---- */

static uint64_t folder_bytes(const char *path)
{
    DIR *d = opendir(path);
    assert_non_null(d);
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char file[1200];
        struct stat sb;
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        if (e->d_name[0] != '.' && stat(file, &sb) == 0 && S_ISREG(sb.st_mode))
            total += ((uint64_t)sb.st_size + 4095) / 4096 * 4096;
    }
    closedir(d);
    return total;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Freeing an older checkpoint's blocks is no part of the save (0.2 s of a 0.8 s save of d12
 * on the development VM): with its removal slowed to 2 s (the tests' delay hook), the save
 * returns at once, the older folder already out of the checkpoint names but its files still
 * on the disk; zt_runtime_destroy waits until they are gone. */
static void test_save_does_not_wait_for_older_removal(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = rt_fixture_mlp(
        NULL, ref_mlp_config(&hp, "cpu", "cpu", 1, "", ", \"checkpoint_keep\": 1"), &dims, 42, &m);
    train(rt, &m, 0, 1);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    char aside[700];
    snprintf(aside, sizeof aside, "%s/.removing-step-00000001/manifest.json", dir);
    setenv("ZT_TEST_DELAY_AT", "older checkpoint removal", 1);
    setenv("ZT_TEST_DELAY_S", "2", 1);
    train(rt, &m, 1, 2);
    double t0 = seconds();
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    double took = seconds() - t0;
    int still_there = access(aside, F_OK) == 0;
    zt_runtime_destroy(rt);
    unsetenv("ZT_TEST_DELAY_AT");
    unsetenv("ZT_TEST_DELAY_S");
    assert_int_equal(count_checkpoint_folders(), 1);
    assert_true(still_there);
    assert_true(took < 1.0);
    assert_int_not_equal(access(aside, F_OK), 0); /* removed by the time destroy returned */
    snprintf(aside, sizeof aside, "%s/.removing-step-00000001", dir);
    assert_int_not_equal(access(aside, F_OK), 0);
}

static ino_t inode_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_ino : 0;
}

/* ztier.checkpoint_reuse_files (keep 1): the commit that removes step 1 keeps its folder as
 * root/.reuse, and the next save overwrites its rank file in place (the same inode) after
 * dropping what it does not write (another world's file; the old manifest is rewritten);
 * a reused file longer than the new one is cut to it. Every checkpoint loads bitwise, the
 * one `latest` names is never written into, and a save without the key removes .reuse. */
static void test_reuse_files_overwrites_removed_checkpoint(void **state)
{
    (void)state;
    minimal_model m;
    const char *keys = ", \"checkpoint_keep\": 1, \"checkpoint_reuse_files\": true";
    zt_runtime *rt =
        rt_fixture_mlp(NULL, ref_mlp_config(&hp, "cpu", "cpu", 1, "", keys), &dims, 42, &m);
    assert_non_null(rt);
    char spare[700], file[800], stale[800], path[800];
    snprintf(spare, sizeof spare, "%s/.reuse", dir);
    snprintf(file, sizeof file, "%s/rank-00000-of-00001.zts", spare);
    snprintf(stale, sizeof stale, "%s/rank-00001-of-00004.zts", spare);
    train(rt, &m, 0, 1);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    latest_file("rank-00000-of-00001.zts", path, sizeof path);
    ino_t first = inode_of(path);
    assert_int_not_equal(access(spare, F_OK), 0); /* nothing removed yet */
    train(rt, &m, 1, 2);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    assert_int_equal(inode_of(file), first); /* step 1's file, set aside */
    assert_int_equal(count_checkpoint_folders(), 1);
    FILE *f = fopen(stale, "w"); /* a file of another world, and step 1's file made longer */
    assert_non_null(f);
    fclose(f);
    f = fopen(file, "a");
    assert_non_null(f);
    assert_int_equal(fputs("tail past the new file's end", f) >= 0, 1);
    fclose(f);
    int64_t n = 0, n2 = 0;
    float *at2 = read_all(rt, &m, &n);
    latest_file("rank-00000-of-00001.zts", path, sizeof path);
    ino_t second = inode_of(path);
    train(rt, &m, 2, 3);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    float *at3 = read_all(rt, &m, &n);
    latest_file("rank-00000-of-00001.zts", path, sizeof path);
    assert_non_null(strstr(path, "/step-00000003/"));
    assert_int_equal(inode_of(path), first);  /* step 1's blocks, overwritten */
    assert_int_equal(inode_of(file), second); /* step 2's, kept whole for the next save */
    latest_file("rank-00001-of-00004.zts", path, sizeof path);
    assert_int_not_equal(access(path, F_OK), 0); /* the stale file went */
    zt_runtime_destroy(rt);

    /* step 3 loads bitwise; step 2 (in .reuse, out of `latest`) is still whole: load it by
     * its folder after putting it back under its name */
    rt = create("cpu", "cpu", &m, dims);
    assert_int_equal(zt_checkpoint_load(rt, dir), ZT_OK);
    float *got = read_all(rt, &m, &n2);
    assert_memory_equal(at3, got, sizeof(float) * (size_t)n);
    free(got);
    snprintf(path, sizeof path, "%s/step-00000002", dir);
    assert_int_equal(rename(spare, path), 0);
    assert_int_equal(zt_checkpoint_load(rt, path), ZT_OK);
    got = read_all(rt, &m, &n2);
    assert_memory_equal(at2, got, sizeof(float) * (size_t)n);
    free(got), free(at2), free(at3);
    assert_int_equal(rename(path, spare), 0);
    /* without the key, the next save removes the folder a run with it left */
    train(rt, &m, 0, 1);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    assert_int_not_equal(access(spare, F_OK), 0);
    zt_runtime_destroy(rt);
}

static void test_full_disk_keeps_previous_checkpoint(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = create("cpu", "cpu", &m, dims);
    train(rt, &m, 0, 2);
    /* measure one checkpoint, then give the disk room for one and a half */
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    char path[700];
    latest_file("", path, sizeof path);
    uint64_t one = folder_bytes(path);
    assert_int_equal(remove_dir(NULL), 0);
    mkdir(dir, 0755);
    char opts[64];
    snprintf(opts, sizeof opts, "size=%llu", (unsigned long long)(one * 3 / 2 + 8192));
    if (mount("tmpfs", dir, "tmpfs", 0, opts) != 0) {
        zt_runtime_destroy(rt);
        skip(); /* no mount rights here */
    }
    int64_t n = 0, n2 = 0;
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    float *saved = read_all(rt, &m, &n);
    train(rt, &m, 2, 4);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_ERR_NOSPACE);
    assert_non_null(strstr(zt_last_error(rt), dir));
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_ERR_NOSPACE); /* again: nothing piles up */
    zt_runtime_destroy(rt);

    rt = create("cpu", "cpu", &m, dims);
    assert_int_equal(zt_checkpoint_load(rt, dir), ZT_OK);
    float *got = read_all(rt, &m, &n2);
    assert_memory_equal(saved, got, sizeof(float) * (size_t)n);
    assert_int_equal(count_checkpoint_folders(), 1);
    free(saved), free(got);
    zt_runtime_destroy(rt);
    umount2(dir, MNT_DETACH);
}

/* ---- Adam's m and v read back through the API, restored bitwise by a load ---- */

static void test_optimizer_state_reads_back(void **state)
{
    (void)state;
    static char swap[600];
    snprintf(swap, sizeof swap, "%s-swap", dir);
    mkdir(swap, 0755);
    setenv("ZT_NVME_PATH", swap, 1);
    minimal_model m;
    zt_runtime *rt = create("cpu", "nvme", &m, dims);
    train(rt, &m, 0, 3);
    int64_t n = (int64_t)m.n_out[0] * m.n_in[0];
    float *saved[3], *got = malloc(sizeof(float) * (size_t)n);
    for (int s = 0; s < 3; s++) {
        saved[s] = malloc(sizeof(float) * (size_t)n);
        assert_int_equal(zt_param_read_state(rt, m.weight[0], (zt_param_state)s, saved[s], n),
                         ZT_OK);
    }
    double m_abs = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(saved[2][i] >= 0.0f); /* v: a running mean of squares */
        m_abs += fabs(saved[1][i]);
    }
    assert_true(m_abs > 0); /* three steps moved m */
    assert_int_equal(zt_param_read_state(rt, m.weight[0], ZT_STATE_MASTER, got, n), ZT_OK);
    assert_memory_equal(got, saved[0], sizeof(float) * (size_t)n);
    assert_int_equal(zt_param_read(rt, m.weight[0], got, n), ZT_OK); /* the same as the master */
    assert_memory_equal(got, saved[0], sizeof(float) * (size_t)n);
    assert_int_equal(zt_param_read_state(rt, m.weight[0], (zt_param_state)7, got, n),
                     ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "ZT_STATE_ADAM_V"));
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    zt_runtime_destroy(rt);

    rt = create("nvme", "cpu", &m, dims); /* another placement */
    assert_int_equal(zt_checkpoint_load(rt, dir), ZT_OK);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(zt_param_read_state(rt, m.weight[0], (zt_param_state)s, got, n), ZT_OK);
        assert_memory_equal(got, saved[s], sizeof(float) * (size_t)n);
        free(saved[s]);
    }
    free(got);
    zt_runtime_destroy(rt);
    unsetenv("ZT_NVME_PATH");
    rmdir(swap);
}

/* ---- meta values: kept with each checkpoint, back after a load ---- */

static void test_meta_values_round_trip(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = create("cpu", "cpu", &m, dims);
    int64_t v = 0;
    assert_int_equal(zt_checkpoint_meta_get(rt, "data.position", &v), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "data.position"));
    assert_int_equal(zt_checkpoint_meta_set(rt, "data.position", 7), ZT_OK);
    assert_int_equal(zt_checkpoint_meta_set(rt, "data.position", INT64_C(1) << 40), ZT_OK);
    assert_int_equal(zt_checkpoint_meta_set(rt, "model.heads", -3), ZT_OK);
    assert_int_equal(zt_checkpoint_meta_set(rt, "bad key", 1), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "bad key"));
    assert_int_equal(zt_checkpoint_meta_set(rt, "", 1), ZT_ERR_ARGUMENT);
    train(rt, &m, 0, 2);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    zt_runtime_destroy(rt);

    rt = create("cpu", "cpu", &m, dims); /* set before the load, then the saved value wins */
    assert_int_equal(zt_checkpoint_meta_set(rt, "model.heads", 12), ZT_OK);
    assert_int_equal(zt_checkpoint_meta_set(rt, "only.here", 5), ZT_OK);
    assert_int_equal(zt_checkpoint_load(rt, dir), ZT_OK);
    assert_int_equal(zt_checkpoint_meta_get(rt, "data.position", &v), ZT_OK);
    assert_true(v == INT64_C(1) << 40);
    assert_int_equal(zt_checkpoint_meta_get(rt, "model.heads", &v), ZT_OK);
    assert_int_equal(v, -3);
    assert_int_equal(zt_checkpoint_meta_get(rt, "only.here", &v), ZT_OK); /* kept */
    assert_int_equal(v, 5);
    char key[16];
    for (int i = 3; i < 16; i++) {
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(zt_checkpoint_meta_set(rt, key, i), ZT_OK);
    }
    assert_int_equal(zt_checkpoint_meta_set(rt, "one.too.many", 1), ZT_ERR_ARGUMENT);
    assert_non_null(strstr(zt_last_error(rt), "at most 16"));
    assert_int_equal(zt_checkpoint_meta_get(rt, "k15", &v), ZT_OK);
    assert_int_equal(v, 15);
    zt_runtime_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_resume_is_bitwise_host, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_resume_is_bitwise_device, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_resume_is_bitwise_nvme, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_damaged_checkpoints_are_refused, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_foreign_model_is_refused, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_edited_manifests_are_refused, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_parameter_offsets_are_checked, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_checkpoints_load_under_any_stage, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_root_keeps_newest_checkpoints, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_save_does_not_wait_for_older_removal, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_reuse_files_overwrites_removed_checkpoint, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_full_disk_keeps_previous_checkpoint, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_meta_values_round_trip, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_optimizer_state_reads_back, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Checkpoints: save at step 5, resume in a fresh runtime, and steps 6-10 equal the
 * uninterrupted run bitwise; truncated, damaged, incomplete and foreign checkpoints are
 * refused with a message naming the cause, and the runtime stays usable. */
#include "ref_mlp.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

static zt_runtime *create(const char *pdev, const char *odev, minimal_model *m, mlp_dims d)
{
    zt_runtime *rt = NULL;
    assert_int_equal(zt_runtime_create(NULL, ref_mlp_config(&hp, pdev, odev, 1, "", ""), &rt),
                     ZT_OK);
    assert_int_equal(minimal_register(rt, &d, 42, m), ZT_OK);
    assert_int_equal(zt_runtime_commit(rt), ZT_OK);
    return rt;
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
    zt_step_info info;
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
    unsetenv("ZT_NVME_PATH");
    rmdir(swap);
}

static void corrupt_shard(int truncate)
{
    char path[600];
    snprintf(path, sizeof path, "%s/rank-00000-of-00001.zts", dir);
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
    char manifest[600];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
    unlink(manifest);
    expect_refused(rt, &m, ZT_ERR_CORRUPT, "save was interrupted");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_resume_is_bitwise_host, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_resume_is_bitwise_device, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_resume_is_bitwise_nvme, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_damaged_checkpoints_are_refused, make_dir,
                                        remove_dir),
        cmocka_unit_test_setup_teardown(test_foreign_model_is_refused, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Token data: an llm.c shard written and read back; a bad magic number, a truncated file and
 * a missing file are refused with messages naming the file and the problem; the rank slices
 * of a global batch tile it exactly; targets are the inputs shifted by one. */
#include "dataloader.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char path[512];

static void make_path(const char *name)
{
    const char *base = getenv("ZT_TEST_TMPDIR") ? getenv("ZT_TEST_TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/%s-%d.bin", base, name, (int)getpid());
}

static void test_shard_roundtrip_and_errors(void **state)
{
    (void)state;
    uint16_t toks[1000];
    for (int i = 0; i < 1000; i++)
        toks[i] = (uint16_t)(i * 37 % 50257);
    token_data t = {toks, 1000, 0}, back;
    char err[512];
    make_path("shard");
    assert_int_equal(tokens_write_shard(path, &t, err, sizeof err), 0);
    assert_int_equal(tokens_load_shard(path, &back, err, sizeof err), 0);
    assert_int_equal(back.n, 1000);
    assert_memory_equal(back.tokens, toks, sizeof toks);
    tokens_free(&back);
    assert_int_equal(truncate(path, 1024 + 500), 0);
    assert_int_equal(tokens_load_shard(path, &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "is truncated"));
    assert_non_null(strstr(err, path));
    FILE *f = fopen(path, "r+b");
    int32_t bad = 12345;
    fwrite(&bad, 4, 1, f);
    fclose(f);
    assert_int_equal(tokens_load_shard(path, &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an llm.c token shard"));
    unlink(path);
    assert_int_equal(tokens_load_shard(path, &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
}

static void test_rank_slices_tile_the_batch(void **state)
{
    (void)state;
    uint16_t toks[5000];
    for (int i = 0; i < 5000; i++)
        toks[i] = (uint16_t)(i % 251);
    token_data t = {toks, 5000, 250};
    enum { BATCH = 8, T = 16 };
    int in[BATCH * T], tg[BATCH * T], part_in[BATCH * T], part_tg[BATCH * T];
    for (int64_t step = 0; step < 50; step += 7) {
        tokens_batch(&t, step, BATCH, T, 0, BATCH, in, tg);
        for (int world = 2; world <= 4; world *= 2)
            for (int r = 0; r < world; r++) {
                int rows = BATCH / world;
                tokens_batch(&t, step, BATCH, T, r * rows, rows, part_in, part_tg);
                assert_memory_equal(part_in, in + r * rows * T, sizeof(int) * rows * T);
                assert_memory_equal(part_tg, tg + r * rows * T, sizeof(int) * rows * T);
            }
        for (int i = 0; i < BATCH * T; i++)
            assert_int_equal(tg[i], (in[i] + 1) % 251);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_roundtrip_and_errors),
        cmocka_unit_test(test_rank_slices_tile_the_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

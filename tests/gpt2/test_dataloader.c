/* SPDX-License-Identifier: MIT */
/* Token data: an llm.c shard written and read back; a bad magic number, a bad version, a
 * truncated file or header, trailing data and a missing file are refused with messages
 * naming the file and the problem; byte-level text converts to a shard losslessly; the rank
 * slices of a global batch tile it exactly; targets are the inputs shifted by one; any step
 * count (up to 2^62) gives a batch from inside the data, a negative one is refused. */
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

static void write_tokens(int n, token_data *t, uint16_t *toks)
{
    for (int i = 0; i < n; i++)
        toks[i] = (uint16_t)(i * 37 % 50257);
    *t = (token_data){toks, n, 0};
    char err[512];
    assert_int_equal(tokens_write_shard(path, t, err, sizeof err), 0);
}

/* Loading `path` fails with a message naming the file and containing `what`. */
static void assert_refused(const char *what)
{
    token_data back;
    char err[512];
    assert_int_equal(tokens_load_shard(path, &back, err, sizeof err), -1);
    if (!strstr(err, what) || !strstr(err, path))
        fail_msg("expected '%s' and the path in: %s", what, err);
    assert_null(back.tokens);
}

static void patch_int32(long offset, int32_t value)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, offset, SEEK_SET);
    assert_int_equal(fwrite(&value, 4, 1, f), 1);
    fclose(f);
}

static void test_shard_roundtrip(void **state)
{
    (void)state;
    uint16_t toks[1000];
    token_data t, back;
    char err[512];
    make_path("shard");
    write_tokens(1000, &t, toks);
    assert_int_equal(tokens_load_shard(path, &back, err, sizeof err), 0);
    assert_int_equal(back.n, 1000);
    assert_memory_equal(back.tokens, toks, sizeof toks);
    int max = 0;
    for (int i = 0; i < 1000; i++)
        max = toks[i] > max ? toks[i] : max;
    assert_int_equal(back.max_token, max);
    tokens_free(&back);
    unlink(path);
}

static void test_shard_errors_name_file_and_problem(void **state)
{
    (void)state;
    uint16_t toks[1000];
    token_data t;
    make_path("bad");
    write_tokens(1000, &t, toks);
    patch_int32(0, 12345);
    assert_refused("bad magic number");
    write_tokens(1000, &t, toks);
    patch_int32(4, 2);
    assert_refused("bad version");
    write_tokens(1000, &t, toks);
    assert_int_equal(truncate(path, 1024 + 500), 0);
    assert_refused("truncated: the header declares 1000 tokens (2000 bytes) but 500");
    assert_int_equal(truncate(path, 1000), 0);
    assert_refused("truncated: shorter than its 1024-byte header");
    write_tokens(1000, &t, toks);
    patch_int32(8, 900);
    assert_refused("trailing data");
    unlink(path);
    assert_refused("cannot open");
}

/* Text read as bytes and written as a shard reads back as the same tokens. */
static void test_text_to_shard(void **state)
{
    (void)state;
    make_path("text");
    const char text[] = "It is a truth universally acknowledged\n\xc3\xa9\xff";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(text, 1, sizeof text - 1, f);
    fclose(f);
    token_data t, back;
    char err[512], shard[600];
    assert_int_equal(tokens_load_text(path, &t, err, sizeof err), 0);
    assert_int_equal(t.n, (int64_t)sizeof text - 1);
    assert_int_equal(t.max_token, 255);
    for (int64_t i = 0; i < t.n; i++)
        assert_int_equal(t.tokens[i], (unsigned char)text[i]);
    snprintf(shard, sizeof shard, "%s.bin", path);
    assert_int_equal(tokens_write_shard(shard, &t, err, sizeof err), 0);
    assert_int_equal(tokens_load_shard(shard, &back, err, sizeof err), 0);
    assert_int_equal(back.n, t.n);
    assert_memory_equal(back.tokens, t.tokens, sizeof(uint16_t) * (size_t)t.n);
    tokens_free(&t), tokens_free(&back);
    unlink(shard), unlink(path);
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

/* The start of each sequence follows the documented formula, computed here in exact
 * integer arithmetic (long division by hand, no overflow) for step counts near 2^62. */
static void test_any_step_stays_inside_the_data(void **state)
{
    (void)state;
    uint16_t toks[1000];
    for (int i = 0; i < 1000; i++)
        toks[i] = (uint16_t)i;
    token_data t = {toks, 1000, 999};
    enum { BATCH = 4, T = 8 };
    const uint64_t span = 1000 - T - 1;
    int in[BATCH * T], tg[BATCH * T];
    int64_t steps[] = {0, 1, 123456789, INT64_C(1) << 40, (INT64_C(1) << 62) - 1};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        assert_int_equal(tokens_batch(&t, steps[k], BATCH, T, 0, BATCH, in, tg), 0);
        for (int r = 0; r < BATCH; r++) {
            /* ((step * BATCH + r) * T) mod span, reduced factor by factor */
            uint64_t seq = ((uint64_t)steps[k] % span * BATCH + (uint64_t)r) % span;
            uint64_t start = seq * T % span;
            assert_int_equal(in[r * T], (int)start);
            assert_int_equal(tg[r * T + T - 1], (int)(start + T));
        }
    }
    memset(in, 0x55, sizeof in);
    assert_int_equal(tokens_batch(&t, -5, BATCH, T, 0, BATCH, in, tg), -1);
    assert_int_equal(in[0], 0x55555555); /* nothing written */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_roundtrip),
        cmocka_unit_test(test_shard_errors_name_file_and_problem),
        cmocka_unit_test(test_text_to_shard),
        cmocka_unit_test(test_rank_slices_tile_the_batch),
        cmocka_unit_test(test_any_step_stays_inside_the_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

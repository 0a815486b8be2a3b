/* SPDX-License-Identifier: MIT */
/* The progress line (core/progress.h) with ZT_PROGRESS=1 against known byte counts: each
 * update draws "\r<what>: <done> of <total> (<pct>%), ..." and the end a final line with the
 * whole count and a newline; quiet (nothing written) on a stream that is not a terminal,
 * with ZT_PROGRESS=0, and for a disabled rank. No timing is asserted. */
#include "core/progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

/* What p wrote into f. */
static char *contents(FILE *f)
{
    static char buf[1 << 20]; /* 4000 lines of the threads test */
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    return buf;
}

/* The n-th segment of s between '\r's (0: before the first). */
static const char *segment(const char *s, int n, char *out, size_t len)
{
    for (int i = 0; i < n && s; i++)
        s = strchr(s, '\r') ? strchr(s, '\r') + 1 : NULL;
    if (!s)
        return NULL;
    size_t k = strcspn(s, "\r");
    snprintf(out, len, "%.*s", (int)(k < len ? k : len - 1), s);
    return out;
}

static void test_bytes(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(zt_progress_bytes(0, b, sizeof b), "0 B");
    assert_string_equal(zt_progress_bytes(999, b, sizeof b), "999 B");
    assert_string_equal(zt_progress_bytes(1000, b, sizeof b), "1.00 kB");
    assert_string_equal(zt_progress_bytes(1500000, b, sizeof b), "1.50 MB");
    assert_string_equal(zt_progress_bytes(18683107328ull, b, sizeof b), "18.68 GB");
}

static void test_forced_lines(void **state)
{
    (void)state;
    setenv("ZT_PROGRESS", "1", 1);
    FILE *f = tmpfile();
    zt_progress p;
    zt_progress_begin(&p, f, "export", 6000000, 1);
    for (int i = 0; i < 4; i++)
        zt_progress_add(&p, 1500000);
    zt_progress_end(&p, 1);
    const char *s = contents(f),
               *want[] = {"export: 1.50 MB of 6.00 MB (25%), ",
                          "export: 3.00 MB of 6.00 MB (50%), ",
                          "export: 4.50 MB of 6.00 MB (75%), ",
                          "export: 6.00 MB of 6.00 MB (100%), ", "export: 6.00 MB in "};
    char seg[256];
    assert_string_equal(segment(s, 0, seg, sizeof seg), ""); /* every line starts with \r */
    for (int i = 0; i < 5; i++) {
        assert_non_null(segment(s, i + 1, seg, sizeof seg));
        assert_memory_equal(seg, want[i], strlen(want[i]));
        assert_non_null(strstr(seg, i < 4 ? " GB/s, " : " GB/s"));
        assert_non_null(strstr(seg, i < 4 ? " s left\033[K" : "\033[K\n"));
    }
    assert_null(segment(s, 6, seg, sizeof seg));
    assert_int_equal(s[strlen(s) - 1], '\n');
    fclose(f);
}

static void test_stopped(void **state)
{
    (void)state;
    setenv("ZT_PROGRESS", "1", 1);
    FILE *f = tmpfile();
    zt_progress p;
    zt_progress_begin(&p, f, "checkpoint load", 4000, 1);
    zt_progress_add(&p, 1000);
    zt_progress_end(&p, 0);
    char seg[256];
    assert_string_equal(segment(contents(f), 2, seg, sizeof seg),
                        "checkpoint load: stopped after 1.00 kB\033[K\n");
    fclose(f);
}

static zt_progress shared;

static void *adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        zt_progress_add(&shared, 1000);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    setenv("ZT_PROGRESS", "1", 1);
    FILE *f = tmpfile();
    zt_progress_begin(&shared, f, "save", 4000000, 1);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, adder, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    zt_progress_end(&shared, 1);
    const char *s = contents(f), *last = strrchr(s, '\r');
    assert_non_null(last);
    assert_memory_equal(last, "\rsave: 4.00 MB in ", 18);
    assert_int_equal(shared.done, 4000000);
    fclose(f);
}

/* Not a terminal, ZT_PROGRESS=0, or a rank that does not draw: nothing at all. */
static void test_quiet(void **state)
{
    (void)state;
    const char *envs[] = {NULL, "0", "1"};
    for (int i = 0; i < 3; i++) {
        if (envs[i])
            setenv("ZT_PROGRESS", envs[i], 1);
        else
            unsetenv("ZT_PROGRESS");
        FILE *f = tmpfile();
        zt_progress p;
        zt_progress_begin(&p, f, "x", 100, i < 2); /* the last: enabled 0 */
        zt_progress_add(&p, 60);
        zt_progress_add(&p, 40);
        zt_progress_end(&p, 1);
        assert_string_equal(contents(f), "");
        assert_int_equal(p.done, 100); /* counted all the same */
        fclose(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),   cmocka_unit_test(test_forced_lines),
        cmocka_unit_test(test_stopped), cmocka_unit_test(test_threads),
        cmocka_unit_test(test_quiet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

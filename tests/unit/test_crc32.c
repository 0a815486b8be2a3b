/* SPDX-License-Identifier: MIT */
/* zt_crc32 (core/crc32.c: ISA-L's crc32_gzip_refl where the build found libisal, else zlib)
 * gives zlib's crc32_z values, the reference every checkpoint file and manifest holds: random
 * buffers of random lengths (0 to a few MiB, odd ones and unaligned starts included), whole and
 * continued in random pieces; and the CRC of "123456789" is the standard check value. */
#include "core/crc32.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void check_value(void **state)
{
    (void)state;
    assert_int_equal(zt_crc32(0, "123456789", 9), 0xcbf43926u);
    assert_int_equal(zt_crc32(0, "", 0), 0u);
    printf("zt_crc32 runs %s\n", zt_crc32_impl());
}

static void random_buffers_match_zlib(void **state)
{
    (void)state;
    enum { MAX = 3 << 20 };
    unsigned char *buf = malloc(MAX + 64);
    assert_non_null(buf);
    for (size_t i = 0; i < MAX + 64; i++)
        buf[i] = (unsigned char)next();
    for (int t = 0; t < 200; t++) {
        size_t len = t < 64 ? (size_t)t : (size_t)(next() % (t < 150 ? 4096 : MAX));
        const unsigned char *p = buf + next() % 64; /* unaligned starts too */
        uint32_t want = (uint32_t)crc32_z(crc32(0L, Z_NULL, 0), p, len);
        assert_int_equal(zt_crc32(0, p, len), want);
        uint32_t c = 0; /* continued over random pieces, as the writer and reader do */
        for (size_t at = 0; at < len;) {
            size_t n = (size_t)(next() % 70000) + 1;
            n = n > len - at ? len - at : n;
            c = zt_crc32(c, p + at, n);
            at += n;
        }
        assert_int_equal(c, want);
        uint32_t seed = (uint32_t)next(); /* any running value continues like zlib's */
        assert_int_equal(zt_crc32(seed, p, len), (uint32_t)crc32_z(seed, p, len));
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(check_value),
        cmocka_unit_test(random_buffers_match_zlib),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

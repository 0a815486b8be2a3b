/* SPDX-License-Identifier: MIT */
/* The checkpoint file writer and reader (runtime/checkpoint_writer.c, checkpoint_reader.c)
 * against plain files: for lengths around the block and ring sizes, bytes put in uneven
 * pieces come back from the file and from the reader (in other uneven pieces) unchanged, with
 * zlib's CRC-32 of them and the exact length, on both I/O engines; reading past the end and an
 * injected write failure (ENOSPC) are errors naming the file. (A full tmpfs, through the
 * page cache where it has no O_DIRECT: test_checkpoint's full-disk test.) */
#include "runtime/checkpoint_reader.h"
#include "runtime/checkpoint_writer.h"
#include "tiers/io_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

static char path[600];

static int make_path(void **state)
{
    (void)state;
    const char *base = getenv("ZT_TEST_TMPDIR") ? getenv("ZT_TEST_TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/ckpt-stream-%d.bin", base, (int)getpid());
    return 0;
}

static int remove_path(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static unsigned char *pattern(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
    return p;
}

/* Only some ranges taken (a resharded load's pieces): near ones, far ones, one across two
 * 8 MiB reads, one in the last partial block; the bytes are the file's, and a byte outside
 * the ranges given is refused (ZT_ERR_INTERNAL), not read. */
static void ranges(size_t n, const unsigned char *data, zt_io_engine_kind engine)
{
    zt_ckpt_range want[5];
    size_t k = 0;
    const uint64_t at[] = {10, 5000, 90000, (8 << 20) - 100, n - (n % 4096) + 1};
    const uint64_t len[] = {300, 1000, 20000, 200, n % 4096 > 2 ? n % 4096 - 2 : 0};
    for (int i = 0; i < 5; i++)
        if (len[i] && at[i] + len[i] <= n && (!k || at[i] >= want[k - 1].off + want[k - 1].len))
            want[k++] = (zt_ckpt_range){at[i], len[i]};
    if (!k)
        return;
    zt_error err = {0};
    zt_ckpt_reader *r = NULL;
    uint64_t size = 0;
    assert_int_equal(zt_ckpt_reader_open_ranges(path, engine, want, k, &size, &r, &err), ZT_OK);
    for (size_t i = 0; i < k; i++) {
        unsigned char *got = malloc(want[i].len);
        assert_int_equal(zt_ckpt_reader_seek(r, want[i].off), ZT_OK);
        assert_int_equal(zt_ckpt_reader_get(r, got, want[i].len), ZT_OK);
        assert_memory_equal(got, data + want[i].off, want[i].len);
        free(got);
    }
    zt_ckpt_reader_close(r);
    if (n < 200000 || want[0].off + want[0].len + 100000 > n)
        return;
    assert_int_equal(zt_ckpt_reader_open_ranges(path, engine, want, 1, &size, &r, &err), ZT_OK);
    assert_int_equal(zt_ckpt_reader_seek(r, want[0].off + want[0].len + 100000), ZT_OK);
    unsigned char b;
    assert_int_equal(zt_ckpt_reader_get(r, &b, 1), ZT_ERR_INTERNAL);
    zt_ckpt_reader_close(r);
}

static void round_trip(size_t n, zt_io_engine_kind engine)
{
    unsigned char *data = pattern(n, (unsigned)n), *back = malloc(n + 1);
    zt_error err = {0};
    zt_ckpt_writer *w = NULL;
    assert_int_equal(zt_ckpt_writer_open(path, engine, &w, &err), ZT_OK);
    for (size_t at = 0, piece = 1; at < n; piece = piece * 7 + 3) { /* uneven pieces */
        size_t take = piece % (3 << 20) + 1 < n - at ? piece % (3 << 20) + 1 : n - at;
        assert_int_equal(zt_ckpt_writer_put(w, data + at, take), ZT_OK);
        at += take;
    }
    uint64_t bytes = 0;
    uint32_t crc = 0;
    assert_int_equal(zt_ckpt_writer_finish(w, &bytes, &crc), ZT_OK);
    assert_int_equal(bytes, n);
    assert_int_equal(crc, (uint32_t)crc32_z(crc32(0L, Z_NULL, 0), data, n));
    uint64_t size2 = 0; /* the whole file's CRC, taken from the read buffers */
    uint32_t crc2 = 0;
    assert_int_equal(zt_ckpt_file_crc(path, engine, &size2, &crc2, &err), ZT_OK);
    assert_int_equal(size2, n);
    assert_int_equal(crc2, crc);
    FILE *f = fopen(path, "rb"); /* the file itself */
    assert_non_null(f);
    assert_int_equal(fread(back, 1, n + 1, f), n);
    fclose(f);
    if (n)
        assert_memory_equal(back, data, n);
    memset(back, 0, n + 1);
    zt_ckpt_reader *r = NULL; /* and through the reader */
    uint64_t size = 0;
    assert_int_equal(zt_ckpt_reader_open(path, engine, &size, &r, &err), ZT_OK);
    assert_int_equal(size, n);
    for (size_t at = 0, piece = 5; at < n; piece = piece * 5 + 1) {
        size_t take = piece % (5 << 20) + 1 < n - at ? piece % (5 << 20) + 1 : n - at;
        assert_int_equal(zt_ckpt_reader_get(r, at % 3 ? back + at : NULL, take), ZT_OK);
        if (at % 3 == 0) /* skipped: fill from the data to compare the rest */
            memcpy(back + at, data + at, take);
        at += take;
    }
    if (n)
        assert_memory_equal(back, data, n);
    assert_int_equal(zt_ckpt_reader_get(r, back, 1), ZT_ERR_CORRUPT);
    assert_non_null(strstr(err.msg, path));
    zt_ckpt_reader_close(r);
    /* straight into aligned memory (a same-layout load's image): the bytes and zlib's CRC */
    unsigned char *img = aligned_alloc(4096, (n + 4095) / 4096 * 4096 + 4096);
    uint32_t crc3 = 0;
    assert_int_equal(zt_ckpt_read_into(path, img, n, NULL, &crc3, NULL, &err), ZT_OK);
    if (n)
        assert_memory_equal(img, data, n);
    assert_int_equal(crc3, crc);
    free(img);
    ranges(n, data, engine);
    free(data), free(back);
}

static void test_round_trips(void **state)
{
    (void)state;
    const size_t sizes[] = {0, 1, 4095, 4096, 4097, 8 << 20, (8 << 20) + 3, 41 * 1000 * 1000 + 123};
    for (int e = 0; e < 2; e++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            round_trip(sizes[i], e ? ZT_IO_ENGINE_THREADS : ZT_IO_ENGINE_AUTO);
}

static void test_failed_write_is_reported(void **state)
{
    (void)state;
    for (int e = 0; e < 2; e++) {
        zt_error err = {0};
        zt_ckpt_writer *w = NULL;
        assert_int_equal(
            zt_ckpt_writer_open(path, e ? ZT_IO_ENGINE_THREADS : ZT_IO_ENGINE_AUTO, &w, &err),
            ZT_OK);
        zt_io_test_fail(ZT_IO_WRITE, ENOSPC, 1); /* the second buffer written */
        unsigned char *data = pattern(20 << 20, 7);
        zt_status st = zt_ckpt_writer_put(w, data, 20 << 20);
        uint64_t bytes;
        uint32_t crc;
        zt_status fin = zt_ckpt_writer_finish(w, &bytes, &crc);
        assert_int_equal(st != ZT_OK ? st : fin, ZT_ERR_NOSPACE);
        assert_non_null(strstr(err.msg, path));
        assert_non_null(strstr(err.msg, "the disk is full"));
        assert_false(zt_io_test_failure_pending());
        free(data);
    }
}

/* Whether io_uring can be set up here (a container's seccomp may refuse it). */
static int uring_available(void)
{
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    zt_io_engine *e = NULL;
    char why[256];
    int ok = fd >= 0 && zt_io_uring_engine.create(&fd, 1, 1, 1, &e, why, sizeof why) == 0;
    if (e)
        zt_io_uring_engine.destroy(e);
    if (fd >= 0)
        close(fd);
    return ok;
}

/* A registered ring's slots are pinned once: every write runs from io_uring's registered
 * buffers, as fio's do, instead of pinning its pages per transfer (which kept a save at
 * 0.6-0.8 of fio's overwrite). Counted by the engine, and the bytes land unchanged; then the
 * checkpoint writer's own ring: its 3 writes (2 full buffers, the tail) all registered. */
static void test_ring_transfers_from_registered_slots(void **state)
{
    (void)state;
    if (!uring_available())
        skip();
    enum { SLOTS = 3, SLOT = 1 << 20, WRITES = 10 };
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    zt_io_ring *r = NULL;
    char why[256] = "";
    assert_int_equal(zt_io_ring_create(fd, SLOTS, SLOT, ZT_IO_ENGINE_URING, &r, why, sizeof why),
                     0);
    assert_int_equal(zt_io_ring_register(r), 0);
    unsigned char *data = pattern((size_t)WRITES * SLOT, 3);
    for (int i = 0; i < WRITES; i++) {
        assert_int_equal(zt_io_ring_wait(r, i % SLOTS), 0);
        memcpy(zt_io_ring_buf(r, i % SLOTS), data + (size_t)i * SLOT, SLOT);
        zt_io_ring_submit(r, i % SLOTS, ZT_IO_WRITE, (uint64_t)i * SLOT, SLOT);
    }
    for (int i = 0; i < SLOTS; i++)
        assert_int_equal(zt_io_ring_wait(r, i), 0);
    assert_int_equal(zt_io_ring_fixed_ios(r), WRITES);
    zt_io_ring_destroy(r);
    unsigned char *back = malloc((size_t)WRITES * SLOT);
    assert_int_equal(pread(fd, back, (size_t)WRITES * SLOT, 0), (ssize_t)WRITES * SLOT);
    assert_memory_equal(back, data, (size_t)WRITES * SLOT);
    close(fd);
    free(back);
    free(data);
    /* the writer: 5 buffers of 8 MiB put; the 5th waited for the 2nd's write to complete */
    zt_error err = {0};
    zt_ckpt_writer *w = NULL;
    assert_int_equal(zt_ckpt_writer_open(path, ZT_IO_ENGINE_URING, &w, &err), ZT_OK);
    data = pattern((size_t)5 << 23, 5);
    assert_int_equal(zt_ckpt_writer_put(w, data, (size_t)5 << 23), ZT_OK);
    assert_true(zt_ckpt_writer_fixed_ios(w) >= 2);
    uint64_t bytes;
    uint32_t crc;
    assert_int_equal(zt_ckpt_writer_finish(w, &bytes, &crc), ZT_OK);
    assert_int_equal(crc, (uint32_t)crc32(0, data, (uInt)((size_t)5 << 23)));
    free(data);
}

static void test_missing_file(void **state)
{
    (void)state;
    zt_error err = {0};
    zt_ckpt_reader *r = NULL;
    uint64_t size = 0;
    unlink(path);
    assert_int_equal(zt_ckpt_reader_open(path, ZT_IO_ENGINE_AUTO, &size, &r, &err), ZT_ERR_CORRUPT);
    assert_null(r);
    assert_non_null(strstr(err.msg, "No such file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trips, make_path, remove_path),
        cmocka_unit_test_setup_teardown(test_failed_write_is_reported, make_path, remove_path),
        cmocka_unit_test_setup_teardown(test_missing_file, make_path, remove_path),
        cmocka_unit_test_setup_teardown(test_ring_transfers_from_registered_slots, make_path,
                                        remove_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The NVMe swap space: data written through each I/O engine reads back intact with many
 * transfers in flight and striping over several folders; files have stable names and are
 * removed on destroy; a second run on the same folder is refused; bad folders, a full disk,
 * a filesystem without O_DIRECT, injected I/O errors and a flipped byte each give a clear
 * error naming the cause, and destroy stays clean. */
#include "tiers/nvme.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char base[512];

static void make_dir(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", base, name);
    mkdir(out, 0755);
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("ZT_TEST_TMPDIR");
    snprintf(base, sizeof base, "%s/nvme-%d", t ? t : "/tmp", (int)getpid());
    mkdir(base, 0755);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600], d[600];
    snprintf(d, sizeof d, "%s/small", base);
    umount2(d, MNT_DETACH); /* left mounted when a test failed half-way */
    snprintf(d, sizeof d, "%s/ramfs", base);
    umount2(d, MNT_DETACH); /* io_uring drops its file references asynchronously */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : -1;
}

static zt_swap_config config(const char **dirs, int n, zt_io_engine_kind engine)
{
    zt_swap_config c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < n; i++)
        c.paths[i] = dirs[i];
    c.n_paths = n;
    c.tag = "test";
    c.block_size = 64 * 1024;
    c.queue_depth = 8;
    c.threads = 4;
    c.engine = engine;
    return c;
}

static void *aligned(size_t n)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 4096, (n + 4095) / 4096 * 4096), 0);
    return p;
}

static void roundtrip(zt_io_engine_kind engine, const char *expect_engine)
{
    char d0[600], d1[600], d2[600];
    make_dir(d0, sizeof d0, "a"), make_dir(d1, sizeof d1, "b"), make_dir(d2, sizeof d2, "c");
    const char *dirs[3] = {d0, d1, d2};
    zt_swap_config c = config(dirs, 3, engine);
    const uint64_t sizes[] = {4096, 100000, 64 * 1024, 1000003, 3 * 65536 + 4096, 12345};
    enum { N = sizeof sizes / sizeof sizes[0] };
    uint64_t cap = 0;
    for (int i = 0; i < N; i++)
        cap += zt_swap_footprint(sizes[i], c.block_size);
    zt_swap *sw = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&c, cap, &sw, &err), ZT_OK);
    assert_string_equal(zt_swap_engine_name(sw), expect_engine);
    zt_swap_extent x[N];
    zt_swap_io io[N];
    unsigned char *src[N], *dst[N];
    void *regions[2 * N];
    size_t lens[2 * N];
    for (int i = 0; i < N; i++) {
        src[i] = aligned(sizes[i]), dst[i] = aligned(sizes[i]);
        regions[2 * i] = src[i], regions[2 * i + 1] = dst[i];
        lens[2 * i] = lens[2 * i + 1] = (sizes[i] + 4095) / 4096 * 4096;
    }
    assert_int_equal(zt_swap_register_buffers(sw, regions, lens, 2 * N), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(zt_swap_alloc(sw, sizes[i], "t", &x[i], &err), ZT_OK);
        for (uint64_t k = 0; k < sizes[i]; k++)
            src[i][k] = (unsigned char)(k * 131 + (uint64_t)i * 7 + k / 4096);
        assert_int_equal(zt_swap_write(sw, &x[i], src[i], sizes[i], &io[i], &err), ZT_OK);
    }
    for (int i = 0; i < N; i++) /* all writes in flight at once */
        assert_int_equal(zt_swap_wait(sw, &io[i], &err), ZT_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(zt_swap_read(sw, &x[i], dst[i], sizes[i], &io[i], &err), ZT_OK);
    for (int i = N - 1; i >= 0; i--) {
        assert_int_equal(zt_swap_wait(sw, &io[i], &err), ZT_OK);
        assert_memory_equal(src[i], dst[i], sizes[i]);
        free(src[i]), free(dst[i]);
    }
    char path[700];
    snprintf(path, sizeof path, "%s/ztier-test-r0.swap", d2);
    assert_int_equal(access(path, F_OK), 0); /* stable names while open */
    zt_swap_stats st;
    zt_swap_get_stats(sw, &st);
    assert_true(st.read_bytes >= st.used - 6 * 65536 && st.max_inflight > 8);
    if (engine == ZT_IO_ENGINE_URING) /* every piece came from a registered buffer */
        assert_true(st.fixed_ios >= 2 * (uint64_t)N);
    zt_swap_destroy(sw);
    assert_int_equal(access(path, F_OK), -1); /* removed */
    snprintf(path, sizeof path, "%s/ztier-test-r0.lock", d0);
    assert_int_equal(access(path, F_OK), -1);
}

static void test_roundtrip_io_uring(void **state)
{
    (void)state;
    roundtrip(ZT_IO_ENGINE_URING, "io_uring");
}

static void test_roundtrip_threads(void **state)
{
    (void)state;
    roundtrip(ZT_IO_ENGINE_THREADS, "threads");
}

static void test_second_run_is_refused(void **state)
{
    (void)state;
    char d[600];
    make_dir(d, sizeof d, "shared");
    const char *dirs[1] = {d};
    zt_swap_config c = config(dirs, 1, ZT_IO_ENGINE_AUTO);
    zt_swap *a = NULL, *b = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&c, 1 << 20, &a, &err), ZT_OK);
    assert_int_equal(zt_swap_create(&c, 1 << 20, &b, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "in use by another ztier process"));
    zt_swap_destroy(a);
    assert_int_equal(zt_swap_create(&c, 1 << 20, &b, &err), ZT_OK); /* free again */
    zt_swap_destroy(b);
}

static void test_bad_folders(void **state)
{
    (void)state;
    char file[600];
    snprintf(file, sizeof file, "%s/plain-file", base);
    FILE *f = fopen(file, "w");
    fclose(f);
    const char *missing[1] = {"/nonexistent/ztier-swap"}, *notdir[1] = {file};
    zt_swap *sw = NULL;
    zt_error err = {0};
    zt_swap_config c = config(missing, 1, ZT_IO_ENGINE_AUTO);
    assert_int_equal(zt_swap_create(&c, 1 << 20, &sw, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "'/nonexistent/ztier-swap' cannot be used"));
    c = config(notdir, 1, ZT_IO_ENGINE_AUTO);
    assert_int_equal(zt_swap_create(&c, 1 << 20, &sw, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "is not a folder"));
}

/* Small filesystems of our own: ramfs has no O_DIRECT; a 4 MiB tmpfs is too small for a
 * 16 MiB swap. Mounting needs privileges: skipped where they are missing. */
static void test_no_direct_io(void **state)
{
    (void)state;
    char d[600];
    make_dir(d, sizeof d, "ramfs");
    if (mount("ramfs", d, "ramfs", 0, NULL) != 0)
        skip();
    const char *dirs[1] = {d};
    zt_swap_config c = config(dirs, 1, ZT_IO_ENGINE_AUTO);
    zt_swap *sw = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&c, 1 << 20, &sw, &err), ZT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "does not support O_DIRECT"));
    assert_non_null(strstr(err.msg, "allow_buffered_io"));
    c.allow_buffered = 1; /* the logged fallback the user allowed */
    assert_int_equal(zt_swap_create(&c, 1 << 20, &sw, &err), ZT_OK);
    zt_swap_destroy(sw);
    umount2(d, MNT_DETACH); /* io_uring drops its file references asynchronously */
}

static void test_disk_full(void **state)
{
    (void)state;
    char d[600];
    make_dir(d, sizeof d, "small");
    if (mount("tmpfs", d, "tmpfs", 0, "size=4m") != 0)
        skip();
    const char *dirs[1] = {d};
    zt_swap_config c = config(dirs, 1, ZT_IO_ENGINE_AUTO);
    c.allow_buffered = 1;
    zt_swap *sw = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&c, 16 << 20, &sw, &err), ZT_ERR_NOSPACE);
    assert_non_null(strstr(err.msg, "16777216 bytes needed"));
    assert_non_null(strstr(err.msg, d));
    char path[700];
    snprintf(path, sizeof path, "%s/ztier-test-r0.swap", d);
    assert_int_equal(access(path, F_OK), -1); /* nothing left behind */
    snprintf(path, sizeof path, "%s/ztier-test-r0.lock", d);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(zt_swap_create(&c, 1 << 20, &sw, &err), ZT_OK); /* what fits works */
    zt_swap_destroy(sw);
    umount2(d, MNT_DETACH); /* io_uring drops its file references asynchronously */
}

static void injected_failure(zt_io_engine_kind engine, int op)
{
    char d[600];
    make_dir(d, sizeof d, engine == ZT_IO_ENGINE_URING ? "inj-u" : "inj-t");
    const char *dirs[1] = {d};
    zt_swap_config c = config(dirs, 1, engine);
    zt_swap *sw = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&c, 1 << 20, &sw, &err), ZT_OK);
    zt_swap_extent x;
    assert_int_equal(zt_swap_alloc(sw, 300000, "layer3.weight", &x, &err), ZT_OK);
    unsigned char *buf = aligned(300000);
    memset(buf, 1, 300000);
    zt_swap_io io;
    if (op == ZT_IO_READ) {
        assert_int_equal(zt_swap_write(sw, &x, buf, 300000, &io, &err), ZT_OK);
        assert_int_equal(zt_swap_wait(sw, &io, &err), ZT_OK);
    }
    zt_io_test_fail(op, EIO, 2); /* the third piece fails */
    if (op == ZT_IO_READ)
        assert_int_equal(zt_swap_read(sw, &x, buf, 300000, &io, &err), ZT_OK);
    else
        assert_int_equal(zt_swap_write(sw, &x, buf, 300000, &io, &err), ZT_OK);
    assert_int_equal(zt_swap_wait(sw, &io, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "'layer3.weight'"));
    assert_non_null(strstr(err.msg, "failed at byte ")); /* which piece: the engine's order */
    assert_non_null(strstr(err.msg, "ztier-test-r0.swap"));
    assert_non_null(strstr(err.msg, "Input/output error"));
    free(buf);
    zt_swap_destroy(sw);
}

static void test_injected_io_errors(void **state)
{
    (void)state;
    injected_failure(ZT_IO_ENGINE_URING, ZT_IO_READ);
    injected_failure(ZT_IO_ENGINE_URING, ZT_IO_WRITE);
    injected_failure(ZT_IO_ENGINE_THREADS, ZT_IO_READ);
    injected_failure(ZT_IO_ENGINE_THREADS, ZT_IO_WRITE);
}

static void test_checksum_detects_flipped_byte(void **state)
{
    (void)state;
    char d[600];
    make_dir(d, sizeof d, "crc");
    const char *dirs[1] = {d};
    zt_swap_config c = config(dirs, 1, ZT_IO_ENGINE_AUTO);
    c.verify_checksums = 1;
    zt_swap *sw = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&c, 1 << 20, &sw, &err), ZT_OK);
    zt_swap_extent pad, x;
    assert_int_equal(zt_swap_alloc(sw, 65536, "pad", &pad, &err), ZT_OK);
    assert_int_equal(zt_swap_alloc(sw, 200000, "h.0.mlp.weight", &x, &err), ZT_OK);
    unsigned char *buf = aligned(200000);
    for (int i = 0; i < 200000; i++)
        buf[i] = (unsigned char)i;
    zt_swap_io io;
    assert_int_equal(zt_swap_write(sw, &x, buf, 200000, &io, &err), ZT_OK);
    assert_int_equal(zt_swap_wait(sw, &io, &err), ZT_OK);
    assert_int_equal(zt_swap_read(sw, &x, buf, 200000, &io, &err), ZT_OK);
    assert_int_equal(zt_swap_wait(sw, &io, &err), ZT_OK); /* intact */
    uint64_t foff = 0;
    const char *file = zt_swap_locate(sw, &x, 70000, &foff);
    FILE *f = fopen(file, "r+b");
    assert_non_null(f);
    fseek(f, (long)foff, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, (long)foff, SEEK_SET);
    fputc(ch ^ 0x20, f);
    fclose(f);
    assert_int_equal(zt_swap_read(sw, &x, buf, 200000, &io, &err), ZT_OK);
    assert_int_equal(zt_swap_wait(sw, &io, &err), ZT_ERR_CORRUPT);
    assert_non_null(strstr(err.msg, "'h.0.mlp.weight' is corrupted at byte 65536"));
    free(buf);
    zt_swap_destroy(sw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_io_uring),
        cmocka_unit_test(test_roundtrip_threads),
        cmocka_unit_test(test_second_run_is_refused),
        cmocka_unit_test(test_bad_folders),
        cmocka_unit_test(test_no_direct_io),
        cmocka_unit_test(test_disk_full),
        cmocka_unit_test(test_injected_io_errors),
        cmocka_unit_test(test_checksum_detects_flipped_byte),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

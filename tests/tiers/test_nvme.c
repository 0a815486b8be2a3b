/* SPDX-License-Identifier: MIT */
/* The NVMe swap space: data written through each I/O engine reads back intact with many
 * transfers in flight and striping over several folders; files have stable names and are
 * removed on destroy; a second run on the same folder is refused, naming who holds it; bad
 * folders, a full disk, a filesystem without O_DIRECT, injected I/O errors and a flipped byte
 * each give a clear error naming the cause, and destroy stays clean; a restart after kill -9
 * on a tight disk reuses the space of the swap file the killed run left behind. */
#include "core/log.h"
#include "tiers/swap.h"

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
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
    /* left mounted when a test failed half-way; io_uring drops its file references
     * asynchronously, hence the lazy unmounts */
    const char *mounts[] = {"small", "ramfs", "tight", "tight-ranks"};
    for (size_t i = 0; i < sizeof mounts / sizeof mounts[0]; i++) {
        snprintf(d, sizeof d, "%s/%s", base, mounts[i]);
        umount2(d, MNT_DETACH);
    }
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

/* A child process that creates a swap space, reports the status through a pipe and then
 * either dies by SIGKILL at once (kill_it: its files stay behind, as after kill -9) or holds
 * the swap until the parent closes its end of `hold`. */
static pid_t start_holder(const zt_swap_config *c, uint64_t capacity, int kill_it, int *hold)
{
    int status_pipe[2], hold_pipe[2];
    assert_int_equal(pipe(status_pipe), 0);
    assert_int_equal(pipe(hold_pipe), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(status_pipe[0]), close(hold_pipe[1]);
        zt_swap *sw = NULL;
        zt_error err = {0};
        char st = (char)zt_swap_create(c, capacity, &sw, &err);
        if (write(status_pipe[1], &st, 1) != 1 || kill_it)
            raise(SIGKILL);
        char ch;
        while (read(hold_pipe[0], &ch, 1) > 0) {
        }
        zt_swap_destroy(sw);
        _exit(0);
    }
    close(status_pipe[1]), close(hold_pipe[0]);
    char st = -1;
    assert_int_equal(read(status_pipe[0], &st, 1), 1);
    assert_int_equal(st, ZT_OK);
    close(status_pipe[0]);
    *hold = hold_pipe[1];
    return pid;
}

static int wait_child(pid_t pid)
{
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    return ws;
}

/* Two runtimes of one process on one folder: the message says so, not "another process"
 * with our own pid (and no newline from the lock file). */
static void test_second_runtime_in_this_process(void **state)
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
    assert_non_null(strstr(err.msg, "in use by another ztier runtime in this process"));
    assert_non_null(strstr(err.msg, "destroy the first runtime"));
    assert_null(strchr(err.msg, '\n'));
    zt_swap_destroy(a);
    assert_int_equal(zt_swap_create(&c, 1 << 20, &b, &err), ZT_OK); /* free again */
    zt_swap_destroy(b);
}

static void test_second_run_is_refused(void **state)
{
    (void)state;
    char d[600], lock[700], want[64];
    make_dir(d, sizeof d, "shared-proc");
    const char *dirs[1] = {d};
    zt_swap_config c = config(dirs, 1, ZT_IO_ENGINE_THREADS);
    int hold = -1;
    pid_t pid = start_holder(&c, 1 << 20, 0, &hold);
    zt_swap *b = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&c, 1 << 20, &b, &err), ZT_ERR_CONFIG);
    snprintf(want, sizeof want, "in use by another ztier process (pid %d)", (int)pid);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "give each run its own nvme_path"));
    assert_null(strchr(err.msg, '\n'));
    /* the holder has not written its pid yet (or the file was emptied): say it is unknown */
    snprintf(lock, sizeof lock, "%s/ztier-test-r0.lock", d);
    assert_int_equal(truncate(lock, 0), 0);
    assert_int_equal(zt_swap_create(&c, 1 << 20, &b, &err), ZT_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "in use by another ztier process"));
    assert_non_null(strstr(err.msg, "could not be read"));
    close(hold);
    assert_int_equal(wait_child(pid), 0);
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

static int mount_tight(char *d, size_t len, const char *name)
{
    make_dir(d, len, name);
    return mount("tmpfs", d, "tmpfs", 0, "size=4m");
}

static int count_swap_files(const char *dir)
{
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    int n = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        size_t len = strlen(e->d_name);
        n += len > 5 && strcmp(e->d_name + len - 5, ".swap") == 0;
    }
    closedir(dp);
    return n;
}

static void capture_log(void *user, int level, const char *msg)
{
    char *buf = user;
    if (level == ZT_LOG_INFO && strstr(msg, "stale"))
        snprintf(buf, 512, "%s", msg);
}

/* kill -9 leaves a 3 MiB swap file on a 4 MiB disk: the restart must reuse its space rather
 * than count it as used (the file is ours once our lock is granted). */
static void test_restart_after_kill_reuses_stale_swap(void **state)
{
    (void)state;
    char d[600];
    if (mount_tight(d, sizeof d, "tight") != 0)
        skip();
    const char *dirs[1] = {d};
    zt_swap_config c = config(dirs, 1, ZT_IO_ENGINE_AUTO);
    c.allow_buffered = 1;
    const uint64_t cap = 3 << 20;
    int hold = -1;
    pid_t pid = start_holder(&c, cap, 1, &hold);
    int ws = wait_child(pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    close(hold);
    assert_int_equal(count_swap_files(d), 1); /* left behind */
    char logged[512] = "";
    zt_log_configure(ZT_LOG_INFO, capture_log, logged);
    zt_swap *sw = NULL;
    zt_error err = {0};
    zt_status st = zt_swap_create(&c, cap, &sw, &err);
    zt_log_configure(-1, NULL, NULL);
    if (st != ZT_OK)
        fail_msg("restart refused: %s", err.msg);
    assert_non_null(strstr(logged, "ztier-test-r0.swap"));
    assert_non_null(strstr(logged, "3145728 bytes"));
    /* the old space was reused: one swap file, and the disk holds about one swap's worth */
    assert_int_equal(count_swap_files(d), 1);
    struct statvfs vfs;
    assert_int_equal(statvfs(d, &vfs), 0);
    uint64_t used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
    assert_true(used >= cap && used < cap + (256 << 10));
    zt_swap_destroy(sw);
    assert_int_equal(count_swap_files(d), 0);
    umount2(d, MNT_DETACH);
}

/* This process's own live swap (parameters and optimizer state in one folder) is not another
 * run's possibly stale file: a second swap that does not fit is refused without counting the
 * first as free space or naming it among "other ztier swap files". */
static void test_own_swap_is_not_counted_as_other(void **state)
{
    (void)state;
    char d[600];
    if (mount_tight(d, sizeof d, "tight-own") != 0)
        skip();
    const char *dirs[1] = {d};
    zt_swap_config a = config(dirs, 1, ZT_IO_ENGINE_AUTO), b = a;
    a.allow_buffered = b.allow_buffered = 1;
    a.tag = "params";
    b.tag = "optim";
    zt_swap *sa = NULL, *sb = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&a, 3 << 20, &sa, &err), ZT_OK);
    assert_int_equal(zt_swap_create(&b, 2 << 20, &sb, &err), ZT_ERR_NOSPACE);
    assert_non_null(strstr(err.msg, "2097152 bytes needed"));
    if (strstr(err.msg, "other ztier swap files"))
        fail_msg("this process's own swap was counted as another's: %s", err.msg);
    zt_swap_destroy(sa);
    umount2(d, MNT_DETACH);
}

/* Another rank's swap file may belong to a live run: it is left alone (its lock is not
 * touched) and counted as possibly free only for the early check; the preallocation then
 * tells, with a message naming the folder, the bytes needed and free, and that file. */
static void test_other_ranks_swap_is_left_alone(void **state)
{
    (void)state;
    char d[600], other[700];
    if (mount_tight(d, sizeof d, "tight-ranks") != 0)
        skip();
    const char *dirs[1] = {d};
    zt_swap_config c = config(dirs, 1, ZT_IO_ENGINE_AUTO);
    c.allow_buffered = 1;
    c.rank = 1;
    const uint64_t cap = 3 << 20;
    int hold = -1;
    pid_t pid = start_holder(&c, cap, 1, &hold);
    wait_child(pid);
    close(hold);
    c.rank = 0;
    zt_swap *sw = NULL;
    zt_error err = {0};
    assert_int_equal(zt_swap_create(&c, cap, &sw, &err), ZT_ERR_NOSPACE);
    assert_non_null(strstr(err.msg, d));
    assert_non_null(strstr(err.msg, "3145728 bytes needed"));
    assert_non_null(strstr(err.msg, " free"));
    assert_non_null(strstr(err.msg, "other ztier swap files"));
    snprintf(other, sizeof other, "%s/ztier-test-r0.swap", d);
    assert_int_equal(access(other, F_OK), -1); /* nothing of rank 0 left behind */
    snprintf(other, sizeof other, "%s/ztier-test-r1.swap", d);
    struct stat sb;
    assert_int_equal(stat(other, &sb), 0); /* rank 1's file untouched */
    assert_true((uint64_t)sb.st_blocks * 512 >= cap);
    c.rank = 1; /* rank 1 itself restarting takes its file back */
    assert_int_equal(zt_swap_create(&c, cap, &sw, &err), ZT_OK);
    zt_swap_destroy(sw);
    umount2(d, MNT_DETACH);
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
        cmocka_unit_test(test_second_runtime_in_this_process),
        cmocka_unit_test(test_second_run_is_refused),
        cmocka_unit_test(test_bad_folders),
        cmocka_unit_test(test_no_direct_io),
        cmocka_unit_test(test_disk_full),
        cmocka_unit_test(test_restart_after_kill_reuses_stale_swap),
        cmocka_unit_test(test_other_ranks_swap_is_left_alone),
        cmocka_unit_test(test_own_swap_is_not_counted_as_other),
        cmocka_unit_test(test_injected_io_errors),
        cmocka_unit_test(test_checksum_detects_flipped_byte),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: MIT */
/* NVMe failures seen through the runtime: an I/O error while fetching a layer or while the
 * optimizer writes its state back returns ZT_ERR_IO naming the tensor, the file and the
 * offset, and the runtime still destroys cleanly (checked under ASan); a read-only or full
 * swap folder fails the commit with the cause and leaves nothing behind. */
#include "rt_fixture.h"
#include "tiers/io.h"
#include "train.h"

#include <dirent.h>
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

static const mlp_dims dims = {16, 48, 4, 32};
static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("nvme-errors");
}

static int teardown(void **state)
{
    (void)state;
    umount2(rt_fixture_dir(), MNT_DETACH);
    return rt_fixture_close();
}

static int overlap_step = 1; /* ztier.overlap_step */

static const char *config(const char *param, const char *optim)
{
    static char buf[2048];
    snprintf(
        buf, sizeof buf,
        "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
        "\"$SCRATCH\"}, \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"$SCRATCH\"},"
        " \"stage3_param_persistence_threshold\": 0},"
        " \"aio\": {\"block_size\": 4096},"
        " \"ztier\": {\"hbm_capacity\": \"16M\", \"overlap_step\": %s}}",
        param, optim, overlap_step ? "\"on\"" : "\"off\"");
    return buf;
}

static zt_runtime *make(const char *param, const char *optim, minimal_model *m, zt_status want)
{
    zt_runtime *rt = rt_fixture_create(NULL, config(param, optim));
    rt_fixture_register_mlp(rt, &dims, 1, m);
    assert_int_equal(zt_runtime_commit(rt), want);
    return rt;
}

static void test_read_error_during_fetch(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = make("nvme", "cpu", &m, ZT_OK);
    zt_io_test_fail(ZT_IO_READ, EIO, 0);
    zt_layer_view v;
    assert_int_equal(zt_fetch(rt, m.layer[0], ZT_FORWARD, &v), ZT_ERR_IO);
    const char *msg = zt_last_error(rt);
    assert_non_null(strstr(msg, "fetch of layer 'fc1'"));
    assert_non_null(strstr(msg, "NVMe read of 'fc1' failed"));
    assert_non_null(strstr(msg, "ztier-param-r0.swap"));
    /* the failure is not sticky: the next fetch reads the data again */
    float loss;
    assert_int_equal(minimal_micro_step(rt, &m, 0, 0, dims.batch, &loss), ZT_OK);
    zt_runtime_destroy(rt);
}

/* For each home of the fp32 parameters with the optimizer state on NVMe: in host memory
 * (the master, updated in place: m and v move), in device memory (the master, copied in with
 * m and v), and on NVMe (a master of its own moves with m and v). */
static void test_write_error_during_step(void **state)
{
    (void)state;
    const char *params[] = {"cpu", "none", "nvme"};
    for (int k = 0; k < 3; k++) {
        minimal_model m;
        zt_runtime *rt = make(params[k], "nvme", &m, ZT_OK);
        float loss;
        assert_int_equal(minimal_micro_step(rt, &m, 0, 0, dims.batch, &loss), ZT_OK);
        zt_io_test_fail(ZT_IO_WRITE, EIO, 1);
        /* the step's last write-backs finish in the background: the failure is reported by
         * the step, or by the next call that needs the optimizer state */
        zt_status st = zt_step(rt, NULL, NULL);
        if (st == ZT_OK) {
            float w[16 * 48];
            st = zt_param_read(rt, m.weight[0], w, 16 * 48);
        }
        assert_int_equal(st, ZT_ERR_IO);
        const char *msg = zt_last_error(rt);
        assert_non_null(strstr(msg, "NVMe write of 'fc"));
        assert_true(strstr(msg, "ztier-optim-r0.swap") || strstr(msg, "ztier-param-r0.swap"));
        zt_io_test_fail(-1, 0, 0);
        zt_runtime_destroy(rt); /* clean shutdown after the error */
    }
}

/* A write-back that fails after zt_step returned is not lost. The first reader of the
 * optimizer state is zt_fetch(BACKWARD) (it starts the next step's read-ahead): it returns
 * ZT_OK with no error text, as per-layer calls go on; zt_async_error then reports the
 * failure, and so does every later call that uses the optimizer state (zt_step,
 * zt_param_read, zt_checkpoint_save), until a checkpoint load makes the state consistent. */
static void test_background_write_error_is_kept_until_a_load(void **state)
{
    (void)state;
    char ckpt[600];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", rt_fixture_dir());
    int found = 0;
    for (int k = 0, attempt = 0; k < 256 && !found && attempt < 20; k++) {
        minimal_model m;
        zt_runtime *rt = make("cpu", "nvme", &m, ZT_OK);
        float loss, w[16 * 48];
        assert_int_equal(zt_checkpoint_save(rt, ckpt), ZT_OK);
        assert_int_equal(minimal_micro_step(rt, &m, 0, 0, dims.batch, &loss), ZT_OK);
        zt_io_test_fail(ZT_IO_WRITE, EIO, k);
        zt_status st = zt_step(rt, NULL, NULL);
        if (st != ZT_OK) { /* the k-th write ran before the step returned */
            assert_int_equal(st, ZT_ERR_IO);
            zt_io_test_fail(-1, 0, 0);
            zt_runtime_destroy(rt);
            continue;
        }
        assert_int_equal(minimal_micro_step(rt, &m, 1, 0, dims.batch, &loss), ZT_OK);
        if (zt_io_test_failure_pending()) { /* the step's writes ended before it returned */
            zt_io_test_fail(-1, 0, 0);
            zt_runtime_destroy(rt);
            k = -1, attempt++; /* search again */
            continue;
        }
        /* the k-th write is the first one still in flight when the step returned */
        found = 1;
        assert_string_equal(zt_last_error(rt), "");
        zt_io_test_fail(-1, 0, 0);
        assert_int_equal(zt_async_error(rt), ZT_ERR_IO);
        assert_non_null(strstr(zt_last_error(rt), "NVMe write of 'fc"));
        assert_non_null(strstr(zt_last_error(rt), "load a checkpoint"));
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_ERR_IO);
        assert_non_null(strstr(zt_last_error(rt), "NVMe write of 'fc"));
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_ERR_IO); /* every time */
        assert_int_equal(zt_param_read(rt, m.weight[0], w, 16 * 48), ZT_ERR_IO);
        assert_int_equal(zt_checkpoint_save(rt, ckpt), ZT_ERR_IO); /* no damaged checkpoint */
        assert_int_equal(zt_async_error(rt), ZT_ERR_IO);
        /* a load makes the state consistent again: training goes on */
        assert_int_equal(zt_checkpoint_load(rt, ckpt), ZT_OK);
        assert_int_equal(zt_async_error(rt), ZT_OK);
        assert_int_equal(minimal_micro_step(rt, &m, 2, 0, dims.batch, &loss), ZT_OK);
        assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
        assert_int_equal(zt_param_read(rt, m.weight[0], w, 16 * 48), ZT_OK);
        zt_runtime_destroy(rt);
    }
    assert_true(found);
}

/* zt_async_error finds a failed write-back by itself, without another call waiting for it.
 * The failure is put on the k-th write from the step on, for k = 0, 1, ... until the step
 * returns before it; when the step's writes all ended before it returned (the k-th write
 * never came), the search starts again. The step runs whole (an overlapped step writes
 * only when later calls update layers: tests/unit/test_overlap_step.c). */
static void test_async_error_polls_without_waiting(void **state)
{
    (void)state;
    overlap_step = 0;
    int found = 0;
    for (int attempt = 0; attempt < 20 && !found; attempt++) {
        for (int k = 0; k < 256 && !found; k++) {
            minimal_model m;
            zt_runtime *rt = make("cpu", "nvme", &m, ZT_OK);
            float loss;
            assert_int_equal(minimal_micro_step(rt, &m, 0, 0, dims.batch, &loss), ZT_OK);
            zt_io_test_fail(ZT_IO_WRITE, EIO, k);
            zt_status st = zt_step(rt, NULL, NULL);
            int missed = 0;
            if (st == ZT_OK) {
                for (int i = 0; i < 2000 && st == ZT_OK; i++) { /* the write completes soon */
                    st = zt_async_error(rt);
                    if (st == ZT_OK)
                        usleep(1000);
                }
                /* no error and the failure never hit a write: there was no k-th write */
                missed = st == ZT_OK && zt_io_test_failure_pending();
                if (!missed) {
                    found = 1;
                    assert_int_equal(st, ZT_ERR_IO);
                    assert_non_null(strstr(zt_last_error(rt), "NVMe write of 'fc"));
                }
            }
            zt_io_test_fail(-1, 0, 0);
            zt_runtime_destroy(rt);
            if (missed)
                break;
        }
    }
    overlap_step = 1;
    assert_true(found);
}

static void test_read_only_folder(void **state)
{
    (void)state;
    if (mount("tmpfs", rt_fixture_dir(), "tmpfs", MS_RDONLY, "size=1m") != 0)
        skip(); /* no mount rights here */
    minimal_model m;
    zt_runtime *rt = make("nvme", "cpu", &m, ZT_ERR_CONFIG);
    assert_non_null(strstr(zt_last_error(rt), "is not writable"));
    zt_runtime_destroy(rt);
}

static void test_full_folder(void **state)
{
    (void)state;
    if (mount("tmpfs", rt_fixture_dir(), "tmpfs", 0, "size=64k") != 0)
        skip();
    minimal_model m;
    zt_runtime *rt = make("nvme", "nvme", &m, ZT_ERR_NOSPACE);
    assert_non_null(strstr(zt_last_error(rt), "bytes there"));
    zt_runtime_destroy(rt);
    char path[700];
    snprintf(path, sizeof path, "%s/ztier-param-r0.swap", rt_fixture_dir());
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s/ztier-optim-r0.swap", rt_fixture_dir());
    assert_int_equal(access(path, F_OK), -1);
}

/* The swap files' bytes in the scratch folder, and the largest one's. */
static uint64_t swap_files_bytes(uint64_t *largest)
{
    DIR *d = opendir(rt_fixture_dir());
    assert_non_null(d);
    uint64_t sum = 0;
    *largest = 0;
    struct stat sb;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".swap") != 0 ||
            fstatat(dirfd(d), e->d_name, &sb, 0) != 0)
            continue;
        sum += (uint64_t)sb.st_size;
        *largest = (uint64_t)sb.st_size > *largest ? (uint64_t)sb.st_size : *largest;
    }
    closedir(d);
    return sum;
}

/* A filesystem with room for each swap file but not for all: the refusal states the run's
 * need there (every swap file together), which equals what a run with room allocates. */
static void test_refusal_states_the_runs_need(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = make("nvme", "nvme", &m, ZT_OK);
    uint64_t largest, total = swap_files_bytes(&largest);
    zt_runtime_destroy(rt);
    assert_true(largest > 0 && total > largest);
    char opts[64];
    snprintf(opts, sizeof opts, "size=%llu", (unsigned long long)(largest + 4096));
    if (mount("tmpfs", rt_fixture_dir(), "tmpfs", 0, opts) != 0)
        skip(); /* no mount rights here */
    rt = make("nvme", "nvme", &m, ZT_ERR_NOSPACE);
    char want[64];
    snprintf(want, sizeof want, "the run needs %llu bytes there", (unsigned long long)total);
    if (!strstr(zt_last_error(rt), want))
        fail_msg("the refusal does not say \"%s\": %s", want, zt_last_error(rt));
    assert_non_null(strstr(zt_last_error(rt), "parameters "));
    assert_non_null(strstr(zt_last_error(rt), "optimizer state "));
    zt_runtime_destroy(rt);
    assert_int_equal(swap_files_bytes(&largest), 0); /* nothing left behind */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_read_error_during_fetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_error_during_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_background_write_error_is_kept_until_a_load, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_async_error_polls_without_waiting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusal_states_the_runs_need, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

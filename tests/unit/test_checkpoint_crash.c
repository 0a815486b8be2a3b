/* SPDX-License-Identifier: MIT */
/* A checkpoint save killed at any moment leaves a loadable checkpoint, bitwise equal to the
 * previous save or to the interrupted one: a child process trains and saves, and is killed
 * (SIGKILL) at each crash point of its second save in turn (ZT_TEST_CRASH_AT, test builds),
 * then at random moments from outside while it saves over and over. After every kill a
 * fresh runtime loads the folder and compares every parameter with an uninterrupted run, and
 * (crash points) the next save leaves only `latest` and the folders it lists. The same again
 * with ztier.checkpoint_reuse_files (keep 1): the killed save is the third, the one that
 * overwrites the first checkpoint's files in place (root/.reuse, the one entry `latest`
 * does not list that a save may leave). */
#include "train.h"

#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define MAX_REF_STEPS 4096

static const mlp_dims dims = {16, 48, 4, 32};
static const char *config = "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
                            " \"offload_optimizer\": {\"device\": \"cpu\"},"
                            " \"stage3_param_persistence_threshold\": 0},"
                            " \"ztier\": {\"hbm_capacity\": \"16M\"}}";
static const char *config_reuse =
    "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
    " \"offload_optimizer\": {\"device\": \"cpu\"}, \"stage3_param_persistence_threshold\": 0},"
    " \"ztier\": {\"hbm_capacity\": \"16M\", \"checkpoint_keep\": 1,"
    " \"checkpoint_reuse_files\": true}}";
static int reuse; /* the tests' second round: config_reuse */
static char dir[512];
static float *refs[MAX_REF_STEPS + 1]; /* parameters after s steps of the uninterrupted run */
static int64_t n_values;

static zt_runtime *create(minimal_model *m)
{
    zt_runtime *rt = NULL;
    if (zt_runtime_create(NULL, reuse ? config_reuse : config, &rt) != ZT_OK ||
        minimal_register(rt, &dims, 7, m) || zt_runtime_commit(rt) != ZT_OK) {
        zt_runtime_destroy(rt);
        return NULL;
    }
    return rt;
}

static zt_status train_step(zt_runtime *rt, const minimal_model *m, int64_t s)
{
    float loss;
    zt_status st = minimal_micro_step(rt, m, s, 0, dims.batch, &loss);
    return st == ZT_OK ? zt_step(rt, NULL, NULL) : st;
}

static float *read_all(zt_runtime *rt, const minimal_model *m)
{
    float *buf = malloc(sizeof(float) * 8192);
    int64_t off = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        int64_t nw = (int64_t)m->n_in[l] * m->n_out[l], nb = m->n_out[l];
        if (zt_param_read(rt, m->weight[l], buf + off, nw) != ZT_OK ||
            zt_param_read(rt, m->bias[l], buf + off + nw, nb) != ZT_OK)
            return free(buf), NULL;
        off += nw + nb;
    }
    n_values = off;
    return buf;
}

/* The reference parameters after `steps` steps, computed once per step count. */
static const float *reference(int64_t steps)
{
    assert_true(steps >= 0 && steps <= MAX_REF_STEPS);
    if (!refs[steps]) {
        minimal_model m;
        zt_runtime *rt = create(&m);
        assert_non_null(rt);
        for (int64_t s = 0; s < steps; s++)
            assert_int_equal(train_step(rt, &m, s), ZT_OK);
        refs[steps] = read_all(rt, &m);
        zt_runtime_destroy(rt);
    }
    return refs[steps];
}

/* The child: 3 steps, a save, then (crash point armed) 2 steps and a save; with `forever`
 * it goes on training and saving until it is killed. Tells the parent through `ready` when
 * the first save is complete. Never returns. */
static void child(int crash_at, int ready, int forever)
{
    minimal_model m;
    zt_runtime *rt = create(&m);
    int64_t s = 0;
    for (; rt && s < 3; s++)
        if (train_step(rt, &m, s) != ZT_OK)
            _exit(2);
    if (!rt || zt_checkpoint_save(rt, dir) != ZT_OK)
        _exit(3);
    for (int64_t end = s + 2; reuse && s < end; s++) /* a second save: the third reuses */
        if (train_step(rt, &m, s) != ZT_OK)
            _exit(2);
    if (reuse && zt_checkpoint_save(rt, dir) != ZT_OK)
        _exit(3);
    if (ready >= 0 && write(ready, "1", 1) != 1)
        _exit(4);
    if (crash_at > 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", crash_at);
        setenv("ZT_TEST_CRASH_AT", n, 1);
    }
    do {
        for (int64_t end = s + 2; s < end; s++)
            if (train_step(rt, &m, s) != ZT_OK)
                _exit(5);
        if (zt_checkpoint_save(rt, dir) != ZT_OK)
            _exit(6);
    } while (forever);
    _exit(0); /* no cleanup: the next run must cope with whatever is on disk */
}

/* Loads the folder in a fresh runtime; returns the step it resumed at. */
static int64_t load_and_compare(void)
{
    minimal_model m;
    zt_runtime *rt = create(&m);
    assert_non_null(rt);
    if (zt_checkpoint_load(rt, dir) != ZT_OK)
        fail_msg("no checkpoint after a kill: %s", zt_last_error(rt));
    int64_t steps = -1;
    assert_int_equal(zt_step_count(rt, &steps), ZT_OK);
    float *got = read_all(rt, &m);
    assert_non_null(got);
    assert_memory_equal(reference(steps), got, sizeof(float) * (size_t)n_values);
    free(got);
    zt_runtime_destroy(rt);
    return steps;
}

/* Entries of the folder other than `latest` and the folders it lists (a partial save's folder,
 * or a complete one `latest` does not name). */
static int unlisted(void)
{
    char path[600], listed[16][64];
    int n = 0, left = 0;
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    while (f && n < 16 && fgets(listed[n], sizeof listed[n], f))
        listed[n][strcspn(listed[n], "\n")] = '\0', n++;
    if (f)
        fclose(f);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        int known = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
                    !strcmp(e->d_name, "latest") || (reuse && !strcmp(e->d_name, ".reuse"));
        for (int i = 0; i < n; i++)
            known |= !strcmp(e->d_name, listed[i]);
        left += !known;
    }
    closedir(d);
    return left;
}

/* Resumes from the folder, trains a step and saves: whatever an interrupted save left is
 * gone after it. */
static void save_again(void)
{
    minimal_model m;
    zt_runtime *rt = create(&m);
    assert_non_null(rt);
    int64_t steps = 0;
    assert_int_equal(zt_checkpoint_load(rt, dir), ZT_OK);
    assert_int_equal(zt_step_count(rt, &steps), ZT_OK);
    assert_int_equal(train_step(rt, &m, steps), ZT_OK);
    assert_int_equal(zt_checkpoint_save(rt, dir), ZT_OK);
    zt_runtime_destroy(rt);
    assert_int_equal(unlisted(), 0);
}

static void clear_dir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_kill_at_every_crash_point(void **state)
{
    (void)state;
    int resumed[2] = {0, 0}, points = 0, leftover = 0;
    for (int at = 1; at < 200; at++) {
        clear_dir();
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child(at, -1, 0);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        if (!killed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            fail_msg("child failed with status %#x", status);
        int64_t steps = load_and_compare(), last = reuse ? 5 : 3; /* the save before */
        assert_true(steps == last || steps == last + 2);
        resumed[steps == last + 2]++;
        leftover += unlisted() > 0;
        save_again();
        if (!killed) /* `at` lies beyond the save's last crash point */
            break;
        points++;
    }
    printf("%d crash points: %d resumes from the previous save, %d from the killed one; %d "
           "left a partial folder or one `latest` does not list; the next save removed each\n",
           points, resumed[0], resumed[1] - 1, leftover);
    assert_true(points >= 8);    /* the save passes at least that many points */
    assert_true(resumed[0] > 0); /* killed before the commit: the previous checkpoint */
    assert_true(resumed[1] > 1); /* killed after it: the new one */
}

static void test_kill_at_random_moments(void **state)
{
    (void)state;
    srand((unsigned)time(NULL));
    for (int i = 0; i < 12; i++) {
        clear_dir();
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child(0, fds[1], 1);
        }
        close(fds[1]);
        char c;
        assert_int_equal(read(fds[0], &c, 1), 1); /* the first save is complete */
        close(fds[0]);
        usleep((useconds_t)(rand() % 40000));
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status))
            fail_msg("child ended before it was killed (status %#x)", status);
        int64_t steps = load_and_compare();
        assert_true(steps >= (reuse ? 5 : 3));
        printf("killed after about %d saves: resumed at step %lld\n", (int)(steps - 1) / 2,
               (long long)steps);
    }
}

static void test_kill_at_every_crash_point_reusing_files(void **state)
{
    reuse = 1;
    test_kill_at_every_crash_point(state);
}

static void test_kill_at_random_moments_reusing_files(void **state)
{
    reuse = 1;
    test_kill_at_random_moments(state);
}

static int setup(void **state)
{
    (void)state;
    reuse = 0;
    const char *base = getenv("ZT_TEST_TMPDIR") ? getenv("ZT_TEST_TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/ckpt-crash-%d", base, (int)getpid());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    clear_dir();
    for (int s = 0; s <= MAX_REF_STEPS; s++)
        free(refs[s]), refs[s] = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill_at_every_crash_point, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_at_random_moments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_at_every_crash_point_reusing_files, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kill_at_random_moments_reusing_files, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

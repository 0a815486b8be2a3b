/* SPDX-License-Identifier: MIT */
/* The program run.sh launches across network namespaces ("nodes"): the minimal MLP trained
 * with ZeRO-3 ("plain"), ZeRO++ (qwZ + qgZ + hpZ, "zeropp") or ZeRO stage 2 ("stage2":
 * parameters replicated on the device, the optimizer state partitioned in host memory), each
 * rank on its slice of the global batch:
 *   mn_train <plain|zeropp|stage2> <steps> <params_out> [rpn=<ranks per node>] [kill=<rank>@<step>]
 *            [freeze=<rank>@<step>] [save=<dir>@<seconds>]
 * Rank 0 writes every parameter (fp32, layer by layer) to params_out, which run.sh compares
 * bitwise with the same job on one node. rpn sets ztier.ranks_per_node (the one-node reference
 * stands in for the nodes that way); without it ztier finds the layout itself. kill makes
 * that rank SIGKILL itself before that step's micro-step: the others must then fail with
 * ZT_ERR_COMM, and exit with status 2. freeze makes that rank and every rank after it stop
 * themselves (SIGSTOP) there instead, or <ms> milliseconds into that step with
 * freeze=<rank>@<step>+<ms>: a whole node frozen (the launcher kills them). save makes every rank save a checkpoint into dir at
 * the end, rank 0 stalling that many seconds after it committed the save and before it tells
 * the others (the tests' ZT_TEST_DELAY_AT hook), so that run.sh can cut a node off there;
 * each rank prints "mn rank=... save=<ok|status>" with its message.
 * Each rank prints one "mn rank=..." line: its host name, the bytes zt_stats counts as sent
 * across nodes (comm_bytes_inter) and within (comm_bytes_intra) over steps 1..steps-1, and
 * the interface counter $ZT_MN_IFACE's tx_bytes (/sys/class/net; in a network namespace:
 * that node's link) read between barriers at the start and at the end of those same steps,
 * so run.sh can compare what went over the wire with what ztier counted. */
#include "ref_mlp.h"
#include "runtime/runtime.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* tx_bytes of $ZT_MN_IFACE, or -1 (no interface named, or unreadable) */
static long long tx_bytes(void)
{
    const char *iface = getenv("ZT_MN_IFACE");
    char path[256];
    long long v = -1;
    if (!iface || !*iface)
        return -1;
    snprintf(path, sizeof path, "/sys/class/net/%s/statistics/tx_bytes", iface);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%lld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* Every rank here before any goes on: the counters are read between two of these. */
static zt_status barrier(zt_runtime *rt)
{
    zt_comm_req req = {0};
    zt_status st = zt_comm_barrier(rt->dist.comm, &req, &rt->err);
    return st == ZT_OK ? zt_comm_wait(rt->dist.comm, &req, &rt->err) : st;
}

static int fail(zt_runtime *rt, int rank, const char *what, zt_status st)
{
    printf("mn rank=%d error=%s at=%.3f what=%s: %s\n", rank,
           st == ZT_ERR_COMM ? "ZT_ERR_COMM" : zt_status_string(st), now_s(), what,
           zt_last_error(rt));
    fflush(stdout);
    zt_runtime_destroy(rt);
    return st == ZT_ERR_COMM ? 2 : 1;
}

static int write_params(zt_runtime *rt, const minimal_model *m, int rank, const char *path)
{
    FILE *f = rank == 0 ? fopen(path, "wb") : NULL;
    if (rank == 0 && !f) {
        perror(path);
        return 1;
    }
    int bad = 0;
    for (int k = 0; k < 2 * MLP_LAYERS; k++) {
        int l = k / 2;
        int64_t n = k % 2 ? m->n_out[l] : (int64_t)m->n_in[l] * m->n_out[l];
        float *p = malloc(sizeof(float) * (size_t)n);
        /* collective: every rank reads */
        if (!p || zt_param_read(rt, k % 2 ? m->bias[l] : m->weight[l], p, n) != ZT_OK)
            bad = 1;
        else if (f && fwrite(p, sizeof(float), (size_t)n, f) != (size_t)n)
            bad = 1;
        free(p);
    }
    if (f && fclose(f))
        bad = 1;
    return bad;
}

typedef struct freezer {
    int rank, ms;
    char host[256];
} freezer;

static void *freeze_later(void *arg)
{
    const freezer *f = arg;
    usleep((useconds_t)f->ms * 1000);
    printf("mn rank=%d frozen=%.3f host=%s\n", f->rank, now_s(), f->host);
    fflush(stdout);
    raise(SIGSTOP); /* the whole process */
    return NULL;
}

/* Stops this process now (ms < 0), or ms milliseconds into the step, from a thread of its
 * own: then it stops wherever the step is, collectives of several lanes in flight. */
static void freeze(int rank, const char *host, int ms)
{
    static freezer f;
    f.rank = rank, f.ms = ms;
    snprintf(f.host, sizeof f.host, "%s", host);
    pthread_t t;
    if (ms < 0 || pthread_create(&t, NULL, freeze_later, &f) != 0) {
        f.ms = 0;
        freeze_later(&f);
        return;
    }
    pthread_detach(t);
}

int main(int argc, char **argv)
{
    int zeropp = argc > 3 && !strcmp(argv[1], "zeropp");
    int stage2 = argc > 3 && !strcmp(argv[1], "stage2");
    int steps = argc > 3 ? atoi(argv[2]) : 0;
    int rpn = 0, kill_rank = -1, kill_step = -1, freeze_rank = -1, freeze_step = -1;
    int freeze_ms = -1;
    char save_dir[512] = "", stall[32] = "";
    for (int i = 4; i < argc; i++)
        if (sscanf(argv[i], "rpn=%d", &rpn) != 1 &&
            sscanf(argv[i], "kill=%d@%d", &kill_rank, &kill_step) != 2 &&
            sscanf(argv[i], "freeze=%d@%d+%d", &freeze_rank, &freeze_step, &freeze_ms) < 2 &&
            sscanf(argv[i], "save=%511[^@]@%31s", save_dir, stall) != 2)
            steps = 0;
    if ((!zeropp && !stage2 && (argc < 4 || strcmp(argv[1], "plain"))) || steps < 2) {
        fprintf(stderr, "usage: mn_train <plain|zeropp|stage2> <steps >= 2> <params_out> "
                        "[rpn=<ranks per node>] [kill=<rank>@<step>] [freeze=<rank>@<step>] "
                        "[save=<dir>@<seconds>]\n");
        return 1;
    }
    /* wide enough that each collective's messages span many packets (run.sh's byte check),
     * small enough for a few steps a second on two cores; the batch splits over 2, 3, 4 */
    const mlp_dims dims = {32, 256, 8, 48};
    const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};
    char ztier[96] = "";
    if (rpn > 0)
        snprintf(ztier, sizeof ztier, ", \"ranks_per_node\": %d", rpn);
    if (zeropp)
        strcat(ztier, ", \"quant_block_size\": 64");
    const char *zero = zeropp   ? ", \"stage3_max_reuse_distance\": 0,"
                                  " \"zero_quantized_weights\": true,"
                                  " \"zero_quantized_gradients\": true,"
                                  " \"zero_hpz_partition_size\": 2"
                       : stage2 ? ", \"stage\": 2"
                                : ", \"stage3_max_reuse_distance\": 0";
    zt_runtime *rt = NULL;
    minimal_model m;
    int rank = 0, world = 1;
    double t0 = now_s();
    zt_status st = zt_runtime_create(
        NULL, ref_mlp_config(&hp, stage2 ? "none" : "cpu", "cpu", 1, zero, ztier), &rt);
    if (st == ZT_OK) /* the rank is known from creation on: a failed commit names it */
        zt_runtime_rank(rt, &rank, &world);
    if (st == ZT_OK)
        st = minimal_register(rt, &dims, 42, &m);
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    if (st != ZT_OK || zt_runtime_rank(rt, &rank, &world) != ZT_OK)
        return fail(rt, rank, "setup", st);
    double commit_s = now_s() - t0;
    if (dims.batch % world) {
        fprintf(stderr, "needs ranks dividing the batch of %d (got %d)\n", dims.batch, world);
        zt_runtime_destroy(rt);
        return 1;
    }
    char host[256] = "?";
    gethostname(host, sizeof host);
    int rows = dims.batch / world;
    zt_stats s0 = ZT_STATS_INIT, s1 = ZT_STATS_INIT;
    long long tx0 = -1, tx1 = -1;
    for (int s = 0; s < steps; s++) {
        float loss;
        if (s == 1 && ((st = barrier(rt)) != ZT_OK || (tx0 = tx_bytes(), 0) ||
                       (st = zt_stats_get(rt, &s0)) != ZT_OK || (st = barrier(rt)) != ZT_OK))
            return fail(rt, rank, "barrier", st);
        if (rank == kill_rank && s == kill_step) {
            printf("mn rank=%d killed=%.3f host=%s\n", rank, now_s(), host);
            fflush(stdout);
            raise(SIGKILL);
        }
        if (freeze_rank >= 0 && rank >= freeze_rank && s == freeze_step)
            freeze(rank, host, freeze_ms);
        if ((st = minimal_micro_step(rt, &m, s, rank * rows, rows, &loss)) != ZT_OK)
            return fail(rt, rank, "micro-step", st);
        if ((st = zt_step(rt, NULL, NULL)) != ZT_OK)
            return fail(rt, rank, "zt_step", st);
    }
    if ((st = zt_stats_get(rt, &s1)) != ZT_OK || (st = barrier(rt)) != ZT_OK ||
        (tx1 = tx_bytes(), 0) || (st = barrier(rt)) != ZT_OK)
        return fail(rt, rank, "barrier", st);
    double train_s = now_s() - t0 - commit_s;
    printf("mn rank=%d world=%d host=%s commit_s=%.3f train_s=%.3f steps=%d inter=%llu "
           "intra=%llu tx0=%lld tx1=%lld\n",
           rank, world, host, commit_s, train_s, steps - 1,
           (unsigned long long)(s1.comm_bytes_inter - s0.comm_bytes_inter),
           (unsigned long long)(s1.comm_bytes_intra - s0.comm_bytes_intra), tx0, tx1);
    fflush(stdout);
    int bad = write_params(rt, &m, rank, argv[3]);
    if (*save_dir) {
        if (rank == 0) /* after the commit, before the others hear of it */
            setenv("ZT_TEST_DELAY_AT", "checkpoint verdict", 1),
                setenv("ZT_TEST_DELAY_S", stall, 1);
        st = zt_checkpoint_save(rt, save_dir);
        printf("mn rank=%d save=%s at=%.3f host=%s: %s\n", rank,
               st == ZT_OK         ? "ok"
               : st == ZT_ERR_COMM ? "ZT_ERR_COMM"
                                   : zt_status_string(st),
               now_s(), host, st == ZT_OK ? "" : zt_last_error(rt));
        fflush(stdout);
        bad |= st != ZT_OK;
    }
    zt_runtime_destroy(rt);
    return bad;
}

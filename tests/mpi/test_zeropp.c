/* SPDX-License-Identifier: MIT */
/* ZeRO++ under mpirun (ranks_per_node = 2: 4 ranks are two nodes, 3 ranks two uneven nodes):
 * the minimal MLP trains with qwZ, qgZ, hpZ (which must change nothing) and all three, with
 * and without NVMe offload and with the optimizer on the device; after 50
 * steps every configuration's loss is within 10% of the unquantized run's and its parameters
 * within 10% (relative L2; int4 gradients move them most); with all three on, the bytes each
 * rank sends across nodes per step are at most 0.30x of the unquantized (fp32) run.
 * Then the device budget: with qwZ and qgZ on (and hpZ, whose slices only take free room),
 * the smallest budget `ztier estimate` gives (its replay counts their transfer buffers)
 * trains to bitwise the same parameters as an unbounded one, within that budget and with
 * evictions; one byte less fails with ZT_ERR_DEVICE_NOMEM on every rank alike, at commit or
 * at a fetch or release; with hpZ, a budget halfway to the unbounded peak drops slices for
 * room and trains to the same parameters (on 3 ranks hpZ is off: uneven nodes). At ZeRO
 * stages 1 and 2 (parameters replicated on the device, optimizer on the CPU) qwZ quantizes the
 * post-step all-gather of the replicas and, at stage 2, qgZ the reduce-scatters: the same 10%
 * bounds against the unquantized stage-3 run. */
#include "ref_mlp.h"
#include "runtime/estimate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STEPS 50

static const mlp_dims dims = {16, 48, 4, 48}; /* odd layer sizes, batch splits over 3 and 4 */
static const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};

typedef struct outcome {
    float loss; /* mean over the last 10 steps of this rank's rows */
    float *params[2 * MLP_LAYERS];
    double inter_bytes_per_step;
    zt_status failed; /* with a device budget: the first failure (then nothing else is set) */
    uint64_t device_peak, evictions, slices_dropped;
    int world;
} outcome;

static int zero_stage = 3; /* below 3: parameters replicated, "offload" the optimizer's */

static const char *config(const char *qw, const char *qg, int hpz, const char *offload)
{
    char extra_zero[320];
    snprintf(extra_zero, sizeof extra_zero,
             ", \"stage3_max_reuse_distance\": 0," /* persistence 0: ref_mlp_config's */
             " \"zero_quantized_weights\": %s,"
             " \"zero_quantized_gradients\": %s, \"zero_hpz_partition_size\": %d, \"stage\": %d",
             qw, qg, hpz, zero_stage);
    if (zero_stage < 3)
        return ref_mlp_config(&hp, "none", offload, 1, extra_zero,
                              ", \"ranks_per_node\": 2, \"quant_block_size\": 64");
    /* "devopt": parameters in host memory, the optimizer and the gradient sums on the device
     * (qgZ adds straight into the device accumulators) */
    int devopt = !strcmp(offload, "devopt");
    return ref_mlp_config(&hp, devopt ? "cpu" : offload, devopt ? "none" : offload, 1, extra_zero,
                          devopt ? ", \"ranks_per_node\": 2, \"quant_block_size\": 64,"
                                   " \"device_optimizer\": \"on\""
                                 : ", \"ranks_per_node\": 2, \"quant_block_size\": 64");
}

/* Trains STEPS steps; hbm > 0 sets the device budget, and a failure is then an outcome. */
static int train_budget(const char *qw, const char *qg, int hpz, const char *offload, uint64_t hbm,
                        outcome *o)
{
    char bytes[32];
    snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)hbm);
    if (hbm)
        setenv("ZT_HBM_CAPACITY", bytes, 1);
    zt_runtime *rt = NULL;
    minimal_model m;
    zt_status st = zt_runtime_create(NULL, config(qw, qg, hpz, offload), &rt);
    unsetenv("ZT_HBM_CAPACITY");
    if (st == ZT_OK && minimal_register(rt, &dims, 42, &m))
        st = ZT_ERR_INTERNAL;
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    memset(o, 0, sizeof *o);
    if (st != ZT_OK) {
        fprintf(stderr, "setup (%s/%s/%d/%s): %s\n", qw, qg, hpz, offload, zt_last_error(rt));
        zt_runtime_destroy(rt);
        o->failed = st;
        return hbm ? 0 : -1;
    }
    int rank, world;
    zt_runtime_rank(rt, &rank, &world);
    int rows = dims.batch / world;
    zt_stats s0 = ZT_STATS_INIT, s1 = ZT_STATS_INIT;
    o->loss = 0;
    for (int s = 0; s < STEPS; s++) {
        float loss;
        if (s == 1)
            zt_stats_get(rt, &s0);
        if ((st = minimal_micro_step(rt, &m, s, rank * rows, rows, &loss)) != ZT_OK ||
            (st = zt_step(rt, NULL, NULL)) != ZT_OK) {
            fprintf(stderr, "step %d: %s\n", s, zt_last_error(rt));
            zt_runtime_destroy(rt);
            o->failed = st;
            return hbm ? 0 : -1;
        }
        if (s >= STEPS - 10)
            o->loss += loss / 10;
    }
    zt_stats_get(rt, &s1);
    o->device_peak = s1.device_bytes_peak;
    o->evictions = s1.evictions;
    o->world = world;
    o->slices_dropped = s1.hpz_slices_dropped;
    o->inter_bytes_per_step = (double)(s1.comm_bytes_inter - s0.comm_bytes_inter) / (STEPS - 1);
    for (int k = 0; k < 2 * MLP_LAYERS; k++) {
        int l = k / 2;
        int64_t n = k % 2 ? m.n_out[l] : (int64_t)m.n_in[l] * m.n_out[l];
        o->params[k] = malloc(sizeof(float) * (size_t)n);
        zt_param_read(rt, k % 2 ? m.bias[l] : m.weight[l], o->params[k], n);
    }
    zt_runtime_destroy(rt);
    return 0;
}

static double rel_diff(const outcome *a, const outcome *b);

static int train(const char *qw, const char *qg, int hpz, const char *offload, outcome *o)
{
    return train_budget(qw, qg, hpz, offload, 0, o);
}

/* The smallest device budget `ztier estimate` finds for these steps on this world. */
static uint64_t estimated_minimum(const char *qw, const char *qg, int hpz, const char *offload)
{
    zt_runtime *rt = NULL;
    minimal_model m;
    zt_estimate e;
    if (zt_runtime_create(NULL, config(qw, qg, hpz, offload), &rt) != ZT_OK ||
        minimal_register(rt, &dims, 42, &m) ||
        zt_rt_estimate(rt, rt->dist.world, (uint64_t)rt->cfg.hbm_capacity, NULL, 0, 3, &e) !=
            ZT_OK) {
        fprintf(stderr, "estimate: %s\n", zt_last_error(rt));
        e.device_min_order = 0;
    }
    zt_runtime_destroy(rt);
    return e.device_min_order;
}

/* qwZ and qgZ at the estimate's minimum budget and one byte below it (see the top). */
static int check_budget(int hpz, const char *offload)
{
    uint64_t min = estimated_minimum("true", "true", hpz, offload);
    outcome unbounded, at, below;
    if (!min || train("true", "true", hpz, offload, &unbounded) ||
        train_budget("true", "true", hpz, offload, min, &at) ||
        train_budget("true", "true", hpz, offload, min - 1, &below))
        return 1;
    double d = at.failed ? -1 : rel_diff(&at, &unbounded);
    int ok = !at.failed && d == 0.0 && at.device_peak <= min && at.evictions > 0 &&
             below.failed == ZT_ERR_DEVICE_NOMEM;
    printf("qwZ+qgZ hpZ=%d %-4s at the estimated minimum of %llu bytes: %s, peak %llu, %llu "
           "evictions, parameters %.2g from the unbounded run; %llu bytes: %s %s\n",
           hpz, offload, (unsigned long long)min,
           at.failed ? zt_status_string(at.failed) : "trains", (unsigned long long)at.device_peak,
           (unsigned long long)at.evictions, d, (unsigned long long)(min - 1),
           below.failed ? zt_status_string(below.failed)
                        : "trains too (the estimate is not the "
                          "minimum)",
           ok ? "ok" : "FAIL");
    /* between the minimum and the unbounded peak: slices kept, then dropped (hpZ is on where
     * the ranks split into equal nodes of ranks_per_node = 2) */
    if (hpz > 1 && unbounded.world % 2 == 0) {
        outcome mid;
        uint64_t hbm = (min + unbounded.device_peak) / 2;
        if (train_budget("true", "true", hpz, offload, hbm, &mid))
            return 1;
        double dm = mid.failed ? -1 : rel_diff(&mid, &unbounded);
        int ok_mid = !mid.failed && dm == 0.0 && mid.slices_dropped > 0;
        printf("qwZ+qgZ hpZ=%d %-4s at %llu bytes: %s, %llu hpZ slices dropped for room, "
               "parameters %.2g from the unbounded run %s\n",
               hpz, offload, (unsigned long long)hbm,
               mid.failed ? zt_status_string(mid.failed) : "trains",
               (unsigned long long)mid.slices_dropped, dm, ok_mid ? "ok" : "FAIL");
        ok = ok && ok_mid;
    }
    return !ok;
}

static double rel_diff(const outcome *a, const outcome *b)
{
    double num = 0, den = 0;
    for (int k = 0; k < 2 * MLP_LAYERS; k++) {
        int l = k / 2;
        int64_t n = k % 2
                        ? (l == 2 ? dims.out : dims.hidden)
                        : (int64_t)(l ? dims.hidden : dims.in) * (l == 2 ? dims.out : dims.hidden);
        for (int64_t i = 0; i < n; i++) {
            double d = (double)a->params[k][i] - b->params[k][i];
            num += d * d;
            den += (double)b->params[k][i] * b->params[k][i];
        }
    }
    return sqrt(num / den);
}

int main(void)
{
    const char *base = getenv("ZT_TEST_TMPDIR") ? getenv("ZT_TEST_TMPDIR") : "/tmp";
    char swap[512];
    snprintf(swap, sizeof swap, "%s/swap-zeropp-%d", base, (int)getpid()); /* own folder */
    mkdir(swap, 0755);
    setenv("ZT_NVME_PATH", swap, 1);
    const struct {
        const char *qw, *qg;
        int hpz;
    } modes[5] = {{"false", "false", 1},
                  {"true", "false", 1},
                  {"false", "true", 1},
                  {"false", "false", 2},
                  {"true", "true", 2}};
    const char *offloads[3] = {"cpu", "nvme", "devopt"};
    outcome baseline;
    if (train("false", "false", 1, "cpu", &baseline) != 0)
        return 1;
    int failures = 0;
    for (int off = 0; off < 3; off++)
        for (int i = 0; i < 5; i++) {
            outcome o;
            if (train(modes[i].qw, modes[i].qg, modes[i].hpz, offloads[off], &o) != 0)
                return 1;
            double d = rel_diff(&o, &baseline);
            double dl = fabs(o.loss - baseline.loss) / baseline.loss;
            double bytes = o.inter_bytes_per_step / baseline.inter_bytes_per_step;
            /* hpZ alone changes no value: it must equal the baseline bitwise */
            int ok = d <= (i == 3 ? 0.0 : 0.10) && dl <= 0.10 && (i < 4 || bytes <= 0.30);
            printf("qwZ=%-5s qgZ=%-5s hpZ=%d %-4s: loss %.5f (unquantized %.5f, %.1f%%), "
                   "parameters %.2g relative, inter-node bytes/step %.0f (%.2fx) %s\n",
                   modes[i].qw, modes[i].qg, modes[i].hpz, offloads[off], o.loss, baseline.loss,
                   100 * dl, d, o.inter_bytes_per_step, bytes, ok ? "ok" : "FAIL");
            failures += !ok;
        }
    for (zero_stage = 1; zero_stage <= 2; zero_stage++)
        for (int i = 1; i <= 2; i++) {
            if (zero_stage == 1 && i == 2)
                continue; /* qgZ: stage 2 and 3 only */
            outcome o;
            if (train(modes[i].qw, modes[i].qg, 1, "cpu", &o) != 0)
                return 1;
            double d = rel_diff(&o, &baseline);
            double dl = fabs(o.loss - baseline.loss) / baseline.loss;
            int ok = d > 0 && d <= 0.10 && dl <= 0.10; /* quantized: not the same bits */
            printf("stage %d qwZ=%-5s qgZ=%-5s cpu : loss %.5f (unquantized stage 3 %.5f, "
                   "%.1f%%), parameters %.2g relative %s\n",
                   zero_stage, modes[i].qw, modes[i].qg, o.loss, baseline.loss, 100 * dl, d,
                   ok ? "ok" : "FAIL");
            failures += !ok;
        }
    zero_stage = 3;
    failures += check_budget(1, "cpu") + check_budget(1, "nvme") + check_budget(2, "cpu");
    rmdir(swap);
    return failures ? 1 : 0;
}

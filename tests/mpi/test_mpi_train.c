/* SPDX-License-Identifier: MIT */
/* ZeRO-3 across ranks (run under mpirun): the minimal MLP trained on N ranks, each taking
 * its slice of the global batch, equals the independent single-process reference trained on
 * the whole batch, for each placement given on the command line:
 *   test_mpi_train <param_device> <optimizer_device> [accum] [persistence]
 *                  [stream,devopt,split,stage0,stage1,stage2,ckpt]
 * With "stream" every layer is computed on a stream between zt_fetch_async and
 * zt_release_async; with "devopt" (and optimizer "none") the optimizer runs on the device;
 * with "split" (optimizer "cpu") offload_optimizer.ratio 0.5 runs the first layer's there;
 * "stage0" (with both devices "none") sets zero_optimization.stage 0: every layer replicated,
 * and the bytes each rank sends per step must be an all-reduce of every layer's gradients
 * (counted as a ring's: 2 x (N - 1) / N of them). "stage1" and "stage2" (parameters "none")
 * set stage 1 or 2: parameters replicated, optimizer state and gradient sums partitioned; each
 * micro-step reduce-scatters the gradients (stage 1: each step, its own sums of the
 * micro-steps) and each step all-gathers the updated partitions once (plus the first
 * fetch's), nothing else. "ckpt" saves a checkpoint halfway, and a runtime of another stage
 * (3 after 0-2, 2 after 3, its parameters on the device then) loads it and trains on.
 * "rbucket" sets reduce_bucket_size to 3000 elements: the last two layers' gradients in one
 * collective, the first's on its own (else the default holds every layer of a micro-step in
 * one). "twin" trains a second runtime beside it, the same stage with everything in memory
 * (the optimizer state in device memory), each replica all-gathered and each release's
 * gradients reduced on its own (allgather_bucket_size and reduce_bucket_size 1; this one packs
 * both into buckets): the parameters must end bitwise equal. Every run without "ckpt" also
 * compares its device peak with ztier's estimate of the same steps. */
#include "ref_mlp.h"
#include "runtime/estimate.h"
#include "runtime/runtime.h"
#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STEPS 20

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }
static uint64_t page(uint64_t bytes) { return (bytes + 4095) / 4096 * 4096; }

/* 1 when every parameter of two runtimes' models has the same bits (the reads are
 * collective: every rank calls this). */
static int same_bits(zt_runtime *a, const minimal_model *ma, zt_runtime *b, const minimal_model *mb)
{
    int same = 1;
    for (int l = 0; l < MLP_LAYERS; l++)
        for (int k = 0; k < 2; k++) {
            int64_t n = k ? ma->n_out[l] : (int64_t)ma->n_in[l] * ma->n_out[l];
            float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
            int ok = x && y && zt_param_read(a, k ? ma->bias[l] : ma->weight[l], x, n) == ZT_OK &&
                     zt_param_read(b, k ? mb->bias[l] : mb->weight[l], y, n) == ZT_OK;
            same = same && ok && !memcmp(x, y, sizeof(float) * (size_t)n);
            free(x), free(y);
        }
    return same;
}

/* Saves a checkpoint into a folder every rank names alike, destroys the runtime and loads
 * the checkpoint into a new one at `stage` (the same model, optimizer and accumulation). */
static zt_status switch_stage(zt_runtime **rt, minimal_model *m, const ref_hparams *hp,
                              const char *odev, int accum, int stage, char *root, size_t len)
{
    int rank = 0, world = 1;
    zt_runtime_rank(*rt, &rank, &world);
    if (rank == 0)
        scratch_make("mpi-train-stage", root, len);
    zt_status st = zt_comm_broadcast_sync((*rt)->dist.comm, root, len, ZT_COMM_U8, 0, &(*rt)->err);
    if (st == ZT_OK)
        st = zt_checkpoint_save(*rt, root);
    if (st != ZT_OK)
        return st;
    zt_runtime_destroy(*rt);
    *rt = NULL;
    mlp_dims d = m->d;
    char zero[96];
    snprintf(zero, sizeof zero, ", \"stage\": %d", stage);
    st = zt_runtime_create(
        NULL, ref_mlp_config(hp, stage < 3 ? "none" : "cpu", odev, accum, zero, ""), rt);
    if (st == ZT_OK)
        st = minimal_register(*rt, &d, 42, m);
    if (st == ZT_OK)
        st = zt_runtime_commit(*rt);
    return st == ZT_OK ? zt_checkpoint_load(*rt, root) : st;
}

/* offload_optimizer.ratio ("split": 0.5, the first layer's optimizer on the device) */
static double split_ratio = 1.0;

/* ztier's estimate of the device peak of `steps` steps at `stage` on `world` ranks under
 * `capacity`: a runtime configured as `cfg` (reduce_bucket_size: rbucket, when not 0), the
 * model registered, not committed. 0 when the estimate fails. */
static uint64_t estimated_peak(const char *cfg, int stage, int64_t rbucket, const mlp_dims *dims,
                               int world, uint64_t capacity, int steps)
{
    zt_runtime *est = NULL;
    minimal_model m;
    zt_estimate e;
    int ok = zt_runtime_create(NULL, cfg, &est) == ZT_OK &&
             zt_config_set_int(est, "zero_optimization.stage", stage) == ZT_OK &&
             zt_config_set_double(est, "zero_optimization.offload_optimizer.ratio", split_ratio) ==
                 ZT_OK &&
             (!rbucket ||
              zt_config_set_int(est, "zero_optimization.reduce_bucket_size", rbucket) == ZT_OK) &&
             minimal_register(est, dims, 42, &m) == ZT_OK &&
             zt_rt_estimate(est, world, capacity, NULL, 0, steps, &e) == ZT_OK;
    if (!ok)
        fprintf(stderr, "estimate: %s\n", zt_last_error(est));
    zt_runtime_destroy(est);
    return ok ? e.device_peak : 0;
}

int main(int argc, char **argv)
{
    const char *pdev = argc > 1 ? argv[1] : "cpu", *odev = argc > 2 ? argv[2] : "cpu";
    int accum = argc > 3 ? atoi(argv[3]) : 1;
    const char *persist = argc > 4 ? argv[4] : "0"; /* stage3_param_persistence_threshold */
    int on_stream = argc > 5 && strstr(argv[5], "stream");
    const char *devopt =
        argc > 5 && strstr(argv[5], "devopt") ? ", \"device_optimizer\": \"on\"" : "";
    char extra_zero[96];
    snprintf(extra_zero, sizeof extra_zero, ", \"stage3_param_persistence_threshold\": %s",
             persist);
    if (!strcmp(pdev, "nvme") || !strcmp(odev, "nvme")) { /* every rank its own files there */
        static char dir[512];
        const char *base = getenv("ZT_TEST_TMPDIR") ? getenv("ZT_TEST_TMPDIR") : "/tmp";
        snprintf(dir, sizeof dir, "%s/swap-mpi-%d", base,
                 (int)getpid()); /* tests run in parallel */
        mkdir(dir, 0755);
        setenv("ZT_NVME_PATH", dir, 1);
    }
    const mlp_dims dims = {16, 48, 4, 48}; /* the batch splits over 2, 3 and 4 ranks */
    const ref_hparams hp = {0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.5f};
    zt_runtime *rt = NULL;
    if (zt_runtime_create(NULL, ref_mlp_config(&hp, pdev, odev, accum, extra_zero, devopt), &rt) !=
        ZT_OK) {
        fprintf(stderr, "create: %s\n", zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    int stage0 = argc > 5 && strstr(argv[5], "stage0");
    int stage = stage0                                  ? 0
                : argc > 5 && strstr(argv[5], "stage1") ? 1
                : argc > 5 && strstr(argv[5], "stage2") ? 2
                                                        : 3;
    if (argc > 5 && strstr(argv[5], "split"))
        split_ratio = 0.5;
    if (zt_config_set_double(rt, "zero_optimization.offload_optimizer.ratio", split_ratio) !=
        ZT_OK) {
        fprintf(stderr, "ratio: %s\n", zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    if (zt_config_set_int(rt, "zero_optimization.stage", stage) != ZT_OK) {
        fprintf(stderr, "stage %d: %s\n", stage, zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    if (argc > 5 && strstr(argv[5], "rbucket") &&
        zt_config_set_int(rt, "zero_optimization.reduce_bucket_size", 3000) != ZT_OK) {
        fprintf(stderr, "reduce_bucket_size: %s\n", zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    int rank = 0, world = 1;
    zt_runtime_rank(rt, &rank, &world);
    if (world < 2 || dims.batch % world) {
        fprintf(stderr, "needs 2+ ranks dividing the batch of %d (got %d)\n", dims.batch, world);
        zt_runtime_destroy(rt);
        return 77;
    }
    minimal_model m;
    ref_mlp ref;
    int rows = dims.batch / world;
    if (minimal_register(rt, &dims, 42, &m) != ZT_OK || zt_runtime_commit(rt) != ZT_OK ||
        ref_mlp_init(&ref, rt, &m, &hp) != 0) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    zt_optimizer_info oi = ZT_OPTIMIZER_INFO_INIT;
    if (zt_optimizer_get(rt, &oi) != ZT_OK || oi.on_device != (*devopt != 0) ||
        (split_ratio < 1) != (oi.offload_ratio > 0 && oi.offload_ratio < 1)) {
        fprintf(stderr, "rank %d: the optimizer is %s the device (CPU share %g), asked %s\n", rank,
                oi.on_device ? "on" : "not on", (double)oi.offload_ratio, *devopt ? "on" : "off");
        zt_runtime_destroy(rt);
        return 1;
    }
    zt_runtime *twin = NULL; /* the same stage, everything in memory */
    minimal_model tm;
    if (argc > 5 && strstr(argv[5], "twin")) {
        char zero[256];
        snprintf(zero, sizeof zero,
                 "%s, \"stage\": %d, \"allgather_bucket_size\": 1, \"reduce_bucket_size\": 1",
                 extra_zero, stage);
        if (zt_runtime_create(NULL, ref_mlp_config(&hp, "none", "none", accum, zero, devopt),
                              &twin) != ZT_OK ||
            minimal_register(twin, &dims, 42, &tm) != ZT_OK || zt_runtime_commit(twin) != ZT_OK) {
            fprintf(stderr, "rank %d: twin: %s\n", rank, zt_last_error(twin));
            return 1;
        }
    }
    zt_stats before = ZT_STATS_INIT; /* the reference's reads of the initial values */
    zt_stats_get(rt, &before);
    void *stream = NULL;
    if (on_stream && zt_stream_create(rt, &stream) != ZT_OK) {
        fprintf(stderr, "rank %d: zt_stream_create: %s\n", rank, zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    int ckpt = argc > 5 && strstr(argv[5], "ckpt");
    char root[512] = "";
    for (int s = 0; s < STEPS; s++) {
        if (ckpt && s == STEPS / 2) {
            int to = stage == 3 ? 2 : 3;
            if (switch_stage(&rt, &m, &hp, odev, accum, to, root, sizeof root) != ZT_OK) {
                fprintf(stderr, "rank %d: stage %d to %d through a checkpoint: %s\n", rank, stage,
                        to, zt_last_error(rt));
                return 1;
            }
            if (rank == 0)
                printf("rank 0: stage %d saved at step %d, loaded and trained on at stage %d\n",
                       stage, s, to);
            stage = to;
        }
        for (int k = 0; k < accum; k++) {
            float loss;
            int64_t batch = (int64_t)s * accum + k;
            zt_status st =
                stream ? minimal_micro_step_on(rt, &m, stream, batch, rank * rows, rows, 0, &loss)
                       : minimal_micro_step(rt, &m, batch, rank * rows, rows, &loss);
            if (st != ZT_OK) {
                fprintf(stderr, "rank %d: step %d: %s\n", rank, s, zt_last_error(rt));
                return 1;
            }
            if (twin && minimal_micro_step(twin, &tm, batch, rank * rows, rows, &loss) != ZT_OK) {
                fprintf(stderr, "rank %d: twin, step %d: %s\n", rank, s, zt_last_error(twin));
                return 1;
            }
        }
        if (twin && zt_step(twin, NULL, NULL) != ZT_OK) {
            fprintf(stderr, "rank %d: twin's zt_step: %s\n", rank, zt_last_error(twin));
            return 1;
        }
        if (zt_step(rt, NULL, NULL) != ZT_OK) {
            fprintf(stderr, "rank %d: zt_step: %s\n", rank, zt_last_error(rt));
            return 1;
        }
        ref_mlp_step(&ref, (int64_t)s * accum, accum);
    }
    int ok = 1;
    if (ckpt) { /* the bytes of two runtimes: only the values are checked */
        if (rank == 0)
            scratch_remove(root);
    } else if (stage0) { /* replicated layers: no gather; each micro-step all-reduces the gradients,
                   * which zt_stats counts as 2 x their bytes to each other rank */
        zt_stats s = ZT_STATS_INIT;
        zt_stats_get(rt, &s);
        uint64_t grads = 0; /* fp32 bytes of every layer's gradients, as laid out (each
                             * parameter rounded up to 16 elements) */
        for (int l = 0; l < MLP_LAYERS; l++)
            grads += 4 * (uint64_t)(round16(m.n_in[l] * m.n_out[l]) + round16(m.n_out[l]));
        uint64_t sent = s.comm_bytes_intra + s.comm_bytes_inter, want = 0;
        for (int l = 0; l < MLP_LAYERS; l++) /* each layer's all-reduce, as counted */
            want += 2 * 4 * (uint64_t)(round16(m.n_in[l] * m.n_out[l]) + round16(m.n_out[l])) *
                    (uint64_t)(world - 1) / (uint64_t)world;
        want *= (uint64_t)STEPS * (uint64_t)accum;
        printf("rank %d: stage 0: %u of %d layers replicated, %llu bytes gathered, %llu bytes "
               "sent over %d micro-steps (%.4f x 2 (N-1)/N x the gradients)\n",
               rank, s.persistent_layers, MLP_LAYERS, (unsigned long long)s.gathered_bytes,
               (unsigned long long)sent, STEPS * accum,
               (double)sent / (2.0 * (double)grads * (world - 1) / world * STEPS * accum));
        ok = s.persistent_layers == MLP_LAYERS && s.gathered_bytes == 0 && sent == want;
    } else if (stage < 3) { /* replicas: one all-gather per step, a reduce-scatter per micro-step */
        zt_stats s = ZT_STATS_INIT;
        zt_stats_get(rt, &s);
        uint64_t shards = 0, host = 0, largest = 0; /* fp32 bytes of every layer's partition */
        for (int l = 0; l < MLP_LAYERS; l++) {
            int64_t flat = round16(m.n_in[l] * m.n_out[l]) + round16(m.n_out[l]);
            uint64_t shard = 4 * (uint64_t)((flat + 16 * world - 1) / (16 * world) * 16);
            shards += shard;
            host += 4 * page(shard); /* its fp32 master, m, v and gradient sums: 16 B/element */
            largest = shard > largest ? shard : largest;
        }
        host += 2 * page(largest); /* the optimizer's staging: an fp32 shard and its copy */
        /* memory: the full parameters once on the device, a partition of everything else */
        int memory_ok = s.replicated_bytes == shards * (uint64_t)world &&
                        (strcmp(odev, "cpu") || s.host_bytes_peak == host);
        printf("rank %d: stage %d: device replicas %llu bytes (the parameters: %llu), host peak "
               "%llu bytes (%s: %llu)\n",
               rank, stage, (unsigned long long)s.replicated_bytes,
               (unsigned long long)(shards * (uint64_t)world),
               (unsigned long long)s.host_bytes_peak,
               strcmp(odev, "cpu") ? "not checked, the state is not in host memory"
                                   : "16 bytes per partition element, page-rounded, and staging",
               (unsigned long long)host);
        uint64_t sent = s.comm_bytes_intra + s.comm_bytes_inter - before.comm_bytes_intra -
                        before.comm_bytes_inter;
        /* stage 1 sums its micro-steps itself and reduce-scatters once per step */
        uint64_t reduced =
            shards * (uint64_t)(world - 1) * STEPS * (uint64_t)(stage == 1 ? 1 : accum);
        /* the first fetch's all-gather and one after each step: after the last one too unless
         * the step leaves its updates to the next fetches (the NVMe-pipelined step) */
        uint64_t round = shards * (uint64_t)(world - 1), gathered = round * (STEPS + 1);
        if (sent == reduced + round * STEPS)
            gathered = round * STEPS;
        printf("rank %d: stage %d: %u layers persistent, %llu bytes sent over %d steps of %d "
               "micro-steps (reduce-scatters %llu + all-gathers %llu expected): per step %.3f x "
               "the parameters' bytes\n",
               rank, stage, s.persistent_layers, (unsigned long long)sent, STEPS, accum,
               (unsigned long long)reduced, (unsigned long long)gathered,
               (double)sent / STEPS / (double)(shards * (uint64_t)world));
        ok = s.persistent_layers == 0 && sent == reduced + gathered && memory_ok;
    }
    if (twin) {
        int same = same_bits(rt, &m, twin, &tm);
        zt_stats a = ZT_STATS_INIT, b = ZT_STATS_INIT;
        zt_stats_get(rt, &a), zt_stats_get(twin, &b);
        printf("rank %d: stage %d, %s/%s in %llu bucketed all-gathers and %llu bucketed "
               "reductions against everything in memory in %llu and %llu: parameters %s\n",
               rank, stage, pdev, odev, (unsigned long long)a.allgather_buckets,
               (unsigned long long)a.reduce_buckets, (unsigned long long)b.allgather_buckets,
               (unsigned long long)b.reduce_buckets, same ? "bitwise equal" : "DIFFER");
        /* with the state on NVMe each update waits for the layer's fetch: no bucket then;
         * stages 0 and 3 have no replicas */
        int bucketed = stage == 0 || stage == 3 || !strcmp(odev, "nvme") || a.allgather_buckets > 0;
        ok = ok && same && bucketed && a.reduce_buckets > 0 && b.allgather_buckets == 0 &&
             b.reduce_buckets == 0;
        zt_runtime_destroy(twin);
    }
    /* the device peak, against ztier's estimate of these steps: within 10% without streams
     * (the estimate counts what reductions in flight hold as free, as the runtime reclaims it
     * on demand; with streams, frees also wait for the caller's stream) */
    if (!ckpt) {
        zt_stats s = ZT_STATS_INIT;
        zt_stats_get(rt, &s);
        int64_t rbucket = argc > 5 && strstr(argv[5], "rbucket") ? 3000 : 0;
        uint64_t est = estimated_peak(ref_mlp_config(&hp, pdev, odev, accum, extra_zero, devopt),
                                      stage, rbucket, &dims, world, s.device_bytes_capacity, STEPS);
        double ratio = (double)est / (double)s.device_bytes_peak;
        printf("rank %d: device peak %llu bytes, estimated %llu (%.3f)\n", rank,
               (unsigned long long)s.device_bytes_peak, (unsigned long long)est, ratio);
        ok = ok && (on_stream || (ratio >= 0.9 && ratio <= 1.1));
    }
    double err = ref_mlp_max_rel_error(&ref, rt, &m);
    ok = ok && err <= 1e-5;
    printf("rank %d of %d (%s/%s, accum %d): max relative error %.3g vs the 1-process "
           "reference: %s\n",
           rank, world, pdev, odev, accum, err, ok ? "ok" : "FAIL");
    ref_mlp_free(&ref);
    zt_runtime_destroy(rt);
    return ok ? 0 : 1;
}

/* SPDX-License-Identifier: MIT */
/* `ztier bench adam`: the fused CPU Adam step against its limit, interleaved (probe, triad,
 * adam, ...), medians and the median of the pairwise ratios. Bytes counted per parameter:
 * read master, m, v (12) + gradient (4 fp32 / 2 bf16) + write master, m, v (12) + bf16
 * parameter copy (2) = 30 / 28; with --param-copy none (the fp32 parameters are the master,
 * updated in place, as torch's and DeepSpeed's CPU Adam do) 2 bytes less. The limit is a
 * probe with exactly that traffic over the same buffers and threads (bench_probe.c), counted
 * with the same bytes. The step is also timed back to back after a warm-up, as
 * bench/peer_adam.py times the peers. A STREAM triad over a
 * working set of the same size is printed beside it, counted as the hardware moves it: 32
 * bytes per element (two reads, one write, and the write-allocate read of the destination
 * that STREAM's 24 leaves out). A ratio above 1.05 is flagged: the limit would be wrong.
 * With --nvme DIR it also times the runtime's NVMe-pipelined step (m, v on NVMe; the fp32
 * parameters in host memory are the master) against its floor max(read bytes / read
 * bandwidth, write bytes / write bandwidth, in-memory step), with the bytes the step moved
 * and the folder's bandwidth measured in the same run, alternating with the step over 3
 * rounds (medians, and the median of the rounds' ratios; below 0.95 is flagged: the floor
 * would be wrong). */
#include "optimizer/adam.h"
#include "core/convert.h"
#include "tools/bench_adam.h"
#include "tools/bench_common.h"
#include "tools/bench_disk.h"
#include "tools/bench_probe.h"
#include "tiers/host_tier.h"
#include "ztier.h"
#include "tools/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 32

typedef struct fill_ctx {
    adam_bench *b;
} fill_ctx;

/* Initial values, written by the pool's threads in the same chunks the step uses. */
static void fill_chunk(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    adam_bench *b = ((fill_ctx *)arg)->b;
    for (int64_t i = begin; i < end; i++) {
        b->master[i] = 0.01f * (float)(i % 100);
        b->m[i] = 0.0f;
        b->v[i] = 0.0f;
        b->out[i] = 0;
        if (b->grad_dtype == ZT_F32)
            b->grad[i] = 0.001f * (float)(i % 7);
        else
            ((uint16_t *)b->grad)[i] = zt_f32_to_bf16(0.001f * (float)(i % 7));
    }
}

int bench_adam_alloc(adam_bench *b, zt_threadpool *pool)
{
    uint64_t n = (uint64_t)b->n;
    zt_error err = {0};
    if (zt_host_tier_alloc(&b->host, n * 4, "master", (void **)&b->master, &err) != ZT_OK ||
        zt_host_tier_alloc(&b->host, n * 4, "m", (void **)&b->m, &err) != ZT_OK ||
        zt_host_tier_alloc(&b->host, n * 4, "v", (void **)&b->v, &err) != ZT_OK ||
        zt_host_tier_alloc(&b->host, n * 4, "grad", (void **)&b->grad, &err) != ZT_OK ||
        zt_host_tier_alloc(&b->host, n * 2, "copy", (void **)&b->out, &err) != ZT_OK)
        return -1;
    fill_ctx ctx = {b};
    zt_threadpool_run(pool, b->n, 64 * 1024, fill_chunk, &ctx);
    return 0;
}

void bench_adam_free(adam_bench *b)
{
    uint64_t n = (uint64_t)b->n;
    zt_host_tier_free(&b->host, b->master, n * 4), zt_host_tier_free(&b->host, b->m, n * 4);
    zt_host_tier_free(&b->host, b->v, n * 4), zt_host_tier_free(&b->host, b->grad, n * 4);
    zt_host_tier_free(&b->host, b->out, n * 2);
    b->master = b->m = b->v = b->grad = NULL, b->out = NULL;
}

double bench_adam_pass(adam_bench *b, zt_threadpool *pool, zt_adam_variant var, int64_t step)
{
    zt_adam_hparams h = {1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, step, 1.0f};
    zt_adam_tensors t = {b->master, b->m, b->v, b->grad, b->grad_dtype, b->copy ? b->out : NULL,
                         ZT_BF16,   b->n};
    double t0 = bench_now();
    zt_adam_step_parallel(pool, var, &h, &t);
    return bench_now() - t0;
}

/* A committed runtime from cfg with one layer of one parameter of n elements. */
static zt_status one_layer(const char *cfg, int64_t n, zt_runtime **rt, int *layer)
{
    int p;
    int64_t shape[1] = {n};
    zt_status st = zt_runtime_create(NULL, cfg, rt);
    if (st == ZT_OK)
        st = zt_layer_add(*rt, "adam", layer);
    if (st == ZT_OK)
        st = zt_param_add(*rt, *layer, "adam.w", shape, 1, NULL, &p);
    if (st == ZT_OK)
        st = zt_runtime_commit(*rt);
    return st;
}

/* Median time of zt_step with one layer of n parameters whose optimizer state is on NVMe
 * (fp32 parameters in host memory: they are the master, and m and v move); *moved: the
 * bytes it read and wrote per step. */
static double nvme_step(const char *dir, int64_t n, int threads, int reps, double moved[2])
{
    char cfg[1600];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
             " \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
             " \"sub_group_size\": 4e6}, \"ztier\": {\"hbm_capacity\": %lld,"
             " \"optimizer_threads\": %d}}",
             dir, (long long)n * 8 + (1 << 20), threads); /* a backward pass fits (commit) */
    zt_runtime *rt = NULL;
    int layer;
    double t[MAX_REPS + 1];
    zt_status st = one_layer(cfg, n, &rt, &layer);
    zt_stats s0 = ZT_STATS_INIT, s1 = ZT_STATS_INIT;
    for (int r = 0; st == ZT_OK && r <= reps; r++) {
        if (r == 1)
            st = zt_stats_get(rt, &s0);
        double t0 = bench_now();
        if (st == ZT_OK)
            st = zt_step(rt, NULL, NULL);
        t[r] = bench_now() - t0;
    }
    if (st == ZT_OK)
        st = zt_stats_get(rt, &s1);
    if (st != ZT_OK)
        fprintf(stderr, "ztier bench adam: %s\n", zt_last_error(rt));
    moved[0] = (double)(s1.nvme_read_bytes - s0.nvme_read_bytes) / reps;
    moved[1] = (double)(s1.nvme_write_bytes - s0.nvme_write_bytes) / reps;
    zt_runtime_destroy(rt);
    return st == ZT_OK ? bench_median(t + 1, reps) : -1; /* t[0] is the warm-up */
}

/* The NVMe step and the folder's bandwidth, alternating (bandwidth first in odd rounds: this
 * kind of disk drifts within minutes): the medians of the step, of its floor max(in-memory
 * mem_s, read bytes / read bandwidth, write bytes / write bandwidth) and of the bandwidths,
 * and the median of the rounds' step / floor. 0, or -1 when a run failed. */
enum { NVME_ROUNDS = 3 };
static int nvme_rounds(const char *dir, int64_t n, int threads, int reps, double mem_s,
                       double moved[2], double *step_s, double *floor_s, double *rbw, double *wbw,
                       double *ratio)
{
    double step[NVME_ROUNDS], floor[NVME_ROUNDS], r[NVME_ROUNDS], rb[NVME_ROUNDS], wb[NVME_ROUNDS];
    for (int k = 0; k < NVME_ROUNDS; k++) {
        int disk_first = k % 2;
        if (disk_first && bench_disk_bandwidth(dir, 1u << 30, &rb[k], &wb[k]) != 0)
            return -1;
        if ((step[k] = nvme_step(dir, n, threads, reps, moved)) < 0)
            return -1;
        if (!disk_first && bench_disk_bandwidth(dir, 1u << 30, &rb[k], &wb[k]) != 0)
            return -1;
        double io_r = moved[0] / rb[k], io_w = moved[1] / wb[k];
        floor[k] = mem_s > io_r ? mem_s : io_r;
        floor[k] = floor[k] > io_w ? floor[k] : io_w;
        r[k] = step[k] / floor[k];
    }
    *step_s = bench_median(step, NVME_ROUNDS), *floor_s = bench_median(floor, NVME_ROUNDS);
    *rbw = bench_median(rb, NVME_ROUNDS), *wbw = bench_median(wb, NVME_ROUNDS);
    *ratio = bench_median(r, NVME_ROUNDS);
    return 0;
}

/* The whole clipped step through the runtime: one layer of n fp32 parameters whose home is
 * (host backend) device memory ("none") or host memory ("cpu"), optimizer state in host
 * memory, gradient_clipping 1.0. Median times of the backward release (the gradients' copy
 * to the host and their accumulation, which also takes the norm's sums) and of zt_step
 * (norm, clip, Adam writing the new parameters: into a host home directly, or through a
 * staging buffer and a copy to device memory). */
static int clipped_step(int64_t n, int threads, int reps, const char *param_dev, double *release_s,
                        double *step_s)
{
    char cfg[1600];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\"},"
             " \"offload_optimizer\": {\"device\": \"cpu\"}}, \"gradient_clipping\": 1.0,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4,"
             " \"weight_decay\": 0.01}},"
             " \"ztier\": {\"hbm_capacity\": %lld, \"optimizer_threads\": %d}}",
             param_dev, (long long)n * 12 + (1 << 20), threads);
    zt_runtime *rt = NULL;
    int layer;
    double tr[MAX_REPS + 1], ts[MAX_REPS + 1];
    zt_status st = one_layer(cfg, n, &rt, &layer);
    for (int r = 0; st == ZT_OK && r <= reps; r++) {
        zt_layer_view v;
        st = zt_fetch(rt, layer, ZT_BACKWARD, &v);
        float *g = st == ZT_OK ? v.params[0].grad : NULL;
        for (int64_t i = 0; g && i < n; i++) /* the caller's backward pass */
            g[i] = 1e-3f * (float)(i % 7);
        double t0 = bench_now();
        if (st == ZT_OK)
            st = zt_release(rt, layer, ZT_BACKWARD);
        double t1 = bench_now();
        if (st == ZT_OK)
            st = zt_step(rt, NULL, NULL);
        tr[r] = t1 - t0, ts[r] = bench_now() - t1;
    }
    if (st != ZT_OK)
        fprintf(stderr, "ztier bench adam: %s\n", zt_last_error(rt));
    zt_runtime_destroy(rt);
    *release_s = bench_median(tr + 1, reps); /* [0] is the warm-up */
    *step_s = bench_median(ts + 1, reps);
    return st == ZT_OK ? 0 : -1;
}

static int parse_args(int argc, char **argv, int64_t *params, int *threads, zt_dtype *gdt,
                      zt_adam_variant *var, int *reps, int *copy)
{
    static const char *const known[] = {"params", "threads", "grad-dtype", "variant",
                                        "reps",   "nvme",    "param-copy", NULL};
    static const char *const flags[] = {"json", "clipped-step", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return -1;
    const char *v;
    if ((v = bench_arg(argc, argv, "params")) && (*params = (int64_t)atof(v)) < 1024) {
        fprintf(stderr, "ztier bench adam: --params must be >= 1024 (e.g. 1e8)\n");
        return -1;
    }
    if ((v = bench_arg(argc, argv, "threads")) && (*threads = atoi(v)) < 1) {
        fprintf(stderr, "ztier bench adam: --threads must be >= 1\n");
        return -1;
    }
    if ((v = bench_arg(argc, argv, "grad-dtype"))) {
        if (strcmp(v, "fp32") && strcmp(v, "bf16")) {
            fprintf(stderr, "ztier bench adam: --grad-dtype is fp32 or bf16\n");
            return -1;
        }
        *gdt = strcmp(v, "fp32") ? ZT_BF16 : ZT_F32;
    }
    if (zt_adam_variant_parse(bench_arg(argc, argv, "variant"), var) != 0) {
        fprintf(stderr, "ztier bench adam: --variant is auto, scalar, avx2 or avx512 (as the CPU "
                        "supports)\n");
        return -1;
    }
    if ((v = bench_arg(argc, argv, "param-copy"))) {
        if (strcmp(v, "bf16") && strcmp(v, "none")) {
            fprintf(stderr, "ztier bench adam: --param-copy is bf16 (a bf16 copy of the new "
                            "parameters, the default) or none (fp32 parameters updated in "
                            "place)\n");
            return -1;
        }
        *copy = strcmp(v, "none") != 0;
    }
    if ((v = bench_arg(argc, argv, "reps")))
        *reps = atoi(v) < 3 ? 3 : atoi(v) > MAX_REPS ? MAX_REPS : atoi(v);
    return 0;
}

int cmd_bench_adam(int argc, char **argv)
{
    int64_t params = 100000000;
    int threads = 2, reps = 5, copy = 1;
    zt_dtype gdt = ZT_F32;
    zt_adam_variant var;
    if (parse_args(argc, argv, &params, &threads, &gdt, &var, &reps, &copy) != 0)
        return 2;
    double bytes_per_param = 12 + (gdt == ZT_F32 ? 4 : 2) + 12 + (copy ? 2 : 0);
    double working_set = (double)params * (12 + (gdt == ZT_F32 ? 4 : 2) + 2); /* bytes held */
    zt_threadpool *pool = NULL;
    zt_error err = {0};
    adam_bench b = {.n = params, .grad_dtype = gdt, .copy = copy};
    bench_triad *triad = NULL;
    if (zt_threadpool_create(threads, -1, &pool, &err) != ZT_OK ||
        bench_adam_alloc(&b, pool) != 0 ||
        !(triad = bench_triad_create((size_t)(working_set / 24.0), threads))) {
        fprintf(stderr, "ztier bench adam: cannot allocate %.2f GB for %lld parameters\n",
                working_set * 2 / 1e9, (long long)params);
        bench_adam_free(&b);
        zt_threadpool_destroy(pool);
        return 1;
    }
    bench_adam_pass(&b, pool, var, 1); /* warm-up */
    double tri[MAX_REPS], adam[MAX_REPS], ratio[MAX_REPS], probe[MAX_REPS], rprobe[MAX_REPS];
    double norm1[MAX_REPS], normp[MAX_REPS]; /* the gradient-norm pass: one thread, the pool */
    double gbytes = (double)params * (gdt == ZT_F32 ? 4 : 2);
    for (int r = 0; r < reps; r++) {
        int64_t bad;
        double t1 = bench_now();
        zt_grad_sumsq(var, b.grad, gdt, b.n, 1.0f, &bad);
        norm1[r] = gbytes / (bench_now() - t1) / 1e9;
        t1 = bench_now();
        zt_grad_sumsq_parallel(pool, var, b.grad, gdt, b.n, 1.0f, &bad);
        normp[r] = gbytes / (bench_now() - t1) / 1e9;
        probe[r] = 0; /* a limit: the better of two passes */
        for (int k = 0; k < 2; k++) {
            double t0 = bench_now();
            bench_adam_probe(pool, var, b.master, b.m, b.v, b.grad, gdt == ZT_BF16,
                             copy ? b.out : NULL, b.n);
            double gbps = (double)params * bytes_per_param / (bench_now() - t0) / 1e9;
            probe[r] = gbps > probe[r] ? gbps : probe[r];
        }
        tri[r] = bench_triad_run(triad) * 32.0 / 24.0; /* the bytes the hardware moves */
        double s = bench_adam_pass(&b, pool, var, r + 2);
        adam[r] = (double)params * bytes_per_param / s / 1e9;
        ratio[r] = adam[r] / tri[r];
        rprobe[r] = adam[r] / probe[r];
    }
    double b2b[MAX_REPS]; /* the peers' way: steps back to back, nothing between them */
    for (int r = 0; r < reps; r++)
        b2b[r] = (double)params / bench_adam_pass(&b, pool, var, reps + 2 + r);
    double b2b_pps = bench_median(b2b, reps);
    double adam_gbps = bench_median(adam, reps), tri_gbps = bench_median(tri, reps);
    double probe_gbps = bench_median(probe, reps), rp = bench_median(rprobe, reps);
    double pps = adam_gbps * 1e9 / bytes_per_param, rmed = bench_median(ratio, reps);
    printf("ztier bench adam: %lld parameters, %d threads, %s gradients, %s, variant %s, %d "
           "interleaved pairs\n",
           (long long)params, threads, gdt == ZT_F32 ? "fp32" : "bf16",
           copy ? "bf16 parameter copy" : "no parameter copy (fp32 parameters are the master)",
           zt_adam_variant_name(var), reps);
    printf("  bytes counted per parameter: %.0f = read master,m,v (12) + %s grad (%d) + write "
           "master,m,v (12)%s\n",
           bytes_per_param, gdt == ZT_F32 ? "fp32" : "bf16", gdt == ZT_F32 ? 4 : 2,
           copy ? " + bf16 copy (2)" : "");
    printf("  limit: a probe with the step's loads and stores over the same buffers (same bytes "
           "counted); triad a[i] = b[i] + s*c[i] over %.2f GB, 32 bytes per element counted "
           "(with the write-allocate read of a[])\n",
           working_set / 1e9);
    printf("  %-22s %12s %12s\n", "", "GB/s", "params/s");
    printf("  %-22s %12.2f %12.3g\n", "traffic probe (limit)", probe_gbps,
           probe_gbps * 1e9 / bytes_per_param);
    printf("  %-22s %12.2f %12s\n", "STREAM triad", tri_gbps, "");
    printf("  %-22s %12.2f %12.3g\n", "fused Adam step", adam_gbps, pps);
    printf("  fused Adam step, %d steps back to back (as bench/peer_adam.py times the peers): "
           "%.3g params/s\n",
           reps, b2b_pps);
    printf("  gradient-norm pass (reads the gradient): %.2f GB/s on one thread, %.2f GB/s on "
           "the pool of %d\n",
           bench_median(norm1, reps), bench_median(normp, reps), threads);
    printf("  ratio_vs_limit (median of pairs): %.3f%s\n", rp,
           rp > 1.05 ? "  (above 1.05: the limit is wrong)" : "");
    printf("  ratio_vs_triad (median of pairs): %.3f%s\n", rmed,
           rmed > 1.05 ? "  (above 1.05: the triad is not this kernel's limit)" : "");
    const char *nvme = bench_arg(argc, argv, "nvme");
    double step_s = -1, floor_s = -1, rbw = 0, wbw = 0, moved[2] = {0, 0};
    double crel_s[2] = {-1, -1}, cstep_s[2] = {-1, -1}; /* parameters in device, host memory */
    if (bench_flag(argc, argv, "clipped-step")) {
        bench_triad_destroy(triad), triad = NULL; /* give the memory back first */
        bench_adam_free(&b);
        printf("  whole clipped step through the runtime (fp32 parameters, clipping 1.0): the "
               "backward release (gradient copy, accumulation and the norm's sums), zt_step "
               "(clip, Adam, the new parameters to their home)\n");
        for (int k = 0; k < 2; k++) {
            if (clipped_step(params, threads, reps, k ? "cpu" : "none", &crel_s[k], &cstep_s[k]) !=
                0) {
                zt_threadpool_destroy(pool);
                return 1;
            }
            printf("    parameters in %-13s release %.4f s, zt_step %.4f s, together %.4f s\n",
                   k ? "host memory:" : "device memory:", crel_s[k], cstep_s[k],
                   crel_s[k] + cstep_s[k]);
        }
    }
    double floor_ratio = -1;
    if (nvme) {
        bench_triad_destroy(triad), triad = NULL; /* give the memory back first */
        bench_adam_free(&b);
        double mem_s = (double)params * bytes_per_param / (adam_gbps * 1e9);
        if (nvme_rounds(nvme, params, threads, reps, mem_s, moved, &step_s, &floor_s, &rbw, &wbw,
                        &floor_ratio) != 0) {
            zt_threadpool_destroy(pool);
            return 1;
        }
        printf("  NVMe-pipelined step (m, v on NVMe in '%s', the fp32 parameters in host memory "
               "are the master), %d rounds alternating with the folder's bandwidth: %.3f s; "
               "floor %.3f s = max(in-memory %.3f s, read %.2f GB at %.2f GB/s, write %.2f GB "
               "at %.2f GB/s) (medians); ratio_vs_floor %.3f (median of the rounds)%s\n",
               nvme, NVME_ROUNDS, step_s, floor_s, mem_s, moved[0] / 1e9, rbw / 1e9, moved[1] / 1e9,
               wbw / 1e9, floor_ratio,
               floor_ratio < 0.95 ? "  (below 0.95: this floor is not a floor here; the "
                                    "disk's bandwidth moved between the measurements)"
                                  : "");
    }
    if (bench_flag(argc, argv, "json")) {
        printf("{\"variant\":\"%s\",\"params\":%lld,\"threads\":%d,\"grad_dtype\":\"%s\","
               "\"param_copy\":\"%s\",\"params_per_s\":%.4g,\"params_per_s_back_to_back\":%.4g,"
               "\"effective_gbps\":%.3f,\"triad_gbps\":%.3f,"
               "\"ratio_vs_triad\":%.4f,\"probe_gbps\":%.3f,\"ratio_vs_limit\":%.4f,"
               "\"norm_1thread_gbps\":%.3f,\"norm_pool_gbps\":%.3f,"
               "\"bytes_per_param\":%.0f,\"triad_bytes_per_elem\":32,"
               "\"working_set_bytes\":%.0f,\"pairs\":%d",
               zt_adam_variant_name(var), (long long)params, threads,
               gdt == ZT_F32 ? "fp32" : "bf16", copy ? "bf16" : "none", pps, b2b_pps, adam_gbps,
               tri_gbps, rmed, probe_gbps, rp, bench_median(norm1, reps), bench_median(normp, reps),
               bytes_per_param, working_set, reps);
        if (nvme)
            printf(",\"step_s\":%.6g,\"floor_s\":%.6g,\"ratio_vs_floor\":%.4f", step_s, floor_s,
                   floor_ratio);
        if (crel_s[0] >= 0)
            printf(",\"clipped_release_s\":%.6g,\"clipped_step_s\":%.6g,"
                   "\"clipped_host_release_s\":%.6g,\"clipped_host_step_s\":%.6g",
                   crel_s[0], cstep_s[0], crel_s[1], cstep_s[1]);
        printf("}\n");
    }
    bench_triad_destroy(triad);
    bench_adam_free(&b); /* nothing where already given back */
    zt_threadpool_destroy(pool);
    return 0;
}

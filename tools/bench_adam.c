/* `ztier bench adam`: the fused CPU Adam step against a STREAM triad over a working set of
 * the same size, same thread count, interleaved (triad, adam, triad, adam, ...), medians and
 * the median of the pairwise ratios. Bytes counted per parameter: read master, m, v (12) +
 * gradient (4 fp32 / 2 bf16) + write master, m, v (12) + bf16 parameter copy (2) = 30 / 28;
 * the triad counts 24 bytes per element (two reads, one write), as STREAM does. */
#include "optimizer/adam.h"
#include "optimizer/convert.h"
#include "tools/bench_common.h"
#include "tools/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 32

typedef struct adam_bench {
    int64_t n;
    float *master, *m, *v, *grad;
    uint16_t *out;
    zt_dtype grad_dtype;
} adam_bench;

typedef struct fill_ctx {
    adam_bench *b;
} fill_ctx;

/* First touch by the pool's threads, in the same chunks the step uses. */
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

static int bench_alloc(adam_bench *b, zt_threadpool *pool)
{
    size_t n = (size_t)b->n;
    if (posix_memalign((void **)&b->master, 64, n * 4) || posix_memalign((void **)&b->m, 64, n * 4) ||
        posix_memalign((void **)&b->v, 64, n * 4) || posix_memalign((void **)&b->grad, 64, n * 4) ||
        posix_memalign((void **)&b->out, 64, n * 2))
        return -1;
    fill_ctx ctx = {b};
    zt_threadpool_run(pool, b->n, 64 * 1024, fill_chunk, &ctx);
    return 0;
}

static void bench_free(adam_bench *b)
{
    free(b->master), free(b->m), free(b->v), free(b->grad), free(b->out);
}

static double adam_pass(adam_bench *b, zt_threadpool *pool, zt_adam_variant var, int64_t step)
{
    zt_adam_hparams h = {1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, step, 1.0f};
    zt_adam_tensors t = {b->master, b->m, b->v, b->grad, b->grad_dtype, b->out, ZT_BF16, b->n};
    double t0 = bench_now();
    zt_adam_step_parallel(pool, var, &h, &t);
    return bench_now() - t0;
}

static int parse_args(int argc, char **argv, int64_t *params, int *threads, zt_dtype *gdt,
                      zt_adam_variant *var, int *reps)
{
    static const char *const known[] = {"params", "threads", "grad-dtype", "variant", "reps",
                                        "nvme", NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return -1;
    const char *v;
    if (bench_arg(argc, argv, "nvme")) {
        fprintf(stderr, "ztier bench adam: --nvme (the NVMe-pipelined step) is not built yet\n");
        return -1;
    }
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
    if ((v = bench_arg(argc, argv, "reps")))
        *reps = atoi(v) < 3 ? 3 : atoi(v) > MAX_REPS ? MAX_REPS : atoi(v);
    return 0;
}

int cmd_bench_adam(int argc, char **argv)
{
    int64_t params = 100000000;
    int threads = 2, reps = 5;
    zt_dtype gdt = ZT_F32;
    zt_adam_variant var;
    if (parse_args(argc, argv, &params, &threads, &gdt, &var, &reps) != 0)
        return 2;
    double bytes_per_param = 12 + (gdt == ZT_F32 ? 4 : 2) + 12 + 2;
    double working_set = (double)params * (12 + (gdt == ZT_F32 ? 4 : 2) + 2); /* bytes held */
    zt_threadpool *pool = NULL;
    zt_error err = {0};
    adam_bench b = {params, NULL, NULL, NULL, NULL, NULL, gdt};
    bench_triad *triad = NULL;
    if (zt_threadpool_create(threads, -1, &pool, &err) != ZT_OK || bench_alloc(&b, pool) != 0 ||
        !(triad = bench_triad_create((size_t)(working_set / 24.0), threads))) {
        fprintf(stderr, "ztier bench adam: cannot allocate %.2f GB for %lld parameters\n",
                working_set * 2 / 1e9, (long long)params);
        bench_free(&b);
        zt_threadpool_destroy(pool);
        return 1;
    }
    adam_pass(&b, pool, var, 1); /* warm-up */
    double tri[MAX_REPS], adam[MAX_REPS], ratio[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        tri[r] = bench_triad_run(triad);
        double s = adam_pass(&b, pool, var, r + 2);
        adam[r] = (double)params * bytes_per_param / s / 1e9;
        ratio[r] = adam[r] / tri[r];
    }
    double adam_gbps = bench_median(adam, reps), tri_gbps = bench_median(tri, reps);
    double pps = adam_gbps * 1e9 / bytes_per_param, rmed = bench_median(ratio, reps);
    printf("ztier bench adam: %lld parameters, %d threads, %s gradients, bf16 parameter copy, "
           "variant %s, %d interleaved pairs\n",
           (long long)params, threads, gdt == ZT_F32 ? "fp32" : "bf16", zt_adam_variant_name(var),
           reps);
    printf("  bytes counted per parameter: %.0f (read master,m,v,grad; write master,m,v,bf16 "
           "copy); triad: 24 per element over %.2f GB\n", bytes_per_param, working_set / 1e9);
    printf("  %-22s %12s %12s\n", "", "GB/s", "params/s");
    printf("  %-22s %12.2f %12s\n", "STREAM triad", tri_gbps, "");
    printf("  %-22s %12.2f %12.3g\n", "fused Adam step", adam_gbps, pps);
    printf("  ratio_vs_triad (median of pairs): %.3f\n", rmed);
    if (bench_flag(argc, argv, "json"))
        printf("{\"variant\":\"%s\",\"params\":%lld,\"threads\":%d,\"grad_dtype\":\"%s\","
               "\"params_per_s\":%.4g,\"effective_gbps\":%.3f,\"triad_gbps\":%.3f,"
               "\"ratio_vs_triad\":%.4f}\n",
               zt_adam_variant_name(var), (long long)params, threads,
               gdt == ZT_F32 ? "fp32" : "bf16", pps, adam_gbps, tri_gbps, rmed);
    bench_triad_destroy(triad);
    bench_free(&b);
    zt_threadpool_destroy(pool);
    return 0;
}

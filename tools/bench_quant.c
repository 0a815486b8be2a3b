/* SPDX-License-Identifier: MIT */
/* `ztier bench quant`: int8 block quantize and dequantize throughput of each variant against
 * memcpy over the same bytes, both on the same --threads threads (the runtime quantizes on
 * its optimizer pool), interleaved; the top-level ratio is the best variant's. int4 (qgZ)
 * quantize and dequantize-add with the best variant on the same threads, against memcpy in
 * the same rounds. Then the bytes
 * a GPT-2 config sends per step and rank under ZeRO-3 (fp16 weights and gradients) and under
 * ZeRO++ (qwZ int8 weights, hpZ node-local backward gather, qgZ int4 gradients), total and
 * across nodes. Throughput counts bytes read plus written (memcpy: 2 x size; quantize: 4 + 1
 * B/element + scales). */
#include "core/threadpool.h"
#include "core/quant.h"
#include "tools/bench_common.h"
#include "tools/bench_quant.h"
#include "tools/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPS 5

static zt_threadpool *pool;

double bench_quant8_s(zt_threadpool *pool, zt_quant_variant v, const float *x, int64_t n, int8_t *q,
                      float *s)
{
    double t0 = bench_now();
    zt_quant8_parallel(pool, v, x, ZT_F32, n, 256, q, s);
    return bench_now() - t0;
}

double bench_dequant8_s(zt_threadpool *pool, zt_quant_variant v, const int8_t *q, const float *s,
                        int64_t n, float *y)
{
    double t0 = bench_now();
    zt_dequant8_parallel(pool, v, q, s, n, 256, y, ZT_F32);
    return bench_now() - t0;
}

/* memcpy on the same threads, in the same-sized chunks */
typedef struct copy_ctx {
    char *dst;
    const char *src;
} copy_ctx;

static void copy_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    copy_ctx *c = arg;
    memcpy(c->dst + lo, c->src + lo, (size_t)(hi - lo));
}

static double time_memcpy(char *dst, const char *src, uint64_t bytes)
{
    copy_ctx c = {dst, src};
    double t0 = bench_now();
    zt_threadpool_run(pool, (int64_t)bytes, 256 * 1024, copy_chunk, &c);
    return bench_now() - t0;
}

/* int4 (qgZ's gradients) with the best variant over the pool: quantize, then add the
 * dequantized values into an fp32 sum (what qgZ does with them). */
static double time_quant4(const float *x, int64_t n, uint8_t *q, float *s)
{
    double t0 = bench_now();
    zt_quant4_parallel(pool, x, n, 256, q, s);
    return bench_now() - t0;
}

static double time_dequant4_add(const uint8_t *q, const float *s, int64_t n, float *acc)
{
    double t0 = bench_now();
    zt_dequant4_add_parallel(pool, q, s, n, 256, acc);
    return bench_now() - t0;
}

static void bytes_table(double params)
{
    /* per rank and step, (w-1)/w ~ 1: ZeRO-3 gathers fp16 weights twice, reduces fp16 grads */
    double z3 = params * (2 + 2 + 2), zpp = params * (1 + 1.0 / 64 + 1 + 0.5 + 1.0 / 64);
    double z3_x = z3, zpp_x = params * (1 + 1.0 / 64 + 0.5 + 1.0 / 64);
    printf("  bytes per step and rank for %.1fM parameters (block 256, fp32 scales):\n",
           params / 1e6);
    printf("    %-8s %10s %14s\n", "", "total GB", "across nodes");
    printf("    %-8s %10.3f %14.3f\n", "ZeRO-3", z3 / 1e9, z3_x / 1e9);
    printf("    %-8s %10.3f %14.3f  (%.2fx of ZeRO-3 across nodes)\n", "ZeRO++", zpp / 1e9,
           zpp_x / 1e9, zpp_x / z3_x);
}

int cmd_bench_quant(int argc, char **argv)
{
    static const char *const known[] = {"size", "threads", NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return 2;
    uint64_t bytes = 256u << 20;
    const char *v = bench_arg(argc, argv, "size");
    if (v && (bench_parse_size(v, &bytes) || bytes < 4096))
        return fprintf(stderr, "ztier bench quant: --size is a size >= 4K\n"), 2;
    int threads = bench_arg(argc, argv, "threads") ? atoi(bench_arg(argc, argv, "threads")) : 0;
    if (threads <= 0)
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    zt_error err = {0};
    if (zt_threadpool_create(threads, -1, &pool, &err) != ZT_OK)
        return fprintf(stderr, "ztier bench quant: %s\n", err.msg), 1;
    int64_t n = (int64_t)(bytes / 4);
    float *x = malloc(bytes), *y = malloc(bytes),
          *s = malloc(sizeof(float) * (size_t)(n / 256 + 1));
    int8_t *q = malloc((size_t)n);
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!x || !y || !s || !q || !a || !b)
        return fprintf(stderr, "ztier bench quant: out of memory\n"), 1;
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(i % 1000) * 0.001f - 0.5f;
    memset(a, 1, bytes), memset(b, 2, bytes), memset(y, 0, bytes), memset(q, 0, (size_t)n);
    double qbytes = (double)n * 5 + (double)(n / 256) * 4;
    printf("ztier bench quant: %s of fp32, int8 blocks of 256, %d threads (memcpy too), %d "
           "interleaved rounds\n",
           bench_fmt_bytes(bytes, (char[32]){0}, 32), threads, REPS);
    printf("  %-8s %12s %12s %12s %8s\n", "variant", "quant GB/s", "dequant GB/s", "memcpy GB/s",
           "ratio");
    char json[1536] = "";
    double best = 0;
    for (zt_quant_variant var = ZT_QUANT_SCALAR; var <= ZT_QUANT_AVX512; var++) {
        if (!zt_quant_variant_supported(var))
            continue;
        double mq[REPS], md[REPS], mm[REPS], r[REPS];
        bench_quant8_s(pool, var, x, n, q, s),
            bench_dequant8_s(pool, var, q, s, n, y); /* warm-up */
        for (int i = 0; i < REPS; i++) {
            mm[i] = 2.0 * (double)bytes / time_memcpy(b, a, bytes) / 1e9;
            mq[i] = qbytes / bench_quant8_s(pool, var, x, n, q, s) / 1e9;
            md[i] = qbytes / bench_dequant8_s(pool, var, q, s, n, y) / 1e9;
            r[i] = (mq[i] < md[i] ? mq[i] : md[i]) / mm[i];
        }
        double gq = bench_median(mq, REPS), gd = bench_median(md, REPS),
               gm = bench_median(mm, REPS);
        double gr = bench_median(r, REPS);
        printf("  %-8s %12.2f %12.2f %12.2f %8.3f\n", zt_quant_variant_name(var), gq, gd, gm, gr);
        best = gr > best ? gr : best;
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{\"variant\":\"%s\",\"quant_gbps\":%.3f,\"dequant_gbps\":%.3f,"
                 "\"memcpy_gbps\":%.3f,\"ratio_vs_memcpy\":%.4f}",
                 json[0] ? "," : "", zt_quant_variant_name(var), gq, gd, gm, gr);
    }
    printf("  ratio_vs_memcpy (the best variant's, the slower of quantize and dequantize): "
           "%.3f\n",
           best);
    /* int4: quantize reads 4 B and writes 0.5 B per element; dequantize-add reads 0.5 + 4 B
     * and writes 4 B (plus the scales) */
    double q4bytes = (double)n * 4.5 + (double)(n / 256) * 4;
    double d4bytes = (double)n * 8.5 + (double)(n / 256) * 4;
    double m4q[REPS], m4d[REPS], m4m[REPS], r4[REPS];
    uint8_t *q4 = (uint8_t *)q;
    time_quant4(x, n, q4, s), time_dequant4_add(q4, s, n, y); /* warm-up */
    for (int i = 0; i < REPS; i++) {
        m4m[i] = 2.0 * (double)bytes / time_memcpy(b, a, bytes) / 1e9;
        m4q[i] = q4bytes / time_quant4(x, n, q4, s) / 1e9;
        m4d[i] = d4bytes / time_dequant4_add(q4, s, n, y) / 1e9;
        r4[i] = (m4q[i] < m4d[i] ? m4q[i] : m4d[i]) / m4m[i];
    }
    double g4q = bench_median(m4q, REPS), g4d = bench_median(m4d, REPS);
    double g4m = bench_median(m4m, REPS), g4r = bench_median(r4, REPS);
    printf("  int4 (qgZ), %s: quantize %.2f GB/s, dequantize-add %.2f GB/s, memcpy %.2f GB/s, "
           "ratio %.3f\n",
           zt_quant_variant_name(zt_quant_variant_best()), g4q, g4d, g4m, g4r);
    bytes_table(124.5e6);
    if (bench_flag(argc, argv, "json"))
        printf("{\"bytes\":%llu,\"threads\":%d,\"ratio_vs_memcpy\":%.4f,\"variants\":[%s],"
               "\"int4\":{\"variant\":\"%s\",\"quant_gbps\":%.3f,\"dequant_add_gbps\":%.3f,"
               "\"memcpy_gbps\":%.3f,\"ratio_vs_memcpy\":%.4f}}\n",
               (unsigned long long)bytes, threads, best, json,
               zt_quant_variant_name(zt_quant_variant_best()), g4q, g4d, g4m, g4r);
    free(x), free(y), free(s), free(q), free(a), free(b);
    zt_threadpool_destroy(pool);
    return 0;
}

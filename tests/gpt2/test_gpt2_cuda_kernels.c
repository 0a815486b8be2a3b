/* SPDX-License-Identifier: MIT */
/* The GPT-2 CUDA kernels (gpt2_kernels.cu) against the CPU kernels, which run the same
 * per-row math (gpt2_rows.h) and are checked against finite differences in CI: every
 * forward and backward on random inputs, to float tolerance (the GPU's expf/tanhf differ
 * from glibc's by an ulp or two, and layernorm's weight gradients are summed through partial
 * sums); the encoder's backward bit for bit (each token's rows in row order, as the CPU adds
 * them), and layernorm's backward the same bits run after run; attention through the
 * CUDA ops' GEMM path (cuBLAS batched GEMMs around kernels, gpt2_attention.h, whose
 * decomposition CI checks on the CPU; the ops take it for head sizes the fused attention of
 * test_gpt2_flash does not), TF32 off. Exits 77 (skipped) where no GPU is visible, as on this
 * project's CI machines. */
#include "test_rand.h"
#include "gpt2_cuda.h"
#include "gpt2_kernels.h"
#include "gpt2_ops.h"

#include <cuda_runtime_api.h>
#ifdef ZT_CUDA_FAKE
#include "cudasim.h" /* what the stand-in saw: atomics, a sort's bits */
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rows longer than a warp (T, C, V > 32; V not a multiple of it) */
enum { B = 2, T = 40, C = 64, NH_GEMM = 8, V = 97, N = B * T };

static uint64_t rs = 88172645463325252ull;

static int failures;

/* The test's host and device arrays, all released at the end (release_all). */
static void *host_kept[128], *dev_kept[128];
static int n_host_kept, n_dev_kept;

static void *kept(void *p)
{
    if (!p || n_host_kept == 128)
        exit(1);
    return host_kept[n_host_kept++] = p;
}

static float *zeros(size_t n) { return kept(calloc(n, sizeof(float))); }

static void release_all(void)
{
    while (n_host_kept)
        free(host_kept[--n_host_kept]);
    while (n_dev_kept)
        cudaFree(dev_kept[--n_dev_kept]);
}

static float *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    if (n_dev_kept == 128 || cudaMalloc(&d, bytes) != cudaSuccess ||
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice))
        exit(1);
    return dev_kept[n_dev_kept++] = d;
}

/* The device array's n floats in a new host array, after the queued work; NULL with the
 * failure counted and named. */
static float *copy_back(const char *what, const float *dev, size_t n)
{
    float *got = malloc(n * sizeof(float));
    cudaDeviceSynchronize();
    if (!got || cudaMemcpy(got, dev, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("%s: copy failed: %s\n", what, cudaGetErrorString(cudaGetLastError()));
        failures++;
        free(got);
        return NULL;
    }
    return got;
}

/* Compares a device array with the CPU result: |got - want| <= tol (|want| + floor), floor
 * the values' scale (where a result cancels to near zero it keeps its terms' rounding). */
static void check_scaled(const char *what, const float *want, const float *dev, size_t n,
                         double tol, double floor)
{
    float *got = copy_back(what, dev, n);
    if (!got)
        return;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / (fabs((double)want[i]) + floor);
        worst = d > worst ? d : worst;
    }
    printf("%-28s max relative difference %.3g\n", what, worst);
    if (!(worst <= tol))
        failures++;
    free(got);
}

/* The device array holds exactly the bits of want. */
static void check_bits(const char *what, const float *want, const float *dev, size_t n)
{
    float *got = copy_back(what, dev, n);
    if (!got)
        return;
    size_t i = 0;
    while (i < n && !memcmp(&got[i], &want[i], sizeof(float)))
        i++;
    if (i == n)
        printf("%-28s bit for bit\n", what);
    else
        printf("%-28s DIFFERS first at %zu: %a, expected %a\n", what, i, (double)got[i],
               (double)want[i]);
    failures += i != n;
    free(got);
}

static float *host_copy(const float *dev, size_t n)
{
    float *h = copy_back("device array", dev, n);
    if (!h)
        exit(1);
    return h;
}

static void check(const char *what, const float *want, const float *dev, size_t n, double tol)
{
    check_scaled(what, want, dev, n, tol, 1e-3);
}

static float *randoms(size_t n) { return kept(test_rand_floats(&rs, n, -1.0f, 1.0f)); }

/* The launch's status: 0, or a failure counted and named. */
static void launched(const char *what, int rc)
{
    if (rc) {
        printf("%s: launch failed: %s\n", what, cudaGetErrorString((cudaError_t)rc));
        failures++;
    }
}

/* dw, db += the layernorm backward's weight gradients in the CUDA kernel's exact order, on
 * the CPU: warp k of the grid (blocks of 4 warps, at most 512 blocks: gpt2_kernels.cu's
 * kWarps and kLnBackwardBlocks) takes rows k, k + warps, ... into a partial of its own; each
 * block adds its 4 partials in warp order, then the blocks are added in block order. The
 * terms (norm * d and d, from the GPU's own mean and rstd) are the row function's, and
 * neither side contracts into FMAs (this file: -ffp-contract=off; the kernels: --fmad=false),
 * so the result is the GPU's bits. */
static void layernorm_weight_grads_in_gpu_order(float *dw, float *db, const float *d,
                                                const float *x, const float *mean,
                                                const float *rstd, int rows, int width)
{
    enum { WARPS_PER_BLOCK = 4, MAX_BLOCKS = 512 };
    int nb = (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
    nb = nb < MAX_BLOCKS ? nb : MAX_BLOCKS;
    int warps = nb * WARPS_PER_BLOCK;
    size_t per = 2 * (size_t)width;
    float *warp = calloc((size_t)warps * per, sizeof(float)), *block = calloc(per * nb, 4);
    for (int k = 0; k < warps; k++)
        for (int n = k; n < rows; n += warps)
            for (int c = 0; c < width; c++) {
                float norm = (x[(size_t)n * width + c] - mean[n]) * rstd[n];
                float dd = d[(size_t)n * width + c];
                warp[k * per + width + c] += dd; /* db, as the row function adds it */
                warp[k * per + c] += norm * dd;  /* dw */
            }
    for (int b = 0; b < nb; b++)
        for (size_t c = 0; c < per; c++) {
            float sum = 0.0f;
            for (int w = 0; w < WARPS_PER_BLOCK; w++)
                sum += warp[((size_t)b * WARPS_PER_BLOCK + w) * per + c];
            block[b * per + c] = sum;
        }
    for (size_t c = 0; c < per; c++) {
        float sum = 0.0f;
        for (int b = 0; b < nb; b++)
            sum += block[b * per + c];
        if (c < (size_t)width)
            dw[c] += sum;
        else
            db[c - width] += sum;
    }
    free(warp), free(block);
}

/* Layernorm forward and backward over rows x width random inputs. With more rows than the
 * backward kernel's grid has warps, each warp takes several rows (into its partial dw, db);
 * a width no multiple of a warp leaves lanes idle; a width whose warps' partials do not fit
 * in shared memory keeps them in the scratch. Values of order 1, some of which cancel to
 * near zero, and dw, db sums over every row: compared at scale 1. The backward run again
 * from the same inputs gives the same bits. */
static void check_layernorm(void *s, int rows, int width, double tol)
{
    size_t n = (size_t)rows * width;
    float *x = randoms(n), *w = randoms(width), *b = randoms(width), *d = randoms(n);
    float *out = zeros(n), *mean = zeros(rows), *rstd = zeros(rows);
    float *dx = zeros(n), *dw = zeros(width), *db = zeros(width);
    float *g_x = dev_copy(x, n * 4), *g_w = dev_copy(w, width * 4), *g_b = dev_copy(b, width * 4);
    float *g_d = dev_copy(d, n * 4), *g_out = dev_copy(out, n * 4);
    float *g_mean = dev_copy(mean, rows * 4), *g_rstd = dev_copy(rstd, rows * 4);
    float *g_dx = dev_copy(dx, n * 4), *g_dw = dev_copy(dw, width * 4),
          *g_db = dev_copy(db, width * 4);
    printf("layernorm, %d rows of %d:\n", rows, width);
    layernorm_forward(out, mean, rstd, x, w, b, rows, width);
    gpt2_cuda_layernorm_forward(g_out, g_mean, g_rstd, g_x, g_w, g_b, rows, width, s);
    check_scaled("  forward", out, g_out, n, tol, 1);
    check_scaled("  forward (mean)", mean, g_mean, rows, tol, 1);
    check_scaled("  forward (rstd)", rstd, g_rstd, rows, tol, 1);
    layernorm_backward(dx, dw, db, d, x, w, mean, rstd, rows, width);
    float *scratch = NULL;
    if (cudaMalloc((void **)&scratch, gpt2_cuda_layernorm_backward_scratch(rows, width) * 4))
        exit(1);
    float *g_dx2 = dev_copy(dx, n * 4), *g_dw2 = dev_copy(dw, width * 4);
    float *g_db2 = dev_copy(db, width * 4);
    launched("layernorm backward",
             gpt2_cuda_layernorm_backward(g_dx, g_dw, g_db, g_d, g_x, g_w, g_mean, g_rstd, rows,
                                          width, scratch, s));
    check_scaled("  backward (dinp)", dx, g_dx, n, tol, 1);
    check_scaled("  backward (dw)", dw, g_dw, width, tol, 1);
    check_scaled("  backward (db)", db, g_db, width, tol, 1);
    /* the weight gradients in the kernel's order on the CPU, from the GPU's mean and rstd:
     * the GPU's bits */
    float *h_mean = host_copy(g_mean, rows), *h_rstd = host_copy(g_rstd, rows);
    float *ow = zeros(width), *ob = zeros(width); /* from zeros on both sides */
    float *g_ow = dev_copy(ow, width * 4), *g_ob = dev_copy(ob, width * 4);
    layernorm_weight_grads_in_gpu_order(ow, ob, d, x, h_mean, h_rstd, rows, width);
    launched("layernorm backward",
             gpt2_cuda_layernorm_backward(g_dx2, g_ow, g_ob, g_d, g_x, g_w, g_mean, g_rstd, rows,
                                          width, scratch, s));
    check_bits("  backward (dw), GPU order", ow, g_ow, width);
    check_bits("  backward (db), GPU order", ob, g_ob, width);
    /* twice from one start: the same bits */
    cudaMemcpy(g_dx, dx, n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(g_dx2, dx, n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(g_dw, dw, width * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(g_dw2, dw, width * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(g_db, db, width * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(g_db2, db, width * 4, cudaMemcpyHostToDevice);
    launched("layernorm backward",
             gpt2_cuda_layernorm_backward(g_dx, g_dw, g_db, g_d, g_x, g_w, g_mean, g_rstd, rows,
                                          width, scratch, s));
    launched("layernorm backward",
             gpt2_cuda_layernorm_backward(g_dx2, g_dw2, g_db2, g_d, g_x, g_w, g_mean, g_rstd, rows,
                                          width, scratch, s));
    float *h_dx = host_copy(g_dx, n), *h_dw = host_copy(g_dw, width),
          *h_db = host_copy(g_db, width);
    check_bits("  backward twice (dinp)", h_dx, g_dx2, n);
    check_bits("  backward twice (dw)", h_dw, g_dw2, width);
    check_bits("  backward twice (db)", h_db, g_db2, width);
    free(h_dx), free(h_dw), free(h_db), free(h_mean), free(h_rstd);
    cudaFree(scratch);
}

/* The fused residual + layernorm forward over rows x width random inputs (widths and rows
 * not multiples of a warp or of a block's rows): res and out against a double reference
 * (res = a + b in float, exact in double; the layernorm of res in double) at scale 1, and
 * bit for bit against the unfused pair it replaces, residual then layernorm, on the GPU and
 * on the CPU. */
static void check_residual_layernorm(void *s, int rows, int width, double tol)
{
    size_t n = (size_t)rows * width, fb = n * sizeof(float), rb = (size_t)rows * sizeof(float);
    float *a = randoms(n), *b = randoms(n), *w = randoms(width), *bias = randoms(width);
    float *ref = zeros(n), *ref_res = zeros(n), *ref_mean = zeros(rows), *ref_rstd = zeros(rows);
    for (int r = 0; r < rows; r++) { /* the double reference */
        const float *ar = a + (size_t)r * width, *br = b + (size_t)r * width;
        double m = 0, v = 0;
        for (int c = 0; c < width; c++)
            m += (double)ar[c] + br[c];
        m /= width;
        for (int c = 0; c < width; c++)
            v += ((double)ar[c] + br[c] - m) * ((double)ar[c] + br[c] - m);
        double rs = 1.0 / sqrt(v / width + 1e-5);
        for (int c = 0; c < width; c++) {
            double x = (double)ar[c] + br[c];
            ref_res[(size_t)r * width + c] = (float)x;
            ref[(size_t)r * width + c] = (float)((x - m) * rs * w[c] + bias[c]);
        }
        ref_mean[r] = (float)m, ref_rstd[r] = (float)rs;
    }
    /* the CPU's fused and unfused */
    float *res = zeros(n), *out = zeros(n), *mean = zeros(rows), *rstd = zeros(rows);
    float *res2 = zeros(n), *out2 = zeros(n), *mean2 = zeros(rows), *rstd2 = zeros(rows);
    residual_layernorm_forward(res, out, mean, rstd, a, b, w, bias, rows, width);
    residual_forward(res2, a, b, (long long)n);
    layernorm_forward(out2, mean2, rstd2, res2, w, bias, rows, width);
    int cpu_same = !memcmp(res, res2, fb) && !memcmp(out, out2, fb) && !memcmp(mean, mean2, rb) &&
                   !memcmp(rstd, rstd2, rb);
    printf("residual + layernorm, %d rows of %d:\n", rows, width);
    printf("%-28s %s\n", "  CPU fused vs pair", cpu_same ? "bit for bit" : "DIFFERS");
    failures += !cpu_same;
    /* the GPU's fused and unfused */
    /* a, b, res, out, res2, out2 of n floats; mean, rstd, mean2, rstd2 of rows; w, bias */
    const size_t bytes[12] = {fb, fb, fb, fb, fb, fb, rb, rb, rb, rb, width * 4, width * 4};
    float *g[12];
    for (int k = 0; k < 12; k++)
        if (cudaMalloc((void **)&g[k], bytes[k]))
            exit(1);
    float *g_a = g[0], *g_b = g[1], *g_res = g[2], *g_out = g[3], *g_res2 = g[4], *g_out2 = g[5];
    float *g_mean = g[6], *g_rstd = g[7], *g_mean2 = g[8], *g_rstd2 = g[9], *g_w = g[10],
          *g_bias = g[11];
    cudaMemcpy(g_a, a, fb, cudaMemcpyHostToDevice);
    cudaMemcpy(g_b, b, fb, cudaMemcpyHostToDevice);
    cudaMemcpy(g_w, w, width * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(g_bias, bias, width * 4, cudaMemcpyHostToDevice);
    launched("residual + layernorm",
             gpt2_cuda_residual_layernorm_forward(g_res, g_out, g_mean, g_rstd, g_a, g_b, g_w,
                                                  g_bias, rows, width, s));
    launched("residual", gpt2_cuda_residual_forward(g_res2, g_a, g_b, (long long)n, s));
    launched("layernorm", gpt2_cuda_layernorm_forward(g_out2, g_mean2, g_rstd2, g_res2, g_w, g_bias,
                                                      rows, width, s));
    check_scaled("  GPU fused (res)", ref_res, g_res, n, 0, 1);
    check_scaled("  GPU fused (out)", ref, g_out, n, tol, 1);
    check_scaled("  GPU fused (mean)", ref_mean, g_mean, rows, tol, 1);
    check_scaled("  GPU fused (rstd)", ref_rstd, g_rstd, rows, tol, 1);
    float *h_res2 = host_copy(g_res2, n), *h_out2 = host_copy(g_out2, n);
    float *h_mean2 = host_copy(g_mean2, rows), *h_rstd2 = host_copy(g_rstd2, rows);
    check_bits("  GPU fused vs pair (res)", h_res2, g_res, n);
    check_bits("  GPU fused vs pair (out)", h_out2, g_out, n);
    check_bits("  GPU fused vs pair (mean)", h_mean2, g_mean, rows);
    check_bits("  GPU fused vs pair (rstd)", h_rstd2, g_rstd, rows);
    free(h_res2), free(h_out2), free(h_mean2), free(h_rstd2);
    for (int k = 0; k < 12; k++)
        cudaFree(g[k]);
}

/* Nothing to do is no launch: a grid of 0 blocks is an invalid configuration on a GPU. */
static void check_empty_launches(void *s)
{
    float *d = dev_copy((float[4]){0}, sizeof(float[4]));
    int rc = gpt2_cuda_gelu_forward(d, d, 0, s) | gpt2_cuda_gelu_backward(d, d, d, 0, s) |
             gpt2_cuda_residual_forward(d, d, d, 0, s) | gpt2_cuda_to_bf16(NULL, d, 0, s) |
             gpt2_cuda_softmax_forward(d, 0, 4, 1.0f, s) | gpt2_cuda_bias_fill(d, d, 0, 4, s) |
             gpt2_cuda_layernorm_forward(d, d, d, d, d, d, 0, 4, s) |
             gpt2_cuda_heads_gather(d, d, 0, 4, 1, 4, 4, 0, s);
    printf("%-28s %s\n", "empty launches", rc ? "FAILED" : "none queued, no error");
    failures += rc != 0;
}

/* An upload's source may be pinned memory, and the caller may refill it at once: the ops
 * copy it before they return. */
static void check_upload_from_pinned(void)
{
    gpt2_ops ops;
    char why[256];
    int *pinned = NULL, got[64];
    int *dev = (int *)dev_copy((int[64]){0}, sizeof got);
    if (gpt2_ops_cuda_create(&ops, NULL, -1, GPT2_FP32, why, sizeof why) != 0 ||
        cudaMallocHost((void **)&pinned, sizeof got) != cudaSuccess)
        exit(1);
    for (int i = 0; i < 64; i++)
        pinned[i] = i;
    ops.upload(ops.ctx, dev, pinned, sizeof got);
    for (int i = 0; i < 64; i++) /* at once: the next batch */
        pinned[i] = -1;
    cudaDeviceSynchronize();
    cudaMemcpy(got, dev, sizeof got, cudaMemcpyDeviceToHost);
    int ok = 1;
    for (int i = 0; i < 64; i++)
        ok &= got[i] == i;
    printf("%-28s %s\n", "upload from pinned memory", ok ? "the bytes of the call" : "CHANGED");
    failures += !ok;
    gpt2_ops_cuda_destroy(&ops);
    cudaFreeHost(pinned);
}

/* bf16 to nearest even, from the two bf16 values around x (no bit trick): the reference for
 * the kernels' rounding. x finite. */
static unsigned short bf16_nearest(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t lo_bits = u & 0xffff0000u, hi_bits = lo_bits + 0x10000u; /* toward, away from 0 */
    float lo, hi;
    memcpy(&lo, &lo_bits, 4);
    memcpy(&hi, &hi_bits, 4);
    double dlo = fabs((double)x - lo), dhi = fabs((double)hi - x);
    if (dlo != dhi)
        return (unsigned short)((dlo < dhi ? lo_bits : hi_bits) >> 16);
    return (unsigned short)(((lo_bits >> 16) & 1u ? hi_bits : lo_bits) >> 16);
}

/* bf16.enabled's widening and narrowing (gpt2_rows.h's element functions): every bf16 value
 * widened on the GPU as on the CPU, and back to itself (NaNs aside); gradients added into
 * bf16 buffers on the GPU as on the CPU, each the nearest bf16 to the fp32 sum (ties to
 * even; NaN stays NaN). */
static void check_bf16(void *s)
{
    enum { H = 65536 };
    unsigned short *h = malloc(H * 2), *back = malloc(H * 2), *gh = malloc(H * 2);
    float *w = malloc(H * 4), *gw = malloc(H * 4), *add = malloc(H * 4);
    if (!h || !back || !gh || !w || !gw || !add)
        exit(1);
    for (int i = 0; i < H; i++)
        h[i] = (unsigned short)i;
    unsigned short *d_h = (unsigned short *)dev_copy(h, H * 2);
    float *d_w = dev_copy(w, H * 4);
    bf16_widen(w, h, H);
    launched("bf16 widen", gpt2_cuda_bf16_widen(d_w, d_h, H, s));
    cudaMemcpy(gw, d_w, H * 4, cudaMemcpyDeviceToHost);
    int same = !memcmp(w, gw, H * 4), round_trip = 1;
    for (int i = 0; i < H; i++) {
        back[i] = 0;
        bf16_narrow_add(&back[i], &w[i], 1);
        round_trip &= isnan(w[i]) || back[i] == h[i] || (w[i] == 0 && (back[i] & 0x7fff) == 0);
    }
    printf("%-28s %s, %s\n", "bf16 widen (all 65536)", same ? "GPU bits = CPU bits" : "DIFFER",
           round_trip ? "each back to itself" : "NOT BACK");
    failures += !same || !round_trip;
    /* gradients: ties (half an ulp of 1.0: 2^-8), near-ties, signs, large, tiny, inf, NaN */
    const float special[] = {0x1p-8f, 0x1.8p-7f, -0x1p-8f, 0x1.01p-8f,
                             3e38f,   1e-40f,    INFINITY, NAN};
    for (int i = 0; i < H; i++) {
        h[i] = (unsigned short)(0x3f80 + (i % 256) * 0x80 * (i % 3 == 0 ? -1 : 1)); /* near 1 */
        add[i] = i < 8 ? special[i] : test_rand_float(&rs, -1.0f, 1.0f);
    }
    memcpy(gh, h, H * 2);
    unsigned short *d_g = (unsigned short *)dev_copy(h, H * 2);
    float *d_add = dev_copy(add, H * 4);
    bf16_narrow_add(h, add, H);
    launched("bf16 narrow_add", gpt2_cuda_bf16_narrow_add(d_g, d_add, H, s));
    cudaMemcpy(back, d_g, H * 2, cudaMemcpyDeviceToHost);
    int nearest = 1;
    for (int i = 0; i < H; i++) {
        float sum;
        uint32_t u = (uint32_t)gh[i] << 16;
        memcpy(&sum, &u, 4);
        sum += add[i];
        unsigned short want = isnan(sum)   ? (unsigned short)0x7fc0
                              : isinf(sum) ? (unsigned short)(sum > 0 ? 0x7f80 : 0xff80)
                                           : bf16_nearest(sum);
        nearest &= isnan(sum) ? (h[i] & 0x7fff) > 0x7f80 : h[i] == want;
    }
    same = !memcmp(h, back, H * 2);
    printf("%-28s %s, %s\n", "bf16 narrow_add", same ? "GPU bits = CPU bits" : "DIFFER",
           nearest ? "each the nearest bf16 (ties to even)" : "NOT NEAREST");
    failures += !same || !nearest;
    free(h), free(back), free(gh), free(w), free(gw), free(add);
}

#ifdef ZT_CUDA_FAKE
/* The ops keep the first failure they meet and name it (the model reports it): an allocation
 * the device refuses, a GEMM cuBLAS refuses. */
static void check_ops_errors(void *s)
{
    gpt2_ops ops;
    char why[256];
    if (gpt2_ops_cuda_create(&ops, s, -1, GPT2_FP32, why, sizeof why) != 0)
        exit(1);
    cudasim_fail_alloc_after(1);
    void *p = ops.alloc(ops.ctx, 4096);
    cudasim_fail_alloc_after(0);
    int ok = !p && ops.status(ops.ctx) == cudaErrorMemoryAllocation &&
             strstr(ops.status_text(ops.ctx), "cudaErrorMemoryAllocation");
    /* ... and the refusal is not left as the runtime's last error, which the next launch's
     * check would read as its own failure */
    cudaError_t last = cudaPeekAtLastError();
    float *x = dev_copy((float[8]){0}, sizeof(float[8]));
    int launch = gpt2_cuda_gelu_forward(x, x, 8, s);
    printf("%-28s last error %s, next launch %s\n", "refused allocation", cudaGetErrorName(last),
           launch ? "FAILED" : "ok");
    ok &= last == cudaSuccess && launch == 0;
    gpt2_ops_cuda_destroy(&ops);
    if (gpt2_ops_cuda_create(&ops, s, -1, GPT2_FP32, why, sizeof why) != 0)
        exit(1);
    float *d = dev_copy((float[16]){0}, sizeof(float[16]));
    ops.matmul_forward(ops.ctx, d, d, d, NULL, -1, 4, 4); /* N < 0 */
    ok &= ops.status(ops.ctx) != 0 && strstr(ops.status_text(ops.ctx), "cuBLAS status") != NULL;
    printf("%-28s %s\n", "ops' errors", ok ? "kept and named" : "LOST");
    failures += !ok;
    gpt2_ops_cuda_destroy(&ops);
}
#endif

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no GPU visible: skipping\n");
        return 77;
    }
    void *s = NULL; /* the legacy default stream */
    const double tol = 1e-4;
    int tok[N], tgt[N];
    for (int i = 0; i < N; i++) /* tokens repeat (23 of them): runs of rows per token */
        tok[i] = (i * 7) % 23, tgt[i] = (i * 5 + 3) % V;
    int *dtok = (int *)dev_copy(tok, sizeof tok), *dtgt = (int *)dev_copy(tgt, sizeof tgt);

    /* encoder */
    float *wte = randoms(V * C), *wpe = randoms(T * C), *d = randoms(N * 3 * C);
    float *out = zeros(N * 3 * C), *dwte = zeros(V * C), *dwpe = zeros(T * C);
    float *g_wte = dev_copy(wte, V * C * 4), *g_wpe = dev_copy(wpe, T * C * 4);
    float *g_d = dev_copy(d, N * 3 * C * 4), *g_out = dev_copy(out, N * 3 * C * 4);
    float *g_dwte = dev_copy(dwte, V * C * 4), *g_dwpe = dev_copy(dwpe, T * C * 4);
    encoder_forward(out, tok, wte, wpe, B, T, C);
    gpt2_cuda_encoder_forward(g_out, dtok, g_wte, g_wpe, B, T, C, s);
    check("encoder forward", out, g_out, N * C, tol);
    encoder_backward(dwte, dwpe, d, tok, B, T, C);
    size_t enc_bytes = 0;
    void *enc_scratch = NULL;
    if (gpt2_cuda_encoder_backward_scratch(B, T, &enc_bytes) ||
        cudaMalloc(&enc_scratch, enc_bytes) != cudaSuccess)
        exit(1);
    launched("encoder backward", gpt2_cuda_encoder_backward(g_dwte, g_dwpe, g_d, dtok, B, T, C, V,
                                                            enc_scratch, enc_bytes, s));
    check_bits("encoder backward (dwte)", dwte, g_dwte, V * C);
#ifdef ZT_CUDA_FAKE /* the tokens' sort takes only the bits V needs */
    printf("%-28s %d key bits sorted for V %d\n", "encoder backward", cudasim_last_sort_bits(), V);
    if (cudasim_last_sort_bits() != 7)
        failures++;
#endif
    check_bits("encoder backward (dwpe)", dwpe, g_dwpe, T * C);
    encoder_backward(dwte, dwpe, d, tok, B, T, C); /* adds to what is there, on both */
    launched("encoder backward", gpt2_cuda_encoder_backward(g_dwte, g_dwpe, g_d, dtok, B, T, C, V,
                                                            enc_scratch, enc_bytes, s));
    check_bits("encoder backward, added (dwte)", dwte, g_dwte, V * C);
    check_bits("encoder backward, added (dwpe)", dwpe, g_dwpe, T * C);
    if (gpt2_cuda_encoder_backward(g_dwte, g_dwpe, g_d, dtok, B, T, C, V, enc_scratch, 64, s) ==
        0) {
        printf("encoder backward with 64 bytes of scratch was not refused\n");
        failures++;
    }
    cudaFree(enc_scratch);

    /* layernorm */
#ifdef ZT_CUDA_FAKE
    unsigned long long atomics = cudasim_atomic_ops();
#endif
    check_layernorm(s, N, C, tol);
#ifdef ZT_CUDA_FAKE /* each partial sum has one writer: plain adds, no atomics */
    if (cudasim_atomic_ops() != atomics)
        printf("layernorm: %llu atomic operations\n", cudasim_atomic_ops() - atomics), failures++;
#endif
    check_layernorm(s, 4100, 50, tol);
    check_layernorm(s, 300, 1600, tol); /* partials in the scratch, not shared memory */
    check_residual_layernorm(s, N + 1, C + 3, tol);
    check_residual_layernorm(s, 4101, 50, tol);
    check_residual_layernorm(s, 37, 1601, tol);
    float *x = randoms(N * C), *g_x = dev_copy(x, N * C * 4); /* gelu's, residual's input */

    /* attention with heads of 8 (NH_GEMM): the GEMM path (test_gpt2_flash checks the fused
     * one the ops take for heads of 16 to 128) */
    enum { NH = NH_GEMM };
    float *qkv = randoms(N * 3 * C), *att = zeros(B * NH * T * T), *dqkv = zeros(N * 3 * C);
    float *g_qkv = dev_copy(qkv, N * 3 * C * 4), *g_att = dev_copy(att, B * NH * T * T * 4);
    float *g_dqkv = dev_copy(dqkv, N * 3 * C * 4);
    gpt2_ops ops; /* the GPU's attention is cuBLAS GEMMs around kernels: through the ops */
    char why[256];
    if (gpt2_ops_cuda_create(&ops, s, -1, GPT2_FP32, why, sizeof why) != 0) {
        printf("GPU ops: %s\n", why);
        return 1;
    }
    attention_forward(out, att, qkv, B, T, C, NH);
    ops.attention_forward(ops.ctx, g_out, g_att, g_qkv, B, T, C, NH);
    check("attention forward", out, g_out, N * C, tol);
    check("attention forward (att)", att, g_att, B * NH * T * T, tol);
    attention_backward(dqkv, d, qkv, att, B, T, C, NH);
    ops.attention_backward(ops.ctx, g_dqkv, g_d, g_qkv, g_out, g_att, B, T, C, NH);
    check("attention backward", dqkv, g_dqkv, N * 3 * C, tol);
    if (ops.status(ops.ctx))
        printf("attention: %s\n", ops.status_text(ops.ctx)), failures++;
    gpt2_ops_cuda_destroy(&ops);

    /* gelu, residual */
    float *gx = zeros(N * C), *g_gx = dev_copy(gx, N * C * 4);
    gelu_forward(out, x, N * C);
    gpt2_cuda_gelu_forward(g_out, g_x, N * C, s);
    check("gelu forward", out, g_out, N * C, tol);
    gelu_backward(gx, x, d, N * C);
    gpt2_cuda_gelu_backward(g_gx, g_x, g_d, N * C, s);
    check("gelu backward", gx, g_gx, N * C, tol);
    residual_forward(out, x, d, N * C);
    gpt2_cuda_residual_forward(g_out, g_x, g_d, N * C, s);
    check("residual forward", out, g_out, N * C, tol);

    /* softmax + cross-entropy */
    float *logits = randoms(N * V), *probs = zeros(N * V), *dl = zeros(N * V);
    float *g_logits = dev_copy(logits, N * V * 4), *g_probs = dev_copy(probs, N * V * 4);
    float *g_dl = dev_copy(dl, N * V * 4);
    double losses[N] = {0};
    double *g_losses = (double *)dev_copy(losses, sizeof losses);
    float loss = crossentropy_forward(probs, logits, tgt, N, V);
    gpt2_cuda_crossentropy_forward(g_probs, g_losses, g_logits, dtgt, N, V, s);
    check("crossentropy forward", probs, g_probs, N * V, tol);
    cudaMemcpy(losses, g_losses, sizeof losses, cudaMemcpyDeviceToHost);
    double sum = 0;
    for (int n = 0; n < N; n++)
        sum += losses[n];
    float gloss = (float)(sum / N);
    printf("%-28s %.7f vs %.7f\n", "crossentropy loss", (double)gloss, (double)loss);
    if (!(fabsf(gloss - loss) <= 1e-5f * fabsf(loss)))
        failures++;
    crossentropy_backward(dl, probs, tgt, N, V);
    gpt2_cuda_crossentropy_backward(g_dl, g_probs, dtgt, N, V, s);
    check("crossentropy backward", dl, g_dl, N * V, tol);

    check_empty_launches(s);
    check_upload_from_pinned();
    check_bf16(s);
#ifdef ZT_CUDA_FAKE
    check_ops_errors(s);
#endif

    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("a kernel failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        failures++;
    }
    release_all();
    printf("%d failures\n", failures);
    return failures != 0;
}

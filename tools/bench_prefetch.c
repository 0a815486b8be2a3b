/* SPDX-License-Identifier: MIT */
/* `ztier bench prefetch`: how much of a training step is spent waiting for parameters.
 * A stack of square layers with real compute (one sgemm forward, two backward) runs
 * (a) resident: the same matmuls on weights already in memory — compute alone — and
 * (b) through ztier with parameters offloaded, interleaved, and reports step time, the
 * time zt_fetch waited (stall) and stall_ratio = stall / step. --backend cuda runs the GPU
 * version (bench_prefetch_cuda.c: cuBLAS on the trainer's stream, stream-ordered calls). */
#include "tools/bench_common.h"
#include "tools/commands.h"
#include "tools/bench_prefetch.h"

#include "ztier.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_model {
    int layers, hidden, batch;
    float *x, *y, *dy, *dx; /* activations [batch, hidden] */
    float *w_resident;      /* [layers, hidden, hidden] for the resident run */
    float *dw_resident;
} bench_model;

/* y = x W^T; dW += dy^T x; dx = dy W */
static void layer_forward(const bench_model *m, const float *w)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m->batch, m->hidden, m->hidden, 1.0f, m->x,
                m->hidden, w, m->hidden, 0.0f, m->y, m->hidden);
}

static void layer_backward(const bench_model *m, const float *w, float *dw)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m->hidden, m->hidden, m->batch, 1.0f,
                m->dy, m->hidden, m->x, m->hidden, 1.0f, dw, m->hidden);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m->batch, m->hidden, m->hidden, 1.0f,
                m->dy, m->hidden, w, m->hidden, 0.0f, m->dx, m->hidden);
}

static double resident_step(bench_model *m)
{
    size_t lw = (size_t)m->hidden * (size_t)m->hidden;
    double t0 = bench_now();
    for (int l = 0; l < m->layers; l++)
        layer_forward(m, m->w_resident + lw * (size_t)l);
    for (int l = m->layers - 1; l >= 0; l--)
        layer_backward(m, m->w_resident + lw * (size_t)l, m->dw_resident + lw * (size_t)l);
    return bench_now() - t0;
}

static int offload_step(zt_runtime *rt, bench_model *m, double *step_s)
{
    double t0 = bench_now();
    zt_layer_view v;
    for (int l = 0; l < m->layers; l++) {
        if (zt_fetch(rt, l, ZT_FORWARD, &v) != ZT_OK)
            return -1;
        layer_forward(m, v.params[0].data);
        zt_release(rt, l, ZT_FORWARD);
    }
    for (int l = m->layers - 1; l >= 0; l--) {
        if (zt_fetch(rt, l, ZT_BACKWARD, &v) != ZT_OK)
            return -1;
        layer_backward(m, v.params[0].data, v.params[0].grad);
        if (zt_release(rt, l, ZT_BACKWARD) != ZT_OK)
            return -1;
    }
    if (zt_step(rt, NULL, NULL) != ZT_OK)
        return -1;
    *step_s = bench_now() - t0;
    return 0;
}

static int alloc_model(bench_model *m)
{
    size_t act = (size_t)m->batch * (size_t)m->hidden, lw = (size_t)m->hidden * m->hidden;
    m->x = calloc(act, sizeof(float));
    m->y = calloc(act, sizeof(float));
    m->dy = calloc(act, sizeof(float));
    m->dx = calloc(act, sizeof(float));
    m->w_resident = calloc(lw * (size_t)m->layers, sizeof(float));
    m->dw_resident = calloc(lw * (size_t)m->layers, sizeof(float));
    if (!m->x || !m->y || !m->dy || !m->dx || !m->w_resident || !m->dw_resident)
        return -1;
    for (size_t i = 0; i < act; i++)
        m->x[i] = m->dy[i] = 0.01f * (float)(i % 13);
    return 0;
}

static void free_model(bench_model *m)
{
    free(m->x), free(m->y), free(m->dy), free(m->dx), free(m->w_resident), free(m->dw_resident);
}

int cmd_bench_prefetch(int argc, char **argv)
{
    static const char *const known[] = {"layers",  "hidden",    "batch",   "steps",
                                        "offload", "nvme-path", "backend", NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0)
        return 2;
    bench_model m = {12, 1024, 512, NULL, NULL, NULL, NULL, NULL, NULL};
    const char *v;
    if ((v = bench_arg(argc, argv, "layers")))
        m.layers = atoi(v);
    if ((v = bench_arg(argc, argv, "hidden")))
        m.hidden = atoi(v);
    if ((v = bench_arg(argc, argv, "batch")))
        m.batch = atoi(v);
    int steps = (v = bench_arg(argc, argv, "steps")) ? atoi(v) : 5;
    const char *offload = (v = bench_arg(argc, argv, "offload")) ? v : "cpu";
    const char *nvme = bench_arg(argc, argv, "nvme-path");
    if (m.layers < 2 || m.hidden < 16 || m.batch < 1 || steps < 3 || steps > 64 ||
        (strcmp(offload, "cpu") && strcmp(offload, "nvme")) ||
        (!strcmp(offload, "nvme") && !nvme)) {
        fprintf(stderr, "ztier bench prefetch: need --layers >= 2, --hidden >= 16, --steps 3..64, "
                        "--offload cpu|nvme (nvme needs --nvme-path DIR)\n");
        return 2;
    }
    const char *backend = (v = bench_arg(argc, argv, "backend")) ? v : "host";
    if (!strcmp(backend, "cuda")) {
#ifdef ZT_HAVE_CUDA
        return bench_prefetch_cuda(m.layers, m.hidden, m.batch, steps, offload, nvme,
                                   bench_flag(argc, argv, "json"));
#else
        fprintf(stderr, "ztier bench prefetch: --backend cuda needs a build with CUDA\n");
        return 2;
#endif
    }
    if (strcmp(backend, "host") != 0) {
        fprintf(stderr, "ztier bench prefetch: --backend '%s': use host or cuda\n", backend);
        return 2;
    }
    if (alloc_model(&m) != 0) {
        fprintf(stderr, "ztier bench prefetch: out of memory\n");
        return 1;
    }
    zt_runtime *rt = bench_prefetch_runtime(m.layers, m.hidden, offload, nvme, "", "");
    if (!rt) {
        free_model(&m);
        return 1;
    }
    double warm = 0, compute[64], step[64], stall[64];
    resident_step(&m);
    offload_step(rt, &m, &warm); /* records the layer order */
    zt_stats s0 = ZT_STATS_INIT, s1 = ZT_STATS_INIT;
    for (int i = 0; i < steps; i++) {
        compute[i] = resident_step(&m);
        zt_stats_get(rt, &s0);
        if (offload_step(rt, &m, &step[i]) != 0) {
            fprintf(stderr, "ztier bench prefetch: %s\n", zt_last_error(rt));
            zt_runtime_destroy(rt);
            free_model(&m);
            return 1;
        }
        zt_stats_get(rt, &s1);
        stall[i] = s1.fetch_wait_s - s0.fetch_wait_s;
    }
    double c = bench_median(compute, steps), st = bench_median(step, steps);
    double sl = bench_median(stall, steps);
    double mib = (double)m.hidden * m.hidden * 4.0 * m.layers / (1 << 20);
    printf("ztier bench prefetch: %d layers of %dx%d fp32 (%.0f MiB of parameters), batch %d, "
           "parameters offloaded to %s, %d interleaved steps\n",
           m.layers, m.hidden, m.hidden, mib, m.batch, offload, steps);
    printf("  %-28s %10.4f s\n", "compute alone (resident)", c);
    printf("  %-28s %10.4f s\n", "offloaded step (with Adam)", st);
    printf("  %-28s %10.4f s\n", "fetch stall", sl);
    printf("  %-28s %10.3f\n", "stall_ratio (stall / step)", sl / st);
    printf("  prefetch hits %llu of %llu fetches\n", (unsigned long long)s1.prefetch_hits,
           (unsigned long long)s1.fetches);
    if (bench_flag(argc, argv, "json"))
        printf("{\"layers\":%d,\"hidden\":%d,\"batch\":%d,\"offload\":\"%s\",\"steps\":%d,"
               "\"compute_s\":%.6f,\"step_s\":%.6f,\"stall_s\":%.6f,\"stall_ratio\":%.4f}\n",
               m.layers, m.hidden, m.batch, offload, steps, c, st, sl, sl / st);
    zt_runtime_destroy(rt);
    free_model(&m);
    return 0;
}

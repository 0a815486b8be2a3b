/* SPDX-License-Identifier: MIT */
/* `ztier bench prefetch --backend cuda`: the same stack of square layers as the CPU bench,
 * computed with cuBLAS on the trainer's own stream. (a) resident: the GEMMs on weights kept
 * in device memory; (b) through ztier with the parameters offloaded, every layer between
 * zt_fetch_async and zt_release_async (the host never waits in the layer loop; zt_step
 * waits once). The GPU's stall is the offloaded step minus the resident compute minus the
 * time zt_step took (the CPU Adam): stall_ratio = stall / step. Interleaved, medians. */
#include "tools/bench_common.h"
#include "tools/bench_prefetch.h"

#include "gpt2_cuda_module.h"
#include "ztier.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpu_model {
    int layers, hidden, batch;
    cudaStream_t stream;
    void *blas;                      /* cuBLAS, through libztier-gpt2-cuda.so */
    float *x, *y, *dy, *dx, *w, *dw; /* device; w, dw: the resident copies */
} gpu_model;

static void gemm_forward(gpu_model *m, const float *w)
{
    const float one = 1, zero = 0;
    int h = m->hidden;
    gpt2_cuda_blas_sgemm(m->blas, 1, 0, h, m->batch, h, one, w, h, m->x, h, zero, m->y, h);
}

static void gemm_backward(gpu_model *m, const float *w, float *dw)
{
    const float one = 1, zero = 0;
    int h = m->hidden;
    gpt2_cuda_blas_sgemm(m->blas, 0, 1, h, h, m->batch, one, m->x, h, m->dy, h, one, dw, h);
    gpt2_cuda_blas_sgemm(m->blas, 0, 0, h, m->batch, h, one, w, h, m->dy, h, zero, m->dx, h);
}

static double resident_step(gpu_model *m)
{
    size_t lw = (size_t)m->hidden * (size_t)m->hidden;
    double t0 = bench_now();
    for (int l = 0; l < m->layers; l++)
        gemm_forward(m, m->w + lw * (size_t)l);
    for (int l = m->layers - 1; l >= 0; l--)
        gemm_backward(m, m->w + lw * (size_t)l, m->dw + lw * (size_t)l);
    cudaStreamSynchronize(m->stream);
    return bench_now() - t0;
}

static int offload_step(zt_runtime *rt, gpu_model *m, double *step_s)
{
    double t0 = bench_now();
    zt_layer_view v;
    for (int l = 0; l < m->layers; l++) {
        if (zt_fetch_async(rt, l, ZT_FORWARD, m->stream, &v) != ZT_OK)
            return -1;
        gemm_forward(m, v.params[0].data);
        if (zt_release_async(rt, l, ZT_FORWARD, m->stream) != ZT_OK)
            return -1;
    }
    for (int l = m->layers - 1; l >= 0; l--) {
        if (zt_fetch_async(rt, l, ZT_BACKWARD, m->stream, &v) != ZT_OK)
            return -1;
        gemm_backward(m, v.params[0].data, v.params[0].grad);
        if (zt_release_async(rt, l, ZT_BACKWARD, m->stream) != ZT_OK)
            return -1;
    }
    if (zt_step(rt, NULL, NULL) != ZT_OK)
        return -1;
    *step_s = bench_now() - t0;
    return 0;
}

static int open_model(gpu_model *m, char *why, size_t len)
{
    size_t act = (size_t)m->batch * m->hidden * sizeof(float);
    size_t ws = (size_t)m->hidden * m->hidden * (size_t)m->layers * sizeof(float);
    if (cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking) != cudaSuccess ||
        !(m->blas = gpt2_cuda_blas_create(m->stream, why, len)) ||
        cudaMalloc((void **)&m->x, act) != cudaSuccess ||
        cudaMalloc((void **)&m->y, act) != cudaSuccess ||
        cudaMalloc((void **)&m->dy, act) != cudaSuccess ||
        cudaMalloc((void **)&m->dx, act) != cudaSuccess ||
        cudaMalloc((void **)&m->w, ws) != cudaSuccess ||
        cudaMalloc((void **)&m->dw, ws) != cudaSuccess)
        return -1;
    cudaMemset(m->x, 0, act), cudaMemset(m->dy, 0, act);
    cudaMemset(m->w, 0, ws), cudaMemset(m->dw, 0, ws);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : -1;
}

static void close_model(gpu_model *m)
{
    cudaFree(m->x), cudaFree(m->y), cudaFree(m->dy), cudaFree(m->dx), cudaFree(m->w);
    cudaFree(m->dw);
    gpt2_cuda_blas_destroy(m->blas);
    if (m->stream)
        cudaStreamDestroy(m->stream);
}

int bench_prefetch_cuda(int layers, int hidden, int batch, int steps, const char *offload,
                        const char *nvme, int json)
{
    gpu_model m = {layers, hidden, batch, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    char why[512] = "";
    if (open_model(&m, why, sizeof why) != 0) {
        fprintf(stderr, "ztier bench prefetch: no usable GPU for --backend cuda (%s)\n",
                why[0] ? why : cudaGetErrorString(cudaGetLastError()));
        close_model(&m);
        return 1;
    }
    zt_runtime *rt = bench_prefetch_runtime(
        layers, hidden, offload, nvme, ", \"stage3_param_persistence_threshold\": 0",
        ", \"device_backend\": \"cuda\", \"comm_backend\": \"single\"");
    if (!rt) {
        close_model(&m);
        return 1;
    }
    double warm, compute[64], step[64], opt[64], stall[64], ratio[64];
    resident_step(&m);
    offload_step(rt, &m, &warm); /* records the layer order */
    zt_stats s0 = ZT_STATS_INIT, s1 = ZT_STATS_INIT;
    for (int i = 0; i < steps; i++) {
        compute[i] = resident_step(&m);
        zt_stats_get(rt, &s0);
        if (offload_step(rt, &m, &step[i]) != 0) {
            fprintf(stderr, "ztier bench prefetch: %s\n", zt_last_error(rt));
            zt_runtime_destroy(rt);
            close_model(&m);
            return 1;
        }
        zt_stats_get(rt, &s1);
        opt[i] = s1.step_s - s0.step_s;
        stall[i] = step[i] - compute[i] - opt[i];
        stall[i] = stall[i] > 0 ? stall[i] : 0;
        ratio[i] = stall[i] / step[i];
    }
    double c = bench_median(compute, steps), st = bench_median(step, steps);
    double o = bench_median(opt, steps), sl = bench_median(stall, steps);
    double r = bench_median(ratio, steps);
    printf("ztier bench prefetch: backend cuda, %d layers of %dx%d fp32, batch %d, parameters "
           "offloaded to %s, %d interleaved steps (cuBLAS on the trainer's stream)\n",
           layers, hidden, hidden, batch, offload, steps);
    printf("  %-32s %10.4f s\n", "compute alone (resident)", c);
    printf("  %-32s %10.4f s\n", "offloaded step", st);
    printf("  %-32s %10.4f s\n", "zt_step (CPU Adam)", o);
    printf("  %-32s %10.4f s\n", "GPU stall (step - compute - Adam)", sl);
    printf("  %-32s %10.3f\n", "stall_ratio (stall / step)", r);
    printf("  host waits in the layer loops: %llu, prefetch hits %llu of %llu fetches\n",
           (unsigned long long)s1.host_syncs, (unsigned long long)s1.prefetch_hits,
           (unsigned long long)s1.fetches);
    if (json)
        printf("{\"backend\":\"cuda\",\"layers\":%d,\"hidden\":%d,\"batch\":%d,\"offload\":\"%s\","
               "\"steps\":%d,\"compute_s\":%.6f,\"step_s\":%.6f,\"adam_s\":%.6f,\"stall_s\":%.6f,"
               "\"stall_ratio\":%.4f}\n",
               layers, hidden, batch, offload, steps, c, st, o, sl, r);
    zt_runtime_destroy(rt);
    close_model(&m);
    return 0;
}

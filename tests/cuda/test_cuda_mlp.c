/* SPDX-License-Identifier: MIT */
/* End to end on a GPU: a 3-layer linear network trained with cuBLAS through ztier.h, every
 * layer's GEMMs queued on the trainer's own cudaStream_t between zt_fetch_async and
 * zt_release_async (no synchronisation in the layer loop), for parameters in device memory,
 * host memory and on NVMe, with the optimizer on the CPU and on the device. After STEPS
 * AdamW steps the weights are compared with a double-precision CPU reference of the same
 * training (relative L2 error < 1e-4; cuBLAS in its default math mode, no TF32). The layer
 * loop must not make the host wait (zt_stats.host_syncs) with parameters off NVMe.
 * Exits 77 (skipped) where no GPU is visible, as on this project's CI machines. */
#include "ztier.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LAYERS 3
#define BATCH 64
#define STEPS 5
static const int width[LAYERS + 1] = {96, 256, 128, 32};
static const double LR = 1e-3, B1 = 0.9, B2 = 0.999, EPS = 1e-8, WD = 0.01;

#define CHECK(cond, ...)                                     \
    do {                                                     \
        if (!(cond)) {                                       \
            fprintf(stderr, "test_cuda_mlp:%d: ", __LINE__); \
            fprintf(stderr, __VA_ARGS__);                    \
            fprintf(stderr, "\n");                           \
            exit(1);                                         \
        }                                                    \
    } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* ---- the double-precision reference ---------------------------------------------------- */

typedef struct ref_net {
    double *w[LAYERS], *m[LAYERS], *v[LAYERS];
} ref_net;

static int64_t numel(int l) { return (int64_t)width[l + 1] * width[l]; }

/* One AdamW step of the whole batch, in double. x: [BATCH, in], t: [BATCH, out]. */
static void ref_step(ref_net *r, const float *x, const float *t, int step)
{
    double *act[LAYERS + 1], *d = NULL;
    act[0] = malloc(sizeof(double) * BATCH * (size_t)width[0]);
    for (int i = 0; i < BATCH * width[0]; i++)
        act[0][i] = x[i];
    for (int l = 0; l < LAYERS; l++) {
        int I = width[l], O = width[l + 1];
        act[l + 1] = calloc((size_t)BATCH * (size_t)O, sizeof(double));
        for (int b = 0; b < BATCH; b++)
            for (int o = 0; o < O; o++) {
                double s = 0;
                for (int i = 0; i < I; i++)
                    s += act[l][b * I + i] * r->w[l][o * I + i];
                act[l + 1][b * O + o] = s;
            }
    }
    int out = width[LAYERS];
    d = malloc(sizeof(double) * BATCH * (size_t)out);
    for (int i = 0; i < BATCH * out; i++) /* d/dy of 0.5 * mean((y - t)^2) */
        d[i] = (act[LAYERS][i] - t[i]) / (double)(BATCH * out);
    for (int l = LAYERS - 1; l >= 0; l--) {
        int I = width[l], O = width[l + 1];
        double *g = calloc((size_t)numel(l), sizeof(double));
        double *dx = calloc((size_t)BATCH * (size_t)I, sizeof(double));
        for (int b = 0; b < BATCH; b++)
            for (int o = 0; o < O; o++)
                for (int i = 0; i < I; i++) {
                    g[o * I + i] += d[b * O + o] * act[l][b * I + i];
                    dx[b * I + i] += d[b * O + o] * r->w[l][o * I + i];
                }
        double bc1 = 1 - pow(B1, step), bc2 = 1 - pow(B2, step);
        for (int64_t k = 0; k < numel(l); k++) { /* AdamW */
            r->m[l][k] = B1 * r->m[l][k] + (1 - B1) * g[k];
            r->v[l][k] = B2 * r->v[l][k] + (1 - B2) * g[k] * g[k];
            r->w[l][k] -= LR * WD * r->w[l][k];
            r->w[l][k] -= LR * (r->m[l][k] / bc1) / (sqrt(r->v[l][k] / bc2) + EPS);
        }
        free(g);
        free(d);
        d = dx;
    }
    free(d);
    for (int l = 0; l <= LAYERS; l++)
        free(act[l]);
}

/* ---- the GPU trainer through ztier ------------------------------------------------------ */

typedef struct gpu_net {
    zt_runtime *rt;
    int layer[LAYERS], param[LAYERS];
    cudaStream_t stream;
    cublasHandle_t blas;
    float *act[LAYERS + 1], *dy, *dx, *target; /* device, column-major views of row-major */
} gpu_net;

static void cublas_ok(cublasStatus_t s, const char *what)
{
    CHECK(s == CUBLAS_STATUS_SUCCESS, "%s: cuBLAS status %d", what, (int)s);
}

/* Row-major A[r, c] is column-major A^T (c x r, ld c): Y = X W^T is Y^T = W X^T. */
static void forward(gpu_net *n, int l, const float *w)
{
    int I = width[l], O = width[l + 1];
    const float one = 1, zero = 0;
    cublas_ok(cublasSgemm(n->blas, CUBLAS_OP_T, CUBLAS_OP_N, O, BATCH, I, &one, w, I, n->act[l], I,
                          &zero, n->act[l + 1], O),
              "forward");
}

/* dW += dY^T X (stored: dW^T = X^T dY), dX = dY W (stored: dX^T = W^T dY^T). */
static void backward(gpu_net *n, int l, const float *w, float *dw)
{
    int I = width[l], O = width[l + 1];
    const float one = 1, zero = 0;
    cublas_ok(cublasSgemm(n->blas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, BATCH, &one, n->act[l], I, n->dy,
                          O, &one, dw, I),
              "backward dW");
    if (l > 0) {
        cublas_ok(cublasSgemm(n->blas, CUBLAS_OP_N, CUBLAS_OP_N, I, BATCH, O, &one, w, I, n->dy, O,
                              &zero, n->dx, I),
                  "backward dX");
        float *t = n->dy;
        n->dy = n->dx;
        n->dx = t;
    }
}

/* One training step; returns the host's waits for the device inside the layer loops. */
static uint64_t gpu_step(gpu_net *n, const float *x, const float *t)
{
    int out = width[LAYERS];
    zt_stats before = ZT_STATS_INIT, after = ZT_STATS_INIT;
    zt_stats_get(n->rt, &before);
    CHECK(cudaMemcpyAsync(n->act[0], x, sizeof(float) * BATCH * (size_t)width[0],
                          cudaMemcpyHostToDevice, n->stream) == cudaSuccess,
          "copy x");
    CHECK(cudaMemcpyAsync(n->target, t, sizeof(float) * BATCH * (size_t)out, cudaMemcpyHostToDevice,
                          n->stream) == cudaSuccess,
          "copy t");
    for (int l = 0; l < LAYERS; l++) {
        zt_layer_view v;
        CHECK(zt_fetch_async(n->rt, n->layer[l], ZT_FORWARD, n->stream, &v) == ZT_OK, "%s",
              zt_last_error(n->rt));
        forward(n, l, v.params[0].data);
        CHECK(zt_release_async(n->rt, n->layer[l], ZT_FORWARD, n->stream) == ZT_OK, "%s",
              zt_last_error(n->rt));
    }
    /* dY = (Y - T) / (BATCH * out) */
    const float minus = -1, inv = 1.0f / (float)(BATCH * out);
    CHECK(cudaMemcpyAsync(n->dy, n->act[LAYERS], sizeof(float) * BATCH * (size_t)out,
                          cudaMemcpyDeviceToDevice, n->stream) == cudaSuccess,
          "dy");
    cublas_ok(cublasSaxpy(n->blas, BATCH * out, &minus, n->target, 1, n->dy, 1), "saxpy");
    cublas_ok(cublasSscal(n->blas, BATCH * out, &inv, n->dy, 1), "sscal");
    for (int l = LAYERS - 1; l >= 0; l--) {
        zt_layer_view v;
        CHECK(zt_fetch_async(n->rt, n->layer[l], ZT_BACKWARD, n->stream, &v) == ZT_OK, "%s",
              zt_last_error(n->rt));
        backward(n, l, v.params[0].data, v.params[0].grad);
        CHECK(zt_release_async(n->rt, n->layer[l], ZT_BACKWARD, n->stream) == ZT_OK, "%s",
              zt_last_error(n->rt));
    }
    zt_stats_get(n->rt, &after);
    CHECK(zt_step(n->rt, NULL, NULL) == ZT_OK, "zt_step: %s", zt_last_error(n->rt));
    return after.host_syncs - before.host_syncs;
}

static double run(const char *param, const char *optim, const char *nvme_dir)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
             "\"%s\"}, \"offload_optimizer\": {\"device\": \"%s\"},"
             " \"stage3_param_persistence_threshold\": 0},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": %g, \"betas\": [%g, %g],"
             " \"eps\": %g, \"weight_decay\": %g}}, \"gradient_clipping\": 0,"
             " \"ztier\": {\"device_backend\": \"cuda\", \"comm_backend\": \"single\","
             " \"hbm_capacity\": \"64M\"}}",
             param, nvme_dir, optim, LR, B1, B2, EPS, WD);
    gpu_net n;
    memset(&n, 0, sizeof n);
    CHECK(zt_runtime_create(NULL, cfg, &n.rt) == ZT_OK, "create: %s", zt_last_error(n.rt));
    ref_net r;
    float *w0[LAYERS]; /* ZT_INIT_COPY reads them at commit */
    rng = 0x1234;
    for (int l = 0; l < LAYERS; l++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", l);
        int64_t shape[2] = {width[l + 1], width[l]};
        w0[l] = malloc(sizeof(float) * (size_t)numel(l));
        r.w[l] = malloc(sizeof(double) * (size_t)numel(l));
        r.m[l] = calloc((size_t)numel(l), sizeof(double));
        r.v[l] = calloc((size_t)numel(l), sizeof(double));
        for (int64_t k = 0; k < numel(l); k++) {
            w0[l][k] = (float)(uniform() / sqrt((double)width[l]));
            r.w[l][k] = w0[l][k];
        }
        zt_init init = {ZT_INIT_COPY, 0, 0, 0, NULL, w0[l]};
        CHECK(zt_layer_add(n.rt, name, &n.layer[l]) == ZT_OK, "%s", zt_last_error(n.rt));
        CHECK(zt_param_add(n.rt, n.layer[l], name, shape, 2, &init, &n.param[l]) == ZT_OK, "%s",
              zt_last_error(n.rt));
    }
    CHECK(zt_runtime_commit(n.rt) == ZT_OK, "commit: %s", zt_last_error(n.rt));
    for (int l = 0; l < LAYERS; l++)
        free(w0[l]);
    CHECK(cudaStreamCreateWithFlags(&n.stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
    cublas_ok(cublasCreate(&n.blas), "create");
    cublas_ok(cublasSetStream(n.blas, n.stream), "set stream");
    cublas_ok(cublasSetMathMode(n.blas, CUBLAS_DEFAULT_MATH), "math mode (no TF32)");
    int widest = 0;
    for (int l = 0; l <= LAYERS; l++) {
        widest = width[l] > widest ? width[l] : widest;
        CHECK(cudaMalloc((void **)&n.act[l], sizeof(float) * BATCH * (size_t)width[l]) ==
                  cudaSuccess,
              "malloc");
    }
    CHECK(cudaMalloc((void **)&n.dy, sizeof(float) * BATCH * (size_t)widest) == cudaSuccess &&
              cudaMalloc((void **)&n.dx, sizeof(float) * BATCH * (size_t)widest) == cudaSuccess &&
              cudaMalloc((void **)&n.target, sizeof(float) * BATCH * (size_t)width[LAYERS]) ==
                  cudaSuccess,
          "malloc");
    float *x = malloc(sizeof(float) * BATCH * (size_t)width[0]);
    float *t = malloc(sizeof(float) * BATCH * (size_t)width[LAYERS]);
    uint64_t waits = 0;
    for (int s = 1; s <= STEPS; s++) {
        for (int i = 0; i < BATCH * width[0]; i++)
            x[i] = (float)uniform();
        for (int i = 0; i < BATCH * width[LAYERS]; i++)
            t[i] = (float)uniform();
        waits += gpu_step(&n, x, t);
        ref_step(&r, x, t, s);
    }
    double num = 0, den = 0;
    for (int l = 0; l < LAYERS; l++) {
        float *w = malloc(sizeof(float) * (size_t)numel(l));
        CHECK(zt_param_read(n.rt, n.param[l], w, numel(l)) == ZT_OK, "%s", zt_last_error(n.rt));
        for (int64_t k = 0; k < numel(l); k++) {
            num += (w[k] - r.w[l][k]) * (w[k] - r.w[l][k]);
            den += r.w[l][k] * r.w[l][k];
        }
        free(w);
        free(r.w[l]), free(r.m[l]), free(r.v[l]);
    }
    double err = sqrt(num / den);
    printf("params %-4s optimizer %-4s: relative L2 error %.3g, %llu host waits in the layer "
           "loops of %d steps\n",
           param, optim, err, (unsigned long long)waits, STEPS);
    if (strcmp(param, "nvme") != 0)
        CHECK(waits == 0, "the layer loop waited for the device");
    for (int l = 0; l <= LAYERS; l++)
        cudaFree(n.act[l]);
    cudaFree(n.dy), cudaFree(n.dx), cudaFree(n.target);
    cublasDestroy(n.blas);
    zt_runtime_destroy(n.rt);
    cudaStreamDestroy(n.stream);
    free(x), free(t);
    return err;
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no GPU visible: skipping\n");
        return 77;
    }
    char dir[512];
    const char *base = getenv("ZT_TEST_TMPDIR") ? getenv("ZT_TEST_TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/cuda-mlp-%d", base, (int)getpid());
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
    const char *placements[][2] = {
        {"none", "cpu"}, {"cpu", "cpu"}, {"nvme", "cpu"}, {"none", "none"}, {"cpu", "none"}};
    int failed = 0;
    for (size_t k = 0; k < sizeof placements / sizeof placements[0]; k++) {
        double err = run(placements[k][0], placements[k][1], dir);
        if (!(err < 1e-4)) {
            fprintf(stderr, "params %s optimizer %s: relative L2 error %g >= 1e-4\n",
                    placements[k][0], placements[k][1], err);
            failed = 1;
        }
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return failed;
}

/* SPDX-License-Identifier: MIT */
/* GPT-2 on a GPU through ztier: 10 steps of the tiny config computed by the CUDA ops (the
 * CUDA kernels of gpt2_rows.h and cuBLAS in fp32 with TF32 off, parameters fetched and
 * released on the trainer's stream), against the same 10 steps on the CPU from the same
 * initial parameters and batches: the losses agree within 1e-3 relative at every step, for
 * the optimizer on the CPU and on the device; with the matmuls' inputs in bf16 (fp32
 * accumulation), within 2e-2. And resumed: 10 steps in one run against 5 steps, a
 * checkpoint, a new runtime that loads it and 5 more steps: the same losses and the same
 * exported parameters, bit for bit (the kernels sum shared gradients in a fixed order, and
 * so does the device optimizer's norm). The activation checkpointing policies in bf16, TF32
 * and fp32 (and full with its checkpoints in host memory or on NVMe, zt_act_*_async, in bf16)
 * against the CPU within each precision's tolerance, full recompute the bits of keeping
 * everything, and the fc GEMM with its bias and GELU fused (and fcproj's backward with GELU's)
 * counted on the stand-in (check_policies).
 * bf16.enabled: the CUDA trainer (16-bit parameters widened and gradients narrowed on the
 * device) against the CPU trainer in bf16 within 2e-2, its h2d and d2h bytes per step (zt_stats)
 * against 2 B a parameter and half of fp32's, its fp32 scratch against the formula, no host
 * wait added; on the stand-in, a refused scratch allocation fails the fetch with a message.
 * bf16.enabled with bf16 matmuls: the blocks' weight matrices read by the GEMMs in 16 bits,
 * the widening path's losses bit for bit, within 2e-2 of the CPU, fewer elements widened and
 * a smaller fp32 scratch. bf16 activations (--precision bf16): the losses within 2e-2, the
 * model's allocation the count by hand for 2-byte activations.
 * Exits 77 (skipped) where no GPU is visible, as on this project's CI machines. */
#include "gpt2_model.h"
#include "gpt2_ops.h"
#include "gpt2_ztier.h"
#include "scratch.h"

#include <cuda_runtime_api.h>
#ifdef ZT_CUDA_FAKE
#include "cudasim.h" /* its allocation failures, its count of cuBLASLt's epilogues */
#include <cublasLt.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 4
#define T 16
#define STEPS 10

static void batch(int step, int vocab, int *tok, int *tgt)
{
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 7 + step * 13) % vocab;
        tgt[i] = (i * 5 + step * 3 + 1) % vocab;
    }
}

/* A run: steps [from, to) on `backend`, first loading the checkpoint in `load` when given,
 * then saving one into `save` and exporting the weights to `weights` when given. */
typedef struct run {
    const char *backend, *optimizer;
    gpt2_precision precision;
    int from, to;
    const char *load, *save, *weights;
    int policy; /* gpt2_policy: what the blocks keep for backward */
    /* GPT2_FULL_OFFLOAD: activation_checkpointing.device ("cpu", "nvme") and the NVMe folder */
    const char *act_home, *act_dir;
    int bf16; /* bf16.enabled: 16-bit parameters and gradients in ztier's buffers */
    /* when set, each step's h2d and d2h bytes (zt_stats) */
    unsigned long long *h2d, *d2h;
    unsigned long long *syncs; /* when set, the host's waits in fetch and release, all steps */
    size_t *scratch;           /* when set, gpt2_ztier_scratch_bytes at the end */
    int widen_all;             /* the GPU's ops without matmul_*_w16: every weight widened */
    long long *widened;        /* when set, the elements bf16_widen widened, all steps */
    size_t *activations;       /* when set, gpt2_model_activation_bytes of the run's model */
} run;

/* The ops' bf16_widen, counting the elements it widens. */
static void (*real_widen)(void *, float *, const unsigned short *, long long);
static long long widened_elements;
static void counting_widen(void *ctx, float *dst, const unsigned short *src, long long n)
{
    widened_elements += n;
    real_widen(ctx, dst, src, n);
}

/* Bytes of an activation on the run's ops (gpt2_ops' act_bytes), known before they exist:
 * the blocks' checkpoints are registered before commit. */
static int act_bytes(const run *r)
{
    return !strcmp(r->backend, "cuda") && r->precision == GPT2_BF16 ? 2 : 4;
}

/* losses[s] receives step s's loss. 0, or -1 with a message. */
static int train_run(const run *r, float *losses)
{
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
             " \"offload_optimizer\": {\"device\": \"%s\"},"
             " \"stage3_param_persistence_threshold\": 0},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}},"
             " \"activation_checkpointing\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
             " \"aio\": {\"block_size\": 4096},"
             " \"gradient_clipping\": 1.0, \"bf16\": {\"enabled\": %s},"
             " \"ztier\": {\"device_backend\": \"%s\","
             " \"comm_backend\": \"single\", \"hbm_capacity\": \"256M\"}}",
             r->optimizer, r->act_home ? r->act_home : "none", r->act_dir ? r->act_dir : "/tmp",
             r->bf16 ? "true" : "false", r->backend);
    gpt2_config c;
    gpt2_config_named("tiny", 64, &c);
    zt_runtime *rt = NULL;
    gpt2_ztier g;
    if (zt_runtime_create(NULL, cfg, &rt) != ZT_OK || gpt2_ztier_register(&g, rt, &c, 7) != ZT_OK ||
        (r->policy == GPT2_FULL_OFFLOAD &&
         gpt2_ztier_register_acts_as(&g, B, T, act_bytes(r)) != ZT_OK) ||
        zt_runtime_commit(rt) != ZT_OK || (r->load && zt_checkpoint_load(rt, r->load) != ZT_OK)) {
        fprintf(stderr, "%s: %s\n", r->backend, zt_last_error(rt));
        zt_runtime_destroy(rt);
        return -1;
    }
    int gpu = !strcmp(r->backend, "cuda");
    gpt2_ops ops = gpt2_ops_cpu;
    char why[256] = "";
    int device = -1;
    if (gpu &&
        (zt_stream_create(rt, &g.stream) != ZT_OK || zt_runtime_device(rt, &device) != ZT_OK ||
         gpt2_ops_cuda_create(&ops, g.stream, device, r->precision, why, sizeof why) != 0)) {
        fprintf(stderr, "cuda ops: %s %s\n", why, zt_last_error(rt));
        return -1;
    }
    if (r->widen_all)
        ops.matmul_forward_w16 = NULL, ops.matmul_backward_w16 = NULL;
    real_widen = ops.bf16_widen, widened_elements = 0;
    ops.bf16_widen = counting_widen;
    gpt2_ztier_compute_on(&g, &ops);
    gpt2_model *m = gpt2_model_create_on(&c, B, T, &ops, r->policy);
    gpt2_source src = gpt2_ztier_source(&g);
    gpt2_act_store store = gpt2_ztier_act_store(&g); /* on g.stream: the _async calls */
    if (r->policy == GPT2_FULL_OFFLOAD)
        gpt2_model_set_store(m, &store);
    int tok[B * T], tgt[B * T], rc = 0;
    for (int s = r->from; s < r->to && rc == 0; s++) {
        zt_stats before = ZT_STATS_INIT, after = ZT_STATS_INIT;
        zt_stats_get(rt, &before);
        batch(s, c.vocab, tok, tgt);
        rc = gpt2_forward(m, &src, tok, tgt, &losses[s]);
        if (rc == 0)
            rc = gpt2_backward(m, &src, NULL);
        if (rc == 0)
            rc = gpt2_model_status(m);
        if (rc == 0 && zt_step(rt, NULL, NULL) != ZT_OK)
            rc = -1;
        zt_stats_get(rt, &after);
        if (r->h2d)
            r->h2d[s] = after.h2d_bytes - before.h2d_bytes;
        if (r->d2h)
            r->d2h[s] = after.d2h_bytes - before.d2h_bytes;
        if (r->syncs)
            *r->syncs = after.host_syncs;
    }
    if (rc)
        fprintf(stderr, "%s: step failed (%d): %s %s\n", r->backend, rc, gpt2_ztier_error(&g),
                gpt2_model_status_text(m));
    if (rc == 0 && ((r->save && zt_checkpoint_save(rt, r->save) != ZT_OK) ||
                    (r->weights && gpt2_export_llmc(&g, r->weights) != ZT_OK))) {
        fprintf(stderr, "%s: save or export failed: %s\n", r->backend, zt_last_error(rt));
        rc = -1;
    }
    if (r->scratch)
        *r->scratch = gpt2_ztier_scratch_bytes(&g);
    if (r->widened)
        *r->widened = widened_elements;
    if (r->activations)
        *r->activations = gpt2_model_activation_bytes(m);
    gpt2_model_destroy(m);
    gpt2_ztier_compute_on(&g, NULL); /* the bf16 scratch, before its ops go */
    if (gpu)
        gpt2_ops_cuda_destroy(&ops);
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
    return rc ? -1 : 0;
}

static int train(const char *backend, const char *optimizer, gpt2_precision p, float *losses)
{
    run r = {.backend = backend, .optimizer = optimizer, .precision = p, .to = STEPS};
    return train_run(&r, losses);
}

/* 1 when the two files hold the same bytes. */
static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    for (int ca = 0, cb = 0; same && ca != EOF;)
        same = (ca = fgetc(fa)) == (cb = fgetc(fb));
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* 10 steps straight against 5, a checkpoint, and 5 more in a new runtime: 0 when the losses
 * and the exported weights are the same bits. */
static int check_resume(const char *optimizer, const char *dir)
{
    char ckpt[600], w_straight[600], w_resumed[600];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt-%s", dir, optimizer);
    snprintf(w_straight, sizeof w_straight, "%s/straight-%s.bin", dir, optimizer);
    snprintf(w_resumed, sizeof w_resumed, "%s/resumed-%s.bin", dir, optimizer);
    float straight[STEPS], resumed[STEPS];
    run a = {.backend = "cuda",
             .optimizer = optimizer,
             .precision = GPT2_BF16,
             .to = STEPS,
             .weights = w_straight};
    run b1 = {.backend = "cuda",
              .optimizer = optimizer,
              .precision = GPT2_BF16,
              .to = STEPS / 2,
              .save = ckpt};
    run b2 = {.backend = "cuda",
              .optimizer = optimizer,
              .precision = GPT2_BF16,
              .from = STEPS / 2,
              .to = STEPS,
              .load = ckpt,
              .weights = w_resumed};
    if (train_run(&a, straight) || train_run(&b1, resumed) || train_run(&b2, resumed))
        return 1;
    int same_losses = !memcmp(straight, resumed, sizeof straight);
    int same_weights = same_file(w_straight, w_resumed);
    for (int s = STEPS / 2; s < STEPS; s++)
        printf("resume, optimizer %-4s step %2d: loss straight %.9g resumed %.9g\n", optimizer,
               s + 1, (double)straight[s], (double)resumed[s]);
    printf("resume, optimizer %-4s: losses %s, weights %s\n", optimizer,
           same_losses ? "bit for bit" : "DIFFER", same_weights ? "bit for bit" : "DIFFER");
    return !(same_losses && same_weights);
}

/* The tolerance of the losses against the CPU trainer in fp32 (relative, at every step):
 * fp32 1e-3 (sums in other orders), bf16 2e-2 (8 significant bits), TF32 5e-3 (11
 * significant bits in the GEMMs' inputs: between the two). */
static double tolerance(gpt2_precision p)
{
    return p == GPT2_BF16 ? 2e-2 : p == GPT2_TF32 ? 5e-3 : 1e-3;
}
static const char *precision_name(gpt2_precision p)
{
    return p == GPT2_BF16 ? "bf16" : p == GPT2_TF32 ? "tf32" : "fp32";
}

/* The activation checkpointing policies on the GPU's kernels in precision p (the last two,
 * full+host and full+nvme, when all): each run's losses within p's tolerance of the CPU
 * trainer's in fp32 (cpu, its STEPS losses) at every step; full recompute (its checkpoints in device memory, or in
 * pinned host memory / on NVMe, handed over and back on the trainer's stream:
 * zt_act_save_async, zt_act_load_async) gives the losses and the weights of keeping
 * everything bit for bit (it runs the same forward again); selective recomputes GELU's output
 * from the kept pre-GELU values with the GELU kernel, where the forward's came from the fc
 * GEMM's epilogue (cuBLASLt's GELU, of the fp32 sum before the pre-GELU values are stored),
 * so it agrees within the tolerance, not bit for bit. On the stand-in the fused path is
 * counted: the fc forward is one cublasLtMatmul with _GELU_AUX_BIAS per block per forward
 * (twice a step under full: the recompute) and fcproj's backward one with _DGELU per block a
 * step; without the wiring (the CUDA ops' matmul_gelu_forward / matmul_dgelu_backward unset)
 * both counts are 0. 0 when all holds. */
static int check_policies(const char *dir, const float *cpu, gpt2_precision p, int all)
{
    static const char *names[] = {"none", "selective", "full", "full+host", "full+nvme"};
    static const char *homes[] = {NULL, NULL, NULL, "cpu", "nvme"};
    int runs = all ? 5 : 3, failed = 0;
    const char *pn = precision_name(p);
    float losses[5][STEPS];
    char weights[5][600];
    for (int k = 0; k < runs; k++) {
        snprintf(weights[k], sizeof weights[k], "%s/policy-%s-%s.bin", dir, pn, names[k]);
        run r = {.backend = "cuda",
                 .optimizer = "cpu",
                 .precision = p,
                 .to = STEPS,
                 .weights = weights[k],
                 .policy = k < 3 ? k : GPT2_FULL_OFFLOAD,
                 .act_home = homes[k],
                 .act_dir = dir};
#ifdef ZT_CUDA_FAKE
        unsigned long long f0 = cudasim_lt_matmuls(CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
        unsigned long long b0 = cudasim_lt_matmuls(CUBLASLT_EPILOGUE_DGELU);
#endif
        if (train_run(&r, losses[k]) != 0)
            return 1;
        double worst = 0;
        for (int s = 0; s < STEPS; s++) {
            double rel = fabs((double)losses[k][s] - cpu[s]) / fabs((double)cpu[s]);
            worst = rel > worst ? rel : worst;
        }
        printf("checkpoint-activations %-9s %s: losses within %.2g of the cpu's (tolerance "
               "%.0e)%s\n",
               names[k], pn, worst, tolerance(p), worst < tolerance(p) ? "" : " TOO FAR");
        failed |= !(worst < tolerance(p));
#ifdef ZT_CUDA_FAKE
        gpt2_config c;
        gpt2_config_named("tiny", 64, &c);
        unsigned long long fwd = cudasim_lt_matmuls(CUBLASLT_EPILOGUE_GELU_AUX_BIAS) - f0;
        unsigned long long bwd = cudasim_lt_matmuls(CUBLASLT_EPILOGUE_DGELU) - b0;
        unsigned long long want_f = (unsigned long long)(k >= 2 ? 2 : 1) * c.layers * STEPS;
        unsigned long long want_b = (unsigned long long)c.layers * STEPS;
        printf("checkpoint-activations %-9s %s: fused fc+GELU GEMMs %llu (want %llu), fused "
               "fcproj+GELU backward GEMMs %llu (want %llu)%s\n",
               names[k], pn, fwd, want_f, bwd, want_b,
               fwd == want_f && bwd == want_b ? "" : " WRONG");
        failed |= fwd != want_f || bwd != want_b;
#endif
    }
    for (int k = 2; k < runs; k++) {
        int same_losses = !memcmp(losses[0], losses[k], sizeof losses[0]);
        int same_weights = same_file(weights[0], weights[k]);
        printf("checkpoint-activations %-9s %s against none: losses %s, weights %s\n", names[k], pn,
               same_losses ? "bit for bit" : "DIFFER", same_weights ? "bit for bit" : "DIFFER");
        failed |= !(same_losses && same_weights);
    }
    return failed;
}

/* Parameters fetched in a micro-step (each fetch of a layer counted), in all, in the
 * embedding and in the largest other layer, from the parameter shapes and the model's own
 * list of its calls: what the bytes on the bus and the scratch must come to. */
static void fetched_numel(const gpt2_config *c, long long *fetched, long long *total,
                          long long *embedding, long long *largest_block)
{
    gpt2_call calls[256];
    int n = gpt2_micro_step_calls(c, calls, 256);
    long long per_layer[64] = {0};
    *fetched = *total = 0;
    for (int l = 0; l < gpt2_layer_count(c); l++)
        for (int k = 0; k < gpt2_layer_param_count(c, l); k++) {
            gpt2_param_info pi;
            gpt2_param_info_get(c, l, k, &pi);
            per_layer[l] += pi.shape[0] * (pi.ndim == 2 ? pi.shape[1] : 1);
        }
    *embedding = per_layer[0], *largest_block = 0;
    for (int l = 0; l < gpt2_layer_count(c); l++) {
        *total += per_layer[l];
        if (l > 0 && per_layer[l] > *largest_block)
            *largest_block = per_layer[l];
    }
    for (int i = 0; i < n; i++)
        if (!calls[i].release)
            *fetched += per_layer[calls[i].layer];
}

/* bf16.enabled on the GPU: the parameters cross to the device in 16 bits and the gradients
 * back in 16 bits (widened and narrowed on the device), against the CPU trainer in bf16 (the
 * host widens the same bits): the losses within 2e-2 relative at every step, this test's bf16
 * tolerance. And the bytes zt_stats counts each step are the formula's, 2 B a parameter per
 * fetch to the device and per gradient back (4 B with fp32 parameters): bf16 moves half. */
static int check_bf16(void)
{
    float cpu[STEPS], gpu[STEPS], gpu32[STEPS];
    unsigned long long h2d[STEPS], d2h[STEPS], h2d32[STEPS], d2h32[STEPS];
    run host = {.backend = "host", .optimizer = "cpu", .to = STEPS, .bf16 = 1};
    unsigned long long syncs = 0, syncs32 = 0;
    size_t scratch = 0;
    run cuda = {.backend = "cuda",
                .optimizer = "cpu",
                .to = STEPS,
                .bf16 = 1,
                .h2d = h2d,
                .d2h = d2h,
                .syncs = &syncs,
                .scratch = &scratch};
    run cuda32 = {.backend = "cuda",
                  .optimizer = "cpu",
                  .to = STEPS,
                  .h2d = h2d32,
                  .d2h = d2h32,
                  .syncs = &syncs32};
    if (train_run(&host, cpu) || train_run(&cuda, gpu) || train_run(&cuda32, gpu32))
        return 1;
    int failed = 0;
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs((double)gpu[s] - cpu[s]) / fabs((double)cpu[s]);
        printf("bf16 parameters step %2d: loss cpu %.6f cuda %.6f (relative %.2g)\n", s + 1,
               (double)cpu[s], (double)gpu[s], rel);
        failed |= !(rel < 2e-2);
    }
    gpt2_config c;
    gpt2_config_named("tiny", 64, &c);
    long long fetched, total, embedding, block;
    fetched_numel(&c, &fetched, &total, &embedding, &block);
    /* The layers fit the device (256M): after the first step each layer crosses once a step
     * (updated by the step, fetched for the forward pass, still there for the backward), its
     * gradients back once; the first step moves more (nothing is there yet: every fetch, and
     * the next step's forward read ahead), bf16 half of fp32 there too. */
    unsigned long long up = 0, up32 = 0, down = 0, down32 = 0;
    for (int s = 0; s < STEPS; s++) {
        int steady = s > 0;
        int ok = h2d[s] * 2 == h2d32[s] && d2h[s] * 2 == d2h32[s] &&
                 d2h[s] == 2ull * (unsigned long long)total &&
                 h2d[s] == 2ull * (unsigned long long)(steady ? total : fetched + total);
        printf("step %2d bytes: h2d bf16 %llu fp32 %llu (2 B x %s %lld), d2h bf16 %llu fp32 %llu "
               "(2 B x parameters %lld)%s\n",
               s + 1, h2d[s], h2d32[s], steady ? "parameters" : "(fetched + parameters)",
               steady ? 2 * total : 2 * (fetched + total), d2h[s], d2h32[s], 2 * total,
               ok ? "" : " WRONG");
        failed |= !ok;
        up += h2d[s], up32 += h2d32[s], down += d2h[s], down32 += d2h32[s];
    }
    double ratio = (double)(up + down) / (double)(up32 + down32);
    printf("bf16 moves %.3f of fp32's bytes over %d steps (h2d %llu / %llu, d2h %llu / %llu)\n",
           ratio, STEPS, up, up32, down, down32);
    failed |= !(ratio <= 0.55);
    /* widening and narrowing are queued on the stream: no wait of the host added (a wait per
     * layer would add 9 a step; the counts vary by one or two with timing, as a release's
     * poll finds the last gradient copy done or not) */
    printf("host waits in fetch and release over %d steps: bf16 %llu, fp32 %llu\n", STEPS, syncs,
           syncs32);
    failed |= !(syncs < syncs32 + STEPS);
    /* the device scratch the widening takes: the embedding's fp32 parameters and gradients
     * (held through backward) and the largest block's, reported as the model's memory */
    size_t want = 8 * (size_t)(embedding + block);
    printf("fp32 scratch on the device: %zu bytes (8 B x (embedding + largest block) = %zu)\n",
           scratch, want);
    failed |= scratch != want || gpt2_bf16_scratch_bytes(&c) != want;
    return failed;
}

/* bf16.enabled with bf16 matmuls (--precision bf16): the GEMMs read each block's four weight
 * matrices from ztier's 16-bit device buffers as they are, where they used to be widened to
 * fp32 and cast back to bf16 for every matmul, and add their gradients into ztier's 16-bit
 * gradient buffers (fp32 accumulation, one rounding to nearest even), where they used to go to
 * fp32 scratch and be narrowed at release. Widening and casting back is exact, and the one
 * rounding is the narrowing's, so the losses are those of the widening path (the ops without
 * matmul_*_w16) bit for bit, and within this test's bf16 tolerance (2e-2 relative) of the CPU
 * trainer in bf16; the elements widened over the run are fewer by the matrices of each block
 * fetch (forward and backward: 2 a block a step), and the fp32 scratch smaller by the
 * matrices' parameters and gradients. */
static int check_bf16_weights(void)
{
    float cpu[STEPS], w16[STEPS], wide[STEPS];
    long long n16 = 0, nwide = 0;
    size_t scratch16 = 0, scratch_wide = 0;
    run host = {.backend = "host", .optimizer = "cpu", .to = STEPS, .bf16 = 1};
    run cuda = {.backend = "cuda",
                .optimizer = "cpu",
                .precision = GPT2_BF16,
                .to = STEPS,
                .bf16 = 1,
                .widened = &n16,
                .scratch = &scratch16};
    run cuda_wide = cuda;
    cuda_wide.widen_all = 1, cuda_wide.widened = &nwide, cuda_wide.scratch = &scratch_wide;
    if (train_run(&host, cpu) || train_run(&cuda, w16) || train_run(&cuda_wide, wide))
        return 1;
    int failed = 0;
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs((double)w16[s] - cpu[s]) / fabs((double)cpu[s]);
        int same = !memcmp(&w16[s], &wide[s], sizeof(float));
        printf("bf16 weights read as they are, step %2d: loss cpu %.6f cuda %.6f (relative "
               "%.2g), %s the widening path\n",
               s + 1, (double)cpu[s], (double)w16[s], rel, same ? "the bits of" : "DIFFERS from");
        failed |= !(rel < 2e-2) || !same;
    }
    gpt2_config c;
    gpt2_config_named("tiny", 64, &c);
    long long matrices = 0;
    for (int k = 0; k < GPT2_BLOCK_PARAMS; k++) {
        gpt2_param_info pi;
        gpt2_param_info_get(&c, 1, k, &pi);
        matrices += pi.ndim == 2 ? pi.shape[0] * pi.shape[1] : 0;
    }
    long long want = nwide - (long long)STEPS * 2 * c.layers * matrices;
    printf("elements widened over %d steps: %lld (widening path %lld, less 2 x %d blocks x %lld "
           "a step = %lld)\n",
           STEPS, n16, nwide, c.layers, matrices, want);
    failed |= n16 != want;
    /* the fp32 scratch holds only a block's other parameters and their gradients: smaller by
     * the matrices' parameters and gradients (8 B an element), as gpt2_bf16_scratch_bytes_on
     * counts it for `ztier estimate` */
    size_t want16 = scratch_wide - 8 * (size_t)matrices;
    printf("fp32 scratch: %zu bytes (widening path %zu, less 8 B x %lld matrix elements = %zu)\n",
           scratch16, scratch_wide, matrices, want16);
    failed |= scratch16 != want16 || gpt2_bf16_scratch_bytes_on(&c, 1) != want16 ||
              gpt2_bf16_scratch_bytes_on(&c, 0) != scratch_wide;
    return failed;
}

/* --precision bf16 keeps the activations and their gradients in bf16 (gpt2_ops' act_bytes 2),
 * the GEMMs reading them as they are: the 10 steps' losses within this test's bf16 tolerance
 * (2e-2 relative, as the bf16 checks above) of the CPU trainer in fp32, with bf16.enabled too
 * (against the CPU trainer in bf16); the model's activations are the count by hand for tiny
 * (B 4, T 16, C 32, 2 heads of 16, Vp 64, every tensor a multiple of 16 bytes): 2 B for each
 * activation and activation gradient, 4 B for the layernorm statistics, the logsumexp and the
 * logits; fp32 (--precision fp32) 4 B for all, as before. The GPU's fused DGELU GEMM needs no
 * gradient at GELU's output: 11 B x T x C gradient tensors (4 of C, qkv's 3C, fch's 4C). */
static int check_bf16_activations(void)
{
    float cpu[STEPS], gpu[STEPS], cpu16[STEPS], gpu16[STEPS];
    size_t bytes16 = 0, bytes32 = 0;
    run host = {.backend = "host", .optimizer = "cpu", .to = STEPS};
    run cuda = {.backend = "cuda",
                .optimizer = "cpu",
                .precision = GPT2_BF16,
                .to = STEPS,
                .activations = &bytes16};
    run host16 = host, cuda16 = cuda, cuda32 = cuda;
    host16.bf16 = 1, cuda16.bf16 = 1, cuda16.activations = NULL;
    cuda32.precision = GPT2_FP32, cuda32.activations = &bytes32, cuda32.to = 1;
    float one[STEPS];
    if (train_run(&host, cpu) || train_run(&cuda, gpu) || train_run(&host16, cpu16) ||
        train_run(&cuda16, gpu16) || train_run(&cuda32, one))
        return 1;
    int failed = 0;
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs((double)gpu[s] - cpu[s]) / fabs((double)cpu[s]);
        double rel16 = fabs((double)gpu16[s] - cpu16[s]) / fabs((double)cpu16[s]);
        printf("bf16 activations step %2d: loss cpu %.6f cuda %.6f (relative %.2g); with "
               "bf16.enabled cpu %.6f cuda %.6f (relative %.2g)\n",
               s + 1, (double)cpu[s], (double)gpu[s], rel, (double)cpu16[s], (double)gpu16[s],
               rel16);
        failed |= !(rel < 2e-2) || !(rel16 < 2e-2);
    }
    const size_t L = 2, bt = B * T, ch = 32, nh = 2, vp = 64;
    size_t stats = 4 * bt + B * nh * T;            /* per block: 2 means, 2 rstds, the lse */
    size_t acts = 18 * bt * ch * L + 13 * bt * ch; /* blocks; encoded, ln_f, 11 gradients */
    size_t fp32 = stats * L + 2 * bt + bt * vp;    /* ... ln_f's statistics, the logits */
    size_t want16 = 2 * acts + 4 * fp32, want32 = 4 * acts + 4 * fp32;
    printf("activations: bf16 %zu bytes (by hand %zu), fp32 %zu bytes (by hand %zu)\n", bytes16,
           want16, bytes32, want32);
    failed |= bytes16 != want16 || bytes32 != want32;
    return failed;
}

#ifdef ZT_CUDA_FAKE
/* The device refuses the fp32 scratch of the first bf16 fetch: the fetch fails with
 * ZT_ERR_NOMEM and a message naming the scratch, its size and the fix, the layer released. */
static int check_scratch_refused(void)
{
    gpt2_config c;
    gpt2_config_named("tiny", 64, &c);
    zt_runtime *rt = NULL;
    gpt2_ztier g;
    gpt2_ops ops;
    char why[256];
    int device = -1;
    if (zt_runtime_create(NULL,
                          "{\"bf16\": {\"enabled\": true}, \"ztier\": {\"device_backend\": "
                          "\"cuda\", \"comm_backend\": \"single\"}}",
                          &rt) != ZT_OK ||
        gpt2_ztier_register(&g, rt, &c, 7) != ZT_OK || zt_runtime_commit(rt) != ZT_OK ||
        zt_stream_create(rt, &g.stream) != ZT_OK || zt_runtime_device(rt, &device) != ZT_OK ||
        gpt2_ops_cuda_create(&ops, g.stream, device, GPT2_FP32, why, sizeof why) != 0)
        return fprintf(stderr, "scratch check: %s %s\n", why, zt_last_error(rt)), 1;
    gpt2_ztier_compute_on(&g, &ops);
    gpt2_source src = gpt2_ztier_source(&g);
    float *p[GPT2_BLOCK_PARAMS];
    zt_status st = zt_fetch_async(rt, g.layer_ids[1], ZT_FORWARD, g.stream, &(zt_layer_view){0});
    if (st == ZT_OK) /* the layer's own memory first, so the next allocation is the scratch */
        st = zt_release_async(rt, g.layer_ids[1], ZT_FORWARD, g.stream);
    cudasim_fail_alloc_after(1);
    int rc = st == ZT_OK ? src.get(src.ctx, 1, 0, p, NULL) : -1;
    cudasim_fail_alloc_after(0);
    cudaGetLastError(); /* the refused cudaMalloc's error, which the next launch check reads */
    const char *msg = gpt2_ztier_error(&g);
    int ok = rc == ZT_ERR_NOMEM && strstr(msg, "fp32 copies of the bf16 layers") &&
             strstr(msg, "ztier.hbm_capacity") && gpt2_ztier_scratch_bytes(&g) == 0 &&
             zt_fetch_async(rt, g.layer_ids[1], ZT_FORWARD, g.stream, &(zt_layer_view){0}) ==
                 ZT_OK; /* released: fetched again */
    printf("bf16 scratch refused: %s (%s)\n", ok ? "failed with a message" : "WRONG", msg);
    zt_release_async(rt, g.layer_ids[1], ZT_FORWARD, g.stream);
    gpt2_ztier_compute_on(&g, NULL);
    gpt2_ops_cuda_destroy(&ops);
    gpt2_ztier_free(&g);
    zt_runtime_destroy(rt);
    return !ok;
}
#endif

/* The CUDA trainer's losses against the CPU's for each optimizer and precision, and the bf16
 * checks. */
static int check_losses(void)
{
    const char *optimizers[] = {"cpu", "none", "cpu"};
    const gpt2_precision precision[] = {GPT2_FP32, GPT2_FP32, GPT2_BF16};
    int failed = 0;
    for (int k = 0; k < 3; k++) {
        float cpu[STEPS], gpu[STEPS];
        double tol = precision[k] == GPT2_BF16 ? 2e-2 : 1e-3;
        if (train("host", optimizers[k], GPT2_FP32, cpu) != 0 ||
            train("cuda", optimizers[k], precision[k], gpu) != 0)
            return 1;
        for (int s = 0; s < STEPS; s++) {
            double rel = fabs((double)gpu[s] - cpu[s]) / fabs((double)cpu[s]);
            printf("optimizer %-4s %s step %2d: loss cpu %.6f cuda %.6f (relative %.2g)\n",
                   optimizers[k], precision[k] == GPT2_BF16 ? "bf16" : "fp32", s + 1,
                   (double)cpu[s], (double)gpu[s], rel);
            failed |= !(rel < tol);
        }
    }
    failed |= check_bf16();
    failed |= check_bf16_weights();
    failed |= check_bf16_activations();
#ifdef ZT_CUDA_FAKE
    failed |= check_scratch_refused();
#endif
    return failed;
}

/* The activation policies in each precision against the CPU trainer in fp32 (optimizer on
 * the CPU). */
static int check_all_policies(const char *dir)
{
    float cpu32[STEPS];
    if (train("host", "cpu", GPT2_FP32, cpu32) != 0)
        return 1;
    return check_policies(dir, cpu32, GPT2_BF16, 1) | check_policies(dir, cpu32, GPT2_TF32, 0) |
           check_policies(dir, cpu32, GPT2_FP32, 0);
}

/* argv[1]: "losses", "resume" or "policies" runs that part alone (ctest runs the three side by
 * side: each is minutes under the sanitizers); none runs all. */
int main(int argc, char **argv)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no GPU visible: skipping\n");
        return 77;
    }
    const char *part = argc > 1 ? argv[1] : "all";
    int all = strcmp(part, "all") == 0;
    if (!all && strcmp(part, "losses") && strcmp(part, "resume") && strcmp(part, "policies")) {
        fprintf(stderr, "usage: test_gpt2_cuda_train [losses|resume|policies]\n");
        return 2;
    }
    int failed = 0;
    if (all || strcmp(part, "losses") == 0)
        failed |= check_losses();
    char dir[512];
    scratch_make("gpt2-cuda-resume", dir, sizeof dir);
    if (all || strcmp(part, "resume") == 0)
        failed |= check_resume("cpu", dir) | check_resume("none", dir);
    if (all || strcmp(part, "policies") == 0)
        failed |= check_all_policies(dir);
    if (scratch_remove(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return failed;
}

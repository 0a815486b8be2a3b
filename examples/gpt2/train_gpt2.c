/* SPDX-License-Identifier: MIT */
/* zt_gpt2: trains GPT-2 with every parameter, gradient and optimizer state owned by ztier
 * and fetched per layer. Runs as data-parallel ranks under mpirun (each rank takes its rows
 * of every global batch; rank 0 prints).
 *
 *   zt_gpt2 [--config tiny|d12|d24|d36|d48|d<L>c<C>] [--vocab byte|gpt2|N] (--data shard.bin | --text file)
 *           [--batch B] [--seq T] [--steps N] [--accum K] [--lr LR] [--seed S]
 *           [--ds-config ds.json] [--nvme DIR] [--hbm SIZE] [--eval-every N]
 *           [--checkpoint DIR [--save-every N] [--keep N] [--reuse-files]] [--resume DIR] [--init model.bin]
 *           [--export model.bin] [--safetensors model.safetensors] [--threads N]
 *           [--device auto|cpu|cuda] [--precision bf16|tf32|fp32]
 *           [--checkpoint-activations none|selective|full] [--demo DIR]
 *           [--offload-activations none|host|nvme] [--zero-stage 0|1|2|3]
 *   zt_gpt2 --text file --write-shard out.bin     (byte-level text -> llm.c token shard)
 *
 * --threads N: the matmuls (OpenBLAS) and ztier's optimizer pool each use N threads; they
 * run one after the other, so the default is every online core for both. --device cuda
 * computes on the GPU (the CUDA kernels of gpt2_rows.h and cuBLAS on a stream of ztier's cuda
 * backend; fp32 parameters); auto, the default, is cuda when this build has CUDA and a GPU
 * is usable, else cpu, and the first line says which and why. --precision: the GPU's matmuls
 * with bf16 inputs and fp32 accumulation (the default), in TF32, or in fp32 with TF32 off
 * (the CPU computes in fp32). --checkpoint-activations picks what each block keeps for its
 * backward: none (everything), selective (no layernorm or GELU outputs: recomputed; also
 * --recompute) or full (only its output: the block's forward runs again in backward); the
 * same results bit for bit, in less activation memory. --offload-activations host|nvme (or
 * the configuration's activation_checkpointing.device / cpu_checkpointing) hands full's
 * checkpoints, each block's input, to ztier (zt_act_save), which keeps them in pinned host
 * memory or on NVMe (in --nvme's folder) and brings them back ahead of each block's backward;
 * the model then keeps two block outputs instead of one per block.
 *
 * --demo DIR (what `make demo` runs) sizes the run for the device it computes on, for what
 * --batch, --seq, --hbm and --nvme leave unset (a sequence at most the model's context): on
 * the CPU batch 4 x 64 tokens, a 512M
 * device budget and parameters and optimizer state on NVMe in DIR; on a GPU batch 16 x 1024
 * tokens (at most the context), a 1G device budget (less than GPT-2 124M's model state) with
 * parameters and optimizer state in pinned host memory and the optimizer's updates
 * overlapped with the next forward pass (ztier.overlap_step "on"). Without --demo the
 * defaults are batch 4 x 64 (or the context) with everything in host memory.
 *
 * --vocab byte (= 256) trains a byte-level model on --text; the default is GPT-2's 50257
 * (padded to 50304 rows of wte). --batch is the global batch. The configuration is the
 * built-in one (everything offloaded to host memory, AdamW with lr 3e-4) or --ds-config's
 * file; the options given on the command line (--lr, --nvme, --hbm, --accum, --keep) are set
 * over it with the typed setters (zt_config_set_string, _int, _double: a folder named "1234"
 * or "null" is a folder). --checkpoint DIR saves into DIR/step-N folders and keeps the
 * newest --keep (default 2), --reuse-files overwriting the files of the one it removed
 * (ztier.checkpoint_reuse_files); --resume DIR continues from DIR's latest checkpoint. --init
 * starts from the weights of an llm.c model file (fp32 or bf16) of the same shape, with a
 * fresh optimizer.
 * --zero-stage N sets zero_optimization.stage; below 3 the parameters stay on the device
 * (offload_param "none", and --nvme holds only the optimizer state), and stage 0 keeps the
 * optimizer there too. --eval-every N prints the loss of a fixed evaluation batch every N steps, computed with
 * ZT_INFERENCE fetches. One line per optimizer step: the loss (rank 0's rows), time,
 * tokens/s, each tier's current/peak bytes and the bytes moved in the step; a summary at the
 * end. Ctrl-C stops at the next step boundary (a second one kills the program). */
#include "dataloader.h"
#include "gpt2_kernels.h"
#include "gpt2_ops.h"
#include "gpt2_ztier.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct options {
    const char *config, *data, *text, *ds_config, *nvme, *hbm, *checkpoint, *resume, *init;
    const char *export_llmc, *export_st, *write_shard;
    const char *lr;        /* --lr as given (checked to be a finite number) */
    const char *device;    /* "cpu", "cuda" (the GPU, ztier's cuda backend), "auto" */
    const char *precision; /* the GPU's matmuls: "bf16" (the default), "tf32" or "fp32" */
    const char *demo;      /* --demo DIR: sizes for the device (DIR: the CPU demo's NVMe folder) */
    const char *ckpt_act;  /* --checkpoint-activations none|selective|full */
    const char *offload_act; /* --offload-activations none|host|nvme (NULL: the config's) */
    int vocab, batch, seq, steps, accum, save_every, eval_every;
    int keep;       /* --keep (0: the config's) */
    int reuse;      /* --reuse-files: ztier.checkpoint_reuse_files */
    int threads;    /* the matmuls' and the optimizer's threads (0: the online cores) */
    int policy;     /* --checkpoint-activations (gpt2_policy); --recompute: selective */
    int zero_stage; /* --zero-stage: zero_optimization.stage (-1: the configuration's) */
    uint64_t seed;
} options;

static volatile sig_atomic_t stop_requested;
static void on_sigint(int sig) { (void)sig, stop_requested = 1; }

static void catch_sigint(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND; /* the second Ctrl-C is not caught: it ends the program */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds since this process started (the kernel's start time, so the loader, MPI's start
 * and the model's set-up count too); -1 where /proc does not say. */
static double since_process_start_s(void)
{
    FILE *f = fopen("/proc/self/stat", "r");
    char buf[1024];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long start = 0;
    for (int field = 2; p && *p && field < 22; field++) /* field 22: starttime, in ticks */
        p = strchr(p + 1, ' ');
    struct timespec ts;
    long hz = sysconf(_SC_CLK_TCK);
    if (!p || sscanf(p, " %llu", &start) != 1 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts))
        return -1;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - (double)start / (double)hz;
}

/* The least value of each integer option (-1 for batch and seq means "chosen by --demo or
 * the config"; 0 for the others means "the default" or "never"). */
static int option_min(const char *opt)
{
    return !strcmp(opt, "--vocab") || !strcmp(opt, "--batch") || !strcmp(opt, "--keep") ? 1
           : !strcmp(opt, "--seq")                                                      ? 2
                                                                                        : 0;
}

/* *n = v, a whole decimal integer in [option_min(opt), INT_MAX]; else a message naming the
 * option and -1. */
static int parse_count(const char *opt, const char *v, int *n)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno == ERANGE || x < option_min(opt) || x > INT_MAX) {
        fprintf(stderr, "zt_gpt2: %s '%s': give an integer from %d to %d\n", opt, v,
                option_min(opt), INT_MAX);
        return -1;
    }
    *n = (int)x;
    return 0;
}

/* --lr: a finite number, whole (the value reaches the config as a number, never as text). */
static int parse_lr(const char *v)
{
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x)) {
        fprintf(stderr, "zt_gpt2: --lr '%s': give a number, such as 3e-4\n", v);
        return -1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: zt_gpt2 [--config " GPT2_CONFIG_NAMES "] [--vocab byte|gpt2|N] "
                    "(--data FILE.bin | --text FILE) [--batch B] [--seq T] [--steps N] [--accum K] "
                    "[--lr LR] [--seed S] [--ds-config FILE] [--nvme DIR] [--hbm SIZE] "
                    "[--eval-every N] [--checkpoint DIR [--save-every N] [--keep N]] "
                    "[--resume DIR] [--init FILE.bin] [--export FILE] [--safetensors FILE] "
                    "[--device auto|cpu|cuda] [--reuse-files] "
                    "[--precision bf16|tf32|fp32] [--threads N] [--checkpoint-activations "
                    "none|selective|full] [--offload-activations none|host|nvme] [--demo DIR]\n"
                    "       zt_gpt2 --text FILE --write-shard OUT.bin\n");
    return 2;
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.config = "tiny",
                   .batch = -1,
                   .seq = -1,
                   .steps = 20,
                   .seed = 1337,
                   .device = "auto",
                   .zero_stage = -1,
                   .precision = NULL}; /* batch, seq: -1 until chosen */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--recompute")) { /* a flag: no value */
            o->policy = GPT2_SELECTIVE;
            continue;
        }
        if (!strcmp(a, "--reuse-files")) {
            o->reuse = 1;
            continue;
        }
        if (v && !strcmp(a, "--vocab") && (!strcmp(v, "byte") || !strcmp(v, "gpt2"))) {
            o->vocab = !strcmp(v, "byte") ? 256 : 50257;
            i++;
            continue;
        }
        const char **s = !strcmp(a, "--config")                   ? &o->config
                         : !strcmp(a, "--data")                   ? &o->data
                         : !strcmp(a, "--text")                   ? &o->text
                         : !strcmp(a, "--ds-config")              ? &o->ds_config
                         : !strcmp(a, "--nvme")                   ? &o->nvme
                         : !strcmp(a, "--hbm")                    ? &o->hbm
                         : !strcmp(a, "--checkpoint")             ? &o->checkpoint
                         : !strcmp(a, "--resume")                 ? &o->resume
                         : !strcmp(a, "--init")                   ? &o->init
                         : !strcmp(a, "--export")                 ? &o->export_llmc
                         : !strcmp(a, "--safetensors")            ? &o->export_st
                         : !strcmp(a, "--lr")                     ? &o->lr
                         : !strcmp(a, "--write-shard")            ? &o->write_shard
                         : !strcmp(a, "--device")                 ? &o->device
                         : !strcmp(a, "--precision")              ? &o->precision
                         : !strcmp(a, "--demo")                   ? &o->demo
                         : !strcmp(a, "--checkpoint-activations") ? &o->ckpt_act
                         : !strcmp(a, "--offload-activations")    ? &o->offload_act
                                                                  : NULL;
        int *n = !strcmp(a, "--vocab")        ? &o->vocab
                 : !strcmp(a, "--batch")      ? &o->batch
                 : !strcmp(a, "--seq")        ? &o->seq
                 : !strcmp(a, "--steps")      ? &o->steps
                 : !strcmp(a, "--accum")      ? &o->accum
                 : !strcmp(a, "--save-every") ? &o->save_every
                 : !strcmp(a, "--eval-every") ? &o->eval_every
                 : !strcmp(a, "--threads")    ? &o->threads
                 : !strcmp(a, "--zero-stage") ? &o->zero_stage
                 : !strcmp(a, "--keep")       ? &o->keep
                                              : NULL;
        if (!v || (!s && !n && strcmp(a, "--seed")))
            return usage();
        if (s == &o->lr && parse_lr(v) != 0)
            return usage();
        if (s)
            *s = v;
        else if (n && parse_count(a, v, n) != 0)
            return usage();
        else if (!n)
            o->seed = strtoull(v, NULL, 10);
        i++;
    }
    if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda") && strcmp(o->device, "auto")) {
        fprintf(stderr, "zt_gpt2: --device is auto, cpu or cuda\n");
        return usage();
    }
    if (o->ckpt_act && (o->policy = gpt2_policy_parse(o->ckpt_act)) < 0) {
        fprintf(stderr, "zt_gpt2: --checkpoint-activations is none, selective or full\n");
        return usage();
    }
    if (o->offload_act && strcmp(o->offload_act, "none") && strcmp(o->offload_act, "host") &&
        strcmp(o->offload_act, "nvme")) {
        fprintf(stderr, "zt_gpt2: --offload-activations is none, host or nvme\n");
        return usage();
    }
    if (o->offload_act && strcmp(o->offload_act, "none") && o->policy != GPT2_FULL) {
        fprintf(stderr,
                "zt_gpt2: --offload-activations %s moves each block's input, the one "
                "checkpoint --checkpoint-activations full keeps: add that option\n",
                o->offload_act);
        return usage();
    }
    if (o->precision && gpt2_precision_parse(o->precision) < 0) {
        fprintf(stderr, "zt_gpt2: --precision is bf16, tf32 or fp32 (the GPU's matmuls)\n");
        return usage();
    }
    if ((!o->data) == (!o->text) || (o->batch != -1 && o->batch < 1) ||
        (o->seq != -1 && o->seq < 2) || o->steps < 0 || o->accum < 0 || o->vocab < 0 ||
        o->eval_every < 0 || o->threads < 0 || o->zero_stage > 3 || (o->write_shard && !o->text) ||
        (o->init && o->resume)) {
        fprintf(stderr, "zt_gpt2: give exactly one of --data or --text (--write-shard needs "
                        "--text), at most one of --init and --resume, positive sizes and a "
                        "--zero-stage of 0 to 3\n");
        return usage();
    }
    return 0;
}

/* The built-in configuration, used without --ds-config: everything offloaded to host
 * memory (--nvme: to NVMe), AdamW. */
static const char *const builtin_config =
    "{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"cpu\"},"
    " \"offload_optimizer\": {\"device\": \"cpu\"}, \"stage3_prefetch_bucket_size\": 5e7},"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4, \"betas\": [0.9, 0.95],"
    " \"weight_decay\": 0.1}}, \"gradient_clipping\": 1.0, \"ztier\": {\"hbm_capacity\": \"2G\"}}";

/* The command line's settings over the configuration. User text (folders, sizes, names)
 * goes through the typed setters, never parsed as JSON: a folder named "1234" or "null" is
 * that folder. */
static zt_status set_text(zt_runtime *rt, const char *path, const char *value)
{
    return value ? zt_config_set_string(rt, path, value) : ZT_OK;
}

static zt_status apply_options(zt_runtime *rt, const options *o)
{
    int replicated = o->zero_stage >= 0 && o->zero_stage < 3; /* parameters on the device */
    const char *act = o->offload_act;
    zt_status st =
        o->lr ? zt_config_set_double(rt, "optimizer.params.lr", strtod(o->lr, NULL)) : ZT_OK;
    if (st == ZT_OK && o->zero_stage >= 0)
        st = zt_config_set_int(rt, "zero_optimization.stage", o->zero_stage);
    if (st == ZT_OK)
        st = set_text(rt, "zero_optimization.offload_param.device",
                      replicated ? "none"
                      : o->nvme  ? "nvme"
                                 : NULL);
    if (st == ZT_OK)
        st = set_text(rt, "zero_optimization.offload_optimizer.device",
                      o->zero_stage == 0 ? "none"
                      : o->nvme          ? "nvme"
                                         : NULL);
    if (st == ZT_OK)
        st = set_text(rt, "zero_optimization.offload_param.nvme_path", replicated ? NULL : o->nvme);
    if (st == ZT_OK)
        st = set_text(rt, "zero_optimization.offload_optimizer.nvme_path", o->nvme);
    if (st == ZT_OK)
        st = set_text(rt, "ztier.hbm_capacity", o->hbm);
    if (st == ZT_OK && o->accum > 0)
        st = zt_config_set_int(rt, "gradient_accumulation_steps", o->accum);
    if (st == ZT_OK && o->keep > 0)
        st = zt_config_set_int(rt, "ztier.checkpoint_keep", o->keep);
    if (st == ZT_OK && o->reuse)
        st = zt_config_set_bool(rt, "ztier.checkpoint_reuse_files", 1);
    if (st == ZT_OK && act)
        st = set_text(rt, "activation_checkpointing.device", !strcmp(act, "host") ? "cpu" : act);
    if (st == ZT_OK && act && !strcmp(act, "none"))
        st = zt_config_set_bool(rt, "activation_checkpointing.cpu_checkpointing", 0);
    if (st == ZT_OK && act && !strcmp(act, "nvme"))
        st = set_text(rt, "activation_checkpointing.nvme_path", o->nvme);
    /* one budget: the matmuls and the optimizer take turns on the same cores */
    if (st == ZT_OK)
        st = zt_config_set_int(rt, "ztier.optimizer_threads", o->threads);
    return st;
}

/* Progress of a long step on a terminal: the backward pass's layer once the step has run
 * for more than 2 s. Only rank 0 with stderr on a TTY passes this callback. */
static double progress_t0;
static int progress_shown;

static void progress(int layer, int total)
{
    if (now_s() - progress_t0 < 2.0)
        return;
    fprintf(stderr, "\r  step running: backward layer %d/%d ", layer, total);
    progress_shown = 1;
}

/* Bytes as "12.3M" or "1.23G" into one of a few rotating buffers (several per printf). */
static const char *human(uint64_t bytes)
{
    static char buf[16][16];
    static int next;
    char *b = buf[next++ % 16];
    if (bytes >= 1000000000ull)
        snprintf(b, sizeof buf[0], "%.2fG", (double)bytes / 1e9);
    else
        snprintf(b, sizeof buf[0], "%.1fM", (double)bytes / 1e6);
    return b;
}

/* s: counters now; p: counters at the start of the step (traffic is printed per step).
 * flops_per_s_peak > 0 (a known GPU): MFU, the model's FLOPs per token (gpt2_flops_per_token)
 * times tokens/s over that peak. */
static void print_step(int step, float loss, double dt, int tokens, double flops_per_token,
                       double flops_per_s_peak, const zt_step_info *info, const zt_stats *s,
                       const zt_stats *p)
{
    char mfu[32] = "";
    if (flops_per_s_peak > 0)
        snprintf(mfu, sizeof mfu, " | MFU %.3f", flops_per_token * tokens / dt / flops_per_s_peak);
    printf("step %4d | loss %.4f | %7.1f ms | %7.0f tok/s%s | norm %.3f%s | dev %s/%s host %s/%s "
           "nvme %s/%s | h2d %s d2h %s nvme r %s w %s\n",
           step, (double)loss, dt * 1e3, tokens / dt, mfu, (double)info->grad_norm,
           info->skipped ? " (skipped)" : "", human(s->device_bytes_current),
           human(s->device_bytes_peak), human(s->host_bytes_current), human(s->host_bytes_peak),
           human(s->nvme_bytes_current), human(s->nvme_bytes_peak),
           human(s->h2d_bytes - p->h2d_bytes), human(s->d2h_bytes - p->d2h_bytes),
           human(s->nvme_read_bytes - p->nvme_read_bytes),
           human(s->nvme_write_bytes - p->nvme_write_bytes));
    fflush(stdout);
}

/* Where the time of a run went. */
typedef struct timing {
    double forward, backward, optimizer, total;
    double *step_s; /* the last `cap` step times, for the median */
    int steps, cap;
} timing;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* act_home, model_act: where the activation checkpoints went, the model's own activations */
static void print_summary(const zt_stats *s, timing *tm, int tokens_per_step, const char *act_home,
                          size_t model_act)
{
    double total = tm->total > 0 ? tm->total : 1e-9, median = 0;
    int n = tm->steps < tm->cap ? tm->steps : tm->cap;
    if (n > 0) {
        qsort(tm->step_s, (size_t)n, sizeof(double), cmp_double);
        median = (tm->step_s[(n - 1) / 2] + tm->step_s[n / 2]) / 2;
    }
    printf("summary: %d steps in %.2f s: %.1f ms/step (median %.1f ms), %.0f tokens/s\n", tm->steps,
           tm->total, tm->steps ? tm->total / tm->steps * 1e3 : 0.0, median * 1e3,
           (double)tokens_per_step * tm->steps / total);
    printf("  time: forward %.2f s (%.0f%%), backward %.2f s (%.0f%%), optimizer %.2f s (%.0f%%); "
           "fetch stall %.2f s (%.0f%%); waits for collectives (exposed communication) %.2f s "
           "(%.0f%%)\n",
           tm->forward, 100 * tm->forward / total, tm->backward, 100 * tm->backward / total,
           tm->optimizer, 100 * tm->optimizer / total, s->fetch_wait_s,
           100 * s->fetch_wait_s / total, s->comm_wait_s, 100 * s->comm_wait_s / total);
    if (s->overlapped_updates) /* the NVMe step's layer updates run by the next forward */
        printf("  overlapped optimizer step: %llu layer updates run by later fetches, %.2f s "
               "(inside the fetch stall)\n",
               (unsigned long long)s->overlapped_updates, s->overlapped_update_s);
    if (s->act_saves) /* --offload-activations: the store's side of the activation memory */
        printf("  activation checkpoints: %llu saved (%s) to %s; their device buffers at most "
               "%llu bytes (model's activations %zu bytes); %llu of the loads read ahead, %.2f s "
               "waited\n",
               (unsigned long long)s->act_saves, human(s->act_saved_bytes), act_home,
               (unsigned long long)s->act_device_peak_bytes, model_act,
               (unsigned long long)s->act_prefetch_hits, s->act_wait_s);
    printf("  tier peaks: device %s of %s, host %s, nvme %s\n", human(s->device_bytes_peak),
           human(s->device_bytes_capacity), human(s->host_bytes_peak), human(s->nvme_bytes_peak));
    printf(
        "  moved: h2d %s, d2h %s, nvme read %s in %.1f s, written %s in %.1f s; sent to other "
        "ranks %s (%s per step)\n",
        human(s->h2d_bytes), human(s->d2h_bytes), human(s->nvme_read_bytes), s->nvme_read_s,
        human(s->nvme_write_bytes), s->nvme_write_s,
        human(s->comm_bytes_intra + s->comm_bytes_inter),
        human(tm->steps ? (s->comm_bytes_intra + s->comm_bytes_inter) / (uint64_t)tm->steps : 0));
    printf("  %llu fetches, %llu prefetched, %llu evictions, %llu skipped steps, %llu host waits "
           "in fetch and release\n",
           (unsigned long long)s->fetches, (unsigned long long)s->prefetch_hits,
           (unsigned long long)s->evictions, (unsigned long long)s->skipped_steps,
           (unsigned long long)s->host_syncs);
}

/* A resume's phases, in order (trainer.phase_at). */
enum { PHASE_MAIN, PHASE_RUNTIME, PHASE_REGISTERED, PHASE_COMMIT, PHASE_LOAD, RESUME_PHASES };
static const char *const phase_name[RESUME_PHASES] = {"main", "MPI and config", "model registered",
                                                      "commit", "load"};

typedef struct trainer {
    options o;
    gpt2_config c;
    zt_runtime *rt;
    gpt2_ztier g;
    gpt2_model *model;
    gpt2_ops ops;      /* where the model computes (--device) */
    double peak_flops; /* the GPU's dense bf16 peak (FLOP/s) for MFU; 0 on the CPU */
    token_data data;
    int rank, world, rows;
    int *inputs, *targets;
    const char *act_home; /* GPT2_FULL_OFFLOAD: where the blocks' inputs wait, in words */
    double load_s;        /* --resume: the checkpoint load's own time */
    /* --resume: seconds from the process's start to each phase's end (resume_phase), printed
     * with the first step's start: where a restart's time goes */
    double phase_at[RESUME_PHASES];
} trainer;

/* The exit status of a run that lost another rank (it died, froze or its network went down;
 * or it failed and said why in its own output): the checkpoints are intact, and --resume
 * continues on the ranks still available (scripts/train-with-restarts.sh). EX_TEMPFAIL. */
#define EXIT_RANK_LOST 75

/* The exit status of a failed ztier call with status st, after its message. */
static int exit_status(trainer *t, zt_status st)
{
    if (st != ZT_ERR_COMM)
        return 1;
    fprintf(stderr,
            "zt_gpt2: a collective with the other ranks failed: a rank was lost (it died, froze "
            "or its network went down) or failed and said why in its own output; %s: exit "
            "status %d\n",
            t->o.checkpoint ? "the checkpoints are intact: continue with --resume on the ranks "
                              "still available"
                            : "nothing was saved (no --checkpoint)",
            EXIT_RANK_LOST);
    return EXIT_RANK_LOST;
}

static int fail(trainer *t, const char *what)
{
    fprintf(stderr, "zt_gpt2: %s: %s\n", what, t->rt ? zt_last_error(t->rt) : "");
    return t->rt ? exit_status(t, zt_last_status(t->rt)) : 1;
}

/* A failed forward/backward: the source knows why (a dtype it cannot compute, or ztier). */
static int fail_pass(trainer *t, const char *what)
{
    fprintf(stderr, "zt_gpt2: %s: %s\n", what, gpt2_ztier_error(&t->g));
    return exit_status(t, t->g.last);
}

/* A failed export or import (st): gpt2_ztier_error says why. */
static int fail_file(trainer *t, const char *what, zt_status st)
{
    fprintf(stderr, "zt_gpt2: %s: %s\n", what, gpt2_ztier_error(&t->g));
    return exit_status(t, st);
}

/* What the command line left unset, for the device the run computes on (see --demo). */
static void choose_sizes(options *o, const gpt2_config *c)
{
    int gpu_demo = o->demo && !strcmp(o->device, "cuda");
    if (o->batch < 0)
        o->batch = gpu_demo ? 16 : 4;
    int seq = gpu_demo ? 1024 : 64;
    if (o->seq < 0) /* at most the context */
        o->seq = c->max_seq < seq ? c->max_seq : seq;
    if (o->demo && !o->hbm)
        o->hbm = gpu_demo ? "1G" : "512M";
    if (o->demo && !gpu_demo && !o->nvme)
        o->nvme = o->demo;
}

static int load_data(trainer *t)
{
    char err[512];
    const char *path = t->o.data ? t->o.data : t->o.text;
    int rc = t->o.data ? tokens_load_shard(path, &t->data, err, sizeof err)
                       : tokens_load_text(path, &t->data, err, sizeof err);
    if (rc != 0)
        return fprintf(stderr, "zt_gpt2: %s\n", err), 1;
    if (gpt2_config_named(t->o.config, t->o.vocab, &t->c) != 0)
        return fprintf(stderr, "zt_gpt2: unknown --config '%s' (" GPT2_CONFIG_HELP ")\n",
                       t->o.config),
               1;
    choose_sizes(&t->o, &t->c);
    if (t->data.max_token >= t->c.vocab)
        return fprintf(stderr,
                       "zt_gpt2: '%s' holds token %d, beyond the vocabulary of %d "
                       "(--vocab sets it; byte-level text needs 256)\n",
                       path, t->data.max_token, t->c.vocab),
               1;
    if (t->o.seq > t->c.max_seq)
        return fprintf(stderr,
                       "zt_gpt2: --seq %d is longer than the %d positions of config "
                       "%s\n",
                       t->o.seq, t->c.max_seq, t->o.config),
               1;
    if (t->data.n < (int64_t)t->o.seq + 2)
        return fprintf(stderr, "zt_gpt2: '%s' holds %lld tokens; --seq %d needs at least %d\n",
                       path, (long long)t->data.n, t->o.seq, t->o.seq + 2),
               1;
    return 0;
}

/* The CPU kernels, or on --device cuda the CUDA ones on a stream of ztier's cuda backend,
 * which fetch and release then order against (TF32 matmuls). */
static int open_ops(trainer *t)
{
    t->ops = gpt2_ops_cpu;
    if (strcmp(t->o.device, "cuda") != 0)
        return 0;
#ifdef GPT2_HAVE_CUDA
    char why[256] = "";
    int device = -1;
    if (zt_stream_create(t->rt, &t->g.stream) != ZT_OK ||
        zt_runtime_device(t->rt, &device) != ZT_OK)
        return fail(t, "zt_stream_create");
    gpt2_precision p = (gpt2_precision)gpt2_precision_parse(t->o.precision);
    if (gpt2_ops_cuda_create(&t->ops, t->g.stream, device, p, why, sizeof why) != 0)
        return fprintf(stderr, "zt_gpt2: --device cuda: %s\n", why), 1;
    gpt2_ztier_compute_on(&t->g, &t->ops); /* bf16 layers widened on the GPU */
    char name[256];
    t->peak_flops = gpt2_cuda_bf16_peak(name, sizeof name);
    if (t->peak_flops > 0)
        printf("zt_gpt2: MFU is counted against the %s's dense bf16 peak, %.0f TFLOPS; the "
               "matmuls run in %s%s\n",
               name, t->peak_flops / 1e12, t->o.precision,
               p == GPT2_BF16 ? "" : ", whose peak is about half of it or less");
    return 0;
#else
    return fprintf(stderr, "zt_gpt2: --device cuda: this build has no CUDA (rebuild where the "
                           "CUDA toolkit is installed)\n"),
           1;
#endif
}

static void close_ops(trainer *t)
{
#ifdef GPT2_HAVE_CUDA
    gpt2_ztier_compute_on(&t->g, NULL); /* its scratch goes with the ops */
    if (t->ops.ctx)
        gpt2_ops_cuda_destroy(&t->ops);
#else
    (void)t;
#endif
}

/* --device auto: cuda when this build has CUDA and a GPU is usable, else cpu; *why says
 * which and why. */
static const char *resolve_device(const char *device, char *why, size_t len)
{
    if (strcmp(device, "auto") != 0) {
        snprintf(why, len, "--device %s", device);
        return device;
    }
#ifdef GPT2_HAVE_CUDA
    char name[256] = "", reason[256] = "";
    if (gpt2_cuda_usable(name, sizeof name, reason, sizeof reason)) {
        snprintf(why, len, "%s", name);
        return "cuda";
    }
    snprintf(why, len, "%s", reason);
#else
    snprintf(why, len, "this build has no CUDA");
#endif
    return "cpu";
}

/* Full checkpoints go to ztier's activation store when the configuration (or
 * --offload-activations) sends them to host memory or NVMe: the model keeps two block
 * outputs instead of one per block. Before commit: the blocks register their size. */
static int choose_offload(trainer *t)
{
    const char *home = "none";
    if (zt_act_home(t->rt, &home) != ZT_OK)
        return fail(t, "zt_act_home");
    if (!strcmp(home, "none"))
        return 0;
    t->act_home = !strcmp(home, "cpu") ? "host memory" : "NVMe";
    if (t->o.policy != GPT2_FULL) { /* the config asked, the policy keeps more than inputs */
        if (t->rank == 0)
            fprintf(stderr,
                    "zt_gpt2: warning: the configuration sends activation checkpoints to %s "
                    "(activation_checkpointing), but --checkpoint-activations is not full: "
                    "nothing is offloaded; add --checkpoint-activations full\n",
                    t->act_home);
        return 0;
    }
    t->o.policy = GPT2_FULL_OFFLOAD;
    /* the GPU in bf16 keeps its activations, checkpoints too, in 16 bits (gpt2_ops.h) */
    int act_bytes = !strcmp(t->o.device, "cuda") && !strcmp(t->o.precision, "bf16") ? 2 : 4;
    if (gpt2_ztier_register_acts_as(&t->g, t->rows, t->o.seq, act_bytes) != ZT_OK)
        return fail(t, "zt_act_register");
    return 0;
}

static int setup(trainer *t)
{
    char device_why[600];
    t->o.device = resolve_device(t->o.device, device_why, sizeof device_why);
    if (!strcmp(t->o.device, "cpu") && t->o.precision)
        fprintf(stderr,
                "zt_gpt2: --precision %s is for the GPU's matmuls; the CPU computes in "
                "fp32\n",
                t->o.precision);
    if (!t->o.precision) /* the default: bf16 inputs, fp32 accumulation */
        t->o.precision = "bf16";
    if (load_data(t) != 0) /* after the device: --demo sizes the run for it */
        return 1;
    /* --ds-config is read by the runtime, whose error names the file and the JSON path. */
    zt_options opts = ZT_OPTIONS_INIT;
    opts.config_path = t->o.ds_config;
    zt_status st = zt_runtime_create(&opts, t->o.ds_config ? NULL : builtin_config, &t->rt);
    if (st != ZT_OK)
        return fail(t, "zt_runtime_create");
    t->phase_at[PHASE_RUNTIME] = since_process_start_s();
    if (t->o.threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        t->o.threads = n > 0 ? (int)n : 1;
    }
    gpt2_set_threads(t->o.threads);
    if (apply_options(t->rt, &t->o) != ZT_OK)
        return fail(t, "the command line's settings");
    if (!strcmp(t->o.device, "cuda") &&
        zt_config_set_string(t->rt, "ztier.device_backend", "cuda") != ZT_OK)
        return fail(t, "--device cuda");
    if (t->o.demo && !strcmp(t->o.device, "cuda") && !t->o.ds_config &&
        zt_config_set_string(t->rt, "ztier.overlap_step", "on") != ZT_OK)
        return fail(t, "--demo on the GPU");
    zt_optimizer_info oi = ZT_OPTIMIZER_INFO_INIT; /* --accum, or the config's */
    if (zt_optimizer_get(t->rt, &oi) != ZT_OK)
        return fail(t, "zt_optimizer_get");
    t->o.accum = oi.gradient_accumulation_steps;
    zt_runtime_rank(t->rt, &t->rank, &t->world);
    if (t->o.batch % t->world)
        return fprintf(stderr, "zt_gpt2: --batch %d does not split over %d ranks\n", t->o.batch,
                       t->world),
               1;
    t->rows = t->o.batch / t->world;
    if ((st = gpt2_ztier_register(&t->g, t->rt, &t->c, t->o.seed)) != ZT_OK)
        return fail(t, "registering GPT-2");
    if (choose_offload(t) != 0)
        return 1;
    /* the load overwrites every value: commit need not initialise them first */
    if (t->o.resume && zt_runtime_expect_load(t->rt) != ZT_OK)
        return fail(t, "zt_runtime_expect_load");
    t->phase_at[PHASE_REGISTERED] = since_process_start_s();
    if ((st = zt_runtime_commit(t->rt)) != ZT_OK)
        return fail(t, "zt_runtime_commit");
    t->phase_at[PHASE_COMMIT] = since_process_start_s();
    if (t->o.init && (st = gpt2_import_llmc(&t->g, t->o.init)) != ZT_OK)
        return fail_file(t, "--init", st);
    double load_t0 = now_s();
    if (t->o.resume && zt_checkpoint_load(t->rt, t->o.resume) != ZT_OK)
        return fail(t, "--resume");
    double load_s = t->load_s = now_s() - load_t0;
    t->phase_at[PHASE_LOAD] = since_process_start_s();
    if (t->o.resume && gpt2_ztier_check_loaded(&t->g) != ZT_OK)
        return fprintf(stderr, "zt_gpt2: --resume %s: %s\n", t->o.resume, t->g.error), 1;
    int64_t resumed = 0;
    if (t->o.resume && t->rank == 0 && zt_step_count(t->rt, &resumed) == ZT_OK)
        printf("resumed %s at step %lld on %d rank%s in %.3f s\n", t->o.resume, (long long)resumed,
               t->world, t->world > 1 ? "s" : "", load_s);
    if (open_ops(t) != 0)
        return 1;
    t->model = gpt2_model_create_on(&t->c, t->rows, t->o.seq, &t->ops, t->o.policy);
    if (t->model && t->o.policy == GPT2_FULL_OFFLOAD) {
        gpt2_act_store store = gpt2_ztier_act_store(&t->g);
        gpt2_model_set_store(t->model, &store);
    }
    t->inputs = malloc(sizeof(int) * (size_t)t->rows * (size_t)t->o.seq);
    t->targets = malloc(sizeof(int) * (size_t)t->rows * (size_t)t->o.seq);
    if (!t->model || !t->inputs || !t->targets)
        return fprintf(stderr, "zt_gpt2: out of memory for the activations of %d x %d tokens\n",
                       t->rows, t->o.seq),
               1;
    if (t->rank == 0) {
        printf("GPT-2 %s: %.2fM parameters (V %d, Vp %d, L %d, NH %d, C %d), %d ranks, batch %d "
               "x %d tokens, %d accumulation steps\n",
               t->o.config, (double)gpt2_num_params(&t->c) / 1e6, t->c.vocab, t->c.padded_vocab,
               t->c.layers, t->c.heads, t->c.channels, t->world, t->o.batch, t->o.seq, t->o.accum);
        printf("compute on %s (%s)\n", t->o.device, device_why);
        static const char *policies[] = {"none", "selective", "full", "full"};
        printf("activations %zu bytes per rank (--checkpoint-activations %s)",
               gpt2_model_activation_bytes(t->model), policies[t->o.policy]);
        if (t->o.policy == GPT2_FULL_OFFLOAD)
            printf(", and each block's input (%zu bytes) in %s",
                   gpt2_model_checkpoint_bytes(t->model), t->act_home);
        printf("\n");
        printf("per step: loss%s, time, tokens/s, grad norm; dev/host/nvme: current/peak bytes; "
               "h2d d2h nvme r/w: bytes moved in the step\n",
               t->world > 1 ? " of rank 0's rows" : "");
    }
    return 0;
}

static int save(trainer *t, const char *why)
{
    if (!t->o.checkpoint)
        return 0;
    double t0 = now_s();
    if (zt_checkpoint_save(t->rt, t->o.checkpoint) != ZT_OK)
        return fail(t, "checkpoint save");
    if (t->rank == 0)
        printf("checkpoint saved to %s (%s) in %.3f s\n", t->o.checkpoint, why, now_s() - t0);
    return 0;
}

/* One optimizer step: accum micro-steps of forward and backward, then zt_step. */
static int train_step(trainer *t, int64_t step, int show_progress, timing *tm, float *loss,
                      zt_step_info *info)
{
    gpt2_source src = gpt2_ztier_source(&t->g);
    float sum = 0;
    for (int k = 0; k < t->o.accum; k++) {
        float l = 0;
        if (tokens_batch(&t->data, step * t->o.accum + k, t->o.batch, t->o.seq, t->rank * t->rows,
                         t->rows, t->inputs, t->targets) != 0)
            return fprintf(stderr, "zt_gpt2: step %lld has no batch\n", (long long)step), 1;
        double a = now_s();
        if (gpt2_forward(t->model, &src, t->inputs, t->targets, &l) != 0)
            return fail_pass(t, "forward");
        double b = now_s();
        if (gpt2_backward(t->model, &src, show_progress ? progress : NULL) != 0)
            return fail_pass(t, "backward");
        if (gpt2_model_status(t->model) != 0)
            return fprintf(stderr, "zt_gpt2: a GPU kernel, copy or cuBLAS call failed: %s\n",
                           gpt2_model_status_text(t->model)),
                   1;
        tm->forward += b - a, tm->backward += now_s() - b, sum += l;
    }
    double c = now_s();
    if (zt_step(t->rt, NULL, info) != ZT_OK)
        return fail(t, "zt_step");
    tm->optimizer += now_s() - c;
    *loss = sum / (float)t->o.accum;
    return 0;
}

/* The loss of a fixed evaluation batch (batch 0 of the data), with ZT_INFERENCE fetches:
 * no gradients, and the recorded layer order of training stays undisturbed. */
static int evaluate(trainer *t)
{
    gpt2_source src = gpt2_ztier_source(&t->g);
    float loss = 0;
    tokens_batch(&t->data, 0, t->o.batch, t->o.seq, t->rank * t->rows, t->rows, t->inputs,
                 t->targets);
    t->g.inference = 1;
    int rc = gpt2_forward(t->model, &src, t->inputs, t->targets, &loss);
    t->g.inference = 0;
    if (rc != 0)
        return fail_pass(t, "evaluation forward");
    if (t->rank == 0)
        printf("eval | loss %.4f on the fixed evaluation batch (rank 0's rows)\n", (double)loss);
    return 0;
}

/* A resume's phases, each as the seconds it took after the one before (the first: the
 * process's start to main, the loader's part), and what follows the load to the first step. */
static void print_phases(const double *at, double started)
{
    printf("resume phases (s):");
    for (int i = 0; i < RESUME_PHASES; i++)
        printf(" %s %.3f,", phase_name[i], at[i] - (i ? at[i - 1] : 0));
    printf(" to the first step %.3f\n", started - at[RESUME_PHASES - 1]);
}

static int train(trainer *t)
{
    int show_progress = isatty(2) && t->rank == 0;
    timing tm = {0, 0, 0, 0, NULL, 0, t->o.steps < 65536 ? t->o.steps + 1 : 65536};
    if (!(tm.step_s = calloc((size_t)tm.cap, sizeof(double))))
        return fprintf(stderr, "zt_gpt2: out of memory\n"), 1;
    zt_stats s = ZT_STATS_INIT, prev = ZT_STATS_INIT;
    int64_t first = 0;
    if (zt_step_count(t->rt, &first) != ZT_OK) /* > 0 after --resume */
        return free(tm.step_s), fail(t, "zt_step_count");
    if (first > INT64_MAX / t->o.accum / t->o.batch)
        return free(tm.step_s),
               fprintf(stderr,
                       "zt_gpt2: the checkpoint is at step %lld, "
                       "beyond any batch this data can index\n",
                       (long long)first),
               1;
    if (first >= t->o.steps && t->rank == 0 && t->o.steps > 0)
        printf("the checkpoint is at step %lld and --steps is %d: nothing left to train\n",
               (long long)first, t->o.steps);
    double started = since_process_start_s();
    if (t->o.resume && t->rank == 0 &&
        started >= 0) /* what a restart costs, bench/checkpoints.sh */
        printf("resume: the first step starts %.3f s after the process started (the load %.3f s "
               "of it)\n",
               started, t->load_s);
    if (t->o.resume && t->rank == 0 && started >= 0)
        print_phases(t->phase_at, started);
    zt_stats_get(t->rt, &s);
    for (int64_t step = first; step < t->o.steps && !stop_requested; step++) {
        float loss = 0;
        zt_step_info info = ZT_STEP_INFO_INIT;
        prev = s;
        progress_t0 = now_s();
        int rc = train_step(t, step, show_progress, &tm, &loss, &info);
        if (rc != 0)
            return free(tm.step_s), rc;
        double dt = now_s() - progress_t0;
        if (progress_shown)
            fprintf(stderr, "\r%40s\r", ""), progress_shown = 0;
        zt_stats_get(t->rt, &s);
        tm.total += dt;
        tm.step_s[tm.steps++ % tm.cap] = dt;
        if (t->rank == 0)
            print_step((int)step + 1, loss, dt, t->o.batch * t->o.seq * t->o.accum,
                       gpt2_flops_per_token(&t->c, t->o.seq), t->peak_flops, &info, &s, &prev);
        if (t->o.save_every > 0 && (step + 1) % t->o.save_every == 0 &&
            (rc = save(t, "periodic")) != 0)
            return free(tm.step_s), rc;
        if (t->o.eval_every > 0 && (step + 1) % t->o.eval_every == 0 && (rc = evaluate(t)) != 0)
            return free(tm.step_s), rc;
    }
    if (stop_requested && t->rank == 0)
        printf("stopped by Ctrl-C at a step boundary\n");
    /* The checkpoint call site for an interrupted run: with --checkpoint DIR the state is
     * saved here, after the last complete step, so --resume DIR continues from it. */
    int rc = stop_requested ? save(t, "interrupted") : 0;
    if (rc != 0)
        return free(tm.step_s), rc;
    if (t->rank == 0)
        print_summary(&s, &tm, t->o.batch * t->o.seq * t->o.accum, t->act_home,
                      gpt2_model_activation_bytes(t->model));
    if (t->rank == 0 && t->o.steps > first) /* exact, for bench/bus_bytes.sh */
        printf("  last step's bytes: h2d %llu, d2h %llu (activation checkpoints saved %llu); the "
               "model's own %s memory: activations %zu, fp32 copies of bf16 layers %zu\n",
               (unsigned long long)(s.h2d_bytes - prev.h2d_bytes),
               (unsigned long long)(s.d2h_bytes - prev.d2h_bytes),
               (unsigned long long)(s.act_saved_bytes - prev.act_saved_bytes),
               t->g.stream ? "device" : "host", gpt2_model_activation_bytes(t->model),
               gpt2_ztier_scratch_bytes(&t->g));
    free(tm.step_s);
    return 0;
}

/* --write-shard: the byte-level tokens of a text file as an llm.c shard. */
static int write_shard(const char *text, const char *out)
{
    token_data d;
    char err[512];
    int rc = tokens_load_text(text, &d, err, sizeof err);
    if (rc == 0 && (rc = tokens_write_shard(out, &d, err, sizeof err)) == 0)
        printf("wrote %lld byte tokens of '%s' to '%s'\n", (long long)d.n, text, out);
    else
        fprintf(stderr, "zt_gpt2: %s\n", err);
    tokens_free(&d);
    return rc != 0;
}

static int finish(trainer *t)
{
    zt_status st = ZT_OK;
    if (t->o.export_llmc && (st = gpt2_export_llmc(&t->g, t->o.export_llmc)) != ZT_OK)
        return fail_file(t, "--export", st);
    if (t->o.export_st && (st = gpt2_export_safetensors(&t->g, t->o.export_st)) != ZT_OK)
        return fail_file(t, "--safetensors", st);
    return 0;
}

int main(int argc, char **argv)
{
    trainer t;
    memset(&t, 0, sizeof t);
    if (parse(argc, argv, &t.o) != 0)
        return 2;
    if (t.o.write_shard)
        return write_shard(t.o.text, t.o.write_shard);
    t.phase_at[PHASE_MAIN] = since_process_start_s();
    catch_sigint();
    int rc = setup(&t);
    if (rc == 0)
        rc = train(&t);
    if (rc == 0)
        rc = finish(&t);
    gpt2_model_destroy(t.model);
    close_ops(&t);
    gpt2_ztier_free(&t.g);
    zt_runtime_destroy(t.rt);
    tokens_free(&t.data);
    free(t.inputs), free(t.targets);
    return rc;
}

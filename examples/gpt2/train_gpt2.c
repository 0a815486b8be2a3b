/* zt_gpt2: trains GPT-2 with every parameter, gradient and optimizer state owned by ztier
 * and fetched per layer. Runs as data-parallel ranks under mpirun.
 *
 *   zt_gpt2 [--config tiny|d12|d24|d36|d48] [--vocab N] (--data shard.bin | --text file)
 *           [--batch B] [--seq T] [--steps N] [--accum K] [--lr LR] [--seed S]
 *           [--ds-config ds.json | --nvme DIR [--hbm SIZE]]
 *           [--checkpoint DIR [--save-every N]] [--resume DIR]
 *           [--export model.bin] [--safetensors model.safetensors]
 *
 * Ctrl-C stops at the next step boundary (saving a checkpoint when --checkpoint is given). */
#include "dataloader.h"
#include "gpt2_ztier.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct options {
    const char *config, *data, *text, *ds_config, *nvme, *hbm, *checkpoint, *resume;
    const char *export_llmc, *export_st;
    int vocab, batch, seq, steps, accum, save_every;
    float lr;
    uint64_t seed;
} options;

static volatile sig_atomic_t stop_requested;
static void on_sigint(int sig) { (void)sig, stop_requested = 1; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(void)
{
    fprintf(stderr, "usage: zt_gpt2 [--config tiny|d12|d24|d36|d48] [--vocab N] (--data FILE.bin "
                    "| --text FILE) [--batch B] [--seq T] [--steps N] [--accum K] [--lr LR] "
                    "[--seed S] [--ds-config FILE | --nvme DIR [--hbm SIZE]] [--checkpoint DIR "
                    "[--save-every N]] [--resume DIR] [--export FILE] [--safetensors FILE]\n");
    return 2;
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){"tiny", NULL, NULL, NULL, NULL, "2G", NULL, NULL, NULL, NULL,
                   0, 4, 64, 20, 1, 0, 3e-4f, 1337};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **s = !strcmp(a, "--config") ? &o->config : !strcmp(a, "--data") ? &o->data
                       : !strcmp(a, "--text") ? &o->text : !strcmp(a, "--ds-config") ? &o->ds_config
                       : !strcmp(a, "--nvme") ? &o->nvme : !strcmp(a, "--hbm") ? &o->hbm
                       : !strcmp(a, "--checkpoint") ? &o->checkpoint : !strcmp(a, "--resume") ? &o->resume
                       : !strcmp(a, "--export") ? &o->export_llmc
                       : !strcmp(a, "--safetensors") ? &o->export_st : NULL;
        int *n = !strcmp(a, "--vocab") ? &o->vocab : !strcmp(a, "--batch") ? &o->batch
               : !strcmp(a, "--seq") ? &o->seq : !strcmp(a, "--steps") ? &o->steps
               : !strcmp(a, "--accum") ? &o->accum : !strcmp(a, "--save-every") ? &o->save_every
               : NULL;
        if (!v || (!s && !n && strcmp(a, "--lr") && strcmp(a, "--seed")))
            return usage();
        if (s)
            *s = v;
        else if (n)
            *n = atoi(v);
        else if (!strcmp(a, "--lr"))
            o->lr = (float)atof(v);
        else
            o->seed = strtoull(v, NULL, 10);
        i++;
    }
    if ((!o->data) == (!o->text) || o->batch < 1 || o->seq < 2 || o->steps < 0 || o->accum < 1) {
        fprintf(stderr, "zt_gpt2: give exactly one of --data or --text, and positive sizes\n");
        return usage();
    }
    return 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (t && fread(t, 1, (size_t)n, f) == (size_t)n)
        t[n] = '\0';
    else
        free(t), t = NULL;
    fclose(f);
    return t;
}

/* The DeepSpeed config: the user's file, or a built-in one that offloads everything. */
static char *make_ds_config(const options *o)
{
    if (o->ds_config)
        return read_file(o->ds_config);
    char *cfg = malloc(4096);
    char offload[1200] = "\"device\": \"cpu\"";
    if (o->nvme)
        snprintf(offload, sizeof offload, "\"device\": \"nvme\", \"nvme_path\": \"%s\"", o->nvme);
    snprintf(cfg, 4096,
             "{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {%s},"
             " \"offload_optimizer\": {%s}, \"stage3_prefetch_bucket_size\": 5e7},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": %g, \"betas\": [0.9, 0.95],"
             " \"weight_decay\": 0.1}}, \"gradient_clipping\": 1.0,"
             " \"gradient_accumulation_steps\": %d,"
             " \"ztier\": {\"hbm_capacity\": \"%s\"}}",
             offload, offload, (double)o->lr, o->accum, o->hbm);
    return cfg;
}

static void progress(int layer, int total)
{
    fprintf(stderr, "\r  backward %3d/%-3d", layer, total);
}

static void print_step(int step, float loss, double dt, int tokens, const zt_step_info *info,
                       const zt_stats *s)
{
    printf("step %4d | loss %.4f | %7.1f ms | %8.0f tok/s | norm %.3f%s | dev %6.1f MB | host "
           "%7.1f MB | nvme r/w %.2f/%.2f GB\n",
           step, (double)loss, dt * 1e3, tokens / dt, (double)info->grad_norm,
           info->skipped ? " (skipped)" : "", (double)s->device_bytes_peak / 1e6,
           (double)s->host_bytes_current / 1e6, (double)s->nvme_read_bytes / 1e9,
           (double)s->nvme_write_bytes / 1e9);
    fflush(stdout);
}

static void print_summary(const zt_stats *s, double fwd, double bwd, double opt, int steps)
{
    printf("summary: %d steps; forward %.1f s, backward %.1f s, optimizer %.1f s; fetch stall "
           "%.2f s\n", steps, fwd, bwd, opt, s->fetch_wait_s);
    printf("  device peak %.1f MB of %.1f MB; host peak %.1f MB; NVMe %.1f MB (read %.2f GB in "
           "%.1f s, written %.2f GB in %.1f s)\n",
           (double)s->device_bytes_peak / 1e6, (double)s->device_bytes_capacity / 1e6,
           (double)s->host_bytes_peak / 1e6, (double)s->nvme_bytes_peak / 1e6,
           (double)s->nvme_read_bytes / 1e9, s->nvme_read_s, (double)s->nvme_write_bytes / 1e9,
           s->nvme_write_s);
    printf("  %llu fetches, %llu prefetched, %llu evictions, %llu skipped steps\n",
           (unsigned long long)s->fetches, (unsigned long long)s->prefetch_hits,
           (unsigned long long)s->evictions, (unsigned long long)s->skipped_steps);
}

typedef struct trainer {
    options o;
    gpt2_config c;
    zt_runtime *rt;
    gpt2_ztier g;
    gpt2_model *model;
    token_data data;
    int rank, world, rows;
    int *inputs, *targets;
} trainer;

static int fail(trainer *t, const char *what)
{
    fprintf(stderr, "zt_gpt2: %s: %s\n", what, t->rt ? zt_last_error(t->rt) : "");
    return 1;
}

static int setup(trainer *t)
{
    char err[512];
    int rc = t->o.data ? tokens_load_shard(t->o.data, &t->data, err, sizeof err)
                       : tokens_load_text(t->o.text, &t->data, err, sizeof err);
    if (rc != 0)
        return fprintf(stderr, "zt_gpt2: %s\n", err), 1;
    if (gpt2_config_named(t->o.config, t->o.vocab, &t->c) != 0)
        return fprintf(stderr, "zt_gpt2: unknown --config '%s'\n", t->o.config), 1;
    if (t->data.max_token >= t->c.vocab)
        return fprintf(stderr, "zt_gpt2: the data holds token %d, beyond the vocabulary of %d\n",
                       t->data.max_token, t->c.vocab), 1;
    char *cfg = make_ds_config(&t->o);
    zt_status st = cfg ? zt_runtime_create(NULL, cfg, &t->rt) : ZT_ERR_CONFIG;
    free(cfg);
    if (st != ZT_OK)
        return fail(t, t->o.ds_config && !cfg ? "cannot read --ds-config" : "zt_runtime_create");
    zt_runtime_rank(t->rt, &t->rank, &t->world);
    if (t->o.batch % t->world)
        return fprintf(stderr, "zt_gpt2: --batch %d does not split over %d ranks\n", t->o.batch,
                       t->world), 1;
    t->rows = t->o.batch / t->world;
    if ((st = gpt2_ztier_register(&t->g, t->rt, &t->c, t->o.seed)) != ZT_OK)
        return fail(t, "registering GPT-2");
    if ((st = zt_runtime_commit(t->rt)) != ZT_OK)
        return fail(t, "zt_runtime_commit");
    if (t->o.resume && zt_checkpoint_load(t->rt, t->o.resume) != ZT_OK)
        return fail(t, "--resume");
    t->model = gpt2_model_create(&t->c, t->rows, t->o.seq);
    t->inputs = malloc(sizeof(int) * (size_t)t->rows * (size_t)t->o.seq);
    t->targets = malloc(sizeof(int) * (size_t)t->rows * (size_t)t->o.seq);
    if (!t->model || !t->inputs || !t->targets)
        return fprintf(stderr, "zt_gpt2: out of memory for activations (or --seq > %d)\n",
                       t->c.max_seq), 1;
    if (t->rank == 0)
        printf("GPT-2 %s: %.1fM parameters, %d layers, %d ranks, batch %d x %d tokens, %d "
               "accumulation steps\n", t->o.config, (double)gpt2_num_params(&t->c) / 1e6,
               t->c.layers, t->world, t->o.batch, t->o.seq, t->o.accum);
    return 0;
}

static int save(trainer *t, const char *why)
{
    if (!t->o.checkpoint)
        return 0;
    if (zt_checkpoint_save(t->rt, t->o.checkpoint) != ZT_OK)
        return fail(t, "checkpoint save");
    if (t->rank == 0)
        printf("checkpoint saved to %s (%s)\n", t->o.checkpoint, why);
    return 0;
}

static int train(trainer *t)
{
    gpt2_source src = gpt2_ztier_source(&t->g);
    int tty = isatty(2) && t->rank == 0;
    double fwd = 0, bwd = 0, opt = 0;
    zt_step_info info = {0};
    zt_stats s = ZT_STATS_INIT;
    int done = 0;
    int64_t first = 0;
    zt_step_count(t->rt, &first); /* > 0 after --resume */
    for (int64_t step = first; step < t->o.steps && !stop_requested; step++) {
        double t0 = now_s();
        float loss = 0, sum = 0;
        for (int k = 0; k < t->o.accum; k++) {
            tokens_batch(&t->data, step * t->o.accum + k, t->o.batch, t->o.seq, t->rank * t->rows,
                         t->rows, t->inputs, t->targets);
            double a = now_s();
            if (gpt2_forward(t->model, &src, t->inputs, t->targets, &loss) != 0)
                return fail(t, "forward");
            double b = now_s();
            if (gpt2_backward(t->model, &src, tty && now_s() - t0 > 2 ? progress : NULL) != 0)
                return fail(t, "backward");
            fwd += b - a, bwd += now_s() - b, sum += loss;
        }
        double c = now_s();
        if (zt_step(t->rt, NULL, &info) != ZT_OK)
            return fail(t, "zt_step");
        opt += now_s() - c;
        zt_stats_get(t->rt, &s);
        if (tty && now_s() - t0 > 2)
            fprintf(stderr, "\r%20s\r", "");
        if (t->rank == 0)
            print_step((int)step + 1, sum / (float)t->o.accum, now_s() - t0,
                       t->o.batch * t->o.seq * t->o.accum, &info, &s);
        done++;
        if (t->o.save_every > 0 && (step + 1) % t->o.save_every == 0 && save(t, "periodic"))
            return 1;
    }
    if (stop_requested && t->rank == 0)
        printf("stopped by Ctrl-C at a step boundary\n");
    if (stop_requested && save(t, "interrupted"))
        return 1;
    if (t->rank == 0)
        print_summary(&s, fwd, bwd, opt, done);
    return 0;
}

static int finish(trainer *t)
{
    if (t->o.export_llmc && gpt2_export_llmc(&t->g, t->o.export_llmc) != ZT_OK)
        return fail(t, "--export");
    if (t->o.export_st && gpt2_export_safetensors(&t->g, t->o.export_st) != ZT_OK)
        return fail(t, "--safetensors");
    return 0;
}

int main(int argc, char **argv)
{
    trainer t;
    memset(&t, 0, sizeof t);
    if (parse(argc, argv, &t.o) != 0)
        return 2;
    signal(SIGINT, on_sigint);
    int rc = setup(&t);
    if (rc == 0)
        rc = train(&t);
    if (rc == 0)
        rc = finish(&t);
    gpt2_model_destroy(t.model);
    gpt2_ztier_free(&t.g);
    zt_runtime_destroy(t.rt);
    tokens_free(&t.data);
    free(t.inputs), free(t.targets);
    return rc;
}

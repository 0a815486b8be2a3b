/* SPDX-License-Identifier: MIT */
/* The per-layer API under a seeded random sequence of calls, on the host backend: training
 * micro-steps whose fetches and releases take the blocking or the stream-ordered form at
 * random per call (mixed within a layer: zt_fetch_async released by zt_release and the
 * reverse), nested fetches, layers out of the recorded order, inference fetches between and
 * inside steps, activation checkpoints saved and loaded in either form, and,
 * between any two calls, misuse: releases without a fetch (double releases), unknown layers
 * and passes, NULL or foreign streams, zt_step with layers held or activations saved,
 * registration after commit, activation loads out of order or twice, frees before loads.
 * Every call must return a status of the enum (never crash); every misuse ZT_ERR_USAGE or
 * ZT_ERR_ARGUMENT with a message; and after each zt_step the weights must equal, bit for bit,
 * those of a reference runtime that saw only the correct calls, all blocking.
 *
 * ZT_FUZZ_SEEDS=n runs seeds 1..n (default 2000, about 10 s under ASan); ZT_FUZZ_SEED=s runs
 * seed s alone. A failing seed is printed (also when the process dies: ASan's death callback,
 * or a signal). */
#include "mlp_weights.h"
#include "rt_fixture.h"
#include "train.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

static const mlp_dims dims = {8, 16, 4, 8};
#define ACT_BYTES 256 /* registered per layer; a save writes ACT_BYTES or less */
#define MICRO_MAX 8   /* micro-steps per seed at most */

/* ---- the seed, printed on any failure ---- */

static volatile sig_atomic_t current_seed;

static void say_seed(void)
{
    char line[160];
    int n = snprintf(line, sizeof line,
                     "\napi fuzz: failing seed %d (rerun it alone: ZT_FUZZ_SEED=%d)\n",
                     (int)current_seed, (int)current_seed);
    if (n > 0 && write(2, line, (size_t)n) < 0)
        return;
}

static void on_fatal(int sig)
{
    say_seed();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- the seed's random choices (xorshift64) ---- */

static uint64_t rng;
static unsigned pick(unsigned n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)((rng >> 11) % n);
}
static int chance(unsigned one_in) { return pick(one_in) == 0; }

/* ---- what the calls do with the layer's buffers ---- */

/* A layer's parameters and gradients as a fetch gave them (the view's arrays are the
 * runtime's, refilled by the next fetch): the gradient is a function of the parameters, so a
 * stale or early read shows in the weights. */
typedef struct grad_task {
    const float *w[2];
    float *g[2];
    int64_t n[2];
    int layer, micro;
} grad_task;

static void take_view(grad_task *t, const zt_layer_view *v, int layer, int micro)
{
    assert_int_equal(v->n_params, 2);
    for (int i = 0; i < 2; i++)
        t->w[i] = v->params[i].data, t->g[i] = v->params[i].grad, t->n[i] = v->params[i].numel;
    t->layer = layer, t->micro = micro;
}

static void write_grads(void *arg)
{
    grad_task *t = arg;
    for (int i = 0; i < 2; i++)
        for (int64_t j = 0; j < t->n[i]; j++)
            t->g[i][j] = 0.25f * t->w[i][j] + (float)((j % 7) - 3 + t->layer - t->micro) / 32.0f;
}

/* The forward's read of the parameters (ASan sees a read of freed memory). */
static void read_params(void *arg)
{
    grad_task *t = arg;
    volatile float sum = 0;
    for (int i = 0; i < 2; i++)
        for (int64_t j = 0; j < t->n[i]; j++)
            sum += t->w[i][j];
    (void)sum;
}

/* An activation checkpoint: what was saved, checked where it is loaded. */
typedef struct act_check {
    const unsigned char *got;
    unsigned char want[ACT_BYTES];
    size_t bytes;
    int bad;
} act_check;

static void compare_act(void *arg)
{
    act_check *c = arg;
    c->bad |= memcmp(c->got, c->want, c->bytes) != 0;
}

/* ---- one seed ---- */

typedef enum act_state { ACT_NONE, ACT_SAVED, ACT_LOADED } act_state;

typedef struct fuzz {
    int seed;
    zt_runtime *rt, *ref;
    minimal_model m, mr;
    void *stream;
    int accum, use_act;
    int held[MLP_LAYERS][3]; /* the fuzzed runtime's holds, per layer and pass */
    act_state act[MLP_LAYERS];
    /* per micro-step: a stream task or an async save may still read them after the call */
    unsigned char act_src[MICRO_MAX][MLP_LAYERS][ACT_BYTES];
    act_check checks[MICRO_MAX][MLP_LAYERS];
    grad_task tasks[MICRO_MAX][2][MLP_LAYERS]; /* live until the step waited for the stream */
    grad_task infer[16];                       /* the inference passes' since the last step */
    int n_infer;
    int calls, misuses;
} fuzz;

/* A status of the enum, with a message when it is not ZT_OK. */
static void documented(fuzz *f, zt_status st, const char *call)
{
    if (st < ZT_OK || st >= ZT_STATUS_COUNT || !strcmp(zt_status_string(st), "unknown status"))
        fail_msg("seed %d: %s returned %d, not a status of the enum", f->seed, call, (int)st);
    if (st != ZT_OK && !zt_last_error(f->rt)[0])
        fail_msg("seed %d: %s returned %s with no message", f->seed, call, zt_status_string(st));
    f->calls++;
}

static void ok(fuzz *f, zt_status st, const char *call)
{
    documented(f, st, call);
    if (st != ZT_OK)
        fail_msg("seed %d: %s: %s", f->seed, call, zt_last_error(f->rt));
}

/* A misuse: refused as a usage or argument error, naming it. */
static void refused(fuzz *f, zt_status st, const char *call)
{
    documented(f, st, call);
    if (st != ZT_ERR_USAGE && st != ZT_ERR_ARGUMENT)
        fail_msg("seed %d: misuse %s returned %s, not ZT_ERR_USAGE or ZT_ERR_ARGUMENT (%s)",
                 f->seed, call, zt_status_string(st), zt_last_error(f->rt));
    f->misuses++;
}

static int any_held(const fuzz *f)
{
    for (int l = 0; l < MLP_LAYERS; l++)
        for (int p = 0; p < 3; p++)
            if (f->held[l][p])
                return 1;
    return 0;
}

static int any_act(const fuzz *f)
{
    for (int l = 0; l < MLP_LAYERS; l++)
        if (f->act[l] != ACT_NONE)
            return 1;
    return 0;
}

/* One misuse the state allows, chosen at random. */
static void misuse(fuzz *f)
{
    zt_runtime *rt = f->rt;
    zt_layer_view v;
    int l = (int)pick(MLP_LAYERS);
    zt_pass p = (zt_pass)pick(3);
    int not_a_stream = 0;
    switch (pick(12)) {
    case 0: /* a release without a fetch (a double release) */
    case 1:
        if (f->held[l][p])
            return;
        if (pick(2))
            refused(f, zt_release(rt, f->m.layer[l], p), "zt_release without a fetch");
        else
            refused(f, zt_release_async(rt, f->m.layer[l], p, f->stream),
                    "zt_release_async without a fetch");
        return;
    case 2:
        refused(f, zt_fetch(rt, pick(2) ? -1 : MLP_LAYERS + (int)pick(3), p, &v),
                "zt_fetch of an unknown layer");
        return;
    case 3:
        refused(f, zt_fetch(rt, f->m.layer[l], (zt_pass)(3 + pick(5)), &v),
                "zt_fetch of an unknown pass");
        return;
    case 4:
        refused(f, zt_fetch_async(rt, f->m.layer[l], p, pick(2) ? NULL : &not_a_stream, &v),
                "zt_fetch_async on a NULL or foreign stream");
        return;
    case 5:
        if (f->held[l][p])
            refused(f, zt_release_async(rt, f->m.layer[l], p, &not_a_stream),
                    "zt_release_async on a foreign stream");
        else
            refused(f, zt_fetch(rt, f->m.layer[l], p, NULL), "zt_fetch with a NULL view");
        return;
    case 6:
        if (any_held(f) || any_act(f))
            refused(f, zt_step(rt, NULL, NULL), "zt_step with layers held or activations saved");
        return;
    case 7: {
        int id;
        int64_t shape[1] = {4};
        if (pick(2))
            refused(f, zt_layer_add(rt, "late", &id), "zt_layer_add after commit");
        else
            refused(f, zt_param_add(rt, f->m.layer[l], "late.w", shape, 1, NULL, &id),
                    "zt_param_add after commit");
        return;
    }
    case 8:
        refused(f,
                pick(2) ? zt_config_set_double(rt, "optimizer.params.lr", 1e-3)
                        : zt_runtime_commit(rt),
                "a registration call after commit");
        return;
    case 9:
        refused(f, zt_stream_launch(rt, pick(2) ? &not_a_stream : f->stream, NULL, NULL),
                "zt_stream_launch with no function or a foreign stream");
        return;
    default:
        break;
    }
    if (!f->use_act)
        return;
    void *ptr;
    size_t bytes;
    if (f->act[l] == ACT_NONE) /* a load or a free of nothing saved */
        refused(f,
                pick(2) ? zt_act_load(rt, f->m.layer[l], &ptr, &bytes)
                        : zt_act_free(rt, f->m.layer[l]),
                "zt_act_load or zt_act_free with nothing saved");
    else if (f->act[l] == ACT_SAVED && pick(2))
        refused(f, zt_act_free(rt, f->m.layer[l]), "zt_act_free before the load");
    else if (f->act[l] == ACT_SAVED)
        refused(f, zt_act_save(rt, f->m.layer[l], f->act_src[0][l], ACT_BYTES),
                "zt_act_save of a layer saved already");
    else
        refused(f, zt_act_load(rt, f->m.layer[l], &ptr, &bytes), "a second zt_act_load");
    if (pick(2))
        refused(f, zt_act_save(rt, f->m.layer[l], f->act_src[0][l], ACT_BYTES + 1),
                "zt_act_save larger than registered");
}

static void maybe_misuse(fuzz *f)
{
    while (chance(3))
        misuse(f);
}

/* The reference: the same gradients, blocking calls only. */
static void ref_layer(fuzz *f, int l, zt_pass p, int micro)
{
    zt_layer_view v;
    grad_task t;
    if (zt_fetch(f->ref, f->mr.layer[l], p, &v) != ZT_OK)
        fail_msg("seed %d: reference fetch: %s", f->seed, zt_last_error(f->ref));
    take_view(&t, &v, l, micro);
    if (p == ZT_BACKWARD)
        write_grads(&t);
    if (zt_release(f->ref, f->mr.layer[l], p) != ZT_OK)
        fail_msg("seed %d: reference release: %s", f->seed, zt_last_error(f->ref));
}

static void act_save(fuzz *f, int l, int micro)
{
    size_t bytes = ACT_BYTES - pick(ACT_BYTES / 2);
    for (size_t i = 0; i < bytes; i++)
        f->act_src[micro][l][i] = (unsigned char)(f->seed * 31 + micro * 7 + l * 3 + (int)i);
    memcpy(f->checks[micro][l].want, f->act_src[micro][l], bytes);
    f->checks[micro][l].bytes = bytes;
    if (pick(2))
        ok(f, zt_act_save(f->rt, f->m.layer[l], f->act_src[micro][l], bytes), "zt_act_save");
    else
        ok(f, zt_act_save_async(f->rt, f->m.layer[l], f->act_src[micro][l], bytes, f->stream),
           "zt_act_save_async");
    f->act[l] = ACT_SAVED;
}

/* Loads, checks (on the stream after an async load) and frees layer l's checkpoint. */
static void act_load_free(fuzz *f, int l, int micro)
{
    act_check *c = &f->checks[micro][l];
    void *ptr = NULL;
    size_t bytes = 0;
    int async = (int)pick(2);
    if (async)
        ok(f, zt_act_load_async(f->rt, f->m.layer[l], f->stream, &ptr, &bytes),
           "zt_act_load_async");
    else
        ok(f, zt_act_load(f->rt, f->m.layer[l], &ptr, &bytes), "zt_act_load");
    f->act[l] = ACT_LOADED;
    if (bytes != c->bytes)
        fail_msg("seed %d: layer %d's checkpoint: %zu bytes back, %zu saved", f->seed, l, bytes,
                 c->bytes);
    c->got = ptr;
    if (async)
        ok(f, zt_stream_launch(f->rt, f->stream, compare_act, c), "zt_stream_launch");
    else
        compare_act(c);
    maybe_misuse(f);
    if (pick(2))
        ok(f, zt_act_free(f->rt, f->m.layer[l]), "zt_act_free");
    else
        ok(f, zt_act_free_async(f->rt, f->m.layer[l], f->stream), "zt_act_free_async");
    f->act[l] = ACT_NONE;
}

/* One layer's use in the fuzzed runtime: one or two (nested) fetches, each blocking or on the
 * stream; the work on the host after a blocking fetch, else on the stream; the releases in
 * either form. */
static void fuzz_layer(fuzz *f, int l, zt_pass p, int micro)
{
    zt_runtime *rt = f->rt;
    int id = f->m.layer[l];
    int nested = chance(6) ? 2 : 1;
    int on_stream = 0;
    grad_task *t = &f->tasks[micro][p == ZT_BACKWARD][l];
    for (int k = 0; k < nested; k++) {
        zt_layer_view v;
        if (pick(2)) {
            ok(f, zt_fetch_async(rt, id, p, f->stream, &v), "zt_fetch_async");
            on_stream = 1;
        } else {
            ok(f, zt_fetch(rt, id, p, &v), "zt_fetch");
        }
        f->held[l][p]++;
        take_view(t, &v, l, micro);
        maybe_misuse(f);
    }
    void (*work)(void *) = p == ZT_BACKWARD ? write_grads : read_params;
    if (on_stream) /* the parameters are ready for the stream, not yet for the host */
        ok(f, zt_stream_launch(rt, f->stream, work, t), "zt_stream_launch");
    else
        work(t);
    for (int k = 0; k < nested; k++) {
        maybe_misuse(f);
        if (pick(2))
            ok(f, zt_release(rt, id, p), "zt_release");
        else
            ok(f, zt_release_async(rt, id, p, f->stream), "zt_release_async");
        f->held[l][p]--;
    }
}

/* Now and then an inference pass's use of a layer (between or inside training steps; no
 * gradients), in either form: it changes no result. */
static void maybe_infer(fuzz *f)
{
    if (!chance(5) || f->n_infer == (int)(sizeof f->infer / sizeof f->infer[0]))
        return;
    int l = (int)pick(MLP_LAYERS), id = f->m.layer[l];
    grad_task *t = &f->infer[f->n_infer++];
    zt_layer_view v;
    int async = (int)pick(2);
    if (async)
        ok(f, zt_fetch_async(f->rt, id, ZT_INFERENCE, f->stream, &v), "zt_fetch_async (inference)");
    else
        ok(f, zt_fetch(f->rt, id, ZT_INFERENCE, &v), "zt_fetch (inference)");
    take_view(t, &v, l, 0);
    if (async)
        ok(f, zt_stream_launch(f->rt, f->stream, read_params, t), "zt_stream_launch");
    else
        read_params(t);
    ok(f,
       pick(2) ? zt_release(f->rt, id, ZT_INFERENCE)
               : zt_release_async(f->rt, id, ZT_INFERENCE, f->stream),
       "release (inference)");
}

/* The layers in order, or (now and then) in another order: a step that leaves the recorded
 * order is a trace deviation, not an error. */
static void layer_order(int *order)
{
    for (int i = 0; i < MLP_LAYERS; i++)
        order[i] = i;
    if (!chance(4))
        return;
    for (int i = MLP_LAYERS - 1; i > 0; i--) {
        int j = (int)pick((unsigned)i + 1), tmp = order[i];
        order[i] = order[j], order[j] = tmp;
    }
}

static void micro_step(fuzz *f, int micro)
{
    int fwd[MLP_LAYERS], bwd[MLP_LAYERS];
    layer_order(fwd);
    layer_order(bwd);
    for (int i = 0; i < MLP_LAYERS; i++) {
        int l = fwd[i];
        fuzz_layer(f, l, ZT_FORWARD, micro);
        ref_layer(f, l, ZT_FORWARD, micro);
        if (f->use_act)
            act_save(f, l, micro);
        maybe_misuse(f);
        maybe_infer(f);
    }
    for (int i = 0; i < MLP_LAYERS; i++) {
        /* activations come back in the reverse order of their saves */
        int l = f->use_act ? fwd[MLP_LAYERS - 1 - i] : bwd[MLP_LAYERS - 1 - i];
        if (f->use_act)
            act_load_free(f, l, micro);
        fuzz_layer(f, l, ZT_BACKWARD, micro);
        ref_layer(f, l, ZT_BACKWARD, micro);
        maybe_misuse(f);
        maybe_infer(f);
    }
}

static void step_and_compare(fuzz *f, int step)
{
    ok(f, zt_step(f->rt, NULL, NULL), "zt_step");
    if (zt_step(f->ref, NULL, NULL) != ZT_OK)
        fail_msg("seed %d: reference step: %s", f->seed, zt_last_error(f->ref));
    ok(f, zt_stream_synchronize(f->rt, f->stream), "zt_stream_synchronize");
    f->n_infer = 0; /* their stream tasks have run */
    for (int k = 0; k < MICRO_MAX; k++)
        for (int l = 0; l < MLP_LAYERS; l++)
            if (f->checks[k][l].bad)
                fail_msg("seed %d: layer %d's activation checkpoint of micro-step %d came back "
                         "changed",
                         f->seed, l, k);
    mlp_weights a, b;
    mlp_weights_read_or_fail(f->rt, &f->m, &a);
    mlp_weights_read_or_fail(f->ref, &f->mr, &b);
    if (mlp_weights_max_rel_diff(&a, &b) != 0)
        fail_msg("seed %d: step %d: weights differ from the reference's (max rel %g)", f->seed,
                 step, mlp_weights_max_rel_diff(&a, &b));
    mlp_weights_free(&a);
    mlp_weights_free(&b);
}

/* nvme_dir: under the scratch folder (each runtime needs its own) */
static const char *config(const char *param, int accum, int act, const char *nvme_dir)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"zero_optimization\": {\"offload_param\": {\"device\": \"%s\", \"nvme_path\": "
             "\"$SCRATCH/%s\"}, \"offload_optimizer\": {\"device\": \"cpu\"},"
             " \"stage3_param_persistence_threshold\": 0},"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
             " \"gradient_accumulation_steps\": %d, \"gradient_clipping\": 1.0,"
             " \"activation_checkpointing\": {\"device\": \"%s\"},"
             " \"aio\": {\"block_size\": 4096}, \"ztier\": {\"hbm_capacity\": \"16M\"}}",
             param, nvme_dir, accum, act ? "cpu" : "none");
    return buf;
}

static zt_runtime *make(fuzz *f, const char *cfg, minimal_model *m, int act)
{
    zt_options opts = ZT_OPTIONS_INIT;
    opts.log_level = 0; /* errors only: the misuse is on purpose */
    zt_runtime *rt = rt_fixture_create(&opts, cfg);
    rt_fixture_register_mlp(rt, &dims, 11, m);
    for (int l = 0; act && l < MLP_LAYERS; l++)
        if (zt_act_register(rt, m->layer[l], ACT_BYTES) != ZT_OK)
            fail_msg("seed %d: zt_act_register: %s", f->seed, zt_last_error(rt));
    rt_fixture_commit(rt);
    return rt;
}

static long total_calls, total_misuses, total_steps;

static void run_seed(int seed)
{
    static fuzz f; /* large: the tasks */
    memset(&f, 0, sizeof f);
    current_seed = seed;
    f.seed = seed;
    rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)seed * 0xBF58476D1CE4E5B9ull;
    static const char *const params[] = {"cpu", "none", "nvme"};
    const char *param = params[pick(chance(8) ? 3 : 2)]; /* NVMe: slower, now and then */
    f.accum = 1 + (int)pick(2);
    f.use_act = (int)pick(2);
    f.rt = make(&f, config(param, f.accum, f.use_act, "fuzzed"), &f.m, f.use_act);
    f.ref = make(&f, config(param, f.accum, f.use_act, "reference"), &f.mr, 0);
    ok(&f, zt_stream_create(f.rt, &f.stream), "zt_stream_create");
    int micro = 2 + (int)pick(MICRO_MAX - 1);
    micro -= micro % f.accum;
    for (int k = 0; k < micro; k++) {
        micro_step(&f, k);
        if ((k + 1) % f.accum == 0)
            step_and_compare(&f, k / f.accum);
    }
    ok(&f, zt_stream_destroy(f.rt, f.stream), "zt_stream_destroy");
    zt_runtime_destroy(f.rt);
    zt_runtime_destroy(f.ref);
    total_calls += f.calls, total_misuses += f.misuses, total_steps += micro / f.accum;
}

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void test_api_fuzz(void **state)
{
    (void)state;
    int one = env_int("ZT_FUZZ_SEED", 0);
    int first = one ? one : 1, last = one ? one : env_int("ZT_FUZZ_SEEDS", 2000);
    for (int s = first; s <= last; s++)
        run_seed(s);
    print_message("api fuzz: seeds %d..%d passed: %ld calls, %ld of them misuse, %ld steps "
                  "compared bitwise\n",
                  first, last, total_calls, total_misuses, total_steps);
    assert_true(total_misuses > 0 && total_steps > 0);
}

static int setup(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    __asan_set_death_callback(say_seed);
#endif
    signal(SIGSEGV, on_fatal);
    signal(SIGABRT, on_fatal);
    signal(SIGBUS, on_fatal);
    alarm(280); /* a hang fails the test (SIGALRM's default ends it: the seed is printed) */
    signal(SIGALRM, on_fatal);
    char dir[512];
    int st = rt_fixture_open("api-fuzz");
    for (int i = 0; i < 2 && st == 0; i++) {
        snprintf(dir, sizeof dir, "%s/%s", rt_fixture_dir(), i ? "reference" : "fuzzed");
        st = mkdir(dir, 0755) != 0 && errno != EEXIST;
    }
    return st;
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    return rt_fixture_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_api_fuzz)};
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: MIT */
/* Activation checkpoints (zt_act_*): every byte saved comes back the same from each home
 * (device memory, pinned host memory, NVMe), blocking and stream-ordered, with and without
 * read-ahead, through more layers than staging buffers; the device memory the store holds
 * stays within what its read-ahead and loads need; misuse is refused naming the layer and
 * changes nothing; a failed NVMe write stops the step's activation calls until a discard,
 * after which the next step runs right; activation_checkpointing's keys do what they say. */
#include "rt_fixture.h"
#include "runtime/estimate.h"
#include "tiers/io.h"
#include "train.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const mlp_dims dims = {16, 48, 4, 32};
/* odd sizes: not multiples of 4096 or of the swap's block */
static const size_t act_bytes[MLP_LAYERS] = {70001, 12345, 40000};

static int setup(void **state)
{
    (void)state;
    return rt_fixture_open("activations");
}

static int teardown(void **state)
{
    (void)state;
    return rt_fixture_close();
}

static char warnings[8192];
static void capture(void *user, int level, const char *msg)
{
    (void)user;
    if (level <= 1 && strlen(warnings) + strlen(msg) + 2 < sizeof warnings)
        strcat(strcat(warnings, msg), "\n");
}

static const char *ztier_extra = ""; /* more keys of "ztier" for the next make() */

/* A runtime over the minimal model with every layer registering act_bytes. */
static zt_runtime *make(const char *act_cfg, const char *hbm, minimal_model *m)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"activation_checkpointing\": %s, \"aio\": {\"block_size\": 8192},"
             " \"ztier\": {\"hbm_capacity\": \"%s\"%s}}",
             act_cfg, hbm, ztier_extra);
    zt_options o = ZT_OPTIONS_INIT;
    o.log_fn = capture;
    warnings[0] = 0;
    zt_runtime *rt = rt_fixture_create(&o, cfg);
    rt_fixture_register_mlp(rt, &dims, 1, m);
    for (int l = 0; l < MLP_LAYERS; l++)
        assert_int_equal(zt_act_register(rt, m->layer[l], act_bytes[l]), ZT_OK);
    rt_fixture_commit(rt);
    return rt;
}

/* The bytes layer l saves in step s: a function of both, so a mix-up shows. */
static void fill(unsigned char *buf, size_t n, int step, int l)
{
    uint32_t x = 2654435761u * (uint32_t)(step * 7 + l + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
}

/* One step's saves (each source overwritten right after) and loads in reverse order, each
 * load compared with the bytes saved. */
static void run_step(zt_runtime *rt, const minimal_model *m, int step)
{
    unsigned char *src = malloc(act_bytes[0]), *want = malloc(act_bytes[0]);
    for (int l = 0; l < MLP_LAYERS; l++) {
        fill(src, act_bytes[l], step, l);
        assert_int_equal(zt_act_save(rt, m->layer[l], src, act_bytes[l]), ZT_OK);
        memset(src, 0xA5, act_bytes[l]); /* the caller reuses its buffer at once */
    }
    for (int l = MLP_LAYERS - 1; l >= 0; l--) {
        void *p = NULL;
        size_t n = 0;
        assert_int_equal(zt_act_load(rt, m->layer[l], &p, &n), ZT_OK);
        assert_int_equal(n, act_bytes[l]);
        fill(want, n, step, l);
        assert_memory_equal(p, want, n);
        assert_int_equal(zt_act_free(rt, m->layer[l]), ZT_OK);
    }
    free(src);
    free(want);
}

static void roundtrip(const char *act_cfg, int ahead)
{
    minimal_model m;
    zt_runtime *rt = make(act_cfg, "16M", &m);
    for (int step = 0; step < 4; step++)
        run_step(rt, &m, step);
    zt_stats s = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_int_equal(s.act_saves, 4 * MLP_LAYERS);
    size_t sum = 0, max = 0;
    for (int l = 0; l < MLP_LAYERS; l++)
        sum += act_bytes[l], max = act_bytes[l] > max ? act_bytes[l] : max;
    assert_int_equal(s.act_saved_bytes, 4 * sum);
    assert_int_equal(s.act_home_bytes, sum);
    assert_int_equal(s.act_device_bytes, strstr(act_cfg, "none") ? sum : 0);
    if (strstr(act_cfg, "none"))
        assert_int_equal(s.act_device_peak_bytes, sum);
    else /* the loaded layer and at most `ahead` read ahead */
        assert_true(s.act_device_peak_bytes <= (size_t)(ahead + 1) * max);
    if (ahead > 0 && strstr(act_cfg, "cpu"))
        assert_int_equal(s.act_prefetch_hits, 4 * (MLP_LAYERS - 1));
    if (ahead > 0 && strstr(act_cfg, "nvme")) /* the first load reads its stage */
        assert_true(s.act_prefetch_hits >= 4);
    if (strstr(act_cfg, "nvme")) {
        assert_true(s.nvme_write_bytes >= 3 * sum); /* the last step's may be in flight */
        assert_true(s.nvme_read_bytes > 0); /* 3 layers, 2 staging buffers: some come back */
    }
    zt_runtime_destroy(rt);
}

static void test_roundtrip_device(void **state)
{
    (void)state;
    roundtrip("{\"device\": \"none\"}", 1);
}

static void test_roundtrip_host(void **state)
{
    (void)state;
    roundtrip("{\"cpu_checkpointing\": true, \"prefetch_layers\": 0}", 0);
    roundtrip("{\"device\": \"cpu\", \"prefetch_layers\": 2}", 2);
}

static void test_roundtrip_nvme(void **state)
{
    (void)state;
    roundtrip("{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\", \"buffer_count\": 2, "
              "\"prefetch_layers\": 0}",
              0);
    roundtrip("{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\", \"buffer_count\": 2}", 1);
    roundtrip("{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\", \"buffer_count\": 2, "
              "\"prefetch_layers\": 2}",
              2);
}

/* ---- stream-ordered ---- */

typedef struct fill_job {
    unsigned char *buf;
    size_t n;
    int step, layer; /* layer -1: overwrite with a constant */
    const unsigned char *from;
    unsigned char *to;
} fill_job;

static void run_fill(void *arg)
{
    fill_job *j = arg;
    if (j->to)
        memcpy(j->to, j->from, j->n);
    else if (j->layer < 0)
        memset(j->buf, 0x5A, j->n);
    else
        fill(j->buf, j->n, j->step, j->layer);
}

static void async_roundtrip(const char *act_cfg)
{
    minimal_model m;
    zt_runtime *rt = make(act_cfg, "16M", &m);
    void *stream;
    assert_int_equal(zt_stream_create(rt, &stream), ZT_OK);
    unsigned char *src = malloc(act_bytes[0]);
    unsigned char *got[MLP_LAYERS];
    fill_job jobs[4 * MLP_LAYERS];
    for (int step = 0; step < 3; step++) {
        int j = 0;
        for (int l = 0; l < MLP_LAYERS; l++) { /* the stream computes, saves, overwrites */
            jobs[j] = (fill_job){src, act_bytes[l], step, l, NULL, NULL};
            assert_int_equal(zt_stream_launch(rt, stream, run_fill, &jobs[j++]), ZT_OK);
            assert_int_equal(zt_act_save_async(rt, m.layer[l], src, act_bytes[l], stream), ZT_OK);
            jobs[j] = (fill_job){src, act_bytes[l], step, -1, NULL, NULL};
            assert_int_equal(zt_stream_launch(rt, stream, run_fill, &jobs[j++]), ZT_OK);
        }
        for (int l = MLP_LAYERS - 1; l >= 0; l--) { /* reads the loaded bytes on the stream */
            void *p;
            size_t n;
            got[l] = malloc(act_bytes[l]);
            assert_int_equal(zt_act_load_async(rt, m.layer[l], stream, &p, &n), ZT_OK);
            jobs[j] = (fill_job){NULL, n, step, l, p, got[l]};
            assert_int_equal(zt_stream_launch(rt, stream, run_fill, &jobs[j++]), ZT_OK);
            assert_int_equal(zt_act_free_async(rt, m.layer[l], stream), ZT_OK);
        }
        assert_int_equal(zt_stream_synchronize(rt, stream), ZT_OK);
        for (int l = 0; l < MLP_LAYERS; l++) {
            unsigned char *want = malloc(act_bytes[l]);
            fill(want, act_bytes[l], step, l);
            assert_memory_equal(got[l], want, act_bytes[l]);
            free(want);
            free(got[l]);
        }
    }
    free(src);
    zt_runtime_destroy(rt);
}

static void test_async_host_and_nvme(void **state)
{
    (void)state;
    async_roundtrip("{\"device\": \"cpu\"}");
    async_roundtrip("{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\", \"buffer_count\": 2}");
    async_roundtrip("{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\", "
                    "\"synchronize_checkpoint_boundary\": true}");
}

/* ---- misuse ---- */

static void expect(zt_runtime *rt, zt_status got, zt_status want, const char *text)
{
    assert_int_equal(got, want);
    if (!strstr(zt_last_error(rt), text))
        fail_msg("expected \"%s\" in: %s", text, zt_last_error(rt));
}

static void test_misuse_is_refused_and_changes_nothing(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = make("{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\"}", "16M", &m);
    unsigned char *buf = calloc(1, act_bytes[0] + 1);
    void *p;
    size_t n;
    int L0 = m.layer[0], L1 = m.layer[1], L2 = m.layer[2];
    expect(rt, zt_act_register(rt, L0, 10), ZT_ERR_USAGE, "after zt_runtime_commit");
    expect(rt, zt_act_save(rt, L0, buf, act_bytes[0] + 1), ZT_ERR_ARGUMENT, "registered 70001");
    expect(rt, zt_act_save(rt, 99, buf, 10), ZT_ERR_ARGUMENT, "unknown layer id 99");
    expect(rt, zt_act_load(rt, L0, &p, &n), ZT_ERR_USAGE, "not saved");
    expect(rt, zt_act_free(rt, L0), ZT_ERR_USAGE, "not saved");
    /* step 0: saves, then every wrong move in backward, then the right ones */
    for (int l = 0; l < MLP_LAYERS; l++) {
        fill(buf, act_bytes[l], 0, l);
        assert_int_equal(zt_act_save(rt, m.layer[l], buf, act_bytes[l]), ZT_OK);
    }
    expect(rt, zt_act_save(rt, L1, buf, act_bytes[1]), ZT_ERR_USAGE, "saved already");
    expect(rt, zt_act_load(rt, L0, &p, &n), ZT_ERR_USAGE, "out of order");
    expect(rt, zt_act_free(rt, L2), ZT_ERR_USAGE, "not loaded");
    expect(rt, zt_step(rt, NULL, NULL), ZT_ERR_USAGE, "3 layers' activation checkpoints");
    assert_int_equal(zt_act_load(rt, L2, &p, &n), ZT_OK);
    expect(rt, zt_act_load(rt, L2, &p, &n), ZT_ERR_USAGE, "handed back twice");
    assert_int_equal(zt_act_free(rt, L2), ZT_OK);
    expect(rt, zt_act_free(rt, L2), ZT_ERR_USAGE, "freed already");
    unsigned char *want = malloc(act_bytes[0]);
    for (int l = 1; l >= 0; l--) { /* the refused calls changed nothing */
        assert_int_equal(zt_act_load(rt, m.layer[l], &p, &n), ZT_OK);
        fill(want, act_bytes[l], 0, l);
        assert_memory_equal(p, want, act_bytes[l]);
        assert_int_equal(zt_act_free(rt, m.layer[l]), ZT_OK);
    }
    float loss;
    assert_int_equal(minimal_micro_step(rt, &m, 0, 0, dims.batch, &loss), ZT_OK);
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    free(want);
    free(buf);
    zt_runtime_destroy(rt);

    /* a layer that registered nothing, a size registered twice, a stream not ztier's */
    zt_runtime *r2 = rt_fixture_create(NULL, "{\"activation_checkpointing\": {\"device\": "
                                             "\"cpu\"}}");
    minimal_model m2;
    rt_fixture_register_mlp(r2, &dims, 1, &m2);
    assert_int_equal(zt_act_register(r2, m2.layer[0], 100), ZT_OK);
    expect(r2, zt_act_register(r2, m2.layer[0], 100), ZT_ERR_USAGE, "already");
    expect(r2, zt_act_register(r2, m2.layer[1], 0), ZT_ERR_ARGUMENT, "bytes is 0");
    rt_fixture_commit(r2);
    char b[100] = {0};
    expect(r2, zt_act_save(r2, m2.layer[1], b, 10), ZT_ERR_USAGE, "registered no activations");
    expect(r2, zt_act_save_async(r2, m2.layer[0], b, 10, b), ZT_ERR_ARGUMENT,
           "not a stream of this runtime");
    zt_runtime_destroy(r2);
}

/* An NVMe write that fails (a full disk) during the forward: a clear error from an activation
 * call, every later one refused until the discard; the parameters untouched; the next step
 * runs right. */
static void test_nvme_full_during_forward(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt =
        make("{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\", \"buffer_count\": 2, "
             "\"prefetch_layers\": 0}",
             "16M", &m);
    float before[48 * 16], after[48 * 16];
    int64_t numel = (int64_t)dims.hidden * dims.in;
    assert_int_equal(zt_param_read(rt, m.weight[0], before, numel), ZT_OK);
    unsigned char *buf = malloc(act_bytes[0]);
    zt_io_test_fail(ZT_IO_WRITE, ENOSPC, 0);
    zt_status first = ZT_OK;
    char msg[1024] = "";
    for (int l = 0; l < MLP_LAYERS && first == ZT_OK; l++) {
        fill(buf, act_bytes[l], 0, l);
        first = zt_act_save(rt, m.layer[l], buf, act_bytes[l]);
    }
    for (int l = MLP_LAYERS - 1; l >= 0 && first == ZT_OK; l--) {
        void *p;
        size_t n;
        first = zt_act_load(rt, m.layer[l], &p, &n);
    }
    assert_int_not_equal(first, ZT_OK);
    snprintf(msg, sizeof msg, "%s", zt_last_error(rt));
    if (!strstr(msg, "NVMe write of layer 0's activations failed") ||
        !strstr(msg, "zt_act_discard"))
        fail_msg("unexpected message: %s", msg);
    void *p;
    size_t n;
    assert_int_equal(zt_act_load(rt, m.layer[0], &p, &n), first); /* stays until the discard */
    assert_int_equal(zt_act_discard(rt), ZT_OK);
    assert_int_equal(zt_param_read(rt, m.weight[0], after, numel), ZT_OK);
    assert_memory_equal(before, after, sizeof(float) * (size_t)numel);
    run_step(rt, &m, 1); /* the store works again */
    float loss;
    assert_int_equal(minimal_micro_step(rt, &m, 0, 0, dims.batch, &loss), ZT_OK);
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    free(buf);
    zt_runtime_destroy(rt);
}

/* ---- configuration ---- */

/* The trace of activation_checkpointing.profile: a span per save and load, with the bytes. */
static void test_profile_spans(void **state)
{
    (void)state;
    minimal_model m;
    ztier_extra = ", \"trace_path\": \"$SCRATCH/trace.json\"";
    zt_runtime *rt =
        make("{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\", \"profile\": true}", "16M", &m);
    ztier_extra = "";
    run_step(rt, &m, 0);
    run_step(rt, &m, 1); /* its saves finish the first step's writes, if nothing did before */
    zt_runtime_destroy(rt);
    char path[1024], text[1 << 16] = "";
    snprintf(path, sizeof path, "%s/trace.json", rt_fixture_dir());
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    char want[64];
    for (int l = 0; l < MLP_LAYERS; l++) {
        snprintf(want, sizeof want, "save layer %d (%zu bytes)", m.layer[l], act_bytes[l]);
        if (!strstr(text, want))
            fail_msg("the trace lacks \"%s\"", want);
        snprintf(want, sizeof want, "load layer %d (%zu bytes)", m.layer[l], act_bytes[l]);
        if (!strstr(text, want))
            fail_msg("the trace lacks \"%s\"", want);
    }
    assert_non_null(strstr(text, "NVMe write of layer"));
}

/* NULL handles and calls before commit. */
static void test_calls_out_of_place(void **state)
{
    (void)state;
    void *p;
    size_t n;
    const char *home;
    char b[8];
    assert_int_equal(zt_act_register(NULL, 0, 8), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_act_save(NULL, 0, b, 8), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_act_load(NULL, 0, &p, &n), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_act_free(NULL, 0), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_act_discard(NULL), ZT_ERR_ARGUMENT);
    assert_int_equal(zt_act_home(NULL, &home), ZT_ERR_ARGUMENT);
    zt_runtime *rt = rt_fixture_create(NULL, NULL);
    minimal_model m;
    rt_fixture_register_mlp(rt, &dims, 1, &m);
    expect(rt, zt_act_save(rt, m.layer[0], b, 8), ZT_ERR_USAGE, "before zt_runtime_commit");
    expect(rt, zt_act_load(rt, m.layer[0], &p, &n), ZT_ERR_USAGE, "before zt_runtime_commit");
    expect(rt, zt_act_home(rt, NULL), ZT_ERR_ARGUMENT, "home is NULL");
    assert_int_equal(zt_act_home(rt, &home), ZT_OK);
    assert_string_equal(home, "none");
    expect(rt, zt_act_register(rt, 99, 8), ZT_ERR_ARGUMENT, "unknown layer id 99");
    zt_runtime_destroy(rt);
}

static void test_config_keys(void **state)
{
    (void)state;
    minimal_model m;
    zt_runtime *rt = make("{\"cpu_checkpointing\": true, \"partition_activations\": true, "
                          "\"number_checkpoints\": 5, \"contiguous_memory_optimization\": true, "
                          "\"profile\": true}",
                          "16M", &m);
    assert_non_null(strstr(warnings, "partition_activations is true: not supported"));
    assert_non_null(strstr(warnings, "number_checkpoints is 5 but 3 layers"));
    assert_non_null(strstr(warnings, "ztier.trace_path is not set"));
    zt_stats s = ZT_STATS_INIT;
    size_t host_before;
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    host_before = s.host_bytes_current;
    assert_true(host_before >= act_bytes[0] + act_bytes[1] + act_bytes[2]);
    run_step(rt, &m, 0);
    zt_runtime_destroy(rt);

    /* nvme with no folder anywhere: refused at create, naming the key */
    zt_runtime *bad = NULL;
    assert_int_equal(
        zt_runtime_create(NULL, "{\"activation_checkpointing\": {\"device\": \"nvme\"}}", &bad),
        ZT_ERR_CONFIG);
    assert_non_null(strstr(zt_last_error(bad), "activation_checkpointing.nvme_path"));
    zt_runtime_destroy(bad);
    /* DeepSpeed's documented section, its defaults (number_checkpoints null) as written */
    assert_int_equal(
        zt_runtime_create(
            NULL,
            "{\"activation_checkpointing\": {\"partition_activations\": false, "
            "\"cpu_checkpointing\": false, \"contiguous_memory_optimization\": false, "
            "\"number_checkpoints\": null, \"synchronize_checkpoint_boundary\": false, "
            "\"profile\": false}}",
            &bad),
        ZT_OK);
    zt_runtime_destroy(bad);
    /* a misspelt key is said, like any other */
    zt_options o = ZT_OPTIONS_INIT;
    o.log_fn = capture;
    warnings[0] = 0;
    assert_int_equal(
        zt_runtime_create(&o, "{\"activation_checkpointing\": {\"cpu_checkpoint\": true}}", &bad),
        ZT_OK);
    assert_non_null(strstr(warnings, "unknown key 'activation_checkpointing.cpu_checkpoint'"));
    zt_runtime_destroy(bad);
}

/* A device budget that holds the parameters but not the saved copies kept on the device:
 * commit says so; the same registration with the copies in host memory commits. */
static void test_device_budget(void **state)
{
    (void)state;
    for (int host = 0; host <= 1; host++) {
        minimal_model m;
        zt_runtime *rt = rt_fixture_create(
            NULL, host ? "{\"activation_checkpointing\": {\"device\": \"cpu\"}, \"ztier\": "
                         "{\"hbm_capacity\": \"16M\"}}"
                       : "{\"activation_checkpointing\": {\"device\": \"none\"}, \"ztier\": "
                         "{\"hbm_capacity\": \"16M\"}}");
        rt_fixture_register_mlp(rt, &dims, 1, &m);
        assert_int_equal(zt_act_register(rt, m.layer[0], 10 << 20), ZT_OK);
        assert_int_equal(zt_act_register(rt, m.layer[1], 10 << 20), ZT_OK);
        zt_status st = zt_runtime_commit(rt);
        if (host) {
            assert_int_equal(st, ZT_OK);
        } else {
            assert_int_equal(st, ZT_ERR_DEVICE_NOMEM);
            assert_non_null(strstr(zt_last_error(rt), "activation checkpoints registered"));
        }
        zt_runtime_destroy(rt);
    }
}

/* A budget the read-ahead fills: the fetches of the next micro-step need its room, and get
 * it (the store is the device tier's last evictor); the dropped layer still loads right. */
static void test_read_ahead_gives_way(void **state)
{
    (void)state;
    minimal_model m;
    float loss;
    zt_runtime *probe =
        rt_fixture_mlp(NULL, "{\"ztier\": {\"hbm_capacity\": \"16M\"}}", &dims, 1, &m);
    zt_stats s = ZT_STATS_INIT;
    assert_int_equal(zt_stats_get(probe, &s), ZT_OK);
    uint64_t base = s.device_bytes_current;
    assert_int_equal(minimal_micro_step(probe, &m, 0, 0, dims.batch, &loss), ZT_OK);
    assert_int_equal(zt_stats_get(probe, &s), ZT_OK);
    uint64_t peak = s.device_bytes_peak, a = peak - base; /* each layer's checkpoint */
    zt_runtime_destroy(probe);
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"activation_checkpointing\": {\"device\": \"cpu\", \"prefetch_layers\": 2},"
             " \"ztier\": {\"hbm_capacity\": %llu}}",
             (unsigned long long)(peak + a + a / 2));
    zt_runtime *rt = rt_fixture_create(NULL, cfg);
    rt_fixture_register_mlp(rt, &dims, 1, &m);
    for (int l = 0; l < MLP_LAYERS; l++)
        assert_int_equal(zt_act_register(rt, m.layer[l], a), ZT_OK);
    rt_fixture_commit(rt);
    unsigned char *buf = malloc(a), *want = malloc(a);
    for (int l = 0; l < MLP_LAYERS; l++) {
        fill(buf, a, 0, l);
        assert_int_equal(zt_act_save(rt, m.layer[l], buf, a), ZT_OK);
    }
    void *p;
    size_t n;
    assert_int_equal(zt_act_load(rt, m.layer[2], &p, &n), ZT_OK); /* reads layer 1 ahead */
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_int_equal(s.act_device_bytes, 2 * a);
    /* a whole micro-step's fetches now need more than the room left */
    assert_int_equal(minimal_micro_step(rt, &m, 0, 0, dims.batch, &loss), ZT_OK);
    assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
    assert_true(s.act_evictions >= 1);
    assert_int_equal(s.act_device_bytes, a); /* the loaded one stays */
    assert_int_equal(zt_act_free(rt, m.layer[2]), ZT_OK);
    for (int l = 1; l >= 0; l--) {
        assert_int_equal(zt_act_load(rt, m.layer[l], &p, &n), ZT_OK);
        fill(want, a, 0, l);
        assert_memory_equal(p, want, a);
        assert_int_equal(zt_act_free(rt, m.layer[l]), ZT_OK);
    }
    assert_int_equal(zt_step(rt, NULL, NULL), ZT_OK);
    free(buf);
    free(want);
    zt_runtime_destroy(rt);
}

/* `ztier estimate`'s figures for registered activations (runtime/estimate.c) against a run's
 * zt_stats: the homes' bytes and the store's device peak, for each home and read-ahead. */
static void test_estimate_equals_the_run(void **state)
{
    (void)state;
    const char *cfgs[] = {
        "{\"device\": \"cpu\"}", "{\"device\": \"cpu\", \"prefetch_layers\": 2}",
        "{\"device\": \"nvme\", \"nvme_path\": \"$SCRATCH\", \"buffer_count\": 3}",
        "{\"device\": \"none\"}"};
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg,
                 "{\"activation_checkpointing\": %s, \"ztier\": {\"hbm_capacity\": \"16M\"}}",
                 cfgs[k]);
        minimal_model m;
        zt_runtime *est_rt = rt_fixture_create(NULL, cfg);
        rt_fixture_register_mlp(est_rt, &dims, 1, &m);
        for (int l = 0; l < MLP_LAYERS; l++)
            assert_int_equal(zt_act_register(est_rt, m.layer[l], act_bytes[l]), ZT_OK);
        zt_estimate e;
        assert_int_equal(zt_rt_estimate(est_rt, 1, 16 << 20, NULL, 0, 2, &e), ZT_OK);
        zt_runtime_destroy(est_rt);
        zt_runtime *rt = make(cfgs[k], "16M", &m);
        for (int step = 0; step < 2; step++)
            run_step(rt, &m, step);
        zt_stats s = ZT_STATS_INIT;
        assert_int_equal(zt_stats_get(rt, &s), ZT_OK);
        assert_int_equal(e.act_layers, MLP_LAYERS);
        assert_int_equal(e.act_home, s.act_home_bytes);
        if (s.act_device_peak_bytes != e.act_device_max)
            fail_msg("%s: the store's device peak %llu, estimated %llu", cfgs[k],
                     (unsigned long long)s.act_device_peak_bytes,
                     (unsigned long long)e.act_device_max);
        zt_runtime_destroy(rt);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roundtrip_nvme, setup, teardown),
        cmocka_unit_test_setup_teardown(test_async_host_and_nvme, setup, teardown),
        cmocka_unit_test_setup_teardown(test_misuse_is_refused_and_changes_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_nvme_full_during_forward, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profile_spans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calls_out_of_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_estimate_equals_the_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_ahead_gives_way, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

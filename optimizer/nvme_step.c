/* SPDX-License-Identifier: MIT */
/* The NVMe-pipelined optimizer step (see nvme_step.h). */
#include "optimizer/nvme_step.h"
#include "core/convert.h"
#include "core/time.h"
#include "core/trace.h"

#include <stdlib.h>
#include <string.h>

typedef struct chunk {
    const zt_opt_shard *shard;
    int64_t begin, n;
} chunk;

typedef enum set_state { SET_IDLE = 0, SET_READING, SET_WRITING } set_state;

/* One buffer set (master, m, v of one sub-group) and its transfers in flight: NVMe reads or
 * writes, and the copy of a master from the parameters' home in device memory (ev). */
typedef struct opt_set {
    zt_swap_io io[3];
    zt_event *ev; /* created on first use */
    int from_dev; /* the master's device copy is in flight (ev recorded after it) */
    set_state state;
    const zt_opt_shard *shard;
    int64_t begin, n;
} opt_set;

struct zt_nvme_step {
    zt_nvme_step_device dev; /* where masters in device memory are copied from */
    float *bufs[ZT_NVME_STEP_MAX_BUFS];
    int64_t buf_elems;
    void *param_staging;
    opt_set sets[ZT_NVME_STEP_MAX_SETS];
    int n_sets;
    int preread;     /* sub-groups of the next step already being read into sets 0..n-1 */
    zt_error failed; /* a background failure not reported yet (status ZT_OK: none) */

    /* the step in progress, from zt_nvme_step_begin to its last sub-group (chunks: NULL
     * when none is) */
    chunk *chunks;
    int count, next; /* sub-groups; the first not updated */
    int issued;      /* sub-groups whose read has been started (pre-read ones included) */
    const zt_opt_shard *shards;
    int n_shards;
    zt_adam_hparams h;
    zt_threadpool *pool;
    zt_adam_variant variant;
    zt_homes *homes;
    zt_dtype dtype;
    uint64_t *h2d_bytes;
};

int64_t zt_nvme_step_chunk_elems(int64_t sub_group_size, uint64_t block_size)
{
    int64_t cap = (int64_t)16 << 20, per_block = (int64_t)(block_size / sizeof(float));
    int64_t n = sub_group_size < cap ? sub_group_size : cap;
    n = n / per_block * per_block;
    return n < per_block ? per_block : n;
}

zt_status zt_nvme_step_create(float *const *bufs, int sets, int64_t buf_elems, void *param_staging,
                              zt_nvme_step_device dev, zt_nvme_step **out, zt_error *err)
{
    if (sets < ZT_NVME_STEP_MIN_SETS || sets > ZT_NVME_STEP_MAX_SETS)
        return ZT_ERR(err, ZT_ERR_ARGUMENT,
                      "the NVMe optimizer step takes %d to %d buffer "
                      "sets, not %d",
                      ZT_NVME_STEP_MIN_SETS, ZT_NVME_STEP_MAX_SETS, sets);
    zt_nvme_step *s = calloc(1, sizeof *s);
    if (!s)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory for the NVMe optimizer step");
    memcpy(s->bufs, bufs, sizeof(float *) * 3 * (size_t)sets);
    s->n_sets = sets;
    s->buf_elems = buf_elems;
    s->param_staging = param_staging;
    s->dev = dev;
    *out = s;
    return ZT_OK;
}

static zt_home *state_home(const zt_opt_shard *sh, int k)
{
    return k == 0 ? sh->master : k == 1 ? sh->m : sh->v;
}

static float *set_buf(zt_nvme_step *s, int set, int k) { return s->bufs[set * 3 + k]; }

/* The first of master, m, v that a set moves on NVMe: m when the master is the parameters'
 * fp32 home in host memory (updated in place) or in device memory (copied in by start). */
static int first_moved(const zt_opt_shard *sh) { return sh->master->kind != ZT_TIER_NVME; }

/* Queues the copy of a sub-group's master from device memory into the set and records the
 * set's event after it. A copy queued whose event failed is waited for: nothing stays in
 * flight into a set that is not busy. */
static zt_status start_device_copy(zt_nvme_step *s, const chunk *c, int set, zt_error *err)
{
    zt_device *dev = s->dev.dev;
    opt_set *os = &s->sets[set];
    if (!dev)
        return ZT_ERR(err, ZT_ERR_INTERNAL,
                      "the NVMe optimizer step has no device to copy "
                      "'%s' from",
                      c->shard->master->owner);
    size_t bytes = (size_t)c->n * sizeof(float);
    zt_status st = os->ev ? ZT_OK : zt_device_event_create(dev, &os->ev, err);
    if (st == ZT_OK)
        st = zt_device_memcpy_async(dev, set_buf(s, set, 0),
                                    (const char *)c->shard->master->ptr + c->begin * 4, bytes,
                                    ZT_COPY_D2H, s->dev.stream, err);
    if (st == ZT_OK) {
        *s->dev.d2h_bytes += bytes;
        if ((st = zt_device_event_record(dev, os->ev, s->dev.stream, err)) != ZT_OK)
            zt_device_stream_synchronize(dev, s->dev.stream, NULL);
    }
    os->from_dev = st == ZT_OK;
    return st;
}

/* Waits for a set's device copy, if one is in flight. */
static zt_status finish_device_copy(zt_nvme_step *s, opt_set *os, zt_error *err)
{
    if (!os->from_dev)
        return ZT_OK;
    os->from_dev = 0;
    return zt_device_event_synchronize(s->dev.dev, os->ev, err);
}

static zt_status start(zt_nvme_step *s, const chunk *c, int set, int write, zt_error *err)
{
    opt_set *os = &s->sets[set];
    os->shard = c->shard, os->begin = c->begin, os->n = c->n;
    zt_status st = ZT_OK;
    uint64_t off = (uint64_t)c->begin * sizeof(float), len = (uint64_t)c->n * sizeof(float);
    int first = first_moved(c->shard);
    for (int k = first; k < 3 && st == ZT_OK; k++) {
        zt_home *h = state_home(c->shard, k);
        st = write
                 ? zt_swap_write_at(h->swap, &h->ext, off, set_buf(s, set, k), len, &os->io[k], err)
                 : zt_swap_read_at(h->swap, &h->ext, off, set_buf(s, set, k), len, &os->io[k], err);
        if (st != ZT_OK)
            for (int j = first; j < k; j++)
                zt_swap_wait(state_home(c->shard, j)->swap, &os->io[j], NULL);
    }
    if (st == ZT_OK && !write && c->shard->master->kind == ZT_TIER_DEVICE &&
        (st = start_device_copy(s, c, set, err)) != ZT_OK)
        for (int j = first; j < 3; j++)
            zt_swap_wait(state_home(c->shard, j)->swap, &os->io[j], NULL);
    os->state = st != ZT_OK ? SET_IDLE : write ? SET_WRITING : SET_READING;
    return st;
}

/* Waits for a set's transfers; the first failure goes to err. */
static zt_status finish(zt_nvme_step *s, opt_set *os, zt_error *err)
{
    zt_status st = os->state != SET_IDLE ? finish_device_copy(s, os, err) : ZT_OK;
    for (int k = os->state != SET_IDLE ? first_moved(os->shard) : 3; k < 3; k++) {
        zt_status w =
            zt_swap_wait(state_home(os->shard, k)->swap, &os->io[k], st == ZT_OK ? err : NULL);
        st = st == ZT_OK ? w : st;
    }
    os->state = SET_IDLE;
    return st;
}

/* Waits for the sets in state `which` (SET_IDLE: every busy set). */
static zt_status finish_sets(zt_nvme_step *s, set_state which, zt_error *err)
{
    zt_status st = ZT_OK;
    for (int k = 0; k < s->n_sets; k++)
        if (s->sets[k].state && (which == SET_IDLE || s->sets[k].state == which)) {
            zt_status w = finish(s, &s->sets[k], st == ZT_OK ? err : NULL);
            st = st == ZT_OK ? w : st;
        }
    return st;
}

/* A failure kept from the background, reported once (and then forgotten). */
static zt_status take_failure(zt_nvme_step *s, zt_error *err)
{
    zt_status st = s->failed.status;
    if (st != ZT_OK && err)
        *err = s->failed;
    zt_error_clear(&s->failed);
    return st;
}

zt_status zt_nvme_step_drain(zt_nvme_step *s, zt_error *err)
{
    if (!s)
        return ZT_OK;
    if (s->chunks) { /* the step in progress first: its state is what readers want */
        zt_status st = zt_nvme_step_advance(s, s->n_shards, err);
        if (st != ZT_OK)
            return st;
    }
    s->preread = 0; /* read-ahead data may go stale: the step reads again */
    zt_status st = take_failure(s, err);
    zt_status w = finish_sets(s, SET_IDLE, st == ZT_OK ? err : NULL);
    return st != ZT_OK ? st : w;
}

zt_status zt_nvme_step_poll(zt_nvme_step *s, zt_error *err)
{
    if (!s)
        return ZT_OK;
    for (int k = 0; k < s->n_sets; k++) {
        opt_set *os = &s->sets[k];
        int done = os->state == SET_WRITING;
        for (int j = done ? first_moved(os->shard) : 3; done && j < 3; j++)
            done = zt_swap_done(state_home(os->shard, j)->swap, &os->io[j]);
        if (done) /* the first failure is kept, with its message */
            finish(s, os, s->failed.status == ZT_OK ? &s->failed : NULL);
    }
    return take_failure(s, err);
}

void zt_nvme_step_destroy(zt_nvme_step *s)
{
    if (!s)
        return;
    finish_sets(s, SET_IDLE, NULL);
    for (int k = 0; k < s->n_sets; k++)
        if (s->sets[k].ev)
            zt_device_event_destroy(s->dev.dev, s->sets[k].ev);
    free(s->chunks);
    free(s);
}

static void *param_out(zt_nvme_step *s, const zt_opt_shard *sh)
{
    void *host = zt_home_host_ptr(sh->param);
    return host ? host : s->param_staging;
}

static zt_status update(zt_nvme_step *s, const chunk *c, int set, zt_error *err)
{
    const zt_opt_shard *sh = c->shard;
    size_t dsize = zt_dtype_size(s->dtype);
    float *home_master = zt_home_host_ptr(sh->master); /* updated in place */
    float *master = home_master ? home_master + c->begin : set_buf(s, set, 0);
    int in_place = home_master && (void *)home_master == zt_home_host_ptr(sh->param);
    /* fp32 parameters in device memory are the master's new bytes: copied from it, with no
     * working copy written beside it */
    int from_master = sh->param->kind == ZT_TIER_DEVICE && s->dtype == ZT_F32;
    zt_adam_tensors t = {
        master,
        set_buf(s, set, 1),
        set_buf(s, set, 2),
        (const char *)sh->grad + (size_t)c->begin * zt_dtype_size(sh->grad_dtype),
        sh->grad_dtype,
        in_place || from_master ? NULL : (char *)param_out(s, sh) + (size_t)c->begin * dsize,
        s->dtype,
        c->n};
    double t0 = zt_now_s();
    zt_adam_step_parallel(s->pool, s->variant, &s->h, &t);
    zt_trace_span("optimizer", t0, "adam '%s' [%lld, %lld)", sh->master->owner, (long long)c->begin,
                  (long long)(c->begin + c->n));
    if (from_master) {
        size_t bytes = (size_t)c->n * sizeof(float);
        *s->h2d_bytes += bytes;
        return zt_device_copy_sync(s->homes->dev, (float *)sh->param->ptr + c->begin, master, bytes,
                                   ZT_COPY_H2D, s->homes->stream, err);
    }
    if (c->begin + c->n < sh->numel || zt_home_host_ptr(sh->param))
        return ZT_OK; /* the shard's working copy is stored once, after its last sub-group */
    if (sh->param->kind == ZT_TIER_DEVICE)
        *s->h2d_bytes += sh->param->bytes;
    return zt_home_store(s->homes, sh->param, param_out(s, sh), err);
}

/* The sub-groups of every shard, in order (count only when out is NULL). */
static int make_chunks(const zt_opt_shard *shards, int n, int64_t per, chunk *out)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int64_t b = 0; b < shards[i].numel; b += per) {
            int64_t left = shards[i].numel - b;
            if (out)
                out[k] = (chunk){&shards[i], b, left < per ? left : per};
            k++;
        }
    return k;
}

static chunk *plan(zt_nvme_step *s, const zt_opt_shard *shards, int n, int *count)
{
    *count = make_chunks(shards, n, s->buf_elems, NULL);
    chunk *chunks = calloc((size_t)(*count > 0 ? *count : 1), sizeof *chunks);
    if (chunks)
        make_chunks(shards, n, s->buf_elems, chunks);
    return chunks;
}

void zt_nvme_step_preread(zt_nvme_step *s, const zt_opt_shard *shards, int n)
{
    if (!s || s->chunks || s->preread > 0 || s->failed.status != ZT_OK)
        return;
    /* the previous step's last write-backs first; a failure in them is kept for the step */
    if (finish_sets(s, SET_WRITING, &s->failed) != ZT_OK)
        return;
    int count = 0;
    chunk *chunks = plan(s, shards, n, &count);
    int k = 0;
    for (; chunks && k < s->n_sets && k < count; k++) {
        zt_error ignored = {0}; /* a read that cannot start is started again by the step */
        if (start(s, &chunks[k], k, 0, &ignored) != ZT_OK)
            break;
    }
    s->preread = k;
    free(chunks);
}

/* Ends the step in progress; after a failure nothing may stay in flight. */
static zt_status end_step(zt_nvme_step *s, zt_status st)
{
    free(s->chunks);
    s->chunks = NULL;
    s->count = s->next = s->issued = 0;
    if (st != ZT_OK)
        finish_sets(s, SET_IDLE, NULL);
    return st;
}

zt_status zt_nvme_step_begin(zt_nvme_step *s, const zt_opt_shard *shards, int n,
                             const zt_adam_hparams *h, zt_threadpool *pool, zt_adam_variant v,
                             zt_homes *homes, zt_dtype dtype, uint64_t *h2d_bytes, zt_error *err)
{
    if (s->chunks)
        return ZT_ERR(err, ZT_ERR_USAGE, "an optimizer step is already in progress");
    int pre = s->preread, count = 0;
    s->preread = 0;
    zt_status st = take_failure(s, err);
    if (st == ZT_OK)
        st = finish_sets(s, SET_WRITING, err); /* the previous step's last write-backs */
    chunk *chunks = st == ZT_OK ? plan(s, shards, n, &count) : NULL;
    if (st == ZT_OK && !chunks)
        st = ZT_ERR(err, ZT_ERR_NOMEM, "out of memory planning the optimizer step");
    if (st != ZT_OK) {
        finish_sets(s, SET_IDLE, NULL);
        return st;
    }
    s->chunks = chunks, s->count = count, s->next = 0, s->issued = pre;
    s->shards = shards, s->n_shards = n, s->h = *h, s->pool = pool, s->variant = v;
    s->homes = homes, s->dtype = dtype, s->h2d_bytes = h2d_bytes;
    if (pre == 0 && count > 0 && (st = start(s, &chunks[0], 0, 0, err)) == ZT_OK)
        s->issued = 1;
    if (st == ZT_OK && count == 0)
        return end_step(s, ZT_OK);
    return st == ZT_OK ? ZT_OK : end_step(s, st);
}

/* Sub-group i: reads started up to i + N - 2 (N sets; sub-group j lives in set j mod N,
 * whose previous sub-group j - N <= i - 2 was updated and its write started: finished
 * first), then i updated and written back. */
static zt_status step_chunk(zt_nvme_step *s, int i, zt_error *err)
{
    opt_set *sets = s->sets;
    int cur = i % s->n_sets;
    zt_status st = ZT_OK;
    while (st == ZT_OK && s->issued <= i + s->n_sets - 2 && s->issued < s->count) {
        int j = s->issued, set = j % s->n_sets;
        if (sets[set].state)
            st = finish(s, &sets[set], err);
        if (st == ZT_OK && (st = start(s, &s->chunks[j], set, 0, err)) == ZT_OK)
            s->issued++;
    }
    if (st == ZT_OK)
        st = finish(s, &sets[cur], err);
    if (st == ZT_OK)
        st = update(s, &s->chunks[i], cur, err);
    if (st == ZT_OK)
        st = start(s, &s->chunks[i], cur, 1, err);
    return st;
}

int zt_nvme_step_shards_done(const zt_nvme_step *s)
{
    if (!s || !s->chunks)
        return -1;
    return (int)(s->chunks[s->next].shard - s->shards);
}

zt_status zt_nvme_step_advance(zt_nvme_step *s, int through, zt_error *err)
{
    zt_status st = ZT_OK;
    while (s && s->chunks && st == ZT_OK && s->chunks[s->next].shard - s->shards < through) {
        st = step_chunk(s, s->next, err);
        if (st == ZT_OK && ++s->next == s->count)
            return end_step(s, ZT_OK);
    }
    /* On success the last write-backs finish while the caller computes the next step; the
     * next use of the optimizer state (step, checkpoint, parameter read) waits for them. */
    return st == ZT_OK ? ZT_OK : end_step(s, st);
}

zt_status zt_nvme_step_run(zt_nvme_step *s, const zt_opt_shard *shards, int n,
                           const zt_adam_hparams *h, zt_threadpool *pool, zt_adam_variant v,
                           zt_homes *homes, zt_dtype dtype, uint64_t *h2d_bytes, zt_error *err)
{
    zt_status st = zt_nvme_step_begin(s, shards, n, h, pool, v, homes, dtype, h2d_bytes, err);
    return st == ZT_OK ? zt_nvme_step_advance(s, n, err) : st;
}

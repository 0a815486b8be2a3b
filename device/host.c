/* SPDX-License-Identifier: MIT */
/* The `host` device backend: "device memory" is host memory under a byte budget that plays
 * the role of HBM, and each stream is a worker thread that runs its queued operations in
 * order. It exercises every asynchronous path of the runtime on a CPU-only machine.
 *
 * Ordering: one mutex per device guards every queue and counter. An operation gets a
 * sequence number when queued; an event recorded on a stream captures the stream's last
 * queued sequence number and is complete once the stream's completed count reaches it. */
#include "device/device.h"
#include "core/convert.h"
#include "core/quant.h"
#include "core/time.h"
#include "core/trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <errno.h>
#include <float.h>
#include <math.h>

enum host_op_kind {
    OP_COPY,
    OP_SET,
    OP_CAST,
    OP_SCALE,
    OP_WAIT,
    OP_FN,
    OP_ACC,
    OP_SUMSQ,
    OP_ADAM,
    OP_Q8,
    OP_DQ8,
    OP_Q4,
    OP_DQ4,
    OP_STAMP /* a timed event's record: dst, the event, takes the clock (under the lock) */
};

typedef struct host_op {
    enum host_op_kind kind;
    void *dst;
    const void *src;
    size_t bytes; /* COPY/SET: bytes; CAST/SCALE: elements */
    int value;
    zt_dtype dst_type, src_type;
    float alpha;
    zt_stream *wait_stream; /* OP_WAIT */
    uint64_t wait_seq;
    void (*fn)(void *); /* OP_FN */
    void *arg;
    zt_adam_consts consts; /* OP_ADAM: master = dst, grad = src, m, v, out, count */
    float *m, *v;
    void *out;
    unsigned long long *count;
    int block; /* OP_Q8..OP_DQ4: q = dst or src, scales = m */
} host_op;

typedef struct host_device host_device;

struct zt_stream {
    host_device *dev;
    pthread_t thread;
    pthread_cond_t work;
    host_op *ops; /* ring buffer */
    size_t cap, head, count;
    uint64_t queued, completed;
    int stop;
    char track[32]; /* the worker's name in the timeline trace */
};

struct zt_event {
    zt_stream *stream; /* NULL: never recorded, counts as complete */
    uint64_t seq;
    int timed; /* event_create_timed: at = the wall clock when the stream reached the record */
    double at;
};

/* Size header in front of every device allocation so free() can return the bytes. */
typedef struct alloc_header {
    size_t bytes;
    size_t pad[7]; /* keep the payload 64-byte aligned */
} alloc_header;

/* Freed allocations are kept for reuse, as the cuda backend's stream-ordered pool keeps
 * its blocks: a layer gathered again gets warm memory instead of fresh pages to fault in.
 * Cached and allocated bytes together stay within the budget (as a GPU's pool stays within
 * its memory); an allocation takes a block of its exact size. */
/* Under AddressSanitizer a cached block is poisoned, so a use after free still shows. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef struct cached_block {
    alloc_header *h;
    struct cached_block *next;
} cached_block;

struct host_device {
    zt_device base;
    pthread_mutex_t lock;
    pthread_cond_t progress; /* broadcast whenever any stream completes an operation */
    pthread_mutex_t cache_lock;
    cached_block *cache; /* most recently freed first */
    uint64_t cached_bytes;
    zt_threadpool *pool; /* the kernels' threads (zt_device_config.cpu_pool), or NULL */
};

/* The device-optimizer kernels, element by element as the CUDA ones. */
static void accumulate(float *acc, const void *src, zt_dtype t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] += zt_load_f32(src, t, i);
}

static void sumsq(const float *x, size_t n, float scale, double *out)
{
    double sum = 0.0, bad = 0.0;
    for (size_t i = 0; i < n; i++) {
        float g = x[i] * scale;
        if (!(fabsf(g) <= FLT_MAX))
            bad += 1.0;
        else
            sum += (double)g * (double)g;
    }
    out[0] += sum;
    out[1] += bad;
}

static void adam(const host_op *op)
{
    float *master = op->dst;
    const float *grad = op->src;
    unsigned long long bad = 0;
    for (size_t i = 0; i < op->bytes; i++) {
        float p = master[i], m = op->m[i], v = op->v[i];
        float g = zt_adam_elem(&op->consts, grad[i], &p, &m, &v);
        bad += !(fabsf(g) <= FLT_MAX);
        master[i] = p, op->m[i] = m, op->v[i] = v;
        if (op->out)
            zt_store_f32(op->out, op->dst_type, i, p);
    }
    *op->count += bad;
}

static void run_op(host_device *d, const host_op *op)
{
    switch (op->kind) {
    case OP_COPY:
        memmove(op->dst, op->src, op->bytes);
        break;
    case OP_SET:
        memset(op->dst, op->value, op->bytes);
        break;
    case OP_CAST:
        zt_convert_array(op->dst, op->dst_type, op->src, op->src_type, op->bytes);
        break;
    case OP_SCALE:
        zt_scale_array(op->dst, op->dst_type, op->alpha, op->bytes);
        break;
    case OP_FN:
        op->fn(op->arg);
        break;
    case OP_ACC:
        accumulate(op->dst, op->src, op->src_type, op->bytes);
        break;
    case OP_SUMSQ:
        sumsq(op->src, op->bytes, op->alpha, op->dst);
        break;
    case OP_ADAM:
        adam(op);
        break;
    case OP_Q8: /* x = src (src_type), q = dst, scales = m */
        zt_quant8_parallel(d->pool, zt_quant_variant_best(), op->src, op->src_type,
                           (int64_t)op->bytes, op->block, op->dst, op->m);
        break;
    case OP_DQ8: /* q = src, scales = m, out = dst (dst_type) */
        zt_dequant8_parallel(d->pool, zt_quant_variant_best(), op->src, op->m, (int64_t)op->bytes,
                             op->block, op->dst, op->dst_type);
        break;
    case OP_Q4:
        zt_quant4_parallel(d->pool, op->src, (int64_t)op->bytes, op->block, op->dst, op->m);
        break;
    case OP_DQ4:
        zt_dequant4_add_parallel(d->pool, op->src, op->m, (int64_t)op->bytes, op->block, op->dst);
        break;
    case OP_WAIT:
    case OP_STAMP:
        break; /* handled by the worker under the lock */
    }
}

static void trace_op(const host_op *op, double t0)
{
    static const char *const names[] = {"copy",
                                        "memset",
                                        "cast",
                                        "scale",
                                        "wait",
                                        "host function",
                                        "accumulate",
                                        "sum of squares",
                                        "adam",
                                        "quantize 8",
                                        "dequantize 8",
                                        "quantize 4",
                                        "dequantize-add 4",
                                        "timed event"};
    if (op->kind == OP_COPY || op->kind == OP_SET)
        zt_trace_span("stream", t0, "%s %.2f MB", names[op->kind], (double)op->bytes / 1e6);
    else
        zt_trace_span("stream", t0, "%s", names[op->kind]);
}

static void *stream_worker(void *arg)
{
    zt_stream *s = arg;
    host_device *d = s->dev;
    zt_trace_thread_name(s->track);
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (s->count == 0 && !s->stop)
            pthread_cond_wait(&s->work, &d->lock);
        if (s->count == 0 && s->stop)
            break;
        host_op op = s->ops[s->head];
        double t0 = zt_now_s();
        if (op.kind == OP_WAIT) {
            while (op.wait_stream->completed < op.wait_seq)
                pthread_cond_wait(&d->progress, &d->lock);
        } else if (op.kind == OP_STAMP) {
            ((zt_event *)op.dst)->at = zt_now_s();
        } else {
            pthread_mutex_unlock(&d->lock);
            run_op(d, &op);
            pthread_mutex_lock(&d->lock);
        }
        if (zt_trace_on()) { /* not under the device lock: the trace takes its own */
            pthread_mutex_unlock(&d->lock);
            trace_op(&op, t0);
            pthread_mutex_lock(&d->lock);
        }
        s->head = (s->head + 1) % s->cap;
        s->count--;
        s->completed++;
        pthread_cond_broadcast(&d->progress);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

/* Queues op with the device lock held. */
static zt_status enqueue_locked(zt_stream *s, const host_op *op, zt_error *err)
{
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        host_op *ops = malloc(cap * sizeof *ops);
        if (!ops)
            return ZT_ERR(err, ZT_ERR_NOMEM, "host backend: cannot grow a stream queue");
        for (size_t i = 0; i < s->count; i++)
            ops[i] = s->ops[(s->head + i) % s->cap];
        free(s->ops);
        s->ops = ops, s->cap = cap, s->head = 0;
    }
    s->ops[(s->head + s->count) % s->cap] = *op;
    s->count++;
    s->queued++;
    pthread_cond_signal(&s->work);
    return ZT_OK;
}

static zt_status enqueue(zt_stream *s, const host_op *op, zt_error *err)
{
    host_device *d = s->dev;
    pthread_mutex_lock(&d->lock);
    zt_status st = enqueue_locked(s, op, err);
    pthread_mutex_unlock(&d->lock);
    return st;
}

static zt_status host_create(const zt_device_config *cfg, zt_device **out, zt_error *err)
{
    host_device *d = calloc(1, sizeof *d);
    if (!d)
        return ZT_ERR(err, ZT_ERR_NOMEM, "host backend: out of memory");
    zt_device_base_init(&d->base, &zt_device_host, cfg->capacity_bytes);
    d->pool = cfg->cpu_pool;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->progress, NULL);
    pthread_mutex_init(&d->cache_lock, NULL);
    *out = &d->base;
    return ZT_OK;
}

static void host_destroy(zt_device *dev)
{
    host_device *d = (host_device *)dev;
    for (cached_block *b = d->cache, *next; b; b = next) {
        next = b->next;
        UNPOISON(b->h + 1, b->h->bytes ? b->h->bytes : 1);
        free(b->h);
        free(b);
    }
    pthread_mutex_destroy(&d->cache_lock);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->progress);
    zt_device_base_fini(dev);
    free(d);
}

/* A cached block of exactly `bytes`, or NULL. */
static alloc_header *cache_take(host_device *d, size_t bytes)
{
    pthread_mutex_lock(&d->cache_lock);
    alloc_header *h = NULL;
    for (cached_block **p = &d->cache; *p; p = &(*p)->next)
        if ((*p)->h->bytes == bytes) {
            cached_block *b = *p;
            *p = b->next;
            h = b->h;
            d->cached_bytes -= bytes;
            free(b);
            UNPOISON(h + 1, bytes ? bytes : 1);
            break;
        }
    pthread_mutex_unlock(&d->cache_lock);
    return h;
}

/* What the cache may keep: the most ever in use (zt_stats.device_bytes_peak) less what is
 * in use now, so that this backend never holds more memory than that peak counts. (Bounded by
 * the budget instead, it kept freed blocks of sizes no later allocation asked for: stage 1's
 * step-end all-gather buffers beside the backward's gradient and bucket buffers, a model's
 * size and more per rank that no counter showed.) */
static uint64_t cache_room(host_device *d)
{
    pthread_mutex_lock(&d->base.budget_lock);
    uint64_t in_use = d->base.bytes_in_use, peak = d->base.bytes_peak;
    pthread_mutex_unlock(&d->base.budget_lock);
    return peak > in_use ? peak - in_use : 0;
}

/* Keeps the newest cached blocks that fit in `room`, freeing the others. */
static void trim_cache(host_device *d, uint64_t room)
{
    pthread_mutex_lock(&d->cache_lock);
    cached_block **p = &d->cache;
    uint64_t kept = 0;
    while (*p) {
        if (kept + (*p)->h->bytes > room) {
            cached_block *old = *p;
            *p = old->next;
            d->cached_bytes -= old->h->bytes;
            UNPOISON(old->h + 1, old->h->bytes ? old->h->bytes : 1);
            free(old->h);
            free(old);
            continue;
        }
        kept += (*p)->h->bytes;
        p = &(*p)->next;
    }
    pthread_mutex_unlock(&d->cache_lock);
}

/* Keeps h for reuse, within cache_room. */
static void cache_put(host_device *d, alloc_header *h)
{
    cached_block *b = malloc(sizeof *b);
    if (!b) {
        free(h);
        return;
    }
    POISON(h + 1, h->bytes ? h->bytes : 1);
    pthread_mutex_lock(&d->cache_lock);
    b->h = h, b->next = d->cache;
    d->cache = b;
    d->cached_bytes += h->bytes;
    pthread_mutex_unlock(&d->cache_lock);
    trim_cache(d, cache_room(d));
}

/* Memory held now, in use and cached: its peak (zt_device.bytes_held_peak). */
static void note_held(host_device *d)
{
    pthread_mutex_lock(&d->cache_lock);
    uint64_t cached = d->cached_bytes;
    pthread_mutex_unlock(&d->cache_lock);
    pthread_mutex_lock(&d->base.budget_lock);
    uint64_t held = d->base.bytes_in_use + cached;
    if (held > d->base.bytes_held_peak)
        d->base.bytes_held_peak = held;
    pthread_mutex_unlock(&d->base.budget_lock);
}

static zt_status host_alloc(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    zt_status st = zt_device_budget_take(dev, bytes, err);
    if (st != ZT_OK)
        return st;
    alloc_header *cached = cache_take((host_device *)dev, bytes);
    if (cached) {
        *ptr = cached + 1;
        return ZT_OK;
    }
    /* new memory: cached blocks beyond what the peak leaves beside it go first */
    trim_cache((host_device *)dev, cache_room((host_device *)dev));
    void *raw = NULL;
    if (posix_memalign(&raw, 64, sizeof(alloc_header) + (bytes ? bytes : 1)) != 0) {
        zt_device_budget_return(dev, bytes);
        return ZT_ERR(err, ZT_ERR_NOMEM, "host backend: malloc of %zu bytes failed", bytes);
    }
    ((alloc_header *)raw)->bytes = bytes;
    *ptr = (alloc_header *)raw + 1;
    note_held((host_device *)dev);
    return ZT_OK;
}

static void host_free(zt_device *dev, void *ptr)
{
    if (!ptr)
        return;
    alloc_header *h = (alloc_header *)ptr - 1;
    zt_device_budget_return(dev, h->bytes);
    cache_put((host_device *)dev, h);
}

static zt_status host_pinned_alloc(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    (void)dev;
    if (posix_memalign(ptr, 4096, bytes ? bytes : 1) != 0)
        return ZT_ERR(err, ZT_ERR_NOMEM, "host backend: allocation of %zu bytes failed", bytes);
    return ZT_OK;
}

static void host_pinned_free(zt_device *dev, void *ptr)
{
    (void)dev;
    free(ptr);
}

/* Pinning is page locking: the pages stay resident, as the DMA of a real device needs. */
static zt_status host_register(zt_device *dev, void *ptr, size_t bytes, zt_error *err)
{
    (void)dev;
    if (mlock(ptr, bytes) == 0)
        return ZT_OK;
    int e = errno;
    return ZT_ERR(err, e == ENOMEM || e == EPERM ? ZT_ERR_NOMEM : ZT_ERR_DEVICE,
                  "host backend: mlock of %zu bytes failed (%s); raise RLIMIT_MEMLOCK "
                  "(ulimit -l) to pin it",
                  bytes, strerror(e));
}

static void host_unregister(zt_device *dev, void *ptr, size_t bytes)
{
    (void)dev;
    munlock(ptr, bytes);
}

static zt_status host_stream_create(zt_device *dev, zt_stream **out, zt_error *err)
{
    zt_stream *s = calloc(1, sizeof *s);
    if (!s)
        return ZT_ERR(err, ZT_ERR_NOMEM, "host backend: out of memory for a stream");
    static atomic_int streams;
    s->dev = (host_device *)dev;
    snprintf(s->track, sizeof s->track, "host stream %d", atomic_fetch_add(&streams, 1) + 1);
    pthread_cond_init(&s->work, NULL);
    if (pthread_create(&s->thread, NULL, stream_worker, s) != 0) {
        pthread_cond_destroy(&s->work);
        free(s);
        return ZT_ERR(err, ZT_ERR_DEVICE, "host backend: cannot start a stream thread");
    }
    *out = s;
    return ZT_OK;
}

static void host_stream_destroy(zt_device *dev, zt_stream *s)
{
    if (!s)
        return;
    host_device *d = (host_device *)dev;
    pthread_mutex_lock(&d->lock);
    s->stop = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&d->lock);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->work);
    free(s->ops);
    free(s);
}

static zt_status host_stream_synchronize(zt_device *dev, zt_stream *s, zt_error *err)
{
    (void)err;
    host_device *d = (host_device *)dev;
    pthread_mutex_lock(&d->lock);
    uint64_t target = s->queued;
    while (s->completed < target)
        pthread_cond_wait(&d->progress, &d->lock);
    pthread_mutex_unlock(&d->lock);
    return ZT_OK;
}

static zt_status host_event_create(zt_device *dev, zt_event **out, zt_error *err)
{
    (void)dev;
    *out = calloc(1, sizeof **out);
    return *out ? ZT_OK : ZT_ERR(err, ZT_ERR_NOMEM, "host backend: out of memory for an event");
}

static zt_status host_event_synchronize(zt_device *dev, zt_event *e, zt_error *err);

static void host_event_destroy(zt_device *dev, zt_event *e)
{
    if (e && e->timed) /* a pending record writes into it */
        (void)host_event_synchronize(dev, e, NULL);
    free(e);
}

/* A timed event takes the clock when the stream reaches it: now on an idle stream, else
 * through an op queued behind the stream's work. */
static zt_status host_event_record(zt_device *dev, zt_event *e, zt_stream *s, zt_error *err)
{
    host_device *d = (host_device *)dev;
    zt_status st = ZT_OK;
    pthread_mutex_lock(&d->lock);
    if (e->timed && s->completed == s->queued)
        e->at = zt_now_s();
    else if (e->timed) {
        host_op op = {.kind = OP_STAMP, .dst = e};
        st = enqueue_locked(s, &op, err);
    }
    e->stream = s;
    e->seq = s->queued;
    pthread_mutex_unlock(&d->lock);
    return st;
}

static zt_status host_event_create_timed(zt_device *dev, zt_event **out, zt_error *err)
{
    zt_status st = host_event_create(dev, out, err);
    if (st == ZT_OK)
        (*out)->timed = 1;
    return st;
}

static zt_status host_event_elapsed(zt_device *dev, zt_event *start, zt_event *end, double *seconds,
                                    zt_error *err)
{
    host_device *d = (host_device *)dev;
    const char *bad = NULL;
    pthread_mutex_lock(&d->lock);
    if (!start->timed || !end->timed)
        bad = "an event not made by event_create_timed";
    else if (!start->stream || !end->stream)
        bad = "an event never recorded";
    else if (start->stream->completed < start->seq || end->stream->completed < end->seq)
        bad = "an event not complete yet";
    else
        *seconds = end->at - start->at;
    pthread_mutex_unlock(&d->lock);
    return bad ? ZT_ERR(err, ZT_ERR_USAGE,
                        "host backend: elapsed time of %s; record both timed events and wait "
                        "for the later one first",
                        bad)
               : ZT_OK;
}

static zt_status host_stream_wait_event(zt_device *dev, zt_stream *s, zt_event *e, zt_error *err)
{
    (void)dev;
    if (!e->stream)
        return ZT_OK;
    host_op op = {.kind = OP_WAIT, .wait_stream = e->stream, .wait_seq = e->seq};
    return enqueue(s, &op, err);
}

static int host_event_query(zt_device *dev, zt_event *e)
{
    host_device *d = (host_device *)dev;
    if (!e->stream)
        return 1;
    pthread_mutex_lock(&d->lock);
    int done = e->stream->completed >= e->seq;
    pthread_mutex_unlock(&d->lock);
    return done;
}

static zt_status host_event_synchronize(zt_device *dev, zt_event *e, zt_error *err)
{
    (void)err;
    host_device *d = (host_device *)dev;
    if (!e->stream)
        return ZT_OK;
    pthread_mutex_lock(&d->lock);
    while (e->stream->completed < e->seq)
        pthread_cond_wait(&d->progress, &d->lock);
    pthread_mutex_unlock(&d->lock);
    return ZT_OK;
}

static zt_status host_memcpy_async(zt_device *dev, void *dst, const void *src, size_t bytes,
                                   zt_copy_kind kind, zt_stream *s, zt_error *err)
{
    (void)dev, (void)kind;
    host_op op = {.kind = OP_COPY, .dst = dst, .src = src, .bytes = bytes};
    return enqueue(s, &op, err);
}

static zt_status host_memset_async(zt_device *dev, void *dst, int value, size_t bytes, zt_stream *s,
                                   zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_SET, .dst = dst, .value = value, .bytes = bytes};
    return enqueue(s, &op, err);
}

static zt_status host_cast_async(zt_device *dev, void *dst, zt_dtype dst_type, const void *src,
                                 zt_dtype src_type, size_t n, zt_stream *s, zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_CAST,
                  .dst = dst,
                  .src = src,
                  .bytes = n,
                  .dst_type = dst_type,
                  .src_type = src_type};
    return enqueue(s, &op, err);
}

static zt_status host_launch_host_fn(zt_device *dev, zt_stream *s, void (*fn)(void *), void *arg,
                                     zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_FN, .fn = fn, .arg = arg};
    return enqueue(s, &op, err);
}

static zt_status host_scale_async(zt_device *dev, void *x, zt_dtype type, float alpha, size_t n,
                                  zt_stream *s, zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_SCALE, .dst = x, .bytes = n, .dst_type = type, .alpha = alpha};
    return enqueue(s, &op, err);
}

static zt_status host_accumulate_async(zt_device *dev, float *acc, const void *src,
                                       zt_dtype src_type, size_t n, zt_stream *s, zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_ACC, .dst = acc, .src = src, .src_type = src_type, .bytes = n};
    return enqueue(s, &op, err);
}

static zt_status host_sumsq_async(zt_device *dev, const float *x, size_t n, float scale,
                                  double *out, double *scratch, zt_stream *s, zt_error *err)
{
    (void)dev, (void)scratch; /* one worker sums in element order */
    host_op op = {.kind = OP_SUMSQ, .dst = out, .src = x, .bytes = n, .alpha = scale};
    return enqueue(s, &op, err);
}

static zt_status host_adam_async(zt_device *dev, const zt_adam_consts *c, float *master, float *m,
                                 float *v, const float *grad, void *param_out, zt_dtype param_type,
                                 size_t n, unsigned long long *nonfinite, zt_stream *s,
                                 zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_ADAM,
                  .dst = master,
                  .src = grad,
                  .bytes = n,
                  .consts = *c,
                  .m = m,
                  .v = v,
                  .out = param_out,
                  .dst_type = param_type,
                  .count = nonfinite};
    return enqueue(s, &op, err);
}

static zt_status host_quant8_async(zt_device *dev, const void *x, zt_dtype type, size_t n,
                                   int block, int8_t *q, float *scales, zt_stream *s, zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_Q8,
                  .src = x,
                  .src_type = type,
                  .bytes = n,
                  .block = block,
                  .dst = q,
                  .m = scales};
    return enqueue(s, &op, err);
}

static zt_status host_dequant8_async(zt_device *dev, const int8_t *q, const float *scales, size_t n,
                                     int block, void *out, zt_dtype type, zt_stream *s,
                                     zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_DQ8,
                  .src = q,
                  .m = (float *)scales,
                  .bytes = n,
                  .block = block,
                  .dst = out,
                  .dst_type = type};
    return enqueue(s, &op, err);
}

static zt_status host_quant4_async(zt_device *dev, const float *x, size_t n, int block, uint8_t *q,
                                   float *scales, zt_stream *s, zt_error *err)
{
    (void)dev;
    host_op op = {.kind = OP_Q4, .src = x, .bytes = n, .block = block, .dst = q, .m = scales};
    return enqueue(s, &op, err);
}

static zt_status host_dequant4_add_async(zt_device *dev, const uint8_t *q, const float *scales,
                                         size_t n, int block, float *acc, zt_stream *s,
                                         zt_error *err)
{
    (void)dev;
    host_op op = {
        .kind = OP_DQ4, .src = q, .m = (float *)scales, .bytes = n, .block = block, .dst = acc};
    return enqueue(s, &op, err);
}

const zt_device_iface zt_device_host = {
    /* .name = */ "host",
    /* .create = */ host_create,
    /* .destroy = */ host_destroy,
    /* .alloc = */ host_alloc,
    /* .free = */ host_free,
    /* .host_alloc = */ host_pinned_alloc,
    /* .host_free = */ host_pinned_free,
    /* .host_register = */ host_register,
    /* .host_unregister = */ host_unregister,
    /* .stream_create = */ host_stream_create,
    /* .stream_destroy = */ host_stream_destroy,
    /* .stream_synchronize = */ host_stream_synchronize,
    /* .event_create = */ host_event_create,
    /* .event_destroy = */ host_event_destroy,
    /* .event_record = */ host_event_record,
    /* .stream_wait_event = */ host_stream_wait_event,
    /* .event_query = */ host_event_query,
    /* .event_synchronize = */ host_event_synchronize,
    /* .memcpy_async = */ host_memcpy_async,
    /* .memset_async = */ host_memset_async,
    /* .cast_async = */ host_cast_async,
    /* .scale_async = */ host_scale_async,
    /* .launch_host_fn = */ host_launch_host_fn,
    /* .accumulate_async = */ host_accumulate_async,
    /* .sumsq_async = */ host_sumsq_async,
    /* .adam_async = */ host_adam_async,
    /* .quant8_async = */ host_quant8_async,
    /* .dequant8_async = */ host_dequant8_async,
    /* .quant4_async = */ host_quant4_async,
    /* .dequant4_add_async = */ host_dequant4_add_async,
    /* .event_create_timed = */ host_event_create_timed,
    /* .event_elapsed = */ host_event_elapsed,
};

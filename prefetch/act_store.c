/* SPDX-License-Identifier: MIT */
#include "prefetch/act_store.h"
#include "core/align.h"
#include "core/time.h"
#include "core/trace.h"

#include <stdlib.h>
#include <string.h>

enum { A_EMPTY = 0, A_SAVED, A_LOADED };

typedef struct act_slot {
    uint64_t cap, bytes; /* registered, saved */
    int state;
    zt_home home;
    void *dev;       /* its bytes in device memory: read ahead or loaded (not the home) */
    int ready_set;   /* `ready` was recorded after the copy into dev */
    int stage;       /* NVMe: the staging buffer holding its bytes, -1: none */
    int io_pending;  /* NVMe: a transfer of the stage in flight */
    int io_write;    /* ... the write after the save (else the read for a load) */
    int write_after; /* NVMe: the write waits for the copy into the stage (`saved`) */
    zt_swap_io io;
    double io_t0;
    zt_event *saved; /* after the copy into the home or stage */
    zt_event *ready; /* after the copy into dev */
} act_slot;

struct zt_act_store {
    zt_act_env env;
    int n;
    act_slot *slots;
    int *stack; /* saved layers not loaded yet, in save order: loads pop the top */
    int depth;
    void **stage; /* NVMe staging buffers, pinned, each of the largest size */
    int *stage_owner;
    int n_stage;
    uint64_t stage_bytes;
    zt_event *caller_ev; /* recorded on a caller's stream to order the store after it */
    int failed;          /* a transfer failed: every call returns `fail` until a discard */
    zt_error fail;
    zt_act_stats st;
};

static const char *tier_name(zt_tier_kind t)
{
    return t == ZT_TIER_NVME ? "NVMe" : t == ZT_TIER_HOST ? "host memory" : "device memory";
}

static void count_device(zt_act_store *s, int64_t delta)
{
    s->st.device_bytes += (uint64_t)delta;
    if (s->st.device_bytes > s->st.device_peak)
        s->st.device_peak = s->st.device_bytes;
}

static void stage_release(zt_act_store *s, act_slot *a)
{
    if (a->stage >= 0)
        s->stage_owner[a->stage] = -1;
    a->stage = -1;
}

/* The copy out of a's stage into device memory has finished (or never was). */
static int stage_copy_done(zt_act_store *s, const act_slot *a)
{
    return !a->ready_set || zt_device_event_query(s->env.dev, a->ready);
}

static void set_failure(zt_act_store *s, int layer, const char *what, const zt_error *cause)
{
    if (s->failed)
        return;
    s->failed = 1;
    ZT_ERR(&s->fail, cause->status,
           "%s of layer %d's activations failed: %s; the step cannot go on with them: abandon "
           "it (zt_act_discard) and run it again",
           what, layer, cause->msg);
}

static zt_status failure(zt_act_store *s, zt_error *err)
{
    *err = s->fail;
    return s->fail.status;
}

static zt_status start_write(zt_act_store *s, int layer)
{
    act_slot *a = &s->slots[layer];
    zt_error e;
    a->write_after = 0;
    a->io_t0 = zt_now_s();
    if (zt_swap_write(a->home.swap, &a->home.ext, s->stage[a->stage], zt_round_up(a->bytes, 4096),
                      &a->io, &e) != ZT_OK) {
        set_failure(s, layer, "the NVMe write", &e);
        return e.status;
    }
    a->io_pending = 1, a->io_write = 1;
    return ZT_OK;
}

/* A transfer of layer's stage has completed: a write leaves the bytes on NVMe, a read is
 * copied on to the device buffer. */
static zt_status finish_io(zt_act_store *s, int layer)
{
    act_slot *a = &s->slots[layer];
    zt_error e;
    a->io_pending = 0;
    zt_status st = zt_swap_wait(a->home.swap, &a->io, &e);
    if (s->env.profile && zt_trace_on())
        zt_trace_async("activations", a->io_t0, "NVMe %s of layer %d (%llu bytes)",
                       a->io_write ? "write" : "read", layer, (unsigned long long)a->bytes);
    if (st != ZT_OK) {
        set_failure(s, layer, a->io_write ? "the NVMe write" : "the NVMe read", &e);
        return st;
    }
    if (a->io_write)
        return ZT_OK;
    if ((st = zt_device_memcpy_async(s->env.dev, a->dev, s->stage[a->stage], a->bytes, ZT_COPY_H2D,
                                     s->env.stream, &e)) != ZT_OK ||
        (st = zt_device_event_record(s->env.dev, a->ready, s->env.stream, &e)) != ZT_OK) {
        set_failure(s, layer, "the copy to the device", &e);
        return st;
    }
    a->ready_set = 1;
    return ZT_OK;
}

/* Moves every staged transfer on without waiting; `wait`: waits for one of them first.
 * Stages whose bytes are safe elsewhere stay owned (a later load may use them) until
 * stage_acquire needs one. */
static zt_status pump(zt_act_store *s, int wait)
{
    zt_status st = ZT_OK;
    for (int b = 0; b < s->n_stage && st == ZT_OK; b++) {
        int l = s->stage_owner[b];
        if (l < 0)
            continue;
        act_slot *a = &s->slots[l];
        if (a->write_after && a->state == A_EMPTY) /* freed before its write started */
            a->write_after = 0;
        if (a->write_after && (wait || zt_device_event_query(s->env.dev, a->saved))) {
            zt_error e;
            if (wait && (st = zt_device_event_synchronize(s->env.dev, a->saved, &e)) != ZT_OK) {
                set_failure(s, l, "the copy off the device", &e);
                break;
            }
            st = start_write(s, l);
            wait = 0;
        }
        if (st == ZT_OK && a->io_pending && (wait || zt_swap_done(a->home.swap, &a->io))) {
            st = finish_io(s, l);
            wait = 0;
        }
    }
    return st;
}

/* Position of layer in the stack of saved layers (-1: not there). */
static int stack_pos(const zt_act_store *s, int layer)
{
    for (int i = s->depth - 1; i >= 0; i--)
        if (s->stack[i] == layer)
            return i;
    return -1;
}

/* A staging buffer for layer: a free one, else one whose bytes are safe on NVMe and needed
 * last (the deepest in the stack), else, with may_wait, after the oldest transfer. -1: none. */
static int stage_acquire(zt_act_store *s, int layer, int may_wait, zt_status *st)
{
    *st = ZT_OK;
    for (;;) {
        int victim = -1, victim_pos = 1 << 30;
        for (int b = 0; b < s->n_stage; b++) {
            int l = s->stage_owner[b];
            if (l < 0) {
                victim = b, victim_pos = -2;
                break;
            }
            act_slot *o = &s->slots[l];
            /* bytes only this stage and NVMe hold are kept for the load needing them first */
            int pos = o->state == A_SAVED && !o->dev ? stack_pos(s, l) : -1;
            if (!o->io_pending && !o->write_after && stage_copy_done(s, o) && pos < victim_pos)
                victim = b, victim_pos = pos;
        }
        if (victim >= 0) {
            if (s->stage_owner[victim] >= 0)
                stage_release(s, &s->slots[s->stage_owner[victim]]);
            s->stage_owner[victim] = layer;
            s->slots[layer].stage = victim;
            return victim;
        }
        if (!may_wait)
            return -1;
        if ((*st = pump(s, 1)) != ZT_OK)
            return -1;
        /* a stage whose copy to the device is still queued: wait for the store's stream */
        zt_error e;
        int busy = 0;
        for (int b = 0; b < s->n_stage; b++)
            if (s->stage_owner[b] >= 0)
                busy |= s->slots[s->stage_owner[b]].io_pending ||
                        s->slots[s->stage_owner[b]].write_after;
        if (!busy && (*st = zt_device_stream_synchronize(s->env.dev, s->env.stream, &e)) != ZT_OK) {
            set_failure(s, layer, "the copy to the device", &e);
            return -1;
        }
    }
}

/* The device tier's last evictor: drops the read-ahead copy needed last (the deepest in the
 * stack), its bytes still in their home or stage. 0 when there is none. */
static int evict_read_ahead(void *user)
{
    zt_act_store *s = user;
    for (int i = 0; i < s->depth; i++) {
        act_slot *a = &s->slots[s->stack[i]];
        if (!a->dev || a->state != A_SAVED)
            continue;
        if (a->io_pending && !a->io_write) { /* its read lands in the stage, which keeps it */
            zt_error e;
            a->io_pending = 0;
            if (zt_swap_wait(a->home.swap, &a->io, &e) != ZT_OK) {
                set_failure(s, s->stack[i], "the NVMe read", &e);
                stage_release(s, a); /* its bytes did not arrive */
            }
        }
        if (a->ready_set)
            zt_device_tier_free_after(s->env.dtier, a->dev, a->ready);
        else
            zt_device_tier_free(s->env.dtier, a->dev);
        count_device(s, -(int64_t)a->bytes);
        a->dev = NULL; /* ready_set stays: the stage waits for that copy before its next use */
        s->st.evictions++;
        return 1;
    }
    return 0;
}

zt_status zt_act_store_create(const zt_act_env *env, int n_layers, const uint64_t *bytes,
                              zt_act_store **out, zt_error *err)
{
    zt_act_store *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s || !(s->slots = calloc((size_t)n_layers, sizeof *s->slots)) ||
        !(s->stack = calloc((size_t)n_layers, sizeof *s->stack))) {
        zt_act_store_destroy(s);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of host memory for the activation store");
    }
    s->env = *env;
    s->n = n_layers;
    zt_status st = zt_device_event_create(env->dev, &s->caller_ev, err);
    for (int l = 0; l < n_layers && st == ZT_OK; l++) {
        act_slot *a = &s->slots[l];
        a->stage = -1;
        if (!(a->cap = bytes[l]))
            continue;
        if (env->tier == ZT_TIER_DEVICE)
            st = zt_device_tier_alloc(env->dtier, a->cap, 1, &a->home.ptr, err),
            a->home.kind = ZT_TIER_DEVICE;
        else
            st = zt_home_alloc(&s->env.homes, env->tier, zt_round_up(a->cap, 4096), "activations",
                               &a->home, err);
        if (st == ZT_OK)
            st = zt_device_event_create(env->dev, &a->saved, err);
        if (st == ZT_OK)
            st = zt_device_event_create(env->dev, &a->ready, err);
        if (st == ZT_OK && env->tier == ZT_TIER_DEVICE)
            count_device(s, (int64_t)a->cap);
        s->st.home_bytes += a->cap;
        if (a->cap > s->stage_bytes)
            s->stage_bytes = zt_round_up(a->cap, 4096);
    }
    if (st == ZT_OK && env->tier == ZT_TIER_NVME) {
        s->n_stage = env->staging < 2 ? 2 : env->staging;
        if (!(s->stage = calloc((size_t)s->n_stage, sizeof *s->stage)) ||
            !(s->stage_owner = malloc((size_t)s->n_stage * sizeof *s->stage_owner)))
            st = ZT_ERR(err, ZT_ERR_NOMEM, "out of host memory for the activation store");
        for (int b = 0; b < s->n_stage && st == ZT_OK; b++) {
            s->stage_owner[b] = -1;
            zt_home h;
            st = zt_home_alloc(&s->env.homes, ZT_TIER_HOST, s->stage_bytes, "activation staging",
                               &h, err);
            s->stage[b] = h.ptr;
        }
    }
    if (st != ZT_OK) {
        zt_error_prefix(err, "activation checkpoints in %s: ", tier_name(env->tier));
        zt_act_store_destroy(s);
        return st;
    }
    if (env->tier != ZT_TIER_DEVICE)
        env->dtier->evict_last = evict_read_ahead, env->dtier->evict_last_user = s;
    *out = s;
    return ZT_OK;
}

void zt_act_store_destroy(zt_act_store *s)
{
    if (!s)
        return;
    if (s->env.dtier && s->env.dtier->evict_last_user == s)
        s->env.dtier->evict_last = NULL, s->env.dtier->evict_last_user = NULL;
    if (s->slots)
        zt_act_store_discard(s);
    for (int b = 0; b < s->n_stage && s->stage; b++)
        if (s->stage[b]) {
            zt_home h = {.kind = ZT_TIER_HOST, .bytes = s->stage_bytes, .ptr = s->stage[b]};
            zt_home_free(&s->env.homes, &h);
        }
    for (int l = 0; s->slots && l < s->n; l++) {
        act_slot *a = &s->slots[l];
        if (a->home.kind == ZT_TIER_DEVICE && a->home.ptr)
            zt_device_tier_free(s->env.dtier, a->home.ptr);
        else if (a->cap)
            zt_home_free(&s->env.homes, &a->home);
        if (a->saved)
            zt_device_event_destroy(s->env.dev, a->saved);
        if (a->ready)
            zt_device_event_destroy(s->env.dev, a->ready);
    }
    if (s->caller_ev)
        zt_device_event_destroy(s->env.dev, s->caller_ev);
    free(s->stage);
    free(s->stage_owner);
    free(s->stack);
    free(s->slots);
    free(s);
}

/* The store's stream waits for what the caller queued so far. */
static zt_status after_caller(zt_act_store *s, zt_stream *caller, zt_error *err)
{
    zt_status st = zt_device_event_record(s->env.dev, s->caller_ev, caller, err);
    return st == ZT_OK ? zt_device_stream_wait_event(s->env.dev, s->env.stream, s->caller_ev, err)
                       : st;
}

zt_status zt_act_store_save(zt_act_store *s, int layer, const void *src, uint64_t bytes,
                            zt_stream *caller, zt_error *err)
{
    act_slot *a = &s->slots[layer];
    double t0 = zt_now_s();
    if (s->failed)
        return failure(s, err);
    if (a->state != A_EMPTY)
        return ZT_ERR(err, ZT_ERR_USAGE,
                      "layer %d's activations were saved already and not %s: each save is "
                      "loaded (zt_act_load) and freed (zt_act_free) after the layer's backward "
                      "before the next save of the layer",
                      layer, a->state == A_SAVED ? "loaded back" : "freed");
    zt_status st = ZT_OK;
    if (a->io_pending) /* the last step's write from its stage, still running */
        st = finish_io(s, layer);
    if (st != ZT_OK)
        return failure(s, err);
    a->write_after = 0;
    a->ready_set = 0;
    stage_release(s, a);
    if (caller)
        st = after_caller(s, caller, err);
    void *dst = a->home.ptr;
    if (st == ZT_OK && s->env.tier == ZT_TIER_NVME) {
        int b = stage_acquire(s, layer, 1, &st);
        if (b < 0)
            return st == ZT_OK ? ZT_ERR(err, ZT_ERR_INTERNAL, "no activation staging buffer")
                               : failure(s, err);
        dst = s->stage[b];
    }
    zt_copy_kind kind = s->env.tier == ZT_TIER_DEVICE ? ZT_COPY_D2D : ZT_COPY_D2H;
    if (st == ZT_OK)
        st = zt_device_memcpy_async(s->env.dev, dst, src, bytes, kind, s->env.stream, err);
    if (st == ZT_OK)
        st = zt_device_event_record(s->env.dev, a->saved, s->env.stream, err);
    int wait = !caller || s->env.sync_saves;
    if (st == ZT_OK)
        st = wait ? zt_device_event_synchronize(s->env.dev, a->saved, err)
                  : zt_device_stream_wait_event(s->env.dev, caller, a->saved, err);
    if (st != ZT_OK) {
        stage_release(s, a);
        zt_error_prefix(err, "save of layer %d's activations: ", layer);
        return st;
    }
    a->state = A_SAVED;
    a->bytes = bytes;
    s->stack[s->depth++] = layer;
    s->st.saves++, s->st.saved_bytes += bytes;
    s->st.d2h_bytes += kind == ZT_COPY_D2H ? bytes : 0;
    if (s->env.tier == ZT_TIER_NVME) {
        a->write_after = 1;
        if (wait && (st = start_write(s, layer)) != ZT_OK)
            return failure(s, err);
    }
    if ((st = pump(s, 0)) != ZT_OK)
        return failure(s, err);
    if (s->env.profile && zt_trace_on())
        zt_trace_span("activations", t0, "save layer %d (%llu bytes)", layer,
                      (unsigned long long)bytes);
    return ZT_OK;
}

/* Starts bringing layer's bytes to a device buffer. may_evict 0 (a read-ahead): gives up,
 * returning ZT_OK with nothing started, when the device tier or the staging buffers have no
 * room. */
static zt_status bring_back(zt_act_store *s, int layer, int may_evict, zt_error *err)
{
    act_slot *a = &s->slots[layer];
    if (a->dev || s->env.tier == ZT_TIER_DEVICE)
        return ZT_OK;
    zt_error e;
    zt_status st = zt_device_tier_alloc(s->env.dtier, a->bytes, may_evict, &a->dev, &e);
    if (st != ZT_OK) {
        if (may_evict)
            *err = e;
        return may_evict ? st : ZT_OK;
    }
    count_device(s, (int64_t)a->bytes);
    if (s->env.tier == ZT_TIER_NVME && a->stage < 0) {
        if (stage_acquire(s, layer, may_evict, &st) < 0) {
            zt_device_tier_free(s->env.dtier, a->dev);
            count_device(s, -(int64_t)a->bytes);
            a->dev = NULL;
            return st == ZT_OK ? ZT_OK : failure(s, err);
        }
        a->io_t0 = zt_now_s();
        if ((st = zt_swap_read(a->home.swap, &a->home.ext, s->stage[a->stage],
                               zt_round_up(a->bytes, 4096), &a->io, &e)) != ZT_OK) {
            set_failure(s, layer, "the NVMe read", &e);
            return failure(s, err);
        }
        a->io_pending = 1, a->io_write = 0;
        return ZT_OK;
    }
    /* host memory, or NVMe bytes still in their stage (a write may still be running: the copy
     * only reads the stage) */
    const void *from = s->env.tier == ZT_TIER_NVME ? s->stage[a->stage] : a->home.ptr;
    s->st.h2d_bytes += a->bytes;
    if ((st = zt_device_memcpy_async(s->env.dev, a->dev, from, a->bytes, ZT_COPY_H2D, s->env.stream,
                                     &e)) != ZT_OK ||
        (st = zt_device_event_record(s->env.dev, a->ready, s->env.stream, &e)) != ZT_OK) {
        set_failure(s, layer, "the copy to the device", &e); /* a read-ahead's too: reported */
        return failure(s, err);
    }
    a->ready_set = 1;
    return ZT_OK;
}

zt_status zt_act_store_load(zt_act_store *s, int layer, zt_stream *caller, void **ptr,
                            uint64_t *bytes, zt_error *err)
{
    act_slot *a = &s->slots[layer];
    double t0 = zt_now_s();
    if (s->failed)
        return failure(s, err);
    if (a->state != A_SAVED)
        return ZT_ERR(err, ZT_ERR_USAGE,
                      "layer %d's activations are %s: load each save once, before the layer's "
                      "backward",
                      layer,
                      a->state == A_EMPTY ? "not saved" : "loaded already (handed back twice)");
    if (s->stack[s->depth - 1] != layer)
        return ZT_ERR(err, ZT_ERR_USAGE,
                      "layer %d's activations asked for out of order: loads come in the reverse "
                      "order of the saves, and layer %d was saved after it and not loaded yet",
                      layer, s->stack[s->depth - 1]);
    s->st.prefetch_hits += a->dev != NULL;
    zt_status st = bring_back(s, layer, 1, err);
    if (st == ZT_OK && a->io_pending &&
        !a->io_write) { /* its read must finish before the copy to the device */
        double w = zt_now_s();
        st = finish_io(s, layer);
        s->st.wait_s += zt_now_s() - w;
        if (st != ZT_OK)
            return failure(s, err);
    }
    if (st != ZT_OK) {
        zt_error_prefix(err, "load of layer %d's activations: ", layer);
        return st;
    }
    zt_event *ev = s->env.tier == ZT_TIER_DEVICE ? a->saved : a->ready;
    if (caller) {
        st = zt_device_stream_wait_event(s->env.dev, caller, ev, err);
    } else {
        double w = zt_now_s();
        st = zt_device_event_synchronize(s->env.dev, ev, err);
        s->st.wait_s += zt_now_s() - w;
    }
    if (st != ZT_OK)
        return st;
    s->depth--;
    /* the read-ahead, after the wait: a blocking load has freed the stages it copied from */
    for (int i = 1; i <= s->env.ahead && s->depth - i >= 0 && st == ZT_OK; i++)
        st = bring_back(s, s->stack[s->depth - i], 0, err);
    if (st == ZT_OK)
        st = pump(s, 0);
    if (st != ZT_OK && s->failed)
        return failure(s, err); /* the load's own bytes are fine; the store is stopped */
    a->state = A_LOADED;
    *ptr = s->env.tier == ZT_TIER_DEVICE ? a->home.ptr : a->dev;
    *bytes = a->bytes;
    s->st.loads++, s->st.loaded_bytes += a->bytes;
    if (s->env.profile && zt_trace_on())
        zt_trace_span("activations", t0, "load layer %d (%llu bytes)", layer,
                      (unsigned long long)a->bytes);
    return ZT_OK;
}

static void drop_device_copy(zt_act_store *s, act_slot *a, zt_event *after)
{
    if (!a->dev)
        return;
    if (after)
        zt_device_tier_free_after(s->env.dtier, a->dev, after);
    else
        zt_device_tier_free(s->env.dtier, a->dev);
    count_device(s, -(int64_t)a->bytes);
    a->dev = NULL;
}

zt_status zt_act_store_free(zt_act_store *s, int layer, zt_stream *caller, zt_error *err)
{
    act_slot *a = &s->slots[layer];
    if (s->failed)
        return failure(s, err);
    if (a->state != A_LOADED)
        return ZT_ERR(err, ZT_ERR_USAGE,
                      "layer %d's activations are %s: zt_act_free gives back a loaded buffer "
                      "once, after the layer's backward",
                      layer, a->state == A_EMPTY ? "not saved (or freed already)" : "not loaded");
    zt_status st = caller ? zt_device_event_record(s->env.dev, s->caller_ev, caller, err) : ZT_OK;
    if (st != ZT_OK)
        return st;
    drop_device_copy(s, a, caller ? s->caller_ev : NULL);
    a->state = A_EMPTY;
    return pump(s, 0) == ZT_OK ? ZT_OK : failure(s, err);
}

void zt_act_store_discard(zt_act_store *s)
{
    zt_error e;
    for (int l = 0; l < s->n; l++) {
        act_slot *a = &s->slots[l];
        if (a->io_pending)
            (void)zt_swap_wait(a->home.swap, &a->io, &e);
        a->io_pending = a->write_after = 0;
    }
    (void)zt_device_stream_synchronize(s->env.dev, s->env.stream, &e);
    for (int l = 0; l < s->n; l++) {
        act_slot *a = &s->slots[l];
        drop_device_copy(s, a, NULL);
        stage_release(s, a);
        a->state = A_EMPTY;
        a->ready_set = 0;
    }
    s->depth = 0;
    s->failed = 0;
}

int zt_act_store_outstanding(const zt_act_store *s)
{
    int n = 0;
    for (int l = 0; l < s->n; l++)
        n += s->slots[l].state != A_EMPTY;
    return n;
}

uint64_t zt_act_store_capacity(const zt_act_store *s, int layer) { return s->slots[layer].cap; }

void zt_act_store_stats(const zt_act_store *s, zt_act_stats *out) { *out = s->st; }

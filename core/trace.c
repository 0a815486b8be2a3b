/* SPDX-License-Identifier: MIT */
/* The timeline trace (see trace.h). Chrome's JSON array format: "[", then one event a line,
 * comma-separated, then "]" at close. Complete events ("ph": "X") carry microseconds since
 * the trace was opened; thread-name metadata events ("ph": "M") label the tracks. */
#include "core/trace.h"
#include "core/log.h"
#include "core/time.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FLUSH_EVERY 256 /* events between flushes: a dying run keeps all but the last few */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static char out_path[4096];    /* the open trace's file */
static int users;              /* opens not yet closed */
static int events;             /* written since open */
static double origin;          /* zt_now_s() at open */
static atomic_int on;          /* out != NULL, read without the lock */
static atomic_uint generation; /* bumped at every open: threads name their track again */
static atomic_int next_tid;

static __thread int my_tid;
static __thread const char *my_name;
static __thread unsigned my_generation;

int zt_trace_on(void) { return atomic_load_explicit(&on, memory_order_relaxed); }

zt_status zt_trace_open(const char *path, zt_error *err)
{
    pthread_mutex_lock(&lock);
    if (out) {
        users++;
        if (strcmp(path, out_path) != 0)
            ZT_LOGW("trace",
                    "a trace is already open in '%s': this runtime's spans go there "
                    "too, not to '%s'",
                    out_path, path);
        pthread_mutex_unlock(&lock);
        return ZT_OK;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        pthread_mutex_unlock(&lock);
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "cannot write the trace file '%s' (%s): set ztier.trace_path or "
                      "ZT_TRACE to a writable file",
                      path, strerror(e));
    }
    out = f;
    snprintf(out_path, sizeof out_path, "%s", path);
    users = 1;
    events = 0;
    origin = zt_now_s();
    atomic_fetch_add(&generation, 1);
    fprintf(out,
            "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
            "\"args\": {\"name\": \"ztier\"}}",
            (int)getpid());
    atomic_store(&on, 1);
    pthread_mutex_unlock(&lock);
    return ZT_OK;
}

void zt_trace_close(void)
{
    pthread_mutex_lock(&lock);
    if (out && --users == 0) {
        atomic_store(&on, 0);
        fprintf(out, "\n]\n");
        fclose(out);
        out = NULL;
    }
    pthread_mutex_unlock(&lock);
}

void zt_trace_thread_name(const char *name) { my_name = name; }

/* JSON string contents: quotes, backslashes and control characters escaped. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* The calling thread's track id; its name goes out once per trace (lock held). */
static int track(void)
{
    if (!my_tid)
        my_tid = atomic_fetch_add(&next_tid, 1) + 1;
    unsigned gen = atomic_load(&generation);
    if (my_generation != gen) {
        my_generation = gen;
        fprintf(out,
                ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                "\"args\": {\"name\": \"",
                (int)getpid(), my_tid);
        if (my_name)
            put_escaped(out, my_name);
        else
            fprintf(out, "thread %d", my_tid);
        fprintf(out, "\"}}");
    }
    return my_tid;
}

static void event(const char *ph, const char *cat, const char *name, double ts, double dur, long id)
{
    int tid = track(); /* may write the track's name first */
    fprintf(out, ",\n{\"name\": \"");
    put_escaped(out, name);
    fprintf(out, "\", \"cat\": \"%s\", \"ph\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f", cat,
            ph, (int)getpid(), tid, (ts - origin) * 1e6);
    if (dur >= 0)
        fprintf(out, ", \"dur\": %.3f", dur * 1e6);
    if (id >= 0)
        fprintf(out, ", \"id\": %ld", id);
    fprintf(out, "}");
    if (++events % FLUSH_EVERY == 0)
        fflush(out);
}

static void record(const char *cat, double t0, int async, const char *fmt, va_list ap)
{
    static long next_id;
    double t1 = zt_now_s();
    char name[256];
    vsnprintf(name, sizeof name, fmt, ap);
    pthread_mutex_lock(&lock);
    if (out && !async)
        event("X", cat, name, t0, t1 - t0, -1);
    if (out && async) { /* a begin/end pair with its own id */
        long id = ++next_id;
        event("b", cat, name, t0, -1, id);
        event("e", cat, name, t1, -1, id);
    }
    pthread_mutex_unlock(&lock);
}

void zt_trace_span(const char *cat, double t0, const char *fmt, ...)
{
    if (!zt_trace_on())
        return;
    va_list ap;
    va_start(ap, fmt);
    record(cat, t0, 0, fmt, ap);
    va_end(ap);
}

void zt_trace_async(const char *cat, double t0, const char *fmt, ...)
{
    if (!zt_trace_on())
        return;
    va_list ap;
    va_start(ap, fmt);
    record(cat, t0, 1, fmt, ap);
    va_end(ap);
}

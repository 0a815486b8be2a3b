/* SPDX-License-Identifier: MIT */
/* The timeline trace: spans of work (fetch waits, NVMe transfers, stream operations,
 * collectives, optimizer passes, the caller's layer compute) written as Chrome trace events,
 * which Perfetto (ui.perfetto.dev) and chrome://tracing open. One track per thread: each
 * worker names its thread once (zt_trace_thread_name), every span lands on the track of the
 * thread that records it. The trace is per process: the first runtime with a trace path
 * opens it, the last one to close it finishes the file. Events are streamed as they end, so
 * a run that dies keeps what it had (Perfetto reads a file without its closing bracket).
 * When no trace is open every call returns at once. */
#ifndef ZT_CORE_TRACE_H
#define ZT_CORE_TRACE_H

#include "core/export.h"
#include "core/error.h"

/* Opens (or, when one is open, joins) the process's trace. ZT_ERR_CONFIG names the path when
 * it cannot be written. Every successful open is matched by one zt_trace_close. */
zt_status zt_trace_open(const char *path, zt_error *err);
void zt_trace_close(void);

/* 1 while a trace is open: callers skip building span names otherwise. */
int zt_trace_on(void);

/* Names the calling thread's track (a string with static storage, or one that outlives the
 * thread), e.g. "mpi comm", "host stream 2". Unnamed threads get "thread N". */
ZT_MODULE_API void zt_trace_thread_name(const char *name);

/* A span on the calling thread's track from t0 (zt_now_s()) to now: category (fetch, stream,
 * comm, optimizer, step, checkpoint) and a printf-style name. Spans of one thread nest (they
 * follow its calls). */
ZT_MODULE_API void zt_trace_span(const char *cat, double t0, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* An interval that may overlap others of its kind (an NVMe transfer in flight, the caller's
 * work on a layer between fetch and release): an async slice from t0 to now, shown in its own
 * row of the category's track. */
void zt_trace_async(const char *cat, double t0, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

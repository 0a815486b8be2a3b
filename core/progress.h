/* SPDX-License-Identifier: MIT */
/* A progress line for long transfers (checkpoint saves, loads, exports): bytes done, GB/s
 * and the time left, redrawn in place with \r on a terminal, then a final line. Quiet when
 * the stream is not a terminal, so logs and pipes get nothing. The environment variable
 * ZT_PROGRESS overrides: "0" never draws; "1" draws on any stream, at every update and from
 * the first (the tests' mode: the output depends only on the byte counts given, apart from
 * the rates and times it prints). On a terminal the line appears only once a transfer has
 * run ZT_PROGRESS_DELAY_S, and is redrawn at most every ZT_PROGRESS_EVERY_S. */
#ifndef ZT_CORE_PROGRESS_H
#define ZT_CORE_PROGRESS_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#define ZT_PROGRESS_DELAY_S 2.0
#define ZT_PROGRESS_EVERY_S 0.25

typedef struct zt_progress {
    FILE *out;
    char what[64];
    uint64_t total, done;
    double t0, last;
    int mode; /* 0: quiet, 1: a terminal, 2: forced (ZT_PROGRESS=1) */
    int drawn;
    pthread_mutex_t mu; /* updates may come from several threads */
} zt_progress;

/* Starts a transfer of total bytes named `what` ("checkpoint save"), drawn on out (stderr)
 * when it is a terminal; enabled 0 keeps it quiet whatever the stream (a rank other than 0). */
void zt_progress_begin(zt_progress *p, FILE *out, const char *what, uint64_t total, int enabled);

/* bytes more are done; redraws the line when it is due. Thread-safe. */
void zt_progress_add(zt_progress *p, uint64_t bytes);

/* Ends the line: where one was drawn, a final line with the bytes, the time and the rate
 * (ok) or the bytes done before the transfer stopped (!ok), and a newline. */
void zt_progress_end(zt_progress *p, int ok);

/* The mode a progress line on out would take: 0 quiet (not a terminal, ZT_PROGRESS=0, or
 * enabled 0), 1 a terminal, 2 forced (ZT_PROGRESS=1). For progress that is not bytes (the
 * phases of `ztier bench profile`), printed by the caller in the same cases. */
int zt_progress_wanted(FILE *out, int enabled);

/* bytes in decimal units ("1.50 MB", "999 B"), as the rates are (GB/s). */
const char *zt_progress_bytes(uint64_t bytes, char *buf, size_t len);

#endif

/* SPDX-License-Identifier: MIT */
/* The step's forward time: from the step's first forward fetch to its first backward fetch
 * (the end of the first micro-batch's forward pass and loss), the window the CPU's share of
 * an overlapped optimizer step (ztier.overlap_step "on") runs behind. With the
 * stream-ordered calls it is the trainer's stream's time between those two points (timed
 * device events recorded on the stream at each call: the stream's own work and its waits,
 * not the host's); with the blocking calls, the host's clock between the two calls. Read
 * at the next zt_step (zt_stats.forward_s), when the trainer's streams are past their last
 * release. docs/configuration.md ("The forward time") says the same for users. */
#ifndef ZT_RUNTIME_FWD_TIME_H
#define ZT_RUNTIME_FWD_TIME_H

#include "device/device.h"

#include <stdint.h>

typedef struct zt_fwd_timer {
    zt_event *start, *end;        /* timed events, made at the first stream-ordered forward */
    zt_stream *stream;            /* the stream the start was recorded on; NULL: the host's clock */
    zt_stream *start_on, *end_on; /* the streams the events were last recorded on (the host
                                     backend's events refer to them until destroyed) */
    double start_wall, wall_s;
    int phase;   /* 0: before the step's first forward fetch; 1: in the forward; 2: timed */
    int pending; /* the two events recorded, their time not read yet */
    double last_s, min_s; /* the latest measured forward, the smallest of all */
    uint64_t measured;    /* steps whose forward was measured */
} zt_fwd_timer;

/* At every zt_fetch/zt_fetch_async (pass: zt_pass; caller: the trainer's stream or NULL). */
void zt_fwd_on_fetch(zt_fwd_timer *t, zt_device *dev, int pass, zt_stream *caller);
/* At zt_step, once the trainer's streams are past their releases: the step's forward time
 * into last_s and min_s (*measured 1 when there was one), and the timer ready for the next
 * step. A failure to read the events is an error of the step. */
zt_status zt_fwd_collect(zt_fwd_timer *t, zt_device *dev, int *measured, zt_error *err);
/* A stream about to be destroyed (zt_stream_destroy): the events recorded on it go. */
void zt_fwd_forget_stream(zt_fwd_timer *t, zt_device *dev, const zt_stream *s);
void zt_fwd_destroy(zt_fwd_timer *t, zt_device *dev);

#endif

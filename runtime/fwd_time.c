/* SPDX-License-Identifier: MIT */
/* The step's forward time (fwd_time.h). */
#include "runtime/fwd_time.h"
#include "core/log.h"
#include "core/test_hooks.h"
#include "core/time.h"
#include "ztier.h" /* zt_pass */

/* The start on the trainer's stream, where the backend can time it. */
static void start_on_stream(zt_fwd_timer *t, zt_device *d, zt_stream *caller)
{
    zt_error e = {0};
    if (!caller || !zt_device_can_time(d))
        return;
    if (!t->start && (zt_device_event_create_timed(d, &t->start, &e) != ZT_OK ||
                      zt_device_event_create_timed(d, &t->end, &e) != ZT_OK)) {
        ZT_LOGD("runtime", "forward time on the host's clock: %s", e.msg);
        return;
    }
    t->start_on = caller; /* even a failed record may have taken the stream */
    if (zt_device_event_record(d, t->start, caller, &e) == ZT_OK)
        t->stream = caller;
    else
        ZT_LOGD("runtime", "forward time on the host's clock: %s", e.msg);
}

void zt_fwd_on_fetch(zt_fwd_timer *t, zt_device *dev, int pass, zt_stream *caller)
{
    if (pass == ZT_FORWARD && t->phase == 0) {
        t->phase = 1;
        t->stream = NULL;
        t->start_wall = zt_now_s();
        start_on_stream(t, dev, caller);
    } else if (pass == ZT_BACKWARD && t->phase == 1) {
        zt_error e = {0};
        t->phase = 2;
        t->wall_s = zt_now_s() - t->start_wall;
        /* the end on the stream the start is on; else (a form mixed) the host's clock */
        if (t->stream && caller == t->stream)
            t->end_on = caller;
        t->pending = t->stream && caller == t->stream &&
                     zt_device_event_record(dev, t->end, caller, &e) == ZT_OK;
    }
}

zt_status zt_fwd_collect(zt_fwd_timer *t, zt_device *dev, int *measured, zt_error *err)
{
    zt_status st = ZT_OK;
    double s = t->wall_s;
    *measured = t->phase == 2;
    if (t->pending) {
        st = zt_device_event_synchronize(dev, t->end, err);
        if (st == ZT_OK)
            st = zt_device_event_elapsed(dev, t->start, t->end, &s, err);
        if (st != ZT_OK)
            zt_error_prefix(err, "the step's forward time: ");
    }
    t->phase = 0;
    t->pending = 0;
    if (st != ZT_OK || !*measured)
        return st;
    (void)zt_test_forward_s((int64_t)t->measured, &s); /* tests choose the time */
    t->last_s = s;
    t->min_s = t->measured == 0 || s < t->min_s ? s : t->min_s;
    t->measured++;
    return ZT_OK;
}

static void destroy_events(zt_fwd_timer *t, zt_device *dev)
{
    if (!dev)
        return;
    if (t->start)
        zt_device_event_destroy(dev, t->start);
    if (t->end)
        zt_device_event_destroy(dev, t->end);
    t->start = t->end = NULL;
    t->start_on = t->end_on = NULL;
}

/* The events go with the stream they were recorded on (the host backend's refer to it); a
 * forward in progress ends on the host's clock, one recorded keeps its time. */
void zt_fwd_forget_stream(zt_fwd_timer *t, zt_device *dev, const zt_stream *s)
{
    if (t->start_on != s && t->end_on != s) /* t->stream is reset at each forward */
        return;
    if (t->pending) {
        zt_error e = {0};
        double secs = 0;
        if (zt_device_event_synchronize(dev, t->end, &e) == ZT_OK &&
            zt_device_event_elapsed(dev, t->start, t->end, &secs, &e) == ZT_OK)
            t->wall_s = secs;
        t->pending = 0;
    }
    t->stream = NULL;
    destroy_events(t, dev);
}

void zt_fwd_destroy(zt_fwd_timer *t, zt_device *dev) { destroy_events(t, dev); }

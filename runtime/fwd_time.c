/* SPDX-License-Identifier: MIT */
/* The step's forward time (fwd_time.h). */
#include "runtime/fwd_time.h"
#include "core/log.h"
#include "core/test_hooks.h"
#include "core/time.h"
#include "runtime/runtime.h"

/* The start on the trainer's stream, where the backend can time it. */
static void start_on_stream(zt_runtime *rt, zt_fwd_timer *t, zt_stream *caller)
{
    zt_device *d = rt->device.dev;
    zt_error e = {0};
    if (!caller || !zt_device_can_time(d))
        return;
    if (!t->start && (zt_device_event_create_timed(d, &t->start, &e) != ZT_OK ||
                      zt_device_event_create_timed(d, &t->end, &e) != ZT_OK)) {
        ZT_LOGD("runtime", "forward time on the host's clock: %s", e.msg);
        return;
    }
    if (zt_device_event_record(d, t->start, caller, &e) == ZT_OK)
        t->stream = caller;
    else
        ZT_LOGD("runtime", "forward time on the host's clock: %s", e.msg);
}

void zt_fwd_on_fetch(zt_runtime *rt, int pass, zt_stream *caller)
{
    zt_fwd_timer *t = &rt->fwd;
    if (pass == ZT_FORWARD && t->phase == 0) {
        t->phase = 1;
        t->stream = NULL;
        t->start_wall = zt_now_s();
        start_on_stream(rt, t, caller);
    } else if (pass == ZT_BACKWARD && t->phase == 1) {
        zt_error e = {0};
        t->phase = 2;
        t->wall_s = zt_now_s() - t->start_wall;
        /* the end on the stream the start is on; else (a form mixed) the host's clock */
        t->pending = t->stream && caller == t->stream &&
                     zt_device_event_record(rt->device.dev, t->end, caller, &e) == ZT_OK;
    }
}

zt_status zt_fwd_collect(zt_runtime *rt, int *measured)
{
    zt_fwd_timer *t = &rt->fwd;
    zt_status st = ZT_OK;
    double s = t->wall_s;
    *measured = t->phase == 2;
    if (t->pending) {
        st = zt_device_event_synchronize(rt->device.dev, t->end, &rt->err);
        if (st == ZT_OK)
            st = zt_device_event_elapsed(rt->device.dev, t->start, t->end, &s, &rt->err);
        if (st != ZT_OK)
            zt_error_prefix(&rt->err, "the step's forward time: ");
    }
    t->phase = 0;
    t->pending = 0;
    if (st != ZT_OK || !*measured)
        return st;
    (void)zt_test_forward_s((int64_t)t->measured, &s); /* tests choose the time */
    t->last_s = s;
    t->min_s = t->measured == 0 || s < t->min_s ? s : t->min_s;
    t->measured++;
    rt->stats.forward_s = s;
    return ZT_OK;
}

static void destroy_events(zt_runtime *rt)
{
    if (!rt->device.dev)
        return;
    if (rt->fwd.start)
        zt_device_event_destroy(rt->device.dev, rt->fwd.start);
    if (rt->fwd.end)
        zt_device_event_destroy(rt->device.dev, rt->fwd.end);
    rt->fwd.start = rt->fwd.end = NULL;
}

/* The events go with the stream they were recorded on (the host backend's refer to it); a
 * forward in progress ends on the host's clock, one recorded keeps its time. */
void zt_fwd_forget_stream(zt_runtime *rt, const zt_stream *s)
{
    zt_fwd_timer *t = &rt->fwd;
    if (t->stream != s)
        return;
    if (t->pending) {
        zt_error e = {0};
        double secs = 0;
        if (zt_device_event_synchronize(rt->device.dev, t->end, &e) == ZT_OK &&
            zt_device_event_elapsed(rt->device.dev, t->start, t->end, &secs, &e) == ZT_OK)
            t->wall_s = secs;
        t->pending = 0;
    }
    t->stream = NULL;
    destroy_events(rt);
}

void zt_fwd_destroy(zt_runtime *rt) { destroy_events(rt); }

/* SPDX-License-Identifier: MIT */
/* The progress line (progress.h). */
#include "core/progress.h"
#include "core/time.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *zt_progress_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"kB", "MB", "GB", "TB", "PB"};
    if (bytes < 1000) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes / 1000.0;
    int u = 0;
    while (v >= 1000.0 && u < 4)
        v /= 1000.0, u++;
    snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

int zt_progress_wanted(FILE *out, int enabled)
{
    const char *env = getenv("ZT_PROGRESS");
    if (!enabled || !out || (env && !strcmp(env, "0")))
        return 0;
    if (env && !strcmp(env, "1"))
        return 2;
    return isatty(fileno(out)) ? 1 : 0;
}

void zt_progress_begin(zt_progress *p, FILE *out, const char *what, uint64_t total, int enabled)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    snprintf(p->what, sizeof p->what, "%s", what);
    p->total = total;
    p->t0 = p->last = zt_now_s();
    p->mode = zt_progress_wanted(out, enabled);
    pthread_mutex_init(&p->mu, NULL);
}

/* "\r<what>: <done> of <total> (<pct>%), <rate> GB/s, <left> s left", erasing the rest of a
 * longer line drawn before. */
static void draw(zt_progress *p, double now)
{
    char a[32], b[32], left[32] = "?";
    double dt = now - p->t0, rate = dt > 1e-9 ? (double)p->done / dt : 0;
    if (rate > 0)
        snprintf(left, sizeof left, "%.0f", (double)(p->total - p->done) / rate);
    fprintf(p->out, "\r%s: %s of %s (%.0f%%), %.2f GB/s, %s s left\033[K", p->what,
            zt_progress_bytes(p->done, a, sizeof a), zt_progress_bytes(p->total, b, sizeof b),
            p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, rate / 1e9, left);
    fflush(p->out);
    p->drawn = 1, p->last = now;
}

void zt_progress_add(zt_progress *p, uint64_t bytes)
{
    if (!p->mode) {
        __atomic_fetch_add(&p->done, bytes, __ATOMIC_RELAXED); /* the final count stays right */
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->done += bytes;
    if (p->done > p->total)
        p->done = p->total;
    double now = zt_now_s();
    if (p->mode == 2 ||
        (now - p->t0 >= ZT_PROGRESS_DELAY_S && now - p->last >= ZT_PROGRESS_EVERY_S))
        draw(p, now);
    pthread_mutex_unlock(&p->mu);
}

void zt_progress_end(zt_progress *p, int ok)
{
    if (p->mode && p->drawn) {
        char a[32];
        double dt = zt_now_s() - p->t0;
        if (ok)
            fprintf(p->out, "\r%s: %s in %.1f s, %.2f GB/s\033[K\n", p->what,
                    zt_progress_bytes(p->done, a, sizeof a), dt,
                    dt > 1e-9 ? (double)p->done / dt / 1e9 : 0.0);
        else
            fprintf(p->out, "\r%s: stopped after %s\033[K\n", p->what,
                    zt_progress_bytes(p->done, a, sizeof a));
        fflush(p->out);
    }
    pthread_mutex_destroy(&p->mu);
    p->mode = 0;
}

/* SPDX-License-Identifier: MIT */
/* The step model's scheduler: one pass in the order tasks were added (every dep is an earlier
 * task, and each resource serves in that order, so a task's start is known when it is met). */
#include "runtime/stepmodel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const res_names[] = {"compute", "h2d", "d2h",       "nvme",
                                        "cpu_opt", "net", "nvme_write"};

_Static_assert(sizeof res_names / sizeof *res_names == ZT_SM_NRES, "a name for every resource");

const char *zt_sm_res_name(zt_sm_res res)
{
    return (unsigned)res < ZT_SM_NRES ? res_names[res] : "?";
}

int zt_sm_add(zt_stepmodel *m, zt_sm_res res, double seconds, const int *deps, int ndeps,
              const char *what)
{
    if ((unsigned)res >= ZT_SM_NRES || ndeps < 0 || ndeps > ZT_SM_DEPS || !(seconds >= 0))
        return -1;
    for (int i = 0; i < ndeps; i++)
        if (deps[i] < -1 || deps[i] >= m->n)
            return -1;
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        zt_sm_task *t = realloc(m->task, (size_t)cap * sizeof *t);
        if (!t)
            return -1;
        m->task = t;
        m->cap = cap;
    }
    zt_sm_task *t = &m->task[m->n];
    memset(t, 0, sizeof *t);
    t->res = res;
    t->seconds = seconds;
    for (int i = 0; i < ZT_SM_DEPS; i++)
        t->dep[i] = i < ndeps ? deps[i] : -1;
    snprintf(t->what, sizeof t->what, "%s", what ? what : "");
    return m->n++;
}

void zt_sm_run(zt_stepmodel *m, zt_sm_result *r)
{
    int prev[ZT_SM_NRES]; /* each resource's last task so far */
    for (int i = 0; i < ZT_SM_NRES; i++)
        prev[i] = -1;
    memset(r, 0, sizeof *r);
    r->last = -1;
    for (int i = 0; i < m->n; i++) {
        zt_sm_task *t = &m->task[i];
        t->start = 0;
        t->bound_by = -1;
        int p = prev[t->res];
        if (p >= 0 && m->task[p].end > t->start) {
            t->start = m->task[p].end;
            t->bound_by = p;
        }
        for (int d = 0; d < ZT_SM_DEPS; d++) {
            int j = t->dep[d];
            /* strictly later: a tie keeps the resource as the reason (it was busy anyway) */
            if (j >= 0 && m->task[j].end > t->start) {
                t->start = m->task[j].end;
                t->bound_by = j;
            }
        }
        t->end = t->start + t->seconds;
        prev[t->res] = i;
        r->busy[t->res] += t->seconds;
        if (r->last < 0 || t->end >= r->step) {
            r->step = t->end;
            r->last = i;
        }
    }
    r->stall = r->step - r->busy[ZT_SM_COMPUTE];
}

/* Appends "res: first .. last (s)" for the run of path[a..b) (all on one resource). */
static size_t put_run(const zt_stepmodel *m, const int *path, int a, int b, char *buf, size_t len,
                      size_t at)
{
    const zt_sm_task *f = &m->task[path[a]], *l = &m->task[path[b - 1]];
    double s = 0;
    for (int i = a; i < b; i++)
        s += m->task[path[i]].seconds;
    int w;
    if (b - a == 1)
        w = snprintf(buf + at, len - at, "%s%s: %s (%.3g s)", at ? " -> " : "",
                     zt_sm_res_name(f->res), f->what, s);
    else
        w = snprintf(buf + at, len - at, "%s%s: %s .. %s, %d tasks (%.3g s)", at ? " -> " : "",
                     zt_sm_res_name(f->res), f->what, l->what, b - a, s);
    if (w < 0)
        return at;
    return at + (size_t)w < len ? at + (size_t)w : len - 1;
}

void zt_sm_critical(const zt_stepmodel *m, const zt_sm_result *r, double from, char *buf,
                    size_t len)
{
    if (!len)
        return;
    buf[0] = '\0';
    int n = 0;
    for (int i = r->last; i >= 0 && m->task[i].end > from; i = m->task[i].bound_by)
        n++;
    int *path = malloc((size_t)(n ? n : 1) * sizeof *path);
    if (!path) {
        snprintf(buf, len, "(out of memory)");
        return;
    }
    int k = n;
    for (int i = r->last; k > 0; i = m->task[i].bound_by)
        path[--k] = i;
    size_t at = 0;
    for (int a = 0; a < n && at + 1 < len;) {
        int b = a + 1;
        while (b < n && m->task[path[b]].res == m->task[path[a]].res)
            b++;
        at = put_run(m, path, a, b, buf, len, at);
        a = b;
    }
    free(path);
}

void zt_sm_free(zt_stepmodel *m)
{
    free(m->task);
    memset(m, 0, sizeof *m);
}

static const char *const res_words[] = {
    "compute",    "host-to-device copies", "device-to-host copies",
    "NVMe reads", "the CPU optimizer",     "collectives",
    "NVMe writes"};
_Static_assert(sizeof res_words / sizeof *res_words == ZT_SM_NRES, "a word for every resource");

void zt_sm_bound(const zt_stepmodel *m, const zt_sm_result *r, double from, char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = '\0';
    double on[ZT_SM_NRES] = {0}, total = 0;
    int first[ZT_SM_NRES], last[ZT_SM_NRES], holds[ZT_SM_NRES]; /* on the path, in time order */
    for (int i = 0; i < ZT_SM_NRES; i++)
        first[i] = last[i] = holds[i] = -1;
    /* back from the last task: `next` is the task the current one let start */
    for (int i = r->last, next = -1; i >= 0 && m->task[i].end > from;
         next = i, i = m->task[i].bound_by) {
        const zt_sm_task *t = &m->task[i];
        double s = t->end - (t->start > from ? t->start : from);
        on[t->res] += s, total += s;
        first[t->res] = i;
        if (last[t->res] < 0)
            last[t->res] = i;
        if (next >= 0 && m->task[next].res == ZT_SM_COMPUTE && t->res != ZT_SM_COMPUTE)
            holds[t->res] = next; /* the earliest compute this resource holds up */
    }
    if (total <= 0)
        return;
    int top = 0;
    for (int i = 1; i < ZT_SM_NRES; i++)
        if (on[i] > on[top])
            top = i;
    size_t at = 0;
    int w = snprintf(buf, len, "%s bound%s the step: %.3g s of the %.3g s critical path",
                     res_words[top], top == ZT_SM_COMPUTE ? "s" : "", on[top], total);
    at = w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
    if (top != ZT_SM_COMPUTE && at + 1 < len) {
        w = snprintf(buf + at, len - at, " (%s%s%s%s%s%s)", m->task[first[top]].what,
                     first[top] == last[top] ? "" : " .. ",
                     first[top] == last[top] ? "" : m->task[last[top]].what,
                     holds[top] >= 0 ? "; they hold up the compute from " : "",
                     holds[top] >= 0 ? m->task[holds[top]].what : "", holds[top] >= 0 ? " on" : "");
        if (w > 0)
            at = at + (size_t)w < len ? at + (size_t)w : len - 1;
    }
    for (int i = 0; i < ZT_SM_NRES && at + 1 < len; i++) {
        if (i == ZT_SM_COMPUTE || i == top || on[i] < 0.02 * total || first[i] < 0)
            continue;
        const char *a = m->task[first[i]].what, *b = m->task[last[i]].what;
        if (holds[i] >= 0)
            w = snprintf(buf + at, len - at, "; %s (%.3g s, %s%s%s) hold up the compute from %s on",
                         res_words[i], on[i], a, first[i] == last[i] ? "" : " .. ",
                         first[i] == last[i] ? "" : b, m->task[holds[i]].what);
        else
            w = snprintf(buf + at, len - at, "; %s (%.3g s, %s%s%s) on the path", res_words[i],
                         on[i], a, first[i] == last[i] ? "" : " .. ", first[i] == last[i] ? "" : b);
        if (w > 0)
            at = at + (size_t)w < len ? at + (size_t)w : len - 1;
    }
}

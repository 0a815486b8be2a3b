/* SPDX-License-Identifier: MIT */
/* A measured step from a ZT_TRACE file (docs/trace.md) on the step model's lanes
 * (tools/plan_svg.h). The mapping, from the trace's categories to the model's resources:
 * `layer` (the trainer's work on a layer, between fetch and release) and a device Adam pass:
 * compute; `stream` copies host to device and device to host: h2d and d2h;
 * `nvme`: nvme; `optimizer` (the CPU Adam passes): cpu_opt; `comm` collectives on the comm
 * thread: net (the caller's waits for them are stalls, not work). `step N` spans mark the steps;
 * the rest (fetch waits, release, checkpoint, other stream operations) is not drawn. */
#include "tools/plan_svg.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A trace that ended without its closing bracket (the run died) still reads (docs/trace.md). */
static json_t *load_trace(const char *path, char *err, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return snprintf(err, len, "cannot read the trace %s: %s", path, strerror(errno)), NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *text = malloc(cap + 2);
    while (text && (got = fread(text + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) {
            char *t = realloc(text, 2 * cap + 2);
            if (!t)
                free(text);
            text = t, cap *= 2;
        }
    fclose(f);
    if (!text)
        return snprintf(err, len, "out of memory reading the trace %s", path), NULL;
    text[n] = 0;
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root) { /* cut short: close the array after its last complete event */
        char *end = strrchr(text, '}');
        if (end)
            strcpy(end + 1, "]");
        root = json_loads(text, 0, NULL);
    }
    free(text);
    if (!json_is_array(root)) {
        json_decref(root);
        return snprintf(err, len,
                        "%s is not a ZT_TRACE file (a JSON array of trace events): %s (line %d); "
                        "record one with ZT_TRACE=run.json (docs/trace.md)",
                        path, je.text[0] ? je.text : "not an array", je.line),
               NULL;
    }
    return root;
}

/* The lane of an event, or -1: not drawn. */
static int lane_of(const char *cat, const char *name)
{
    if (!strcmp(cat, "layer"))
        return ZT_SM_COMPUTE;
    if (!strcmp(cat, "optimizer"))
        return strncmp(name, "device adam", 11) ? ZT_SM_CPU_OPT : ZT_SM_COMPUTE;
    if (!strcmp(cat, "nvme")) /* "NVMe read ...", "NVMe write ...": the model's two queues */
        return strncmp(name, "NVMe write", 10) ? ZT_SM_NVME : ZT_SM_NVME_WRITE;
    if (!strcmp(cat, "stream")) /* the host backend names the direction: "copy d2h 1.00 MB" */
        return !strncmp(name, "copy d2h", 8)   ? ZT_SM_D2H
               : !strncmp(name, "copy h2d", 8) ? ZT_SM_H2D
                                               : -1;
    if (!strcmp(cat, "comm"))
        return strncmp(name, "wait for", 8) ? ZT_SM_NET : -1;
    return -1;
}

static double num(json_t *e, const char *key, double none)
{
    json_t *v = json_object_get(e, key);
    return json_is_number(v) ? json_number_value(v) : none;
}

/* The events with a lane into p (times in seconds), and the steps' ends into steps. */
static int collect(plan_panel *p, json_t *root, double *steps, int *n_steps, double *first)
{
    size_t i, n = json_array_size(root);
    json_t *e;
    *first = 1e300;
    json_array_foreach(root, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *cat = json_string_value(json_object_get(e, "cat"));
        const char *name = json_string_value(json_object_get(e, "name"));
        double ts = num(e, "ts", -1) * 1e-6;
        if (!ph || !cat || !name || ts < 0 || !strcmp(ph, "e") || !strcmp(ph, "M"))
            continue;
        double end = ts + num(e, "dur", 0) * 1e-6;
        if (!strcmp(ph, "b")) { /* its end: the "e" with the same id, written next */
            json_int_t id = json_integer_value(json_object_get(e, "id"));
            for (size_t k = i + 1; k < n; k++) {
                json_t *f = json_array_get(root, k);
                const char *fph = json_string_value(json_object_get(f, "ph"));
                if (fph && !strcmp(fph, "e") &&
                    json_integer_value(json_object_get(f, "id")) == id) {
                    end = num(f, "ts", ts * 1e6) * 1e-6;
                    break;
                }
            }
        }
        if (ts < *first)
            *first = ts;
        int step_no; /* `step N`; not the parts of an overlapped one (`step through <layer>`) */
        if (!strcmp(cat, "step") && sscanf(name, "step %d", &step_no) == 1)
            steps[(*n_steps)++] = end;
        int lane = lane_of(cat, name);
        if (lane >= 0 && plan_panel_add(p, (zt_sm_res)lane, ts, end, name) != 0)
            return -1;
    }
    return 0;
}

static int later(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int plan_panel_from_trace(plan_panel *p, const char *path, char *err, size_t len)
{
    json_t *root = load_trace(path, err, len);
    if (!root)
        return -1;
    size_t n = json_array_size(root);
    double *steps = malloc((n ? n : 1) * sizeof *steps), first;
    int n_steps = 0, rc = steps ? collect(p, root, steps, &n_steps, &first) : -1;
    json_decref(root);
    if (rc != 0)
        snprintf(err, len, "out of memory reading the trace %s", path);
    else if (first > 1e299)
        rc = -1, snprintf(err, len,
                          "the trace %s has no events: record a run with ZT_TRACE set that "
                          "trains at least one step (docs/trace.md)",
                          path);
    else if (n_steps == 0)
        rc = -1, snprintf(err, len,
                          "the trace %s has no step (no `step` span): record a run that calls "
                          "zt_step with ZT_TRACE set (docs/trace.md)",
                          path);
    if (rc == 0) { /* the last step: from the end of the one before (or the first event) */
        qsort(steps, (size_t)n_steps, sizeof *steps, later);
        p->t1 = steps[n_steps - 1];
        p->t0 = n_steps > 1 ? steps[n_steps - 2] : first;
        snprintf(p->title, sizeof p->title, "measured (step %d of %s)", n_steps, path);
        int kept = 0; /* the events that overlap the step */
        for (int i = 0; i < p->n; i++)
            if (p->bar[i].end > p->t0 && p->bar[i].start < p->t1)
                p->bar[kept++] = p->bar[i];
        p->n = kept;
    }
    free(steps);
    return rc;
}

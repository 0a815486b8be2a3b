/* SPDX-License-Identifier: MIT */
/* `ztier plan --svg` and `--trace` (docs/plan.md, "The picture"): a step drawn as one lane per
 * resource of the step model (runtime/stepmodel.h), one rectangle per task; from the model's
 * prediction, from a measured ZT_TRACE file (docs/trace.md), or both as two panels on one time
 * scale. */
#ifndef ZT_TOOLS_PLAN_SVG_H
#define ZT_TOOLS_PLAN_SVG_H

#include "runtime/stepmodel.h"

#include <stddef.h>

typedef struct plan_bar {
    zt_sm_res lane;
    double start, end; /* seconds, on the panel's clock */
    char what[96];
} plan_bar;

/* One step to draw: the bars of every task that overlaps [t0, t1] (the step). */
typedef struct plan_panel {
    char title[160];
    plan_bar *bar;
    int n, cap;
    double t0, t1;
} plan_panel;

/* Adds a bar (what: copied, cut to fit). 0, or -1 out of memory. */
int plan_panel_add(plan_panel *p, zt_sm_res lane, double start, double end, const char *what);

/* The tasks of a run model that overlap [t0, t1] (the reported step). 0, or -1 out of memory. */
int plan_panel_from_model(plan_panel *p, const zt_stepmodel *m, double t0, double t1);

/* The last step of a ZT_TRACE file: from the end of the `step` span before it (or the first
 * event) to the end of its own `step` span; trace events mapped to the model's resources as
 * docs/plan.md says. 0, or -1 with err naming the cause (unreadable, not a trace, no events,
 * no step). */
int plan_panel_from_trace(plan_panel *p, const char *path, char *err, size_t len);

/* The compute lane's idle time inside the step: the panel's stall. */
double plan_panel_stall(const plan_panel *p);

/* Writes the panels, one above the other on one time scale, as an SVG file. 0, or -1 with err. */
int plan_svg_write(const char *path, const plan_panel *p, int n, char *err, size_t len);

/* Prints a panel's step, busy shares and stall (the measured step of `--trace`). */
void plan_panel_print(const plan_panel *p, int json);

void plan_panel_free(plan_panel *p);

/* `--svg` and `--trace` of `ztier plan`: the predicted step (m run, the step [t0, t1]; m NULL:
 * none), the measured step of the trace (NULL: none; without a prediction its figures are
 * printed), drawn to svg (NULL: not drawn). 0, or -1 with err naming the cause. */
int plan_picture(const char *svg, const char *trace, const zt_stepmodel *m, double t0, double t1,
                 int json, char *err, size_t len);

#endif

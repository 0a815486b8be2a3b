/* SPDX-License-Identifier: MIT */
/* The drawing of `ztier plan --svg` (tools/plan_svg.h): panels of lanes, bars, a time axis. */
#include "tools/plan_svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SVG_W 1200.0   /* the picture's width, px */
#define SVG_LEFT 80.0  /* the lane names */
#define SVG_RIGHT 20.0 /* room for the last tick's label */
#define LANE_H 26.0
#define TITLE_H 26.0
#define AXIS_H 34.0

static const char *const lane_fill[ZT_SM_NRES] = {"#4e79a7", "#59a14f", "#9c755f",
                                                  "#f28e2b", "#b07aa1", "#76b7b2"};

int plan_panel_add(plan_panel *p, zt_sm_res lane, double start, double end, const char *what)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 256;
        plan_bar *b = realloc(p->bar, (size_t)cap * sizeof *b);
        if (!b)
            return -1;
        p->bar = b, p->cap = cap;
    }
    plan_bar *b = &p->bar[p->n++];
    b->lane = lane, b->start = start, b->end = end;
    snprintf(b->what, sizeof b->what, "%s", what);
    return 0;
}

int plan_panel_from_model(plan_panel *p, const zt_stepmodel *m, double t0, double t1)
{
    p->t0 = t0, p->t1 = t1;
    for (int i = 0; i < m->n; i++) {
        const zt_sm_task *t = &m->task[i];
        /* a zero-length task at the boundary belongs to the step that ends there */
        if (t->end > t0 && t->start < t1 &&
            plan_panel_add(p, t->res, t->start, t->end, t->what) != 0)
            return -1;
    }
    return 0;
}

static int by_start(const void *a, const void *b)
{
    double x = ((const plan_bar *)a)->start, y = ((const plan_bar *)b)->start;
    return (x > y) - (x < y);
}

/* Calls gap(x0, x1) for each idle interval of the compute lane inside the step; the sum. */
static double compute_gaps(const plan_panel *p, FILE *out, double x_of_t0, double px_per_s,
                           double y)
{
    plan_bar *c = malloc((size_t)(p->n ? p->n : 1) * sizeof *c);
    int n = 0;
    for (int i = 0; c && i < p->n; i++)
        if (p->bar[i].lane == ZT_SM_COMPUTE)
            c[n++] = p->bar[i];
    if (!c)
        return 0;
    qsort(c, (size_t)n, sizeof *c, by_start);
    double idle = 0, busy_to = p->t0;
    for (int i = 0; i <= n; i++) {
        double next = i < n ? c[i].start : p->t1;
        if (next > p->t1)
            next = p->t1;
        if (next > busy_to) {
            idle += next - busy_to;
            if (out)
                fprintf(
                    out,
                    "<rect class=\"stall\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                    "fill=\"#e15759\" fill-opacity=\"0.25\"><title>compute idle: %.6f s"
                    "</title></rect>\n",
                    x_of_t0 + (busy_to - p->t0) * px_per_s, y, (next - busy_to) * px_per_s,
                    LANE_H - 4, next - busy_to);
        }
        if (i < n && c[i].end > busy_to)
            busy_to = c[i].end;
    }
    free(c);
    return idle;
}

double plan_panel_stall(const plan_panel *p) { return compute_gaps(p, NULL, 0, 0, 0); }

static void put_xml(FILE *out, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, out);
        }
}

/* A tick spacing of 1, 2 or 5 times a power of ten giving about 8 ticks over span. */
static double tick_step(double span)
{
    double raw = span / 8, p = pow(10, floor(log10(raw)));
    return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
}

static void draw_axis(FILE *out, double y, double span, double px_per_s)
{
    double step = tick_step(span), unit = span < 1 ? 1e3 : 1;
    const char *uname = span < 1 ? "ms" : "s";
    fprintf(out,
            "<g class=\"axis\"><line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
            "stroke=\"#333\"/>\n",
            SVG_LEFT, y, SVG_LEFT + span * px_per_s, y);
    for (int k = 0; k * step <= span * (1 + 1e-9); k++) {
        double x = SVG_LEFT + k * step * px_per_s;
        fprintf(out,
                "<line class=\"tick\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                "stroke=\"#333\"/><text x=\"%.2f\" y=\"%.2f\" font-size=\"10\" "
                "text-anchor=\"middle\">%g %s</text>\n",
                x, y, x, y + 5, x, y + 16, k * step * unit, uname);
    }
    fprintf(out, "</g>\n");
}

static void draw_bar(FILE *out, const plan_panel *p, const plan_bar *b, double px_per_s, double y0)
{
    double s = b->start < p->t0 ? p->t0 : b->start, e = b->end > p->t1 ? p->t1 : b->end;
    double w = (e - s) * px_per_s;
    fprintf(out,
            "<rect class=\"task\" data-lane=\"%s\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
            "height=\"%.2f\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.3\"><title>",
            zt_sm_res_name(b->lane), SVG_LEFT + (s - p->t0) * px_per_s, y0 + b->lane * LANE_H + 2,
            w < 0.5 ? 0.5 : w, LANE_H - 4, lane_fill[b->lane]);
    put_xml(out, b->what);
    /* the task's own times, relative to the step's start (negative: began in the step before) */
    fprintf(out, ": %.6f s (%.6f .. %.6f s)</title></rect>\n", b->end - b->start, b->start - p->t0,
            b->end - p->t0);
}

static double draw_panel(FILE *out, const plan_panel *p, double y, double px_per_s)
{
    double stall = plan_panel_stall(p), step = p->t1 - p->t0;
    fprintf(out,
            "<g class=\"panel\">\n<text x=\"4\" y=\"%.2f\" font-size=\"13\" "
            "font-weight=\"bold\">",
            y + 17);
    put_xml(out, p->title);
    fprintf(out, ": step %.6f s, compute idle %.6f s (%.0f%%)</text>\n", step, stall,
            step > 0 ? 100 * stall / step : 0.0);
    double y0 = y + TITLE_H;
    for (int l = 0; l < ZT_SM_NRES; l++)
        fprintf(out,
                "<g class=\"lane\" data-lane=\"%s\"><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                "height=\"%.2f\" fill=\"%s\"/><text x=\"4\" y=\"%.2f\" font-size=\"12\">%s</text>"
                "</g>\n",
                zt_sm_res_name((zt_sm_res)l), SVG_LEFT, y0 + l * LANE_H, step * px_per_s, LANE_H,
                l % 2 ? "#f4f4f4" : "#fafafa", y0 + l * LANE_H + 17, zt_sm_res_name((zt_sm_res)l));
    compute_gaps(p, out, SVG_LEFT, px_per_s, y0 + ZT_SM_COMPUTE * LANE_H + 2);
    for (int i = 0; i < p->n; i++)
        draw_bar(out, p, &p->bar[i], px_per_s, y0);
    double y1 = y0 + ZT_SM_NRES * LANE_H;
    for (int k = 0; k < 2; k++) /* the step's boundaries */
        fprintf(out,
                "<line class=\"step-boundary\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" "
                "y2=\"%.2f\" stroke=\"#000\" stroke-dasharray=\"4 3\"/>\n",
                SVG_LEFT + k * step * px_per_s, y0 - 2, SVG_LEFT + k * step * px_per_s, y1 + 2);
    draw_axis(out, y1 + 4, step, px_per_s);
    fprintf(out, "</g>\n");
    return y1 + AXIS_H;
}

int plan_svg_write(const char *path, const plan_panel *p, int n, char *err, size_t len)
{
    double span = 0;
    for (int i = 0; i < n; i++)
        if (p[i].t1 - p[i].t0 > span)
            span = p[i].t1 - p[i].t0;
    if (span <= 0)
        return snprintf(err, len, "the step to draw has no length: nothing ran in it"), -1;
    FILE *out = fopen(path, "w");
    if (!out)
        return snprintf(err, len, "cannot write the SVG %s: %s", path, strerror(errno)), -1;
    double px_per_s = (SVG_W - SVG_LEFT - SVG_RIGHT) / span; /* one scale for every panel */
    double h = n * (TITLE_H + ZT_SM_NRES * LANE_H + AXIS_H) + 8;
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            SVG_W, h, SVG_W, h);
    double y = 4;
    for (int i = 0; i < n; i++)
        y = draw_panel(out, &p[i], y, px_per_s);
    fprintf(out, "</svg>\n");
    if (ferror(out) | (fclose(out) != 0))
        return snprintf(err, len, "cannot write the SVG %s: %s", path, strerror(errno)), -1;
    return 0;
}

void plan_panel_print(const plan_panel *p, int json)
{
    double busy[ZT_SM_NRES] = {0}, step = p->t1 - p->t0, stall = plan_panel_stall(p);
    for (int i = 0; i < p->n; i++) { /* the part inside the step */
        double s = fmax(p->bar[i].start, p->t0), e = fmin(p->bar[i].end, p->t1);
        busy[p->bar[i].lane] += e > s ? e - s : 0;
    }
    if (json) {
        printf("{\"step_s\": %.6f, \"busy_s\": {", step);
        for (int i = 0; i < ZT_SM_NRES; i++)
            printf("%s\"%s\": %.6f", i ? ", " : "", zt_sm_res_name((zt_sm_res)i), busy[i]);
        printf("}, \"stall_s\": %.6f, \"tasks\": %d}\n", stall, p->n);
        return;
    }
    printf("%s: %.4f s\nbusy share:", p->title, step);
    for (int i = 0; i < ZT_SM_NRES; i++)
        printf(" %s %.0f%%", zt_sm_res_name((zt_sm_res)i), step > 0 ? 100 * busy[i] / step : 0.0);
    printf("\ncompute idle: %.4f s (%.0f%%)\n", stall, step > 0 ? 100 * stall / step : 0.0);
}

void plan_panel_free(plan_panel *p)
{
    free(p->bar);
    p->bar = NULL, p->n = p->cap = 0;
}

int plan_picture(const char *svg, const char *trace, const zt_stepmodel *m, double t0, double t1,
                 int json, char *err, size_t len)
{
    plan_panel p[2];
    memset(p, 0, sizeof p);
    int n = 0, rc = 0;
    if (m) {
        snprintf(p[0].title, sizeof p[0].title, "predicted");
        if (plan_panel_from_model(&p[n++], m, t0, t1) != 0)
            rc = -1, snprintf(err, len, "out of memory drawing the step");
    }
    if (rc == 0 && trace) {
        rc = plan_panel_from_trace(&p[n++], trace, err, len);
        if (rc == 0 && !m)
            plan_panel_print(&p[n - 1], json);
    }
    if (rc == 0 && svg)
        rc = plan_svg_write(svg, p, n, err, len);
    for (int i = 0; i < n; i++)
        plan_panel_free(&p[i]);
    return rc;
}

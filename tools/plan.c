/* SPDX-License-Identifier: MIT */
/* `ztier plan`: the predicted time of one training step from a machine profile
 * (docs/plan.md, the profile: profile-schema v1).
 *
 *   ztier plan <estimate's model arguments> --profile machine.json [--json]
 *
 * The model is registered and replayed as `ztier estimate` does (tools/estimate_model.h); one
 * micro-step's recorded fetches and releases become tasks of the step model
 * (runtime/stepmodel.h): a fetch reads an NVMe-homed shard on the NVMe queue and copies it in
 * (h2d), gathers it over the network at stage 3 on more than one rank; the use between a fetch
 * and its release is compute (2 FLOP per parameter and token forward, 4 backward); a backward
 * release copies the gradients out (d2h) and reduce-scatters them; the optimizer updates each
 * layer's shard on the CPU threads after its gradients are out, reading and writing the state
 * through the NVMe queue when it lives there. A fetch waits for the buffer of the fetch
 * `window` layers before it to be released (the prefetch window). */
#include "runtime/runtime.h"
#include "runtime/stepmodel.h"
#include "core/convert.h"
#include "tools/bench_common.h"
#include "tools/commands.h"
#include "tools/estimate_model.h"
#include "tools/plan_search.h"
#include "tools/plan_svg.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_WINDOW 2 /* layers fetched ahead of the one in use */
#define PLAN_STEPS \
    3 /* steps simulated back to back; the last one is reported (steady state:
                         with overlap_step a layer's update runs until the next step fetches it) */

typedef struct rates {
    double copy, nvme_read, nvme_write, adam, gemm, allgather, reduce_scatter, lat;
} rates;

static int rate(json_t *r, const char *name, double *out, char *err, size_t len)
{
    json_t *v = json_object_get(json_object_get(r, name), "value");
    if (!json_is_number(v) || json_number_value(v) <= 0)
        return snprintf(err, len,
                        "the profile has no positive rates.%s.value: measure it with `ztier "
                        "bench profile`, or write it by hand (docs/plan.md)",
                        name),
               -1;
    *out = json_number_value(v);
    return 0;
}

static int read_profile(const char *path, int world, rates *rt, char *err, size_t len)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return snprintf(err, len, "cannot read the profile %s: %s (line %d)", path, je.text,
                        je.line),
               -1;
    json_t *r = json_object_get(root, "rates");
    const char *backend =
        json_string_value(json_object_get(json_object_get(root, "machine"), "backend"));
    int cuda = backend && !strcmp(backend, "cuda");
    memset(rt, 0, sizeof *rt);
    int rc = rate(r, cuda ? "h2d_bytes_per_s" : "host_memcpy_bytes_per_s", &rt->copy, err, len);
    rc = rc ? rc : rate(r, "nvme_read_bytes_per_s", &rt->nvme_read, err, len);
    rc = rc ? rc : rate(r, "nvme_write_bytes_per_s", &rt->nvme_write, err, len);
    rc = rc ? rc : rate(r, "adam_params_per_s", &rt->adam, err, len);
    rc = rc ? rc : rate(r, "gemm_flops_per_s", &rt->gemm, err, len);
    if (!rc && world > 1) {
        rc = rate(r, "allgather_bytes_per_s", &rt->allgather, err, len);
        rc = rc ? rc : rate(r, "reduce_scatter_bytes_per_s", &rt->reduce_scatter, err, len);
        json_t *l = json_object_get(json_object_get(r, "allgather_latency_s"), "value");
        rt->lat = json_is_number(l) ? json_number_value(l) : 0;
    }
    json_decref(root);
    return rc;
}

/* The step's tasks from one micro-step's events (see the file comment). */
typedef struct builder {
    zt_stepmodel sm;
    const zt_runtime *rt;
    const zt_plan *plan;
    rates r;
    double tokens; /* per rank per micro-step */
    int world;
    int *ready, *used; /* per layer: its fetch chain's last task, its compute task */
    int *updated;      /* per layer: the previous step's update of it (-1: none) */
    int last_compute;  /* the latest compute task */
    int *fetch_used;   /* per fetch in order: the compute task that frees its buffer */
    int n_fetch;
} builder;

static double layer_bytes(const builder *b, const zt_layer *l)
{
    return (double)l->flat_numel * (double)zt_dtype_size(b->rt->reg.dtype);
}

static int add(builder *b, zt_sm_res res, double s, int *deps, int nd, const char *fmt, int layer)
{
    char w[ZT_SM_WHAT];
    snprintf(w, sizeof w, fmt, b->rt->reg.layers[layer].name);
    int t = zt_sm_add(&b->sm, res, s, deps, nd, w);
    return t < 0 ? -2 : t; /* -2: failed (a dep of -2 fails the next add too); -1: no task */
}

static int on_fetch(builder *b, const zt_est_event *ev)
{
    const zt_layer *l = &b->rt->reg.layers[ev->layer];
    double bytes = layer_bytes(b, l);
    int dep[2] = {-1, b->updated[ev->layer]};
    if (b->n_fetch >= PLAN_WINDOW) /* its buffer: the one freed PLAN_WINDOW fetches ago */
        dep[0] = b->fetch_used[b->n_fetch - PLAN_WINDOW];
    int t = -1;
    if (!l->persistent && !l->replicated) {
        if (b->plan->param_tier == ZT_TIER_NVME)
            dep[1] = t = add(b, ZT_SM_NVME, bytes / b->world / b->r.nvme_read, dep, 1,
                             "NVMe read of %s", ev->layer);
        if (b->plan->param_tier != ZT_TIER_DEVICE)
            dep[1] = t =
                add(b, ZT_SM_H2D, bytes / b->world / b->r.copy, dep, 2, "copy-in of %s", ev->layer);
        if (b->world > 1)
            dep[1] = t = add(b, ZT_SM_NET, b->r.lat + bytes / b->r.allgather, dep, 2,
                             "all-gather of %s", ev->layer);
    }
    b->ready[ev->layer] = t;
    b->n_fetch++;
    return t < -1 ? -1 : 0;
}

static int on_release(builder *b, const zt_est_event *ev)
{
    const zt_layer *l = &b->rt->reg.layers[ev->layer];
    double flops = (ev->pass == ZT_BACKWARD ? 4.0 : 2.0) * (double)l->flat_numel * b->tokens;
    int dep = b->ready[ev->layer];
    int c = add(b, ZT_SM_COMPUTE, flops / b->r.gemm, &dep, 1,
                ev->pass == ZT_BACKWARD ? "backward of %s" : "forward of %s", ev->layer);
    if (c < -1)
        return -1;
    for (int i = b->n_fetch - 1; i >= 0 && b->fetch_used[i] < 0; i--)
        b->fetch_used[i] = c; /* the fetch this release ends (the latest unended one) */
    b->used[ev->layer] = c;
    b->last_compute = c;
    if (ev->pass != ZT_BACKWARD)
        return 0;
    double bytes = layer_bytes(b, l);
    int gi = c;
    if (b->plan->optim_tier != ZT_TIER_DEVICE)
        gi = add(b, ZT_SM_D2H, bytes / b->r.copy, &gi, 1, "gradients out of %s", ev->layer);
    if (gi > -2 && b->world > 1)
        gi = add(b, ZT_SM_NET, b->r.lat + bytes / b->r.reduce_scatter, &gi, 1,
                 "reduce-scatter of %s", ev->layer);
    b->ready[ev->layer] = gi; /* the optimizer waits for these */
    return gi < -1 ? -1 : 0;
}

/* The optimizer step after the last micro-step: each layer's shard, in release order. */
static int optimizer(builder *b)
{
    for (int i = 0; i < b->rt->reg.n_layers; i++) {
        const zt_layer *l = &b->rt->reg.layers[i];
        double elems = (double)l->shard_numel;
        int dep = b->ready[i];
        if (b->plan->optim_tier == ZT_TIER_NVME) /* master, m, v: fp32 each */
            dep = add(b, ZT_SM_NVME, 12 * elems / b->r.nvme_read, &dep, 1,
                      "NVMe read of %s's optimizer state", i);
        if (b->plan->optim_tier != ZT_TIER_DEVICE)
            dep = add(b, ZT_SM_CPU_OPT, elems / b->r.adam, &dep, 1, "Adam of %s", i);
        if (dep > -2 && b->plan->optim_tier == ZT_TIER_NVME)
            dep = add(b, ZT_SM_NVME, 12 * elems / b->r.nvme_write, &dep, 1,
                      "NVMe write of %s's optimizer state", i);
        if (dep < -1)
            return -1;
        b->updated[i] = dep;
    }
    return 0;
}

/* PLAN_STEPS steps; step_end[s]: the last compute task of step s. Without overlap_step the
 * next step starts after the whole update (the first fetch waits for the last update). */
static int build_steps(builder *b, const est_model *m, int micro_steps, int *step_end)
{
    int nl = b->rt->reg.n_layers, nf = m->n_events * micro_steps * PLAN_STEPS + 1;
    b->ready = malloc((size_t)nl * sizeof(int));
    b->used = malloc((size_t)nl * sizeof(int));
    b->updated = malloc((size_t)nl * sizeof(int));
    b->fetch_used = malloc((size_t)nf * sizeof(int));
    if (!b->ready || !b->used || !b->updated || !b->fetch_used)
        return -1;
    for (int i = 0; i < nl; i++)
        b->ready[i] = b->used[i] = b->updated[i] = -1;
    for (int i = 0; i < nf; i++)
        b->fetch_used[i] = -1;
    for (int step = 0; step < PLAN_STEPS; step++) {
        for (int s = 0; s < micro_steps; s++)
            for (int i = 0; i < m->n_events; i++) {
                const zt_est_event *ev = &m->events[i];
                if ((ev->release ? on_release(b, ev) : on_fetch(b, ev)) != 0)
                    return -1;
            }
        step_end[step] = b->last_compute;
        if (optimizer(b) != 0)
            return -1;
        if (!b->rt->cfg.overlap_step) /* every layer waits for the whole update */
            for (int i = 0; i < nl; i++)
                b->updated[i] = b->sm.n - 1;
    }
    return 0;
}

static void print_text(const builder *b, const zt_sm_result *r, double tokens_step,
                       const char *path)
{
    printf("predicted step: %.4f s", r->step);
    if (tokens_step > 0)
        printf(", %.0f tokens/s", tokens_step / r->step);
    printf("\nbusy share:");
    for (int i = 0; i < ZT_SM_NRES; i++)
        printf(" %s %.0f%%", zt_sm_res_name((zt_sm_res)i),
               r->step > 0 ? 100 * r->busy[i] / r->step : 0.0);
    printf("\ncompute stall: %.4f s (%.0f%%)\ncritical path: %s\n", r->stall,
           r->step > 0 ? 100 * r->stall / r->step : 0.0, path);
    (void)b;
}

static void print_json(const zt_sm_result *r, double tokens_step, const char *path)
{
    json_t *busy = json_object();
    for (int i = 0; i < ZT_SM_NRES; i++)
        json_object_set_new(busy, zt_sm_res_name((zt_sm_res)i), json_real(r->busy[i]));
    json_t *o = json_pack("{s:f, s:f, s:o, s:f, s:s}", "step_s", r->step, "tokens_per_s",
                          tokens_step > 0 ? tokens_step / r->step : 0.0, "busy_s", busy, "stall_s",
                          r->stall, "critical_path", path);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(o);
}

int cmd_plan(int argc, char **argv)
{
    static const char *const known[] = {"config",
                                        "vocab",
                                        "layers",
                                        "world",
                                        "ranks-per-node",
                                        "ds-config",
                                        "device-memory",
                                        "stage",
                                        "batch",
                                        "seq",
                                        "profile",
                                        "svg",
                                        "trace",
                                        "host-memory",
                                        "nvme-memory",
                                        "nvme-path",
                                        NULL};
    static const char *const flags[] = {"json", "search", NULL};
    est_options o;
    const char *profile = bench_arg(argc, argv, "profile");
    const char *svg = bench_arg(argc, argv, "svg"), *trace = bench_arg(argc, argv, "trace");
    if (trace && !profile && bench_check_args(argc, argv, known, flags) == 0) {
        char terr[1200]; /* a measured step alone: no model arguments needed */
        if (plan_picture(svg, trace, NULL, 0, 0, bench_flag(argc, argv, "json"), terr,
                         sizeof terr) == 0)
            return 0;
        fprintf(stderr, "ztier plan: %s\n", terr);
        return 1;
    }
    if (bench_check_args(argc, argv, known, flags) != 0 || est_parse(argc, argv, &o) != 0 ||
        !profile) {
        fprintf(stderr, "usage: ztier plan <the model arguments of ztier estimate> --profile "
                        "machine.json [--json] [--svg step.svg] [--trace run.json]\n"
                        "       ztier plan --trace run.json [--svg step.svg] [--json]\n"
                        "       ztier plan <model arguments> --profile machine.json --search "
                        "[--host-memory SIZE] [--nvme-memory SIZE] [--nvme-path DIR] [--json]\n");
        return 2;
    }
    if (bench_flag(argc, argv, "search"))
        return plan_search(argc, argv, &o, profile);
    char err[1200];
    builder b = {0};
    est_model m = {0};
    zt_estimate e;
    int rc = read_profile(profile, o.world, &b.r, err, sizeof err);
    if (rc == 0)
        rc = est_estimate(&o, NULL, NULL, 0, &m, &e, err, sizeof err);
    char path[2048] = "";
    zt_sm_result r;
    double tokens_step = 0;
    int step_end[PLAN_STEPS];
    if (rc == 0) {
        int micro =
            m.rt->cfg.gradient_accumulation_steps > 0 ? m.rt->cfg.gradient_accumulation_steps : 1;
        b.rt = m.rt, b.plan = &e.plan, b.world = o.world;
        b.tokens = o.batch ? (double)o.batch / o.world * o.seq : 1;
        tokens_step = o.batch ? (double)o.batch * o.seq * micro : 0;
        if (build_steps(&b, &m, micro, step_end) != 0) {
            snprintf(err, sizeof err, "out of memory building the step model");
            rc = -1;
        }
    }
    if (rc == 0) {
        zt_sm_run(&b.sm, &r);
        /* the last step alone: from the end of the one before to its own end, the busy
           times a step's share of the run's */
        r.step = b.sm.task[step_end[PLAN_STEPS - 1]].end - b.sm.task[step_end[PLAN_STEPS - 2]].end;
        for (int i = 0; i < ZT_SM_NRES; i++)
            r.busy[i] /= PLAN_STEPS;
        r.last = step_end[PLAN_STEPS - 1];
        zt_sm_critical(&b.sm, &r, b.sm.task[step_end[PLAN_STEPS - 2]].end, path, sizeof path);
        r.stall = r.step > r.busy[ZT_SM_COMPUTE] ? r.step - r.busy[ZT_SM_COMPUTE] : 0;

        if (o.json)
            print_json(&r, tokens_step, path);
        else
            print_text(&b, &r, tokens_step, path);
        if ((svg || trace) &&
            plan_picture(svg, trace, &b.sm, b.sm.task[step_end[PLAN_STEPS - 2]].end,
                         b.sm.task[step_end[PLAN_STEPS - 1]].end, o.json, err, sizeof err) != 0) {
            fprintf(stderr, "ztier plan: %s\n", err);
            rc = -1;
        }
    } else {
        fprintf(stderr, "ztier plan: %s\n", err);
    }
    zt_sm_free(&b.sm);
    free(b.ready), free(b.used), free(b.updated), free(b.fetch_used);
    if (m.rt)
        est_free_model(&m);
    return rc == 0 ? 0 : 1;
}

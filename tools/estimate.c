/* SPDX-License-Identifier: MIT */
/* `ztier estimate`: what a training run needs of each tier before it starts, and which
 * placements of the parameters and the optimizer state fit this machine.
 *
 *   ztier estimate (--config tiny|d12|d24|d36|d48|d<L>c<C> [--vocab N] | --layers FILE.json)
 *                  [--world N] [--ranks-per-node N] [--ds-config FILE] [--stage 0|1|2|3]
 *                  [--device-memory SIZE] [--batch B --seq T [--precision bf16|tf32|fp32]]
 *                  [--json]
 *
 * The model is registered exactly as a run registers it (GPT-2 through the example's code,
 * or the layers and shapes of a JSON file), the configuration is read as a run reads it
 * (--ds-config, $ZT_CONFIG, the environment), and the plan and the prefetch schedule are the
 * runtime's own (runtime/estimate.h): nothing is allocated. A layers file:
 *   {"layers": [{"name": "fc1", "params": [{"name": "fc1.w", "shape": [256, 32]}, ...],
 *                "activations": 65536}, ...],
 *    "order": [["fetch", "fc1", "forward"], ["release", "fc1", "forward"], ...]}
 * "activations" (optional) is what the layer hands to zt_act_save: its activation checkpoint's
 * bytes, registered as the trainer registers them. "order" (one micro-step's fetches and
 * releases) is optional: without it each layer is
 * fetched and released forward in order, then backward in reverse, and a layer with
 * "tied_after": "<layer>" (zt_layer_tie: an embedding reused as the head) is used again after
 * that layer and held through the backward pass from there, the order commit checks.
 * --stage sets zero_optimization.stage (below 3 the parameters stay on the device, and at 0
 * the optimizer state too, as a run must have them); the placements listed are the stage's.
 * A device budget below the call order's minimum cannot run: the command says so, naming the
 * minimum, and exits with 1 (the placements that fit are still listed).
 * With --batch (the global batch, split over --world as zt_gpt2 splits it) and --seq, a GPT-2
 * estimate also counts the activations of each checkpointing policy (tools/estimate_acts.c)
 * and the largest batch at that sequence within the device budget; --precision is the GPU
 * trainer's (bf16, its default, keeps the activations in bf16 with the cuda device backend;
 * tf32 and fp32 in fp32; the CPU trainer's are fp32 whatever it says). */
#include "runtime/estimate.h"
#include "tools/bench_common.h"
#include "tools/estimate_acts.h"
#include "tools/estimate_model.h"
#include "tools/commands.h"

#include "gpt2_attention.h"
#include "gpt2_ztier.h"
#define CONFIG_USAGE "--config " GPT2_CONFIG_NAMES " [--vocab N] | "

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define EST_STEPS 3

static int usage(void)
{
    fprintf(stderr, "usage: ztier estimate (" CONFIG_USAGE
                    "--layers FILE.json) [--world N] [--ranks-per-node N] [--ds-config FILE] "
                    "[--stage 0|1|2|3] [--device-memory SIZE] [--batch B --seq T "
                    "[--precision bf16|tf32|fp32]] [--json]\n");
    return 2;
}

/* ---- the model ---- */

static int register_gpt2(est_model *m, const est_options *o, char *err, size_t len)
{
    gpt2_config c;
    if (gpt2_config_named(o->config, o->vocab, &c) != 0)
        return snprintf(err, len, "unknown --config '%s' (" GPT2_CONFIG_HELP ")", o->config), -1;
    gpt2_ztier g;
    zt_status st = gpt2_ztier_register(&g, m->rt, &c, 1);
    gpt2_ztier_free(&g);
    if (st != ZT_OK)
        return snprintf(err, len, "registering GPT-2: %s", zt_last_error(m->rt)), -1;
    int n = gpt2_micro_step_calls(&c, NULL, 0);
    gpt2_call *calls = calloc((size_t)n, sizeof *calls);
    m->events = calloc((size_t)n, sizeof *m->events);
    if (!calls || !m->events)
        return free(calls), snprintf(err, len, "out of memory"), -1;
    gpt2_micro_step_calls(&c, calls, n);
    for (int i = 0; i < n; i++)
        m->events[i] = (zt_est_event){calls[i].layer, calls[i].backward ? ZT_BACKWARD : ZT_FORWARD,
                                      calls[i].release};
    m->n_events = n;
    free(calls);
    m->params = gpt2_num_params(&c);
    snprintf(m->name, sizeof m->name, "GPT-2 %s (V %d, L %d, C %d)", o->config, c.vocab, c.layers,
             c.channels);
    return 0;
}

static int add_json_layer(est_model *m, json_t *jl, int i, char *err, size_t len)
{
    const char *name = json_string_value(json_object_get(jl, "name"));
    json_t *params = json_object_get(jl, "params");
    int id, pid;
    if (!name || !json_is_array(params))
        return snprintf(err, len, "layers[%d] needs a \"name\" and a \"params\" list", i), -1;
    if (zt_layer_add(m->rt, name, &id) != ZT_OK)
        return snprintf(err, len, "layers[%d]: %s", i, zt_last_error(m->rt)), -1;
    for (size_t k = 0; k < json_array_size(params); k++) {
        json_t *jp = json_array_get(params, k), *shape = json_object_get(jp, "shape");
        const char *pname = json_string_value(json_object_get(jp, "name"));
        int64_t dims[ZT_MAX_DIMS], numel = 1;
        int nd = json_is_array(shape) ? (int)json_array_size(shape) : 0;
        for (int d = 0; d < nd && d < ZT_MAX_DIMS; d++)
            numel *= dims[d] = json_integer_value(json_array_get(shape, (size_t)d));
        if (!pname || zt_param_add(m->rt, id, pname, dims, nd, NULL, &pid) != ZT_OK)
            return snprintf(err, len, "layers[%d].params[%zu]: %s", i, k,
                            pname ? zt_last_error(m->rt) : "needs a \"name\" and a \"shape\""),
                   -1;
        m->params += numel;
    }
    json_t *acts = json_object_get(jl, "activations"); /* bytes it hands to zt_act_save */
    if (acts && (!json_is_integer(acts) || json_integer_value(acts) <= 0 ||
                 zt_act_register(m->rt, id, (size_t)json_integer_value(acts)) != ZT_OK))
        return snprintf(err, len, "layers[%d].activations: %s", i,
                        json_is_integer(acts) && json_integer_value(acts) > 0
                            ? zt_last_error(m->rt)
                            : "a positive number of bytes"),
               -1;
    return 0;
}

static int layer_id(json_t *layers, const char *name)
{
    for (size_t i = 0; name && i < json_array_size(layers); i++)
        if (!strcmp(name, json_string_value(json_object_get(json_array_get(layers, i), "name"))))
            return (int)i;
    return -1;
}

static int json_order(est_model *m, json_t *layers, json_t *order, char *err, size_t len)
{
    if (!order)
        return 0; /* the default order */
    size_t n = json_is_array(order) ? json_array_size(order) : 0;
    if (!(m->events = calloc(n ? n : 1, sizeof *m->events)))
        return snprintf(err, len, "out of memory"), -1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(order, i);
        const char *op = json_string_value(json_array_get(e, 0));
        const char *pass = json_string_value(json_array_get(e, 2));
        int l = layer_id(layers, json_string_value(json_array_get(e, 1)));
        int rel = op && !strcmp(op, "release");
        zt_pass p = !pass                        ? -1
                    : !strcmp(pass, "forward")   ? ZT_FORWARD
                    : !strcmp(pass, "backward")  ? ZT_BACKWARD
                    : !strcmp(pass, "inference") ? ZT_INFERENCE
                                                 : -1;
        if (!op || (!rel && strcmp(op, "fetch")) || l < 0 || (int)p < 0)
            return snprintf(err, len,
                            "order[%zu] must be [\"fetch\" or \"release\", a layer "
                            "name, \"forward\", \"backward\" or \"inference\"]",
                            i),
                   -1;
        m->events[i] = (zt_est_event){l, p, rel};
    }
    m->n_events = (int)n;
    return 0;
}

/* "tied_after": after every layer is known, as its target comes later. */
static int json_ties(est_model *m, json_t *layers, char *err, size_t len)
{
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *tie = json_object_get(json_array_get(layers, i), "tied_after");
        if (!tie)
            continue;
        int after = layer_id(layers, json_string_value(tie));
        if (after < 0)
            return snprintf(err, len, "layers[%zu].tied_after must name a layer of the file", i),
                   -1;
        if (zt_layer_tie(m->rt, (int)i, after) != ZT_OK)
            return snprintf(err, len, "layers[%zu]: %s", i, zt_last_error(m->rt)), -1;
    }
    return 0;
}

static int register_json(est_model *m, const char *path, char *err, size_t len)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        return snprintf(err, len, "'%s' line %d: %s", path, je.line, je.text), -1;
    json_t *layers = json_object_get(doc, "layers");
    int rc = json_is_array(layers) && json_array_size(layers) > 0
                 ? 0
                 : (snprintf(err, len, "'%s' needs a non-empty \"layers\" list", path), -1);
    for (size_t i = 0; rc == 0 && i < json_array_size(layers); i++)
        rc = add_json_layer(m, json_array_get(layers, i), (int)i, err, len);
    if (rc == 0)
        rc = json_ties(m, layers, err, len);
    if (rc == 0)
        rc = json_order(m, layers, json_object_get(doc, "order"), err, len);
    snprintf(m->name, sizeof m->name, "%zu layers of '%.90s'", json_array_size(layers), path);
    json_decref(doc);
    return rc;
}

/* A runtime with the model registered and the placement (NULL: the configuration's). */
int est_build(est_model *m, const est_options *o, const char *pdev, const char *odev, char *err,
              size_t len)
{
    static int config_read; /* the first read showed the config's warnings: later ones are quiet */
    memset(m, 0, sizeof *m);
    zt_options opts = ZT_OPTIONS_INIT;
    opts.config_path = o->ds_config;
    if (config_read++)
        opts.log_level = 0; /* errors */
    if (zt_runtime_create(&opts, NULL, &m->rt) != ZT_OK)
        return snprintf(err, len, "%s", zt_last_error(m->rt)), -1;
    if (o->stage >= 0 && !pdev && o->stage < 3) /* the parameters where the stage keeps them */
        pdev = "none";
    if (o->stage == 0 && !odev)
        odev = "none";
    if ((o->stage >= 0 && zt_config_set_int(m->rt, "zero_optimization.stage", o->stage)) ||
        (pdev && zt_config_set_string(m->rt, "zero_optimization.offload_param.device", pdev)) ||
        (odev && zt_config_set_string(m->rt, "zero_optimization.offload_optimizer.device", odev)))
        return snprintf(err, len, "%s", zt_last_error(m->rt)), -1;
    return o->config ? register_gpt2(m, o, err, len) : register_json(m, o->layers, err, len);
}

void est_free_model(est_model *m)
{
    zt_runtime_destroy(m->rt);
    free(m->events);
}

/* ---- this machine ---- */

typedef struct machine {
    uint64_t ram_available; /* MemAvailable */
    uint64_t nvme_free;     /* at the configuration's first nvme_path */
    const char *nvme_path;  /* NULL: none configured; else path_buf */
    char path_buf[ZT_PATH_MAX];
    char nvme_problem[128]; /* why its free space is unknown ("" when known) */
    uint64_t device_budget;
} machine;

uint64_t est_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb * 1024;
}

static int read_machine(const zt_runtime *rt, const est_options *o, machine *mc, char *err,
                        size_t len)
{
    memset(mc, 0, sizeof *mc);
    mc->ram_available = est_mem_available();
    const zt_config *c = &rt->cfg;
    const char *path = c->offload_param.n_nvme_paths       ? c->offload_param.nvme_path[0]
                       : c->offload_optimizer.n_nvme_paths ? c->offload_optimizer.nvme_path[0]
                                                           : NULL;
    if (path) /* a copy: the runtime it comes from goes first */
        mc->nvme_path = strcpy(mc->path_buf, path);
    struct statvfs vfs;
    if (mc->nvme_path && statvfs(mc->nvme_path, &vfs) == 0)
        mc->nvme_free = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    else if (mc->nvme_path)
        snprintf(mc->nvme_problem, sizeof mc->nvme_problem, "%s", strerror(errno));
    if (o->device_memory) {
        if (bench_parse_size(o->device_memory, &mc->device_budget) != 0)
            return snprintf(err, len, "--device-memory '%s' is not a size (e.g. 80G)",
                            o->device_memory),
                   -1;
    } else if (!strcmp(c->device_backend, "host")) {
        mc->device_budget = zt_config_device_budget(c);
    } else {
        return snprintf(err, len,
                        "the %s device backend's memory is known once a device is "
                        "open: give --device-memory (e.g. 80G for an H100)",
                        c->device_backend),
               -1;
    }
    return 0;
}

/* ---- output ---- */

static const char *fmt(uint64_t bytes, char *buf) { return bench_fmt_bytes(bytes, buf, 32); }

static void print_rank(const est_model *m, const zt_estimate *e, int world)
{
    const zt_plan *p = &e->plan;
    char a[32], b[32], c[32], d[32];
    static const char *const tiers[] = {"device", "cpu", "nvme"};
    printf("%s: %.2fM parameters, %d rank(s), ZeRO stage %d, %s, parameters on %s, optimizer "
           "state on %s\n",
           m->name, (double)m->params / 1e6, world, m->rt->cfg.stage,
           p->dtype == ZT_F32    ? "fp32"
           : p->dtype == ZT_BF16 ? "bf16"
                                 : "fp16",
           tiers[p->param_tier], tiers[p->optim_tier]);
    printf("per rank:\n");
    printf("  device  %10s at least for this call order (%s resident + %s for layer '%s' in "
           "backward alone)\n",
           fmt(e->device_min_order, a), fmt(p->device_resident, b),
           fmt(p->device_min - p->device_resident, c), p->device_min_layer);
    if (e->runs)
        printf("          %10s with the whole prefetch window; %s peak under the budget of %s "
               "(%llu evictions per step)\n",
               fmt(e->device_window, a), fmt(e->device_peak, b), fmt(e->device_capacity, c),
               (unsigned long long)e->evictions);
    else
        printf("          %10s with the whole prefetch window; the budget of %s is below the "
               "minimum: these steps cannot run\n",
               fmt(e->device_window, a), fmt(e->device_capacity, c));
    if (p->device_optim_layers && p->optim_tier != ZT_TIER_DEVICE) {
        char why[96];
        if (m->rt->cfg.offload_optimizer.ratio == ZT_RATIO_AUTO) /* measured at commit only */
            snprintf(why, sizeof why, "\"auto\" taken as 0 here, the most it can put there");
        else
            snprintf(why, sizeof why, "%.3f of the elements on the CPU", (double)p->cpu_ratio);
        printf("          %10s of it the optimizer state of the first %d layers, updated on the "
               "device (offload_optimizer.ratio: %s)\n",
               fmt(p->device_optim_bytes, a), p->device_optim_layers, why);
    }
    if (p->replicated_layers)
        printf("          %10s of it the full parameters of %d layers, replicated on every rank "
               "(stage %d)\n",
               fmt(p->replicated_bytes, a), p->replicated_layers, m->rt->cfg.stage);
    int slots = 0;
    int64_t bucket = zt_plan_bucket_elems(m->rt, world, &slots);
    if (bucket > 0)
        printf("          gradient buckets (reduce_bucket_size %lld): %d fp32 buffer%s of %s a "
               "step and up to %s of released gradients held, counted above\n",
               (long long)m->rt->cfg.reduce_bucket_size, slots, slots > 1 ? "s" : "",
               fmt((uint64_t)bucket * 4, a), fmt((uint64_t)bucket * zt_dtype_size(p->dtype), b));
    printf("  host    %10s (fp32 gradient accumulators, staging, and the shards placed on cpu)\n",
           fmt(p->host_bytes, a));
    if (p->persistent_layers)
        printf("          %d layer%s (%s) below stage3_param_persistence_threshold stay%s in "
               "device memory\n",
               p->persistent_layers, p->persistent_layers > 1 ? "s" : "",
               fmt(p->persistent_bytes, d), p->persistent_layers > 1 ? "" : "s");
    printf("  pinned  %10s (NVMe parameter staging)\n", fmt(p->pinned_bytes, a));
    if (e->act_layers) {
        const char *home = "none";
        zt_act_home(m->rt, &home);
        printf("  activation checkpoints of %d layers (zt_act_register): %s in %s; on the device "
               "%s at least, %s at most (counted above)\n",
               e->act_layers, fmt(e->act_home, a),
               !strcmp(home, "cpu")    ? "pinned host memory"
               : !strcmp(home, "nvme") ? "NVMe"
                                       : "device memory",
               fmt(e->act_device_min, b), fmt(e->act_device_max, c));
    }
    printf("  nvme    %10s (%s parameters, %s optimizer state)\n",
           fmt(p->nvme_param_bytes + p->nvme_optim_bytes, a), fmt(p->nvme_param_bytes, b),
           fmt(p->nvme_optim_bytes, c));
}

typedef struct fit {
    const char *param, *optim;
    const char *act_home; /* where registered activation checkpoints live: "none", "cpu", "nvme" */
    zt_estimate e;
    int ok_device, ok_host, ok_nvme;
    char why[160];
} fit;

static void judge(fit *f, const machine *mc, int per_node)
{
    const zt_plan *p = &f->e.plan;
    uint64_t acts = f->e.act_home; /* registered activation checkpoints in their home */
    int acts_host = f->act_home && !strcmp(f->act_home, "cpu");
    int acts_nvme = f->act_home && !strcmp(f->act_home, "nvme");
    uint64_t host = (p->host_bytes + p->pinned_bytes + (acts_host ? acts : 0)) * (uint64_t)per_node;
    uint64_t nvme =
        (p->nvme_param_bytes + p->nvme_optim_bytes + (acts_nvme ? acts : 0)) * (uint64_t)per_node;
    f->ok_device = f->e.device_min_order <= mc->device_budget;
    f->ok_host = host <= mc->ram_available;
    f->ok_nvme = nvme == 0 || (mc->nvme_path && nvme <= mc->nvme_free);
    const char *reasons[3] = {f->ok_device ? NULL : "device budget too small",
                              f->ok_host ? NULL : "not enough free RAM",
                              f->ok_nvme      ? NULL
                              : mc->nvme_path ? "not enough NVMe space"
                                              : "no nvme_path set"};
    size_t at = (size_t)snprintf(f->why, sizeof f->why, "does not fit:");
    for (int k = 0, n = 0; k < 3 && at < sizeof f->why; k++)
        if (reasons[k])
            at += (size_t)snprintf(f->why + at, sizeof f->why - at, "%s %s", n++ ? ";" : "",
                                   reasons[k]);
    if (f->ok_device && f->ok_host && f->ok_nvme)
        snprintf(f->why, sizeof f->why, "fits%s",
                 f->e.device_window > mc->device_budget ? " (prefetch window trimmed)" : "");
}

static void print_fits(const fit *fits, int n, const machine *mc, int per_node)
{
    char a[32], b[32], c[32];
    printf("\nthis machine: %s RAM available, device budget %s, ", fmt(mc->ram_available, a),
           fmt(mc->device_budget, b));
    if (mc->nvme_path && mc->nvme_problem[0])
        printf("nvme_path '%s' cannot be read (%s)", mc->nvme_path, mc->nvme_problem);
    else if (mc->nvme_path)
        printf("%s free in '%s'", fmt(mc->nvme_free, c), mc->nvme_path);
    else
        printf("no nvme_path configured");
    printf("; %d rank(s) on this node\n", per_node);
    printf("  %-7s %-9s %12s %12s %12s %12s  %s\n", "params", "optimizer", "device min",
           "device peak", "host/node", "nvme/node", "verdict");
    for (int i = 0; i < n; i++) {
        const zt_plan *p = &fits[i].e.plan;
        char d1[32], d2[32] = "-", h[32], v[32];
        printf("  %-7s %-9s %12s %12s %12s %12s  %s\n", fits[i].param, fits[i].optim,
               fmt(fits[i].e.device_min_order, d1),
               fits[i].e.runs ? fmt(fits[i].e.device_peak, d2) : d2,
               fmt((p->host_bytes + p->pinned_bytes) * (uint64_t)per_node, h),
               fmt((p->nvme_param_bytes + p->nvme_optim_bytes) * (uint64_t)per_node, v),
               fits[i].why);
    }
}

static void print_json(const est_model *m, const zt_estimate *e, const fit *fits, int n,
                       const machine *mc, int world, int per_node, json_t *acts)
{
    const zt_plan *p = &e->plan;
    int slots = 0;
    int64_t bucket = zt_plan_bucket_elems(m->rt, world, &slots);
    json_t *list = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(
            list,
            json_pack(
                "{s:s, s:s, s:I, s:I, s:I, s:I, s:b}", "params", fits[i].param, "optimizer",
                fits[i].optim, "device_min", (json_int_t)fits[i].e.device_min_order, "device_peak",
                (json_int_t)fits[i].e.device_peak, "host_per_node",
                (json_int_t)((fits[i].e.plan.host_bytes + fits[i].e.plan.pinned_bytes) * per_node),
                "nvme_per_node",
                (json_int_t)((fits[i].e.plan.nvme_param_bytes + fits[i].e.plan.nvme_optim_bytes) *
                             per_node),
                "fits", fits[i].ok_device && fits[i].ok_host && fits[i].ok_nvme));
    json_t *o = json_pack(
        "{s:s, s:I, s:i, s:i, s:i, s:{s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:I}, s:{s:I, s:I, s:I}, s:o}",
        "model", m->name, "parameters", (json_int_t)m->params, "world", world, "ranks_per_node",
        per_node, "stage", m->rt->cfg.stage, "per_rank", "replicated",
        (json_int_t)p->replicated_bytes, "device_min", (json_int_t)e->device_min_order, "runs",
        e->runs, "device_window", (json_int_t)e->device_window, "device_peak",
        (json_int_t)e->device_peak, "device_resident", (json_int_t)p->device_resident, "host",
        (json_int_t)p->host_bytes, "pinned", (json_int_t)p->pinned_bytes, "nvme_params",
        (json_int_t)p->nvme_param_bytes, "nvme_optimizer", (json_int_t)p->nvme_optim_bytes,
        "bucket_buffers", (json_int_t)(bucket * 4 * slots), "bucket_held_max",
        (json_int_t)(bucket * (int64_t)zt_dtype_size(p->dtype)), "machine", "ram_available",
        (json_int_t)mc->ram_available, "device_budget", (json_int_t)mc->device_budget, "nvme_free",
        (json_int_t)mc->nvme_free, "placements", list);
    if (acts)
        json_object_set_new(o, "activations", acts);
    /* the device optimizer's state (all of it, or offload_optimizer.ratio's device share) */
    json_t *pr = json_object_get(o, "per_rank");
    json_object_set_new(pr, "optimizer_device", json_integer((json_int_t)p->device_optim_bytes));
    json_object_set_new(pr, "optimizer_cpu_ratio", json_real((double)p->cpu_ratio));
    char *text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(o);
}

/* ---- the command ---- */

/* The most ranks --world takes (2^20): beyond any job the plan is meant for. */
#define ZT_EST_MAX_WORLD 1048576

int est_parse(int argc, char **argv, est_options *o)
{
    *o = (est_options){bench_arg(argc, argv, "config"),
                       bench_arg(argc, argv, "layers"),
                       bench_arg(argc, argv, "ds-config"),
                       bench_arg(argc, argv, "device-memory"),
                       0,
                       1,
                       0,
                       bench_flag(argc, argv, "json"),
                       -1,
                       0,
                       0};
    const char *v = bench_arg(argc, argv, "vocab");
    if (v && !strcmp(v, "byte"))
        o->vocab = 256;
    else if (bench_int_arg(argc, argv, "ztier estimate", "vocab", 1, INT_MAX, &o->vocab) != 0)
        return -1;
    if (bench_int_arg(argc, argv, "ztier estimate", "world", 1, ZT_EST_MAX_WORLD, &o->world) != 0 ||
        bench_int_arg(argc, argv, "ztier estimate", "ranks-per-node", 0, ZT_EST_MAX_WORLD,
                      &o->ranks_per_node) != 0 ||
        bench_int_arg(argc, argv, "ztier estimate", "stage", 0, 3, &o->stage) != 0 ||
        bench_int_arg(argc, argv, "ztier estimate", "batch", 1, INT_MAX, &o->batch) != 0 ||
        bench_int_arg(argc, argv, "ztier estimate", "seq", 1, INT_MAX, &o->seq) != 0)
        return -1;
    if (!o->config == !o->layers || !o->batch != !o->seq || (o->batch && !o->config))
        return -1; /* --batch and --seq together, for a GPT-2 --config */
    if (o->batch && o->batch % o->world) {
        fprintf(stderr, "ztier estimate: --batch %d does not split over --world %d\n", o->batch,
                o->world);
        return -1;
    }
    return 0;
}

/* Estimates one placement (NULL, NULL: the configuration's). */
int est_estimate(const est_options *o, const char *pdev, const char *odev, uint64_t budget,
                 est_model *m, zt_estimate *e, char *err, size_t len)
{
    if (est_build(m, o, pdev, odev, err, len) != 0)
        return -1;
    uint64_t cap = budget ? budget : zt_config_device_budget(&m->rt->cfg);
    zt_status st = zt_rt_estimate(m->rt, o->world, cap, m->events, m->n_events, EST_STEPS, e);
    if (st != ZT_OK && st != ZT_ERR_DEVICE_NOMEM) /* below the minimum: still a verdict */
        return snprintf(err, len, "%s", zt_last_error(m->rt)), -1;
    return 0;
}

int cmd_estimate(int argc, char **argv)
{
    est_options o;
    static const char *const known[] = {"config",         "vocab",     "layers",        "world",
                                        "ranks-per-node", "ds-config", "device-memory", "stage",
                                        "batch",          "seq",       "precision",     NULL};
    static const char *const flags[] = {"json", NULL};
    if (bench_check_args(argc, argv, known, flags) != 0 || est_parse(argc, argv, &o) != 0)
        return usage();
    /* the GPU trainer's --precision (its default bf16): where its activations are bf16 */
    const char *precision = bench_arg(argc, argv, "precision");
    if (precision && gpt2_precision_parse(precision) < 0) {
        fprintf(stderr,
                "ztier estimate: --precision '%s' is not bf16, tf32 or fp32 (the GPU "
                "trainer's; bf16, its default, keeps the activations in bf16)\n",
                precision);
        return usage();
    }
    char err[1200];
    est_model m;
    zt_estimate e;
    machine mc;
    if (est_build(&m, &o, NULL, NULL, err, sizeof err) != 0 ||
        read_machine(m.rt, &o, &mc, err, sizeof err) != 0) {
        fprintf(stderr, "ztier estimate: %s\n", err);
        est_free_model(&m);
        return 1;
    }
    int stage = m.rt->cfg.stage;
    est_free_model(&m);
    int per_node = o.ranks_per_node ? o.ranks_per_node : o.world;
    /* the placements the stage allows: the parameters offloaded only at stage 3, nothing at 0 */
    static const char *const stage3[][2] = {
        {"none", "cpu"}, {"cpu", "cpu"}, {"cpu", "nvme"}, {"nvme", "nvme"}};
    static const char *const stage12[][2] = {{"none", "cpu"}, {"none", "nvme"}};
    static const char *const stage0[][2] = {{"none", "none"}};
    const char *const(*placements)[2] = stage == 3 ? stage3 : stage ? stage12 : stage0;
    int n_fits = stage == 3 ? 4 : stage ? 2 : 1;
    fit fits[4];
    int rc = est_estimate(&o, NULL, NULL, mc.device_budget, &m, &e, err, sizeof err);
    if (rc == 0)
        print_rank(&m, &e, o.world);
    for (int i = 0; rc == 0 && i < n_fits; i++) {
        est_model pm;
        memset(&fits[i], 0, sizeof fits[i]);
        fits[i].param = placements[i][0], fits[i].optim = placements[i][1];
        rc = est_estimate(&o, placements[i][0], placements[i][1], mc.device_budget, &pm, &fits[i].e,
                          err, sizeof err);
        if (rc == 0)
            zt_act_home(pm.rt, &fits[i].act_home);
        est_free_model(&pm);
        judge(&fits[i], &mc, per_node);
    }
    est_acts_in acts = {.rows = o.batch / o.world, .seq = o.seq};
    if (rc == 0 && o.batch) {
        gpt2_config_named(o.config, o.vocab, &acts.c);
        acts.prefetch_layers = m.rt->cfg.act_prefetch_layers;
        acts.params_peak = e.runs ? e.device_peak : e.device_min_order;
        acts.budget = mc.device_budget;
        /* the trainer widens bf16 layers into fp32 scratch (two slots; on a GPU in device
         * memory), but for the blocks' weight matrices the GPU's GEMMs read in 16 bits (its
         * bf16 matmuls, the trainer's default --precision) */
        int gpu = !strcmp(m.rt->cfg.device_backend, "cuda");
        acts.bf16_scratch = m.rt->cfg.bf16 ? gpt2_bf16_scratch_bytes_on(&acts.c, gpu) : 0;
        static const char *const tiers[] = {"the device", "cpu", "nvme"};
        acts.placement = tiers[e.plan.param_tier];
        /* the GPU trainer's ops keep attention's logsumexp, the CPU's the softmax */
        acts.att_keep = gpu ? GPT2_ATT_LSE : GPT2_ATT_PROBS;
        acts.fused_dgelu = gpu; /* cuBLASLt's DGELU epilogue: no gradient at GELU's output */
        /* ... and in bf16 (--precision bf16, its default) its activations in 16 bits */
        acts.act_bytes =
            gpu && (!precision || gpt2_precision_parse(precision) == GPT2_BF16) ? 2 : 4;
        if (o.seq > acts.c.max_seq) {
            fprintf(stderr, "ztier estimate: --seq %d is longer than the model's context (%d)\n",
                    o.seq, acts.c.max_seq);
            rc = -1;
        }
    }
    if (rc == 0) {
        print_fits(fits, n_fits, &mc, per_node);
        if (o.batch)
            est_acts_print(&acts);
        if (o.json)
            print_json(&m, &e, fits, n_fits, &mc, o.world, per_node,
                       o.batch ? est_acts_json(&acts) : NULL);
    } else {
        fprintf(stderr, "ztier estimate: %s\n", err);
    }
    if (rc == 0 && !e.runs) { /* the configuration's placement cannot run on this budget */
        fprintf(stderr,
                "ztier estimate: the device budget of %llu bytes is below the %llu bytes these "
                "steps need at least with this placement (%llu for layer '%s' in its backward "
                "pass alone%s%s); raise %s, or choose a placement that fits (above)\n",
                (unsigned long long)e.device_capacity, (unsigned long long)e.device_min_order,
                (unsigned long long)e.plan.device_min, e.plan.device_min_layer,
                e.tight[0] ? "; a byte less runs out at " : "", e.tight,
                o.device_memory ? "--device-memory" : "ztier.hbm_capacity");
        rc = -1;
    }
    est_free_model(&m);
    return rc == 0 ? 0 : 1;
}

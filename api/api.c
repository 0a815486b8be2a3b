/* The public entry points: argument and state checks, then the runtime's internal calls.
 * Every failure leaves a message in the handle; misuse never crashes. */
#include "runtime/checkpoint.h"
#include "runtime/log.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_ARG(rt, cond, ...)                                                               \
    do {                                                                                       \
        if (!(cond))                                                                           \
            return ZT_ERR(&(rt)->err, ZT_ERR_ARGUMENT, __VA_ARGS__);                           \
    } while (0)

/* Clears the last error and checks the runtime is in `want` state. */
static zt_status enter(zt_runtime *rt, zt_rt_state want, const char *call)
{
    if (rt->state == ZT_RT_FAILED)
        return ZT_ERR_USAGE; /* the message still says why creation or commit failed */
    zt_error_clear(&rt->err);
    if (rt->state == want)
        return ZT_OK;
    if (want == ZT_RT_REGISTERING)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "%s after zt_runtime_commit: the model is frozen; register every layer and "
                      "parameter before committing", call);
    return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                  "%s before zt_runtime_commit: commit the registered model first", call);
}

static zt_status check_layer(zt_runtime *rt, int layer)
{
    CHECK_ARG(rt, layer >= 0 && layer < rt->n_layers,
              "unknown layer id %d (the runtime has %d layers, ids 0..%d)", layer, rt->n_layers,
              rt->n_layers - 1);
    return ZT_OK;
}

static zt_status check_options(const zt_options *o, zt_error *err)
{
    if (o->struct_size < offsetof(zt_options, world_size) + sizeof(int) ||
        o->api_version < 1 || o->api_version > ZT_API_VERSION)
        return ZT_ERR(err, ZT_ERR_ARGUMENT,
                      "zt_options was not initialised with ZT_OPTIONS_INIT (struct_size %zu, "
                      "api_version %d; this library supports api_version 1..%d)",
                      o->struct_size, o->api_version, ZT_API_VERSION);
    if (o->log_level > 3)
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "zt_options.log_level = %d, must be -1..3",
                      o->log_level);
    return ZT_OK;
}

zt_status zt_runtime_create(const zt_options *opts, const char *config_json, zt_runtime **out)
{
    if (!out)
        return ZT_ERR_ARGUMENT;
    *out = NULL;
    zt_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return ZT_ERR_NOMEM;
    *out = rt;
    zt_options defaults = ZT_OPTIONS_INIT;
    zt_status st = check_options(opts ? opts : &defaults, &rt->err);
    if (st == ZT_OK)
        st = zt_rt_create(rt, opts ? opts : &defaults, config_json);
    if (st != ZT_OK) {
        rt->state = ZT_RT_FAILED;
        zt_error_prefix(&rt->err, "zt_runtime_create: ");
        ZT_LOGE("runtime", "%s", rt->err.msg);
    }
    return st;
}

const char *zt_last_error(const zt_runtime *rt)
{
    if (!rt)
        return "no runtime handle (NULL): zt_runtime_create could not allocate one";
    return rt->err.msg;
}

void zt_runtime_destroy(zt_runtime *rt)
{
    if (!rt)
        return;
    zt_rt_destroy(rt);
    free(rt);
}

zt_status zt_layer_add(zt_runtime *rt, const char *name, int *layer_id)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_REGISTERING, "zt_layer_add");
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, name && *name, "zt_layer_add: name is NULL or empty");
    CHECK_ARG(rt, layer_id, "zt_layer_add('%s'): layer_id is NULL", name);
    return zt_rt_layer_add(rt, name, layer_id);
}

static zt_status check_init(zt_runtime *rt, const char *name, const zt_init *in)
{
    if (!in)
        return ZT_OK;
    CHECK_ARG(rt, in->kind >= ZT_INIT_ZEROS && in->kind <= ZT_INIT_CALLBACK,
              "parameter '%s': unknown init kind %d", name, (int)in->kind);
    CHECK_ARG(rt, in->kind != ZT_INIT_CALLBACK || in->fn,
              "parameter '%s': ZT_INIT_CALLBACK needs init->fn", name);
    CHECK_ARG(rt, in->kind != ZT_INIT_NORMAL || in->b >= 0.0f,
              "parameter '%s': normal init with standard deviation %g (must be >= 0)", name,
              (double)in->b);
    CHECK_ARG(rt, in->kind != ZT_INIT_UNIFORM || in->a <= in->b,
              "parameter '%s': uniform init with low %g > high %g", name, (double)in->a,
              (double)in->b);
    return ZT_OK;
}

zt_status zt_param_add(zt_runtime *rt, int layer, const char *name, const int64_t *shape,
                       int ndim, const zt_init *init, int *param_id)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_REGISTERING, "zt_param_add");
    if (st == ZT_OK)
        st = check_layer(rt, layer);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, name && *name, "zt_param_add: name is NULL or empty");
    CHECK_ARG(rt, shape, "zt_param_add('%s'): shape is NULL", name);
    CHECK_ARG(rt, param_id, "zt_param_add('%s'): param_id is NULL", name);
    st = check_init(rt, name, init);
    return st == ZT_OK ? zt_rt_param_add(rt, layer, name, shape, ndim, init, param_id) : st;
}

zt_status zt_runtime_commit(zt_runtime *rt)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_REGISTERING, "zt_runtime_commit");
    if (st != ZT_OK)
        return st;
    st = zt_rt_commit(rt);
    if (st != ZT_ERR_USAGE) /* usage errors happen identically on every rank */
        st = zt_comm_agree(rt->comm, st, "zt_runtime_commit", &rt->err);
    if (st != ZT_OK && st != ZT_ERR_USAGE) {
        /* Partially placed state cannot be trusted; only destroy is allowed now. */
        rt->state = ZT_RT_FAILED;
        zt_error_prefix(&rt->err, "zt_runtime_commit failed (destroy this runtime): ");
    }
    return st;
}

zt_status zt_fetch(zt_runtime *rt, int layer, zt_pass pass, zt_layer_view *view)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_fetch");
    if (st == ZT_OK)
        st = check_layer(rt, layer);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, pass == ZT_FORWARD || pass == ZT_BACKWARD,
              "zt_fetch: pass %d is neither ZT_FORWARD nor ZT_BACKWARD", (int)pass);
    CHECK_ARG(rt, view, "zt_fetch(layer %d): view is NULL", layer);
    return zt_rt_fetch(rt, layer, pass, view);
}

zt_status zt_release(zt_runtime *rt, int layer, zt_pass pass)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_release");
    if (st == ZT_OK)
        st = check_layer(rt, layer);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, pass == ZT_FORWARD || pass == ZT_BACKWARD,
              "zt_release: pass %d is neither ZT_FORWARD nor ZT_BACKWARD", (int)pass);
    return zt_rt_release(rt, layer, pass);
}

zt_status zt_step(zt_runtime *rt, const zt_step_args *args, zt_step_info *info)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_step");
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, !args || args->struct_size >= offsetof(zt_step_args, lr) + sizeof(float),
              "zt_step: args was not initialised with ZT_STEP_ARGS_INIT");
    int held = zt_rt_layers_held(rt);
    if (held)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "zt_step while %d layer fetch(es) are not released (in the middle of a "
                      "forward or backward pass); release every layer first", held);
    /* An I/O error on one rank must stop every rank, not leave them out of step. */
    return zt_comm_agree(rt->comm, zt_rt_step(rt, args, info), "zt_step", &rt->err);
}

zt_status zt_stats_get(const zt_runtime *rt, zt_stats *out)
{
    if (!rt || !out || out->struct_size < sizeof(size_t) + sizeof(uint64_t))
        return ZT_ERR_ARGUMENT;
    zt_stats s = rt->stats;
    if (rt->dev) {
        s.device_bytes_current = rt->dev->bytes_in_use;
        s.device_bytes_peak = rt->dev->bytes_peak;
        s.device_bytes_capacity = rt->dev->capacity;
    }
    s.host_bytes_current = rt->host.current;
    s.host_bytes_peak = rt->host.peak;
    s.trace_deviations = (uint64_t)rt->trace.deviations;
    zt_swap *swaps[2] = {rt->param_swap, rt->optim_swap};
    for (int i = 0; i < 2; i++) {
        if (!swaps[i])
            continue;
        zt_swap_stats ss;
        zt_swap_get_stats(swaps[i], &ss);
        s.nvme_bytes_current += ss.used;
        s.nvme_bytes_peak += ss.used; /* preallocated at commit: current is the peak */
        s.nvme_read_bytes += ss.read_bytes;
        s.nvme_write_bytes += ss.write_bytes;
        s.nvme_read_s += ss.read_s;
        s.nvme_write_s += ss.write_s;
    }
    size_t n = out->struct_size < sizeof s ? out->struct_size : sizeof s;
    s.struct_size = n;
    memcpy(out, &s, n);
    return ZT_OK;
}

zt_status zt_runtime_rank(const zt_runtime *rt, int *rank, int *world_size)
{
    if (!rt || !rank || !world_size || rt->state == ZT_RT_FAILED)
        return ZT_ERR_ARGUMENT;
    *rank = rt->rank;
    *world_size = rt->world;
    return ZT_OK;
}

zt_status zt_layer_count(const zt_runtime *rt, int *count)
{
    if (!rt || !count)
        return ZT_ERR_ARGUMENT;
    *count = rt->n_layers;
    return ZT_OK;
}

zt_status zt_step_count(const zt_runtime *rt, int64_t *steps)
{
    if (!rt || !steps || rt->state == ZT_RT_FAILED)
        return ZT_ERR_ARGUMENT;
    *steps = rt->steps;
    return ZT_OK;
}

zt_status zt_param_read(zt_runtime *rt, int param_id, float *dst, int64_t numel)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_param_read");
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, param_id >= 0 && param_id < rt->n_params,
              "unknown parameter id %d (the runtime has %d parameters)", param_id, rt->n_params);
    CHECK_ARG(rt, dst, "zt_param_read: dst is NULL");
    if (zt_rt_layers_held(rt))
        return ZT_ERR(&rt->err, ZT_ERR_USAGE, "zt_param_read while layers are held; release "
                                              "them first");
    return zt_rt_param_read(rt, param_id, dst, numel);
}

static zt_status checkpoint_enter(zt_runtime *rt, const char *dir, const char *call)
{
    zt_status st = enter(rt, ZT_RT_COMMITTED, call);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, dir && *dir, "%s: dir is NULL or empty", call);
    if (zt_rt_layers_held(rt))
        return ZT_ERR(&rt->err, ZT_ERR_USAGE, "%s while layers are held; release them first",
                      call);
    return ZT_OK;
}

zt_status zt_checkpoint_save(zt_runtime *rt, const char *dir)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = checkpoint_enter(rt, dir, "zt_checkpoint_save");
    return st == ZT_OK ? zt_rt_checkpoint_save(rt, dir) : st;
}

zt_status zt_checkpoint_load(zt_runtime *rt, const char *dir)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = checkpoint_enter(rt, dir, "zt_checkpoint_load");
    return st == ZT_OK ? zt_rt_checkpoint_load(rt, dir) : st;
}

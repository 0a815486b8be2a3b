/* SPDX-License-Identifier: MIT */
/* The public entry points: argument and state checks, then the runtime's internal calls.
 * Every failure leaves a message in the handle; misuse never crashes. */
#include "runtime/checkpoint.h"
#include "core/log.h"
#include "runtime/runtime.h"
#include "runtime/config_parse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_ARG(rt, cond, ...)                                     \
    do {                                                             \
        if (!(cond))                                                 \
            return ZT_ERR(&(rt)->err, ZT_ERR_ARGUMENT, __VA_ARGS__); \
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
                      "parameter before committing",
                      call);
    return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                  "%s before zt_runtime_commit: commit the registered model first", call);
}

/* enter(ZT_RT_COMMITTED) for calls that read or change the model's values: refused while
 * the load zt_runtime_expect_load promised has not come (the values are not initialised). */
static zt_status enter_loaded(zt_runtime *rt, const char *call)
{
    zt_status st = enter(rt, ZT_RT_COMMITTED, call);
    if (st != ZT_OK || !rt->load_pending)
        return st;
    return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                  "%s before zt_checkpoint_load: zt_runtime_expect_load said a checkpoint load "
                  "follows commit, so the parameters and optimizer state were left "
                  "uninitialised; load a checkpoint first (a failed load leaves them so), or do "
                  "not call zt_runtime_expect_load to have commit initialise them",
                  call);
}

static zt_status check_layer(zt_runtime *rt, int layer)
{
    CHECK_ARG(rt, layer >= 0 && layer < rt->reg.n_layers,
              "unknown layer id %d (the runtime has %d layers, ids 0..%d)", layer, rt->reg.n_layers,
              rt->reg.n_layers - 1);
    return ZT_OK;
}

/* Calls that need the whole model at rest: the message names what is still fetched. */
static zt_status check_nothing_held(zt_runtime *rt, const char *call)
{
    if (!zt_rt_layers_held(rt))
        return ZT_OK;
    char held[512];
    zt_rt_describe_held(rt, held, sizeof held);
    return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                  "%s while layers are fetched and not released: %s; release every fetched "
                  "layer first",
                  call, held);
}

/* The getters take a const handle but still reset or set its last-error text, which is
 * per-handle state outside the model. */
static zt_error *err_of(const zt_runtime *rt) { return &((zt_runtime *)rt)->err; }

/* The first api_version of this major (docs/abi.md): older callers were built against
 * ztier 0.1, whose zt_init_fn returned void. */
#define ZT_API_VERSION_OLDEST 2

/* The structs the library writes into (zt_stats, zt_optimizer_info, zt_step_info) start with
 * a struct_size the caller sets to the sizeof it was compiled with. The library writes only
 * that many bytes, so a caller built against an older, smaller struct keeps what lies past
 * it, and sets struct_size to the bytes it wrote, so a caller built against a newer header
 * learns which of its fields this library filled. */

/* The end of a struct's first field after struct_size: the least struct_size accepted. */
#define FIRST_FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* out (NULL is refused) holds a struct_size of at least `least`. */
static zt_status check_sized_out(zt_error *err, const void *out, size_t least, const char *call,
                                 const char *init)
{
    size_t size = 0;
    if (out)
        memcpy(&size, out, sizeof size);
    if (!out)
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "%s: the output pointer is NULL", call);
    if (size < least)
        return ZT_ERR(err, ZT_ERR_ARGUMENT,
                      "%s: the output struct's struct_size is %zu (%s; at least %zu bytes): "
                      "initialise it with %s",
                      call, size, size ? "too small" : "unset", least, init);
    return ZT_OK;
}

/* Copies the library's full struct (full_size bytes, starting with struct_size) into the
 * caller's, at most the caller's struct_size bytes. */
static void copy_sized_out(void *out, void *full, size_t full_size)
{
    size_t n;
    memcpy(&n, out, sizeof n);
    if (n > full_size)
        n = full_size;
    memcpy(full, &n, sizeof n);
    memcpy(out, full, n);
}

static zt_status check_options(const zt_options *o, zt_error *err)
{
    if (o->struct_size < offsetof(zt_options, world_size) + sizeof(int) || o->api_version < 1)
        return ZT_ERR(err, ZT_ERR_ARGUMENT,
                      "zt_options was not initialised with ZT_OPTIONS_INIT (struct_size %zu, "
                      "api_version %d)",
                      o->struct_size, o->api_version);
    if (o->api_version > ZT_API_VERSION)
        return ZT_ERR(err, ZT_ERR_ARGUMENT,
                      "zt_options.api_version %d: the program was compiled against a newer "
                      "ztier.h than this library (ztier %s, api_version %d) and may use calls "
                      "or fields it lacks; run it with the library of the header it was built "
                      "against or a newer one (check zt_version() against ZT_VERSION: "
                      "docs/abi.md)",
                      o->api_version, zt_version_string(), ZT_API_VERSION);
    if (o->api_version < ZT_API_VERSION_OLDEST)
        return ZT_ERR(err, ZT_ERR_ARGUMENT,
                      "zt_options.api_version %d: the program was compiled against the ztier.h "
                      "of an older major version (this library is ztier %s, api_versions "
                      "%d..%d; zt_init_fn now returns zt_status); rebuild it against this "
                      "header (docs/abi.md)",
                      o->api_version, zt_version_string(), ZT_API_VERSION_OLDEST, ZT_API_VERSION);
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
    if (st != ZT_OK) /* the message stays in the handle; the caller decides to print it */
        rt->state = ZT_RT_FAILED;
    return st;
}

static zt_status config_set(zt_runtime *rt, const char *path, const zt_config_value *v)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_REGISTERING, zt_config_setter_name(v->type));
    return st == ZT_OK ? zt_rt_config_set(rt, path, v) : st;
}

zt_status zt_config_set(zt_runtime *rt, const char *path, const char *value)
{
    zt_config_value v = {ZT_CONFIG_JSON, value, 0, 0};
    return config_set(rt, path, &v);
}

zt_status zt_config_set_string(zt_runtime *rt, const char *path, const char *value)
{
    zt_config_value v = {ZT_CONFIG_STRING, value, 0, 0};
    return config_set(rt, path, &v);
}

zt_status zt_config_set_int(zt_runtime *rt, const char *path, int64_t value)
{
    zt_config_value v = {ZT_CONFIG_INT, NULL, value, 0};
    return config_set(rt, path, &v);
}

zt_status zt_config_set_double(zt_runtime *rt, const char *path, double value)
{
    zt_config_value v = {ZT_CONFIG_DOUBLE, NULL, 0, value};
    return config_set(rt, path, &v);
}

zt_status zt_config_set_bool(zt_runtime *rt, const char *path, int value)
{
    zt_config_value v = {ZT_CONFIG_BOOL, NULL, value != 0, 0};
    return config_set(rt, path, &v);
}

const char *zt_last_error(const zt_runtime *rt)
{
    if (!rt)
        return "no runtime handle (NULL): zt_runtime_create could not allocate one";
    return rt->err.msg;
}

zt_status zt_last_status(const zt_runtime *rt) { return rt ? rt->err.status : ZT_ERR_ARGUMENT; }

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

zt_status zt_layer_tie(zt_runtime *rt, int layer, int after_layer)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_REGISTERING, "zt_layer_tie");
    if (st == ZT_OK)
        st = check_layer(rt, layer);
    if (st == ZT_OK)
        st = check_layer(rt, after_layer);
    return st == ZT_OK ? zt_rt_layer_tie(rt, layer, after_layer) : st;
}

static zt_status check_init(zt_runtime *rt, const char *name, const zt_init *in)
{
    if (!in)
        return ZT_OK;
    CHECK_ARG(rt, in->kind >= ZT_INIT_ZEROS && in->kind <= ZT_INIT_COPY,
              "parameter '%s': unknown init kind %d", name, (int)in->kind);
    CHECK_ARG(rt, in->kind != ZT_INIT_CALLBACK || in->fn,
              "parameter '%s': ZT_INIT_CALLBACK needs init->fn", name);
    CHECK_ARG(rt, in->kind != ZT_INIT_COPY || in->user,
              "parameter '%s': ZT_INIT_COPY needs init->user, the array to copy from", name);
    CHECK_ARG(rt, in->kind != ZT_INIT_NORMAL || in->b >= 0.0f,
              "parameter '%s': normal init with standard deviation %g (must be >= 0)", name,
              (double)in->b);
    CHECK_ARG(rt, in->kind != ZT_INIT_UNIFORM || in->a <= in->b,
              "parameter '%s': uniform init with low %g > high %g", name, (double)in->a,
              (double)in->b);
    return ZT_OK;
}

zt_status zt_param_add(zt_runtime *rt, int layer, const char *name, const int64_t *shape, int ndim,
                       const zt_init *init, int *param_id)
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

zt_status zt_runtime_expect_load(zt_runtime *rt)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_REGISTERING, "zt_runtime_expect_load");
    if (st == ZT_OK)
        rt->load_pending = 1;
    return st;
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
        st = zt_comm_agree(rt->dist.comm, st, "zt_runtime_commit", &rt->err);
    if (st != ZT_OK && st != ZT_ERR_USAGE) {
        /* Partially placed state cannot be trusted; only destroy is allowed now. */
        rt->state = ZT_RT_FAILED;
        zt_error_prefix(&rt->err, "zt_runtime_commit failed (destroy this runtime): ");
    }
    return st;
}

/* The caller's stream of an async call: not NULL, and one this runtime accepts. */
static zt_status check_stream(zt_runtime *rt, const void *stream, const char *call)
{
    CHECK_ARG(rt, stream,
              "%s: stream is NULL; pass the stream your work runs on (a cudaStream_t with the "
              "cuda backend, a stream from zt_stream_create with the host backend), or call "
              "the blocking form",
              call);
    CHECK_ARG(rt, zt_rt_stream_known(rt, stream),
              "%s: %p is not a stream of this runtime: with the host device backend, make "
              "streams with zt_stream_create",
              call, stream);
    return ZT_OK;
}

static zt_status fetch(zt_runtime *rt, int layer, zt_pass pass, void *stream, zt_layer_view *view,
                       const char *call)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter_loaded(rt, call);
    if (st == ZT_OK)
        st = check_layer(rt, layer);
    if (st == ZT_OK && strcmp(call, "zt_fetch") != 0)
        st = check_stream(rt, stream, call);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, pass >= ZT_FORWARD && pass <= ZT_INFERENCE,
              "%s: pass %d is not ZT_FORWARD, ZT_BACKWARD or ZT_INFERENCE", call, (int)pass);
    CHECK_ARG(rt, view, "%s(layer %d): view is NULL", call, layer);
    return zt_rt_fetch(rt, layer, pass, stream, view);
}

static zt_status release(zt_runtime *rt, int layer, zt_pass pass, void *stream, const char *call)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, call);
    if (st == ZT_OK)
        st = check_layer(rt, layer);
    if (st == ZT_OK && strcmp(call, "zt_release") != 0)
        st = check_stream(rt, stream, call);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, pass >= ZT_FORWARD && pass <= ZT_INFERENCE,
              "%s: pass %d is not ZT_FORWARD, ZT_BACKWARD or ZT_INFERENCE", call, (int)pass);
    return zt_rt_release(rt, layer, pass, stream);
}

zt_status zt_fetch(zt_runtime *rt, int layer, zt_pass pass, zt_layer_view *view)
{
    return fetch(rt, layer, pass, NULL, view, "zt_fetch");
}

zt_status zt_release(zt_runtime *rt, int layer, zt_pass pass)
{
    return release(rt, layer, pass, NULL, "zt_release");
}

zt_status zt_fetch_async(zt_runtime *rt, int layer, zt_pass pass, void *stream, zt_layer_view *view)
{
    return fetch(rt, layer, pass, stream, view, "zt_fetch_async");
}

zt_status zt_release_async(zt_runtime *rt, int layer, zt_pass pass, void *stream)
{
    return release(rt, layer, pass, stream, "zt_release_async");
}

zt_status zt_stream_create(zt_runtime *rt, void **stream)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_stream_create");
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, stream, "zt_stream_create: stream is NULL");
    zt_stream *s = NULL;
    st = zt_rt_stream_create(rt, &s);
    *stream = s;
    return st;
}

zt_status zt_stream_destroy(zt_runtime *rt, void *stream)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_stream_destroy");
    return st == ZT_OK ? zt_rt_stream_destroy(rt, stream) : st;
}

zt_status zt_stream_launch(zt_runtime *rt, void *stream, void (*fn)(void *), void *arg)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_stream_launch");
    if (st == ZT_OK)
        st = check_stream(rt, stream, "zt_stream_launch");
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, fn, "zt_stream_launch: fn is NULL");
    return zt_device_launch_host_fn(rt->device.dev, stream, fn, arg, &rt->err);
}

zt_status zt_stream_synchronize(zt_runtime *rt, void *stream)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_stream_synchronize");
    if (st == ZT_OK)
        st = check_stream(rt, stream, "zt_stream_synchronize");
    return st == ZT_OK ? zt_device_stream_synchronize(rt->device.dev, stream, &rt->err) : st;
}

/* ---- activation checkpoints ---- */

zt_status zt_act_register(zt_runtime *rt, int layer, size_t bytes)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_REGISTERING, "zt_act_register");
    if (st == ZT_OK)
        st = check_layer(rt, layer);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, bytes > 0, "zt_act_register(layer %d): bytes is 0", layer);
    return zt_rt_act_register(rt, layer, bytes);
}

static zt_status act_enter(zt_runtime *rt, int layer, void *stream, const char *call)
{
    zt_status st = enter(rt, ZT_RT_COMMITTED, call);
    if (st == ZT_OK)
        st = check_layer(rt, layer);
    if (st == ZT_OK && strstr(call, "_async"))
        st = check_stream(rt, stream, call);
    return st;
}

static zt_status act_save(zt_runtime *rt, int layer, const void *src, size_t bytes, void *stream,
                          const char *call)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = act_enter(rt, layer, stream, call);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, src && bytes, "%s(layer %d): src is NULL or bytes is 0", call, layer);
    return zt_rt_act_save(rt, layer, src, bytes, stream);
}

zt_status zt_act_save(zt_runtime *rt, int layer, const void *src, size_t bytes)
{
    return act_save(rt, layer, src, bytes, NULL, "zt_act_save");
}

zt_status zt_act_save_async(zt_runtime *rt, int layer, const void *src, size_t bytes, void *stream)
{
    return act_save(rt, layer, src, bytes, stream, "zt_act_save_async");
}

static zt_status act_load(zt_runtime *rt, int layer, void *stream, void **ptr, size_t *bytes,
                          const char *call)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = act_enter(rt, layer, stream, call);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, ptr, "%s(layer %d): ptr is NULL", call, layer);
    uint64_t n = 0;
    st = zt_rt_act_load(rt, layer, stream, ptr, &n);
    if (st == ZT_OK && bytes)
        *bytes = (size_t)n;
    return st;
}

zt_status zt_act_load(zt_runtime *rt, int layer, void **ptr, size_t *bytes)
{
    return act_load(rt, layer, NULL, ptr, bytes, "zt_act_load");
}

zt_status zt_act_load_async(zt_runtime *rt, int layer, void *stream, void **ptr, size_t *bytes)
{
    return act_load(rt, layer, stream, ptr, bytes, "zt_act_load_async");
}

static zt_status act_free(zt_runtime *rt, int layer, void *stream, const char *call)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = act_enter(rt, layer, stream, call);
    return st == ZT_OK ? zt_rt_act_free(rt, layer, stream) : st;
}

zt_status zt_act_free(zt_runtime *rt, int layer)
{
    return act_free(rt, layer, NULL, "zt_act_free");
}

zt_status zt_act_free_async(zt_runtime *rt, int layer, void *stream)
{
    return act_free(rt, layer, stream, "zt_act_free_async");
}

zt_status zt_act_home(const zt_runtime *rt, const char **home)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_error_clear(err_of(rt));
    if (!home)
        return ZT_ERR(err_of(rt), ZT_ERR_ARGUMENT, "zt_act_home: home is NULL");
    *home = zt_rt_act_home(rt);
    return ZT_OK;
}

zt_status zt_act_discard(zt_runtime *rt)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_act_discard");
    if (st == ZT_OK)
        zt_rt_act_discard(rt);
    return st;
}

zt_status zt_step(zt_runtime *rt, const zt_step_args *args, zt_step_info *info)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter_loaded(rt, "zt_step");
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, !args || args->struct_size >= offsetof(zt_step_args, lr) + sizeof(float),
              "zt_step: args was not initialised with ZT_STEP_ARGS_INIT");
    if (info && (st = check_sized_out(&rt->err, info, FIRST_FIELD_END(zt_step_info, step),
                                      "zt_step (info)", "ZT_STEP_INFO_INIT")) != ZT_OK)
        return st;
    if ((st = check_nothing_held(rt, "zt_step")) != ZT_OK)
        return st;
    if (zt_rt_act_outstanding(rt))
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "zt_step while %d layers' activation checkpoints are saved and not freed: "
                      "load and free each after its backward (zt_act_load, zt_act_free), or "
                      "zt_act_discard to abandon them",
                      zt_rt_act_outstanding(rt));
    /* An I/O error on one rank must stop every rank, not leave them out of step. */
    zt_step_info full = ZT_STEP_INFO_INIT;
    st = zt_comm_agree(rt->dist.comm, zt_rt_step(rt, args, &full), "zt_step", &rt->err);
    if (st == ZT_OK && info)
        copy_sized_out(info, &full, sizeof full);
    return st;
}

zt_status zt_stats_get(const zt_runtime *rt, zt_stats *out)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = check_sized_out(err_of(rt), out, FIRST_FIELD_END(zt_stats, device_bytes_current),
                                   "zt_stats_get", "ZT_STATS_INIT");
    if (st != ZT_OK)
        return st;
    zt_stats s;
    zt_rt_stats(rt, &s);
    copy_sized_out(out, &s, sizeof s);
    zt_error_clear(err_of(rt));
    return ZT_OK;
}

/* The introspection calls answer on a failed handle too, except where the value they would
 * give was never set up. */
static zt_status answer(const zt_runtime *rt, const void *out, const char *call)
{
    if (!out)
        return ZT_ERR(err_of(rt), ZT_ERR_ARGUMENT, "%s: an output pointer is NULL", call);
    zt_error_clear(err_of(rt));
    return ZT_OK;
}

zt_status zt_runtime_rank(const zt_runtime *rt, int *rank, int *world_size)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    if (rt->state == ZT_RT_FAILED)
        return ZT_ERR_USAGE; /* the message still says why creation failed */
    zt_status st = answer(rt, rank && world_size ? rank : NULL, "zt_runtime_rank");
    if (st == ZT_OK)
        *rank = rt->dist.rank, *world_size = rt->dist.world;
    return st;
}

zt_status zt_runtime_device(const zt_runtime *rt, int *device)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    if (rt->state != ZT_RT_COMMITTED)
        return ZT_ERR(err_of(rt), ZT_ERR_USAGE,
                      "zt_runtime_device: the device is chosen at zt_runtime_commit; call it "
                      "after");
    zt_status st = answer(rt, device, "zt_runtime_device");
    if (st == ZT_OK)
        *device = rt->device.dev->index;
    return st;
}

zt_status zt_layer_count(const zt_runtime *rt, int *count)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = answer(rt, count, "zt_layer_count");
    if (st == ZT_OK)
        *count = rt->reg.n_layers;
    return st;
}

zt_status zt_step_count(const zt_runtime *rt, int64_t *steps)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    if (rt->state == ZT_RT_FAILED)
        return ZT_ERR_USAGE;
    zt_status st = answer(rt, steps, "zt_step_count");
    if (st == ZT_OK)
        *steps = rt->train.steps;
    return st;
}

zt_status zt_optimizer_get(const zt_runtime *rt, zt_optimizer_info *out)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    if (rt->state == ZT_RT_FAILED)
        return ZT_ERR_USAGE;
    zt_status st = check_sized_out(err_of(rt), out, FIRST_FIELD_END(zt_optimizer_info, adamw),
                                   "zt_optimizer_get", "ZT_OPTIMIZER_INFO_INIT");
    if (st != ZT_OK)
        return st;
    zt_optimizer_info o;
    zt_rt_optimizer_info(rt, &o);
    copy_sized_out(out, &o, sizeof o);
    zt_error_clear(err_of(rt));
    return ZT_OK;
}

/* zt_param_read (every rank: root -1) and zt_param_read_to (one rank: to_one). */
static zt_status param_read(zt_runtime *rt, const char *fn, int to_one, int param_id, int state,
                            int root, float *dst, int64_t numel)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter_loaded(rt, fn);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, param_id >= 0 && param_id < rt->reg.n_params,
              "unknown parameter id %d (the runtime has %d parameters)", param_id,
              rt->reg.n_params);
    CHECK_ARG(rt, !to_one || (root >= 0 && root < rt->dist.world),
              "%s: root %d is not a rank (the runtime has ranks 0 to %d; zt_param_read reads "
              "on every rank)",
              fn, root, rt->dist.world - 1);
    CHECK_ARG(rt, dst || (to_one && root != rt->dist.rank), "%s: dst is NULL", fn);
    if ((st = check_nothing_held(rt, fn)) != ZT_OK)
        return st;
    CHECK_ARG(rt, state >= ZT_STATE_MASTER && state <= ZT_STATE_ADAM_V,
              "%s: state %d is none of ZT_STATE_MASTER, ZT_STATE_ADAM_M, ZT_STATE_ADAM_V", fn,
              state);
    return zt_rt_param_read(rt, param_id, state, root, dst, numel);
}

zt_status zt_param_read(zt_runtime *rt, int param_id, float *dst, int64_t numel)
{
    return param_read(rt, "zt_param_read", 0, param_id, ZT_STATE_MASTER, -1, dst, numel);
}

zt_status zt_param_read_state(zt_runtime *rt, int param_id, zt_param_state state, float *dst,
                              int64_t numel)
{
    return param_read(rt, "zt_param_read_state", 0, param_id, (int)state, -1, dst, numel);
}

zt_status zt_param_read_to(zt_runtime *rt, int param_id, int root, float *dst, int64_t numel)
{
    return param_read(rt, "zt_param_read_to", 1, param_id, ZT_STATE_MASTER, root, dst, numel);
}

zt_status zt_async_error(zt_runtime *rt)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter(rt, ZT_RT_COMMITTED, "zt_async_error");
    return st == ZT_OK ? zt_rt_async_error(rt) : st;
}

zt_status zt_param_write(zt_runtime *rt, int param_id, const float *src, int64_t numel)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = enter_loaded(rt, "zt_param_write");
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, param_id >= 0 && param_id < rt->reg.n_params,
              "unknown parameter id %d (the runtime has %d parameters)", param_id,
              rt->reg.n_params);
    CHECK_ARG(rt, src, "zt_param_write: src is NULL");
    if ((st = check_nothing_held(rt, "zt_param_write")) != ZT_OK)
        return st;
    /* an I/O error on one rank must not leave the ranks with different parameters unnoticed */
    return zt_comm_agree(rt->dist.comm, zt_rt_param_write(rt, param_id, src, numel),
                         "zt_param_write", &rt->err);
}

static zt_status checkpoint_enter(zt_runtime *rt, const char *dir, const char *call)
{
    zt_status st = enter(rt, ZT_RT_COMMITTED, call);
    if (st != ZT_OK)
        return st;
    CHECK_ARG(rt, dir && *dir, "%s: dir is NULL or empty", call);
    return check_nothing_held(rt, call);
}

zt_status zt_checkpoint_save(zt_runtime *rt, const char *dir)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = checkpoint_enter(rt, dir, "zt_checkpoint_save");
    if (st == ZT_OK && rt->load_pending)
        st = enter_loaded(rt, "zt_checkpoint_save");
    return st == ZT_OK ? zt_rt_checkpoint_save(rt, dir) : st;
}

zt_status zt_checkpoint_load(zt_runtime *rt, const char *dir)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    zt_status st = checkpoint_enter(rt, dir, "zt_checkpoint_load");
    if (st == ZT_OK && (st = zt_rt_checkpoint_load(rt, dir)) == ZT_OK)
        rt->load_pending = 0; /* every value restored (zt_runtime_expect_load) */
    return st;
}

/* ---- checkpoint meta ---- */

static int meta_key_ok(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    if (n < 1 || n >= ZT_CKPT_META_KEY)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)key[i]) && !strchr("._-", key[i]))
            return 0;
    return 1;
}

static int meta_find(const zt_ckpt_meta *m, const char *key)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->key[i], key))
            return i;
    return -1;
}

zt_status zt_checkpoint_meta_set(zt_runtime *rt, const char *key, int64_t value)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    if (rt->state == ZT_RT_FAILED)
        return ZT_ERR_USAGE;
    zt_error_clear(&rt->err);
    CHECK_ARG(rt, meta_key_ok(key),
              "zt_checkpoint_meta_set: key '%.60s' is not 1 to %d characters of [A-Za-z0-9._-]",
              key ? key : "(null)", ZT_CKPT_META_KEY - 1);
    zt_ckpt_meta *m = &rt->meta;
    int i = meta_find(m, key);
    CHECK_ARG(rt, i >= 0 || m->n < ZT_CKPT_META_MAX,
              "zt_checkpoint_meta_set: '%s' would be key %d; a checkpoint keeps at most %d", key,
              m->n + 1, ZT_CKPT_META_MAX);
    if (i < 0)
        snprintf(m->key[i = m->n++], ZT_CKPT_META_KEY, "%s", key);
    m->value[i] = value;
    return ZT_OK;
}

zt_status zt_checkpoint_meta_get(zt_runtime *rt, const char *key, int64_t *value)
{
    if (!rt)
        return ZT_ERR_ARGUMENT;
    if (rt->state == ZT_RT_FAILED)
        return ZT_ERR_USAGE;
    zt_error_clear(&rt->err);
    CHECK_ARG(rt, key && value, "zt_checkpoint_meta_get: key or value is NULL");
    int i = meta_find(&rt->meta, key);
    CHECK_ARG(rt, i >= 0,
              "zt_checkpoint_meta_get: no value for '%.60s': neither set with "
              "zt_checkpoint_meta_set nor in the checkpoint loaded",
              key);
    *value = rt->meta.value[i];
    return ZT_OK;
}

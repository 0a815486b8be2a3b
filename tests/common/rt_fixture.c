/* SPDX-License-Identifier: MIT */
#include "rt_fixture.h"
#include "scratch.h"
#include "train.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define TOKEN "$SCRATCH"

static char dir[512];

int rt_fixture_open(const char *name)
{
    scratch_make(name, dir, sizeof dir);
    return 0;
}

int rt_fixture_close(void) { return scratch_remove(dir); }

const char *rt_fixture_dir(void) { return dir; }

/* cfg with TOKEN replaced, malloc'ed (NULL stays NULL). */
static char *substitute(const char *cfg)
{
    if (!cfg)
        return NULL;
    size_t tok = strlen(TOKEN), n = 0;
    for (const char *p = strstr(cfg, TOKEN); p; p = strstr(p + tok, TOKEN))
        n++;
    char *out = malloc(strlen(cfg) + n * strlen(dir) + 1);
    if (!out)
        fail_msg("out of memory for a config");
    char *w = out;
    for (const char *p = cfg, *q; *p; p = q + tok) {
        q = strstr(p, TOKEN);
        if (!q) {
            strcpy(w, p);
            return out;
        }
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        strcpy(w, dir);
        w += strlen(dir);
    }
    *w = '\0';
    return out;
}

const char *rt_fixture_config(const char *cfg)
{
    static char buf[16384];
    char *s = substitute(cfg);
    if (s && strlen(s) >= sizeof buf)
        fail_msg("a config of %zu bytes is too long for rt_fixture_config", strlen(s));
    snprintf(buf, sizeof buf, "%s", s ? s : "");
    free(s);
    return buf;
}

zt_runtime *rt_fixture_create(const zt_options *opts, const char *cfg)
{
    zt_runtime *rt = NULL;
    char *s = substitute(cfg);
    zt_status st = zt_runtime_create(opts, s, &rt);
    free(s);
    if (st != ZT_OK)
        fail_msg("zt_runtime_create: %s", zt_last_error(rt));
    return rt;
}

void rt_fixture_register(zt_runtime *rt, rt_fixture_register_fn reg, void *model)
{
    if (reg(rt, model) != ZT_OK)
        fail_msg("registering the model: %s", zt_last_error(rt));
}

void rt_fixture_commit(zt_runtime *rt)
{
    if (zt_runtime_commit(rt) != ZT_OK)
        fail_msg("zt_runtime_commit: %s", zt_last_error(rt));
}

zt_runtime *rt_fixture_make(const zt_options *opts, const char *cfg, rt_fixture_register_fn reg,
                            void *model)
{
    zt_runtime *rt = rt_fixture_create(opts, cfg);
    rt_fixture_register(rt, reg, model);
    rt_fixture_commit(rt);
    return rt;
}

zt_status rt_fixture_try(const zt_options *opts, const char *cfg, rt_fixture_register_fn reg,
                         void *model, zt_runtime **out)
{
    *out = NULL;
    char *s = substitute(cfg);
    zt_status st = zt_runtime_create(opts, s, out);
    free(s);
    if (st != ZT_OK)
        return st;
    rt_fixture_register(*out, reg, model);
    return zt_runtime_commit(*out);
}

typedef struct mlp_spec {
    const mlp_dims *dims;
    uint64_t seed;
    minimal_model *m;
} mlp_spec;

static zt_status register_mlp(zt_runtime *rt, void *model)
{
    const mlp_spec *s = model;
    return minimal_register(rt, s->dims, s->seed, s->m);
}

void rt_fixture_register_mlp(zt_runtime *rt, const mlp_dims *dims, uint64_t seed, minimal_model *m)
{
    mlp_spec s = {dims, seed, m};
    rt_fixture_register(rt, register_mlp, &s);
}

zt_runtime *rt_fixture_mlp(const zt_options *opts, const char *cfg, const mlp_dims *dims,
                           uint64_t seed, minimal_model *m)
{
    mlp_spec s = {dims, seed, m};
    return rt_fixture_make(opts, cfg, register_mlp, &s);
}

zt_status rt_fixture_try_mlp(const zt_options *opts, const char *cfg, const mlp_dims *dims,
                             uint64_t seed, minimal_model *m, zt_runtime **out)
{
    mlp_spec s = {dims, seed, m};
    return rt_fixture_try(opts, cfg, register_mlp, &s, out);
}

void rt_fixture_expect_config_error(const char *cfg, const mlp_dims *dims, const char *needle)
{
    zt_runtime *rt = NULL;
    minimal_model m;
    zt_status st = rt_fixture_try_mlp(NULL, cfg, dims, 5, &m, &rt);
    assert_int_equal(st, ZT_ERR_CONFIG);
    if (!strstr(zt_last_error(rt), needle))
        fail_msg("'%s' not in: %s", needle, zt_last_error(rt));
    zt_runtime_destroy(rt);
}

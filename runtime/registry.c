/* SPDX-License-Identifier: MIT */
/* The registry: layers and their parameters as the caller registers them, and the two
 * questions about a rank's shard every module asks of it. */
#include "runtime/runtime.h"
#include "core/convert.h"

#include <stdlib.h>
#include <string.h>

zt_status zt_layer_set_master(zt_runtime *rt, zt_layer *L, const float *master)
{
    zt_status st = zt_home_store(&rt->tiers.homes, &L->master, master, &rt->err);
    if (L->master.shared)
        return st; /* the parameters are the master: stored once */
    const void *working = master;
    if (st == ZT_OK && rt->reg.dtype != ZT_F32) {
        working = rt->opt.staging_lp;
        zt_convert_array(rt->opt.staging_lp, rt->reg.dtype, master, ZT_F32, (size_t)L->shard_numel);
    }
    return st == ZT_OK ? zt_home_store(&rt->tiers.homes, &L->param_home, working, &rt->err) : st;
}

void zt_param_in_shard(const zt_runtime *rt, const zt_param *p, int64_t *first, int64_t *last,
                       int64_t *shard_offset)
{
    const zt_layer *L = &rt->reg.layers[p->layer];
    int64_t lo = L->persistent ? 0 : (int64_t)rt->dist.rank * L->shard_numel,
            hi = lo + L->shard_numel;
    int64_t a = p->offset > lo ? p->offset : lo;
    int64_t b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
    *first = a - p->offset;
    *last = b > a ? b - p->offset : *first;
    *shard_offset = a - lo;
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return -1;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *arr = p;
    *cap = ncap;
    return 0;
}

zt_status zt_rt_layer_add(zt_runtime *rt, const char *name, int *layer_id)
{
    for (int i = 0; i < rt->reg.n_layers; i++)
        if (strcmp(rt->reg.layers[i].name, name) == 0)
            return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT, "a layer named '%s' already exists (id %d)",
                          name, i);
    if (grow((void **)&rt->reg.layers, &rt->reg.cap_layers, rt->reg.n_layers + 1, sizeof(zt_layer)))
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory adding layer '%s'", name);
    zt_layer *L = &rt->reg.layers[rt->reg.n_layers];
    memset(L, 0, sizeof *L);
    if (!(L->name = strdup(name)))
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory adding layer '%s'", name);
    L->tied_after = -1;
    *layer_id = rt->reg.n_layers++;
    return ZT_OK;
}

zt_status zt_rt_layer_tie(zt_runtime *rt, int layer, int after_layer)
{
    const zt_layer *L = &rt->reg.layers[layer];
    if (after_layer <= layer)
        return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                      "zt_layer_tie: layer '%s' (id %d) cannot be used again after layer %d: the "
                      "second use must come after the layer's own forward, so after_layer is "
                      "greater than its id",
                      L->name, layer, after_layer);
    if (L->tied_after >= 0 && L->tied_after != after_layer)
        return ZT_ERR(&rt->err, ZT_ERR_USAGE,
                      "zt_layer_tie: layer '%s' is already tied after layer '%s'; a layer is "
                      "tied once",
                      L->name, rt->reg.layers[L->tied_after].name);
    rt->reg.layers[layer].tied_after = after_layer;
    return ZT_OK;
}

static zt_status check_shape(zt_runtime *rt, const char *name, const int64_t *shape, int ndim,
                             int64_t *numel)
{
    if (ndim < 1 || ndim > ZT_MAX_DIMS)
        return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT, "parameter '%s': ndim = %d, must be 1..%d", name,
                      ndim, ZT_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1)
            return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                          "parameter '%s': shape[%d] = %lld, every dimension must be >= 1", name, d,
                          (long long)shape[d]);
        if (n > (INT64_MAX / 4) / shape[d])
            return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT,
                          "parameter '%s': shape overflows (element count beyond 2^61)", name);
        n *= shape[d];
    }
    *numel = n;
    return ZT_OK;
}

zt_status zt_rt_param_add(zt_runtime *rt, int layer, const char *name, const int64_t *shape,
                          int ndim, const zt_init *init, int *param_id)
{
    int64_t numel = 0;
    zt_status st = check_shape(rt, name, shape, ndim, &numel);
    if (st != ZT_OK)
        return st;
    zt_layer *L = &rt->reg.layers[layer];
    for (int i = 0; i < rt->reg.n_params; i++)
        if (strcmp(rt->reg.params[i].name, name) == 0)
            return ZT_ERR(&rt->err, ZT_ERR_ARGUMENT, "a parameter named '%s' already exists", name);
    if (grow((void **)&rt->reg.params, &rt->reg.cap_params, rt->reg.n_params + 1,
             sizeof(zt_param)) ||
        grow((void **)&L->param_ids, &L->cap_params, L->n_params + 1, sizeof(int)))
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory adding parameter '%s'", name);
    zt_param *p = &rt->reg.params[rt->reg.n_params];
    memset(p, 0, sizeof *p);
    if (!(p->name = strdup(name)))
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory adding parameter '%s'", name);
    p->layer = layer;
    p->ndim = ndim;
    memcpy(p->shape, shape, sizeof(int64_t) * (size_t)ndim);
    p->numel = numel;
    if (init)
        p->init = *init;
    L->param_ids[L->n_params++] = rt->reg.n_params;
    *param_id = rt->reg.n_params++;
    return ZT_OK;
}

/* The hidden size the "auto" sizes come from: ztier.hidden_size, else the dimension the most
 * registered 2-D parameters share (ties: the larger dimension); 0 without 2-D parameters.
 * *shared, *of: how many 2-D parameters have it, of how many. */
int64_t zt_rt_hidden_size(const zt_runtime *rt, int *shared, int *of)
{
    *shared = *of = 0;
    if (rt->cfg.hidden_size > 0)
        return rt->cfg.hidden_size;
    int64_t best = 0;
    for (int i = 0; i < rt->reg.n_params; i++) {
        const zt_param *p = &rt->reg.params[i];
        if (p->ndim != 2)
            continue;
        (*of)++;
        for (int d = 0; d < 2; d++) {
            int64_t dim = p->shape[d];
            if (d == 1 && dim == p->shape[0])
                break; /* a square parameter counts once */
            int n = 0;
            for (int j = 0; j < rt->reg.n_params; j++) {
                const zt_param *q = &rt->reg.params[j];
                n += q->ndim == 2 && (q->shape[0] == dim || q->shape[1] == dim);
            }
            if (n > *shared || (n == *shared && dim > best)) {
                *shared = n;
                best = dim;
            }
        }
    }
    return best;
}

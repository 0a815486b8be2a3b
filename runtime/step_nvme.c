/* The optimizer step when master, m and v live on NVMe: the shards are cut into sub-groups
 * (sub_group_size elements, capped so 9 buffers stay small, whole swap blocks) and
 * pipelined over three buffer sets — sub-group i+1 is read while i is updated and i-1 is
 * written back. The result is bit-identical to the in-memory step: the same kernel runs on
 * the same values, only the order of transfers differs. */
#include "runtime/step_nvme.h"

#include <stdlib.h>
#include <string.h>

typedef struct opt_set {
    zt_swap_io io[3];
    int state; /* 0 idle, 1 reading, 2 writing */
} opt_set;

typedef struct chunk {
    zt_layer *L;
    int64_t begin, n;
} chunk;

int64_t zt_step_nvme_chunk_elems(const zt_runtime *rt, uint64_t block_size)
{
    int64_t cap = (int64_t)16 << 20, per_block = (int64_t)(block_size / sizeof(float));
    int64_t n = rt->cfg.sub_group_size < cap ? rt->cfg.sub_group_size : cap;
    n = n / per_block * per_block;
    return n < per_block ? per_block : n;
}

static zt_home *state_home(zt_layer *L, int k)
{
    return k == 0 ? &L->master : k == 1 ? &L->exp_avg : &L->exp_avg_sq;
}

static float *set_buf(zt_runtime *rt, int set, int k) { return rt->opt_buf[set * 3 + k]; }

static zt_status start(zt_runtime *rt, const chunk *c, int set, opt_set *s, int write)
{
    zt_status st = ZT_OK;
    uint64_t off = (uint64_t)c->begin * sizeof(float), len = (uint64_t)c->n * sizeof(float);
    for (int k = 0; k < 3 && st == ZT_OK; k++) {
        zt_home *h = state_home(c->L, k);
        st = write ? zt_swap_write_at(h->swap, &h->ext, off, set_buf(rt, set, k), len, &s->io[k],
                                      &rt->err)
                   : zt_swap_read_at(h->swap, &h->ext, off, set_buf(rt, set, k), len, &s->io[k],
                                     &rt->err);
        if (st != ZT_OK)
            for (int j = 0; j < k; j++)
                zt_swap_wait(h->swap, &s->io[j], NULL);
    }
    s->state = st == ZT_OK ? (write ? 2 : 1) : 0;
    return st;
}

static zt_status finish(zt_runtime *rt, const chunk *c, opt_set *s)
{
    zt_status st = ZT_OK;
    for (int k = 0; k < 3 && s->state; k++) {
        zt_status w = zt_swap_wait(state_home(c->L, k)->swap, &s->io[k],
                                   st == ZT_OK ? &rt->err : NULL);
        st = st == ZT_OK ? w : st;
    }
    s->state = 0;
    return st;
}

static void *param_out(zt_runtime *rt, zt_layer *L)
{
    void *host = zt_home_host_ptr(&L->param_home);
    return host ? host : rt->dtype == ZT_F32 ? rt->staging : rt->staging_lp;
}

static zt_status update(zt_runtime *rt, const chunk *c, int set, const zt_adam_hparams *h)
{
    size_t dsize = zt_dtype_size(rt->dtype);
    zt_adam_tensors t = {set_buf(rt, set, 0), set_buf(rt, set, 1), set_buf(rt, set, 2),
                         c->L->grad_acc + c->begin, ZT_F32,
                         (char *)param_out(rt, c->L) + (size_t)c->begin * dsize, rt->dtype, c->n};
    zt_adam_step_parallel(rt->pool, rt->adam_variant, h, &t);
    if (c->begin + c->n < c->L->shard_numel || zt_home_host_ptr(&c->L->param_home))
        return ZT_OK; /* the layer's working copy is stored once, after its last sub-group */
    if (c->L->param_home.kind == ZT_TIER_DEVICE)
        rt->stats.h2d_bytes += c->L->param_home.bytes;
    return zt_home_store(&rt->homes, &c->L->param_home, param_out(rt, c->L), &rt->err);
}

static int make_chunks(zt_runtime *rt, int64_t per, chunk *out)
{
    int n = 0;
    for (int i = 0; i < rt->n_layers; i++)
        for (int64_t b = 0; b < rt->layers[i].shard_numel; b += per) {
            int64_t left = rt->layers[i].shard_numel - b;
            if (out)
                out[n] = (chunk){&rt->layers[i], b, left < per ? left : per};
            n++;
        }
    return n;
}

zt_status zt_step_nvme(zt_runtime *rt, const zt_adam_hparams *h)
{
    int64_t per = zt_step_nvme_chunk_elems(rt, zt_swap_block_size(rt->optim_swap));
    int n = make_chunks(rt, per, NULL);
    chunk *chunks = calloc((size_t)n, sizeof *chunks);
    if (!chunks)
        return ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory planning the optimizer step");
    make_chunks(rt, per, chunks);
    opt_set sets[3];
    memset(sets, 0, sizeof sets);
    int owner[3] = {-1, -1, -1}; /* chunk each set holds */
    zt_status st = start(rt, &chunks[0], 0, &sets[0], 0);
    owner[0] = 0;
    for (int i = 0; i < n && st == ZT_OK; i++) {
        int cur = i % 3, next = (i + 1) % 3;
        if (i + 1 < n) { /* read ahead into the set written two sub-groups ago */
            if (sets[next].state)
                st = finish(rt, &chunks[owner[next]], &sets[next]);
            if (st == ZT_OK)
                st = start(rt, &chunks[i + 1], next, &sets[next], 0);
            owner[next] = i + 1;
        }
        if (st == ZT_OK)
            st = finish(rt, &chunks[i], &sets[cur]);
        if (st == ZT_OK)
            st = update(rt, &chunks[i], cur, h);
        if (st == ZT_OK)
            st = start(rt, &chunks[i], cur, &sets[cur], 1);
    }
    for (int s = 0; s < 3; s++) /* drain: wait for every transfer still in flight */
        if (sets[s].state) {
            zt_status w = finish(rt, &chunks[owner[s]], &sets[s]);
            st = st == ZT_OK ? w : st;
        }
    free(chunks);
    return st;
}

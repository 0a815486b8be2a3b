/* The optimizer step when master, m and v live on NVMe: the shards are cut into sub-groups
 * (sub_group_size elements, capped so 9 buffers stay small, whole swap blocks) and
 * pipelined over three buffer sets — sub-group i+1 is read while i is updated and i-1 is
 * written back; the step's last write-backs complete in the background, and the first
 * sub-groups of the next step are read while the caller runs its backward pass (the state
 * does not depend on the gradients). The result is
 * bit-identical to the in-memory step: the same kernel runs on the same values, only the
 * order of transfers differs. */
#include "runtime/step_nvme.h"

#include <stdlib.h>
#include <string.h>

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

static zt_status start(zt_runtime *rt, const chunk *c, int set, int write)
{
    zt_opt_set *s = &rt->opt_sets[set];
    s->L = c->L, s->begin = c->begin, s->n = c->n;
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

static zt_status finish(zt_runtime *rt, zt_opt_set *s)
{
    zt_status st = ZT_OK;
    for (int k = 0; k < 3 && s->state; k++) {
        zt_status w = zt_swap_wait(state_home(s->L, k)->swap, &s->io[k],
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

/* Waits for the sets in the given state (1 reading, 2 writing; 0: both). */
static zt_status finish_sets(zt_runtime *rt, int which)
{
    zt_status st = ZT_OK;
    for (int k = 0; k < 3; k++)
        if (rt->opt_sets[k].state && (!which || rt->opt_sets[k].state == which)) {
            zt_status w = finish(rt, &rt->opt_sets[k]);
            st = st == ZT_OK ? w : st;
        }
    return st;
}

zt_status zt_step_nvme_drain(zt_runtime *rt)
{
    rt->opt_preread = 0; /* read-ahead data may go stale: the step reads again */
    return finish_sets(rt, 0);
}

static chunk *plan(zt_runtime *rt, int *n)
{
    int64_t per = zt_step_nvme_chunk_elems(rt, zt_swap_block_size(rt->optim_swap));
    *n = make_chunks(rt, per, NULL);
    chunk *chunks = calloc((size_t)*n, sizeof *chunks);
    if (chunks)
        make_chunks(rt, per, chunks);
    return chunks;
}

void zt_step_nvme_preread(zt_runtime *rt)
{
    if (rt->opt_preread > 0)
        return;
    int n = 0;
    chunk *chunks = plan(rt, &n);
    if (!chunks || finish_sets(rt, 2) != ZT_OK) { /* a failed write-back: the step reports it */
        free(chunks);
        return;
    }
    int k = 0;
    for (; k < 3 && k < n; k++)
        if (start(rt, &chunks[k], k, 0) != ZT_OK)
            break;
    rt->opt_preread = k;
    free(chunks);
}

zt_status zt_step_nvme(zt_runtime *rt, const zt_adam_hparams *h)
{
    int pre = rt->opt_preread, n = 0;
    rt->opt_preread = 0;
    zt_status st = finish_sets(rt, 2); /* the previous step's last write-backs */
    chunk *chunks = st == ZT_OK ? plan(rt, &n) : NULL;
    if (st == ZT_OK && !chunks)
        st = ZT_ERR(&rt->err, ZT_ERR_NOMEM, "out of memory planning the optimizer step");
    zt_opt_set *sets = rt->opt_sets;
    if (st == ZT_OK && pre == 0)
        st = start(rt, &chunks[0], 0, 0);
    for (int i = 0; i < n && st == ZT_OK; i++) {
        int cur = i % 3, next = (i + 1) % 3;
        if (i + 1 < n && i + 1 >= pre) { /* read ahead into the set written two sub-groups ago */
            if (sets[next].state)
                st = finish(rt, &sets[next]);
            if (st == ZT_OK)
                st = start(rt, &chunks[i + 1], next, 0);
        }
        if (st == ZT_OK)
            st = finish(rt, &sets[cur]);
        if (st == ZT_OK)
            st = update(rt, &chunks[i], cur, h);
        if (st == ZT_OK)
            st = start(rt, &chunks[i], cur, 1);
    }
    free(chunks);
    if (st != ZT_OK) /* nothing may stay in flight after a failure */
        zt_step_nvme_drain(rt);
    /* On success the last write-backs finish while the caller computes the next step; the
     * next use of the optimizer state (step, checkpoint, parameter read) waits for them. */
    return st;
}

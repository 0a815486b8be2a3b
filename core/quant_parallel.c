/* SPDX-License-Identifier: MIT */
/* The block quantizers split over a thread pool: chunks of whole quantization blocks, so
 * every block is computed by one thread exactly as the serial kernel computes it and the
 * bits are the serial ones (int4 chunks also hold an even number of elements, so each
 * starts on a whole byte of packed nibbles). */
#include "core/convert.h"
#include "core/quant.h"

/* About 256 KiB of fp32 input per work item, rounded to whole blocks; with even, to an
 * even number of elements too (int4: whole bytes). */
static int64_t chunk_elems(int block, int even)
{
    int64_t per = (64 * 1024 + block - 1) / block;
    return even && (per * block) % 2 ? (per + 1) * block : per * block;
}

/* One loop's arguments, int8 (q: int8_t) or int4 (q: packed uint8_t, x and out fp32). */
typedef struct quant_ctx {
    zt_quant_variant v;
    const void *x;
    void *out; /* dequantize: the output (int4: the fp32 sum added into) */
    zt_dtype dt;
    int block;
    void *q;
    float *scales;
} quant_ctx;

static void quant_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const quant_ctx *c = arg;
    zt_quant8(c->v, (const char *)c->x + (size_t)lo * zt_dtype_size(c->dt), c->dt, hi - lo,
              c->block, (int8_t *)c->q + lo, c->scales + lo / c->block);
}

static void dequant_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const quant_ctx *c = arg;
    zt_dequant8(c->v, (const int8_t *)c->q + lo, c->scales + lo / c->block, hi - lo, c->block,
                (char *)c->out + (size_t)lo * zt_dtype_size(c->dt), c->dt);
}

void zt_quant8_parallel(zt_threadpool *pool, zt_quant_variant v, const void *x, zt_dtype dt,
                        int64_t n, int block, int8_t *q, float *scales)
{
    if (!pool) {
        zt_quant8(v, x, dt, n, block, q, scales);
        return;
    }
    quant_ctx c = {v, x, NULL, dt, block, q, scales};
    zt_threadpool_run(pool, n, chunk_elems(block, 0), quant_chunk, &c);
}

void zt_dequant8_parallel(zt_threadpool *pool, zt_quant_variant v, const int8_t *q,
                          const float *scales, int64_t n, int block, void *out, zt_dtype dt)
{
    if (!pool) {
        zt_dequant8(v, q, scales, n, block, out, dt);
        return;
    }
    quant_ctx c = {v, NULL, out, dt, block, (int8_t *)q, (float *)scales};
    zt_threadpool_run(pool, n, chunk_elems(block, 0), dequant_chunk, &c);
}

static void quant4_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const quant_ctx *c = arg;
    zt_quant4((const float *)c->x + lo, hi - lo, c->block, (uint8_t *)c->q + lo / 2,
              c->scales + lo / c->block);
}

static void dequant4_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const quant_ctx *c = arg;
    zt_dequant4_add((const uint8_t *)c->q + lo / 2, c->scales + lo / c->block, hi - lo, c->block,
                    (float *)c->out + lo);
}

void zt_quant4_parallel(zt_threadpool *pool, const float *x, int64_t n, int block, uint8_t *q,
                        float *scales)
{
    if (!pool) {
        zt_quant4(x, n, block, q, scales);
        return;
    }
    quant_ctx c = {ZT_QUANT_SCALAR, x, NULL, ZT_F32, block, q, scales}; /* zt_quant4 picks */
    zt_threadpool_run(pool, n, chunk_elems(block, 1), quant4_chunk, &c);
}

void zt_dequant4_add_parallel(zt_threadpool *pool, const uint8_t *q, const float *scales, int64_t n,
                              int block, float *acc)
{
    if (!pool) {
        zt_dequant4_add(q, scales, n, block, acc);
        return;
    }
    quant_ctx c = {ZT_QUANT_SCALAR, NULL, acc, ZT_F32, block, (uint8_t *)q, (float *)scales};
    zt_threadpool_run(pool, n, chunk_elems(block, 1), dequant4_chunk, &c);
}

/* The int8 block quantizer split over a thread pool: chunks of whole quantization blocks,
 * so every block is computed by one thread exactly as the serial kernel computes it and the
 * bits are the serial ones. */
#include "core/convert.h"
#include "runtime/comm/quant.h"

/* About 256 KiB of fp32 input per work item, rounded to whole blocks. */
static int64_t chunk_elems(int block)
{
    int64_t per = (64 * 1024 + block - 1) / block;
    return per * block;
}

typedef struct quant_ctx {
    zt_quant_variant v;
    const void *x;
    void *out; /* dequantize: the output */
    zt_dtype dt;
    int block;
    int8_t *q;
    float *scales;
} quant_ctx;

static void quant_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const quant_ctx *c = arg;
    zt_quant8(c->v, (const char *)c->x + (size_t)lo * zt_dtype_size(c->dt), c->dt, hi - lo,
              c->block, c->q + lo, c->scales + lo / c->block);
}

static void dequant_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const quant_ctx *c = arg;
    zt_dequant8(c->v, c->q + lo, c->scales + lo / c->block, hi - lo, c->block,
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
    zt_threadpool_run(pool, n, chunk_elems(block), quant_chunk, &c);
}

void zt_dequant8_parallel(zt_threadpool *pool, zt_quant_variant v, const int8_t *q,
                          const float *scales, int64_t n, int block, void *out, zt_dtype dt)
{
    if (!pool) {
        zt_dequant8(v, q, scales, n, block, out, dt);
        return;
    }
    quant_ctx c = {v, NULL, out, dt, block, (int8_t *)q, (float *)scales};
    zt_threadpool_run(pool, n, chunk_elems(block), dequant_chunk, &c);
}

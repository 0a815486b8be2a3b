/* SPDX-License-Identifier: MIT */
/* Deterministic parameter initialisation. Each element's value is a pure function of
 * (seed, parameter name, element index) through a counter-based generator, so a rank can
 * initialise just its shard and every world size and placement starts from the same values. */
#include "runtime/runtime.h"

#include <math.h>
#include <string.h>

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Uniform in (0, 1): never 0, so log() below is finite. */
static double uniform01(uint64_t key, uint64_t i)
{
    return ((double)(mix64(key ^ mix64(i)) >> 11) + 0.5) * 0x1.0p-53;
}

zt_status zt_param_init_fill(const zt_param *p, int64_t first, int64_t count, float *dst,
                             zt_error *err)
{
    const zt_init *in = &p->init;
    uint64_t key = mix64(in->seed) ^ name_hash(p->name);
    switch (in->kind) {
    case ZT_INIT_ZEROS:
        for (int64_t i = 0; i < count; i++)
            dst[i] = 0.0f;
        break;
    case ZT_INIT_CONSTANT:
        for (int64_t i = 0; i < count; i++)
            dst[i] = in->a;
        break;
    case ZT_INIT_UNIFORM:
        for (int64_t i = 0; i < count; i++)
            dst[i] = (float)(in->a + (in->b - in->a) * uniform01(key, (uint64_t)(first + i)));
        break;
    case ZT_INIT_NORMAL:
        for (int64_t i = 0; i < count; i++) {
            uint64_t k = 2 * (uint64_t)(first + i);
            double r = sqrt(-2.0 * log(uniform01(key, k)));
            double z = r * cos(2.0 * M_PI * uniform01(key, k + 1));
            dst[i] = (float)(in->a + in->b * z);
        }
        break;
    case ZT_INIT_COPY:
        memcpy(dst, (const float *)in->user + first, (size_t)count * sizeof(float));
        break;
    case ZT_INIT_CALLBACK: {
        zt_status st = in->fn(in->user, p->name, first, count, dst);
        if (st != ZT_OK)
            return ZT_ERR(err, st,
                          "parameter '%s': its init callback failed (%s) for elements [%lld, "
                          "%lld)",
                          p->name, zt_status_string(st), (long long)first,
                          (long long)(first + count));
        break;
    }
    }
    return ZT_OK;
}

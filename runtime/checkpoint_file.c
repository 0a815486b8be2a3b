/* SPDX-License-Identifier: MIT */
/* A rank's shard file's header (checkpoint_file.h). */
#include "runtime/checkpoint_file.h"

#include <string.h>

#define HEADER_V1_BYTES 32

size_t zt_ckpt_header_bytes(int version)
{
    return version == 1 ? HEADER_V1_BYTES : sizeof(zt_shard_header);
}

zt_status zt_ckpt_read_header(FILE *f, const char *path, int version, int rank, int world,
                              int n_layers, zt_shard_header *h, zt_error *err)
{
    memset(h, 0, sizeof *h);
    if (fread(h, zt_ckpt_header_bytes(version), 1, f) != 1 ||
        memcmp(h->magic, version == 1 ? ZT_CKPT_MAGIC_V1 : ZT_CKPT_MAGIC, 8) != 0 ||
        h->rank != (uint32_t)rank || h->world != (uint32_t)world ||
        h->n_layers != (uint32_t)n_layers)
        return ZT_ERR(err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' has a damaged header or belongs to another rank "
                      "(it should be rank %d's of %d)",
                      path, rank, world);
    return ZT_OK;
}

zt_status zt_ckpt_cross_check(const zt_shard_header *h, const zt_manifest *m, const char *path,
                              zt_error *err)
{
    const zt_ckpt_state *s = &m->state;
    if (h->step != (uint64_t)s->step)
        return ZT_ERR(err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' holds step %llu, its manifest says \"step\": %lld: "
                      "one of them was changed; load another checkpoint",
                      path, (unsigned long long)h->step, (long long)s->step);
    const char *field = m->version == 1                            ? NULL
                        : h->loss_scale != s->loss_scale           ? "loss_scale"
                        : h->good_steps != s->good_steps           ? "good_steps"
                        : h->hysteresis_left != s->hysteresis_left ? "hysteresis_left"
                        : h->fp16 != s->fp16                       ? "fp16"
                                                                   : NULL;
    if (!field)
        return ZT_OK;
    return ZT_ERR(err, ZT_ERR_CORRUPT,
                  "checkpoint file '%s' and its manifest disagree on \"%s\": one of them was "
                  "changed; load another checkpoint",
                  path, field);
}

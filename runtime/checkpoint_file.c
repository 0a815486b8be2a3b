/* SPDX-License-Identifier: MIT */
/* A rank's shard file's header (checkpoint_file.h). */
#include "runtime/checkpoint_file.h"
#include "runtime/checkpoint_reader.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#define HEADER_V1_BYTES 32

size_t zt_ckpt_header_bytes(int version)
{
    return version == 1 ? HEADER_V1_BYTES : sizeof(zt_shard_header);
}

static zt_status read_header(FILE *f, const char *path, int version, int rank, int world,
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

static zt_status cross_check(const zt_shard_header *h, const zt_manifest *m, const char *path,
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

size_t zt_ckpt_fread(void *dst, size_t bytes, FILE *f)
{
    size_t done = 0;
    while (done < bytes) {
        size_t want = bytes - done < ((size_t)8 << 20) ? bytes - done : (size_t)8 << 20;
        size_t n = fread((char *)dst + done, 1, want, f);
        done += n;
        if (n < want)
            break;
    }
    return done;
}

uint64_t zt_ckpt_file_bytes(const zt_runtime *rt, const zt_manifest *m)
{
    uint64_t n = zt_ckpt_header_bytes(m->version);
    for (int i = 0; i < rt->reg.n_layers; i++)
        n += 3 * (uint64_t)(m->shard ? m->shard[i] : rt->reg.layers[i].shard_numel) * sizeof(float);
    return n;
}

zt_status zt_ckpt_verify_file(zt_runtime *rt, FILE *f, const char *path, const zt_manifest *m,
                              int k)
{
    uint64_t want = zt_ckpt_file_bytes(rt, m), said = (uint64_t)m->files[2 * k];
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || (uint64_t)sb.st_size != said || said != want)
        return ZT_ERR(&rt->err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' has %lld bytes, the manifest says %llu and the "
                      "model needs %llu: the file is truncated or from another save",
                      path, (long long)sb.st_size, (unsigned long long)said,
                      (unsigned long long)want);
    uint64_t size = 0;
    uint32_t crc = 0;
    zt_status rs = zt_ckpt_file_crc(path, rt->cfg.io_engine, &size, &crc, &rt->err);
    if (rs != ZT_OK)
        return rs;
    if (crc != (uint32_t)m->files[2 * k + 1])
        return ZT_ERR(&rt->err, ZT_ERR_CORRUPT,
                      "checkpoint file '%s' is damaged (CRC-32 %08lx, the manifest says %08lx)",
                      path, (unsigned long)crc, (unsigned long)m->files[2 * k + 1]);
    rewind(f);
    zt_shard_header h;
    zt_status st = read_header(f, path, m->version, k, m->world, rt->reg.n_layers, &h, &rt->err);
    return st == ZT_OK ? cross_check(&h, m, path, &rt->err) : st;
}

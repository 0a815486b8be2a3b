/* SPDX-License-Identifier: MIT */
/* DeepSpeed's batch rules (deepspeed/runtime/config.py, 0.19.8). */
#include "runtime/config_batch.h"
#include "runtime/config_auto.h"
#include "core/log.h"

#include <stddef.h>
#include <stdint.h>

/* gradient_accumulation_steps given a value ("auto" with none since is DeepSpeed's absent:
 * the HF integration fills it from the trainer, or leaves it to the batch sizes). */
static int accumulation_given(const zt_config *cfg)
{
    return cfg->accumulation_given &&
           !zt_config_still_auto(cfg, offsetof(zt_config, gradient_accumulation_steps));
}

zt_status zt_config_batch_sizes(const zt_config *cfg, int world, zt_batch_sizes *out, zt_error *err)
{
    int64_t tb = cfg->train_batch_size, mb = cfg->train_micro_batch_size_per_gpu;
    int64_t acc = accumulation_given(cfg) ? cfg->gradient_accumulation_steps : 0, w = world;
    int has_tb = tb > 0, has_mb = mb > 0, has_acc = acc > 0;
    out->train_batch = (int)tb;
    out->micro_batch = (int)mb;
    out->accumulation = has_acc ? (int)acc : 1;
    if (!has_tb && !has_mb)
        return ZT_OK; /* DeepSpeed refuses this; ztier needs no batch size */
    if (has_tb && has_mb && !has_acc)
        acc = tb / mb / w;
    else if (has_tb && has_acc && !has_mb)
        mb = tb / w / acc;
    else if (has_mb && has_acc && !has_tb)
        tb = mb * acc * w;
    else if (has_tb && !has_mb) /* and no accumulation */
        acc = 1, mb = tb / w;
    else if (!has_tb) /* the micro batch alone */
        acc = 1, tb = mb * w;
    if (mb < 1 || acc < 1 || tb != mb * acc * w)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "train_batch_size %lld%s, train_micro_batch_size_per_gpu %lld%s and "
                      "gradient_accumulation_steps %lld%s do not fit %d data-parallel rank%s: "
                      "DeepSpeed requires each to be at least 1 and train_batch_size = micro "
                      "batch x accumulation x ranks (%lld x %lld x %d = %lld); change one of "
                      "them, or leave one out to have it derived from the others",
                      (long long)tb, has_tb ? "" : " (derived)", (long long)mb,
                      has_mb ? "" : " (derived)", (long long)acc, has_acc ? "" : " (derived)",
                      world, world == 1 ? "" : "s", (long long)mb, (long long)acc, world,
                      (long long)(mb * acc * w));
    out->train_batch = (int)tb;
    out->micro_batch = (int)mb;
    out->accumulation = (int)acc;
    return ZT_OK;
}

zt_status zt_config_apply_batch(zt_config *cfg, int world, zt_error *err)
{
    zt_batch_sizes b;
    zt_status st = zt_config_batch_sizes(cfg, world, &b, err);
    if (st != ZT_OK)
        return st;
    if (b.train_batch > 0 && !accumulation_given(cfg)) {
        zt_config_forget_auto(cfg, offsetof(zt_config, gradient_accumulation_steps));
        ZT_LOGI("config",
                "gradient_accumulation_steps = %d, derived as DeepSpeed does from "
                "train_batch_size %d / (train_micro_batch_size_per_gpu %d x %d ranks)",
                b.accumulation, b.train_batch, b.micro_batch, world);
    }
    cfg->gradient_accumulation_steps = b.accumulation;
    return ZT_OK;
}

/* SPDX-License-Identifier: MIT */
/* DeepSpeed's learning-rate schedules (deepspeed/runtime/lr_schedules.py, 0.19.8): the same
 * formulas in double precision, as functions of the applied optimizer steps. */
#include "optimizer/lr_schedule.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define W (1u << ZT_LR_WARMUP)
#define D (1u << ZT_LR_WARMUP_DECAY)
#define C (1u << ZT_LR_WARMUP_COSINE)
#define O (1u << ZT_LR_ONE_CYCLE)

/* Each parameter and the schedules that take it (DeepSpeed's constructors' arguments). */
static const struct {
    const char *name;
    unsigned types;
} params[ZT_LR_PARAMS] = {
    {"warmup_min_lr", W | D},
    {"warmup_max_lr", W | D},
    {"warmup_num_steps", W | D | C},
    {"warmup_type", W | D | C},
    {"total_num_steps", D | C},
    {"warmup_min_ratio", C},
    {"cos_min_ratio", C},
    {"cycle_min_lr", O},
    {"cycle_max_lr", O},
    {"decay_lr_rate", O},
    {"cycle_first_step_size", O},
    {"cycle_second_step_size", O},
    {"cycle_first_stair_count", O},
    {"cycle_second_stair_count", O},
    {"decay_step_size", O},
    {"cycle_momentum", O},
    {"cycle_min_mom", O},
    {"cycle_max_mom", O},
    {"decay_mom_rate", O},
};

static const char *const names[ZT_LR_KINDS] = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
                                               "OneCycle"};

void zt_lr_schedule_defaults(zt_lr_schedule *s)
{
    memset(s, 0, sizeof *s);
    s->type = ZT_LR_CONSTANT;
    s->warmup_max_lr = 0.001f;
    s->warmup_num_steps = 1000;
    s->warmup_type = ZT_WARMUP_LOG;
    s->cos_min_ratio = 0.0001f;
    s->cycle_first_step_size = 2000;
    s->cycle_second_step_size = -1; /* DeepSpeed's None: = cycle_first_step_size */
    s->cycle_second_stair_count = -1;
    s->cycle_momentum = 1;
    s->cycle_min_mom = 0.8f;
    s->cycle_max_mom = 0.9f;
}

const char *zt_lr_schedule_name(int type)
{
    return type >= 0 && type < ZT_LR_KINDS ? names[type] : "";
}

int zt_lr_schedule_param(const char *name)
{
    for (int i = 0; i < ZT_LR_PARAMS; i++)
        if (strcmp(params[i].name, name) == 0)
            return i;
    return -1;
}

const char *zt_lr_schedule_param_name(int index)
{
    return index >= 0 && index < ZT_LR_PARAMS ? params[index].name : "";
}

int zt_lr_schedule_takes(int type, int index)
{
    return type >= 0 && type < ZT_LR_KINDS && index >= 0 && index < ZT_LR_PARAMS &&
           (params[index].types >> type & 1u);
}

void zt_lr_schedule_param_list(int type, char *buf, unsigned len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 0; i < ZT_LR_PARAMS && used < len; i++)
        if (zt_lr_schedule_takes(type, i)) {
            int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", params[i].name);
            used += n > 0 ? (size_t)n : 0;
        }
}

/* The warmup's fraction at last_batch_iteration `it` (0 <= it < warmup steps). */
static double warmup_gamma(const zt_lr_schedule *s, double it, double steps)
{
    if (s->warmup_type == ZT_WARMUP_LINEAR)
        return it / steps;
    return log(it + 1.0) / log(steps);
}

static double warmup_lr(const zt_lr_schedule *s, int64_t it)
{
    double steps = (double)(s->warmup_num_steps > 2 ? s->warmup_num_steps : 2);
    double gamma = 1.0;
    if (it < 0) /* the lr DeepSpeed's constructor sets: min_lr */
        gamma = 0.0;
    else if ((double)it < steps)
        gamma = warmup_gamma(s, (double)it, steps);
    else if (s->type == ZT_LR_WARMUP_DECAY) {
        double left = (double)s->total_num_steps - (double)it;
        double span = (double)s->total_num_steps - steps;
        gamma = fmax(0.0, left / fmax(1.0, span));
    }
    return (double)s->warmup_min_lr + ((double)s->warmup_max_lr - (double)s->warmup_min_lr) * gamma;
}

static double cosine_ratio(const zt_lr_schedule *s, int64_t it)
{
    double steps = (double)(s->warmup_num_steps > 2 ? s->warmup_num_steps : 2);
    double min_ratio = (double)s->warmup_min_ratio, cos_min = (double)s->cos_min_ratio;
    if (it < 0) /* DeepSpeed's constructor sets lr 0 */
        return 0.0;
    if ((double)it < steps)
        return min_ratio + warmup_gamma(s, (double)it, steps) * (1.0 - min_ratio);
    /* the cosine's progress stops at 1: from total_num_steps on (and right after the warmup
     * when total_num_steps <= warmup_num_steps) the lr stays at cos_min_ratio */
    double last = (double)it - steps + 1.0, total = fmax(1.0, (double)s->total_num_steps - steps);
    double ratio = (1.0 + cos(3.14159265358979323846 * fmin(1.0, last / total))) / 2.0;
    return fmax(0.0, cos_min + (1.0 - cos_min) * ratio);
}

static double second_step_size(const zt_lr_schedule *s)
{
    return (double)(s->cycle_second_step_size >= 0 ? s->cycle_second_step_size
                                                   : s->cycle_first_step_size);
}

static double cycle_total(const zt_lr_schedule *s)
{
    return (double)s->cycle_first_step_size + second_step_size(s);
}

/* OneCycle's position in the cycle, 0 at the bottom to 1 at the top (DeepSpeed's
 * _get_scale_factor): continuous, or in stairs counted from the integer offset in the cycle. */
static double cycle_scale(const zt_lr_schedule *s, int64_t it)
{
    double first = (double)s->cycle_first_step_size, second = second_step_size(s);
    double total = first + second, ratio = first / total;
    double bi = (double)it + 1.0;
    double x = 1.0 + bi / total - floor(1.0 + bi / total), scale;
    int64_t stairs;
    if (x <= ratio) {
        scale = x / ratio;
        stairs = s->cycle_first_stair_count;
    } else {
        scale = (x - 1.0) / (ratio - 1.0);
        stairs = s->cycle_second_stair_count >= 0 ? s->cycle_second_stair_count
                                                  : s->cycle_first_stair_count;
    }
    if (stairs <= 0)
        return scale;
    double in_cycle = fmod(bi, total), n = (double)stairs;
    double position = in_cycle <= first ? in_cycle * n / first : (total - in_cycle) * n / second;
    return floor(position) / n;
}

static double one_cycle_lr(const zt_lr_schedule *s, int64_t it)
{
    double lo = (double)s->cycle_min_lr, hi = (double)s->cycle_max_lr;
    if (it < 0) /* the constructor sets cycle_min_lr */
        return lo;
    if ((double)it < cycle_total(s))
        return lo + (hi - lo) * cycle_scale(s, it);
    if (s->decay_step_size == 0 || s->decay_lr_rate == 0.0f)
        return lo;
    double interval = ((double)it - cycle_total(s) + 1.0) / (double)s->decay_step_size;
    return lo / (1.0 + (double)s->decay_lr_rate * interval);
}

double zt_lr_schedule_lr(const zt_lr_schedule *s, int64_t done, double base_lr)
{
    int64_t it = done - 1; /* DeepSpeed's last_batch_iteration */
    switch (s->type) {
    case ZT_LR_WARMUP:
    case ZT_LR_WARMUP_DECAY:
        return warmup_lr(s, it);
    case ZT_LR_WARMUP_COSINE:
        return base_lr * cosine_ratio(s, it);
    case ZT_LR_ONE_CYCLE:
        return one_cycle_lr(s, it);
    default:
        return base_lr;
    }
}

int zt_lr_schedule_betas(const zt_lr_schedule *s, int64_t done, double *beta1, double *beta2)
{
    if (s->type != ZT_LR_ONE_CYCLE || !s->cycle_momentum)
        return 0;
    int64_t it = done - 1;
    double lo = (double)s->cycle_min_mom, hi = (double)s->cycle_max_mom;
    *beta2 = 0.99; /* DeepSpeed's OneCycle writes (momentum, 0.99) into the betas */
    if (it < 0)
        *beta1 = lo; /* the constructor sets cycle_min_mom */
    else if ((double)it < cycle_total(s))
        *beta1 = hi - (hi - lo) * cycle_scale(s, it);
    else if (s->decay_step_size == 0 || s->decay_mom_rate == 0.0f)
        *beta1 = hi;
    else
        *beta1 = hi * (1.0 + (double)s->decay_mom_rate * ((double)it - cycle_total(s) + 1.0) /
                                 (double)s->decay_step_size);
    return 1;
}

/* SPDX-License-Identifier: MIT */
#include "prefetch/schedule.h"

int64_t zt_sched_live(const zt_sched_layer *layers, int n)
{
    int64_t live = 0;
    for (int i = 0; i < n; i++)
        if (layers[i].gathered && !layers[i].persistent)
            live += layers[i].numel;
    return live;
}

static int chosen(const int *out, int count, int id)
{
    for (int i = 0; i < count; i++)
        if (out[i] == id)
            return 1;
    return 0;
}

/* The window holds at most `bucket` elements ahead of the fetch (the first layer always
 * goes) and never lets the gathered elements exceed max_live. */
int zt_sched_window(const zt_sched_limits *lim, const zt_layer_order *t,
                    const zt_sched_layer *layers, int n, int current, int *out, int max)
{
    int64_t live = zt_sched_live(layers, n), ahead = 0;
    int count = 0;
    if (lim->bucket <= 0)
        return 0;
    for (int k = 0; k < ZT_SCHED_LOOKAHEAD && count < max; k++) {
        zt_layer_order_entry e;
        if (!zt_layer_order_peek(t, k, &e))
            break;
        const zt_sched_layer *L = &layers[e.layer];
        if (e.layer == current || L->ready)
            continue;
        if (ahead > 0 && ahead + L->numel > lim->bucket)
            break;
        if (!L->gathered && !chosen(out, count, e.layer)) {
            if (live + L->numel > lim->max_live)
                break;
            live += L->numel;
        }
        ahead += L->numel;
        out[count++] = e.layer;
    }
    return count;
}

int zt_sched_keep(const zt_sched_limits *lim, const zt_layer_order *t, const zt_sched_layer *layers,
                  int n, int self)
{
    if (zt_sched_live(layers, n) > lim->max_live)
        return 0;
    int64_t distance = 0;
    for (int k = 0; k < ZT_SCHED_LOOKAHEAD; k++) {
        zt_layer_order_entry e;
        if (!zt_layer_order_peek(t, k, &e))
            return 0;
        if (e.layer == self)
            return distance <= lim->reuse_distance;
        distance += layers[e.layer].numel;
    }
    return 0;
}

/* Position of the next use of layer `id` in the trace, or a large number if none. */
static int next_use(const zt_layer_order *t, int id)
{
    for (int k = 0; k < ZT_SCHED_LOOKAHEAD; k++) {
        zt_layer_order_entry e;
        if (!zt_layer_order_peek(t, k, &e))
            break;
        if (e.layer == id)
            return k;
    }
    return 1 << 30;
}

int zt_sched_victim(const zt_layer_order *t, const zt_sched_layer *layers, int n)
{
    int victim = -1, furthest = -1;
    for (int i = 0; i < n; i++) {
        const zt_sched_layer *L = &layers[i];
        if (L->held || !L->gathered || L->persistent)
            continue;
        int k = next_use(t, i);
        if (k > furthest)
            victim = i, furthest = k;
    }
    return victim;
}

/* SPDX-License-Identifier: MIT */
#include "prefetch/layer_order.h"

#include <stdlib.h>

static int append(zt_layer_order_entry **arr, int *n, int *cap, int layer, zt_pass pass)
{
    if (*n == *cap) {
        int ncap = *cap ? *cap * 2 : 64;
        zt_layer_order_entry *p = realloc(*arr, sizeof *p * (size_t)ncap);
        if (!p)
            return -1;
        *arr = p;
        *cap = ncap;
    }
    (*arr)[(*n)++] = (zt_layer_order_entry){layer, pass};
    return 0;
}

int zt_layer_order_observe(zt_layer_order *t, int layer, zt_pass pass)
{
    if (append(&t->next, &t->next_n, &t->next_cap, layer, pass) != 0)
        return -1;
    if (!t->valid || t->deviated)
        return 0;
    if (t->pos < t->n && t->entries[t->pos].layer == layer && t->entries[t->pos].pass == pass) {
        t->pos++;
        return 1;
    }
    t->deviated = 1;
    t->deviations++;
    return 0;
}

int zt_layer_order_peek(const zt_layer_order *t, int k, zt_layer_order_entry *out)
{
    if (!t->valid || t->deviated || t->pos + k >= t->n || k < 0)
        return 0;
    *out = t->entries[t->pos + k];
    return 1;
}

void zt_layer_order_end_step(zt_layer_order *t)
{
    if (t->next_n > 0) {
        zt_layer_order_entry *e = t->entries;
        int cap = t->cap;
        t->entries = t->next;
        t->cap = t->next_cap;
        t->n = t->next_n;
        t->next = e;
        t->next_cap = cap;
        t->valid = 1;
    }
    t->next_n = 0;
    t->pos = 0;
    t->deviated = 0;
}

void zt_layer_order_free(zt_layer_order *t)
{
    free(t->entries);
    free(t->next);
    t->entries = t->next = NULL;
    t->n = t->next_n = t->cap = t->next_cap = 0;
}

/* SPDX-License-Identifier: MIT */
/* The layer-order trace: the first step records the sequence of fetch calls; later steps
 * check each call against it. A deviation is reported once and the step is re-recorded, so
 * a changed order costs prefetch accuracy, never correctness. */
#ifndef ZT_PREFETCH_LAYER_ORDER_H
#define ZT_PREFETCH_LAYER_ORDER_H

#include "ztier.h"

typedef struct zt_layer_order_entry {
    int layer;
    zt_pass pass;
} zt_layer_order_entry;

typedef struct zt_layer_order {
    zt_layer_order_entry *entries; /* the recorded step */
    int n, cap;
    zt_layer_order_entry *next; /* the step being recorded */
    int next_n, next_cap;
    int pos;      /* index of the next expected fetch in entries */
    int valid;    /* entries hold a complete step */
    int deviated; /* this step left the recorded order */
    long deviations;
} zt_layer_order;

/* Returns 1 if (layer, pass) is the expected next fetch, 0 on a deviation (or when no
 * trace is valid yet); records it for the next step either way. -1: out of memory. */
int zt_layer_order_observe(zt_layer_order *t, int layer, zt_pass pass);

/* The k-th expected fetch after the current position (k = 0: the next one); 0 if none. */
int zt_layer_order_peek(const zt_layer_order *t, int k, zt_layer_order_entry *out);

/* Ends a step: the step just recorded becomes the trace. */
void zt_layer_order_end_step(zt_layer_order *t);

void zt_layer_order_free(zt_layer_order *t);

#endif

/* The layer-order trace: the first step records the sequence of fetch calls; later steps
 * check each call against it. A deviation is reported once and the step is re-recorded, so
 * a changed order costs prefetch accuracy, never correctness. */
#ifndef ZT_PREFETCH_TRACE_H
#define ZT_PREFETCH_TRACE_H

#include "ztier.h"

typedef struct zt_trace_entry {
    int layer;
    zt_pass pass;
} zt_trace_entry;

typedef struct zt_trace {
    zt_trace_entry *entries; /* the recorded step */
    int n, cap;
    zt_trace_entry *next; /* the step being recorded */
    int next_n, next_cap;
    int pos;       /* index of the next expected fetch in entries */
    int valid;     /* entries hold a complete step */
    int deviated;  /* this step left the recorded order */
    long deviations;
} zt_trace;

/* Returns 1 if (layer, pass) is the expected next fetch, 0 on a deviation (or when no
 * trace is valid yet); records it for the next step either way. -1: out of memory. */
int zt_trace_observe(zt_trace *t, int layer, zt_pass pass);

/* The k-th expected fetch after the current position (k = 0: the next one); 0 if none. */
int zt_trace_peek(const zt_trace *t, int k, zt_trace_entry *out);

/* Ends a step: the step just recorded becomes the trace. */
void zt_trace_end_step(zt_trace *t);

void zt_trace_free(zt_trace *t);

#endif

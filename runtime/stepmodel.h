/* SPDX-License-Identifier: MIT */
/* A discrete-event model of one training step (`ztier plan`): tasks on resources (the compute
 * stream, host->device and device->host copies, the NVMe queue, the CPU optimizer threads, the
 * network), each with a duration from the machine profile and the tasks it waits for. Every
 * resource serves its tasks one at a time in the order they were added, as a stream or a queue
 * does; a task starts when its resource is free and the tasks it waits for have ended. The run
 * gives the step's time, each resource's busy time, the compute stream's stall and the chain of
 * tasks that set the end (the critical path). */
#ifndef ZT_RUNTIME_STEPMODEL_H
#define ZT_RUNTIME_STEPMODEL_H

#include <stddef.h>

typedef enum zt_sm_res {
    ZT_SM_COMPUTE,
    ZT_SM_H2D,
    ZT_SM_D2H,
    ZT_SM_NVME,
    ZT_SM_CPU_OPT,
    ZT_SM_NET,
    ZT_SM_NVME_WRITE, /* NVMe writes: a queue of their own beside the reads (ZT_SM_NVME), as
                         the device serves both directions at once */
    ZT_SM_NRES
} zt_sm_res;

#define ZT_SM_DEPS 5
#define ZT_SM_WHAT 48

typedef struct zt_sm_task {
    zt_sm_res res;
    double seconds;
    int dep[ZT_SM_DEPS];   /* earlier tasks this one waits for; -1: none */
    char what[ZT_SM_WHAT]; /* "NVMe read of layer 7" */
    /* set by zt_sm_run */
    double start, end;
    int bound_by; /* the task whose end set start (the resource's previous task or a dep); -1:
                     it started at 0 */
} zt_sm_task;

typedef struct zt_stepmodel {
    zt_sm_task *task;
    int n, cap;
} zt_stepmodel;

typedef struct zt_sm_result {
    double step;             /* the last task's end */
    double busy[ZT_SM_NRES]; /* seconds each resource worked */
    double stall;            /* step - busy[ZT_SM_COMPUTE]: the compute stream waiting */
    int last;                /* the task that ends last (-1: no tasks) */
} zt_sm_result;

/* Adds a task on `res` lasting `seconds` (>= 0) that waits for the tasks in deps (up to
 * ZT_SM_DEPS indices of tasks added before it, -1 for none). Returns its index; -1 when out of
 * memory or a dep is not an earlier task. */
int zt_sm_add(zt_stepmodel *m, zt_sm_res res, double seconds, const int *deps, int ndeps,
              const char *what);

/* Schedules the tasks (start, end, bound_by) and sums the result. */
void zt_sm_run(zt_stepmodel *m, zt_sm_result *r);

/* The critical path in words, from its first task that ends after `from` (0: the start): runs of consecutive tasks on one resource, e.g.
 * "h2d: fetch of layer 0 .. fetch of layer 3 (1.20 s) -> compute: backward of layer 3 (0.10 s)".
 * Writes at most len bytes (NUL-terminated). */
void zt_sm_critical(const zt_stepmodel *m, const zt_sm_result *r, double from, char *buf,
                    size_t len);

/* The critical path in words: which resource's time makes most of it, and each other
 * resource with 2% or more of it, from which of its tasks to which, and the first compute task
 * it holds up, e.g. "compute bounds the step: 1.7 s of the 2.58 s critical path; NVMe
 * transfers (0.8 s, NVMe read of h.0 .. NVMe read of h.11) hold up the compute from forward
 * of h.0 on". Writes at most len bytes (NUL-terminated). */
void zt_sm_bound(const zt_stepmodel *m, const zt_sm_result *r, double from, char *buf, size_t len);

const char *zt_sm_res_name(zt_sm_res res);
void zt_sm_free(zt_stepmodel *m);

#endif

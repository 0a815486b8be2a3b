/* SPDX-License-Identifier: MIT */
/* Device backend interface: memory, asynchronous copies on streams, events, and the few
 * kernels the runtime needs. A backend is a static table of function pointers; the runtime
 * keeps all policy and calls backends only through this table.
 *
 * Ordering: operations queued on one stream run in order. An event recorded on a stream
 * completes when every operation queued on that stream before the record has completed.
 * stream_wait_event makes later operations on a stream wait for the event. Optional slots
 * may be NULL; callers then use the synchronous path. Every slot returns ZT_OK or an error
 * filled into err. */
#ifndef ZT_RUNTIME_DEVICE_H
#define ZT_RUNTIME_DEVICE_H

/* The device scratch sumsq_async takes: two doubles per partial sum, at most 4096 of them. */
#define ZT_SUMSQ_SCRATCH_DOUBLES 8192

#include "core/export.h"
#include "core/adam_elem.h"
#include "core/error.h"
#include "core/threadpool.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zt_device zt_device;
typedef struct zt_stream zt_stream;
typedef struct zt_event zt_event;

typedef enum zt_copy_kind { ZT_COPY_H2D, ZT_COPY_D2H, ZT_COPY_D2D, ZT_COPY_H2H } zt_copy_kind;

typedef struct zt_device_config {
    uint64_t capacity_bytes;    /* host backend: the "HBM" budget; cuda: 0 = all free memory */
    int device_index;           /* cuda: which GPU; -1: chosen (see local_rank) */
    int copy_threads;           /* host backend: worker threads per stream (>= 1) */
    zt_threadpool *cpu_pool;    /* host backend: its quantization kernels run over this pool
                                (the runtime's optimizer pool, which must outlive the
                                device's streams); NULL: on the stream's worker alone */
    int local_rank, local_size; /* cuda, device_index -1: with several ranks on this machine
                                   GPU local_rank (each its own), else the calling thread's
                                   current device */
} zt_device_config;

typedef struct zt_device_iface {
    const char *name;
    zt_status (*create)(const zt_device_config *cfg, zt_device **out, zt_error *err);
    void (*destroy)(zt_device *dev);

    /* device memory, counted against the capacity */
    zt_status (*alloc)(zt_device *dev, size_t bytes, void **ptr, zt_error *err);
    void (*free)(zt_device *dev, void *ptr);
    /* pinned host memory; host_register may be NULL (plain memory is already usable) */
    zt_status (*host_alloc)(zt_device *dev, size_t bytes, void **ptr, zt_error *err);
    void (*host_free)(zt_device *dev, void *ptr);
    zt_status (*host_register)(zt_device *dev, void *ptr, size_t bytes, zt_error *err);
    void (*host_unregister)(zt_device *dev, void *ptr, size_t bytes);

    zt_status (*stream_create)(zt_device *dev, zt_stream **out, zt_error *err);
    void (*stream_destroy)(zt_device *dev, zt_stream *s);
    zt_status (*stream_synchronize)(zt_device *dev, zt_stream *s, zt_error *err);

    zt_status (*event_create)(zt_device *dev, zt_event **out, zt_error *err);
    void (*event_destroy)(zt_device *dev, zt_event *e);
    zt_status (*event_record)(zt_device *dev, zt_event *e, zt_stream *s, zt_error *err);
    zt_status (*stream_wait_event)(zt_device *dev, zt_stream *s, zt_event *e, zt_error *err);
    /* 1 when complete, 0 when pending, < 0 on error */
    int (*event_query)(zt_device *dev, zt_event *e);
    zt_status (*event_synchronize)(zt_device *dev, zt_event *e, zt_error *err);

    zt_status (*memcpy_async)(zt_device *dev, void *dst, const void *src, size_t bytes,
                              zt_copy_kind kind, zt_stream *s, zt_error *err);
    zt_status (*memset_async)(zt_device *dev, void *dst, int value, size_t bytes, zt_stream *s,
                              zt_error *err);
    /* dst[i] = (dst_type)(src[i]) for n elements, both in device memory */
    zt_status (*cast_async)(zt_device *dev, void *dst, zt_dtype dst_type, const void *src,
                            zt_dtype src_type, size_t n, zt_stream *s, zt_error *err);
    /* x[i] *= alpha for n elements in device memory */
    zt_status (*scale_async)(zt_device *dev, void *x, zt_dtype type, float alpha, size_t n,
                             zt_stream *s, zt_error *err);
    /* Runs fn(arg) on the host once the work queued on s before it is done; later work on s
     * waits for it. fn must not call the backend (cuda: cudaLaunchHostFunc's rule). */
    zt_status (*launch_host_fn)(zt_device *dev, zt_stream *s, void (*fn)(void *), void *arg,
                                zt_error *err);

    /* The optimizer on the device (ztier.device_optimizer), all in device memory: */
    /* acc[i] += (float)src[i] for n elements (fp32 accumulation of gradients) */
    zt_status (*accumulate_async)(zt_device *dev, float *acc, const void *src, zt_dtype src_type,
                                  size_t n, zt_stream *s, zt_error *err);
    /* out[0] += sum of (x[i] * scale)^2 over the finite products, in double; out[1] += the
     * count of non-finite ones. out: two doubles. scratch: ZT_SUMSQ_SCRATCH_DOUBLES doubles
     * of device memory for partial sums, combined in a fixed order (the same bits every
     * run); calls that share a scratch must be ordered (one stream). */
    zt_status (*sumsq_async)(zt_device *dev, const float *x, size_t n, float scale, double *out,
                             double *scratch, zt_stream *s, zt_error *err);
    /* The fused Adam/AdamW step (core/adam_elem.h) over n elements; param_out (or NULL)
     * receives the master rounded to param_type; *nonfinite += the non-finite gradients. */
    zt_status (*adam_async)(zt_device *dev, const zt_adam_consts *c, float *master, float *m,
                            float *v, const float *grad, void *param_out, zt_dtype param_type,
                            size_t n, unsigned long long *nonfinite, zt_stream *s, zt_error *err);

    /* ZeRO++ block quantization in device memory, with the definition and bits of
     * core/quant.h (core/quant_elem.h): int8 of fp32/bf16/fp16 values (qwZ) ... */
    zt_status (*quant8_async)(zt_device *dev, const void *x, zt_dtype type, size_t n, int block,
                              int8_t *q, float *scales, zt_stream *s, zt_error *err);
    zt_status (*dequant8_async)(zt_device *dev, const int8_t *q, const float *scales, size_t n,
                                int block, void *out, zt_dtype type, zt_stream *s, zt_error *err);
    /* ... and int4 of fp32 gradients (qgZ): q holds (n + 1) / 2 bytes; acc += the values */
    zt_status (*quant4_async)(zt_device *dev, const float *x, size_t n, int block, uint8_t *q,
                              float *scales, zt_stream *s, zt_error *err);
    zt_status (*dequant4_add_async)(zt_device *dev, const uint8_t *q, const float *scales, size_t n,
                                    int block, float *acc, zt_stream *s, zt_error *err);

    /* Timing device work. event_create_timed: an event event_elapsed can read (the others
     * skip the timestamp: cuda creates them with cudaEventDisableTiming); it orders work as
     * any event. event_elapsed: the seconds from `start` completing to `end` completing on the
     * device (cuda: cudaEventElapsedTime; host: the wall clock at which each stream reached
     * the record), both recorded and complete (ZT_ERR_USAGE naming which is not). Optional:
     * NULL where a backend cannot time its work (the runtime then uses the host's clock). */
    zt_status (*event_create_timed)(zt_device *dev, zt_event **out, zt_error *err);
    zt_status (*event_elapsed)(zt_device *dev, zt_event *start, zt_event *end, double *seconds,
                               zt_error *err);
} zt_device_iface;

/* Every device backend instance starts with this header so generic code can reach its table
 * and counters. */
struct zt_device {
    const zt_device_iface *iface;
    int index; /* the GPU (cuda), -1 (host) */
    uint64_t capacity;
    uint64_t bytes_in_use;
    uint64_t bytes_peak;
    /* the memory the backend held at most, in use or cached for reuse (the host backend's
     * count, for tests; 0 where the backend does not know) */
    uint64_t bytes_held_peak;
    pthread_mutex_t budget_lock; /* guards the three counters */
    /* the GPU's PCI address as its driver writes it ("0000:3B:00.0"), from which its NUMA
     * node is read (core/numa.h); "" where there is none (host) or the driver did not say */
    char pci_bus_id[32];
};

/* The backend's slots, one wrapper each: callers never reach into the table. The optional
 * ones (host_register, host_unregister) fall back to what their absence means. */
static inline void zt_device_destroy(zt_device *dev) { dev->iface->destroy(dev); }
static inline zt_status zt_device_alloc(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    return dev->iface->alloc(dev, bytes, ptr, err);
}
static inline void zt_device_free(zt_device *dev, void *ptr) { dev->iface->free(dev, ptr); }
static inline zt_status zt_device_host_alloc(zt_device *dev, size_t bytes, void **ptr,
                                             zt_error *err)
{
    return dev->iface->host_alloc(dev, bytes, ptr, err);
}
static inline void zt_device_host_free(zt_device *dev, void *ptr)
{
    dev->iface->host_free(dev, ptr);
}
static inline zt_status zt_device_host_register(zt_device *dev, void *ptr, size_t bytes,
                                                zt_error *err)
{
    if (!dev->iface->host_register)
        return ZT_OK; /* plain memory is already usable */
    return dev->iface->host_register(dev, ptr, bytes, err);
}
static inline void zt_device_host_unregister(zt_device *dev, void *ptr, size_t bytes)
{
    if (!dev->iface->host_unregister)
        return;
    dev->iface->host_unregister(dev, ptr, bytes);
}
static inline zt_status zt_device_stream_create(zt_device *dev, zt_stream **out, zt_error *err)
{
    return dev->iface->stream_create(dev, out, err);
}
static inline void zt_device_stream_destroy(zt_device *dev, zt_stream *s)
{
    dev->iface->stream_destroy(dev, s);
}
static inline zt_status zt_device_stream_synchronize(zt_device *dev, zt_stream *s, zt_error *err)
{
    return dev->iface->stream_synchronize(dev, s, err);
}
static inline zt_status zt_device_event_create(zt_device *dev, zt_event **out, zt_error *err)
{
    return dev->iface->event_create(dev, out, err);
}
static inline void zt_device_event_destroy(zt_device *dev, zt_event *e)
{
    dev->iface->event_destroy(dev, e);
}
static inline zt_status zt_device_event_record(zt_device *dev, zt_event *e, zt_stream *s,
                                               zt_error *err)
{
    return dev->iface->event_record(dev, e, s, err);
}
static inline zt_status zt_device_stream_wait_event(zt_device *dev, zt_stream *s, zt_event *e,
                                                    zt_error *err)
{
    return dev->iface->stream_wait_event(dev, s, e, err);
}
static inline int zt_device_event_query(zt_device *dev, zt_event *e)
{
    return dev->iface->event_query(dev, e);
}
static inline zt_status zt_device_event_synchronize(zt_device *dev, zt_event *e, zt_error *err)
{
    return dev->iface->event_synchronize(dev, e, err);
}
/* 0 when the backend cannot time its work (event_create_timed left NULL) */
static inline int zt_device_can_time(const zt_device *dev)
{
    return dev->iface->event_create_timed && dev->iface->event_elapsed;
}
static inline zt_status zt_device_event_create_timed(zt_device *dev, zt_event **out, zt_error *err)
{
    return dev->iface->event_create_timed(dev, out, err);
}
static inline zt_status zt_device_event_elapsed(zt_device *dev, zt_event *start, zt_event *end,
                                                double *seconds, zt_error *err)
{
    return dev->iface->event_elapsed(dev, start, end, seconds, err);
}
static inline zt_status zt_device_memcpy_async(zt_device *dev, void *dst, const void *src,
                                               size_t bytes, zt_copy_kind kind, zt_stream *s,
                                               zt_error *err)
{
    return dev->iface->memcpy_async(dev, dst, src, bytes, kind, s, err);
}
static inline zt_status zt_device_memset_async(zt_device *dev, void *dst, int value, size_t bytes,
                                               zt_stream *s, zt_error *err)
{
    return dev->iface->memset_async(dev, dst, value, bytes, s, err);
}
static inline zt_status zt_device_cast_async(zt_device *dev, void *dst, zt_dtype dst_type,
                                             const void *src, zt_dtype src_type, size_t n,
                                             zt_stream *s, zt_error *err)
{
    return dev->iface->cast_async(dev, dst, dst_type, src, src_type, n, s, err);
}
static inline zt_status zt_device_scale_async(zt_device *dev, void *x, zt_dtype type, float alpha,
                                              size_t n, zt_stream *s, zt_error *err)
{
    return dev->iface->scale_async(dev, x, type, alpha, n, s, err);
}
static inline zt_status zt_device_launch_host_fn(zt_device *dev, zt_stream *s, void (*fn)(void *),
                                                 void *arg, zt_error *err)
{
    return dev->iface->launch_host_fn(dev, s, fn, arg, err);
}
static inline zt_status zt_device_accumulate_async(zt_device *dev, float *acc, const void *src,
                                                   zt_dtype src_type, size_t n, zt_stream *s,
                                                   zt_error *err)
{
    return dev->iface->accumulate_async(dev, acc, src, src_type, n, s, err);
}
static inline zt_status zt_device_sumsq_async(zt_device *dev, const float *x, size_t n, float scale,
                                              double *out, double *scratch, zt_stream *s,
                                              zt_error *err)
{
    return dev->iface->sumsq_async(dev, x, n, scale, out, scratch, s, err);
}
static inline zt_status zt_device_adam_async(zt_device *dev, const zt_adam_consts *c, float *master,
                                             float *m, float *v, const float *grad, void *param_out,
                                             zt_dtype param_type, size_t n,
                                             unsigned long long *nonfinite, zt_stream *s,
                                             zt_error *err)
{
    return dev->iface->adam_async(dev, c, master, m, v, grad, param_out, param_type, n, nonfinite,
                                  s, err);
}
static inline zt_status zt_device_quant8_async(zt_device *dev, const void *x, zt_dtype type,
                                               size_t n, int block, int8_t *q, float *scales,
                                               zt_stream *s, zt_error *err)
{
    return dev->iface->quant8_async(dev, x, type, n, block, q, scales, s, err);
}
static inline zt_status zt_device_dequant8_async(zt_device *dev, const int8_t *q,
                                                 const float *scales, size_t n, int block,
                                                 void *out, zt_dtype type, zt_stream *s,
                                                 zt_error *err)
{
    return dev->iface->dequant8_async(dev, q, scales, n, block, out, type, s, err);
}
static inline zt_status zt_device_quant4_async(zt_device *dev, const float *x, size_t n, int block,
                                               uint8_t *q, float *scales, zt_stream *s,
                                               zt_error *err)
{
    return dev->iface->quant4_async(dev, x, n, block, q, scales, s, err);
}
static inline zt_status zt_device_dequant4_add_async(zt_device *dev, const uint8_t *q,
                                                     const float *scales, size_t n, int block,
                                                     float *acc, zt_stream *s, zt_error *err)
{
    return dev->iface->dequant4_add_async(dev, q, scales, n, block, acc, s, err);
}

/* 1 when the backend pins host memory (host_register); without it plain memory is used. */
static inline int zt_device_can_pin(const zt_device *dev)
{
    return dev->iface->host_register != NULL;
}

/* Sets up the common header of a backend instance (and tears it down). */
ZT_MODULE_API void zt_device_base_init(zt_device *dev, const zt_device_iface *iface,
                                       uint64_t capacity);
ZT_MODULE_API void zt_device_base_fini(zt_device *dev);

/* Counts bytes against the capacity, or returns ZT_ERR_DEVICE_NOMEM naming the request, the
 * use and the fix. Thread-safe. Every backend's alloc goes through it. */
ZT_MODULE_API zt_status zt_device_budget_take(zt_device *dev, size_t bytes, zt_error *err);
ZT_MODULE_API void zt_device_budget_return(zt_device *dev, size_t bytes);

extern const zt_device_iface zt_device_host;
#ifdef ZT_HAVE_CUDA
extern const zt_device_iface zt_device_cuda;
#endif

/* Finds a backend by name ("host", "cuda"); NULL with an error naming the built ones. */
const zt_device_iface *zt_device_find(const char *name, zt_error *err);

/* Shorthand for a synchronous copy: queue on s and wait for it. */
zt_status zt_device_copy_sync(zt_device *dev, void *dst, const void *src, size_t bytes,
                              zt_copy_kind kind, zt_stream *s, zt_error *err);

#endif

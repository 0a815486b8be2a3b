/* The `cuda` device backend: device memory from CUDA's stream-ordered pool (cudaMallocAsync
 * on a dedicated allocation stream, synchronised so a returned pointer is usable on any
 * stream) counted against a byte capacity, pinned host memory (cudaHostAlloc,
 * cudaHostRegister), non-blocking streams, timing-free events and the kernels in
 * cuda_kernels.cu. Every CUDA error becomes ZT_ERR_DEVICE naming the call.
 *
 * Compiled and linked wherever the CUDA toolkit is present; this project's machines have no
 * GPU, so it has not run here (its test skips). */
#include "runtime/device/cuda_kernels.h"
#include "runtime/device/device.h"
#include "runtime/log.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct cuda_device {
    zt_device base;
    int index;
    cudaStream_t alloc_stream;
    pthread_mutex_t lock;
} cuda_device;

/* Size header kept on the host for each allocation (pointer -> bytes). */
typedef struct cuda_alloc {
    void *ptr;
    size_t bytes;
    struct cuda_alloc *next;
} cuda_alloc;

static cuda_alloc *g_allocs; /* guarded by the device lock; one list per process is enough */

static zt_status check(cudaError_t r, const char *call, zt_error *err)
{
    if (r == cudaSuccess)
        return ZT_OK;
    return ZT_ERR(err, r == cudaErrorMemoryAllocation ? ZT_ERR_DEVICE_NOMEM : ZT_ERR_DEVICE,
                  "%s failed: %s", call, cudaGetErrorString(r));
}

static zt_status cuda_create(const zt_device_config *cfg, zt_device **out, zt_error *err)
{
    int count = 0;
    cudaError_t r = cudaGetDeviceCount(&count);
    if (r != cudaSuccess || count == 0)
        return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                      "cuda device backend: no usable GPU (%s); use ztier.device_backend \"host\"",
                      r != cudaSuccess ? cudaGetErrorString(r) : "no devices");
    if (cfg->device_index < 0 || cfg->device_index >= count)
        return ZT_ERR(err, ZT_ERR_CONFIG, "cuda device %d requested, %d present",
                      cfg->device_index, count);
    cuda_device *d = calloc(1, sizeof *d);
    if (!d)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of memory creating the cuda backend");
    zt_device_base_init(&d->base, &zt_device_cuda, 0);
    d->index = cfg->device_index;
    pthread_mutex_init(&d->lock, NULL);
    size_t free_b = 0, total_b = 0;
    zt_status st = check(cudaSetDevice(d->index), "cudaSetDevice", err);
    if (st == ZT_OK)
        st = check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", err);
    if (st == ZT_OK)
        st = check(cudaStreamCreateWithFlags(&d->alloc_stream, cudaStreamNonBlocking),
                   "cudaStreamCreate", err);
    if (st != ZT_OK) {
        free(d);
        return st;
    }
    d->base.capacity = cfg->capacity_bytes && cfg->capacity_bytes < free_b ? cfg->capacity_bytes
                                                                           : free_b;
    ZT_LOGI("device", "cuda device %d: %zu of %zu bytes free, budget %llu", d->index, free_b,
            total_b, (unsigned long long)d->base.capacity);
    *out = &d->base;
    return ZT_OK;
}

static void cuda_destroy(zt_device *dev)
{
    cuda_device *d = (cuda_device *)dev;
    cudaStreamDestroy(d->alloc_stream);
    pthread_mutex_destroy(&d->lock);
    zt_device_base_fini(dev);
    free(d);
}

static zt_status cuda_alloc_mem(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    cuda_device *d = (cuda_device *)dev;
    cuda_alloc *rec = malloc(sizeof *rec);
    if (!rec)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of host memory tracking a device allocation");
    zt_status st = zt_device_budget_take(dev, bytes, err);
    if (st != ZT_OK) {
        free(rec);
        return st;
    }
    st = check(cudaMallocAsync(ptr, bytes ? bytes : 1, d->alloc_stream), "cudaMallocAsync", err);
    if (st == ZT_OK)
        st = check(cudaStreamSynchronize(d->alloc_stream), "cudaStreamSynchronize", err);
    if (st != ZT_OK) {
        zt_device_budget_return(dev, bytes);
        free(rec);
        return st;
    }
    pthread_mutex_lock(&d->lock);
    *rec = (cuda_alloc){*ptr, bytes, g_allocs};
    g_allocs = rec;
    pthread_mutex_unlock(&d->lock);
    return ZT_OK;
}

static void cuda_free_mem(zt_device *dev, void *ptr)
{
    if (!ptr)
        return;
    cuda_device *d = (cuda_device *)dev;
    size_t bytes = 0;
    pthread_mutex_lock(&d->lock);
    for (cuda_alloc **p = &g_allocs; *p; p = &(*p)->next)
        if ((*p)->ptr == ptr) {
            cuda_alloc *rec = *p;
            *p = rec->next;
            bytes = rec->bytes;
            free(rec);
            break;
        }
    pthread_mutex_unlock(&d->lock);
    zt_device_budget_return(dev, bytes);
    /* Other streams may still use it: wait for the device, then return it to the pool. */
    cudaDeviceSynchronize();
    cudaFreeAsync(ptr, d->alloc_stream);
}

static zt_status cuda_host_alloc(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    (void)dev;
    return check(cudaHostAlloc(ptr, bytes ? bytes : 1, cudaHostAllocPortable), "cudaHostAlloc",
                 err);
}

static void cuda_host_free(zt_device *dev, void *ptr)
{
    (void)dev;
    cudaFreeHost(ptr);
}

static zt_status cuda_host_register(zt_device *dev, void *ptr, size_t bytes, zt_error *err)
{
    (void)dev;
    return check(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable), "cudaHostRegister", err);
}

static void cuda_host_unregister(zt_device *dev, void *ptr)
{
    (void)dev;
    cudaHostUnregister(ptr);
}

static zt_status cuda_stream_create(zt_device *dev, zt_stream **out, zt_error *err)
{
    (void)dev;
    cudaStream_t s;
    zt_status st = check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate",
                         err);
    *out = st == ZT_OK ? (zt_stream *)s : NULL;
    return st;
}

static void cuda_stream_destroy(zt_device *dev, zt_stream *s)
{
    (void)dev;
    if (s)
        cudaStreamDestroy((cudaStream_t)s);
}

static zt_status cuda_stream_synchronize(zt_device *dev, zt_stream *s, zt_error *err)
{
    (void)dev;
    return check(cudaStreamSynchronize((cudaStream_t)s), "cudaStreamSynchronize", err);
}

static zt_status cuda_event_create(zt_device *dev, zt_event **out, zt_error *err)
{
    (void)dev;
    cudaEvent_t e;
    zt_status st = check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate",
                         err);
    *out = st == ZT_OK ? (zt_event *)e : NULL;
    return st;
}

static void cuda_event_destroy(zt_device *dev, zt_event *e)
{
    (void)dev;
    if (e)
        cudaEventDestroy((cudaEvent_t)e);
}

static zt_status cuda_event_record(zt_device *dev, zt_event *e, zt_stream *s, zt_error *err)
{
    (void)dev;
    return check(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s), "cudaEventRecord", err);
}

static zt_status cuda_stream_wait_event(zt_device *dev, zt_stream *s, zt_event *e, zt_error *err)
{
    (void)dev;
    return check(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0), "cudaStreamWaitEvent",
                 err);
}

static int cuda_event_query(zt_device *dev, zt_event *e)
{
    (void)dev;
    cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    return r == cudaSuccess ? 1 : r == cudaErrorNotReady ? 0 : -1;
}

static zt_status cuda_event_synchronize(zt_device *dev, zt_event *e, zt_error *err)
{
    (void)dev;
    return check(cudaEventSynchronize((cudaEvent_t)e), "cudaEventSynchronize", err);
}

static zt_status cuda_memcpy_async(zt_device *dev, void *dst, const void *src, size_t bytes,
                                   zt_copy_kind kind, zt_stream *s, zt_error *err)
{
    (void)dev;
    static const enum cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                                cudaMemcpyDeviceToDevice, cudaMemcpyHostToHost};
    return check(cudaMemcpyAsync(dst, src, bytes, kinds[kind], (cudaStream_t)s),
                 "cudaMemcpyAsync", err);
}

static zt_status cuda_memset_async(zt_device *dev, void *dst, int value, size_t bytes,
                                   zt_stream *s, zt_error *err)
{
    (void)dev;
    return check(cudaMemsetAsync(dst, value, bytes, (cudaStream_t)s), "cudaMemsetAsync", err);
}

static zt_status cuda_cast_async(zt_device *dev, void *dst, zt_dtype dst_type, const void *src,
                                 zt_dtype src_type, size_t n, zt_stream *s, zt_error *err)
{
    (void)dev;
    return check((cudaError_t)zt_cuda_cast(dst, dst_type, src, src_type, n, s), "cast kernel",
                 err);
}

static zt_status cuda_scale_async(zt_device *dev, void *x, zt_dtype type, float alpha, size_t n,
                                  zt_stream *s, zt_error *err)
{
    (void)dev;
    return check((cudaError_t)zt_cuda_scale(x, type, alpha, n, s), "scale kernel", err);
}

const zt_device_iface zt_device_cuda = {
    /* .name = */ "cuda",
    /* .create = */ cuda_create,
    /* .destroy = */ cuda_destroy,
    /* .alloc = */ cuda_alloc_mem,
    /* .free = */ cuda_free_mem,
    /* .host_alloc = */ cuda_host_alloc,
    /* .host_free = */ cuda_host_free,
    /* .host_register = */ cuda_host_register,
    /* .host_unregister = */ cuda_host_unregister,
    /* .stream_create = */ cuda_stream_create,
    /* .stream_destroy = */ cuda_stream_destroy,
    /* .stream_synchronize = */ cuda_stream_synchronize,
    /* .event_create = */ cuda_event_create,
    /* .event_destroy = */ cuda_event_destroy,
    /* .event_record = */ cuda_event_record,
    /* .stream_wait_event = */ cuda_stream_wait_event,
    /* .event_query = */ cuda_event_query,
    /* .event_synchronize = */ cuda_event_synchronize,
    /* .memcpy_async = */ cuda_memcpy_async,
    /* .memset_async = */ cuda_memset_async,
    /* .cast_async = */ cuda_cast_async,
    /* .scale_async = */ cuda_scale_async,
};

/* SPDX-License-Identifier: MIT */
/* The `cuda` device backend, on the CUDA runtime API.
 *
 * Device memory: a private stream-ordered pool per backend instance (cudaMemPoolCreate on the
 * chosen GPU, release threshold = the byte budget, so freed blocks stay cached for the next
 * layer instead of going back to the driver at every synchronisation). The private pool
 * leaves the trainer's own use of the device's default pool alone. alloc() takes the bytes
 * from the shared budget (device.c), allocates on a dedicated allocation stream and waits
 * for it, so the pointer is usable on any stream as soon as alloc() returns. Devices without
 * memory-pool support fall back to cudaMalloc/cudaFree. A per-device hash table maps each
 * pointer to its size so free() can return the bytes to the budget.
 *
 * free() releases at once, with no device-wide synchronisation: the runtime frees a buffer
 * only after every stream that used it has passed its last use (the device tier's fence
 * waits for the caller's stream at zt_release_async; the blocking zt_release requires the
 * caller's work on the layer to be complete), so the pool may hand the memory out again.
 *
 * Pinned host memory: cudaHostAlloc / cudaHostRegister, both portable (usable from every
 * context). Streams are non-blocking (no implicit ordering with the legacy default stream);
 * events have timing disabled. A zt_stream * is a cudaStream_t and a zt_event * a
 * cudaEvent_t. Copies between pageable host memory and the device are legal but
 * synchronous in practice; the runtime copies from pinned or registered buffers.
 *
 * The GPU: ztier.device_index; unset, with several ranks on the machine, the rank's local
 * index (one GPU per rank: more ranks than GPUs is an error, as NCCL would refuse two ranks
 * on one GPU); unset with one rank, the caller's current device at create. Every call makes
 * it current for its duration and then gives the calling thread its own current device
 * back. Every CUDA error becomes ZT_ERR_DEVICE naming the call and cudaGetErrorString,
 * except that out-of-memory is ZT_ERR_DEVICE_NOMEM for device memory (so the prefetcher
 * evicts and retries) and ZT_ERR_NOMEM for pinned host memory.
 *
 * The thread's CUDA error state (cudaGetLastError) is the caller's: an error the caller had
 * pending when a call came in is still pending when it returns (unless this call failed too:
 * CUDA keeps one), and an error only this backend caused is cleared before it returns (it
 * is reported through the zt_status).
 *
 * The budget: ztier.hbm_capacity; unset, the free memory less a reserve for the caller's
 * own allocations (activations, workspace): an eighth of the GPU, at least 1 GiB, at most
 * half of what is free. The pool caches freed blocks up to the budget, so the reserve is
 * what the caller can count on.
 *
 * It runs in CI on cudasim, the CPU stand-in (ZT_CUDA_FAKE, docs/cudasim.md); on a GPU when
 * one is lent (scripts/gpu-check.sh). */
#include "core/module.h"
#include "device/cuda_kernels.h"
#include "device/device.h"
#include "core/log.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct cuda_alloc {
    void *ptr;
    size_t bytes;
    struct cuda_alloc *next;
} cuda_alloc;

typedef struct cuda_device {
    zt_device base;
    int index;
    cudaMemPool_t pool; /* NULL: no memory-pool support, plain cudaMalloc */
    cudaStream_t alloc_stream;
    pthread_mutex_t lock; /* guards the allocation table */
    cuda_alloc **buckets;
    size_t nbuckets, count;
} cuda_device;

static cuda_device *as_cuda(zt_device *dev) { return (cuda_device *)dev; }

static zt_status fail(const cuda_device *d, zt_status s, cudaError_t r, const char *call,
                      zt_error *err)
{
    return ZT_ERR(err, s, "cuda device %d: %s failed: %s (%s)", d->index, call,
                  cudaGetErrorString(r), cudaGetErrorName(r));
}

static zt_status check(const cuda_device *d, cudaError_t r, const char *call, zt_error *err)
{
    return r == cudaSuccess ? ZT_OK : fail(d, ZT_ERR_DEVICE, r, call, err);
}

/* For the slots that return nothing: the error can only be logged. */
static void check_log(const cuda_device *d, cudaError_t r, const char *call)
{
    zt_error e;
    if (r != cudaSuccess) {
        fail(d, ZT_ERR_DEVICE, r, call, &e);
        ZT_LOGE("device", "%s", e.msg);
    }
}

static zt_status use(const cuda_device *d, zt_error *err)
{
    return check(d, cudaSetDevice(d->index), "cudaSetDevice", err);
}

/* ---- pointer -> size table -------------------------------------------------------------- */

static size_t bucket_of(const void *ptr, size_t nbuckets)
{
    uint64_t h = (uint64_t)(uintptr_t)ptr >> 8; /* allocations are 256-byte aligned at least */
    h *= 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (nbuckets - 1);
}

/* Inserts rec; grows the table (a power of two) to keep chains short. Caller holds lock.
 * -1 when there is no table at all and none can be made. */
static int table_insert(cuda_device *d, cuda_alloc *rec)
{
    if (d->count >= d->nbuckets) {
        size_t n = d->nbuckets ? d->nbuckets * 2 : 64;
        cuda_alloc **b = calloc(n, sizeof *b);
        if (b) { /* on failure keep the old table: longer chains, still correct */
            for (size_t i = 0; i < d->nbuckets; i++)
                for (cuda_alloc *r = d->buckets[i], *next; r; r = next) {
                    next = r->next;
                    size_t k = bucket_of(r->ptr, n);
                    r->next = b[k];
                    b[k] = r;
                }
            free(d->buckets);
            d->buckets = b;
            d->nbuckets = n;
        }
    }
    if (!d->nbuckets)
        return -1;
    size_t k = bucket_of(rec->ptr, d->nbuckets);
    rec->next = d->buckets[k];
    d->buckets[k] = rec;
    d->count++;
    return 0;
}

/* Removes and returns the record of ptr, NULL if ptr is unknown. Caller holds lock. */
static cuda_alloc *table_remove(cuda_device *d, const void *ptr)
{
    if (!d->nbuckets)
        return NULL;
    for (cuda_alloc **p = &d->buckets[bucket_of(ptr, d->nbuckets)]; *p; p = &(*p)->next)
        if ((*p)->ptr == ptr) {
            cuda_alloc *rec = *p;
            *p = rec->next;
            d->count--;
            return rec;
        }
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------------------------- */

static zt_status create_pool(cuda_device *d, zt_error *err)
{
    int supported = 0;
    zt_status st =
        check(d, cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, d->index),
              "cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)", err);
    if (st != ZT_OK || !supported) {
        if (st == ZT_OK)
            ZT_LOGI("device", "cuda device %d has no memory pools: plain cudaMalloc/cudaFree",
                    d->index);
        return st;
    }
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = d->index;
    st = check(d, cudaMemPoolCreate(&d->pool, &props), "cudaMemPoolCreate", err);
    if (st != ZT_OK) {
        d->pool = NULL;
        return st;
    }
    uint64_t keep = d->base.capacity; /* cache up to the budget; never trim it back */
    return check(d, cudaMemPoolSetAttribute(d->pool, cudaMemPoolAttrReleaseThreshold, &keep),
                 "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)", err);
}

static void cuda_destroy(zt_device *dev);

/* The GPU's PCI address, for the NUMA node it hangs off (core/numa.h). Without it the
 * runtime only loses the automatic placement, so a refusal is logged, not an error. */
static void read_pci_bus_id(cuda_device *d)
{
    cudaError_t r =
        cudaDeviceGetPCIBusId(d->base.pci_bus_id, (int)sizeof d->base.pci_bus_id, d->index);
    if (r != cudaSuccess) {
        d->base.pci_bus_id[0] = '\0';
        ZT_LOGI("device", "cuda device %d: no PCI bus id (%s): its NUMA node is not known",
                d->index, cudaGetErrorString(r));
    }
}

/* ztier.hbm_capacity unset: what is free less a reserve for the caller (see the top). */
static uint64_t default_budget(const cuda_device *d, size_t free_b, size_t total_b)
{
    uint64_t reserve = total_b / 8 > (1ull << 30) ? total_b / 8 : 1ull << 30;
    if (reserve > free_b / 2)
        reserve = free_b / 2;
    ZT_LOGI("device",
            "cuda device %d: ztier.hbm_capacity unset: a budget of %llu of the %zu bytes free, "
            "%llu left for the caller's own allocations (set ztier.hbm_capacity to choose)",
            d->index, (unsigned long long)(free_b - reserve), free_b, (unsigned long long)reserve);
    return free_b - reserve;
}

static zt_status cuda_create(const zt_device_config *cfg, zt_device **out, zt_error *err)
{
    *out = NULL;
    int count = 0;
    cudaError_t r = cudaGetDeviceCount(&count);
    if (r != cudaSuccess || count == 0) {
        return ZT_ERR(err, ZT_ERR_UNSUPPORTED,
                      "cuda device backend: no usable GPU (%s); use ztier.device_backend "
                      "\"host\" on machines without one",
                      r != cudaSuccess ? cudaGetErrorString(r)
                                       : "cudaGetDeviceCount found 0 devices");
    }
    int index = cfg->device_index;
    if (index < 0 && cfg->local_size > 1) {
        if (cfg->local_size > count)
            return ZT_ERR(err, ZT_ERR_CONFIG,
                          "cuda device backend: %d ranks run on this machine but it has %d "
                          "GPU%s: each rank needs a GPU of its own (NCCL refuses two ranks on "
                          "one); launch at most %d ranks per machine, or set "
                          "ztier.device_index per rank",
                          cfg->local_size, count, count == 1 ? "" : "s", count);
        index = cfg->local_rank;
    }
    if (index < 0 && (r = cudaGetDevice(&index)) != cudaSuccess)
        return ZT_ERR(err, ZT_ERR_DEVICE, "cuda device backend: cudaGetDevice failed: %s",
                      cudaGetErrorString(r));
    if (index >= count)
        return ZT_ERR(err, ZT_ERR_CONFIG,
                      "cuda device backend: ztier.device_index %d requested, %d present (0..%d)",
                      index, count, count - 1);
    cuda_device *d = calloc(1, sizeof *d);
    if (!d)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of host memory creating the cuda backend");
    d->index = index;
    zt_device_base_init(&d->base, &zt_device_cuda, 0);
    d->base.index = index;
    pthread_mutex_init(&d->lock, NULL);

    size_t free_b = 0, total_b = 0;
    zt_status st = use(d, err);
    if (st == ZT_OK)
        st = check(d, cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo", err);
    if (st == ZT_OK) {
        uint64_t cap =
            cfg->capacity_bytes ? cfg->capacity_bytes : default_budget(d, free_b, total_b);
        if (cap > free_b) {
            ZT_LOGW("device",
                    "cuda device %d: budget of %llu bytes asked, only %zu free: using %zu",
                    d->index, (unsigned long long)cap, free_b, free_b);
            cap = free_b;
        }
        d->base.capacity = cap;
        st = check(d, cudaStreamCreateWithFlags(&d->alloc_stream, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags", err);
    }
    if (st == ZT_OK)
        st = create_pool(d, err);
    if (st == ZT_OK)
        read_pci_bus_id(d);
    if (st != ZT_OK) {
        cuda_destroy(&d->base);
        return st;
    }
    ZT_LOGI("device", "cuda device %d: %zu of %zu bytes free, budget %llu bytes, %s", d->index,
            free_b, total_b, (unsigned long long)d->base.capacity,
            d->pool ? "stream-ordered pool" : "cudaMalloc");
    *out = &d->base;
    return ZT_OK;
}

static void release_mem(cuda_device *d, void *ptr)
{
    if (d->pool) {
        check_log(d, cudaFreeAsync(ptr, d->alloc_stream), "cudaFreeAsync");
        check_log(d, cudaStreamSynchronize(d->alloc_stream), "cudaStreamSynchronize");
    } else {
        check_log(d, cudaFree(ptr), "cudaFree");
    }
}

/* Also the cleanup of a failed create: every field may still be empty. */
static void cuda_destroy(zt_device *dev)
{
    if (!dev)
        return;
    cuda_device *d = as_cuda(dev);
    zt_error e;
    if (use(d, &e) != ZT_OK)
        ZT_LOGE("device", "%s", e.msg);
    if (d->count) {
        ZT_LOGW("device", "cuda device %d destroyed with %zu allocations (%llu bytes) not freed",
                d->index, d->count, (unsigned long long)d->base.bytes_in_use);
        check_log(d, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        for (size_t i = 0; i < d->nbuckets; i++)
            for (cuda_alloc *r = d->buckets[i], *next; r; r = next) {
                next = r->next;
                release_mem(d, r->ptr);
                free(r);
            }
    }
    free(d->buckets);
    if (d->pool)
        check_log(d, cudaMemPoolDestroy(d->pool), "cudaMemPoolDestroy");
    if (d->alloc_stream)
        check_log(d, cudaStreamDestroy(d->alloc_stream), "cudaStreamDestroy");
    pthread_mutex_destroy(&d->lock);
    zt_device_base_fini(&d->base);
    free(d);
}

/* ---- memory ----------------------------------------------------------------------------- */

static zt_status cuda_alloc_mem(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    *ptr = NULL;
    zt_status st = use(d, err);
    if (st != ZT_OK)
        return st;
    cuda_alloc *rec = malloc(sizeof *rec);
    if (!rec)
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of host memory tracking a device allocation");
    st = zt_device_budget_take(dev, bytes, err);
    if (st != ZT_OK) {
        free(rec);
        return st;
    }
    void *p = NULL;
    const char *call = d->pool ? "cudaMallocFromPoolAsync" : "cudaMalloc";
    cudaError_t r = d->pool
                        ? cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, d->pool, d->alloc_stream)
                        : cudaMalloc(&p, bytes ? bytes : 1);
    if (r == cudaErrorMemoryAllocation && d->pool) {
        /* the pool keeps freed memory cached (its release threshold is the budget): memory
         * of other sizes may be held there unused; give it back and try once more */
        r = cudaMemPoolTrimTo(d->pool, 0);
        if (r == cudaSuccess)
            r = cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, d->pool, d->alloc_stream);
    }
    if (r == cudaSuccess && d->pool) { /* usable on any stream once the allocation is done */
        call = "cudaStreamSynchronize (allocation stream)";
        r = cudaStreamSynchronize(d->alloc_stream);
        if (r != cudaSuccess)
            (void)cudaFreeAsync(p, d->alloc_stream); /* not handed out: not leaked either */
    }
    if (r != cudaSuccess) {
        zt_device_budget_return(dev, bytes);
        free(rec);
        if (r != cudaErrorMemoryAllocation)
            return fail(d, ZT_ERR_DEVICE, r, call, err);
        pthread_mutex_lock(&dev->budget_lock);
        unsigned long long in_use = dev->bytes_in_use;
        pthread_mutex_unlock(&dev->budget_lock);
        return ZT_ERR(err, ZT_ERR_DEVICE_NOMEM,
                      "cuda device %d: %zu bytes requested, %llu in use of a %llu-byte "
                      "budget, but %s failed: %s; other allocations on the GPU hold the rest "
                      "(lower ztier.hbm_capacity or offload more)",
                      d->index, bytes, in_use, (unsigned long long)dev->capacity, call,
                      cudaGetErrorString(r));
    }
    rec->ptr = p;
    rec->bytes = bytes;
    pthread_mutex_lock(&d->lock);
    int inserted = table_insert(d, rec);
    pthread_mutex_unlock(&d->lock);
    if (inserted != 0) {
        if (d->pool)
            (void)cudaFreeAsync(p, d->alloc_stream);
        else
            (void)cudaFree(p);
        zt_device_budget_return(dev, bytes);
        free(rec);
        return ZT_ERR(err, ZT_ERR_NOMEM, "out of host memory tracking a device allocation");
    }
    *ptr = p;
    return ZT_OK;
}

static void cuda_free_mem(zt_device *dev, void *ptr)
{
    if (!ptr)
        return;
    cuda_device *d = as_cuda(dev);
    pthread_mutex_lock(&d->lock);
    cuda_alloc *rec = table_remove(d, ptr);
    pthread_mutex_unlock(&d->lock);
    if (!rec) {
        ZT_LOGE("device",
                "cuda device %d: free of %p, which this device did not allocate "
                "(ignored)",
                d->index, ptr);
        return;
    }
    zt_error e;
    if (use(d, &e) != ZT_OK)
        ZT_LOGE("device", "%s", e.msg);
    release_mem(d, ptr); /* every stream is past its last use (see the top of the file) */
    zt_device_budget_return(dev, rec->bytes);
    free(rec);
}

static zt_status cuda_host_alloc(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    *ptr = NULL;
    zt_status st = use(d, err);
    if (st != ZT_OK)
        return st;
    cudaError_t r = cudaHostAlloc(ptr, bytes ? bytes : 1, cudaHostAllocPortable);
    if (r == cudaSuccess)
        return ZT_OK;
    *ptr = NULL;
    st = fail(d, r == cudaErrorMemoryAllocation ? ZT_ERR_NOMEM : ZT_ERR_DEVICE, r, "cudaHostAlloc",
              err);
    zt_error_prefix(err, "pinning %zu bytes of host memory: ", bytes);
    return st;
}

static void cuda_host_free(zt_device *dev, void *ptr)
{
    cuda_device *d = as_cuda(dev);
    if (ptr)
        check_log(d, cudaFreeHost(ptr), "cudaFreeHost");
}

static zt_status cuda_host_register(zt_device *dev, void *ptr, size_t bytes, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    zt_status st = use(d, err);
    if (st != ZT_OK)
        return st;
    cudaError_t r = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
    if (r == cudaSuccess)
        return ZT_OK;
    st = fail(d, r == cudaErrorMemoryAllocation ? ZT_ERR_NOMEM : ZT_ERR_DEVICE, r,
              "cudaHostRegister", err);
    zt_error_prefix(err, "registering %zu bytes of host memory at %p: ", bytes, ptr);
    return st;
}

static void cuda_host_unregister(zt_device *dev, void *ptr, size_t bytes)
{
    (void)bytes;
    cuda_device *d = as_cuda(dev);
    if (ptr)
        check_log(d, cudaHostUnregister(ptr), "cudaHostUnregister");
}

/* ---- streams and events ----------------------------------------------------------------- */

static zt_status cuda_stream_create(zt_device *dev, zt_stream **out, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    cudaStream_t s = NULL;
    *out = NULL;
    zt_status st = use(d, err);
    if (st == ZT_OK)
        st = check(d, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags", err);
    if (st == ZT_OK)
        *out = (zt_stream *)s;
    return st;
}

static void cuda_stream_destroy(zt_device *dev, zt_stream *s)
{
    cuda_device *d = as_cuda(dev);
    if (!s)
        return;
    zt_error e;
    if (use(d, &e) != ZT_OK)
        ZT_LOGE("device", "%s", e.msg);
    /* Returns at once; queued work still completes before the stream goes away. */
    check_log(d, cudaStreamDestroy((cudaStream_t)s), "cudaStreamDestroy");
}

static zt_status cuda_stream_synchronize(zt_device *dev, zt_stream *s, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    zt_status st = use(d, err);
    return st != ZT_OK
               ? st
               : check(d, cudaStreamSynchronize((cudaStream_t)s), "cudaStreamSynchronize", err);
}

/* flags: cudaEventDisableTiming for the events that only order work (cheaper to record
 * and wait for), cudaEventDefault for the timed ones. */
static zt_status event_create_flags(zt_device *dev, unsigned flags, zt_event **out, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    cudaEvent_t e = NULL;
    *out = NULL;
    zt_status st = use(d, err);
    if (st == ZT_OK)
        st = check(d, cudaEventCreateWithFlags(&e, flags), "cudaEventCreateWithFlags", err);
    if (st == ZT_OK)
        *out = (zt_event *)e;
    return st;
}

static zt_status cuda_event_create(zt_device *dev, zt_event **out, zt_error *err)
{
    return event_create_flags(dev, cudaEventDisableTiming, out, err);
}

static zt_status cuda_event_create_timed(zt_device *dev, zt_event **out, zt_error *err)
{
    return event_create_flags(dev, cudaEventDefault, out, err);
}

static zt_status cuda_event_elapsed(zt_device *dev, zt_event *start, zt_event *end, double *seconds,
                                    zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    float ms = 0;
    zt_status st = use(d, err);
    if (st == ZT_OK)
        st = check(d, cudaEventElapsedTime(&ms, (cudaEvent_t)start, (cudaEvent_t)end),
                   "cudaEventElapsedTime", err);
    if (st == ZT_OK)
        *seconds = (double)ms / 1e3;
    return st;
}

static void cuda_event_destroy(zt_device *dev, zt_event *e)
{
    cuda_device *d = as_cuda(dev);
    if (!e)
        return;
    zt_error er;
    if (use(d, &er) != ZT_OK)
        ZT_LOGE("device", "%s", er.msg);
    check_log(d, cudaEventDestroy((cudaEvent_t)e), "cudaEventDestroy");
}

static zt_status cuda_event_record(zt_device *dev, zt_event *e, zt_stream *s, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    zt_status st = use(d, err);
    return st != ZT_OK
               ? st
               : check(d, cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s), "cudaEventRecord", err);
}

static zt_status cuda_stream_wait_event(zt_device *dev, zt_stream *s, zt_event *e, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : check(d, cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0),
                               "cudaStreamWaitEvent", err);
}

static int cuda_event_query(zt_device *dev, zt_event *e)
{
    cuda_device *d = as_cuda(dev);
    zt_error er;
    if (use(d, &er) != ZT_OK) {
        ZT_LOGE("device", "%s", er.msg);
        return -1;
    }
    cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    if (r == cudaSuccess)
        return 1;
    if (r == cudaErrorNotReady) /* an answer, which CUDA does not record as an error */
        return 0;
    check_log(d, r, "cudaEventQuery");
    return -1;
}

static zt_status cuda_event_synchronize(zt_device *dev, zt_event *e, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    zt_status st = use(d, err);
    return st != ZT_OK
               ? st
               : check(d, cudaEventSynchronize((cudaEvent_t)e), "cudaEventSynchronize", err);
}

/* ---- copies and kernels ----------------------------------------------------------------- */

static zt_status cuda_memcpy_async(zt_device *dev, void *dst, const void *src, size_t bytes,
                                   zt_copy_kind kind, zt_stream *s, zt_error *err)
{
    static const enum cudaMemcpyKind kinds[] = {
        [ZT_COPY_H2D] = cudaMemcpyHostToDevice,
        [ZT_COPY_D2H] = cudaMemcpyDeviceToHost,
        [ZT_COPY_D2D] = cudaMemcpyDeviceToDevice,
        [ZT_COPY_H2H] = cudaMemcpyHostToHost,
    };
    cuda_device *d = as_cuda(dev);
    if ((unsigned)kind >= sizeof kinds / sizeof kinds[0])
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "cuda device %d: unknown copy kind %d", d->index,
                      (int)kind);
    if (bytes == 0)
        return ZT_OK;
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : check(d, cudaMemcpyAsync(dst, src, bytes, kinds[kind], (cudaStream_t)s),
                               "cudaMemcpyAsync", err);
}

static zt_status cuda_memset_async(zt_device *dev, void *dst, int value, size_t bytes, zt_stream *s,
                                   zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    if (bytes == 0)
        return ZT_OK;
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : check(d, cudaMemsetAsync(dst, value, bytes, (cudaStream_t)s),
                               "cudaMemsetAsync", err);
}

static int dtype_known(zt_dtype t) { return t == ZT_F32 || t == ZT_BF16 || t == ZT_F16; }

static zt_status cuda_cast_async(zt_device *dev, void *dst, zt_dtype dst_type, const void *src,
                                 zt_dtype src_type, size_t n, zt_stream *s, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    if (!dtype_known(dst_type) || !dtype_known(src_type))
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "cuda device %d: cast from dtype %d to %d", d->index,
                      (int)src_type, (int)dst_type);
    if (n == 0)
        return ZT_OK;
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : check(d, (cudaError_t)zt_cuda_cast(dst, dst_type, src, src_type, n, s),
                               "cast kernel launch", err);
}

static zt_status cuda_scale_async(zt_device *dev, void *x, zt_dtype type, float alpha, size_t n,
                                  zt_stream *s, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    if (!dtype_known(type))
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "cuda device %d: scale of dtype %d", d->index,
                      (int)type);
    if (n == 0)
        return ZT_OK;
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : check(d, (cudaError_t)zt_cuda_scale(x, type, alpha, n, s),
                               "scale kernel launch", err);
}

static zt_status cuda_launch_host_fn(zt_device *dev, zt_stream *s, void (*fn)(void *), void *arg,
                                     zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    zt_status st = use(d, err);
    return st != ZT_OK
               ? st
               : check(d, cudaLaunchHostFunc((cudaStream_t)s, fn, arg), "cudaLaunchHostFunc", err);
}

static zt_status cuda_accumulate_async(zt_device *dev, float *acc, const void *src,
                                       zt_dtype src_type, size_t n, zt_stream *s, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    if (!dtype_known(src_type))
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "cuda device %d: accumulate of dtype %d", d->index,
                      (int)src_type);
    if (n == 0)
        return ZT_OK;
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : check(d, (cudaError_t)zt_cuda_accumulate(acc, src, src_type, n, s),
                               "accumulate kernel launch", err);
}

static zt_status cuda_sumsq_async(zt_device *dev, const float *x, size_t n, float scale,
                                  double *out, double *scratch, zt_stream *s, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    if (n == 0)
        return ZT_OK;
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : check(d, (cudaError_t)zt_cuda_sumsq(x, n, scale, out, scratch, s),
                               "sum-of-squares kernel launch", err);
}

static zt_status cuda_adam_async(zt_device *dev, const zt_adam_consts *c, float *master, float *m,
                                 float *v, const float *grad, void *param_out, zt_dtype param_type,
                                 size_t n, unsigned long long *nonfinite, zt_stream *s,
                                 zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    if (!dtype_known(param_type))
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "cuda device %d: Adam into dtype %d", d->index,
                      (int)param_type);
    if (n == 0)
        return ZT_OK;
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : check(d,
                               (cudaError_t)zt_cuda_adam(c, master, m, v, grad, ZT_F32, param_out,
                                                         param_type, n, nonfinite, s),
                               "Adam kernel launch", err);
}

static zt_status launched(cuda_device *d, int r, const char *what, size_t n, zt_error *err)
{
    return n == 0 ? ZT_OK : check(d, (cudaError_t)r, what, err);
}

static zt_status cuda_quant8_async(zt_device *dev, const void *x, zt_dtype type, size_t n,
                                   int block, int8_t *q, float *scales, zt_stream *s, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    if (!dtype_known(type))
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "int8 quantize: unknown dtype %d", (int)type);
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : launched(d, zt_cuda_quant8(x, type, n, block, (signed char *)q, scales, s),
                                  "int8 quantize kernel launch", n, err);
}

static zt_status cuda_dequant8_async(zt_device *dev, const int8_t *q, const float *scales, size_t n,
                                     int block, void *out, zt_dtype type, zt_stream *s,
                                     zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    if (!dtype_known(type))
        return ZT_ERR(err, ZT_ERR_ARGUMENT, "int8 dequantize: unknown dtype %d", (int)type);
    zt_status st = use(d, err);
    return st != ZT_OK
               ? st
               : launched(d,
                          zt_cuda_dequant8((const signed char *)q, scales, n, block, out, type, s),
                          "int8 dequantize kernel launch", n, err);
}

static zt_status cuda_quant4_async(zt_device *dev, const float *x, size_t n, int block, uint8_t *q,
                                   float *scales, zt_stream *s, zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : launched(d, zt_cuda_quant4(x, n, block, q, scales, s),
                                  "int4 quantize kernel launch", n, err);
}

static zt_status cuda_dequant4_add_async(zt_device *dev, const uint8_t *q, const float *scales,
                                         size_t n, int block, float *acc, zt_stream *s,
                                         zt_error *err)
{
    cuda_device *d = as_cuda(dev);
    zt_status st = use(d, err);
    return st != ZT_OK ? st
                       : launched(d, zt_cuda_dequant4_add(q, scales, n, block, acc, s),
                                  "int4 dequantize-add kernel launch", n, err);
}

/* ---- the calling thread's device and error state -----------------------------------------
 * Every slot runs on this instance's GPU (use()) and then gives the calling thread its own
 * current device back: ztier never leaves the caller's thread on another GPU. */

/* What the calling thread had when a call came in: its device, and whether it had a CUDA
 * error pending (cudaPeekAtLastError: not cleared). */
typedef struct caller_state {
    int device;
    cudaError_t pending;
} caller_state;

static caller_state caller_enter(void)
{
    caller_state c = {-1, cudaPeekAtLastError()};
    if (cudaGetDevice(&c.device) != cudaSuccess)
        c.device = -1;
    return c;
}

/* The caller's device back; an error this call left behind is cleared (it went out as the
 * zt_status), one the caller had is left where it was. */
static void caller_leave(caller_state c)
{
    int now = -1;
    if (c.device >= 0 && cudaGetDevice(&now) == cudaSuccess && now != c.device)
        (void)cudaSetDevice(c.device);
    if (c.pending == cudaSuccess)
        (void)cudaGetLastError();
}

#define KEEP_DEVICE(type, call)             \
    do {                                    \
        caller_state cur_ = caller_enter(); \
        type r_ = call;                     \
        caller_leave(cur_);                 \
        return r_;                          \
    } while (0)
#define KEEP_DEVICE_VOID(call)              \
    do {                                    \
        caller_state cur_ = caller_enter(); \
        call;                               \
        caller_leave(cur_);                 \
    } while (0)

static zt_status k_create(const zt_device_config *cfg, zt_device **out, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_create(cfg, out, err));
}
static void k_destroy(zt_device *dev) { KEEP_DEVICE_VOID(cuda_destroy(dev)); }
static zt_status k_alloc(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_alloc_mem(dev, bytes, ptr, err));
}
static void k_free(zt_device *dev, void *ptr) { KEEP_DEVICE_VOID(cuda_free_mem(dev, ptr)); }
static zt_status k_host_alloc(zt_device *dev, size_t bytes, void **ptr, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_host_alloc(dev, bytes, ptr, err));
}
static void k_host_free(zt_device *dev, void *ptr) { KEEP_DEVICE_VOID(cuda_host_free(dev, ptr)); }
static zt_status k_host_register(zt_device *dev, void *ptr, size_t bytes, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_host_register(dev, ptr, bytes, err));
}
static void k_host_unregister(zt_device *dev, void *ptr, size_t bytes)
{
    KEEP_DEVICE_VOID(cuda_host_unregister(dev, ptr, bytes));
}
static zt_status k_stream_create(zt_device *dev, zt_stream **out, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_stream_create(dev, out, err));
}
static void k_stream_destroy(zt_device *dev, zt_stream *s)
{
    KEEP_DEVICE_VOID(cuda_stream_destroy(dev, s));
}
static zt_status k_stream_synchronize(zt_device *dev, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_stream_synchronize(dev, s, err));
}
static zt_status k_event_create(zt_device *dev, zt_event **out, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_event_create(dev, out, err));
}
static void k_event_destroy(zt_device *dev, zt_event *e)
{
    KEEP_DEVICE_VOID(cuda_event_destroy(dev, e));
}
static zt_status k_event_record(zt_device *dev, zt_event *e, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_event_record(dev, e, s, err));
}
static zt_status k_stream_wait_event(zt_device *dev, zt_stream *s, zt_event *e, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_stream_wait_event(dev, s, e, err));
}
static int k_event_query(zt_device *dev, zt_event *e)
{
    KEEP_DEVICE(int, cuda_event_query(dev, e));
}
static zt_status k_event_create_timed(zt_device *dev, zt_event **out, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_event_create_timed(dev, out, err));
}
static zt_status k_event_elapsed(zt_device *dev, zt_event *start, zt_event *end, double *seconds,
                                 zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_event_elapsed(dev, start, end, seconds, err));
}
static zt_status k_event_synchronize(zt_device *dev, zt_event *e, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_event_synchronize(dev, e, err));
}
static zt_status k_memcpy_async(zt_device *dev, void *dst, const void *src, size_t bytes,
                                zt_copy_kind kind, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_memcpy_async(dev, dst, src, bytes, kind, s, err));
}
static zt_status k_memset_async(zt_device *dev, void *dst, int value, size_t bytes, zt_stream *s,
                                zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_memset_async(dev, dst, value, bytes, s, err));
}
static zt_status k_cast_async(zt_device *dev, void *dst, zt_dtype dst_type, const void *src,
                              zt_dtype src_type, size_t n, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_cast_async(dev, dst, dst_type, src, src_type, n, s, err));
}
static zt_status k_scale_async(zt_device *dev, void *x, zt_dtype type, float alpha, size_t n,
                               zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_scale_async(dev, x, type, alpha, n, s, err));
}
static zt_status k_launch_host_fn(zt_device *dev, zt_stream *s, void (*fn)(void *), void *arg,
                                  zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_launch_host_fn(dev, s, fn, arg, err));
}

static zt_status k_accumulate_async(zt_device *dev, float *acc, const void *src, zt_dtype src_type,
                                    size_t n, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_accumulate_async(dev, acc, src, src_type, n, s, err));
}
static zt_status k_sumsq_async(zt_device *dev, const float *x, size_t n, float scale, double *out,
                               double *scratch, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_sumsq_async(dev, x, n, scale, out, scratch, s, err));
}
static zt_status k_adam_async(zt_device *dev, const zt_adam_consts *c, float *master, float *m,
                              float *v, const float *grad, void *param_out, zt_dtype param_type,
                              size_t n, unsigned long long *nonfinite, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_adam_async(dev, c, master, m, v, grad, param_out, param_type, n,
                                           nonfinite, s, err));
}

static zt_status k_quant8_async(zt_device *dev, const void *x, zt_dtype type, size_t n, int block,
                                int8_t *q, float *scales, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_quant8_async(dev, x, type, n, block, q, scales, s, err));
}
static zt_status k_dequant8_async(zt_device *dev, const int8_t *q, const float *scales, size_t n,
                                  int block, void *out, zt_dtype type, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_dequant8_async(dev, q, scales, n, block, out, type, s, err));
}
static zt_status k_quant4_async(zt_device *dev, const float *x, size_t n, int block, uint8_t *q,
                                float *scales, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_quant4_async(dev, x, n, block, q, scales, s, err));
}
static zt_status k_dequant4_add_async(zt_device *dev, const uint8_t *q, const float *scales,
                                      size_t n, int block, float *acc, zt_stream *s, zt_error *err)
{
    KEEP_DEVICE(zt_status, cuda_dequant4_add_async(dev, q, scales, n, block, acc, s, err));
}

const zt_device_iface zt_device_cuda = {
    /* .name = */ "cuda",
    /* .create = */ k_create,
    /* .destroy = */ k_destroy,
    /* .alloc = */ k_alloc,
    /* .free = */ k_free,
    /* .host_alloc = */ k_host_alloc,
    /* .host_free = */ k_host_free,
    /* .host_register = */ k_host_register,
    /* .host_unregister = */ k_host_unregister,
    /* .stream_create = */ k_stream_create,
    /* .stream_destroy = */ k_stream_destroy,
    /* .stream_synchronize = */ k_stream_synchronize,
    /* .event_create = */ k_event_create,
    /* .event_destroy = */ k_event_destroy,
    /* .event_record = */ k_event_record,
    /* .stream_wait_event = */ k_stream_wait_event,
    /* .event_query = */ k_event_query,
    /* .event_synchronize = */ k_event_synchronize,
    /* .memcpy_async = */ k_memcpy_async,
    /* .memset_async = */ k_memset_async,
    /* .cast_async = */ k_cast_async,
    /* .scale_async = */ k_scale_async,
    /* .launch_host_fn = */ k_launch_host_fn,
    /* .accumulate_async = */ k_accumulate_async,
    /* .sumsq_async = */ k_sumsq_async,
    /* .adam_async = */ k_adam_async,
    /* .quant8_async = */ k_quant8_async,
    /* .dequant8_async = */ k_dequant8_async,
    /* .quant4_async = */ k_quant4_async,
    /* .dequant4_add_async = */ k_dequant4_add_async,
    /* .event_create_timed = */ k_event_create_timed,
    /* .event_elapsed = */ k_event_elapsed,
};

/* The module's entry point (core/module.h): libztier-cuda.so in libztier.so, linked in in
 * libztier.a. */
static const zt_module cuda_module = {ZT_MODULE_ABI, "cuda", &zt_device_cuda};
const zt_module *ztier_cuda_module_v1(void) { return &cuda_module; }

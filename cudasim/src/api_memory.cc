/* SPDX-License-Identifier: MIT */
// The CUDA runtime's device, error and memory calls, on the stand-in's devices: device
// memory, pinned and registered host memory, stream-ordered pools.
#include "internal.h"

#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

using namespace cudasim;

namespace
{

struct ErrorText {
    cudaError_t code;
    const char *name, *text;
};

const ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
};

const ErrorText *error_text(cudaError_t e)
{
    for (const ErrorText &t : kErrors)
        if (t.code == e)
            return &t;
    return nullptr;
}

size_t page_round(size_t n)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    return (n + ps - 1) / ps * ps;
}

bool overlaps_registered(const char *p, size_t n)
{
    for (auto &kv : state().allocs) {
        Alloc *a = kv.second;
        if (a->kind != MemKind::Device && p < a->ptr + a->size && a->ptr < p + n)
            return true;
    }
    return false;
}

} // namespace

extern "C" {

// ---- errors ------------------------------------------------------------------------------

cudaError_t cudaGetLastError(void) { return cudasim::last_error(true); }
cudaError_t cudaPeekAtLastError(void) { return cudasim::last_error(false); }

const char *cudaGetErrorString(cudaError_t e)
{
    const ErrorText *t = error_text(e);
    return t ? t->text : "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t e)
{
    const ErrorText *t = error_text(e);
    return t ? t->name : "cudaErrorUnknown";
}

// ---- devices -----------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int *count)
{
    api_enter("cudaGetDeviceCount");
    if (!count)
        return api_result(cudaErrorInvalidValue);
    *count = (int)state().devices.size();
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    api_enter("cudaGetDevice");
    if (!device)
        return api_result(cudaErrorInvalidValue);
    *device = current_device();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    api_enter("cudaSetDevice");
    if (device < 0 || device >= (int)state().devices.size())
        return api_result(cudaErrorInvalidDevice);
    set_current_device(device);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    api_enter("cudaGetDeviceProperties");
    if (!p)
        return api_result(cudaErrorInvalidValue);
    if (device < 0 || device >= (int)state().devices.size())
        return api_result(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cudasim CPU stand-in %d", device);
    p->totalGlobalMem = settings().mem;
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = 227 * 1024;
    p->sharedMemPerMultiprocessor = 228 * 1024;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 4;
    p->unifiedAddressing = 1;
    p->canMapHostMemory = 1;
    p->memoryPoolsSupported = !settings().no_pools;
    p->pciBusID = device;
    return cudaSuccess;
}

/* A made-up address per device, in the driver's form (upper-case hex): 0000:1N:00.0. */
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    api_enter("cudaDeviceGetPCIBusId");
    if (!pciBusId || len < 13)
        return api_result(cudaErrorInvalidValue);
    if (device < 0 || device >= (int)state().devices.size())
        return api_result(cudaErrorInvalidDevice);
    snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", 0x1A + device);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    api_enter("cudaDeviceGetAttribute");
    if (!value)
        return api_result(cudaErrorInvalidValue);
    if (device < 0 || device >= (int)state().devices.size())
        return api_result(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMemoryPoolsSupported:
        *value = !settings().no_pools;
        break;
    case cudaDevAttrWarpSize:
        *value = 32;
        break;
    case cudaDevAttrMaxThreadsPerBlock:
        *value = 1024;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
        *value = 48 * 1024;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
        *value = 227 * 1024;
        break;
    case cudaDevAttrMultiProcessorCount:
        *value = 4;
        break;
    case cudaDevAttrComputeCapabilityMajor:
        *value = 9;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        *value = 0;
        break;
    case cudaDevAttrUnifiedAddressing:
        *value = 1;
        break;
    default:
        note("cudaDeviceGetAttribute(%d) is not modelled: answering 0", (int)attr);
        *value = 0;
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    ENTER("cudaDeviceSynchronize");
    wait_device(lk, current_device());
    return cudaSuccess;
}

// Ends the device's "context": waits for its work, frees its memory (pools included),
// clears its sticky error. Streams and events stay usable here (a real reset destroys them).
cudaError_t cudaDeviceReset(void)
{
    api_enter("cudaDeviceReset");
    State &st = state();
    std::unique_lock<std::mutex> lk(st.mu);
    int d = current_device();
    wait_device(lk, d);
    std::vector<Alloc *> mine;
    for (auto &kv : st.allocs)
        if (kv.second->kind == MemKind::Device && kv.second->device == d)
            mine.push_back(kv.second);
    for (Alloc *a : mine)
        release_alloc(a);
    pool_trim(&st.devices[(size_t)d].default_pool, 0);
    for (auto &p : st.pools)
        if (p->device == d)
            pool_trim(p.get(), 0);
    st.devices[(size_t)d].sticky = cudaSuccess;
    st.devices[(size_t)d].max_dynamic_shared.clear();
    lk.unlock();
    (void)last_error(true);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    ENTER("cudaMemGetInfo");
    const Device &d = st.devices[(size_t)current_device()];
    if (free_bytes)
        *free_bytes = settings().mem - d.used;
    if (total)
        *total = settings().mem;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    ENTER("cudaFuncSetAttribute");
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) {
        note("cudaFuncSetAttribute(%d) is not modelled (ignored)", (int)attr);
        return cudaSuccess;
    }
    if (value < 0 || value > 227 * 1024)
        return api_result(cudaErrorInvalidValue);
    st.devices[(size_t)current_device()].max_dynamic_shared[func] = value;
    return cudaSuccess;
}

// ---- device memory -----------------------------------------------------------------------

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    ENTER("cudaMalloc");
    if (!ptr)
        return api_result(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (bytes == 0)
        return cudaSuccess;
    return api_result(device_alloc(current_device(), bytes, nullptr, "cudaMalloc", ptr));
}

// The allocation that starts at p, with a finding for anything else.
static Alloc *alloc_at(const void *p, MemKind kind, const char *call)
{
    Alloc *a = find_alloc(p);
    if (!a || a->ptr != p || a->kind != kind ||
        (a->free_pending && strcmp(call, "cudaFreeAsync"))) {
        finding("%s(%s): not the start of memory it can free", call, describe_ptr(p).c_str());
        return nullptr;
    }
    return a;
}

// cudaFree waits for the device (as CUDA's does in practice) and frees at once; memory of a
// pool goes back to the pool.
cudaError_t cudaFree(void *ptr)
{
    ENTER("cudaFree");
    if (!ptr)
        return cudaSuccess;
    Alloc *a = alloc_at(ptr, MemKind::Device, "cudaFree");
    if (!a)
        return api_result(cudaErrorInvalidValue);
    wait_device(lk, a->device);
    Pool *pool = a->pool;
    release_alloc(a);
    if (pool)
        pool_trim(pool, pool->release_threshold);
    return cudaSuccess;
}

// ---- pinned and registered host memory ----------------------------------------------------

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags)
{
    (void)flags; // every pinned buffer is portable and mapped here
    ENTER("cudaHostAlloc");
    if (!ptr)
        return api_result(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (inject_alloc_failure())
        return api_result(cudaErrorMemoryAllocation);
    size_t n = page_round(bytes ? bytes : 1);
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return api_result(cudaErrorMemoryAllocation);
    memset(p, 0xff, bytes); // not promised to be zero: code that assumes it shows up
    auto *a = new Alloc;
    a->ptr = a->raw = static_cast<char *>(p);
    a->size = bytes;
    a->raw_size = n;
    a->kind = MemKind::Pinned;
    a->origin = "cudaHostAlloc";
    st.allocs[(uintptr_t)p] = a;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes)
{
    return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr)
{
    ENTER("cudaFreeHost");
    if (!ptr)
        return cudaSuccess;
    Alloc *a = alloc_at(ptr, MemKind::Pinned, "cudaFreeHost");
    if (!a)
        return api_result(cudaErrorInvalidValue);
    wait_device(lk, -1); // copies still reading or writing it finish first
    release_alloc(a);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *ptr, size_t bytes, unsigned int flags)
{
    (void)flags;
    ENTER("cudaHostRegister");
    if (!ptr || bytes == 0)
        return api_result(cudaErrorInvalidValue);
    if (overlaps_registered(static_cast<char *>(ptr), bytes))
        return api_result(cudaErrorHostMemoryAlreadyRegistered);
    if (find_alloc(ptr))
        return api_result(cudaErrorInvalidValue); // device memory
    auto *a = new Alloc;
    a->ptr = static_cast<char *>(ptr);
    a->size = bytes;
    a->kind = MemKind::Registered;
    a->origin = "cudaHostRegister";
    st.allocs[(uintptr_t)ptr] = a;
    return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *ptr)
{
    ENTER("cudaHostUnregister");
    Alloc *a = ptr ? find_alloc(ptr) : nullptr;
    if (!a || a->ptr != ptr || a->kind != MemKind::Registered)
        return api_result(cudaErrorHostMemoryNotRegistered);
    wait_device(lk, -1);
    release_alloc(a);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    ENTER("cudaPointerGetAttributes");
    if (!attr)
        return api_result(cudaErrorInvalidValue);
    memset(attr, 0, sizeof *attr);
    Alloc *a = find_alloc(ptr);
    attr->device = a && a->device >= 0 ? a->device : current_device();
    if (!a) {
        attr->type = cudaMemoryTypeUnregistered;
        attr->hostPointer = const_cast<void *>(ptr);
    } else if (a->kind == MemKind::Device) {
        attr->type = cudaMemoryTypeDevice;
        attr->devicePointer = const_cast<void *>(ptr);
    } else {
        attr->type = cudaMemoryTypeHost;
        attr->devicePointer = attr->hostPointer = const_cast<void *>(ptr);
    }
    return cudaSuccess;
}

// ---- stream-ordered pools -----------------------------------------------------------------

cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
    ENTER("cudaMemPoolCreate");
    if (settings().no_pools)
        return api_result(cudaErrorNotSupported);
    if (!pool || !props || props->location.type != cudaMemLocationTypeDevice ||
        props->location.id < 0 || props->location.id >= (int)st.devices.size())
        return api_result(cudaErrorInvalidValue);
    auto p = std::make_unique<Pool>();
    p->device = props->location.id;
    *pool = reinterpret_cast<cudaMemPool_t>(p.get());
    st.pools.push_back(std::move(p));
    return cudaSuccess;
}

static Pool *pool_of(cudaMemPool_t h)
{
    for (auto &p : state().pools)
        if (reinterpret_cast<cudaMemPool_t>(p.get()) == h)
            return p.get();
    for (Device &d : state().devices)
        if (reinterpret_cast<cudaMemPool_t>(&d.default_pool) == h)
            return &d.default_pool;
    return nullptr;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t h)
{
    ENTER("cudaMemPoolDestroy");
    Pool *p = pool_of(h);
    if (!p || p->is_default)
        return api_result(cudaErrorInvalidValue);
    for (auto &kv : st.allocs)
        if (kv.second->pool == p)
            kv.second->pool = nullptr; // live blocks are freed to the device later
    pool_trim(p, 0);
    for (size_t i = 0; i < st.pools.size(); i++)
        if (st.pools[i].get() == p) {
            st.pools.erase(st.pools.begin() + (long)i);
            break;
        }
    return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    ENTER("cudaDeviceGetDefaultMemPool");
    if (!pool || device < 0 || device >= (int)st.devices.size())
        return api_result(cudaErrorInvalidValue);
    *pool = reinterpret_cast<cudaMemPool_t>(&st.devices[(size_t)device].default_pool);
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t h, enum cudaMemPoolAttr attr, void *value)
{
    ENTER("cudaMemPoolSetAttribute");
    Pool *p = pool_of(h);
    if (!p || !value)
        return api_result(cudaErrorInvalidValue);
    if (attr == cudaMemPoolAttrReleaseThreshold)
        p->release_threshold = *static_cast<uint64_t *>(value);
    else
        note("cudaMemPoolSetAttribute(%d) is not modelled (ignored)", (int)attr);
    return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t h, enum cudaMemPoolAttr attr, void *value)
{
    ENTER("cudaMemPoolGetAttribute");
    Pool *p = pool_of(h);
    if (!p || !value)
        return api_result(cudaErrorInvalidValue);
    uint64_t cached = 0, used = 0;
    for (Alloc *a : p->cached)
        cached += a->reserved;
    for (auto &kv : st.allocs)
        if (kv.second->pool == p)
            used += kv.second->reserved;
    switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
        *static_cast<uint64_t *>(value) = p->release_threshold;
        break;
    case cudaMemPoolAttrReservedMemCurrent:
        *static_cast<uint64_t *>(value) = cached + used;
        break;
    case cudaMemPoolAttrUsedMemCurrent:
        *static_cast<uint64_t *>(value) = used;
        break;
    default:
        return api_result(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t h, size_t keep)
{
    ENTER("cudaMemPoolTrimTo");
    Pool *p = pool_of(h);
    if (!p)
        return api_result(cudaErrorInvalidValue);
    pool_trim(p, keep);
    return cudaSuccess;
}

// The block is the stream's from its allocation on: use on another stream needs ordering.
cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t bytes, cudaMemPool_t h, cudaStream_t stream)
{
    ENTER("cudaMallocFromPoolAsync");
    Pool *p = pool_of(h);
    cudaError_t err;
    auto s = stream_of(stream, &err);
    if (!s)
        return api_result(err);
    if (!ptr || !p)
        return api_result(cudaErrorInvalidValue);
    err = device_alloc(p->device, bytes ? bytes : 1, p, "cudaMallocFromPoolAsync", ptr);
    if (err != cudaSuccess)
        return api_result(err);
    enqueue(lk, s.get(), "cudaMallocFromPoolAsync", {{*ptr, SIZE_MAX, true}}, [] {});
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream)
{
    cudaMemPool_t pool;
    {
        std::lock_guard<std::mutex> lk(state().mu);
        cudaError_t err;
        auto s = stream_of(stream, &err);
        if (!s)
            return api_result(err);
        pool = reinterpret_cast<cudaMemPool_t>(&state().devices[(size_t)s->device].default_pool);
    }
    return cudaMallocFromPoolAsync(ptr, bytes, pool, stream);
}

// Freed in stream order: the free is a write of the whole block by the stream (so a use on
// another stream that it is not ordered after is a finding), and the pointer is dead at once.
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    ENTER("cudaFreeAsync");
    cudaError_t err;
    auto s = stream_of(stream, &err);
    if (!s)
        return api_result(err);
    if (!ptr)
        return cudaSuccess;
    Alloc *a = alloc_at(ptr, MemKind::Device, "cudaFreeAsync");
    if (!a || a->free_pending) {
        if (a)
            finding("cudaFreeAsync(%s): freed twice", describe_ptr(ptr).c_str());
        return api_result(cudaErrorInvalidValue);
    }
    enqueue(lk, s.get(), "cudaFreeAsync", {{ptr, SIZE_MAX, true}}, [a] {
        std::lock_guard<std::mutex> l(state().mu);
        release_alloc(a);
    });
    a->free_pending = true; // in the table until the free runs: what runs before may use it
    return cudaSuccess;
}

} // extern "C"

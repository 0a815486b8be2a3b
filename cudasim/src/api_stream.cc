/* SPDX-License-Identifier: MIT */
// The CUDA runtime's streams, events, copies, memsets, host functions and kernel launches on
// the stand-in. Copies follow CUDA's rules for host memory: from or into pinned (or
// registered) memory they run in stream order and the host must not touch the buffer until
// it has observed their completion (hostpages.cc enforces it); a pageable source is copied
// at the call (as CUDA stages it), and a copy into pageable memory returns only when done.
#include "internal.h"

#include <chrono>
#include <cstdio>
#include <cstring>

using namespace cudasim;

namespace
{

#define STREAM(var, handle)                                 \
    cudaError_t err_ = cudaSuccess;                         \
    std::shared_ptr<Stream> var = stream_of(handle, &err_); \
    if (!var)                                               \
        return api_result(err_);

Event *event_of(cudaEvent_t h)
{
    auto it = state().events.find(reinterpret_cast<Event *>(h));
    if (it != state().events.end())
        return it->second.get();
    finding("event handle %p is not a live event (destroyed, or never created)", (void *)h);
    return nullptr;
}

bool take_not_ready()
{
    State &st = state();
    return st.not_ready_next > 0 && st.not_ready_next-- > 0;
}

const char *kind_name(cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToHost:
        return "HostToHost";
    case cudaMemcpyHostToDevice:
        return "HostToDevice";
    case cudaMemcpyDeviceToHost:
        return "DeviceToHost";
    case cudaMemcpyDeviceToDevice:
        return "DeviceToDevice";
    default:
        return "Default";
    }
}

// One side of a copy or memset: device memory, pinned host memory, or pageable memory.
struct Side {
    Alloc *a;
    bool device() const { return a && a->kind == MemKind::Device; }
    bool pinned() const { return a && a->kind != MemKind::Device; }
};

// The range [p, p + n) fits the allocation it starts in; a finding otherwise.
bool fits(const Side &s, const void *p, size_t n, const char *call, const char *role)
{
    if (!s.a || (const char *)p + n <= s.a->ptr + s.a->size)
        return true;
    finding("%s: the %s %s holds %zu bytes from there, %zu asked", call, role,
            describe_ptr(p).c_str(), (size_t)(s.a->ptr + s.a->size - (const char *)p), n);
    return false;
}

bool kind_matches(cudaMemcpyKind kind, const Side &dst, const Side &src)
{
    switch (kind) {
    case cudaMemcpyHostToDevice:
        return dst.device() && !src.device();
    case cudaMemcpyDeviceToHost:
        return !dst.device() && src.device();
    case cudaMemcpyDeviceToDevice:
        return dst.device() && src.device();
    case cudaMemcpyHostToHost:
        return !dst.device() && !src.device();
    case cudaMemcpyDefault:
        return true;
    }
    return false;
}

cudaError_t copy_on(std::unique_lock<std::mutex> &lk, const std::shared_ptr<Stream> &s, void *dst,
                    const void *src, size_t n, cudaMemcpyKind kind, bool sync, const char *call)
{
    if (n == 0)
        return cudaSuccess;
    if (!dst || !src)
        return api_result(cudaErrorInvalidValue);
    Side d{find_alloc(dst)}, r{find_alloc(src)};
    if (!kind_matches(kind, d, r)) {
        note("%s(%s): the destination is %s and the source %s", call, kind_name(kind),
             describe_ptr(dst).c_str(), describe_ptr(src).c_str());
        return api_result(cudaErrorInvalidValue);
    }
    if (!fits(d, dst, n, call, "destination") || !fits(r, src, n, call, "source"))
        return api_result(cudaErrorInvalidValue);
    char what[128];
    snprintf(what, sizeof what, "%s(%s, %zu bytes)", call, kind_name(kind), n);
    std::shared_ptr<std::vector<char>> staged;
    if (!r.a) { // pageable source: CUDA stages it before returning
        staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + n);
        src = staged->data();
    }
    if (!d.a)
        sync = true; // pageable destination: the call returns when the bytes are there
    bool host_dst = d.pinned(), host_src = r.pinned();
    uint64_t seq = enqueue(lk, s.get(), what, {{dst, n, true}, {src, n, false}}, [=] {
        char *dp = static_cast<char *>(dst);
        const char *sp = static_cast<const char *>(src);
        if (host_dst)
            pages_open(dp, dp + n);
        if (host_src)
            pages_open(sp, sp + n);
        memmove(dp, sp, n);
        if (host_src)
            pages_close(sp, sp + n);
        if (host_dst)
            pages_close(dp, dp + n);
        (void)staged;
    });
    if (host_dst)
        pages_pending((char *)dst, (char *)dst + n, true, s->agent, seq, what);
    if (host_src)
        pages_pending((const char *)src, (const char *)src + n, false, s->agent, seq, what);
    if (sync)
        wait_for(lk, s, seq);
    return cudaSuccess;
}

cudaError_t memset_on(std::unique_lock<std::mutex> &lk, const std::shared_ptr<Stream> &s, void *dst,
                      int value, size_t n, bool sync, const char *call)
{
    if (n == 0)
        return cudaSuccess;
    Side d{find_alloc(dst)};
    if (!d.device()) {
        finding("%s(%s): not device memory", call, describe_ptr(dst).c_str());
        return api_result(cudaErrorInvalidValue);
    }
    if (!fits(d, dst, n, call, "destination"))
        return api_result(cudaErrorInvalidValue);
    char what[96];
    snprintf(what, sizeof what, "%s(%zu bytes)", call, n);
    uint64_t seq = enqueue(lk, s.get(), what, {{dst, n, true}}, [=] { memset(dst, value, n); });
    if (sync)
        wait_for(lk, s, seq);
    return cudaSuccess;
}

} // namespace

extern "C" {

// ---- streams -----------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
    ENTER("cudaStreamCreateWithFlags");
    if (!out)
        return api_result(cudaErrorInvalidValue);
    auto s = make_stream(current_device(), !(flags & cudaStreamNonBlocking), false);
    st.streams[s.get()] = s;
    *out = reinterpret_cast<cudaStream_t>(s.get());
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *out)
{
    return cudaStreamCreateWithFlags(out, cudaStreamDefault);
}

// Returns at once; work already queued still runs (CUDA's rule).
cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    ENTER("cudaStreamDestroy");
    auto it = st.streams.find(reinterpret_cast<Stream *>(h));
    if (it == st.streams.end()) {
        finding("cudaStreamDestroy(%p): not a live stream", (void *)h);
        return api_result(cudaErrorInvalidResourceHandle);
    }
    it->second->destroyed = true;
    it->second->cv.notify_all();
    st.streams.erase(it);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    ENTER("cudaStreamSynchronize");
    STREAM(s, h);
    wait_for(lk, s, s->enqueued);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t h)
{
    ENTER("cudaStreamQuery");
    STREAM(s, h);
    if (take_not_ready() || s->completed < s->enqueued)
        return cudaErrorNotReady;
    host_observed(s->done_clock);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t eh, unsigned int flags)
{
    (void)flags;
    ENTER("cudaStreamWaitEvent");
    STREAM(s, h);
    Event *e = event_of(eh);
    if (!e)
        return api_result(cudaErrorInvalidResourceHandle);
    if (!e->recorded)
        return cudaSuccess; // an event never recorded is complete
    s->clock.join(e->clock);
    enqueue(lk, s.get(), "cudaStreamWaitEvent", {}, [] {}, false, {{e->stream, e->seq}});
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *arg)
{
    ENTER("cudaLaunchHostFunc");
    STREAM(s, h);
    if (!fn)
        return api_result(cudaErrorInvalidValue);
    enqueue(
        lk, s.get(), "cudaLaunchHostFunc", {}, [fn, arg] { fn(arg); }, true);
    return cudaSuccess;
}

// ---- events ------------------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
    ENTER("cudaEventCreateWithFlags");
    if (!out)
        return api_result(cudaErrorInvalidValue);
    auto e = std::make_unique<Event>();
    e->device = current_device();
    e->flags = flags;
    *out = reinterpret_cast<cudaEvent_t>(e.get());
    st.events[e.get()] = std::move(e);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out)
{
    return cudaEventCreateWithFlags(out, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t h)
{
    ENTER("cudaEventDestroy");
    if (!event_of(h))
        return api_result(cudaErrorInvalidResourceHandle);
    st.events.erase(reinterpret_cast<Event *>(h));
    return cudaSuccess;
}

// The event completes when everything queued on the stream so far has; its clock is the
// stream's now.
cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t sh)
{
    ENTER("cudaEventRecord");
    STREAM(s, sh);
    Event *e = event_of(h);
    if (!e)
        return api_result(cudaErrorInvalidResourceHandle);
    if (e->device != s->device) {
        note("cudaEventRecord: the event belongs to device %d and %s to device %d", e->device,
             stream_name(s.get()).c_str(), s->device);
        return api_result(cudaErrorInvalidResourceHandle);
    }
    auto stamp = std::make_shared<double>(0.0);
    e->seq = enqueue(lk, s.get(), "cudaEventRecord", {}, [stamp] {
        *stamp = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
                     .count();
    });
    e->stamp = stamp;
    e->stream = s;
    e->clock = s->clock;
    e->recorded = true;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t h)
{
    ENTER("cudaEventQuery");
    Event *e = event_of(h);
    if (!e)
        return api_result(cudaErrorInvalidResourceHandle);
    if (!e->recorded)
        return cudaSuccess;
    if (take_not_ready() || e->stream->completed < e->seq)
        return cudaErrorNotReady;
    host_observed(e->clock);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t h)
{
    ENTER("cudaEventSynchronize");
    Event *e = event_of(h);
    if (!e)
        return api_result(cudaErrorInvalidResourceHandle);
    if (!e->recorded)
        return cudaSuccess;
    std::shared_ptr<Stream> s = e->stream;
    VClock c = e->clock;
    uint64_t seq = e->seq;
    st.done.wait(lk, [&] { return s->completed >= seq; });
    host_observed(c);
    return cudaSuccess;
}

// The time between two completed records, as the device clock would have it: the steady
// clock when each stream ran its record. Events made with cudaEventDisableTiming, or never
// recorded, are invalid handles here (CUDA's rule); one not complete yet answers "not
// ready" without recording an error, as cudaEventQuery does.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    ENTER("cudaEventElapsedTime");
    if (!ms)
        return api_result(cudaErrorInvalidValue);
    Event *a = event_of(start), *b = event_of(end);
    if (!a || !b)
        return api_result(cudaErrorInvalidResourceHandle);
    if ((a->flags | b->flags) & cudaEventDisableTiming) {
        note("cudaEventElapsedTime: an event created with cudaEventDisableTiming");
        return api_result(cudaErrorInvalidResourceHandle);
    }
    if (!a->recorded || !b->recorded) {
        note("cudaEventElapsedTime: an event never recorded");
        return api_result(cudaErrorInvalidResourceHandle);
    }
    if (a->stream->completed < a->seq || b->stream->completed < b->seq)
        return cudaErrorNotReady;
    host_observed(a->clock);
    host_observed(b->clock);
    *ms = (float)((*b->stamp - *a->stamp) * 1e3);
    return cudaSuccess;
}

// ---- copies and memsets --------------------------------------------------------------------

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t h)
{
    ENTER("cudaMemcpyAsync");
    STREAM(s, h);
    return copy_on(lk, s, dst, src, n, kind, false, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    ENTER("cudaMemcpy");
    return copy_on(lk, legacy_stream(current_device()), dst, src, n, kind, true, "cudaMemcpy");
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t h)
{
    ENTER("cudaMemsetAsync");
    STREAM(s, h);
    return memset_on(lk, s, dst, value, n, false, "cudaMemsetAsync");
}

cudaError_t cudaMemset(void *dst, int value, size_t n)
{
    ENTER("cudaMemset");
    return memset_on(lk, legacy_stream(current_device()), dst, value, n, true, "cudaMemset");
}

} // extern "C"

// ---- kernels and library work -------------------------------------------------------------

namespace cudasim
{

namespace
{

bool config_ok(dim3 g, dim3 b)
{
    return g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= 0x7fffffffu && g.y <= 65535 && g.z <= 65535 &&
           b.x >= 1 && b.y >= 1 && b.z >= 1 && b.x <= 1024 && b.y <= 1024 && b.z <= 64 &&
           (uint64_t)b.x * b.y * b.z <= 1024;
}

// A pointer argument the kernel cannot use on this device: a finding, and the device's
// sticky error (a GPU would fault).
bool pointer_ok(const char *name, const KernelArg &p, int device)
{
    Alloc *a = find_alloc(p.ptr);
    if (a && (a->kind != MemKind::Device || a->device == device))
        return true;
    finding("kernel %s: argument %d is %s, which a kernel on device %d cannot reach (a GPU "
            "faults: cudaErrorIllegalAddress)",
            name, p.index, describe_ptr(p.ptr).c_str(), device);
    state().devices[(size_t)device].sticky = cudaErrorIllegalAddress;
    return false;
}

uint64_t g_launches = 0;

} // namespace

cudaError_t launch_kernel(const char *name, const void *key, dim3 grid, dim3 block, size_t shared,
                          cudaStream_t stream, std::vector<KernelArg> pointers,
                          std::function<void()> thread_body)
{
    ENTER("a kernel launch");
    STREAM(s, stream);
    if (!config_ok(grid, block)) {
        note("kernel %s: launch configuration grid (%u, %u, %u) block (%u, %u, %u) is invalid",
             name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return api_result(cudaErrorInvalidConfiguration);
    }
    Device &dev = st.devices[(size_t)s->device];
    auto opt = dev.max_dynamic_shared.find(key);
    size_t limit = opt != dev.max_dynamic_shared.end() ? (size_t)opt->second : 48 * 1024;
    if (shared > limit) {
        note("kernel %s: %zu bytes of dynamic shared memory, %zu allowed%s", name, shared, limit,
             limit == 48 * 1024 ? " without cudaFuncAttributeMaxDynamicSharedMemorySize" : "");
        return api_result(cudaErrorInvalidValue);
    }
    if (s->device != current_device()) {
        note("kernel %s launched on %s while device %d is current", name,
             stream_name(s.get()).c_str(), current_device());
        return api_result(cudaErrorInvalidResourceHandle);
    }
    std::vector<Access> acc;
    for (const KernelArg &p : pointers) {
        if (!p.ptr)
            continue;
        if (!pointer_ok(name, p, s->device))
            return api_result(cudaErrorIllegalAddress);
        acc.push_back({p.ptr, SIZE_MAX, !p.is_const});
    }
    char what[160];
    snprintf(what, sizeof what, "kernel %s<<<(%u,%u,%u), (%u,%u,%u)>>>", name, grid.x, grid.y,
             grid.z, block.x, block.y, block.z);
    Launch l{name, key, grid, block, shared, stream, std::move(pointers), std::move(thread_body)};
    uint64_t seed = mix(settings().seed ^ (++g_launches * 0x9e3779b97f4a7c15ull));
    int device = s->device;
    enqueue(lk, s.get(), what, acc, [l, seed, device] {
        cudaError_t r = run_grid(l, seed);
        std::lock_guard<std::mutex> g(state().mu);
        for (const KernelArg &p : l.pointers)
            if (Alloc *a = p.ptr ? find_alloc(p.ptr) : nullptr)
                check_guards(a, (std::string("kernel ") + l.name).c_str());
        if (r != cudaSuccess)
            state().devices[(size_t)device].sticky = r;
    });
    return cudaSuccess;
}

cudaError_t device_work(cudaStream_t stream, const char *what, std::vector<Access> accesses,
                        std::function<void()> work)
{
    ENTER(what);
    STREAM(s, stream);
    for (const Access &a : accesses) {
        Alloc *al = find_alloc(a.ptr);
        if (!al || (al->kind == MemKind::Device && al->device != s->device)) {
            finding("%s: %s is not memory of device %d", what, describe_ptr(a.ptr).c_str(),
                    s->device);
            return api_result(cudaErrorInvalidValue);
        }
        if (a.bytes != SIZE_MAX && !fits(Side{al}, a.ptr, a.bytes, what, "range"))
            return api_result(cudaErrorInvalidValue);
    }
    enqueue(lk, s.get(), what, accesses, std::move(work));
    return cudaSuccess;
}

} // namespace cudasim

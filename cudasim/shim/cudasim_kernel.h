/* SPDX-License-Identifier: MIT */
// Included first by every .cu file compiled for the stand-in (the CMake rewrite puts it at
// the top, see cudasim/rewrite.cmake): it makes CUDA C++ host C++. The real CUDA headers
// come first for the types and for NVIDIA's own host implementations of the bf16 and fp16
// conversions (independent of the project's CPU conversions, which tests compare them
// with); then the device-side language: threadIdx and friends from the running CUDA
// thread's context, __shared__ as per-block storage, barriers and warp shuffles as fiber
// switches (cudasim/src/grid.cc), atomics through std::atomic_ref, and __CUDACC__ /
// __CUDA_ARCH__ defined so that the sources take their device code paths.
//
// Transcendental functions differ from glibc's on a GPU (expf, tanhf: up to 2 ulp): here
// they return glibc's result moved by one ulp for some arguments (a fixed function of the
// argument, so results still repeat run to run), so that a test comparing a kernel with a
// CPU reference must allow for what a GPU would differ by.
#ifndef CUDASIM_KERNEL_H
#define CUDASIM_KERNEL_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <math.h>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudasim_device.h"

// ---- the language ------------------------------------------------------------------------

#undef __shared__
#define __shared__ static thread_local // one block at a time per stream thread
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

#define threadIdx (::cudasim::t_ctx->thread_idx)
#define blockIdx (::cudasim::t_ctx->block_idx)
#define blockDim (::cudasim::t_ctx->block_dim)
#define gridDim (::cudasim::t_ctx->grid_dim)
#define warpSize 32

inline void __syncthreads() { ::cudasim::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cudasim::sync_warp(mask); }

namespace cudasim
{

template <typename T> T shfl(unsigned mask, T v, int src)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of <= 8 bytes");
    T out;
    warp_exchange(mask, &v, &out, sizeof(T), src);
    return out;
}

inline int lane_id()
{
    return (int)((t_ctx->thread_idx.x + t_ctx->thread_idx.y * t_ctx->block_dim.x +
                  t_ctx->thread_idx.z * t_ctx->block_dim.x * t_ctx->block_dim.y) %
                 32);
}

// Lanes are grouped `width` at a time (a power of two up to 32), as CUDA's shuffles group them.
inline int in_group(int lane, int src, int width)
{
    int base = lane & ~(width - 1);
    return src >= base && src < base + width ? src : lane;
}

} // namespace cudasim

template <typename T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    int lane = ::cudasim::lane_id();
    return ::cudasim::shfl(mask, v, ::cudasim::in_group(lane, lane ^ lane_mask, width));
}
template <typename T> T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    int lane = ::cudasim::lane_id();
    return ::cudasim::shfl(mask, v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <typename T> T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int lane = ::cudasim::lane_id();
    return ::cudasim::shfl(mask, v, ::cudasim::in_group(lane, lane + (int)delta, width));
}
template <typename T> T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int lane = ::cudasim::lane_id();
    return ::cudasim::shfl(mask, v, ::cudasim::in_group(lane, lane - (int)delta, width));
}

// Atomics on device memory: the CUDA threads of a block are fibers of one OS thread, but
// the stream threads of several kernels may run at once, and ThreadSanitizer must see them.
template <typename T> T atomicAdd(T *p, T v)
{
    ::cudasim::count_atomic();
    return std::atomic_ref<T>(*p).fetch_add(v);
}
template <typename T> T atomicExch(T *p, T v)
{
    ::cudasim::count_atomic();
    return std::atomic_ref<T>(*p).exchange(v);
}
template <typename T> T atomicMax(T *p, T v)
{
    ::cudasim::count_atomic();
    std::atomic_ref<T> a(*p);
    T old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {
    }
    return old;
}
template <typename T> T atomicMin(T *p, T v)
{
    ::cudasim::count_atomic();
    std::atomic_ref<T> a(*p);
    T old = a.load();
    while (v < old && !a.compare_exchange_weak(old, v)) {
    }
    return old;
}
template <typename T> T atomicCAS(T *p, T expected, T desired)
{
    ::cudasim::count_atomic();
    std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
    return expected;
}

// cuda_runtime.h's typed overload, which only nvcc's compile declares
template <typename T> cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value)
{
    return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr, value);
}

// ---- checked __shared__ arrays ----------------------------------------------------------
// The rewrite turns `__shared__ T a[N];` into a Shared<T, N>: each element's last write and
// read (thread, barrier interval, warp operations passed) are kept, and an access that
// another thread's access in the same interval is not ordered with (no __syncthreads
// between, nor a __syncwarp within a warp) is a finding, as are a read of an element the
// block has not written and an index past the end: compute-sanitizer's racecheck, initcheck
// and memcheck for shared memory, deterministically, in every build.

namespace cudasim
{

// kind: "read-after-write", "write-after-write", "write-after-read", "uninitialised read",
// "out of bounds"; other < 0 when no other thread is involved.
void shared_finding(const char *var, size_t index, size_t size, const char *kind, unsigned thread,
                    int other);

template <typename T, size_t N> class Shared
{
    struct Shadow {
        uint64_t run = 0, write_phase = 0, read_phase = 0, writer_ops = 0, reader_ops = 0;
        int writer = -1, reader = -1;
        bool written = false;
    };
    T data_[N];
    Shadow sh_[N];
    const char *name_;
    uint64_t reported_ = 0; // the block run that had a finding (one per block run)

    static bool ordered(const SharedClock &c, int other, uint64_t ops, uint64_t phase)
    {
        return other < 0 || phase < c.phase || (unsigned)other == c.thread ||
               ((unsigned)other / 32 == c.thread / 32 && c.warp_ops > ops);
    }
    __attribute__((no_sanitize("thread"))) void report(const SharedClock &c, size_t i,
                                                       const char *kind, int other)
    {
        if (reported_ == c.block_run)
            return;
        reported_ = c.block_run;
        shared_finding(name_, i, N, kind, c.thread, other);
    }
    __attribute__((no_sanitize("thread"))) Shadow &shadow(const SharedClock &c, size_t i)
    {
        Shadow &s = sh_[i];
        if (s.run != c.block_run) // a new block: its shared memory holds nothing yet
            s = Shadow{c.block_run};
        return s;
    }

    // The shadow is the checker's, not the kernel's: ThreadSanitizer (which sees the data)
    // must not take two threads' legitimate reads for a race on it.
    __attribute__((no_sanitize("thread"))) void track_read(size_t i)
    {
        SharedClock c = shared_clock();
        Shadow &s = shadow(c, i);
        if (!s.written)
            report(c, i, "uninitialised read", -1);
        else if (!ordered(c, s.writer, s.writer_ops, s.write_phase))
            report(c, i, "read-after-write", s.writer);
        if (s.read_phase != c.phase || s.reader < 0 ||
            ordered(c, s.reader, s.reader_ops, s.read_phase))
            s.reader = (int)c.thread, s.reader_ops = c.warp_ops, s.read_phase = c.phase;
    }
    __attribute__((no_sanitize("thread"))) void track_write(size_t i)
    {
        SharedClock c = shared_clock();
        Shadow &s = shadow(c, i);
        if (s.written && !ordered(c, s.writer, s.writer_ops, s.write_phase))
            report(c, i, "write-after-write", s.writer);
        else if (s.reader >= 0 && !ordered(c, s.reader, s.reader_ops, s.read_phase))
            report(c, i, "write-after-read", s.reader);
        s.written = true, s.writer = (int)c.thread, s.writer_ops = c.warp_ops;
        s.write_phase = c.phase;
    }

public:
    // constexpr: constant-initialised, so no thread takes an initialisation guard (a race
    // between CUDA threads as ThreadSanitizer would see it)
    constexpr explicit Shared(const char *name) : data_{}, sh_{}, name_(name) {}

    T load(size_t i)
    {
        track_read(i);
        return data_[i];
    }
    void store(size_t i, T v)
    {
        track_write(i);
        data_[i] = v;
    }

    class Ref
    {
        Shared *s_;
        size_t i_;

    public:
        Ref(Shared *s, size_t i) : s_(s), i_(i) {}
        operator T() const { return s_->load(i_); }
        Ref &operator=(T v)
        {
            s_->store(i_, v);
            return *this;
        }
        Ref &operator=(const Ref &o) { return *this = static_cast<T>(o); }
        Ref &operator+=(T v) { return *this = s_->load(i_) + v; }
        Ref &operator-=(T v) { return *this = s_->load(i_) - v; }
        Ref &operator*=(T v) { return *this = s_->load(i_) * v; }
        Ref &operator/=(T v) { return *this = s_->load(i_) / v; }
    };

    template <typename I> Ref operator[](I index)
    {
        size_t i = static_cast<size_t>(index);
        if (index < 0 || i >= N) {
            shared_finding(name_, i, N, "out of bounds", shared_clock().thread, -1);
            i = 0; // the finding stands; keep the process alive in log mode
        }
        return Ref(this, i);
    }
    operator T *() { return data_; } // unchecked, for code that takes the array's address
};

} // namespace cudasim

// ---- transcendental functions a GPU computes to within an ulp or two ---------------------

namespace cudasim
{
uint64_t mix(uint64_t x); // splitmix64 (cudasim/src/state.cc)
}

namespace cudasim::dev
{

template <typename T> T nudge(T r, T x)
{
    if (!std::isfinite(r) || r == 0)
        return r;
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof x);
    switch (mix(bits) % 3) {
    case 0:
        return r;
    case 1:
        return std::nextafter(r, std::numeric_limits<T>::infinity());
    default:
        return std::nextafter(r, -std::numeric_limits<T>::infinity());
    }
}
inline float expf_(float x) { return nudge(::expf(x), x); }
inline float logf_(float x) { return nudge(::logf(x), x); }
inline float tanhf_(float x)
{
    float r = nudge(::tanhf(x), x);
    return std::fabs(r) > 1 ? std::copysign(1.0f, r) : r;
}
inline double exp_(double x) { return nudge(::exp(x), x); }
inline double log_(double x) { return nudge(::log(x), x); }

} // namespace cudasim::dev

#define expf(x) ::cudasim::dev::expf_(x)
#define logf(x) ::cudasim::dev::logf_(x)
#define tanhf(x) ::cudasim::dev::tanhf_(x)
#define exp(x) ::cudasim::dev::exp_(x)
#define log(x) ::cudasim::dev::log_(x)

// ---- launches: kernel<<<grid, block, shared, stream>>>(args) is rewritten to
// ::cudasim::launcher(kernel, "kernel")(grid, block, shared, stream)(args) -----------------

namespace cudasim
{

template <typename T> void pointer_arg(std::vector<KernelArg> &out, int index, const T &v)
{
    if constexpr (std::is_pointer_v<T>)
        out.push_back(
            {index, static_cast<const void *>(v), std::is_const_v<std::remove_pointer_t<T>>});
}

template <typename... P> struct Launcher {
    void (*kernel)(P...);
    const char *name;
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;

    template <typename... A> cudaError_t operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P),
                      "kernel launched with the wrong argument count");
        std::tuple<std::decay_t<P>...> args(static_cast<std::decay_t<P>>(std::forward<A>(a))...);
        std::vector<KernelArg> pointers;
        int index = 0;
        std::apply([&](const auto &...v) { (pointer_arg(pointers, index++, v), ...); }, args);
        auto k = kernel;
        return launch_kernel(name, reinterpret_cast<const void *>(kernel), grid, block, shared,
                             stream, std::move(pointers), [k, args] { std::apply(k, args); });
    }
};

template <typename... P> struct LaunchSite {
    void (*kernel)(P...);
    const char *name;
    Launcher<P...> operator()(dim3 grid, dim3 block, size_t shared = 0,
                              cudaStream_t stream = nullptr) const
    {
        return {kernel, name, grid, block, shared, stream};
    }
};

template <typename... P> LaunchSite<P...> launcher(void (*kernel)(P...), const char *name)
{
    return {kernel, name};
}

} // namespace cudasim

// The sources' device code paths (defined last: the CUDA headers above are host builds).
#define __CUDACC__ 1
#define __CUDA_ARCH__ 900

#endif

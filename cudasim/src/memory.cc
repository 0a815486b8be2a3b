// Device memory as host memory behind a range table. A device allocation is 256-byte aligned
// (as cudaMalloc's), starts filled with 0xff bytes (NaN as floats: a read of memory nobody
// wrote shows up in the results) and sits between guard bytes that are checked after each
// kernel that could reach it and at its free. Stream-ordered pools keep freed blocks, counted
// as used, up to their release threshold, as CUDA's do; a cached block is handed out again
// for a request it fits. Callers hold State::mu.
#include "internal.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

namespace cudasim {
namespace {

constexpr size_t kAlign = 256, kGuard = 256;
constexpr unsigned char kGuardByte = 0xa5, kFreshByte = 0xff;
constexpr size_t kFreedKept = 4096;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

void fill_guards(Alloc *a)
{
    memset(a->raw, kGuardByte, kGuard);
    memset(a->ptr + a->size, kGuardByte, (size_t)(a->raw + a->raw_size - (a->ptr + a->size)));
}

void remember_freed(Alloc *a)
{
    State &s = state();
    if (s.freed.size() >= kFreedKept)
        s.freed.clear();
    s.freed[(uintptr_t)a->ptr] = {a->size, a->origin};
}

Alloc *reuse_cached(Pool *pool, size_t bytes)
{
    Alloc *best = nullptr;
    size_t at = 0;
    for (size_t i = 0; i < pool->cached.size(); i++) {
        Alloc *c = pool->cached[i];
        if (c->reserved >= bytes && c->reserved <= 2 * bytes + kAlign &&
            (!best || c->reserved < best->reserved))
            best = c, at = i;
    }
    if (best)
        pool->cached.erase(pool->cached.begin() + (long)at);
    return best;
}

} // namespace

Alloc *find_alloc(const void *p)
{
    State &s = state();
    auto it = s.allocs.upper_bound((uintptr_t)p);
    if (it == s.allocs.begin())
        return nullptr;
    --it;
    Alloc *a = it->second;
    return (uintptr_t)p < (uintptr_t)a->ptr + (a->size ? a->size : 1) ? a : nullptr;
}

std::string describe_ptr(const void *p)
{
    char buf[256];
    if (Alloc *a = find_alloc(p)) {
        static const char *const kinds[] = {"device memory", "pinned host memory",
                                            "registered host memory"};
        snprintf(buf, sizeof buf, "%p (byte %zu of %zu of %s from %s%s%d)", p,
                 (size_t)((const char *)p - a->ptr), a->size, kinds[(int)a->kind], a->origin,
                 a->device >= 0 ? " on device " : "", a->device >= 0 ? a->device : 0);
        return buf;
    }
    State &s = state();
    auto it = s.freed.upper_bound((uintptr_t)p);
    if (it != s.freed.begin()) {
        --it;
        if ((uintptr_t)p < it->first + it->second.first) {
            snprintf(buf, sizeof buf, "%p (inside %zu bytes from %s, already freed)", p,
                     it->second.first, it->second.second);
            return buf;
        }
    }
    snprintf(buf, sizeof buf, "%p (host memory the CUDA runtime does not know: neither device, "
             "pinned nor registered)", p);
    return buf;
}

bool inject_alloc_failure()
{
    State &s = state();
    return s.fail_alloc_after > 0 && --s.fail_alloc_after == 0;
}

cudaError_t device_alloc(int device, size_t bytes, Pool *pool, const char *origin, void **out)
{
    State &s = state();
    Device &dev = s.devices[(size_t)device];
    if (inject_alloc_failure())
        return cudaErrorMemoryAllocation;
    if (pool) {
        if (Alloc *a = reuse_cached(pool, bytes)) {
            a->size = bytes;
            a->origin = origin;
            a->history.clear();
            memset(a->ptr, kFreshByte, bytes);
            fill_guards(a);
            s.allocs[(uintptr_t)a->ptr] = a;
            *out = a->ptr;
            return cudaSuccess;
        }
    }
    size_t reserved = round_up(bytes ? bytes : 1, kAlign);
    if (dev.used + reserved > settings().mem)
        return cudaErrorMemoryAllocation;
    auto *a = new Alloc;
    a->raw_size = kGuard + reserved + kGuard;
    a->raw = static_cast<char *>(aligned_alloc(kAlign, a->raw_size));
    if (!a->raw) {
        delete a;
        return cudaErrorMemoryAllocation;
    }
    a->ptr = a->raw + kGuard;
    a->size = bytes;
    a->reserved = reserved;
    a->device = device;
    a->pool = pool;
    a->origin = origin;
    memset(a->ptr, kFreshByte, bytes);
    fill_guards(a);
    dev.used += reserved;
    s.allocs[(uintptr_t)a->ptr] = a;
    *out = a->ptr;
    return cudaSuccess;
}

void check_guards(Alloc *a, const char *who)
{
    if (a->kind != MemKind::Device)
        return;
    const char *end = a->raw + a->raw_size;
    for (const char *p = a->raw; p < end; p++) {
        if (p == a->ptr)
            p = a->ptr + a->size;
        if (p < end && (unsigned char)*p != kGuardByte) {
            long off = (long)(p - a->ptr);
            finding("%s wrote outside device memory: byte %ld of an allocation of %zu bytes "
                    "from %s on device %d (%s its end)", who, off, a->size, a->origin,
                    a->device, off < 0 ? "before" : "after");
            fill_guards(a);
            return;
        }
    }
}

void release_alloc(Alloc *a)
{
    State &s = state();
    s.allocs.erase((uintptr_t)a->ptr);
    remember_freed(a);
    if (a->kind == MemKind::Device) {
        check_guards(a, "a kernel or copy");
        s.devices[(size_t)a->device].used -= a->reserved;
        free(a->raw);
    } else {
        pages_forget(a->ptr, a->ptr + a->size);
        if (a->kind == MemKind::Pinned)
            munmap(a->raw, a->raw_size);
    }
    delete a;
}

void pool_trim(Pool *p, uint64_t keep)
{
    uint64_t cached = 0;
    for (Alloc *a : p->cached)
        cached += a->reserved;
    while (cached > keep && !p->cached.empty()) {
        Alloc *a = p->cached.front();
        p->cached.erase(p->cached.begin());
        cached -= a->reserved;
        state().devices[(size_t)a->device].used -= a->reserved;
        free(a->raw);
        delete a;
    }
}

} // namespace cudasim

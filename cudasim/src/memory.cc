/* SPDX-License-Identifier: MIT */
// Device memory as host memory behind a range table, laid out and protected so that what a
// GPU would not allow faults here:
//   [guard page][data, rounded up to pages][guard page]
// The data is page-aligned (so 256-byte aligned, as cudaMalloc's), starts filled with 0xff
// bytes (NaN as floats: a read of memory nobody wrote shows up in the results), and the
// bytes between its end and the page's end are guard bytes, checked after each kernel that
// could reach it and at its free. The data pages are inaccessible (PROT_NONE) except while
// a stream's thread runs an operation that uses them: host code that dereferences a device
// pointer faults, and the handler reports it (device_fault). Freed memory stays mapped and
// inaccessible for a while (a quarantine), so a late use faults too. Stream-ordered pools keep
// freed blocks, counted as used, up to their release threshold, as CUDA's do; a cached block
// is handed out again for a request it fits. Callers hold State::mu unless stated.
#include "internal.h"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <sys/mman.h>
#include <unistd.h>

namespace cudasim
{
namespace
{

constexpr unsigned char kGuardByte = 0xa5, kFreshByte = 0xff;
constexpr size_t kFreedKept = 4096;
constexpr size_t kQuarantineBytes = (size_t)256 << 20;

size_t page_size()
{
    static const size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

size_t data_bytes(const Alloc *a) { return a->raw_size - 2 * page_size(); }

void protect(Alloc *a, int prot) { mprotect(a->ptr, data_bytes(a), prot); }

// ---- what the SIGSEGV handler may read: the device ranges, under a spin lock it only tries
struct Range {
    uintptr_t lo, hi; // the whole mapping, guard pages included
    uintptr_t ptr;    // the data
    size_t size;      // what the caller asked for
    const char *origin;
    int device;
    bool freed;
    bool opened_for_good; // a fault was reported (log mode): left accessible
};
std::atomic_flag g_ranges_lock = ATOMIC_FLAG_INIT;
std::vector<Range> &g_ranges = *new std::vector<Range>; // never destroyed (see state())

void ranges_lock()
{
    while (g_ranges_lock.test_and_set(std::memory_order_acquire))
        sched_yield();
}
void ranges_unlock() { g_ranges_lock.clear(std::memory_order_release); }

void ranges_set(const Alloc *a, bool freed)
{
    ranges_lock();
    Range r{(uintptr_t)a->raw,
            (uintptr_t)a->raw + a->raw_size,
            (uintptr_t)a->ptr,
            a->size,
            a->origin,
            a->device,
            freed,
            false};
    bool found = false;
    for (Range &x : g_ranges)
        if (x.lo == r.lo) {
            x = r;
            found = true;
        }
    if (!found)
        g_ranges.push_back(r);
    ranges_unlock();
}

void ranges_drop(const Alloc *a)
{
    ranges_lock();
    for (size_t i = 0; i < g_ranges.size(); i++)
        if (g_ranges[i].lo == (uintptr_t)a->raw) {
            g_ranges[i] = g_ranges.back();
            g_ranges.pop_back();
            break;
        }
    ranges_unlock();
}

std::deque<Alloc *> &g_quarantine = *new std::deque<Alloc *>; // never destroyed
size_t g_quarantined = 0;

void unmap(Alloc *a)
{
    ranges_drop(a);
    munmap(a->raw, a->raw_size);
    delete a;
}

// Freed device memory stays mapped, inaccessible, until newer frees push it out.
void quarantine(Alloc *a)
{
    protect(a, PROT_NONE);
    ranges_set(a, true);
    g_quarantine.push_back(a);
    g_quarantined += a->raw_size;
    while (g_quarantined > kQuarantineBytes && !g_quarantine.empty()) {
        Alloc *old = g_quarantine.front();
        g_quarantine.pop_front();
        g_quarantined -= old->raw_size;
        unmap(old);
    }
}

void fill_guards(Alloc *a) { memset(a->ptr + a->size, kGuardByte, data_bytes(a) - a->size); }

void fill_fresh(Alloc *a)
{
    open_alloc(a);
    memset(a->ptr, kFreshByte, a->size);
    fill_guards(a);
    close_alloc(a);
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
        size_t room = data_bytes(c);
        if (room >= bytes && room <= 2 * bytes + page_size() && (!best || room < data_bytes(best)))
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
    snprintf(buf, sizeof buf,
             "%p (host memory the CUDA runtime does not know: neither device, "
             "pinned nor registered)",
             p);
    return buf;
}

bool inject_alloc_failure()
{
    State &s = state();
    if (s.fail_alloc_after > 1) {
        s.fail_alloc_after--;
        return false;
    }
    return s.fail_alloc_after == 1; /* from the n-th on */
}

void open_alloc(Alloc *a)
{
    if (a->kind == MemKind::Device && a->open++ == 0)
        protect(a, PROT_READ | PROT_WRITE);
}

// True when a fault in it was reported in log mode: it stays accessible.
static bool opened_for_good(const Alloc *a)
{
    ranges_lock();
    bool good = false;
    for (const Range &r : g_ranges)
        if (r.lo == (uintptr_t)a->raw)
            good = r.opened_for_good;
    ranges_unlock();
    return good;
}

void close_alloc(Alloc *a)
{
    if (a->kind == MemKind::Device && --a->open == 0 && !opened_for_good(a))
        protect(a, PROT_NONE);
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
            a->free_pending = false;
            a->serial = ++s.next_serial;
            fill_fresh(a);
            s.allocs[(uintptr_t)a->ptr] = a;
            ranges_set(a, false);
            *out = a->ptr;
            return cudaSuccess;
        }
    }
    size_t data = round_up(bytes ? bytes : 1, page_size());
    if (dev.used + data > settings().mem)
        return cudaErrorMemoryAllocation;
    void *m = mmap(nullptr, data + 2 * page_size(), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return cudaErrorMemoryAllocation;
    auto *a = new Alloc;
    a->raw = static_cast<char *>(m);
    a->raw_size = data + 2 * page_size();
    a->ptr = a->raw + page_size();
    a->size = bytes;
    a->reserved = data;
    a->device = device;
    a->pool = pool;
    a->origin = origin;
    a->serial = ++s.next_serial;
    fill_fresh(a);
    dev.used += data;
    s.allocs[(uintptr_t)a->ptr] = a;
    ranges_set(a, false);
    *out = a->ptr;
    return cudaSuccess;
}

// The caller has the allocation open (or opens it here).
void check_guards(Alloc *a, const char *who)
{
    if (a->kind != MemKind::Device)
        return;
    open_alloc(a);
    const char *end = a->ptr + data_bytes(a);
    for (const char *p = a->ptr + a->size; p < end; p++)
        if ((unsigned char)*p != kGuardByte) {
            finding("%s wrote outside device memory: byte %ld of an allocation of %zu bytes "
                    "from %s on device %d (after its end)",
                    who, (long)(p - a->ptr), a->size, a->origin, a->device);
            fill_guards(a);
            break;
        }
    close_alloc(a);
}

// Out of the table; device memory into the quarantine (a pool's block into its cache).
void release_alloc(Alloc *a)
{
    State &s = state();
    s.allocs.erase((uintptr_t)a->ptr);
    remember_freed(a);
    if (a->kind == MemKind::Device) {
        check_guards(a, "a kernel or copy");
        a->open = 0; // whatever was using it is past: inaccessible from here on
        protect(a, PROT_NONE);
        if (a->pool) {
            a->pool->cached.push_back(a);
            ranges_set(a, true);
            return;
        }
        s.devices[(size_t)a->device].used -= a->reserved;
        quarantine(a);
        return;
    }
    pages_forget(a->ptr, a->ptr + a->size);
    if (a->kind == MemKind::Pinned)
        munmap(a->raw, a->raw_size);
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
        a->pool = nullptr;
        quarantine(a);
    }
}

// From the SIGSEGV handler: a fault in device memory (or its guard pages, or freed device
// memory) is a finding. Returns true when the access may be retried (log mode: the page is
// left accessible from now on).
bool device_fault(void *addr, bool write, char *msg, size_t len)
{
    uintptr_t x = (uintptr_t)addr;
    ranges_lock();
    Range *r = nullptr;
    for (Range &c : g_ranges)
        if (x >= c.lo && x < c.hi)
            r = &c;
    if (!r) {
        ranges_unlock();
        return false;
    }
    const char *who = running_where();
    long off = (long)(x - r->ptr);
    const char *what = r->freed ? "freed device memory" : "device memory";
    char where[96];
    if (off < 0 || (size_t)off >= round_up(r->size ? r->size : 1, page_size()))
        snprintf(where, sizeof where, "%ld bytes %s", off < 0 ? -off : off - (long)r->size,
                 off < 0 ? "before its start" : "past its end");
    else
        snprintf(where, sizeof where, "byte %ld", off);
    snprintf(msg, len, "%s %s %s, %s of %zu bytes from %s on device %d%s", who,
             write ? "wrote" : "read", what, where, r->size, r->origin, r->device,
             strcmp(who, "host code") == 0
                 ? ": device memory is not host memory on a GPU (copy it with cudaMemcpy)"
             : r->freed ? ""
                        : " that it was not given as an argument");
    uintptr_t page = x / page_size() * page_size();
    r->opened_for_good = true;
    ranges_unlock();
    mprotect((void *)page, page_size(), PROT_READ | PROT_WRITE);
    return true;
}

} // namespace cudasim

/* SPDX-License-Identifier: MIT */
// Streams: each a FIFO of operations run by a thread of its own, after a seeded random delay
// (so that two streams' work interleaves differently from run to run of different seeds),
// and ordering as CUDA defines it: an operation runs after the stream's earlier ones and
// after the events it was made to wait for; the NULL stream and blocking streams wait for
// each other. Beside the real waiting, every operation gets a vector clock when it is queued
// (what it is ordered after: its stream, the events waited for, what the host had observed)
// and its memory accesses are checked against every earlier access to the same bytes that
// it is not ordered after. The check depends only on the order of API calls, not on timing,
// so a missing event wait is found on every run.
#include "internal.h"

#include <chrono>
#include <cstdio>

namespace cudasim
{

void host_observed(const VClock &c)
{
    State &st = state();
    st.host.join(c);
    pages_observed(st.host);
    for (Device &d : st.devices)
        pool_trim(&d.default_pool, d.default_pool.release_threshold);
    for (auto &p : st.pools)
        pool_trim(p.get(), p->release_threshold);
}

std::string stream_name(const Stream *s)
{
    char buf[64];
    if (s->legacy)
        snprintf(buf, sizeof buf, "the NULL stream of device %d", s->device);
    else
        snprintf(buf, sizeof buf, "stream #%d (device %d)", s->label, s->device);
    return buf;
}

static void delay(Stream *s)
{
    unsigned max_us = settings().delay_us;
    s->rng = mix(s->rng);
    if (max_us && s->rng % 8 == 0)
        std::this_thread::sleep_for(std::chrono::microseconds((s->rng >> 32) % max_us));
}

// Device memory an operation uses, opened for it (and closed after, unless it was freed
// meanwhile: a reused block has another serial).
struct Opened {
    const void *ptr;
    Alloc *a;
    uint64_t serial;
};

static std::vector<Opened> open_touched(const std::vector<const void *> &touch)
{
    std::vector<Opened> opened;
    for (const void *p : touch)
        if (Alloc *a = find_alloc(p); a && a->kind == MemKind::Device) {
            open_alloc(a);
            opened.push_back({p, a, a->serial});
        }
    return opened;
}

static void close_opened(const std::vector<Opened> &opened)
{
    for (const Opened &o : opened)
        if (find_alloc(o.ptr) == o.a && o.a->serial == o.serial)
            close_alloc(o.a);
}

static void worker(std::shared_ptr<Stream> s)
{
    State &st = state();
    std::unique_lock<std::mutex> lk(st.mu);
    for (;;) {
        s->cv.wait(lk, [&] { return !s->queue.empty() || s->destroyed || st.shutting_down; });
        if (s->queue.empty())
            break;
        Op &op = s->queue.front(); // only this thread pops; deque keeps references on push
        for (auto &dep : op.deps) {
            const std::shared_ptr<Stream> &d = dep.first;
            uint64_t seq = dep.second;
            st.done.wait(lk, [&] { return d->completed >= seq; });
        }
        std::function<void()> run = std::move(op.run);
        if (op.host_fn) // the callback sees what its stream did, and may tell the host
            host_observed(op.clock);
        std::vector<Opened> opened = open_touched(op.touch);
        lk.unlock();
        delay(s.get());
        if (op.host_fn)
            set_in_host_fn(true);
        run();
        set_in_host_fn(false);
        lk.lock();
        close_opened(opened);
        s->completed = op.seq;
        s->done_clock = op.clock;
        s->queue.pop_front();
        st.done.notify_all();
    }
}

std::shared_ptr<Stream> make_stream(int device, bool blocking, bool legacy)
{
    State &st = state();
    auto s = std::make_shared<Stream>();
    s->agent = st.next_agent++;
    s->label = st.next_label++;
    s->device = device;
    s->blocking = blocking;
    s->legacy = legacy;
    s->rng = mix(settings().seed * 0x100000001b3ull + (uint64_t)s->label);
    st.all.push_back(s);
    std::thread(worker, s).detach();
    return s;
}

std::shared_ptr<Stream> legacy_stream(int device)
{
    Device &d = state().devices[(size_t)device];
    if (!d.legacy)
        d.legacy = make_stream(device, true, true);
    return d.legacy;
}

std::shared_ptr<Stream> stream_of(cudaStream_t h, cudaError_t *err)
{
    State &st = state();
    *err = cudaSuccess;
    if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread)
        return legacy_stream(current_device());
    auto it = st.streams.find(reinterpret_cast<Stream *>(h));
    if (it == st.streams.end()) {
        *err = cudaErrorInvalidResourceHandle;
        finding("stream handle %p is not a live stream (destroyed, or never created)", (void *)h);
        return nullptr;
    }
    return it->second;
}

void record_access(Stream *s, Alloc *a, size_t lo, size_t hi, bool write, const std::string &what)
{
    for (const AccessRec &r : a->history) {
        if (r.agent == s->agent || r.hi <= lo || r.lo >= hi || !(write || r.write) ||
            s->clock.covers(r.agent, r.epoch))
            continue;
        finding("unordered accesses to %s: %s on %s %s bytes [%zu, %zu), while %s %s bytes "
                "[%zu, %zu), and nothing orders the two (record an event after the first and "
                "make the second's stream wait for it, or synchronize in between)",
                describe_ptr(a->ptr).c_str(), what.c_str(), stream_name(s).c_str(),
                write ? "writes" : "reads", lo, hi, r.what, r.write ? "wrote" : "read", r.lo, r.hi);
        break;
    }
    auto &h = a->history;
    for (size_t i = 0; i < h.size();) {
        bool dominated =
            h[i].agent == s->agent && h[i].lo >= lo && h[i].hi <= hi && (write || !h[i].write);
        if (dominated)
            h.erase(h.begin() + (long)i);
        else
            i++;
    }
    if (h.size() >= 64)
        h.erase(h.begin());
    AccessRec rec{s->agent, s->clock.get(s->agent), lo, hi, write, {0}};
    snprintf(rec.what, sizeof rec.what, "%s on %s", what.c_str(), stream_name(s).c_str());
    h.push_back(rec);
}

uint64_t enqueue(std::unique_lock<std::mutex> &lk, Stream *s, std::string what,
                 const std::vector<Access> &acc, std::function<void()> run, bool host_fn, Deps deps)
{
    (void)lk; // held by the caller
    State &st = state();
    install_fault_handler();
    Op op;
    op.deps = std::move(deps);
    if (s->legacy) { // the NULL stream waits for every blocking stream's earlier work
        for (auto &w : st.all)
            if (auto b = w.lock(); b && b.get() != s && b->blocking && b->device == s->device) {
                op.deps.emplace_back(b, b->enqueued);
                s->clock.join(b->clock);
            }
    } else if (s->blocking) { // ... and they for its
        auto l = legacy_stream(s->device);
        op.deps.emplace_back(l, l->enqueued);
        s->clock.join(l->clock);
    }
    s->clock.join(st.host);
    op.seq = ++s->enqueued;
    s->clock.set(s->agent, op.seq);
    for (const Access &a : acc) {
        Alloc *al = a.ptr ? find_alloc(a.ptr) : nullptr;
        if (!al)
            continue; // pageable host memory: the callers copy it at the call
        if (al->free_pending)
            finding("%s on %s uses %s after a cudaFreeAsync of it was queued", what.c_str(),
                    stream_name(s).c_str(), describe_ptr(a.ptr).c_str());
        size_t lo = (size_t)((const char *)a.ptr - al->ptr);
        size_t hi = a.bytes == SIZE_MAX ? al->size : lo + a.bytes;
        record_access(s, al, lo, hi, a.write, what);
        if (al->kind == MemKind::Device)
            op.touch.push_back(a.ptr);
    }
    op.what = std::move(what);
    op.run = std::move(run);
    op.clock = s->clock;
    op.host_fn = host_fn;
    s->queue.push_back(std::move(op));
    s->cv.notify_one();
    return s->enqueued;
}

void wait_for(std::unique_lock<std::mutex> &lk, const std::shared_ptr<Stream> &s, uint64_t seq)
{
    State &st = state();
    st.done.wait(lk, [&] { return s->completed >= seq; });
    host_observed(s->done_clock);
}

void wait_device(std::unique_lock<std::mutex> &lk, int device)
{
    State &st = state();
    std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> targets;
    for (auto &w : st.all)
        if (auto s = w.lock(); s && (device < 0 || s->device == device))
            targets.emplace_back(s, s->enqueued);
    for (auto &t : targets)
        wait_for(lk, t.first, t.second);
}

// At exit: let queued work finish (bounded: a collective that hangs on purpose must not
// keep the process alive), then stop the threads.
void shutdown_streams()
{
    State &st = state();
    std::unique_lock<std::mutex> lk(st.mu);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (auto &w : st.all)
        if (auto s = w.lock())
            st.done.wait_until(lk, deadline, [&] { return s->completed >= s->enqueued; });
    st.shutting_down = true;
    for (auto &w : st.all)
        if (auto s = w.lock())
            s->cv.notify_all();
}

} // namespace cudasim

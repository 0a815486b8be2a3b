/* SPDX-License-Identifier: MIT */
// A kernel's grid on the CPU: blocks one after another, in an order drawn from the launch's
// seed (a kernel whose result depends on block order shows it), and each block's threads as
// fibers, resumed in a random order at every step. A thread runs until it reaches
// __syncthreads, a warp operation (__syncwarp, a shuffle) or its end; a barrier opens when
// every thread still running has reached it, a warp operation when every lane of its mask
// has. A barrier or warp operation that some thread can never reach (it exited, or waits at
// another one) is a finding naming the kernel, the block and the threads: on a GPU it hangs
// or is undefined.
//
// Under ThreadSanitizer the fibers are threads to it: switching between them carries no
// ordering, the barriers release and acquire, so two threads touching the same bytes with
// no barrier between them are reported as a race (it stands in for racecheck).
#include "fiber.h"
#include "internal.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector_functions.h>

namespace cudasim
{

thread_local ThreadCtx *t_ctx = nullptr;

namespace
{

enum : int { kReady, kAtBarrier, kAtWarp, kExited };

// Written by the thread's own fiber, read by the scheduler: relaxed atomics (they carry no
// ordering between CUDA threads, so ThreadSanitizer still sees the threads' own races).
struct Thread {
    ThreadCtx ctx;
    std::atomic<int> state{kReady};
    std::atomic<uint64_t> warp_seq{0}; // warp operations started
    std::atomic<unsigned> warp_mask{0};
    bool started = false;
};

struct Warp {
    unsigned char slots[2][32][8]; // each lane's value, by operation parity
    char sync[2];                  // ThreadSanitizer's release/acquire addresses
};

struct Block {
    const Launch *launch;
    unsigned n, nwarps;
    std::unique_ptr<Thread[]> th;
    std::unique_ptr<Warp[]> warps;
    std::vector<unsigned> ready;
    unsigned at_barrier = 0, exited = 0;
    uint64_t phase = 0;
    char barrier_sync[2];
    char block_done;
    unsigned cur = 0;
    std::vector<unsigned char> dyn_shared;
    uint64_t rng;
    uint64_t run = 0; // block runs on this thread so far, for shared memory's freshness
    bool failed = false;
    char where[160];
};

thread_local uint64_t t_block_runs = 0;

thread_local Block *t_block = nullptr;

unsigned draw(Block &b, unsigned n)
{
    b.rng = mix(b.rng);
    return (unsigned)(b.rng % n);
}

std::string block_name(const Block &b) { return b.where; }

unsigned warp_lanes(const Block &b, unsigned w) { return std::min(32u, b.n - 32 * w); }

// After thread i yielded at a warp operation: opens it when every lane of the mask is there.
void try_open_warp(Block &b, unsigned i)
{
    unsigned w = i / 32, lanes = warp_lanes(b, w);
    unsigned mask = b.th[i].warp_mask.load(std::memory_order_relaxed);
    uint64_t seq = b.th[i].warp_seq.load(std::memory_order_relaxed);
    for (unsigned l = 0; l < lanes; l++) {
        if (!(mask >> l & 1))
            continue;
        Thread &o = b.th[32 * w + l];
        if (o.state.load(std::memory_order_relaxed) != kAtWarp ||
            o.warp_seq.load(std::memory_order_relaxed) != seq)
            return;
    }
    for (unsigned l = 0; l < lanes; l++)
        if (mask >> l & 1) {
            b.th[32 * w + l].state.store(kReady, std::memory_order_relaxed);
            b.ready.push_back(32 * w + l);
        }
}

// Every running thread is at the barrier: a warp with some lanes exited and others waiting
// is divergence (a finding); then all go on.
void open_barrier(Block &b)
{
    for (unsigned w = 0; w < b.nwarps; w++) {
        unsigned waiting = 0, gone = 0;
        for (unsigned l = 0; l < warp_lanes(b, w); l++) {
            int st = b.th[32 * w + l].state.load(std::memory_order_relaxed);
            waiting += st == kAtBarrier, gone += st == kExited;
        }
        if (waiting && gone) {
            finding("%s: __syncthreads reached by %u lanes of warp %u while %u of its lanes "
                    "have exited (barrier divergence: undefined on a GPU)",
                    block_name(b).c_str(), waiting, w, gone);
            b.failed = true;
        }
    }
    for (unsigned i = 0; i < b.n; i++)
        if (b.th[i].state.load(std::memory_order_relaxed) == kAtBarrier) {
            b.th[i].state.store(kReady, std::memory_order_relaxed);
            b.ready.push_back(i);
        }
    b.at_barrier = 0;
    b.phase++;
}

// Nothing can run and not every thread is done: says who waits where.
void report_stuck(Block &b)
{
    std::string who;
    for (unsigned w = 0; w < b.nwarps && who.size() < 600; w++) {
        unsigned at_bar = 0, at_warp = 0, gone = 0;
        for (unsigned l = 0; l < warp_lanes(b, w); l++) {
            int st = b.th[32 * w + l].state.load(std::memory_order_relaxed);
            at_bar += st == kAtBarrier, at_warp += st == kAtWarp, gone += st == kExited;
        }
        if (at_warp) {
            char buf[160];
            snprintf(buf, sizeof buf,
                     "; warp %u: %u lanes in a warp operation (__shfl*_sync, "
                     "__syncwarp), %u at __syncthreads, %u exited",
                     w, at_warp, at_bar, gone);
            who += buf;
        }
    }
    finding("%s: no thread can go on: %u threads wait at __syncthreads, %u have exited%s "
            "(a GPU would hang or compute garbage)",
            block_name(b).c_str(), b.at_barrier, b.exited, who.c_str());
    b.failed = true;
}

void schedule(Block &b, FiberPool &pool, const std::function<void()> &work)
{
    for (;;) {
        if (b.ready.empty()) {
            if (b.exited == b.n)
                return;
            if (b.at_barrier && b.at_barrier + b.exited == b.n) {
                open_barrier(b);
                continue;
            }
            report_stuck(b);
            return;
        }
        unsigned k = draw(b, (unsigned)b.ready.size());
        unsigned i = b.ready[k];
        b.ready[k] = b.ready.back();
        b.ready.pop_back();
        Thread &t = b.th[i];
        b.cur = i;
        t_ctx = &t.ctx;
        Fiber *f = pool.get(i);
        if (!t.started) {
            t.started = true;
            pool.run(f, &work);
        } else {
            pool.resume(f);
        }
        if (f->done) {
            t.state.store(kExited, std::memory_order_relaxed);
            b.exited++;
            continue;
        }
        int st = t.state.load(std::memory_order_relaxed);
        if (st == kAtBarrier)
            b.at_barrier++;
        else if (st == kAtWarp)
            try_open_warp(b, i);
    }
}

ThreadCtx thread_ctx(const Launch &l, uint3 block, unsigned t)
{
    ThreadCtx c;
    c.thread_idx =
        make_uint3(t % l.block.x, t / l.block.x % l.block.y, t / (l.block.x * l.block.y));
    c.block_idx = block;
    c.block_dim = l.block;
    c.grid_dim = l.grid;
    return c;
}

// Fibers left inside their work by a stuck block start over for the next one.
void reset_stuck(Block &b, FiberPool &pool)
{
    for (unsigned i = 0; i < b.n; i++)
        if (b.th[i].started && !pool.get(i)->done)
            pool.reset(pool.get(i), &b.block_done);
}

bool run_block(Block &b, FiberPool &pool, uint3 block)
{
    const Launch &l = *b.launch;
    b.run = ++t_block_runs;
    snprintf(b.where, sizeof b.where, "kernel %s, block (%u, %u, %u)", l.name, block.x, block.y,
             block.z);
    for (unsigned i = 0; i < b.n; i++) {
        Thread &t = b.th[i];
        t.ctx = thread_ctx(l, block, i);
        t.state.store(kReady, std::memory_order_relaxed);
        t.warp_seq.store(0, std::memory_order_relaxed);
        t.started = false;
    }
    b.ready.resize(b.n);
    for (unsigned i = 0; i < b.n; i++)
        b.ready[i] = i;
    b.at_barrier = b.exited = 0;
    std::fill(b.dyn_shared.begin(), b.dyn_shared.end(), 0xff); // uninitialised on a GPU
    std::function<void()> work = [&b] {
        b.launch->body();
        tsan_release(&b.block_done);
    };
    schedule(b, pool, work);
    if (b.failed)
        reset_stuck(b, pool);
    tsan_acquire(&b.block_done); // the next block's shared memory is a fresh one
    return !b.failed;
}

// The blocks in a seeded order: a shuffle, or for huge grids a stride coprime with the count.
std::vector<uint64_t> block_order(uint64_t total, uint64_t seed)
{
    std::vector<uint64_t> order;
    if (total <= (1u << 20)) {
        order.resize(total);
        for (uint64_t i = 0; i < total; i++)
            order[i] = i;
        for (uint64_t i = total; i > 1; i--) {
            seed = mix(seed);
            std::swap(order[i - 1], order[seed % i]);
        }
    }
    return order;
}

} // namespace

cudaError_t run_grid(const Launch &l, uint64_t seed)
{
    Block b;
    b.launch = &l;
    b.n = l.block.x * l.block.y * l.block.z;
    b.nwarps = (b.n + 31) / 32;
    b.th.reset(new Thread[b.n]);
    b.warps.reset(new Warp[b.nwarps]);
    b.dyn_shared.resize(l.shared);
    b.rng = seed;
    FiberPool &pool = FiberPool::mine();
    Block *outer = t_block;
    t_block = &b;
    uint64_t total = (uint64_t)l.grid.x * l.grid.y * l.grid.z;
    std::vector<uint64_t> order = block_order(total, mix(seed));
    uint64_t stride = 1;
    if (order.empty()) // too many to list: a stride coprime with the count
        for (stride = mix(seed) % total | 1; std::gcd(stride, total) != 1; stride += 2) {
        }
    bool ok = true;
    for (uint64_t k = 0; k < total && ok; k++) {
        uint64_t i = order.empty() ? k * stride % total : order[k];
        uint3 bi = make_uint3((unsigned)(i % l.grid.x), (unsigned)(i / l.grid.x % l.grid.y),
                              (unsigned)(i / ((uint64_t)l.grid.x * l.grid.y)));
        ok = run_block(b, pool, bi);
    }
    t_block = outer;
    t_ctx = nullptr;
    return ok ? cudaSuccess : cudaErrorLaunchFailure;
}

void sync_block()
{
    Block &b = *t_block;
    Thread &t = b.th[b.cur];
    int parity = (int)(b.phase & 1);
    tsan_release(&b.barrier_sync[parity]);
    t.state.store(kAtBarrier, std::memory_order_relaxed);
    FiberPool::mine().yield();
    tsan_acquire(&b.barrier_sync[parity]);
}

// Each lane leaves its value in the slot of this operation's parity: a lane that runs ahead
// to the next operation writes the other parity, and cannot get two ahead (that one waits
// for every lane).
void warp_exchange(unsigned mask, const void *mine, void *out, size_t bytes, int src_lane)
{
    Block &b = *t_block;
    unsigned i = b.cur, lane = i % 32, w = i / 32;
    Thread &t = b.th[i];
    unsigned lanes = warp_lanes(b, w);
    unsigned present = lanes == 32 ? ~0u : (1u << lanes) - 1;
    if (!(mask >> lane & 1) || (mask & ~present)) {
        finding("%s: lane %u of warp %u calls a warp operation with mask %#x, which %s",
                block_name(b).c_str(), lane, w, mask,
                !(mask >> lane & 1) ? "leaves the lane itself out"
                                    : "names lanes this block does not have");
        mask = (mask & present) | 1u << lane;
    }
    uint64_t seq = t.warp_seq.load(std::memory_order_relaxed);
    int parity = (int)(seq & 1);
    Warp &W = b.warps[w];
    if (mine)
        memcpy(W.slots[parity][lane], mine, bytes);
    tsan_release(&W.sync[parity]);
    t.warp_mask.store(mask, std::memory_order_relaxed);
    t.warp_seq.store(seq + 1, std::memory_order_relaxed);
    t.state.store(kAtWarp, std::memory_order_relaxed);
    FiberPool::mine().yield();
    tsan_acquire(&W.sync[parity]);
    if (out) {
        int src = src_lane >= 0 && src_lane < 32 && (mask >> src_lane & 1) ? src_lane : (int)lane;
        memcpy(out, W.slots[parity][src], bytes);
    }
}

void sync_warp(unsigned mask) { warp_exchange(mask, nullptr, nullptr, 0, -1); }

void *dynamic_shared() { return t_block->dyn_shared.data(); }

SharedClock shared_clock()
{
    const Block &b = *t_block;
    return {b.run, b.phase, b.cur, b.th[b.cur].warp_seq.load(std::memory_order_relaxed)};
}

const char *running_where() { return t_block ? t_block->where : "host code"; }

void shared_finding(const char *var, size_t index, size_t size, const char *kind, unsigned thread,
                    int other)
{
    char who[64] = "";
    if (other >= 0)
        snprintf(who, sizeof who, " after thread %d's", other);
    finding("%s: __shared__ %s[%zu] (of %zu): %s by thread %u%s with no __syncthreads (or "
            "__syncwarp within a warp) between them%s",
            running_where(), var, index, size, kind, thread, who,
            strcmp(kind, "uninitialised read") == 0 ? "; the block never wrote it"
            : strcmp(kind, "out of bounds") == 0    ? "; the index is past the array"
                                                    : "");
}

} // namespace cudasim

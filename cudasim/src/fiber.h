/* SPDX-License-Identifier: MIT */
// User-space threads for CUDA threads: one stack each, switched by a few instructions (no
// system call), with the switches announced to AddressSanitizer and ThreadSanitizer so both
// follow a kernel's threads as threads. A pool belongs to one OS thread (a stream's).
#ifndef CUDASIM_FIBER_H
#define CUDASIM_FIBER_H

#include <cstddef>
#include <functional>
#include <vector>

namespace cudasim
{

struct Fiber {
    void *sp = nullptr;    // saved stack pointer while switched out
    char *stack = nullptr; // lowest usable byte
    size_t stack_size = 0;
    void *tsan = nullptr;                        // ThreadSanitizer's context for it
    void *asan_fake = nullptr;                   // AddressSanitizer's fake stack while switched out
    const std::function<void()> *work = nullptr; // what it runs when switched to
    bool done = false;                           // its work returned
};

// The calling OS thread's fibers; grows to the most a block has asked for.
class FiberPool
{
public:
    ~FiberPool();
    Fiber *get(size_t i); // the i-th fiber, made on first use
    // Runs `work` on f until it yields or finishes; returns on this (the scheduling) thread.
    void run(Fiber *f, const std::function<void()> *work);
    // Resumes f where it yielded.
    void resume(Fiber *f);
    // Abandons what f was running (a stuck block): its next run starts afresh. What f did
    // is released at `sync` first (ThreadSanitizer: as if f had finished there).
    void reset(Fiber *f, void *sync);
    // From inside a fiber: back to the scheduler. `sync` false: ThreadSanitizer sees no
    // ordering through the switch (the caller publishes what it must with release/acquire).
    void yield();

    static FiberPool &mine();
    Fiber *current() const { return cur_; }

private:
    void switch_to(Fiber *f);
    static void init_frame(Fiber *f);
    static void entry();
    std::vector<Fiber *> fibers_;
    Fiber sched_;          // the scheduling thread itself
    Fiber *cur_ = nullptr; // the running fiber (nullptr: the scheduler)
    char *map_ = nullptr;
};

// ThreadSanitizer's release/acquire on an address (no-ops in other builds): the barriers'
// ordering between fibers.
void tsan_release(void *addr);
void tsan_acquire(void *addr);

} // namespace cudasim

#endif

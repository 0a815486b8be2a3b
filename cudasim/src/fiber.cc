/* SPDX-License-Identifier: MIT */
// Fibers: a stack each and a six-register switch (x86-64 System V callee-saved registers
// and the stack pointer). A fiber's work runs in entry(), which loops so that a pool's
// fibers serve one block after another without new stacks.
#include "fiber.h"

#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(CUDASIM_TSAN_FIBERS)
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__)
#error "cudasim's fibers switch x86-64 registers; port cudasim_swap for this architecture"
#endif

// Saves the callee-saved registers on the current stack, stores the stack pointer in *save,
// switches to `next` and restores its registers; returns on the new stack.
extern "C" void cudasim_swap(void **save, void *next);
asm(R"(
    .text
    .globl cudasim_swap
    .type cudasim_swap, @function
cudasim_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cudasim_swap, .-cudasim_swap
    .section .note.GNU-stack,"",@progbits
    .text
)");

namespace cudasim
{
namespace
{

#if defined(__SANITIZE_ADDRESS__) || defined(CUDASIM_TSAN_FIBERS)
constexpr size_t kStack = 512 * 1024; // sanitizers' frames and interceptors are larger
#else
constexpr size_t kStack = 128 * 1024;
#endif
constexpr size_t kGuard = 4096;
constexpr size_t kMaxFibers = 1024; // a block's most threads

thread_local FiberPool *t_pool = nullptr;

} // namespace

void tsan_release(void *addr)
{
#if defined(CUDASIM_TSAN_FIBERS)
    __tsan_release(addr);
#else
    (void)addr;
#endif
}

void tsan_acquire(void *addr)
{
#if defined(CUDASIM_TSAN_FIBERS)
    __tsan_acquire(addr);
#else
    (void)addr;
#endif
}

FiberPool &FiberPool::mine()
{
    static thread_local FiberPool pool;
    t_pool = &pool;
    return pool;
}

FiberPool::~FiberPool()
{
    for (Fiber *f : fibers_) {
#if defined(CUDASIM_TSAN_FIBERS)
        __tsan_destroy_fiber(f->tsan);
#endif
        delete f;
    }
    if (map_) {
#if defined(__SANITIZE_ADDRESS__)
        // fibers left suspended keep their frames' redzones: clean, or the next mapping at
        // this address inherits them
        __asan_unpoison_memory_region(map_, kMaxFibers * (kStack + kGuard));
#endif
        munmap(map_, kMaxFibers * (kStack + kGuard));
    }
}

// The frame cudasim_swap returns into on the first switch: entry(), with the stack aligned
// as after a call.
void FiberPool::init_frame(Fiber *f)
{
#if defined(__SANITIZE_ADDRESS__)
    // frames that never returned (a stuck block, or stacks of an earlier mapping at this
    // address) leave their redzones behind
    __asan_unpoison_memory_region(f->stack, f->stack_size);
#endif
    void **sp = reinterpret_cast<void **>(f->stack + f->stack_size); // 16-byte aligned
    *--sp = nullptr;                          // entry's return address (never used)
    *--sp = reinterpret_cast<void *>(&entry); // where cudasim_swap's ret goes
    for (int r = 0; r < 6; r++)
        *--sp = nullptr; // rbp rbx r12-r15
    f->sp = sp;
}

void FiberPool::reset(Fiber *f, void *sync)
{
#if defined(CUDASIM_TSAN_FIBERS)
    __tsan_switch_to_fiber(f->tsan, __tsan_switch_to_fiber_no_sync); // accounting only
    __tsan_release(sync);
    __tsan_switch_to_fiber(sched_.tsan, __tsan_switch_to_fiber_no_sync);
#else
    (void)sync;
#endif
    f->asan_fake = nullptr;
    f->done = false;
    init_frame(f);
}

Fiber *FiberPool::get(size_t i)
{
    if (!map_) {
        map_ = static_cast<char *>(mmap(nullptr, kMaxFibers * (kStack + kGuard),
                                        PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        if (map_ == MAP_FAILED) {
            fprintf(stderr, "cudasim: no address space for fiber stacks\n");
            abort();
        }
#if defined(CUDASIM_TSAN_FIBERS)
        sched_.tsan = __tsan_get_current_fiber();
#endif
    }
    while (fibers_.size() <= i) {
        auto *f = new Fiber;
        char *base = map_ + fibers_.size() * (kStack + kGuard);
        mprotect(base, kGuard, PROT_NONE); // an overflow faults instead of corrupting
        f->stack = base + kGuard;
        f->stack_size = kStack;
        init_frame(f);
#if defined(CUDASIM_TSAN_FIBERS)
        f->tsan = __tsan_create_fiber(0);
#endif
        fibers_.push_back(f);
    }
    return fibers_[i];
}

void FiberPool::switch_to(Fiber *to)
{
    Fiber *from = cur_ ? cur_ : &sched_;
    cur_ = to == &sched_ ? nullptr : to;
#if defined(__SANITIZE_ADDRESS__)
    // a fiber is never destroyed while the pool lives (it serves the next CUDA thread)
    __sanitizer_start_switch_fiber(&from->asan_fake, to->stack, to->stack_size);
#endif
#if defined(CUDASIM_TSAN_FIBERS)
    // into a fiber: it sees what the scheduler saw (the launch); back: nothing carried, so
    // two CUDA threads are ordered only by the barriers' release/acquire
    __tsan_switch_to_fiber(to->tsan, to == &sched_ ? __tsan_switch_to_fiber_no_sync : 0);
#endif
    cudasim_swap(&from->sp, to->sp);
#if defined(__SANITIZE_ADDRESS__)
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(from->asan_fake, &bottom, &size);
    if (from != &sched_) { // a fiber resumed by the scheduler: bottom is the scheduler's
        sched_.stack = const_cast<char *>(static_cast<const char *>(bottom));
        sched_.stack_size = size;
    }
#endif
}

void FiberPool::entry()
{
    FiberPool *p = t_pool;
#if defined(__SANITIZE_ADDRESS__)
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
    p->sched_.stack = const_cast<char *>(static_cast<const char *>(bottom));
    p->sched_.stack_size = size;
#endif
    for (;;) {
        Fiber *f = p->cur_;
        (*f->work)();
        f->done = true;
        p->switch_to(&p->sched_);
        p = t_pool; // resumed for the next CUDA thread
    }
}

void FiberPool::run(Fiber *f, const std::function<void()> *work)
{
    f->work = work;
    f->done = false;
    switch_to(f);
}

void FiberPool::resume(Fiber *f) { switch_to(f); }

void FiberPool::yield() { switch_to(&sched_); }

} // namespace cudasim

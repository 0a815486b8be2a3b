/* SPDX-License-Identifier: MIT */
// Findings: what the checks report. Each is printed on stderr with the stack of the call
// that made it; by default the process then aborts, so a test fails with the report as its
// last words. Tests that provoke a finding on purpose switch to counting
// (cudasim_set_abort_on_finding(0)) and read it back.
#include "cudasim.h"
#include "internal.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <execinfo.h>
#include <unistd.h>

extern "C" void __sanitizer_print_stack_trace(void) __attribute__((weak));

namespace cudasim
{
namespace
{

std::mutex g_mu;
std::atomic<int> g_abort{-1}; // -1: the environment's setting
std::atomic<unsigned long long> g_atomics{0};
std::atomic<int> g_sort_bits{0};
std::atomic<int> g_count{0};
char g_last[2048];

bool aborting()
{
    int a = g_abort.load();
    return a < 0 ? settings().abort_on_finding : a != 0;
}

void print_stack()
{
    if (__sanitizer_print_stack_trace) {
        __sanitizer_print_stack_trace();
        return;
    }
    void *frames[32];
    int n = backtrace(frames, 32);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

} // namespace

void finding(const char *fmt, ...)
{
    char msg[sizeof g_last];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> lk(g_mu);
    fprintf(stderr, "cudasim: %s\n", msg);
    if (aborting()) // counted findings are provoked on purpose: their text is enough
        print_stack();
    g_count++;
    snprintf(g_last, sizeof g_last, "%s", msg);
    if (aborting()) {
        fprintf(stderr,
                "cudasim: aborting at the first finding (ZT_CUDASIM_ON_ERROR=log to go on)\n");
        abort();
    }
}

void finding_in_signal(const char *msg)
{
    ssize_t unused = write(STDERR_FILENO, "cudasim: ", 9);
    unused = write(STDERR_FILENO, msg, strlen(msg));
    unused = write(STDERR_FILENO, "\n", 1);
    (void)unused;
    if (aborting()) {
        print_stack();
        abort();
    }
    g_count++;
    snprintf(g_last, sizeof g_last, "%s", msg);
}

void count_atomic() { g_atomics.fetch_add(1, std::memory_order_relaxed); }
void note_sort_bits(int bits) { g_sort_bits = bits; }

void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cudasim: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

} // namespace cudasim

using namespace cudasim;

extern "C" {

void cudasim_set_abort_on_finding(int abort_on_finding) { g_abort = abort_on_finding ? 1 : 0; }

int cudasim_findings(void) { return g_count.load(); }

const char *cudasim_last_finding(void) { return g_last; }

void cudasim_reset_findings(void)
{
    std::lock_guard<std::mutex> lk(g_mu);
    g_count = 0;
    g_last[0] = 0;
}

void cudasim_fail_alloc_after(int n)
{
    std::lock_guard<std::mutex> lk(state().mu);
    state().fail_alloc_after = n;
}

void cudasim_not_ready_next(int n)
{
    std::lock_guard<std::mutex> lk(state().mu);
    state().not_ready_next = n;
}

void cudasim_hang_collective_after(int n)
{
    std::lock_guard<std::mutex> lk(state().mu);
    state().hang_collective_after = n;
}

void cudasim_nccl_error_after(int n)
{
    std::lock_guard<std::mutex> lk(state().mu);
    state().nccl_error_after = n;
}

void cudasim_fail_call(const char *call, int n)
{
    std::lock_guard<std::mutex> lk(state().mu);
    state().fail_call = call ? call : "";
    state().fail_call_after = call ? n : 0;
}

unsigned long long cudasim_atomic_ops(void) { return g_atomics.load(); }

int cudasim_last_sort_bits(void) { return g_sort_bits.load(); }

int cudasim_live_events(void)
{
    std::lock_guard<std::mutex> lk(state().mu);
    return (int)state().events.size();
}

void cudasim_drain(void)
{
    std::unique_lock<std::mutex> lk(state().mu);
    wait_device(lk, -1);
}

} // extern "C"

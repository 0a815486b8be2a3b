/* SPDX-License-Identifier: MIT */
// Host access to pinned memory while a copy may be using it. A queued device-to-host copy's
// destination pages are protected against any host access, and a host-to-device copy's
// source pages against host writes, until the host has observed the copy's completion (a
// synchronisation, or a successful query, covering it). A host access before then faults;
// the handler reports it as a finding naming the copy. Only whole pages inside a copy's
// range are protected, so a neighbour sharing a page is never blamed. The stream's thread
// opens the pages for the copy itself.
#include "internal.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

namespace cudasim
{
namespace
{

struct Pending {
    uintptr_t lo, hi; // whole pages
    bool device_writes;
    bool reported; // a finding was made (log mode): not protected again
    uint32_t agent;
    uint64_t epoch;
    char what[160];
};

std::mutex g_mu; // never held while touching pinned memory, so the handler can take it
std::vector<Pending> &g_pending = *new std::vector<Pending>; // never destroyed
struct sigaction g_old;
thread_local bool t_copying = false;

uintptr_t page_size()
{
    static const uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
    return ps;
}

// The protection [lo, hi) (whole pages) should have now, page run by page run.
void apply(uintptr_t lo, uintptr_t hi)
{
    uintptr_t ps = page_size();
    if (hi <= lo)
        return;
    std::vector<int> prot((hi - lo) / ps, PROT_READ | PROT_WRITE);
    for (const Pending &p : g_pending) {
        if (p.reported || p.hi <= lo || p.lo >= hi)
            continue;
        uintptr_t a = p.lo > lo ? p.lo : lo, b = p.hi < hi ? p.hi : hi;
        for (uintptr_t q = a; q < b; q += ps) {
            int &v = prot[(q - lo) / ps];
            v = p.device_writes ? PROT_NONE : (v & PROT_READ);
        }
    }
    for (size_t i = 0; i < prot.size();) {
        size_t j = i;
        while (j < prot.size() && prot[j] == prot[i])
            j++;
        mprotect((void *)(lo + i * ps), (j - i) * ps, prot[i]);
        i = j;
    }
}

void inner_pages(const char *lo, const char *hi, uintptr_t *a, uintptr_t *b)
{
    uintptr_t ps = page_size();
    *a = ((uintptr_t)lo + ps - 1) / ps * ps;
    *b = (uintptr_t)hi / ps * ps;
}

void lock_spin()
{
    while (!g_mu.try_lock())
        sched_yield();
}

void on_segv(int sig, siginfo_t *si, void *ctx)
{
    uintptr_t addr = (uintptr_t)si->si_addr;
    bool write = (((ucontext_t *)ctx)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
    lock_spin();
    Pending *hit = nullptr;
    for (Pending &p : g_pending)
        if (!p.reported && addr >= p.lo && addr < p.hi && (p.device_writes || write))
            hit = &p;
    if (hit && t_copying) { // the stand-in's own copy met a page protected meanwhile
        uintptr_t ps = page_size();
        mprotect((void *)(addr / ps * ps), ps, PROT_READ | PROT_WRITE);
        g_mu.unlock();
        return;
    }
    if (hit) {
        static char msg[512];
        snprintf(msg, sizeof msg,
                 "the host %s %p, inside the %s of %s, before it had observed that copy's "
                 "completion (synchronize the stream, or wait on an event recorded after the "
                 "copy, before touching the buffer)",
                 write ? "wrote" : "read", (void *)addr,
                 hit->device_writes ? "destination" : "source", hit->what);
        hit->reported = true;
        uintptr_t ps = page_size();
        mprotect((void *)(addr / ps * ps), ps, PROT_READ | PROT_WRITE);
        g_mu.unlock();
        finding_in_signal(msg);
        return;
    }
    g_mu.unlock();
    static char dmsg[512];
    if (device_fault(si->si_addr, write, dmsg, sizeof dmsg)) {
        finding_in_signal(dmsg);
        return;
    }
    // not ours: the handler that was there before (a sanitizer's), or the default action
    if (g_old.sa_flags & SA_SIGINFO) {
        if (g_old.sa_sigaction) {
            g_old.sa_sigaction(sig, si, ctx);
            return;
        }
    } else if (g_old.sa_handler != SIG_DFL && g_old.sa_handler != SIG_IGN) {
        g_old.sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL); // the fault repeats on return and takes its default action
}

} // namespace

// (Again whenever another handler took SIGSEGV since: test frameworks install theirs per
// test; the fault then still reaches theirs through the chain.)
void install_fault_handler()
{
    struct sigaction cur;
    if (sigaction(SIGSEGV, nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == on_segv)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old);
}

void pages_pending(const char *lo, const char *hi, bool device_writes, uint32_t agent,
                   uint64_t epoch, const std::string &what)
{
    uintptr_t a, b;
    inner_pages(lo, hi, &a, &b);
    if (b <= a)
        return;
    install_fault_handler();
    Pending p{a, b, device_writes, false, agent, epoch, {0}};
    snprintf(p.what, sizeof p.what, "%s", what.c_str());
    std::lock_guard<std::mutex> lk(g_mu);
    g_pending.push_back(p);
    apply(a, b);
}

void pages_observed(const VClock &host)
{
    std::lock_guard<std::mutex> lk(g_mu);
    for (size_t i = 0; i < g_pending.size();) {
        Pending p = g_pending[i];
        if (!host.covers(p.agent, p.epoch)) {
            i++;
            continue;
        }
        g_pending.erase(g_pending.begin() + (long)i);
        apply(p.lo, p.hi);
    }
}

void pages_open(const char *lo, const char *hi)
{
    uintptr_t a, b;
    inner_pages(lo, hi, &a, &b);
    t_copying = true;
    if (b <= a)
        return;
    std::lock_guard<std::mutex> lk(g_mu);
    mprotect((void *)a, b - a, PROT_READ | PROT_WRITE);
}

void pages_close(const char *lo, const char *hi)
{
    uintptr_t a, b;
    inner_pages(lo, hi, &a, &b);
    t_copying = false;
    if (b <= a)
        return;
    std::lock_guard<std::mutex> lk(g_mu);
    apply(a, b);
}

void pages_forget(const char *lo, const char *hi)
{
    uintptr_t a, b;
    inner_pages(lo, hi, &a, &b);
    std::lock_guard<std::mutex> lk(g_mu);
    for (size_t i = 0; i < g_pending.size();) {
        if (g_pending[i].lo >= a && g_pending[i].hi <= b)
            g_pending.erase(g_pending.begin() + (long)i);
        else
            i++;
    }
    if (b > a)
        apply(a, b);
}

} // namespace cudasim

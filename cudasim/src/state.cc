/* SPDX-License-Identifier: MIT */
// Settings from the environment, the process-wide state, and the per-thread API state (the
// current device, the last error, whether the thread is inside a host-function callback).
#include "internal.h"

#include <cstdlib>
#include <cstring>

namespace cudasim
{

static size_t parse_bytes(const char *s, size_t dflt)
{
    if (!s || !*s)
        return dflt;
    char *end = nullptr;
    double v = strtod(s, &end);
    switch (end && *end ? *end : 0) {
    case 'K':
    case 'k':
        v *= 1024.0;
        break;
    case 'M':
    case 'm':
        v *= 1024.0 * 1024.0;
        break;
    case 'G':
    case 'g':
        v *= 1024.0 * 1024.0 * 1024.0;
        break;
    default:
        break;
    }
    return v > 0 ? (size_t)v : dflt;
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtol(s, nullptr, 0) : dflt;
}

const Settings &settings()
{
    static const Settings s = [] {
        Settings v;
        v.devices = (int)env_long("ZT_CUDASIM_DEVICES", 1);
        if (v.devices < 1 || v.devices > 16)
            v.devices = 1;
        v.mem = parse_bytes(getenv("ZT_CUDASIM_MEM"), (size_t)8 << 30);
        v.seed = (uint64_t)env_long("ZT_CUDASIM_SEED", 1);
        v.delay_us = (unsigned)env_long("ZT_CUDASIM_DELAY_US", 200);
        v.no_pools = env_long("ZT_CUDASIM_NO_POOLS", 0) != 0;
        const char *e = getenv("ZT_CUDASIM_ON_ERROR");
        v.abort_on_finding = !(e && strcmp(e, "log") == 0);
        return v;
    }();
    return s;
}

void shutdown_streams(); // stream.cc

State &state()
{
    static State *s = [] {
        auto *st = new State; // never destroyed: streams' threads may outlive static teardown
        const Settings &cfg = settings();
        st->devices.resize((size_t)cfg.devices);
        for (int i = 0; i < cfg.devices; i++) {
            st->devices[(size_t)i].index = i;
            st->devices[(size_t)i].default_pool.device = i;
            st->devices[(size_t)i].default_pool.is_default = true;
        }
        atexit(shutdown_streams);
        return st;
    }();
    return *s;
}

uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

namespace
{
thread_local int t_device = 0;
thread_local cudaError_t t_last = cudaSuccess;
thread_local bool t_in_host_fn = false;
} // namespace

int current_device() { return t_device; }
void set_current_device(int d) { t_device = d; }

cudaError_t api_result(cudaError_t r)
{
    if (r != cudaSuccess && r != cudaErrorNotReady) // "not ready" is an answer, not an error
        t_last = r;
    return r;
}

cudaError_t last_error(bool reset)
{
    cudaError_t r = t_last;
    cudaError_t sticky = sticky_error(t_device);
    if (reset)
        t_last = sticky; // a sticky error stays for good
    return r != cudaSuccess ? r : sticky;
}

cudaError_t sticky_error(int device)
{
    State &s = state();
    std::lock_guard<std::mutex> lk(s.mu);
    return device >= 0 && (size_t)device < s.devices.size() ? s.devices[(size_t)device].sticky
                                                            : cudaSuccess;
}

bool in_host_fn() { return t_in_host_fn; }
void set_in_host_fn(bool on) { t_in_host_fn = on; }

void api_enter(const char *call)
{
    if (t_in_host_fn)
        finding("%s called from a cudaLaunchHostFunc callback: CUDA forbids API calls there "
                "(the callback runs on CUDA's thread; hand the work to a thread of your own)",
                call);
}

bool inject_call_failure(State &st, const char *call)
{
    if (st.fail_call_after <= 0 || st.fail_call != call)
        return false;
    return --st.fail_call_after == 0; // once: the n-th call, not the later ones
}

} // namespace cudasim

/* SPDX-License-Identifier: MIT */
// The stand-in's shared state and the few internal calls its parts use (the runtime API, the
// kernels' launcher, cuBLAS, NCCL). Everything that orders work or checks it sits behind one
// mutex (State::mu): the streams' clocks, the events, the allocation table and each
// allocation's access history. Work itself runs on the streams' threads without it.
#ifndef CUDASIM_INTERNAL_H
#define CUDASIM_INTERNAL_H

#include "../shim/cudasim_device.h"
#include "clock.h"

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cudasim
{

struct Settings {
    int devices;
    size_t mem;        // bytes per device
    uint64_t seed;     // delays, block and thread orders
    unsigned delay_us; // the longest delay before a stream operation
    bool abort_on_finding;
    bool no_pools; // devices without memory pools
};
const Settings &settings();

// A checker's finding: printed with the stack of the call that made it, then the process
// aborts (the default) or, with cudasim_set_abort_on_finding(0), it is counted and kept.
[[gnu::format(printf, 1, 2)]] void finding(const char *fmt, ...);
// A finding raised inside the SIGSEGV handler (no stack walk, no allocation in abort mode).
void finding_in_signal(const char *msg);
// A note on stderr that is not a finding (something the stand-in does not model).
[[gnu::format(printf, 1, 2)]] void note(const char *fmt, ...);

// ---- memory ------------------------------------------------------------------------------

enum class MemKind { Device, Pinned, Registered };

// One access to an allocation by a stream's operation, kept to check later ones against.
struct AccessRec {
    uint32_t agent;
    uint64_t epoch;
    size_t lo, hi; // bytes from the allocation's start
    bool write;
    char what[96];
};

struct Pool;

struct Alloc {
    char *ptr = nullptr; // what the caller got
    size_t size = 0;     // what the caller asked for
    size_t reserved = 0; // bytes counted against the device (pool blocks may be larger)
    MemKind kind = MemKind::Device;
    int device = -1;     // -1: host memory usable from every device
    char *raw = nullptr; // the host allocation behind it (guards around ptr)
    size_t raw_size = 0;
    Pool *pool = nullptr;    // stream-ordered allocation from this pool (else nullptr)
    const char *origin = ""; // the call that made it
    std::vector<AccessRec> history;
    int open = 0;              // stream operations using it now (device memory is accessible)
    bool free_pending = false; // cudaFreeAsync queued: the pointer is dead for new work
    uint64_t serial = 0;       // tells a reused block from the one an operation opened
};

// ---- streams and events ------------------------------------------------------------------

struct Stream;

struct Op {
    uint64_t seq = 0;
    std::string what;
    std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> deps; // wait for these first
    std::function<void()> run;
    std::vector<const void *> touch; // device memory it uses (opened while it runs)
    VClock clock;                    // the stream's clock after this op (host functions join it)
    bool host_fn = false;
};

struct Stream {
    uint32_t agent = 0;
    int device = 0;
    int label = 0;         // #n in messages, in creation order
    bool legacy = false;   // the device's NULL stream
    bool blocking = false; // created without cudaStreamNonBlocking: ordered with NULL stream
    bool destroyed = false;
    VClock clock;      // what every op queued next is ordered after
    VClock done_clock; // the clock of the last completed op
    uint64_t enqueued = 0, completed = 0;
    std::deque<Op> queue;
    std::condition_variable cv; // work queued, or closing
    std::thread worker;
    uint64_t rng = 0;
};

struct Event {
    int device = 0;
    unsigned flags = 0;
    bool recorded = false;
    std::shared_ptr<Stream> stream;
    uint64_t seq = 0; // complete once stream->completed reaches it
    VClock clock;
    // the steady clock (seconds) when the stream ran the latest record, written by the
    // stream's worker; each record gets its own, so a destroyed event leaves it to the op
    std::shared_ptr<double> stamp;
};

struct Pool {
    int device = 0;
    uint64_t release_threshold = 0;
    bool is_default = false;
    std::vector<Alloc *> cached; // freed blocks it keeps for reuse (counted as used)
};

struct Device {
    int index = 0;
    size_t used = 0; // allocations and pool caches
    std::shared_ptr<Stream> legacy;
    Pool default_pool;
    cudaError_t sticky = cudaSuccess; // a fault in a kernel: every later call returns it
    std::map<const void *, int> max_dynamic_shared; // cudaFuncSetAttribute per kernel
};

struct State {
    std::mutex mu;
    std::condition_variable done; // some stream completed an op
    std::vector<Device> devices;
    std::map<uintptr_t, Alloc *> allocs;                        // by ptr
    std::map<uintptr_t, std::pair<size_t, const char *>> freed; // recently freed ranges
    std::map<Stream *, std::shared_ptr<Stream>> streams;        // live handles
    std::vector<std::weak_ptr<Stream>> all;                     // every stream made, for draining
    std::map<Event *, std::unique_ptr<Event>> events;
    std::vector<std::unique_ptr<Pool>> pools;
    VClock host;             // what the host has observed complete
    uint32_t next_agent = 1; // agent 0 is the host
    uint64_t next_serial = 0;
    int next_label = 0;
    bool shutting_down = false;
    // fault injection
    int fail_alloc_after = 0;
    int not_ready_next = 0;
    int hang_collective_after = 0;
    int nccl_error_after = 0;
    std::string fail_call; // cudasim_fail_call: the runtime call that fails, and when
    int fail_call_after = 0;
};
State &state(); // initialises on first use (settings, devices, atexit drain)

// ---- per-thread API state (state.cc) -----------------------------------------------------

int current_device();
void set_current_device(int d);
// Records r as the thread's last error (cudaGetLastError) when it is an error; returns r.
cudaError_t api_result(cudaError_t r);
// The thread's last error (cudaGetLastError resets it, cudaPeekAtLastError does not).
cudaError_t last_error(bool reset);
// The device's sticky error, if any (every call on it then fails with it).
cudaError_t sticky_error(int device);
// True inside a cudaLaunchHostFunc callback, where CUDA forbids API calls.
bool in_host_fn();
void set_in_host_fn(bool on);
// Entry of every API call: a finding when called from a host-function callback.
void api_enter(const char *call);
// Injection (cudasim_fail_call): true when this call must fail; the caller holds State::mu.
bool inject_call_failure(State &st, const char *call);
// The start of an API call's body: api_enter, the lock (`st`, `lk`), and the current
// device's sticky error returned at once.
#define ENTER(call)                                                        \
    api_enter(call);                                                       \
    State &st = state();                                                   \
    std::unique_lock<std::mutex> lk(st.mu);                                \
    if (cudaError_t sticky_ = st.devices[(size_t)current_device()].sticky) \
        return api_result(sticky_);                                        \
    if (inject_call_failure(st, call))                                     \
        return api_result(cudaErrorUnknown);

// ---- memory (memory.cc); callers hold State::mu ------------------------------------------

// The allocation p points into (p may be one past its end only when bytes is 0), or nullptr.
Alloc *find_alloc(const void *p);
// Describes p for a message: which allocation (or freed range, or host memory) it is in.
std::string describe_ptr(const void *p);
cudaError_t device_alloc(int device, size_t bytes, Pool *pool, const char *origin, void **out);
// Out of the table: device memory into a quarantine where it stays inaccessible (a pool's
// block into the pool's cache); host memory unmapped or unregistered.
void release_alloc(Alloc *a);
// Device memory is accessible only between these (counted: several operations may use it).
void open_alloc(Alloc *a);
void close_alloc(Alloc *a);
// The SIGSEGV handler's question: a fault in device memory, its guard pages or freed device
// memory? Then msg says what touched what, the page is left accessible, and true returns.
bool device_fault(void *addr, bool write, char *msg, size_t len);
// Checks the guard bytes around a device allocation; a finding names `who` when they changed.
void check_guards(Alloc *a, const char *who);
// A pool's cached blocks above its threshold go back to the device.
void pool_trim(Pool *p, uint64_t keep);
// Injection: true when this allocation must fail.
bool inject_alloc_failure();

// ---- ordering (stream.cc) ----------------------------------------------------------------

// The stream behind a handle for the calling thread (0 and cudaStreamLegacy: the current
// device's NULL stream); nullptr with *err set for a destroyed or unknown handle. Holds mu.
std::shared_ptr<Stream> stream_of(cudaStream_t h, cudaError_t *err);
// Queues an operation: orders it after the stream's earlier work and what the host has
// observed, checks its accesses against every earlier unordered one (a finding names both),
// records them, and hands `run` to the stream's thread. Holds mu (the caller holds it too:
// std::unique_lock passed in). Returns the op's sequence number.
using Deps = std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>>;
uint64_t enqueue(std::unique_lock<std::mutex> &lk, Stream *s, std::string what,
                 const std::vector<Access> &acc, std::function<void()> run, bool host_fn = false,
                 Deps deps = {});
// Checks and records one access by stream s (used by enqueue; exposed for cuBLAS/NCCL,
// which know their ranges better than "to the end of the allocation").
void record_access(Stream *s, Alloc *a, size_t lo, size_t hi, bool write, const std::string &what);
// Blocks (releasing mu) until s has completed op `seq`; then the host has observed it.
void wait_for(std::unique_lock<std::mutex> &lk, const std::shared_ptr<Stream> &s, uint64_t seq);
// Waits for every stream of the device (all devices when device < 0).
void wait_device(std::unique_lock<std::mutex> &lk, int device);
// The host has observed everything `c` covers: later host work is ordered after it.
void host_observed(const VClock &c);
std::string stream_name(const Stream *s);
// A new stream on the device (its thread started); holds mu.
std::shared_ptr<Stream> make_stream(int device, bool blocking, bool legacy);
// The device's NULL stream (made on first use); holds mu.
std::shared_ptr<Stream> legacy_stream(int device);

// ---- pinned pages (hostpages.cc) ---------------------------------------------------------

// Makes sure the stand-in's SIGSEGV handler is the one installed (it chains to the one it
// replaced for faults that are not its own); called with each stream operation queued.
void install_fault_handler();

// Pinned host bytes [lo, hi) that a queued copy reads (device_writes false: the host may
// read them but not write) or writes (true: no host access at all) until the host has
// observed op (agent, epoch). Only whole pages inside the range are protected.
void pages_pending(const char *lo, const char *hi, bool device_writes, uint32_t agent,
                   uint64_t epoch, const std::string &what);
// Lifts what the host has now observed (called with mu held, after State::host grew).
void pages_observed(const VClock &host);
// The stream's thread copies from or into [lo, hi): its pages open for the copy.
void pages_open(const char *lo, const char *hi);
void pages_close(const char *lo, const char *hi);
// Forgets pending ranges inside [lo, hi) (memory being freed).
void pages_forget(const char *lo, const char *hi);

// ---- kernels (grid.cc) -------------------------------------------------------------------

struct Launch {
    const char *name;
    const void *key; // the kernel function, for cudaFuncSetAttribute
    dim3 grid, block;
    size_t shared;
    cudaStream_t stream;
    std::vector<KernelArg> pointers;
    std::function<void()> body; // one CUDA thread's work (the thread's context already set)
};

// Runs the grid on the calling thread: blocks one after another in a seeded order, each
// block's threads as fibers. Returns cudaSuccess, or an error after a finding (a barrier or
// warp operation that some thread never reaches).
cudaError_t run_grid(const Launch &l, uint64_t seed);

uint64_t mix(uint64_t x); // splitmix64 step, for seeded orders

} // namespace cudasim

#endif

/* SPDX-License-Identifier: MIT */
// See shm_group.h. The members of a group share one POSIX shared-memory segment:
//
//   Header | Slot[nranks] | staging: nranks x chunk_bytes
//
// A Slot holds what one member tells the others (who it is, which call it is in); the staging
// carries the data. Every collective is a series of rounds of the same shape: each member fills
// its own chunk of staging, all meet at a barrier, each reads what it needs from everyone's
// chunks, and all meet again before the staging is refilled. The barrier is a counter and a
// generation word in the segment; waiters sleep on the generation with FUTEX_WAIT (shared, not
// private: the members are often separate processes, each with its own mapping) and wake every
// few milliseconds to look for an abort or a dead member.
#include "shm_group.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace cudasim::shm
{
namespace
{

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x314d5343; // set last by the creator: the header is valid
constexpr unsigned char kIdTag[8] = {'c', 's', 'h', 'm', 'i', 'd', '0', '1'};
constexpr size_t kIdRandomAt = 8, kIdRandomBytes = 16, kIdPidAt = 24;
constexpr int kMaxRanks = 512;
constexpr size_t kChunkMax = 256 << 10;  // staging per member per round
constexpr size_t kChunkMin = 4 << 10;    // keeps reduce_scatter's per-rank slice >= 1 element
constexpr size_t kStagingMax = 32 << 20; // containers often mount a 64 MiB /dev/shm
constexpr int kPollMs = 10;              // a waiter re-checks abort this often
constexpr int kProbeMs = 100;            // and peer processes' liveness this often
constexpr int kDeadline = 1;             // wait_until's "deadline passed" (not an errno)

enum SlotState : uint32_t { kFree, kClaimed, kReady, kLeft };
enum FaultKind : uint32_t { kNoFault, kAborted, kDied, kDeparted, kJoinAbandoned };
enum CallKind : uint32_t {
    kAllreduce = 1,
    kAllgather,
    kReduceScatter,
    kBroadcast,
    kExchange,
    kSplit
};

// What a member says it is calling, so mismatched calls fail instead of mixing data.
struct CallDesc {
    uint32_t seq;
    uint32_t kind;
    uint64_t count;
    int32_t type;
    int32_t op;
    int32_t root;
    int32_t pad;
};

struct alignas(64) Slot {
    uint32_t state; // SlotState (atomic): the fields below are valid from kReady on
    int32_t pid;
    uint64_t start_time; // /proc start time: tells the member from a later owner of its pid
    uint64_t pid_ns;     // its pid namespace's inode: pids mean nothing across namespaces
    int32_t device;
    char machine[64];
    CallDesc desc[2];   // by call parity: a fast member may post call s+1 while others read s
    int32_t color, key; // group_split's arguments
    unsigned char child_id[128];
};

struct alignas(64) Header {
    uint32_t magic; // atomic
    uint32_t nranks;
    uint64_t chunk_bytes;
    uint64_t total_bytes;
    uint32_t joined;                // atomic futex word: members that finished claiming their slot
    uint32_t attached;              // atomic: views still mapped; the last one out unlinks the name
    uint64_t fault;                 // atomic: FaultKind << 32 | rank, the first fault wins
    alignas(64) uint32_t bar_count; // atomic: arrivals at the current barrier
    alignas(64) uint32_t bar_gen;   // atomic futex word: bumped when a barrier opens
};

// One operation of an exchange() as its member posts it, in its own staging, for the others.
struct OpDesc {
    uint32_t send;
    int32_t peer;
    uint64_t count;
    int32_t type;
    int32_t pad;
};

struct Layout {
    size_t slots_at, staging_at, chunk_bytes, total_bytes;
};

template <class T> std::atomic_ref<T> at(T &x) { return std::atomic_ref<T>(x); }

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

Layout layout_for(int nranks)
{
    Layout l;
    size_t share = kStagingMax / size_t(nranks) / kChunkMin * kChunkMin;
    l.chunk_bytes = std::clamp(share, kChunkMin, kChunkMax);
    l.slots_at = round_up(sizeof(Header), 64);
    l.staging_at = round_up(l.slots_at + size_t(nranks) * sizeof(Slot), 4096);
    l.total_bytes = l.staging_at + size_t(nranks) * l.chunk_bytes;
    return l;
}

} // namespace

struct Group {
    unsigned char *base = nullptr;
    size_t map_bytes = 0;
    Header *hdr = nullptr;
    Slot *slots = nullptr;
    unsigned char *staging = nullptr;
    size_t chunk = 0;
    int rank = -1, nranks = 0, device = -1;
    pid_t pid = 0;
    bool counted = false;     // holds one of hdr->attached
    bool claimed = false;     // owns slots[rank]
    bool in_registry = false; // base is shared through the process's mapping registry
    uint32_t seq = 0;         // calls started on this group, for CallDesc
    Clock::time_point next_probe{};
    std::string name;
};

namespace
{

// ---- messages ----

__attribute__((format(printf, 1, 2))) std::string fmt(const char *f, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

int fail(std::string *why, int code, const std::string &msg)
{
    if (why)
        *why = "cudasim shm: " + msg;
    return code;
}

int sys_fail(std::string *why, const char *call, const std::string &name)
{
    int e = errno;
    return fail(why, -e, fmt("%s(%s) failed: %s", call, name.c_str(), strerror(e)));
}

const char *kind_name(uint32_t kind)
{
    switch (kind) {
    case kAllreduce:
        return "allreduce";
    case kAllgather:
        return "allgather";
    case kReduceScatter:
        return "reduce_scatter";
    case kBroadcast:
        return "broadcast";
    case kExchange:
        return "exchange";
    case kSplit:
        return "group_split";
    }
    return "an unknown call";
}

const char *op_name(int32_t op)
{
    static const char *names[] = {"sum", "prod", "max", "min"};
    return op >= 0 && op < 4 ? names[op] : "-";
}

// A call as "allreduce(count=10, type=F32, op=sum) as call #4", with only the fields it uses.
std::string describe(const CallDesc &d)
{
    std::string args;
    if (d.kind != kExchange && d.kind != kSplit)
        args = fmt("count=%llu, type=%s", (unsigned long long)d.count, dtype_name(DType(d.type)));
    if (d.op >= 0)
        args += fmt(", op=%s", op_name(d.op));
    if (d.kind == kBroadcast)
        args += fmt(", root=%d", d.root);
    return fmt("%s(%s) as call #%u", kind_name(d.kind), args.c_str(), d.seq);
}

// ---- system helpers ----

void futex_wait(uint32_t *word, uint32_t seen, int ms)
{
    // Any return (woken, value already changed, timeout, signal) only means "look again".
    timespec ts{0, long(ms) * 1000000L};
    syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Reads a process's state letter and start time from /proc/<pid>/stat.
// 1: read; 0: no such process; -1: /proc unreadable (the caller falls back to kill()).
int proc_stat(pid_t pid, char *state, uint64_t *start_time)
{
    char path[48];
    snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? 0 : -1;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = errno;
    close(fd);
    if (n <= 0)
        return n < 0 && err == ESRCH ? 0 : -1;
    buf[n] = 0;
    // The command name (field 2) may hold spaces and ')': fields are counted after the last ')'.
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return -1;
    p += 2;
    *state = *p;
    for (int field = 3; field < 22; ++field) { // field 22 is starttime
        p = strchr(p, ' ');
        if (!p)
            return -1;
        ++p;
    }
    *start_time = strtoull(p, nullptr, 10);
    return 1;
}

// 0 when unknown: then every member is taken to share this process's namespace.
uint64_t own_pid_namespace()
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

uint64_t own_start_time()
{
    char state;
    uint64_t start = 0;
    return proc_stat(getpid(), &state, &start) == 1 ? start : 0;
}

// True when slot s belongs to another process that no longer runs: gone, a zombie not yet
// reaped by its parent, or a pid now owned by a newer process. Members that are threads of
// this process share its pid: they cannot die without it. A member in another pid namespace
// (a container sharing /dev/shm) cannot be looked up: it is taken to be alive.
bool process_gone(const Group *g, const Slot &s)
{
    const Slot &me = g->slots[g->rank];
    if (s.pid == g->pid || s.pid_ns != me.pid_ns)
        return false;
    char state = 0;
    uint64_t start = 0;
    int r = proc_stat(s.pid, &state, &start);
    if (r == 0)
        return true;
    if (r > 0)
        return state == 'Z' || state == 'X' || (s.start_time && start != s.start_time);
    return kill(s.pid, 0) == -1 && errno == ESRCH;
}

// /etc/machine-id when readable (stable and unique per host), else the host name.
const std::string &machine_id()
{
    static const std::string id = [] {
        char buf[65] = {0};
        if (FILE *f = fopen("/etc/machine-id", "re")) {
            bool ok = fgets(buf, sizeof buf, f) != nullptr;
            fclose(f);
            buf[strcspn(buf, "\r\n")] = 0;
            if (ok && buf[0])
                return std::string(buf);
        }
        if (gethostname(buf, sizeof buf - 1) != 0)
            return std::string("unknown-host");
        return std::string(buf);
    }();
    return id;
}

uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// getrandom, or (kernels without it) a mix of clocks, pid and a counter: still unique per call.
void fill_random(unsigned char *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r > 0)
            got += size_t(r);
        else if (r < 0 && errno != EINTR)
            break;
    }
    static std::atomic<uint64_t> counter{0};
    for (; got < n; ++got) {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t mix = uint64_t(ts.tv_nsec) ^ (uint64_t(ts.tv_sec) << 30) ^
                       (uint64_t(getpid()) << 40) ^ counter.fetch_add(1);
        out[got] = (unsigned char)splitmix64(mix);
    }
}

// ---- faults: abort, death, departure, abandoned join ----

void wake_all(Group *g)
{
    futex_wake_all(&g->hdr->bar_gen);
    futex_wake_all(&g->hdr->joined);
}

void raise_fault(Group *g, uint32_t kind, int rank)
{
    uint64_t none = 0;
    at(g->hdr->fault).compare_exchange_strong(none, uint64_t(kind) << 32 | uint32_t(rank));
    wake_all(g);
}

std::string never_came(const Group *g)
{
    std::string list;
    for (int r = 0; r < g->nranks; ++r) {
        uint32_t st = at(g->slots[r].state).load(std::memory_order_acquire);
        if (st == kFree || st == kClaimed)
            list += (list.empty() ? "" : ", ") + std::to_string(r);
    }
    return list.empty() ? "every rank came" : "ranks that never came: " + list;
}

int report_fault(const Group *g, uint64_t fault, const char *what, std::string *why)
{
    int who = int(uint32_t(fault));
    std::string where = what ? fmt(" (rank %d was in %s)", g->rank, what) : "";
    switch (uint32_t(fault >> 32)) {
    case kAborted:
        return fail(why, -ECONNABORTED,
                    fmt("the communicator was aborted by rank %d", who) + where);
    case kDied:
        return fail(why, -ECONNRESET,
                    fmt("rank %d (pid %d) died", who, int(g->slots[who].pid)) + where);
    case kDeparted:
        return fail(why, -ECONNRESET,
                    fmt("rank %d left the communicator (group_destroy)", who) + where);
    case kJoinAbandoned:
        return fail(why, -ETIMEDOUT,
                    fmt("the join was abandoned after rank %d timed out; ", who) + never_came(g) +
                        where);
    }
    return fail(why, -EPROTO, fmt("unknown fault word %#llx", (unsigned long long)fault));
}

// The fault in force, after looking for members that left or whose process died. Peers are
// probed at most every kProbeMs: reading /proc for each of them on every wake costs too much.
uint64_t detect_fault(Group *g)
{
    if (uint64_t f = at(g->hdr->fault).load(std::memory_order_acquire))
        return f;
    bool probe = Clock::now() >= g->next_probe;
    if (probe)
        g->next_probe = Clock::now() + std::chrono::milliseconds(kProbeMs);
    for (int r = 0; r < g->nranks; ++r) {
        if (r == g->rank)
            continue;
        uint32_t st = at(g->slots[r].state).load(std::memory_order_acquire);
        if (st == kLeft)
            raise_fault(g, kDeparted, r);
        else if (st == kReady && probe && process_gone(g, g->slots[r]))
            raise_fault(g, kDied, r);
    }
    return at(g->hdr->fault).load(std::memory_order_acquire);
}

// Sleeps until done(*word) holds, a fault appears, or the deadline passes (kDeadline).
// The condition is checked again after a fault: a peer may finish its part of a barrier and
// leave before this waiter saw the barrier open; that barrier still succeeded.
template <class Done>
int wait_until(Group *g, uint32_t *word, Done done, Clock::time_point deadline, const char *what,
               std::string *why)
{
    for (;;) {
        uint32_t seen = at(*word).load(std::memory_order_acquire);
        if (done(seen))
            return 0;
        if (uint64_t f = detect_fault(g))
            return done(at(*word).load(std::memory_order_acquire)) ? 0
                                                                   : report_fault(g, f, what, why);
        if (Clock::now() >= deadline)
            return kDeadline;
        futex_wait(word, seen, kPollMs);
    }
}

// Process-shared barrier over all members. The generation is read before arriving, so the
// last arrival cannot bump it unseen; the count is reset before the bump (release), so a
// member that saw the new generation finds a zero count at the next barrier.
int barrier(Group *g, const char *what, std::string *why)
{
    Header *h = g->hdr;
    uint32_t gen = at(h->bar_gen).load(std::memory_order_acquire);
    if (at(h->bar_count).fetch_add(1, std::memory_order_acq_rel) + 1 == uint32_t(g->nranks)) {
        at(h->bar_count).store(0, std::memory_order_relaxed);
        at(h->bar_gen).fetch_add(1, std::memory_order_acq_rel);
        futex_wake_all(&h->bar_gen);
        return 0;
    }
    return wait_until(
        g, &h->bar_gen, [gen](uint32_t v) { return v != gen; }, Clock::time_point::max(), what,
        why);
}

// ---- joining ----

// Maps the whole segment (this member's own mapping until bind_view shares it); closes fd
// either way.
int map_fd(Group *g, int fd, size_t bytes, std::string *why)
{
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int rc = p == MAP_FAILED ? sys_fail(why, "mmap", g->name) : 0;
    close(fd);
    if (rc)
        return rc;
    g->base = static_cast<unsigned char *>(p);
    g->map_bytes = bytes;
    g->hdr = reinterpret_cast<Header *>(g->base);
    return 0;
}

// Threads of one process that join the same segment share one mapping. Besides saving address
// space, this lets ThreadSanitizer see the members' accesses and atomics at the same
// addresses: with a mapping per member it would see neither the races nor the synchronization.
// (A process that forks while another of its threads is joining must not join in the child.)
struct Mapping {
    unsigned char *base;
    size_t bytes;
    int users;
};

struct Registry {
    std::mutex lock;
    std::map<std::string, Mapping> by_name;
};

Registry &registry()
{
    static Registry *r = new Registry; // never destroyed: members may outlive static destructors
    return *r;
}

void use_mapping(Group *g, Mapping &m)
{
    ++m.users;
    g->base = m.base;
    g->map_bytes = m.bytes;
    g->hdr = reinterpret_cast<Header *>(m.base);
    g->in_registry = true;
}

// Points g at a mapping of its segment that this process already holds; false if none.
bool adopt_mapping(Group *g)
{
    Registry &r = registry();
    std::lock_guard<std::mutex> hold(r.lock);
    auto it = r.by_name.find(g->name);
    if (it == r.by_name.end())
        return false;
    use_mapping(g, it->second);
    return true;
}

// Registers g's own mapping, or drops it for the one another thread registered meanwhile.
void publish_mapping(Group *g)
{
    Registry &r = registry();
    std::lock_guard<std::mutex> hold(r.lock);
    auto [it, fresh] = r.by_name.try_emplace(g->name, Mapping{g->base, g->map_bytes, 0});
    if (!fresh)
        munmap(g->base, g->map_bytes);
    use_mapping(g, it->second);
}

void release_mapping(Group *g)
{
    if (!g->in_registry) {
        if (g->base)
            munmap(g->base, g->map_bytes);
        return;
    }
    Registry &r = registry();
    std::lock_guard<std::mutex> hold(r.lock);
    auto it = r.by_name.find(g->name);
    if (it != r.by_name.end() && --it->second.users == 0) {
        munmap(it->second.base, it->second.bytes);
        r.by_name.erase(it);
    }
}

// Called once the header is initialized: checks that the segment was made for as many members
// as this one expects, shares the mapping, and points the view at the slots and staging.
int bind_view(Group *g, std::string *why)
{
    if (g->hdr->nranks != uint32_t(g->nranks) || g->hdr->total_bytes != g->map_bytes)
        return fail(why, -EINVAL,
                    fmt("rank %d joined with nranks=%d but the communicator was created for %u "
                        "ranks",
                        g->rank, g->nranks, g->hdr->nranks));
    if (!g->in_registry)
        publish_mapping(g);
    Layout l = layout_for(g->nranks);
    g->slots = reinterpret_cast<Slot *>(g->base + l.slots_at);
    g->staging = g->base + l.staging_at;
    g->chunk = l.chunk_bytes;
    at(g->hdr->attached).fetch_add(1, std::memory_order_acq_rel);
    g->counted = true;
    return 0;
}

// First member: reserves every page now (a full /dev/shm then fails here, not with SIGBUS
// on a later store), fills the header, and publishes it by setting the magic last.
int create_segment(Group *g, int fd, std::string *why)
{
    Layout l = layout_for(g->nranks);
    int err;
    do
        err = posix_fallocate(fd, 0, off_t(l.total_bytes));
    while (err == EINTR);
    if (err) {
        close(fd);
        shm_unlink(g->name.c_str());
        return fail(why, -err,
                    fmt("cannot reserve %zu bytes for %s in /dev/shm: %s", l.total_bytes,
                        g->name.c_str(), strerror(err)));
    }
    if (int rc = map_fd(g, fd, l.total_bytes, why)) {
        shm_unlink(g->name.c_str());
        return rc;
    }
    g->hdr->nranks = uint32_t(g->nranks);
    g->hdr->chunk_bytes = l.chunk_bytes;
    g->hdr->total_bytes = l.total_bytes;
    at(g->hdr->magic).store(kMagic, std::memory_order_release);
    futex_wake_all(&g->hdr->magic);
    return bind_view(g, why);
}

// posix_fallocate on tmpfs sets the size only once every page is reserved, so a size of 0
// means the creator is still at it.
int wait_sized(Group *g, int fd, Clock::time_point deadline, size_t *size, std::string *why)
{
    for (;;) {
        struct stat st;
        if (fstat(fd, &st) != 0)
            return sys_fail(why, "fstat", g->name);
        if (st.st_size > 0) {
            *size = size_t(st.st_size);
            return 0;
        }
        if (Clock::now() >= deadline)
            return fail(why, -ETIMEDOUT,
                        fmt("group_join on rank %d: the creator of %s never sized it", g->rank,
                            g->name.c_str()));
        sleep_ms(1);
    }
}

int wait_magic(Group *g, Clock::time_point deadline, std::string *why)
{
    for (;;) {
        uint32_t seen = at(g->hdr->magic).load(std::memory_order_acquire);
        if (seen == kMagic)
            return 0;
        if (Clock::now() >= deadline)
            return fail(why, -ETIMEDOUT,
                        fmt("group_join on rank %d: the creator of %s never initialized it",
                            g->rank, g->name.c_str()));
        futex_wait(&g->hdr->magic, seen, 1);
    }
}

// Later members: wait until the creator has sized and initialized the segment, then check
// that everyone agrees on the member count.
int attach_segment(Group *g, int fd, Clock::time_point deadline, std::string *why)
{
    size_t size = 0;
    int rc = wait_sized(g, fd, deadline, &size, why);
    if (rc == 0 && size < sizeof(Header))
        rc = fail(why, -EPROTO, fmt("%s is too small to be a group segment", g->name.c_str()));
    if (rc) {
        close(fd);
        return rc;
    }
    if ((rc = map_fd(g, fd, size, why)) || (rc = wait_magic(g, deadline, why)))
        return rc;
    return bind_view(g, why);
}

// Reuses this process's mapping of the segment, or creates the segment, or attaches to it.
// O_EXCL decides who creates; a name that vanishes between our two opens means its creator
// failed and unlinked it, so we try again.
int open_segment(Group *g, Clock::time_point deadline, std::string *why)
{
    if (adopt_mapping(g))
        return bind_view(g, why);
    for (;;) {
        int fd = shm_open(g->name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0)
            return create_segment(g, fd, why);
        if (errno != EEXIST)
            return sys_fail(why, "shm_open(O_CREAT|O_EXCL)", g->name);
        fd = shm_open(g->name.c_str(), O_RDWR, 0);
        if (fd >= 0)
            return attach_segment(g, fd, deadline, why);
        if (errno != ENOENT)
            return sys_fail(why, "shm_open", g->name);
        if (Clock::now() >= deadline)
            return fail(why, -ETIMEDOUT,
                        fmt("group_join on rank %d: %s kept vanishing", g->rank, g->name.c_str()));
        sleep_ms(1);
    }
}

int claim_slot(Group *g, std::string *why)
{
    if (uint64_t f = at(g->hdr->fault).load(std::memory_order_acquire))
        return report_fault(g, f, "group_join", why);
    Slot &s = g->slots[g->rank];
    uint32_t expect = kFree;
    if (!at(s.state).compare_exchange_strong(expect, kClaimed, std::memory_order_acq_rel))
        return fail(why, -EEXIST,
                    fmt("rank %d joined twice: another member already holds that rank", g->rank));
    g->claimed = true;
    s.pid = int32_t(g->pid);
    s.start_time = own_start_time();
    s.pid_ns = own_pid_namespace();
    s.device = g->device;
    snprintf(s.machine, sizeof s.machine, "%s", machine_id().c_str());
    at(s.state).store(kReady, std::memory_order_release);
    at(g->hdr->joined).fetch_add(1, std::memory_order_acq_rel);
    futex_wake_all(&g->hdr->joined);
    return 0;
}

// Waits for every member; the first to time out abandons the join for all, so those that
// came fail together instead of each waiting out its own timeout.
int wait_joined(Group *g, Clock::time_point deadline, double timeout_s, std::string *why)
{
    uint32_t n = uint32_t(g->nranks);
    int rc = wait_until(
        g, &g->hdr->joined, [n](uint32_t v) { return v >= n; }, deadline, "group_join", why);
    if (rc != kDeadline)
        return rc;
    raise_fault(g, kJoinAbandoned, g->rank);
    return fail(why, -ETIMEDOUT,
                fmt("group_join timed out after %.3g s on rank %d: %u of %d ranks came; ",
                    timeout_s, g->rank, at(g->hdr->joined).load(), g->nranks) +
                    never_came(g));
}

// NCCL refuses two ranks on one GPU; every member runs the same check and fails alike.
int check_devices(const Group *g, std::string *why)
{
    for (int a = 0; a < g->nranks; ++a)
        for (int b = a + 1; b < g->nranks; ++b) {
            const Slot &x = g->slots[a], &y = g->slots[b];
            if (x.device >= 0 && x.device == y.device &&
                strncmp(x.machine, y.machine, sizeof x.machine) == 0)
                return fail(why, -EEXIST,
                            fmt("Duplicate GPU detected: rank %d and rank %d both use device %d "
                                "on machine %.64s",
                                a, b, int(x.device), x.machine));
        }
    return 0;
}

int check_join_args(const unsigned char *id, int nranks, int rank, double timeout_s,
                    std::string *why)
{
    if (!id || segment_name(id).empty())
        return fail(why, -EINVAL, "group_join: the id was not made by make_id");
    if (nranks < 1 || nranks > kMaxRanks)
        return fail(why, -EINVAL, fmt("group_join: nranks=%d is outside 1..%d", nranks, kMaxRanks));
    if (rank < 0 || rank >= nranks)
        return fail(why, -EINVAL, fmt("group_join: rank %d is outside 0..%d", rank, nranks - 1));
    if (!(timeout_s >= 0))
        return fail(why, -EINVAL, fmt("group_join: timeout_s=%g is not >= 0", timeout_s));
    return 0;
}

Clock::time_point deadline_after(double seconds)
{
    // A year is "forever" here and keeps the conversion from overflowing.
    std::chrono::duration<double> d(std::min(seconds, 365.0 * 86400));
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(d);
}

// ---- collectives: argument checks and the call handshake ----

using ReduceFn = void (*)(unsigned char *dst, const unsigned char *src, size_t stride, int n,
                          size_t count);

template <class T> T load(const unsigned char *p)
{
    T v;
    memcpy(&v, p, sizeof v);
    return v;
}

template <class T> void store(unsigned char *p, T v) { memcpy(p, &v, sizeof v); }

// Integer Sum/Prod go through uint64_t: wrapping is defined there, and truncating back to T
// gives the same bits as wrapping in T.
struct SumOp {
    template <class T> static T apply(T a, T b)
    {
        if constexpr (std::is_integral_v<T>)
            return T(uint64_t(a) + uint64_t(b));
        else
            return a + b;
    }
};
struct ProdOp {
    template <class T> static T apply(T a, T b)
    {
        if constexpr (std::is_integral_v<T>)
            return T(uint64_t(a) * uint64_t(b));
        else
            return a * b;
    }
};
struct MaxOp {
    template <class T> static T apply(T a, T b) { return b > a ? b : a; }
};
struct MinOp {
    template <class T> static T apply(T a, T b) { return b < a ? b : a; }
};

// dst[i] = src_0[i] op src_1[i] op ... op src_{n-1}[i], left to right, where src_m = src +
// m*stride: the one order every member uses, so all get the same bits.
template <class T, class Op>
void reduce_in_rank_order(unsigned char *dst, const unsigned char *src, size_t stride, int n,
                          size_t count)
{
    for (size_t i = 0; i < count; ++i) {
        const unsigned char *p = src + i * sizeof(T);
        T acc = load<T>(p);
        for (int m = 1; m < n; ++m)
            acc = Op::apply(acc, load<T>(p + size_t(m) * stride));
        store(dst + i * sizeof(T), acc);
    }
}

// 16-bit floats as NCCL's ring sums them: each step adds (or compares) in fp32 and rounds the
// partial result to 16 bits (to nearest even), so an element reduced over n members is
// rounded n - 1 times, in rank order here.
float widen16(uint16_t h, bool bf)
{
    if (!bf) {
        _Float16 x;
        memcpy(&x, &h, 2);
        return float(x);
    }
    uint32_t b = uint32_t(h) << 16;
    float x;
    memcpy(&x, &b, 4);
    return x;
}

uint16_t narrow16(float x, bool bf)
{
    uint16_t h;
    if (!bf) {
        _Float16 y = _Float16(x); // IEEE round to nearest even
        memcpy(&h, &y, 2);
        return h;
    }
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u) // NaN: stays NaN, quieted
        return uint16_t((b >> 16) | 0x40u);
    return uint16_t((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

template <class Op, bool BF>
void reduce16_in_rank_order(unsigned char *dst, const unsigned char *src, size_t stride, int n,
                            size_t count)
{
    for (size_t i = 0; i < count; ++i) {
        const unsigned char *p = src + i * 2;
        uint16_t acc = load<uint16_t>(p);
        for (int m = 1; m < n; ++m)
            acc = narrow16(
                Op::apply(widen16(acc, BF), widen16(load<uint16_t>(p + size_t(m) * stride), BF)),
                BF);
        store(dst + i * 2, acc);
    }
}

template <bool BF> ReduceFn reducer16_for(RedOp op)
{
    switch (op) {
    case RedOp::Sum:
        return reduce16_in_rank_order<SumOp, BF>;
    case RedOp::Prod:
        return reduce16_in_rank_order<ProdOp, BF>;
    case RedOp::Max:
        return reduce16_in_rank_order<MaxOp, BF>;
    case RedOp::Min:
        return reduce16_in_rank_order<MinOp, BF>;
    }
    return nullptr;
}

template <class T> ReduceFn reducer_for(RedOp op)
{
    switch (op) {
    case RedOp::Sum:
        return reduce_in_rank_order<T, SumOp>;
    case RedOp::Prod:
        return reduce_in_rank_order<T, ProdOp>;
    case RedOp::Max:
        return reduce_in_rank_order<T, MaxOp>;
    case RedOp::Min:
        return reduce_in_rank_order<T, MinOp>;
    }
    return nullptr;
}

// NULL for values outside the enums.
ReduceFn reducer(DType type, RedOp op)
{
    switch (type) {
    case DType::I8:
        return reducer_for<int8_t>(op);
    case DType::U8:
        return reducer_for<uint8_t>(op);
    case DType::I32:
        return reducer_for<int32_t>(op);
    case DType::U32:
        return reducer_for<uint32_t>(op);
    case DType::I64:
        return reducer_for<int64_t>(op);
    case DType::U64:
        return reducer_for<uint64_t>(op);
    case DType::F32:
        return reducer_for<float>(op);
    case DType::F64:
        return reducer_for<double>(op);
    case DType::F16:
        return reducer16_for<false>(op);
    case DType::BF16:
        return reducer16_for<true>(op);
    }
    return nullptr;
}

// The checks every collective makes before touching shared memory. `span` is how many
// elements the largest buffer holds in units of count (n for allgather's recv).
int check_buffers(const Group *g, const char *what, const void *send, const void *recv,
                  size_t count, DType type, size_t span, std::string *why)
{
    if (!g)
        return fail(why, -EINVAL, fmt("%s: the group is NULL", what));
    size_t es = dtype_size(type);
    if (es == 0)
        return fail(why, -EINVAL, fmt("%s: type %d is not a DType", what, int(type)));
    if (count > SIZE_MAX / es / span)
        return fail(why, -EINVAL, fmt("%s: count %zu overflows a byte size", what, count));
    if (count > 0 && (!send || !recv))
        return fail(why, -EINVAL,
                    fmt("%s on rank %d: %s buffer is NULL with count %zu", what, g->rank,
                        send ? "the recv" : "the send", count));
    return 0;
}

int check_reduction(const Group *g, const char *what, const void *send, const void *recv,
                    size_t count, DType type, RedOp op, size_t span, ReduceFn *fn, std::string *why)
{
    if (int rc = check_buffers(g, what, send, recv, count, type, span, why))
        return rc;
    *fn = reducer(type, op);
    if (!*fn)
        return fail(why, -EINVAL, fmt("%s: op %d is not a RedOp", what, int(op)));
    return 0;
}

CallDesc call_desc(uint32_t kind, size_t count, DType type, int op, int root)
{
    return CallDesc{0, kind, uint64_t(count), int32_t(type), int32_t(op), int32_t(root), 0};
}

bool same_call(const CallDesc &a, const CallDesc &b)
{
    // An exchange's count is its own op list's length: members legitimately differ there.
    bool counts = a.kind == kExchange || a.count == b.count;
    return a.seq == b.seq && a.kind == b.kind && counts && a.type == b.type && a.op == b.op &&
           a.root == b.root;
}

// Every member compares everyone with rank 0, so all find the same first mismatch and fail
// with the same message; all passed the barrier, so the group stays usable.
int check_same_call(const Group *g, uint32_t parity, std::string *why)
{
    const CallDesc &first = g->slots[0].desc[parity];
    for (int m = 1; m < g->nranks; ++m) {
        const CallDesc &d = g->slots[m].desc[parity];
        if (!same_call(first, d))
            return fail(why, -EPROTO,
                        fmt("mismatched collective calls: rank 0 called ") + describe(first) +
                            fmt(" but rank %d called ", m) + describe(d));
    }
    return 0;
}

// Posts this member's call, meets the others, and checks that all made the same call.
int begin_call(Group *g, CallDesc d, std::string *why)
{
    const char *what = kind_name(d.kind);
    if (uint64_t f = at(g->hdr->fault).load(std::memory_order_acquire))
        return report_fault(g, f, what, why);
    uint32_t parity = g->seq & 1;
    d.seq = g->seq++;
    g->slots[g->rank].desc[parity] = d;
    if (int rc = barrier(g, what, why))
        return rc;
    return check_same_call(g, parity, why);
}

unsigned char *staging_of(Group *g, int m) { return g->staging + size_t(m) * g->chunk; }

const unsigned char *bytes(const void *p) { return static_cast<const unsigned char *>(p); }
unsigned char *bytes(void *p) { return static_cast<unsigned char *>(p); }

// One round: every member fills its staging, all meet, every member drains what it needs from
// everyone's staging, and all meet again so the staging may be refilled.
template <class Fill, class Drain>
int round_trip(Group *g, const char *what, Fill fill, Drain drain, std::string *why)
{
    fill();
    if (int rc = barrier(g, what, why))
        return rc;
    drain();
    return barrier(g, what, why);
}

// ---- exchange helpers ----

// The part of a piece [pos, pos+len) of a stream that lies in the window [lo, lo+size).
struct Overlap {
    uint64_t in_piece, in_window, len;
};

Overlap overlap(uint64_t pos, uint64_t len, uint64_t lo, uint64_t size)
{
    uint64_t s = std::max(pos, lo), e = std::min(pos + len, lo + size);
    if (s >= e)
        return Overlap{0, 0, 0};
    return Overlap{s - pos, s - lo, e - s};
}

uint64_t op_bytes(const OpDesc &o) { return o.count * dtype_size(DType(o.type)); }

int check_ops(const Group *g, const std::vector<P2P> &ops, std::string *why)
{
    if (!g)
        return fail(why, -EINVAL, "exchange: the group is NULL");
    for (size_t i = 0; i < ops.size(); ++i) {
        const P2P &o = ops[i];
        size_t es = dtype_size(o.type);
        if (o.peer < 0 || o.peer >= g->nranks || es == 0 || o.count > SIZE_MAX / es ||
            (o.count > 0 && !o.buf))
            return fail(why, -EINVAL,
                        fmt("exchange on rank %d: op #%zu (%s peer %d, count %zu, type %d) is "
                            "invalid",
                            g->rank, i, o.send ? "send to" : "receive from", o.peer, o.count,
                            int(o.type)));
    }
    return 0;
}

// Copies every member's posted op list out of the staging (which the data rounds reuse).
int read_op_lists(Group *g, uint32_t parity, std::vector<std::vector<OpDesc>> *all,
                  std::string *why)
{
    size_t cap = g->chunk / sizeof(OpDesc);
    all->assign(size_t(g->nranks), {});
    for (int m = 0; m < g->nranks; ++m) {
        uint64_t n = g->slots[m].desc[parity].count;
        if (n > cap)
            return fail(why, -EINVAL,
                        fmt("exchange: rank %d listed %llu operations; at most %zu fit", m,
                            (unsigned long long)n, cap));
        const OpDesc *d = reinterpret_cast<const OpDesc *>(staging_of(g, m));
        (*all)[size_t(m)].assign(d, d + n);
    }
    return 0;
}

// The k-th send from a to b must match the k-th receive on b from a. Every member runs this
// on the same lists, so all reach the same verdict and message.
int match_ops(const std::vector<std::vector<OpDesc>> &all, std::string *why)
{
    std::map<std::pair<int, int>, std::pair<std::vector<OpDesc>, std::vector<OpDesc>>> pairs;
    for (int m = 0; m < int(all.size()); ++m)
        for (const OpDesc &o : all[size_t(m)]) {
            if (o.send)
                pairs[{m, o.peer}].first.push_back(o);
            else
                pairs[{o.peer, m}].second.push_back(o);
        }
    for (const auto &[ab, lists] : pairs) {
        auto [a, b] = ab;
        const auto &[sends, recvs] = lists;
        if (sends.size() != recvs.size())
            return fail(why, -EPROTO,
                        fmt("exchange mismatch: rank %d posts %zu send(s) to rank %d but rank %d "
                            "posts %zu receive(s) from rank %d",
                            a, sends.size(), b, b, recvs.size(), a));
        for (size_t k = 0; k < sends.size(); ++k)
            if (sends[k].count != recvs[k].count || sends[k].type != recvs[k].type)
                return fail(why, -EPROTO,
                            fmt("exchange mismatch: send #%zu from rank %d to rank %d is %llu x "
                                "%s but rank %d receives %llu x %s",
                                k, a, b, (unsigned long long)sends[k].count,
                                dtype_name(DType(sends[k].type)), b,
                                (unsigned long long)recvs[k].count,
                                dtype_name(DType(recvs[k].type))));
    }
    return 0;
}

// Where each of this member's receives starts in its sender's stream (the sender's sends,
// concatenated in list order).
struct Incoming {
    int from;
    uint64_t pos, len;
    unsigned char *buf;
};

std::vector<Incoming> place_receives(const Group *g, const std::vector<P2P> &ops,
                                     const std::vector<std::vector<OpDesc>> &all)
{
    std::vector<std::vector<uint64_t>> starts(all.size()); // per sender, its sends to me
    for (size_t a = 0; a < all.size(); ++a) {
        uint64_t pos = 0;
        for (const OpDesc &o : all[a]) {
            if (o.send && o.peer == g->rank)
                starts[a].push_back(pos);
            pos += o.send ? op_bytes(o) : 0;
        }
    }
    std::vector<Incoming> in;
    std::vector<size_t> taken(all.size(), 0);
    for (const P2P &o : ops)
        if (!o.send) {
            size_t a = size_t(o.peer);
            in.push_back(Incoming{o.peer, starts[a][taken[a]++], o.count * dtype_size(o.type),
                                  bytes(o.buf)});
        }
    return in;
}

uint64_t stream_bytes(const std::vector<OpDesc> &list)
{
    uint64_t total = 0;
    for (const OpDesc &o : list)
        total += o.send ? op_bytes(o) : 0;
    return total;
}

// Copies the part of this member's send stream that falls in window [lo, lo+chunk) into its
// staging.
void fill_stream_window(Group *g, const std::vector<P2P> &ops, uint64_t lo)
{
    uint64_t pos = 0;
    for (const P2P &o : ops) {
        if (!o.send)
            continue;
        uint64_t len = o.count * dtype_size(o.type);
        Overlap v = overlap(pos, len, lo, g->chunk);
        if (v.len)
            memcpy(staging_of(g, g->rank) + v.in_window, bytes(o.buf) + v.in_piece, v.len);
        pos += len;
    }
}

void drain_stream_window(Group *g, const std::vector<Incoming> &in, uint64_t lo)
{
    for (const Incoming &r : in) {
        Overlap v = overlap(r.pos, r.len, lo, g->chunk);
        if (v.len)
            memcpy(r.buf + v.in_piece, staging_of(g, r.from) + v.in_window, v.len);
    }
}

int move_p2p_data(Group *g, const std::vector<P2P> &ops,
                  const std::vector<std::vector<OpDesc>> &all, std::string *why)
{
    uint64_t longest = 0;
    for (const auto &list : all)
        longest = std::max(longest, stream_bytes(list));
    std::vector<Incoming> in = place_receives(g, ops, all);
    for (uint64_t lo = 0; lo < longest; lo += g->chunk) {
        int rc = round_trip(
            g, "exchange", [&] { fill_stream_window(g, ops, lo); },
            [&] { drain_stream_window(g, in, lo); }, why);
        if (rc)
            return rc;
    }
    return 0;
}

// group_split: this member's place in its color's new group.
struct Place {
    int leader = -1, rank = 0, size = 0;
};

Place find_place(const Group *g, int color, int key)
{
    Place p;
    for (int m = 0; m < g->nranks; ++m) {
        const Slot &s = g->slots[m];
        if (s.color != color)
            continue;
        if (p.leader < 0)
            p.leader = m;
        ++p.size;
        if (std::pair(s.key, m) < std::pair(key, g->rank))
            ++p.rank;
    }
    return p;
}

} // namespace

// ---- public API ----

size_t dtype_size(DType type)
{
    switch (type) {
    case DType::I8:
    case DType::U8:
        return 1;
    case DType::F16:
    case DType::BF16:
        return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32:
        return 4;
    case DType::I64:
    case DType::U64:
    case DType::F64:
        return 8;
    }
    return 0;
}

const char *dtype_name(DType type)
{
    switch (type) {
    case DType::I8:
        return "I8";
    case DType::U8:
        return "U8";
    case DType::I32:
        return "I32";
    case DType::U32:
        return "U32";
    case DType::I64:
        return "I64";
    case DType::U64:
        return "U64";
    case DType::F16:
        return "F16";
    case DType::F32:
        return "F32";
    case DType::F64:
        return "F64";
    case DType::BF16:
        return "BF16";
    }
    return "?";
}

void make_id(unsigned char id[128])
{
    memset(id, 0, 128);
    memcpy(id, kIdTag, sizeof kIdTag);
    fill_random(id + kIdRandomAt, kIdRandomBytes);
    uint32_t pid = uint32_t(getpid());
    memcpy(id + kIdPidAt, &pid, sizeof pid);
}

std::string segment_name(const unsigned char id[128])
{
    if (memcmp(id, kIdTag, sizeof kIdTag) != 0)
        return "";
    uint32_t pid;
    memcpy(&pid, id + kIdPidAt, sizeof pid);
    std::string name = fmt("/cudasim-shm-%u-", pid);
    for (size_t i = 0; i < kIdRandomBytes; ++i)
        name += fmt("%02x", id[kIdRandomAt + i]);
    return name;
}

int group_join(const unsigned char id[128], int nranks, int rank, int device, double timeout_s,
               Group **out, std::string *why)
{
    if (!out)
        return fail(why, -EINVAL, "group_join: out is NULL");
    *out = nullptr;
    if (int rc = check_join_args(id, nranks, rank, timeout_s, why))
        return rc;
    auto g = std::make_unique<Group>();
    g->name = segment_name(id);
    g->rank = rank;
    g->nranks = nranks;
    g->device = device;
    g->pid = getpid();
    Clock::time_point deadline = deadline_after(timeout_s);
    int rc = open_segment(g.get(), deadline, why);
    if (rc == 0)
        rc = claim_slot(g.get(), why);
    if (rc == 0)
        rc = wait_joined(g.get(), deadline, timeout_s, why);
    if (rc == 0) {
        // Everyone has it mapped: the name is no longer needed, and unlinking it now means a
        // member that crashes later leaves nothing behind in /dev/shm.
        shm_unlink(g->name.c_str());
        rc = check_devices(g.get(), why);
    }
    if (rc) {
        group_destroy(g.release());
        return rc;
    }
    *out = g.release();
    return 0;
}

int group_split(Group *parent, int color, int key, double timeout_s, Group **out, std::string *why)
{
    if (!out)
        return fail(why, -EINVAL, "group_split: out is NULL");
    *out = nullptr;
    if (!parent)
        return fail(why, -EINVAL, "group_split: the parent group is NULL");
    if (!(timeout_s >= 0))
        return fail(why, -EINVAL, fmt("group_split: timeout_s=%g is not >= 0", timeout_s));
    Slot &me = parent->slots[parent->rank];
    me.color = color < 0 ? -1 : color;
    me.key = key;
    make_id(me.child_id); // only the lowest parent rank of each color has its id used
    if (int rc = begin_call(parent, call_desc(kSplit, 0, DType::I8, -1, -1), why))
        return rc;
    Place p = find_place(parent, me.color, key);
    unsigned char id[128];
    memcpy(id, parent->slots[p.leader].child_id, sizeof id);
    // Everyone has read the slots: a following split may overwrite them.
    if (int rc = barrier(parent, "group_split", why))
        return rc;
    if (color < 0)
        return 0;
    return group_join(id, p.size, p.rank, parent->device, timeout_s, out, why);
}

int group_rank(const Group *g) { return g->rank; }
int group_size(const Group *g) { return g->nranks; }
size_t group_chunk_bytes(const Group *g) { return g->chunk; }

int allreduce(Group *g, const void *send, void *recv, size_t count, DType type, RedOp op,
              std::string *why)
{
    ReduceFn fn = nullptr;
    if (int rc = check_reduction(g, "allreduce", send, recv, count, type, op, 1, &fn, why))
        return rc;
    if (int rc = begin_call(g, call_desc(kAllreduce, count, type, int(op), -1), why))
        return rc;
    size_t es = dtype_size(type), per = g->chunk / es;
    for (size_t off = 0; off < count; off += per) {
        size_t c = std::min(per, count - off);
        int rc = round_trip(
            g, "allreduce", [&] { memcpy(staging_of(g, g->rank), bytes(send) + off * es, c * es); },
            [&] { fn(bytes(recv) + off * es, staging_of(g, 0), g->chunk, g->nranks, c); }, why);
        if (rc)
            return rc;
    }
    return 0;
}

int allgather(Group *g, const void *send, void *recv, size_t count, DType type, std::string *why)
{
    size_t n = g ? size_t(g->nranks) : 1;
    if (int rc = check_buffers(g, "allgather", send, recv, count, type, n, why))
        return rc;
    if (int rc = begin_call(g, call_desc(kAllgather, count, type, -1, -1), why))
        return rc;
    size_t es = dtype_size(type), per = g->chunk / es;
    for (size_t off = 0; off < count; off += per) {
        size_t c = std::min(per, count - off);
        auto drain = [&] {
            for (size_t m = 0; m < n; ++m)
                memcpy(bytes(recv) + (m * count + off) * es, staging_of(g, int(m)), c * es);
        };
        int rc = round_trip(
            g, "allgather", [&] { memcpy(staging_of(g, g->rank), bytes(send) + off * es, c * es); },
            drain, why);
        if (rc)
            return rc;
    }
    return 0;
}

int reduce_scatter(Group *g, const void *send, void *recv, size_t count, DType type, RedOp op,
                   std::string *why)
{
    size_t n = g ? size_t(g->nranks) : 1;
    ReduceFn fn = nullptr;
    if (int rc = check_reduction(g, "reduce_scatter", send, recv, count, type, op, n, &fn, why))
        return rc;
    if (int rc = begin_call(g, call_desc(kReduceScatter, count, type, int(op), -1), why))
        return rc;
    // Each round a member stages one slice per destination, so a slice is 1/n of its chunk.
    size_t es = dtype_size(type), per = g->chunk / es / n;
    for (size_t off = 0; off < count; off += per) {
        size_t c = std::min(per, count - off);
        auto fill = [&] {
            for (size_t d = 0; d < n; ++d)
                memcpy(staging_of(g, g->rank) + d * c * es, bytes(send) + (d * count + off) * es,
                       c * es);
        };
        auto drain = [&] {
            fn(bytes(recv) + off * es, staging_of(g, 0) + size_t(g->rank) * c * es, g->chunk,
               g->nranks, c);
        };
        if (int rc = round_trip(g, "reduce_scatter", fill, drain, why))
            return rc;
    }
    return 0;
}

int broadcast(Group *g, const void *send, void *recv, size_t count, DType type, int root,
              std::string *why)
{
    bool is_root = g && g->rank == root;
    if (int rc = check_buffers(g, "broadcast", is_root ? send : recv, recv, count, type, 1, why))
        return rc;
    if (root < 0 || root >= g->nranks)
        return fail(why, -EINVAL, fmt("broadcast: root %d is outside 0..%d", root, g->nranks - 1));
    if (int rc = begin_call(g, call_desc(kBroadcast, count, type, -1, root), why))
        return rc;
    size_t es = dtype_size(type);
    if (is_root && send != recv && count > 0)
        memmove(recv, send, count * es); // the root then stages from recv, in place or not
    // Only the root writes, so it may use every member's chunk at once.
    size_t per = g->chunk * size_t(g->nranks) / es;
    for (size_t off = 0; off < count; off += per) {
        size_t c = std::min(per, count - off);
        int rc = round_trip(
            g, "broadcast",
            [&] {
                if (is_root)
                    memcpy(staging_of(g, 0), bytes(recv) + off * es, c * es);
            },
            [&] {
                if (!is_root)
                    memcpy(bytes(recv) + off * es, staging_of(g, 0), c * es);
            },
            why);
        if (rc)
            return rc;
    }
    return 0;
}

int exchange(Group *g, const std::vector<P2P> &ops, std::string *why)
{
    if (int rc = check_ops(g, ops, why))
        return rc;
    // Post the op list in this member's staging when it fits; the count in the call
    // descriptor tells everyone when it did not.
    if (ops.size() <= g->chunk / sizeof(OpDesc)) {
        OpDesc *d = reinterpret_cast<OpDesc *>(staging_of(g, g->rank));
        for (size_t i = 0; i < ops.size(); ++i)
            d[i] = OpDesc{ops[i].send, int32_t(ops[i].peer), uint64_t(ops[i].count),
                          int32_t(ops[i].type), 0};
    }
    uint32_t parity = g->seq & 1;
    if (int rc = begin_call(g, call_desc(kExchange, ops.size(), DType::I8, -1, -1), why))
        return rc;
    std::vector<std::vector<OpDesc>> all;
    int listed = read_op_lists(g, parity, &all, why);
    // Everyone has read the lists: the staging is free for the data.
    if (int rc = barrier(g, "exchange", why))
        return rc;
    if (listed)
        return listed;
    if (int rc = match_ops(all, why))
        return rc;
    return move_p2p_data(g, ops, all, why);
}

void group_abort(Group *g)
{
    if (g && g->hdr)
        raise_fault(g, kAborted, g->rank);
}

int group_error(const Group *g, std::string *why)
{
    if (!g)
        return fail(why, -EINVAL, "group_error: the group is NULL");
    if (uint64_t f = at(g->hdr->fault).load(std::memory_order_acquire))
        return report_fault(g, f, nullptr, why);
    return 0;
}

void group_destroy(Group *g)
{
    if (!g)
        return;
    if (g->claimed) {
        // Peers still waiting on this member see it gone and fail instead of hanging.
        at(g->slots[g->rank].state).store(kLeft, std::memory_order_release);
        wake_all(g);
    }
    if (g->counted && at(g->hdr->attached).fetch_sub(1, std::memory_order_acq_rel) == 1)
        shm_unlink(g->name.c_str()); // ENOENT when the join already unlinked it: fine
    release_mapping(g);
    delete g;
}

} // namespace cudasim::shm

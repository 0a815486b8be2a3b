/* SPDX-License-Identifier: MIT */
// Checks cudasim's shared-memory group transport (src/shm_group.h) with its members as forked
// processes, as threads of one process, and as processes of two threads each, for 2, 3 and 4
// members. Every result is compared with a reference the checker computes on its own from the
// inputs, which are a fixed function of (rank, index): integers exactly (modulo 2^bits, in
// 128-bit arithmetic), floats as the rank-ordered combination the header promises, bit for bit.
// Each receive buffer has guard bytes on both sides that must come back untouched.
// Prints one line per scenario; exits 0 when all pass, 1 otherwise.
#include "shm_group.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace cudasim::shm;
using Clock = std::chrono::steady_clock;

namespace
{

// ---- harness: run one function as n ranks ----

enum class Mode { Processes, Threads, Mixed }; // Mixed: n/2 processes of two threads each

const char *mode_name(Mode m)
{
    return m == Mode::Processes ? "processes" : m == Mode::Threads ? "threads" : "2-thread procs";
}

struct Rank {
    int rank, n;
    const unsigned char *id;
    Mode mode;
};
using RankFn = std::function<int(const Rank &)>;

constexpr int kKilled = 128; // outcome of a process killed by signal s: kKilled + s
constexpr double kJoinTimeout = 30;

int failed(const Rank &r, int line, const char *cond, const std::string &detail)
{
    fprintf(stderr, "    rank %d/%d (%s): line %d: %s failed; %s\n", r.rank, r.n, mode_name(r.mode),
            line, cond, detail.c_str());
    return 1;
}

#define CHECK(cond, detail)                              \
    do {                                                 \
        if (!(cond))                                     \
            return failed(r, __LINE__, #cond, (detail)); \
    } while (0)

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

int run_threads(const std::vector<int> &ranks, int n, const RankFn &fn, const unsigned char *id,
                Mode mode, std::vector<int> *outcome)
{
    std::vector<std::thread> threads;
    for (int rank : ranks)
        threads.emplace_back([&, rank] { (*outcome)[size_t(rank)] = fn(Rank{rank, n, id, mode}); });
    int worst = 0;
    for (size_t i = 0; i < threads.size(); ++i) {
        threads[i].join();
        worst = std::max(worst, (*outcome)[size_t(ranks[i])]);
    }
    return worst;
}

// Waits for the children, reaping whichever ends first (a dead member must not linger as a
// zombie longer than needed); kills them all if they have not ended after a minute.
void reap(const std::vector<pid_t> &pids, std::vector<int> *per_process)
{
    Clock::time_point t0 = Clock::now();
    size_t left = pids.size();
    while (left > 0) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            size_t i = size_t(std::find(pids.begin(), pids.end(), pid) - pids.begin());
            if (i < pids.size()) {
                (*per_process)[i] =
                    WIFEXITED(status) ? WEXITSTATUS(status) : kKilled + WTERMSIG(status);
                --left;
            }
            continue;
        }
        if (seconds_since(t0) > 60) {
            fprintf(stderr, "    watchdog: killing ranks still running after 60 s\n");
            for (pid_t p : pids)
                kill(p, SIGKILL);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

// Runs fn as ranks 0..n-1; returns each rank's outcome (fn's value, or kKilled + signal).
std::vector<int> run_ranks(Mode mode, int n, const RankFn &fn, const unsigned char *id)
{
    std::vector<int> outcome(size_t(n), 0);
    if (mode == Mode::Threads) {
        std::vector<int> all(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
            all[size_t(i)] = i;
        run_threads(all, n, fn, id, mode, &outcome);
        return outcome;
    }
    int per = mode == Mode::Mixed ? 2 : 1;
    std::vector<pid_t> pids;
    fflush(stdout);
    fflush(stderr);
    for (int first = 0; first < n; first += per) {
        pid_t pid = fork();
        if (pid == 0) {
            std::vector<int> mine;
            for (int k = first; k < std::min(n, first + per); ++k)
                mine.push_back(k);
            int rc = run_threads(mine, n, fn, id, mode, &outcome);
            fflush(stdout);
            fflush(stderr);
            _exit(std::min(rc, 100));
        }
        pids.push_back(pid);
    }
    std::vector<int> per_process(pids.size(), -1);
    reap(pids, &per_process);
    for (int k = 0; k < n; ++k)
        outcome[size_t(k)] = per_process[size_t(k / per)];
    return outcome;
}

bool segment_gone(const unsigned char id[128])
{
    std::string path = "/dev/shm" + segment_name(id);
    return access(path.c_str(), F_OK) != 0;
}

int g_failures = 0;

// Runs one scenario and prints its line. `expect(rank)` gives each rank's expected outcome.
void scenario(
    const char *what, Mode mode, int n, const RankFn &fn,
    const std::function<int(int)> &expect = [](int) { return 0; })
{
    unsigned char id[128];
    make_id(id);
    Clock::time_point t0 = Clock::now();
    std::vector<int> outcome = run_ranks(mode, n, fn, id);
    bool ok = true;
    for (int k = 0; k < n; ++k)
        if (outcome[size_t(k)] != expect(k)) {
            fprintf(stderr, "    rank %d ended with %d, expected %d\n", k, outcome[size_t(k)],
                    expect(k));
            ok = false;
        }
    if (!segment_gone(id)) {
        fprintf(stderr, "    %s is still in /dev/shm\n", segment_name(id).c_str());
        ok = false;
    }
    printf("%s %-58s n=%d %-14s %.2fs\n", ok ? "ok  " : "FAIL", what, n, mode_name(mode),
           seconds_since(t0));
    fflush(stdout);
    g_failures += ok ? 0 : 1;
}

// ---- inputs and references ----

uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Integers: all bits random (negatives, overflowing sums and products). Floats: k/97 with k
// in [-10005, 10005]: most sums round, so a different order would change the bits.
template <class T> T input(int rank, size_t i)
{
    uint64_t h = mix(uint64_t(rank) << 40 ^ i);
    if constexpr (std::is_integral_v<T>)
        return T(h);
    else
        return T(int64_t(h % 20011) - 10005) / T(97);
}

unsigned char byte_input(int rank, size_t j)
{
    return (unsigned char)mix(uint64_t(rank) << 44 ^ j ^ 0x5a5a);
}

template <class T> T combine(RedOp op, T a, T b)
{
    switch (op) {
    case RedOp::Sum:
        return a + b;
    case RedOp::Prod:
        return a * b;
    case RedOp::Max:
        return std::max(a, b);
    case RedOp::Min:
        return std::min(a, b);
    }
    return a;
}

// Ranks 0..n-1's element i reduced: integers exactly modulo 2^128 then truncated (the same
// value modulo 2^bits), floats in T in rank order.
template <class T> T reference(RedOp op, int n, size_t i)
{
    if constexpr (std::is_integral_v<T>) {
        if (op == RedOp::Sum || op == RedOp::Prod) {
            unsigned __int128 acc = op == RedOp::Sum ? 0 : 1;
            for (int k = 0; k < n; ++k) {
                unsigned __int128 v = (unsigned __int128)(__int128)input<T>(k, i);
                acc = op == RedOp::Sum ? acc + v : acc * v;
            }
            return T(uint64_t(acc));
        }
    }
    T acc = input<T>(0, i);
    for (int k = 1; k < n; ++k)
        acc = combine(op, acc, input<T>(k, i));
    return acc;
}

// A host buffer with guard bytes on both sides.
struct Buf {
    static constexpr size_t kGuard = 64;
    static constexpr unsigned char kFill = 0xA5;
    std::vector<unsigned char> mem;
    size_t bytes;
    explicit Buf(size_t b) : mem(b + 2 * kGuard, kFill), bytes(b) {}
    unsigned char *data() { return mem.data() + kGuard; }
    bool guards_intact() const
    {
        for (size_t i = 0; i < kGuard; ++i)
            if (mem[i] != kFill || mem[kGuard + bytes + i] != kFill)
                return false;
        return true;
    }
};

template <class T> T load(const unsigned char *p)
{
    T v;
    memcpy(&v, p, sizeof v);
    return v;
}

template <class T> void store(unsigned char *p, T v) { memcpy(p, &v, sizeof v); }

// Index of the first element of `got` (count elements) whose bits differ from want(i); -1 if
// none.
template <class T, class Want> long first_wrong(const unsigned char *got, size_t count, Want want)
{
    for (size_t i = 0; i < count; ++i) {
        T w = want(i), g = load<T>(got + i * sizeof(T));
        if (memcmp(&w, &g, sizeof(T)) != 0)
            return long(i);
    }
    return -1;
}

const RedOp kOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min};
const char *op_text(RedOp op)
{
    static const char *names[] = {"sum", "prod", "max", "min"};
    return names[int(op)];
}

// Counts for a typed collective: zero, one, odd, and (big) more than two rounds of staging.
std::vector<size_t> counts_for(const Group *g, size_t es)
{
    return {0, 1, 7, group_chunk_bytes(g) / es * 2 + 3};
}

struct Joined {
    Group *g = nullptr;
    ~Joined() { group_destroy(g); }
};

int join(const Rank &r, Joined *j, int device)
{
    std::string why;
    CHECK(group_join(r.id, r.n, r.rank, device, kJoinTimeout, &j->g, &why) == 0, why);
    CHECK(group_rank(j->g) == r.rank && group_size(j->g) == r.n, "rank or size differs");
    return 0;
}

std::string where(DType t, RedOp op, size_t count, bool in_place)
{
    char b[128];
    snprintf(b, sizeof b, "%s %s count=%zu%s", dtype_name(t), op_text(op), count,
             in_place ? " in place" : "");
    return b;
}

// ---- allreduce ----

template <class T>
int allreduce_case(const Rank &r, Group *g, DType t, RedOp op, size_t count, bool in_place)
{
    Buf send(count * sizeof(T)), recv(count * sizeof(T));
    for (size_t i = 0; i < count; ++i)
        store(send.data() + i * sizeof(T), input<T>(r.rank, i));
    Buf &out = in_place ? send : recv;
    std::string why, at = where(t, op, count, in_place);
    CHECK(allreduce(g, send.data(), out.data(), count, t, op, &why) == 0, at + ": " + why);
    auto want = [&](size_t i) { return reference<T>(op, r.n, i); };
    long bad = first_wrong<T>(out.data(), count, want);
    CHECK(bad < 0, at + ": element " + std::to_string(bad) + " differs from the reference");
    CHECK(send.guards_intact() && recv.guards_intact(), at + ": a guard byte changed");
    return 0;
}

// Every op at every small count in both placements; the big count with every op out of place
// and with Sum in place.
template <class T> int allreduce_type(const Rank &r, Group *g, DType t)
{
    for (RedOp op : kOps)
        for (size_t count : counts_for(g, sizeof(T)))
            for (bool in_place : {false, true}) {
                if (count > 7 && in_place && op != RedOp::Sum)
                    continue;
                if (int rc = allreduce_case<T>(r, g, t, op, count, in_place))
                    return rc;
            }
    return 0;
}

int check_allreduce(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    Group *g = j.g;
    int rc = allreduce_type<int8_t>(r, g, DType::I8);
    rc = rc ? rc : allreduce_type<uint8_t>(r, g, DType::U8);
    rc = rc ? rc : allreduce_type<int32_t>(r, g, DType::I32);
    rc = rc ? rc : allreduce_type<uint32_t>(r, g, DType::U32);
    rc = rc ? rc : allreduce_type<int64_t>(r, g, DType::I64);
    rc = rc ? rc : allreduce_type<uint64_t>(r, g, DType::U64);
    rc = rc ? rc : allreduce_type<float>(r, g, DType::F32);
    rc = rc ? rc : allreduce_type<double>(r, g, DType::F64);
    return rc;
}

// ---- reduce_scatter ----

template <class T>
int reduce_scatter_case(const Rank &r, Group *g, DType t, RedOp op, size_t count, bool in_place)
{
    size_t n = size_t(r.n), es = sizeof(T);
    Buf send(n * count * es), recv(count * es);
    for (size_t i = 0; i < n * count; ++i)
        store(send.data() + i * es, input<T>(r.rank, i));
    unsigned char *out = in_place ? send.data() + size_t(r.rank) * count * es : recv.data();
    std::string why, at = "reduce_scatter " + where(t, op, count, in_place);
    CHECK(reduce_scatter(g, send.data(), out, count, t, op, &why) == 0, at + ": " + why);
    size_t base = size_t(r.rank) * count;
    auto want = [&](size_t i) { return reference<T>(op, r.n, base + i); };
    long bad = first_wrong<T>(out, count, want);
    CHECK(bad < 0, at + ": element " + std::to_string(bad) + " differs from the reference");
    CHECK(send.guards_intact() && recv.guards_intact(), at + ": a guard byte changed");
    return 0;
}

template <class T> int reduce_scatter_type(const Rank &r, Group *g, DType t)
{
    for (RedOp op : kOps)
        for (size_t count : counts_for(g, sizeof(T)))
            for (bool in_place : {false, true}) {
                if (count > 7 && op != kOps[int(t) % 4])
                    continue; // the big count with one op per type keeps the run short
                if (int rc = reduce_scatter_case<T>(r, g, t, op, count, in_place))
                    return rc;
            }
    return 0;
}

int check_reduce_scatter(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    Group *g = j.g;
    int rc = reduce_scatter_type<int8_t>(r, g, DType::I8);
    rc = rc ? rc : reduce_scatter_type<uint8_t>(r, g, DType::U8);
    rc = rc ? rc : reduce_scatter_type<int32_t>(r, g, DType::I32);
    rc = rc ? rc : reduce_scatter_type<uint32_t>(r, g, DType::U32);
    rc = rc ? rc : reduce_scatter_type<int64_t>(r, g, DType::I64);
    rc = rc ? rc : reduce_scatter_type<uint64_t>(r, g, DType::U64);
    rc = rc ? rc : reduce_scatter_type<float>(r, g, DType::F32);
    rc = rc ? rc : reduce_scatter_type<double>(r, g, DType::F64);
    return rc;
}

// ---- half-precision sums ----

// F16/BF16 Sum rounds to 16 bits after each member's add, in rank order (NCCL's ring). Rank 0
// gives 1.0, every other rank a small value: element 0 half an ulp of 1.0 (each add is a tie,
// which rounds to even: back to 1.0, though the exact sum is 1 + (n-1)/2 ulp), the others 3/4
// of an ulp (each add rounds up a whole ulp: 1 + (n-1) ulp, where the exact sum rounded once
// is 1 + round(3(n-1)/4) ulp). Max is exact: 1 + r ulp from rank r gives 1 + (n-1) ulp.
int check_half_sums(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    struct Bits {
        DType t;
        uint16_t one, half_ulp, three_quarter_ulp;
    };
    // bf16: 1.0 = 0x3f80, ulp 2^-7; 2^-8 = 0x3b80, 1.5 * 2^-8 = 0x3bc0.
    // fp16: 1.0 = 0x3c00, ulp 2^-10; 2^-11 = 0x1000, 1.5 * 2^-11 = 0x1200.
    for (Bits k :
         {Bits{DType::BF16, 0x3f80, 0x3b80, 0x3bc0}, Bits{DType::F16, 0x3c00, 0x1000, 0x1200}}) {
        std::string name = dtype_name(k.t);
        std::vector<uint16_t> mine(5), sum(5), rs_send(size_t(r.n) * 5), rs(5), mx(5), mx_out(5);
        for (int e = 0; e < 5; e++) {
            mine[size_t(e)] = r.rank == 0 ? k.one : e == 0 ? k.half_ulp : k.three_quarter_ulp;
            mx[size_t(e)] = uint16_t(k.one + r.rank);
        }
        for (int m = 0; m < r.n; m++) // member m's slice: this rank's values too
            std::copy(mine.begin(), mine.end(), rs_send.begin() + m * 5);
        std::string why;
        CHECK(allreduce(j.g, mine.data(), sum.data(), 5, k.t, RedOp::Sum, &why) == 0, why);
        CHECK(reduce_scatter(j.g, rs_send.data(), rs.data(), 5, k.t, RedOp::Sum, &why) == 0, why);
        CHECK(allreduce(j.g, mx.data(), mx_out.data(), 5, k.t, RedOp::Max, &why) == 0, why);
        for (int e = 0; e < 5; e++) {
            uint16_t want = e == 0 ? k.one : uint16_t(k.one + r.n - 1);
            std::string at =
                name + " element " + std::to_string(e) + ": want " + std::to_string(want) +
                ", allreduce " + std::to_string(sum[size_t(e)]) + ", reduce_scatter " +
                std::to_string(rs[size_t(e)]) + ", max " + std::to_string(mx_out[size_t(e)]);
            CHECK(sum[size_t(e)] == want && rs[size_t(e)] == want, at);
            CHECK(mx_out[size_t(e)] == uint16_t(k.one + r.n - 1), at);
        }
    }
    return 0;
}

// ---- allgather and broadcast (byte movers) ----

int allgather_case(const Rank &r, Group *g, DType t, size_t count, bool in_place)
{
    size_t n = size_t(r.n), piece = count * dtype_size(t);
    Buf send(piece), recv(n * piece);
    unsigned char *src = in_place ? recv.data() + size_t(r.rank) * piece : send.data();
    for (size_t j = 0; j < piece; ++j)
        src[j] = byte_input(r.rank, j);
    std::string why, at = std::string("allgather ") + dtype_name(t) +
                          " count=" + std::to_string(count) + (in_place ? " in place" : "");
    CHECK(allgather(g, src, recv.data(), count, t, &why) == 0, at + ": " + why);
    for (size_t m = 0; m < n; ++m)
        for (size_t j = 0; j < piece; ++j)
            CHECK(recv.data()[m * piece + j] == byte_input(int(m), j),
                  at + ": byte " + std::to_string(j) + " from rank " + std::to_string(m));
    CHECK(send.guards_intact() && recv.guards_intact(), at + ": a guard byte changed");
    return 0;
}

int check_allgather(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    for (DType t : {DType::I8, DType::F16, DType::I32, DType::F64})
        for (size_t count : counts_for(j.g, dtype_size(t)))
            for (bool in_place : {false, true})
                if (int rc = allgather_case(r, j.g, t, count, in_place))
                    return rc;
    return 0;
}

// Off the root, send is NULL: it must be ignored there.
int broadcast_case(const Rank &r, Group *g, DType t, size_t count, int root, bool in_place)
{
    size_t bytes = count * dtype_size(t);
    Buf send(bytes), recv(bytes);
    for (size_t j = 0; j < bytes; ++j)
        send.data()[j] = byte_input(r.rank, j);
    bool is_root = r.rank == root;
    const void *src = is_root ? send.data() : nullptr;
    unsigned char *dst = is_root && in_place ? send.data() : recv.data();
    std::string why, at = std::string("broadcast ") + dtype_name(t) +
                          " count=" + std::to_string(count) + " root=" + std::to_string(root) +
                          (in_place ? " in place" : "");
    CHECK(broadcast(g, src, dst, count, t, root, &why) == 0, at + ": " + why);
    for (size_t j = 0; j < bytes; ++j)
        CHECK(dst[j] == byte_input(root, j), at + ": byte " + std::to_string(j));
    CHECK(send.guards_intact() && recv.guards_intact(), at + ": a guard byte changed");
    return 0;
}

int check_broadcast(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    // Broadcast stages through every member's chunk at once: "big" exceeds all of them.
    size_t all_staging = group_chunk_bytes(j.g) * size_t(r.n);
    for (DType t : {DType::I8, DType::F64})
        for (size_t count : {size_t(0), size_t(7), all_staging / dtype_size(t) + 5})
            for (int root = 0; root < r.n; ++root)
                for (bool in_place : {false, true})
                    if (int rc = broadcast_case(r, j.g, t, count, root, in_place))
                        return rc;
    return 0;
}

// ---- exchange ----

// The alltoall pattern among the first m ranks (with 3 or more ranks the last one has nothing
// to exchange but still calls): a sends count(a,b) I32s to every b (itself included, some
// counts zero, one pair larger than two rounds), and a second message of F64s to its
// neighbour, matched by order.
struct Plan {
    int m;
    size_t big;
    size_t i32_count(int a, int b) const
    {
        return a == 0 && b == m - 1 ? big : size_t((a * 3 + b * 5 + 1) % 5);
    }
    size_t f64_count(int a) const { return size_t(3 + a); }
    int next(int a) const { return (a + 1) % m; }
    int prev(int a) const { return (a + m - 1) % m; }
};

int32_t i32_value(int a, int b, size_t i) { return input<int32_t>(a * 64 + b, i); }
double f64_value(int a, size_t i) { return input<double>(1000 + a, i); }

// Builds rank's op list; even ranks list sends first, odd ranks receives first, peers in
// opposite orders, so only the per-pair order matters.
std::vector<P2P> plan_ops(const Plan &p, int rank, std::vector<Buf> *bufs)
{
    std::vector<P2P> sends, recvs;
    if (rank >= p.m)
        return {};
    bufs->reserve(size_t(4 * p.m + 4));
    for (int b = 0; b < p.m; ++b) {
        size_t out = p.i32_count(rank, b), in = p.i32_count(b, rank);
        Buf &s = bufs->emplace_back(out * 4);
        for (size_t i = 0; i < out; ++i)
            store(s.data() + i * 4, i32_value(rank, b, i));
        sends.push_back(P2P{true, b, s.data(), out, DType::I32});
        Buf &rv = bufs->emplace_back(in * 4);
        recvs.push_back(P2P{false, b, rv.data(), in, DType::I32});
    }
    Buf &s = bufs->emplace_back(p.f64_count(rank) * 8);
    for (size_t i = 0; i < p.f64_count(rank); ++i)
        store(s.data() + i * 8, f64_value(rank, i));
    sends.push_back(P2P{true, p.next(rank), s.data(), p.f64_count(rank), DType::F64});
    Buf &rv = bufs->emplace_back(p.f64_count(p.prev(rank)) * 8);
    recvs.push_back(P2P{false, p.prev(rank), rv.data(), p.f64_count(p.prev(rank)), DType::F64});
    if (rank % 2) {
        std::reverse(sends.begin(), sends.end() - 1); // keep the F64 after the I32 to the same peer
        std::swap(sends, recvs);
    }
    sends.insert(sends.end(), recvs.begin(), recvs.end());
    return sends;
}

int check_received(const Rank &r, const std::vector<P2P> &ops, const std::vector<Buf> &bufs)
{
    for (const P2P &o : ops) {
        if (o.send)
            continue;
        const unsigned char *got = static_cast<const unsigned char *>(o.buf);
        auto want_i32 = [&](size_t i) { return i32_value(o.peer, r.rank, i); };
        auto want_f64 = [&](size_t i) { return f64_value(o.peer, i); };
        long bad = o.type == DType::I32 ? first_wrong<int32_t>(got, o.count, want_i32)
                                        : first_wrong<double>(got, o.count, want_f64);
        CHECK(bad < 0, "exchange: element " + std::to_string(bad) + " from rank " +
                           std::to_string(o.peer) + " (" + dtype_name(o.type) + ")");
    }
    for (const Buf &b : bufs)
        CHECK(b.guards_intact(), "exchange: a guard byte changed");
    return 0;
}

int check_exchange(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    Plan p{r.n >= 3 ? r.n - 1 : r.n, group_chunk_bytes(j.g) / 4 * 2 + 3};
    std::vector<Buf> bufs;
    std::vector<P2P> ops = plan_ops(p, r.rank, &bufs);
    std::string why;
    CHECK(exchange(j.g, ops, &why) == 0, why);
    if (int rc = check_received(r, ops, bufs))
        return rc;
    // An exchange where nobody has anything to move.
    CHECK(exchange(j.g, {}, &why) == 0, why);
    return 0;
}

// A mismatched count, then a mismatched number of messages: every member fails alike with a
// message naming the pair, and the group stays usable.
int check_exchange_mismatch(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    std::vector<int32_t> a(8, 1), b(8, 0);
    std::vector<P2P> ops;
    if (r.rank == 0)
        ops = {P2P{true, 1, a.data(), 5, DType::I32}};
    if (r.rank == 1)
        ops = {P2P{false, 0, b.data(), 6, DType::I32}};
    std::string why;
    CHECK(exchange(j.g, ops, &why) == -EPROTO, "a count mismatch was accepted");
    CHECK(why.find("rank 0") != std::string::npos && why.find("rank 1") != std::string::npos,
          "the message does not name the pair: " + why);
    if (r.rank == 0)
        ops.push_back(P2P{true, 1, a.data(), 6, DType::I32});
    CHECK(exchange(j.g, ops, &why) == -EPROTO, "a message-count mismatch was accepted");
    CHECK(why.find("2 send(s) to rank 1") != std::string::npos, "unexpected message: " + why);
    int32_t x = r.rank, sum = 0;
    CHECK(allreduce(j.g, &x, &sum, 1, DType::I32, RedOp::Sum, &why) == 0, why);
    CHECK(sum == r.n * (r.n - 1) / 2, "the group is unusable after the mismatch");
    return 0;
}

// ---- mismatched collective calls ----

int check_call_mismatch(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    std::vector<int32_t> a(16, r.rank), b(16);
    size_t count = r.rank == 0 ? 10 : 11;
    std::string why;
    CHECK(allreduce(j.g, a.data(), b.data(), count, DType::I32, RedOp::Sum, &why) == -EPROTO,
          "differing counts were accepted");
    CHECK(why.find("count=10") != std::string::npos && why.find("count=11") != std::string::npos,
          "the message does not show both calls: " + why);
    CHECK(allreduce(j.g, a.data(), b.data(), 16, DType::I32, RedOp::Sum, &why) == 0, why);
    CHECK(b[15] == r.n * (r.n - 1) / 2, "the group is unusable after the mismatch");
    return 0;
}

// ---- split ----

// The parent ranks of a child group, gathered through the child.
int child_members(const Rank &r, Group *child, std::vector<int32_t> *members)
{
    int32_t me = r.rank;
    members->assign(size_t(group_size(child)), -1);
    std::string why;
    CHECK(allgather(child, &me, members->data(), 1, DType::I32, &why) == 0, why);
    return 0;
}

std::string list_text(const std::vector<int32_t> &v)
{
    std::string s;
    for (int32_t x : v)
        s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

// Expected members of a color, ordered by (key, parent rank).
std::vector<int32_t> expected_members(int n, const std::function<int(int)> &color,
                                      const std::function<int(int)> &key, int c)
{
    std::vector<int32_t> v;
    for (int k = 0; k < n; ++k)
        if (color(k) == c)
            v.push_back(k);
    std::stable_sort(v.begin(), v.end(), [&](int a, int b) { return key(a) < key(b); });
    return v;
}

int split_case(const Rank &r, Group *parent, const char *name, const std::function<int(int)> &color,
               const std::function<int(int)> &key)
{
    Joined child;
    std::string why;
    CHECK(group_split(parent, color(r.rank), key(r.rank), kJoinTimeout, &child.g, &why) == 0,
          std::string(name) + ": " + why);
    if (color(r.rank) < 0) {
        CHECK(child.g == nullptr, std::string(name) + ": NOCOLOR got a group");
        return 0;
    }
    CHECK(child.g != nullptr, std::string(name) + ": no group");
    std::vector<int32_t> want = expected_members(r.n, color, key, color(r.rank)), got;
    if (int rc = child_members(r, child.g, &got))
        return rc;
    CHECK(got == want,
          std::string(name) + ": members " + list_text(got) + ", expected " + list_text(want));
    CHECK(want[size_t(group_rank(child.g))] == r.rank, std::string(name) + ": wrong child rank");
    return 0;
}

int check_split(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    int n = r.n;
    // Two colors, keys reversing the order (with n=2 each child has one member).
    if (int rc = split_case(
            r, j.g, "split by parity, reversed keys", [](int k) { return k % 2; },
            [](int k) { return -k; }))
        return rc;
    // Rank 0 opts out; equal keys keep the parent order.
    if (int rc = split_case(
            r, j.g, "split with NOCOLOR", [](int k) { return k == 0 ? -1 : 5; },
            [](int) { return 0; }))
        return rc;
    // One color, keys permuting the ranks.
    if (int rc = split_case(
            r, j.g, "split with permuted keys", [](int) { return 3; },
            [n](int k) { return (k * 3 + 1) % n; }))
        return rc;
    int32_t x = r.rank + 1, sum = 0;
    std::string why;
    CHECK(allreduce(j.g, &x, &sum, 1, DType::I32, RedOp::Sum, &why) == 0, why);
    CHECK(sum == n * (n + 1) / 2, "the parent changed after the splits");
    return 0;
}

// ---- joining ----

int check_duplicate_device(const Rank &r)
{
    Group *g = reinterpret_cast<Group *>(1);
    std::string why;
    int device = r.rank == 1 ? 0 : r.rank;
    CHECK(group_join(r.id, r.n, r.rank, device, kJoinTimeout, &g, &why) == -EEXIST,
          "two ranks on device 0 were accepted");
    CHECK(g == nullptr, "a refused join left *out set");
    CHECK(why.find("rank 0") != std::string::npos && why.find("rank 1") != std::string::npos &&
              why.find("device 0") != std::string::npos,
          "the message does not name both ranks and the device: " + why);
    return 0;
}

// Members without a device (negative) are never compared.
int check_no_device(const Rank &r)
{
    Joined j;
    return join(r, &j, -1);
}

constexpr double kShortJoin = 0.5;

// The last rank never comes: everyone who did fails soon after the timeout, naming it.
int check_join_timeout(const Rank &r)
{
    if (r.rank == r.n - 1)
        return 0;
    Group *g = nullptr;
    std::string why;
    Clock::time_point t0 = Clock::now();
    CHECK(group_join(r.id, r.n, r.rank, r.rank, kShortJoin, &g, &why) == -ETIMEDOUT,
          "the join did not time out: " + why);
    double took = seconds_since(t0);
    CHECK(g == nullptr, "a failed join left *out set");
    CHECK(took < kShortJoin + 2, "the join took " + std::to_string(took) + " s");
    std::string missing = "never came: " + std::to_string(r.n - 1);
    CHECK(why.find(missing) != std::string::npos,
          "the message does not name the missing rank: " + why);
    return 0;
}

// ---- abort and death ----

constexpr double kAbortAfter = 0.3;

// Rank 0 aborts while the others are blocked in an allreduce it never joins.
int check_abort(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    std::vector<float> a(1000, 1.0f), b(1000);
    std::string why;
    if (r.rank == 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(kAbortAfter));
        group_abort(j.g);
    } else {
        Clock::time_point t0 = Clock::now();
        CHECK(allreduce(j.g, a.data(), b.data(), a.size(), DType::F32, RedOp::Sum, &why) ==
                  -ECONNABORTED,
              "the blocked allreduce did not fail with -ECONNABORTED: " + why);
        double took = seconds_since(t0);
        CHECK(took > kAbortAfter / 2 && took < kAbortAfter + 1,
              "the blocked allreduce returned after " + std::to_string(took) + " s");
        CHECK(why.find("aborted by rank 0") != std::string::npos, "unexpected message: " + why);
    }
    CHECK(group_error(j.g, &why) == -ECONNABORTED, "group_error does not report the abort");
    CHECK(why.find("aborted by rank 0") != std::string::npos, "unexpected message: " + why);
    Clock::time_point t1 = Clock::now();
    CHECK(allreduce(j.g, a.data(), b.data(), a.size(), DType::F32, RedOp::Sum, &why) ==
              -ECONNABORTED,
          "a call after the abort did not fail");
    CHECK(seconds_since(t1) < 0.1, "a call after the abort did not fail at once");
    return 0;
}

// The last rank's process is killed after joining; the others, blocked in an allreduce it
// never reaches, fail within a few seconds with a message naming it.
int check_dead_peer(const Rank &r)
{
    Joined j;
    if (int rc = join(r, &j, r.rank))
        return rc;
    if (r.rank == r.n - 1)
        kill(getpid(), SIGKILL);
    std::vector<double> a(100, 1.0), b(100);
    std::string why;
    Clock::time_point t0 = Clock::now();
    CHECK(allreduce(j.g, a.data(), b.data(), a.size(), DType::F64, RedOp::Sum, &why) == -ECONNRESET,
          "the allreduce did not fail with -ECONNRESET: " + why);
    double took = seconds_since(t0);
    CHECK(took < 3, "noticing the death took " + std::to_string(took) + " s");
    std::string dead = "rank " + std::to_string(r.n - 1);
    CHECK(why.find(dead) != std::string::npos && why.find("died") != std::string::npos,
          "the message does not name the dead rank: " + why);
    CHECK(group_error(j.g, &why) == -ECONNRESET, "group_error does not report the death");
    return 0;
}

// ---- ids ----

int check_ids()
{
    unsigned char a[128], b[128], junk[128] = {1, 2, 3};
    make_id(a);
    make_id(b);
    std::string na = segment_name(a), nb = segment_name(b);
    bool ok = !na.empty() && na != nb && na[0] == '/' && na.find('/', 1) == std::string::npos &&
              segment_name(junk).empty();
    Group *g = nullptr;
    std::string why;
    ok = ok && group_join(junk, 2, 0, 0, 1, &g, &why) == -EINVAL && g == nullptr;
    ok = ok && group_join(a, 2, 2, 0, 1, &g, &why) == -EINVAL; // rank out of range
    printf("%s %-58s %s\n", ok ? "ok  " : "FAIL", "ids are distinct, foreign ids are refused",
           na.c_str());
    return ok ? 0 : 1;
}

// ThreadSanitizer sees the synchronization between threads only when it happens in their own
// process. With processes of two threads, a barrier can open in the other process: the order
// is real (the atomics share one physical page) but invisible to it, so it reports races that
// are not there. The mixed runs are therefore left to the plain and ASan builds.
#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderTsan = true;
#else
constexpr bool kUnderTsan = false;
#endif

void mixed_scenarios(int n)
{
    if (kUnderTsan) {
        printf("skip %-58s n=%d (under TSan: it cannot see the other process's atomics)\n",
               "processes of two threads", n);
        return;
    }
    scenario("allreduce: every type and op, bit-exact in rank order", Mode::Mixed, n,
             check_allreduce);
    scenario("exchange: alltoall with self, zero and multi-round", Mode::Mixed, n, check_exchange);
}

} // namespace

int main()
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    g_failures += check_ids();
    for (int n : {2, 3, 4}) {
        for (Mode mode : {Mode::Processes, Mode::Threads}) {
            scenario("allreduce: every type and op, bit-exact in rank order", mode, n,
                     check_allreduce);
            scenario("reduce_scatter: every type and op, bit-exact", mode, n, check_reduce_scatter);
            scenario("F16/BF16 reductions rounded to 16 bits at each add", mode, n,
                     check_half_sums);
            scenario("allgather: counts 0/1/7/multi-round, in place", mode, n, check_allgather);
            scenario("broadcast: every root, multi-round, in place", mode, n, check_broadcast);
            scenario("exchange: alltoall with self, zero and multi-round", mode, n, check_exchange);
            scenario("exchange: mismatches fail on every member", mode, n, check_exchange_mismatch);
            scenario("collective: mismatched calls fail on every member", mode, n,
                     check_call_mismatch);
            scenario("split: two colors, NOCOLOR, reordered keys", mode, n, check_split);
            scenario("join: duplicate device refused, naming both ranks", mode, n,
                     check_duplicate_device);
            scenario("join: members without a device are not compared", mode, n, check_no_device);
            scenario("join: timeout names the rank that never came", mode, n, check_join_timeout);
            scenario("abort wakes ranks blocked in a collective", mode, n, check_abort);
        }
        scenario("dead peer: SIGKILLed rank named within seconds", Mode::Processes, n,
                 check_dead_peer, [n](int k) { return k == n - 1 ? kKilled + SIGKILL : 0; });
        if (n % 2 == 0)
            mixed_scenarios(n);
    }
    printf("%s\n", g_failures ? "FAILED" : "all passed");
    return g_failures ? 1 : 0;
}

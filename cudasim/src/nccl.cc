/* SPDX-License-Identifier: MIT */
// The NCCL calls ztier makes, on the stand-in. A communicator's members (processes under
// mpirun, or threads) meet in shared memory (shm_group.h); a collective is queued on its
// CUDA stream like any device work (its send and receive ranges checked against the
// stream's ordering, and required to be memory of the communicator's device) and runs there
// as a blocking exchange. Two members on one device are refused as NCCL refuses them
// ("Duplicate GPU detected"). A failed or aborted exchange becomes the communicator's
// asynchronous error; cudasim_hang_collective_after makes one never finish until
// ncclCommAbort, as a dead peer's would, and cudasim_nccl_error_after also raises the
// asynchronous error at once (a peer NCCL saw fail) while it waits. Reductions combine the members' values in rank
// order, so every member gets the same bits (as NCCL's do).
#include "internal.h"
#include "shm_group.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

using namespace cudasim;

struct ncclComm {
    shm::Group *group = nullptr;
    int device = 0, rank = 0, size = 0;
    std::atomic<int> async{ncclSuccess};
    std::atomic<bool> aborted{false};
    std::atomic<int> pending{0}; // exchanges queued and not yet run
    std::mutex mu;               // guards why
    std::string why;
};

namespace
{

std::mutex g_mu;
std::set<ncclComm *> &g_live = *new std::set<ncclComm *>; // handles that may be used
thread_local std::string t_last;

struct PendingP2P {
    ncclComm *comm;
    cudaStream_t stream;
    shm::P2P op;
};
thread_local int t_group_depth = 0;
thread_local std::vector<PendingP2P> t_group;

double join_timeout()
{
    const char *t = getenv("ZT_CUDASIM_NCCL_TIMEOUT");
    return t && atof(t) > 0 ? atof(t) : 60.0;
}

ncclResult_t fail(ncclResult_t r, const std::string &why)
{
    t_last = why;
    note("NCCL: %s", why.c_str());
    return r;
}

// The communicator's shared_ptr-free lifetime: a handle is live from init to destroy or
// abort; a use after that is a finding.
bool live(ncclComm *c, const char *call)
{
    std::lock_guard<std::mutex> lk(g_mu);
    if (c && g_live.count(c))
        return true;
    finding("%s(%p): not a live communicator (never made, or already destroyed or aborted: "
            "ncclCommAbort frees it too)",
            call, (void *)c);
    return false;
}

bool dtype_of(ncclDataType_t t, shm::DType *out)
{
    switch (t) {
    case ncclInt8:
        *out = shm::DType::I8;
        return true;
    case ncclUint8:
        *out = shm::DType::U8;
        return true;
    case ncclInt32:
        *out = shm::DType::I32;
        return true;
    case ncclUint32:
        *out = shm::DType::U32;
        return true;
    case ncclInt64:
        *out = shm::DType::I64;
        return true;
    case ncclUint64:
        *out = shm::DType::U64;
        return true;
    case ncclFloat16:
        *out = shm::DType::F16;
        return true;
    case ncclFloat32:
        *out = shm::DType::F32;
        return true;
    case ncclFloat64:
        *out = shm::DType::F64;
        return true;
    case ncclBfloat16:
        *out = shm::DType::BF16;
        return true;
    default:
        return false;
    }
}

bool op_of(ncclRedOp_t op, shm::RedOp *out)
{
    switch (op) {
    case ncclSum:
        *out = shm::RedOp::Sum;
        return true;
    case ncclProd:
        *out = shm::RedOp::Prod;
        return true;
    case ncclMax:
        *out = shm::RedOp::Max;
        return true;
    case ncclMin:
        *out = shm::RedOp::Min;
        return true;
    default:
        return false;
    }
}

// What every collective checks first: a live communicator, a type (and an operation, when
// op is given) the stand-in models. ncclSuccess, or the failure named.
ncclResult_t check_call(const char *call, ncclComm_t comm, ncclDataType_t type, shm::DType *t,
                        const ncclRedOp_t *op = nullptr, shm::RedOp *o = nullptr)
{
    if (!dtype_of(type, t) || (op && !op_of(*op, o)))
        return fail(ncclInvalidArgument, std::string(call) + ": a type or operation not modelled");
    return live(comm, call) ? ncclSuccess : ncclInvalidArgument;
}

// What an injection makes of this collective: nothing, a hang (cudasim_hang_collective_after),
// or a failed peer (cudasim_nccl_error_after): both wait for the abort.
enum class Fault { None, Hang, PeerError };

Fault take_fault()
{
    State &st = state();
    std::lock_guard<std::mutex> lk(st.mu);
    if (st.hang_collective_after > 0 && --st.hang_collective_after == 0)
        return Fault::Hang;
    if (st.nccl_error_after > 0 && --st.nccl_error_after == 0)
        return Fault::PeerError;
    return Fault::None;
}

// The communicator's asynchronous error, once: the first one stays.
void set_async(ncclComm *c, ncclResult_t r, const std::string &why)
{
    std::lock_guard<std::mutex> lk(c->mu);
    if (c->async.load() == ncclSuccess) {
        c->why = why;
        c->async.store(r);
    }
}

// Runs on the stream's thread: the exchange, or (injected) nothing until the abort. A failed
// peer's error is visible at once while the kernel still waits, as in NCCL: only
// ncclCommAbort ends it.
void run_collective(ncclComm *c, Fault fault, const char *what,
                    const std::function<int(std::string *)> &exchange)
{
    std::string why;
    if (fault != Fault::None) {
        if (fault == Fault::PeerError)
            set_async(c, ncclRemoteError,
                      std::string(what) + ": a peer failed (injected); the collective waits "
                                          "for it until the communicator is aborted");
        while (!c->aborted.load())
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        why = std::string(what) + " never completed (a hung peer, injected) and the "
                                  "communicator was aborted";
    } else if (c->aborted.load() || exchange(&why) == 0) {
        if (!c->aborted.load())
            return;
        why = std::string(what) + ": the communicator was aborted";
    }
    set_async(c, c->aborted.load() ? ncclRemoteError : ncclSystemError, why);
}

// Queues a collective on the stream after the checks a real NCCL call fails on.
ncclResult_t queue(ncclComm *c, cudaStream_t stream, const char *what, std::vector<Access> acc,
                   std::function<int(std::string *)> exchange)
{
    if (!live(c, what))
        return ncclInvalidArgument;
    int dev = -1;
    cudaGetDevice(&dev);
    if (dev != c->device)
        return fail(ncclInvalidUsage, std::string(what) + ": the communicator's device is " +
                                          std::to_string(c->device) + ", the current device " +
                                          std::to_string(dev));
    std::vector<Access> nonempty;
    for (const Access &a : acc)
        if (a.bytes)
            nonempty.push_back(a);
    Fault fault = take_fault();
    c->pending++;
    cudaError_t r = device_work(stream, what, std::move(nonempty), [c, fault, what, exchange] {
        run_collective(c, fault, what, exchange);
        c->pending--;
    });
    if (r != cudaSuccess)
        c->pending--;
    if (r != cudaSuccess)
        return fail(r == cudaErrorInvalidValue ? ncclInvalidArgument : ncclUnhandledCudaError,
                    std::string(what) + ": " + cudaGetErrorString(r));
    return ncclSuccess;
}

ncclResult_t make_comm(shm::Group *g, int device, ncclComm_t *out)
{
    auto *c = new ncclComm;
    c->group = g;
    c->device = device;
    c->rank = shm::group_rank(g);
    c->size = shm::group_size(g);
    std::lock_guard<std::mutex> lk(g_mu);
    g_live.insert(c);
    *out = c;
    return ncclSuccess;
}

void forget(ncclComm *c)
{
    std::lock_guard<std::mutex> lk(g_mu);
    g_live.erase(c);
}

// Until the exchanges queued with c have run (they hold c).
void wait_idle(ncclComm *c)
{
    while (c->pending.load() > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

} // namespace

extern "C" {

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return t_last.c_str();
}

ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id)
        return ncclInvalidArgument;
    static_assert(sizeof id->internal == 128, "ncclUniqueId holds 128 bytes");
    shm::make_id(reinterpret_cast<unsigned char *>(id->internal));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess)
        return ncclUnhandledCudaError;
    shm::Group *g = nullptr;
    std::string why;
    if (shm::group_join(reinterpret_cast<const unsigned char *>(id.internal), nranks, rank, device,
                        join_timeout(), &g, &why) != 0)
        return fail(why.find("Duplicate") != std::string::npos ? ncclInvalidUsage : ncclSystemError,
                    "ncclCommInitRank: " + why);
    return make_comm(g, device, comm);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    (void)config;
    return ncclCommInitRank(comm, nranks, id, rank);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    (void)config;
    if (!live(comm, "ncclCommSplit") || !newcomm)
        return ncclInvalidArgument;
    shm::Group *g = nullptr;
    std::string why;
    if (shm::group_split(comm->group, color, key, join_timeout(), &g, &why) != 0)
        return fail(ncclSystemError, "ncclCommSplit: " + why);
    if (!g) { // NCCL_SPLIT_NOCOLOR
        *newcomm = nullptr;
        return ncclSuccess;
    }
    return make_comm(g, comm->device, newcomm);
}

// Frees the communicator once the work queued with it has run (the caller synchronizes its
// streams first, as NCCL asks).
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!live(comm, "ncclCommDestroy"))
        return ncclInvalidArgument;
    forget(comm);
    wait_idle(comm);
    shm::group_destroy(comm->group);
    delete comm;
    return ncclSuccess;
}

// Every member's pending and later exchanges fail; the handle is freed (NCCL's rule).
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!live(comm, "ncclCommAbort"))
        return ncclInvalidArgument;
    forget(comm);
    comm->aborted.store(true);
    shm::group_abort(comm->group);
    wait_idle(comm); // the hung exchanges see the abort and end
    shm::group_destroy(comm->group);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async)
{
    if (!live(comm, "ncclCommGetAsyncError") || !async)
        return ncclInvalidArgument;
    *async = static_cast<ncclResult_t>(comm->async.load());
    if (*async != ncclSuccess) {
        std::lock_guard<std::mutex> lk(comm->mu);
        t_last = comm->why;
    }
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!live(comm, "ncclCommCount") || !count)
        return ncclInvalidArgument;
    *count = comm->size;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!live(comm, "ncclCommCuDevice") || !device)
        return ncclInvalidArgument;
    *device = comm->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!live(comm, "ncclCommUserRank") || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    shm::DType t;
    shm::RedOp o;
    if (ncclResult_t r = check_call("ncclAllReduce", comm, type, &t, &op, &o))
        return r;
    size_t bytes = count * shm::dtype_size(t);
    return queue(comm, stream, "ncclAllReduce", {{send, bytes, false}, {recv, bytes, true}},
                 [=](std::string *why) {
                     return shm::allreduce(comm->group, send, recv, count, t, o, why);
                 });
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    shm::DType t;
    shm::RedOp o;
    if (ncclResult_t r = check_call("ncclReduceScatter", comm, type, &t, &op, &o))
        return r;
    size_t bytes = count * shm::dtype_size(t);
    return queue(comm, stream, "ncclReduceScatter",
                 {{send, bytes * (size_t)comm->size, false}, {recv, bytes, true}},
                 [=](std::string *why) {
                     return shm::reduce_scatter(comm->group, send, recv, count, t, o, why);
                 });
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream)
{
    shm::DType t;
    if (ncclResult_t r = check_call("ncclAllGather", comm, type, &t))
        return r;
    size_t bytes = count * shm::dtype_size(t);
    return queue(
        comm, stream, "ncclAllGather",
        {{send, bytes, false}, {recv, bytes * (size_t)comm->size, true}},
        [=](std::string *why) { return shm::allgather(comm->group, send, recv, count, t, why); });
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream)
{
    shm::DType t;
    if (ncclResult_t r = check_call("ncclBroadcast", comm, type, &t))
        return r;
    if (root < 0 || root >= comm->size)
        return fail(ncclInvalidArgument, "ncclBroadcast: root out of range");
    size_t bytes = count * shm::dtype_size(t);
    std::vector<Access> acc = {{recv, bytes, true}};
    if (comm->rank == root)
        acc.push_back({send, bytes, false});
    return queue(comm, stream, "ncclBroadcast", acc, [=](std::string *why) {
        return shm::broadcast(comm->group, send, recv, count, t, root, why);
    });
}

ncclResult_t ncclGroupStart(void)
{
    t_group_depth++;
    return ncclSuccess;
}

// The sends and receives of the group, per communicator and stream, as one exchange each.
ncclResult_t ncclGroupEnd(void)
{
    if (t_group_depth == 0)
        return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--t_group_depth > 0)
        return ncclSuccess;
    std::vector<PendingP2P> ops;
    ops.swap(t_group);
    ncclResult_t result = ncclSuccess;
    while (!ops.empty()) {
        ncclComm *c = ops.front().comm;
        cudaStream_t s = ops.front().stream;
        std::vector<shm::P2P> mine;
        std::vector<Access> acc;
        for (size_t i = 0; i < ops.size();) {
            if (ops[i].comm != c || ops[i].stream != s) {
                i++;
                continue;
            }
            const shm::P2P &p = ops[i].op;
            acc.push_back({p.buf, p.count * shm::dtype_size(p.type), !p.send});
            mine.push_back(p);
            ops.erase(ops.begin() + (long)i);
        }
        ncclResult_t r = queue(c, s, "ncclSend/ncclRecv group", acc, [=](std::string *why) {
            return shm::exchange(c->group, mine, why);
        });
        if (result == ncclSuccess)
            result = r;
    }
    return result;
}

static ncclResult_t p2p(bool send, void *buf, size_t count, ncclDataType_t type, int peer,
                        ncclComm_t comm, cudaStream_t stream)
{
    shm::DType t;
    if (ncclResult_t r = check_call(send ? "ncclSend" : "ncclRecv", comm, type, &t))
        return r;
    if (peer < 0 || peer >= comm->size)
        return fail(ncclInvalidArgument, "ncclSend/ncclRecv: peer out of range");
    ncclGroupStart();
    t_group.push_back({comm, stream, {send, peer, buf, count, t}});
    return ncclGroupEnd();
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return p2p(true, const_cast<void *>(buf), count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return p2p(false, buf, count, type, peer, comm, stream);
}

} // extern "C"

/* SPDX-License-Identifier: MIT */
// The host-memory transport under cudasim's NCCL stand-in: the members of one communicator
// (processes started by mpirun on one machine, threads of one process, or a mix) meet in one
// POSIX shared-memory segment and run NCCL's collectives on host buffers through it.
//
// Every call that can fail returns 0 on success or a negative errno naming the class of the
// failure, and then sets *why (when why is not NULL) to a sentence that says what happened.
// Nothing here exits or aborts the process.
//
// Blocking: collectives wait for the other members without a time limit, like NCCL, but a wait
// sleeps on a futex and wakes every few milliseconds to notice group_abort and dead members, so
// a communicator that cannot finish fails within a fraction of a second instead of hanging.
#ifndef CUDASIM_SHM_GROUP_H
#define CUDASIM_SHM_GROUP_H

#include <cstddef>
#include <string>
#include <vector>

namespace cudasim::shm
{

// Opaque: one communicator's shared segment and this member's view of it. Made by group_join
// or group_split, released by group_destroy; one member uses it from one thread at a time.
struct Group;

enum class DType { I8, U8, I32, U32, I64, U64, F16, F32, F64, BF16 };
enum class RedOp { Sum, Prod, Max, Min };

// Bytes per element of `type`; 0 for a value outside the enum.
size_t dtype_size(DType type);

// Short printable name ("F32", "I64"); "?" for a value outside the enum. Static storage.
const char *dtype_name(DType type);

// Fills id with a fresh opaque token for one communicator: 16 random bytes (getrandom) and the
// caller's pid, so two ids never name the same segment. The caller owns id and passes it to
// the other members by its own means (MPI broadcast, a shared variable). Never fails.
void make_id(unsigned char id[128]);

// The shared-memory name (e.g. "/cudasim-shm-1234-0a1b...") that group_join uses for id, or an
// empty string when id was not made by make_id. For tests and diagnostics: the segment exists
// in /dev/shm only while members are still joining (it is unlinked once all have joined).
std::string segment_name(const unsigned char id[128]);

// Rendezvous of `nranks` members calling with the same 128-byte id (made by make_id on one
// member and passed to the others by the caller). `rank` is this member's index in
// [0, nranks); `device` is its GPU index on this machine, or negative for none. Two members
// naming the same device on the same machine are refused (like NCCL's "Duplicate GPU
// detected"), on every member, with a message naming both ranks and the device.
// Blocks until every member has joined or timeout_s passes (then an error naming the ranks
// that never came; the members that did come fail too, promptly, once one gives up).
// On success *out owns a new Group (free it with group_destroy); on failure *out = NULL.
// Returns 0, or -EINVAL (bad arguments or id), -ETIMEDOUT, -EEXIST (duplicate device or
// rank), -ECONNRESET (a member died while joining), -ENOSPC or another -errno from the system.
int group_join(const unsigned char id[128], int nranks, int rank, int device, double timeout_s,
               Group **out, std::string *why);

// Collective over the parent's members (all must call it, in the same order as their other
// collectives): members with the same color >= 0 form a new group ordered by (key, parent
// rank), each keeping its parent's device; color < 0 gives *out = NULL (no group) but the call
// is still required. timeout_s bounds the new group's join. The parent stays valid and
// independent of the child. Blocking; returns 0 or a negative errno as group_join does.
int group_split(Group *parent, int color, int key, double timeout_s, Group **out, std::string *why);

// This member's index and the member count; constant for the group's life; never fail.
int group_rank(const Group *g);
int group_size(const Group *g);

// Bytes of staging each member has per round. Collectives larger than this run in several
// rounds; tests use it to size counts that exercise the chunking.
size_t group_chunk_bytes(const Group *g);

// Blocking collectives on host memory, every member calling them in the same order with the
// same count, type, op and root (NCCL's rule); a member whose call differs makes the call
// fail on every member with -EPROTO and a message naming both calls; the group stays usable.
// Reductions combine the members' values in rank order 0, 1, ..., n-1 (one fixed order, so
// every member gets the same bits); integer Sum/Prod wrap modulo 2^bits. F16/BF16 reductions
// combine two values in fp32 and round the result to 16 bits at each step, as NCCL's ring
// does: an element reduced over n members is rounded n - 1 times.
// In-place forms work: send == recv; for allgather send == recv + rank*count*size; for
// reduce_scatter recv == send + rank*count*size; for broadcast send == recv on the root.
// Buffers belong to the caller and need no alignment; count 0 is a valid no-op exchange.
// Errors after the call started (-ECONNABORTED after group_abort, -ECONNRESET after a member
// died or left) are sticky: every later call on the group fails the same way.
int allreduce(Group *g, const void *send, void *recv, size_t count, DType type, RedOp op,
              std::string *why);
// recv holds n*count elements: member m's send lands at recv + m*count.
int allgather(Group *g, const void *send, void *recv, size_t count, DType type, std::string *why);
// send holds n*count elements; member m receives the reduction of everyone's slice m.
int reduce_scatter(Group *g, const void *send, void *recv, size_t count, DType type, RedOp op,
                   std::string *why);
// The root's send (count elements) is copied to every member's recv; send is ignored off root.
int broadcast(Group *g, const void *send, void *recv, size_t count, DType type, int root,
              std::string *why);

// A group of point-to-point operations (NCCL's ncclGroupStart/Send/Recv/GroupEnd) in which every
// member of the group takes part (the alltoall pattern): each member lists its sends and
// receives; the k-th send from a to b matches the k-th receive on b from a (same count and
// type). Any mismatch anywhere fails the call on every member with -EPROTO and a message
// naming the pair; the group stays usable. Members with nothing to exchange still call it
// (with an empty list). Sending to oneself is allowed. A receive buffer must not overlap a
// send buffer of the same call. Blocking; ops and buffers stay owned by the caller.
struct P2P {
    bool send;
    int peer;
    void *buf;
    size_t count;
    DType type;
};
int exchange(Group *g, const std::vector<P2P> &ops, std::string *why);

// Marks the group aborted in shared memory and wakes every waiter: every member's blocked or
// later call returns -ECONNABORTED quickly with a message saying the communicator was aborted
// and by which rank. Does not block; safe to call from another thread than the one blocked in
// a collective on the same Group; NULL is a no-op. The Group must still be destroyed.
void group_abort(Group *g);

// Nonzero (-ECONNABORTED, -ECONNRESET, -ETIMEDOUT) after an abort, a detected dead or departed
// member, or an abandoned join, with its message in *why; 0 while the group is healthy.
// Does not block and does not probe the peers itself.
int group_error(const Group *g, std::string *why);

// Releases this member's view: marks it gone (so peers still waiting on it fail instead of
// hanging), unmaps the segment, and the last member out unlinks its name if it still exists.
// Does not wait for the other members. NULL is a no-op.
void group_destroy(Group *g);

} // namespace cudasim::shm

#endif

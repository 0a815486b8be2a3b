/* SPDX-License-Identifier: MIT */
/* A ring of aligned buffers ("slots") over one open file, each read or written by the I/O
 * engine while the caller works on the others: the core of streaming a file front to back
 * with O_DIRECT (the checkpoint reader and writer). The caller picks which slot moves which
 * bytes; a slot is busy from its submission until its transfer completes. */
#ifndef ZT_TIERS_IO_RING_H
#define ZT_TIERS_IO_RING_H

#include "tiers/io.h"

#include <stddef.h>
#include <stdint.h>

typedef struct zt_io_ring zt_io_ring;

/* n_slots buffers of slot_bytes (a multiple of 4096) over fd (owned by the caller, open
 * until destroy), on the engine zt_io_engine_start picks for kind. 0, or -errno with why
 * filled. */
int zt_io_ring_create(int fd, int n_slots, size_t slot_bytes, zt_io_engine_kind kind,
                      zt_io_ring **out, char *why, size_t why_len);
unsigned char *zt_io_ring_buf(zt_io_ring *r, int slot);
/* Pins the slots with the engine once, before the first transfer (io_uring's registered
 * buffers), so no transfer pins and unpins its pages again; io_uring then issues each write
 * at once instead of handing it to its workers, which run one file's writes one at a time.
 * 0, or -errno where the engine cannot (the thread pool, a memlock limit, over 16 slots):
 * the transfers then run from the same buffers unpinned. */
int zt_io_ring_register(zt_io_ring *r);
/* The transfers so far that ran from slots the engine pinned once (io_uring's registered
 * buffers: no transfer pins its 8 MiB of pages again); 0 on the thread pool or where the
 * registration was refused (a memlock limit). */
uint64_t zt_io_ring_fixed_ios(const zt_io_ring *r);
/* Starts slot's transfer of len bytes at offset (op: ZT_IO_READ or ZT_IO_WRITE). */
void zt_io_ring_submit(zt_io_ring *r, int slot, int op, uint64_t offset, size_t len);
/* Waits until slot is not busy; 0, or the errno of the first transfer of the ring that
 * failed (any slot's: a failed file stays failed). */
int zt_io_ring_wait(zt_io_ring *r, int slot);
/* Waits for every transfer in flight, stops the engine, frees. NULL is a no-op. */
void zt_io_ring_destroy(zt_io_ring *r);

#endif

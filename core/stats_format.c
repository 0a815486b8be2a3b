/* SPDX-License-Identifier: MIT */
/* zt_stats_format: the counters of zt_stats as text or JSON, from one list of the fields
 * (zt_stats_fields), which tests check covers the whole struct. */
#include "core/stats_fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Each entry's offset, with a compile-time check that the field has the size of its kind (an
 * array of negative size does not compile). */
#define AT(f, bytes) \
    (offsetof(zt_stats, f) + 0 * sizeof(char[sizeof(((zt_stats *)0)->f) == (bytes) ? 1 : -1]))
#define U64(f, unit, what)                    \
    {                                         \
#f, AT(f, 8), ZT_STAT_U64, unit, what \
    }
#define U32(f, unit, what)                    \
    {                                         \
#f, AT(f, 4), ZT_STAT_U32, unit, what \
    }
#define F64(f, unit, what)                    \
    {                                         \
#f, AT(f, 8), ZT_STAT_F64, unit, what \
    }

const zt_stats_field zt_stats_fields[] = {
    U64(device_bytes_current, "B", "device memory in use"),
    U64(device_bytes_peak, "B", "device memory in use at most"),
    U64(device_bytes_capacity, "B", "the device budget"),
    U64(host_bytes_current, "B", "host tier memory in use"),
    U64(host_bytes_peak, "B", "host tier memory in use at most"),
    U64(nvme_bytes_current, "B", "NVMe swap space in use"),
    U64(nvme_bytes_peak, "B", "NVMe swap space in use at most"),
    U64(h2d_bytes, "B", "copied from host to device"),
    U64(d2h_bytes, "B", "copied from device to host"),
    U64(nvme_read_bytes, "B", "read from NVMe"),
    U64(nvme_write_bytes, "B", "written to NVMe"),
    F64(nvme_read_s, "s", "waited for NVMe reads"),
    F64(nvme_write_s, "s", "waited for NVMe writes"),
    U64(gathered_bytes, "B", "full layers all-gathered"),
    U64(reduced_bytes, "B", "gradients reduced"),
    U64(prefetch_hits, "", "fetches whose layer was already on its way"),
    U64(evictions, "", "prefetched layers freed to make room"),
    U64(comm_bytes_intra, "B", "addressed by this rank to ranks of its node (direct-send model)"),
    U64(comm_bytes_inter, "B",
        "addressed by this rank to ranks of other nodes (direct-send model, not link bytes)"),
    U64(trace_deviations, "", "steps whose layer order left the recorded one"),
    F64(fetch_wait_s, "s", "zt_fetch waited (stall)"),
    F64(step_s, "s", "spent in zt_step"),
    U64(fetches, "", "zt_fetch calls"),
    U64(releases, "", "zt_release calls"),
    U64(steps, "", "optimizer steps taken"),
    U64(skipped_steps, "", "steps skipped for non-finite gradients"),
    U64(persistent_bytes, "B", "parameters resident on every rank (persistence threshold)"),
    U32(persistent_layers, "", "layers below the persistence threshold"),
    U64(pinned_bytes, "B", "staging buffers of NVMe parameter reads"),
    U64(host_syncs, "", "host waits for the device in fetch and release"),
    U64(host_pinned_bytes, "B", "host memory pinned for the device"),
    U64(host_pinned_peak_bytes, "B", "host memory pinned at most"),
    U64(pinned_refused_bytes, "B", "host memory left pageable (limit or system refused)"),
    U64(overlapped_updates, "", "layer updates an overlapped step left to later calls"),
    F64(overlapped_update_s, "s", "time those later calls spent on them"),
    U64(hpz_slices_dropped, "", "hpZ node-local slices freed to make room"),
    U64(replicated_bytes, "B", "parameters replicated on every rank (ZeRO stages 1 and 2)"),
    U32(replicated_layers, "", "layers replicated so"),
    F64(comm_wait_s, "s", "waited for collectives on the host (exposed communication)"),
    U64(allgather_buckets, "", "post-step all-gathers that packed several layers"),
    U64(reduce_buckets, "", "gradient reductions that packed several releases"),
    U64(act_saves, "", "activation checkpoints saved"),
    U64(act_saved_bytes, "B", "bytes of activation checkpoints saved"),
    U64(act_device_bytes, "B", "device memory of the activation store now"),
    U64(act_device_peak_bytes, "B", "device memory of the activation store at most"),
    U64(act_home_bytes, "B", "bytes reserved for activation checkpoints in their home tier"),
    U64(act_prefetch_hits, "", "activation loads already on their way"),
    F64(act_wait_s, "s", "time activation loads waited for their bytes"),
    U64(act_evictions, "", "activation read-ahead copies dropped for room"),
    F64(forward_s, "s", "the latest step's forward time (first forward to first backward fetch)"),
    U64(optimizer_resplits, "", "optimizer splits moved by ratio \"auto\" from the forward time"),
    {NULL, 0, ZT_STAT_U64, NULL, NULL},
};

size_t zt_stats_field_size(zt_stat_kind kind) { return kind == ZT_STAT_U32 ? 4 : 8; }

/* Appends to buf like snprintf, counting what did not fit. */
static void put(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*at < len ? buf + *at : NULL, *at < len ? len - *at : 0, fmt, ap);
    va_end(ap);
    *at += n > 0 ? (size_t)n : 0;
}

static void put_value(char *buf, size_t len, size_t *at, const zt_stats *s, const zt_stats_field *f)
{
    const char *p = (const char *)s + f->offset;
    if (f->kind == ZT_STAT_F64) {
        double v;
        memcpy(&v, p, sizeof v);
        put(buf, len, at, "%.17g", v);
    } else if (f->kind == ZT_STAT_U32) {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        put(buf, len, at, "%lu", (unsigned long)v);
    } else {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        put(buf, len, at, "%llu", (unsigned long long)v);
    }
}

int zt_stats_format(const zt_stats *s, zt_stats_format_kind kind, char *buf, size_t len)
{
    if (!s || s->struct_size < sizeof(size_t) || s->struct_size > sizeof(zt_stats) ||
        (kind != ZT_STATS_TEXT && kind != ZT_STATS_JSON) || (!buf && len))
        return -1;
    size_t at = 0;
    if (len)
        buf[0] = '\0';
    put(buf, len, &at, kind == ZT_STATS_JSON ? "{" : "");
    int first = 1;
    for (const zt_stats_field *f = zt_stats_fields; f->name; f++) {
        if (f->offset + zt_stats_field_size(f->kind) > s->struct_size)
            continue; /* an older caller's shorter struct */
        if (kind == ZT_STATS_JSON) {
            put(buf, len, &at, "%s\"%s\": ", first ? "" : ", ", f->name);
            put_value(buf, len, &at, s, f);
        } else {
            put(buf, len, &at, "%-24s ", f->name);
            put_value(buf, len, &at, s, f);
            put(buf, len, &at, "%s%s  # %s\n", *f->unit ? " " : "", f->unit, f->what);
        }
        first = 0;
    }
    put(buf, len, &at, kind == ZT_STATS_JSON ? "}" : "");
    return at > (size_t)0x7fffffff ? -1 : (int)at;
}

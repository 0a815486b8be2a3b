/* SPDX-License-Identifier: MIT */
#include "tiers/home.h"

#include <string.h>

static const char *tier_name(zt_tier_kind k)
{
    return k == ZT_TIER_DEVICE ? "device" : k == ZT_TIER_HOST ? "host" : "nvme";
}

zt_status zt_home_alloc(zt_homes *h, zt_tier_kind kind, uint64_t bytes, const char *owner,
                        zt_home *out, zt_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->bytes = bytes;
    out->owner = owner;
    zt_status st = ZT_OK;
    switch (kind) {
    case ZT_TIER_DEVICE:
        st = zt_device_alloc(h->dev, bytes, &out->ptr, err);
        if (st == ZT_OK)
            st = zt_device_memset_async(h->dev, out->ptr, 0, bytes, h->stream, err);
        if (st == ZT_OK)
            st = zt_device_stream_synchronize(h->dev, h->stream, err);
        break;
    case ZT_TIER_HOST:
        st = zt_host_tier_alloc_as(
            h->host, bytes, owner,
            (h->pin ? ZT_HOST_PINNED : 0u) | (h->unzeroed ? ZT_HOST_UNZEROED : 0u), &out->ptr, err);
        break;
    case ZT_TIER_NVME:
        out->swap = h->swap;
        st = h->swap ? zt_swap_alloc(h->swap, bytes, owner, &out->ext, err)
                     : ZT_ERR(err, ZT_ERR_INTERNAL, "no swap space planned for '%s'", owner);
        break;
    }
    if (st != ZT_OK)
        zt_error_prefix(err, "placing '%s' on the %s tier: ", owner, tier_name(kind));
    return st;
}

void zt_home_free(zt_homes *h, zt_home *home)
{
    if (!home->ptr || home->shared) {
        home->ptr = NULL;
        return;
    }
    if (home->kind == ZT_TIER_DEVICE)
        zt_device_free(h->dev, home->ptr);
    else if (home->kind == ZT_TIER_HOST)
        zt_host_tier_free(h->host, home->ptr, home->bytes);
    home->ptr = NULL; /* NVME extents go with their swap space */
}

void zt_home_share(const zt_home *of, const char *owner, zt_home *out)
{
    *out = *of;
    out->owner = owner;
    out->shared = 1;
}

void *zt_home_host_ptr(const zt_home *home)
{
    return home->kind == ZT_TIER_HOST ? home->ptr : NULL;
}

zt_status zt_home_read_start(const zt_home *home, void *dst, zt_swap_io *io, zt_error *err)
{
    return zt_swap_read(home->swap, &home->ext, dst, home->bytes, io, err);
}

zt_status zt_home_write_start(const zt_home *home, const void *src, zt_swap_io *io, zt_error *err)
{
    return zt_swap_write(home->swap, &home->ext, src, home->bytes, io, err);
}

zt_status zt_home_io_wait(const zt_home *home, zt_swap_io *io, zt_error *err)
{
    return zt_swap_wait(home->swap, io, err);
}

static zt_status nvme_sync(const zt_home *home, void *buf, int write, zt_error *err)
{
    zt_swap_io io;
    zt_status st =
        write ? zt_home_write_start(home, buf, &io, err) : zt_home_read_start(home, buf, &io, err);
    return st == ZT_OK ? zt_home_io_wait(home, &io, err) : st;
}

zt_status zt_home_load(zt_homes *h, const zt_home *home, void *dst, zt_error *err)
{
    if (home->kind == ZT_TIER_NVME)
        return nvme_sync(home, dst, 0, err);
    if (home->kind == ZT_TIER_HOST) {
        if (dst != home->ptr)
            memcpy(dst, home->ptr, home->bytes);
        return ZT_OK;
    }
    return zt_device_copy_sync(h->dev, dst, home->ptr, home->bytes, ZT_COPY_D2H, h->stream, err);
}

zt_status zt_home_store(zt_homes *h, zt_home *home, const void *src, zt_error *err)
{
    if (home->kind == ZT_TIER_NVME)
        return nvme_sync(home, (void *)src, 1, err);
    if (home->kind == ZT_TIER_HOST) {
        if (src != home->ptr)
            memcpy(home->ptr, src, home->bytes);
        return ZT_OK;
    }
    return zt_device_copy_sync(h->dev, home->ptr, src, home->bytes, ZT_COPY_H2D, h->stream, err);
}

zt_status zt_home_to_device(zt_homes *h, const zt_home *home, void *dst, zt_error *err)
{
    zt_copy_kind kind = home->kind == ZT_TIER_DEVICE ? ZT_COPY_D2D : ZT_COPY_H2D;
    if (home->ptr == dst) /* a home inside the destination (a replica's slice): in place */
        return ZT_OK;
    return zt_device_memcpy_async(h->dev, dst, home->ptr, home->bytes, kind, h->stream, err);
}

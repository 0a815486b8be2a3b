/* Backend lookup and helpers shared by every device backend. */
#include "runtime/device/device.h"

#include <string.h>

static const zt_device_iface *const backends[] = {
    &zt_device_host,
#ifdef ZT_HAVE_CUDA
    &zt_device_cuda,
#endif
};

const zt_device_iface *zt_device_find(const char *name, zt_error *err)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
#ifdef ZT_HAVE_CUDA
    const char *built = "host, cuda";
#else
    const char *built = "host (cuda: rebuild with -DZT_CUDA=ON where the CUDA toolkit is installed)";
#endif
    ZT_ERR(err, ZT_ERR_UNSUPPORTED, "device backend '%s' is not built; available: %s", name,
           built);
    return NULL;
}

zt_status zt_device_copy_sync(zt_device *dev, void *dst, const void *src, size_t bytes,
                              zt_copy_kind kind, zt_stream *s, zt_error *err)
{
    zt_status st = dev->iface->memcpy_async(dev, dst, src, bytes, kind, s, err);
    if (st == ZT_OK)
        st = dev->iface->stream_synchronize(dev, s, err);
    return st;
}

/* SPDX-License-Identifier: MIT */
/* Backend lookup and helpers shared by every device backend. */
#include "device/device.h"
#include "core/module.h"

#include <string.h>

const zt_device_iface *zt_device_find(const char *name, zt_error *err)
{
    if (strcmp(name, "host") == 0)
        return &zt_device_host;
#ifdef ZT_HAVE_CUDA
    if (strcmp(name, "cuda") == 0) { /* libztier-cuda.so in libztier.so (core/module.h) */
        const zt_module *m = zt_module_get("cuda", err);
        if (!m)
            zt_error_prefix(err, "ztier.device_backend \"cuda\": ");
        return m ? m->iface : NULL;
    }
    const char *built = "host, cuda";
#else
    const char *built =
        "host (cuda: rebuild with -DZT_CUDA=ON where the CUDA toolkit is installed)";
#endif
    ZT_ERR(err, ZT_ERR_UNSUPPORTED, "device backend '%s' is not built; available: %s", name, built);
    return NULL;
}

zt_status zt_device_copy_sync(zt_device *dev, void *dst, const void *src, size_t bytes,
                              zt_copy_kind kind, zt_stream *s, zt_error *err)
{
    zt_status st = zt_device_memcpy_async(dev, dst, src, bytes, kind, s, err);
    if (st == ZT_OK)
        st = zt_device_stream_synchronize(dev, s, err);
    return st;
}

void zt_device_base_init(zt_device *dev, const zt_device_iface *iface, uint64_t capacity)
{
    dev->iface = iface;
    dev->capacity = capacity;
    dev->bytes_in_use = dev->bytes_peak = dev->bytes_held_peak = 0;
    dev->index = -1;
    dev->pci_bus_id[0] = '\0';
    pthread_mutex_init(&dev->budget_lock, NULL);
}

void zt_device_base_fini(zt_device *dev) { pthread_mutex_destroy(&dev->budget_lock); }

zt_status zt_device_budget_take(zt_device *dev, size_t bytes, zt_error *err)
{
    pthread_mutex_lock(&dev->budget_lock);
    unsigned long long in_use = dev->bytes_in_use;
    int over = in_use + bytes > dev->capacity;
    if (!over) {
        dev->bytes_in_use += bytes;
        if (dev->bytes_in_use > dev->bytes_peak)
            dev->bytes_peak = dev->bytes_in_use;
    }
    pthread_mutex_unlock(&dev->budget_lock);
    if (!over)
        return ZT_OK;
    return ZT_ERR(err, ZT_ERR_DEVICE_NOMEM,
                  "device memory exhausted: %zu bytes requested, %llu in use of a %llu-byte "
                  "budget; raise ztier.hbm_capacity or offload more (offload_param.device)",
                  bytes, in_use, (unsigned long long)dev->capacity);
}

void zt_device_budget_return(zt_device *dev, size_t bytes)
{
    pthread_mutex_lock(&dev->budget_lock);
    dev->bytes_in_use -= bytes;
    pthread_mutex_unlock(&dev->budget_lock);
}

/* SPDX-License-Identifier: MIT */
/* Status strings and version queries. */
#include "ztier.h"

#define ZT_STR2(x) #x
#define ZT_STR(x) ZT_STR2(x)

static const char *const status_strings[ZT_STATUS_COUNT] = {
    [ZT_OK] = "ok",
    [ZT_ERR_ARGUMENT] = "invalid argument",
    [ZT_ERR_USAGE] = "call not allowed in the runtime's current state",
    [ZT_ERR_CONFIG] = "invalid configuration",
    [ZT_ERR_NOMEM] = "out of host memory",
    [ZT_ERR_DEVICE_NOMEM] = "out of device memory",
    [ZT_ERR_IO] = "I/O error",
    [ZT_ERR_NOSPACE] = "not enough disk space",
    [ZT_ERR_CORRUPT] = "data corrupted",
    [ZT_ERR_UNSUPPORTED] = "not supported by this build or machine",
    [ZT_ERR_COMM] = "communication error",
    [ZT_ERR_DEVICE] = "device error",
    [ZT_ERR_INTERNAL] = "internal error",
};

const char *zt_status_string(zt_status s)
{
    if ((int)s < 0 || s >= ZT_STATUS_COUNT)
        return "unknown status";
    return status_strings[s];
}

int zt_version(void) { return ZT_VERSION; }

const char *zt_version_string(void)
{
    return ZT_STR(ZT_VERSION_MAJOR) "." ZT_STR(ZT_VERSION_MINOR) "." ZT_STR(ZT_VERSION_PATCH);
}

#include "runtime/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

zt_status zt_error_set(zt_error *e, zt_status s, const char *file, int line, const char *fmt, ...)
{
    if (!e)
        return s;
    e->status = s;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof e->msg)
        snprintf(e->msg + n, sizeof e->msg - (size_t)n, " [%s:%d]", base_name(file), line);
    return s;
}

void zt_error_prefix(zt_error *e, const char *fmt, ...)
{
    if (!e)
        return;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t plen = strlen(prefix), mlen = strlen(e->msg);
    if (plen >= sizeof e->msg)
        plen = sizeof e->msg - 1;
    if (plen + mlen >= sizeof e->msg)
        mlen = sizeof e->msg - 1 - plen; /* keep the prefix, cut the tail of the message */
    memmove(e->msg + plen, e->msg, mlen);
    memcpy(e->msg, prefix, plen);
    e->msg[plen + mlen] = '\0';
}

void zt_error_clear(zt_error *e)
{
    if (!e)
        return;
    e->status = ZT_OK;
    e->msg[0] = '\0';
}

zt_status zt_status_from_errno(int err)
{
    if (err < 0)
        err = -err;
    switch (err) {
    case 0:
        return ZT_OK;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return ZT_ERR_NOSPACE;
    case ENOMEM:
        return ZT_ERR_NOMEM;
    case EINVAL:
        return ZT_ERR_ARGUMENT;
    case EOPNOTSUPP:
    case ENOSYS:
        return ZT_ERR_UNSUPPORTED;
    case EBADMSG:
        return ZT_ERR_CORRUPT;
    default:
        return ZT_ERR_IO;
    }
}

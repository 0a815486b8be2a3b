/* SPDX-License-Identifier: MIT */
/* CRC-32 (crc32.h). */
#include "core/crc32.h"

#include <zlib.h>
#ifdef ZT_HAVE_ISAL
#include <isa-l/crc.h>
#endif

uint32_t zt_crc32(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *b = p;
#ifdef ZT_HAVE_ISAL
    /* crc32_gzip_refl takes a 64-bit length; its seed and result are zlib's */
    return crc32_gzip_refl(crc, b, n);
#else
    return (uint32_t)crc32_z(crc, b, n);
#endif
}

const char *zt_crc32_impl(void)
{
#ifdef ZT_HAVE_ISAL
    return "isa-l";
#else
    return "zlib";
#endif
}

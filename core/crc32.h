/* SPDX-License-Identifier: MIT */
/* CRC-32 (the gzip/zlib polynomial, reflected: the values zlib's crc32 gives, which every
 * checkpoint file and manifest records). ISA-L's crc32_gzip_refl where the build found libisal
 * (about 3x zlib 1.2.13's speed on one core: the save and the load compute it over every byte),
 * else zlib's crc32_z; the values are the same (tests/unit/test_crc32.c). */
#ifndef ZT_CORE_CRC32_H
#define ZT_CORE_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 of n bytes at p continuing crc (0 to start), as zlib's crc32(crc, p, n). */
uint32_t zt_crc32(uint32_t crc, const void *p, size_t n);
/* "isa-l" or "zlib": which one zt_crc32 runs. */
const char *zt_crc32_impl(void);

#endif

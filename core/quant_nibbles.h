/* SPDX-License-Identifier: MIT */
/* Packing 16 int4 codes (8 bytes, element 2k in the low nibble of byte k) from 16 signed
 * bytes in element order, and unpacking them, with SSE2 only: shared by the AVX2 and AVX-512
 * int4 kernels, each compiled with its own instruction-set flags. */
#ifndef ZT_RUNTIME_COMM_QUANT_NIBBLES_H
#define ZT_RUNTIME_COMM_QUANT_NIBBLES_H

#include <immintrin.h>
#include <stdint.h>

/* codes: 16 signed bytes in [-7, 7], element order; stores 8 bytes at q. */
static inline __attribute__((always_inline)) void zt_pack_nibbles16(__m128i codes, uint8_t *q)
{
    __m128i lo4 = _mm_and_si128(codes, _mm_set1_epi16(0x000f)); /* even elements */
    __m128i hi4 = _mm_and_si128(_mm_srli_epi16(codes, 8), _mm_set1_epi16(0x000f)); /* odd */
    __m128i r = _mm_or_si128(lo4, _mm_slli_epi16(hi4, 4));
    _mm_storel_epi64((__m128i *)q, _mm_packus_epi16(r, r));
}

static inline __attribute__((always_inline)) __m128i zt_unpack_nibbles16(const uint8_t *q)
{
    __m128i bytes = _mm_loadl_epi64((const __m128i *)q);
    __m128i lo4 = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
    __m128i hi4 = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0f));
    __m128i v = _mm_unpacklo_epi8(lo4, hi4);                                   /* element order */
    return _mm_sub_epi8(_mm_xor_si128(v, _mm_set1_epi8(8)), _mm_set1_epi8(8)); /* sign */
}

#endif

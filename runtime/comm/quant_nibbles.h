/* Unpacking 16 int4 codes (8 bytes, element 2k in the low nibble of byte k) into 16 signed
 * bytes in element order, with SSE2 only: shared by the AVX2 and AVX-512 int4 kernels, each
 * compiled with its own instruction-set flags. */
#ifndef ZT_RUNTIME_COMM_QUANT_NIBBLES_H
#define ZT_RUNTIME_COMM_QUANT_NIBBLES_H

#include <immintrin.h>
#include <stdint.h>

static inline __attribute__((always_inline)) __m128i zt_unpack_nibbles16(const uint8_t *q)
{
    __m128i bytes = _mm_loadl_epi64((const __m128i *)q);
    __m128i lo4 = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
    __m128i hi4 = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0f));
    __m128i v = _mm_unpacklo_epi8(lo4, hi4);                                   /* element order */
    return _mm_sub_epi8(_mm_xor_si128(v, _mm_set1_epi8(8)), _mm_set1_epi8(8)); /* sign */
}

#endif

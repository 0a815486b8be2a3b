// cub::DeviceRadixSort::SortPairs for the stand-in: the same contract (a size query with a
// null scratch, then a stable sort of the keys' bits [begin_bit, end_bit) carrying the values,
// queued on the stream) computed on the CPU. Signed keys are ordered as CUB orders them (the
// sign bit flipped), so a sort of fewer bits sorts by the same bits CUB would.
#ifndef CUDASIM_CUB_DEVICE_RADIX_SORT_CUH
#define CUDASIM_CUB_DEVICE_RADIX_SORT_CUH

#include "cudasim_device.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace cub {

struct DeviceRadixSort {
    template <typename K, typename V>
    static cudaError_t SortPairs(void *temp, size_t &temp_bytes, const K *keys_in, K *keys_out,
                                 const V *values_in, V *values_out, int n, int begin_bit = 0,
                                 int end_bit = (int)sizeof(K) * 8, cudaStream_t stream = nullptr)
    {
        static_assert(std::is_integral_v<K>, "the stand-in sorts integer keys");
        // as CUB: scratch for a copy of keys and values, plus some
        size_t need = (size_t)(n > 0 ? n : 0) * (sizeof(K) + sizeof(V)) + 1024;
        if (!temp) {
            temp_bytes = need;
            return cudaSuccess;
        }
        if (temp_bytes < need || begin_bit < 0 || end_bit > (int)sizeof(K) * 8 ||
            begin_bit >= end_bit)
            return cudaErrorInvalidValue;
        cudasim::note_sort_bits(end_bit - begin_bit);
        if (n <= 0)
            return cudaSuccess;
        size_t nk = sizeof(K) * (size_t)n, nv = sizeof(V) * (size_t)n;
        return cudasim::device_work(
            stream, "cub::DeviceRadixSort::SortPairs",
            {{keys_in, nk, false}, {values_in, nv, false}, {keys_out, nk, true},
             {values_out, nv, true}, {temp, need, true}},
            [=] {
                using U = std::make_unsigned_t<K>;
                const U flip = std::is_signed_v<K> ? (U)((U)1 << (sizeof(K) * 8 - 1)) : 0;
                const U width_mask = end_bit - begin_bit >= (int)sizeof(U) * 8
                                         ? (U)~(U)0
                                         : (U)(((U)1 << (end_bit - begin_bit)) - 1);
                auto digit = [&](K k) { return (U)(((U)k ^ flip) >> begin_bit) & width_mask; };
                std::vector<int> order((size_t)n);
                for (int i = 0; i < n; i++)
                    order[(size_t)i] = i;
                std::stable_sort(order.begin(), order.end(),
                                 [&](int a, int b) { return digit(keys_in[a]) < digit(keys_in[b]); });
                std::memset(temp, 0xff, need); // CUB's scratch holds nothing afterwards
                for (int i = 0; i < n; i++) {
                    keys_out[i] = keys_in[order[(size_t)i]];
                    values_out[i] = values_in[order[(size_t)i]];
                }
            });
    }
};

} // namespace cub

#endif

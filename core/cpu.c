/* SPDX-License-Identifier: MIT */
#include "core/cpu.h"

int zt_cpu_has(zt_cpu_feature f)
{
    __builtin_cpu_init();
    switch (f) {
    case ZT_CPU_AVX2_FMA_F16C:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    case ZT_CPU_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    case ZT_CPU_AVX512_BF16:
        return __builtin_cpu_supports("avx512bf16");
    }
    return 0;
}

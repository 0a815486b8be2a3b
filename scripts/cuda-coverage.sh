#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The CUDA code's lines executed by the CUDA tests on the stand-in (cudasim): builds
# build-cov (gcov instrumentation, ZT_CUDA_FAKE), runs `ctest -L cuda` there and prints, for
# the two .cu files, the cuda backend, the nccl backend and the GPT-2 CUDA ops, the lines
# executed and the total. `make cuda-coverage` runs it.
#   scripts/cuda-coverage.sh [build folder]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cov}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DZT_WERROR=ON -DZT_COVERAGE=ON -DZT_CUDA_FAKE=ON \
  -DZT_NCCL=ON > /dev/null
cmake --build "$build" -j "$(nproc)" > /dev/null
find "$build" -name '*.gcda' -delete
ctest --test-dir "$build" -L cuda -j 2 > "$build/cuda-coverage-ctest.log" 2>&1 ||
  { tail -20 "$build/cuda-coverage-ctest.log"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
objects=(
  "device/CMakeFiles/zt_device_cuda.dir/cudasim/cuda_kernels.cu.cc"
  "device/CMakeFiles/zt_device_cuda.dir/cuda.c"
  "comm/CMakeFiles/zt_comm_nccl.dir/nccl.c"
  "models/gpt2/CMakeFiles/zt_gpt2_cuda.dir/cudasim/gpt2_kernels.cu.cc"
  "models/gpt2/CMakeFiles/zt_gpt2_cuda.dir/gpt2_ops_cuda.c"
)
root=$(pwd)
for o in "${objects[@]}"; do
  (cd "$out" && gcov -o "$root/$build/$(dirname "$o")" "$root/$build/$o.gcda" 2> /dev/null)
done | tr -d "'" |
  awk -v root="$root/" '
    /^File / { f = $2; sub(root, "", f) }
    /^Lines executed:/ && f ~ /(cuda_kernels\.cu|gpt2_kernels\.cu|device\/cuda\.c|comm\/nccl\.c|gpt2_ops_cuda\.c)$/ {
      split($2, a, ":"); pct = a[2] + 0; n = $4 + 0
      printf "%-40s %6.2f%% of %4d lines\n", f, pct, n
      hit += pct * n / 100; all += n; f = "" }
    END { printf "%-40s %6.2f%% of %4d lines\n", "total", 100 * hit / all, all }'

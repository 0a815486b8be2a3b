#!/usr/bin/env bash
# The GPT-2 CUDA ops live in libztier-gpt2-cuda.so, opened only when a program creates them
# (models/gpt2/gpt2_cuda_module.h): the trainer and `ztier` do not link cuBLAS or cuBLASLt
# (0.07-0.12 s and 210 MB each at a process's start); a --device cpu run opens neither the
# module nor cuBLAS; a --device cuda run opens the module and trains (on the stand-in in CI;
# without a GPU the real build says so and opens nothing); a module that is not where
# ZT_GPT2_CUDA_MODULE says is an error naming the variable.
#   cuda_module_load.sh <zt_gpt2> <ztier> <module> <fake: 1 stand-in, 0 real CUDA>
set -euo pipefail
gpt2=$1 ztier=$2 module=$3 fake=$4
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/cuda-module.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "cuda_module_load: $*"; exit 1; }
for exe in "$gpt2" "$ztier"; do
  if readelf -d "$exe" | grep -E 'NEEDED.*(libcublas|ztier-gpt2-cuda)'; then
    fail "${exe##*/} links cuBLAS or the module"
  fi
done
readelf -d "$module" | grep -q 'NEEDED.*libcublas\|NEEDED.*ztcudasim' ||
  fail "the module does not link cuBLAS (or the stand-in)"
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 200) > "$work/text.txt"
run=("$gpt2" --config tiny --batch 2 --seq 16 --steps 2 --text "$work/text.txt")
LD_DEBUG=files "${run[@]}" --device cpu > "$work/cpu.txt" 2>&1 || { tail -5 "$work/cpu.txt"; fail "cpu run"; }
if grep -E 'file=.*(libcublas|libztier-gpt2-cuda)' "$work/cpu.txt" | head -3; then
  fail "a --device cpu run opened cuBLAS or the module"
fi
grep -qE '^step +2 ' "$work/cpu.txt" || fail "the cpu run did not train"
if [ "$fake" = 1 ]; then
  LD_DEBUG=files "${run[@]}" --device cuda > "$work/cuda.txt" 2>&1 || { tail -5 "$work/cuda.txt"; fail "cuda run"; }
  grep -q 'calling init: .*libztier-gpt2-cuda.so' "$work/cuda.txt" || fail "the cuda run did not open the module"
  grep -qE '^step +2 ' "$work/cuda.txt" || fail "the cuda run did not train"
  if ZT_GPT2_CUDA_MODULE=$work/none.so "${run[@]}" --device cuda > "$work/none.txt" 2>&1; then
    fail "a missing module was not an error"
  fi
  grep -q 'ZT_GPT2_CUDA_MODULE=.*none.so: no such file' "$work/none.txt" || { cat "$work/none.txt"; fail "the error does not name ZT_GPT2_CUDA_MODULE"; }
else
  # no GPU here: --device cuda is refused by the probe (the CUDA runtime alone), no module opened
  if LD_DEBUG=files "${run[@]}" --device cuda > "$work/cuda.txt" 2>&1; then
    echo "cuda_module_load: a GPU is here; the stand-in build checks the module's training"
  fi
  if ! grep -q '^step ' "$work/cuda.txt" && grep -E 'file=.*libcublas' "$work/cuda.txt" | head -1; then
    fail "a refused --device cuda opened cuBLAS"
  fi
fi
echo "cuda_module_load: ok"

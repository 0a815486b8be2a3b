#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every `ztier bench` runs to the end at a tiny size and prints its JSON line with the
# fields docs/benchmarks.md quotes; --backend cuda fails with its cause where there is no GPU (or
# runs where there is one). Not a timing test: the figures are only checked to be numbers
# (and ratios positive).
#   bench_smoke.sh <ztier>
set -euo pipefail
ztier=$1
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/bench-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 400) > "$work/text.txt"

# json_has <json line> <field>...: every field is a positive number
json_has() {
  python3 - "$@" <<'PY'
import json, sys
obj = json.loads(sys.argv[1])
for field in sys.argv[2:]:
    v = obj
    for part in field.split("."):
        v = v[part]
    if not isinstance(v, (int, float)) or not v > 0:
        sys.exit(f"{field} = {v!r}: not a positive number")
PY
}

run() { # run <name> <fields...> -- <args...>
  local name=$1; shift
  local fields=()
  while [ "$1" != "--" ]; do fields+=("$1"); shift; done
  shift
  local out
  if ! out=$("$ztier" bench "$@" --json 2>"$work/err"); then
    echo "ztier bench $*: failed"; cat "$work/err"; exit 1
  fi
  json_has "$(tail -n 1 <<<"$out")" "${fields[@]}" || { echo "$name: $out"; exit 1; }
  echo "$name: ok"
}

run copy h2d_gbps d2h_gbps fetch_h2d_gbps limit_h2d_gbps fetch_ratio -- copy --size 4M --reps 3
run adam params_per_s probe_gbps ratio_vs_limit norm_pool_gbps step_s floor_s -- \
  adam --params 2e5 --threads 2 --reps 3 --nvme "$work"
run adam-no-copy params_per_s probe_gbps ratio_vs_limit clipped_host_step_s -- \
  adam --params 2e5 --threads 2 --reps 3 --param-copy none --clipped-step
run quant ratio_vs_memcpy int4.ratio_vs_memcpy -- quant --size 1M --threads 2
run prefetch step_s stall_ratio compute_s -- prefetch --layers 3 --hidden 128 --batch 16 --steps 3
if command -v fio >/dev/null; then
  run nvme read_gbps write_gbps fio_read_gbps -- nvme --path "$work" --size 8M --reps 3
else
  run nvme read_gbps write_gbps -- nvme --path "$work" --size 8M --reps 3
fi
run gpt2 resident_step_s offload_step_s tokens_per_s -- \
  gpt2 --config tiny --batch 2 --seq 16 --steps 1 --nvme-path "$work" --text "$work/text.txt"
run act full_s host_s nvme_s host_ratio nvme_ratio bytes_per_step disk_read_bps -- \
  act --config tiny --batch 2 --seq 16 --steps 1 --nvme-path "$work" --text "$work/text.txt"

# the GPU versions: a clear error without a GPU
for args in "copy --backend cuda --size 4M" "prefetch --backend cuda --layers 2 --steps 3" \
            "gpt2 --backend cuda --config tiny --seq 16 --steps 1 --text $work/text.txt" \
            "act --backend cuda --config tiny --seq 16 --steps 1 --text $work/text.txt"; do
  # shellcheck disable=SC2086
  if "$ztier" bench $args > "$work/out" 2> "$work/err"; then
    echo "bench $args: ran (a GPU is here)"
  elif grep -qiE "no usable GPU|needs a build with CUDA|backend .cuda. is not built" "$work/err"; then
    echo "bench $args: no GPU, said so"
  else
    echo "bench $args: failed without naming the cause:"; cat "$work/err"; exit 1
  fi
done

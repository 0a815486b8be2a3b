#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier estimate --layers` against a real run of the same model and configuration: the
# minimal example's MLP (dims 32-256-256-8) described as a layers file, trained for 3 steps
# by zt_minimal; the estimate's host bytes equal the run's host peak and its device peak is
# within 5% of the run's, for host and NVMe placements.
#   estimate_cli.sh <ztier> <zt_minimal>
set -euo pipefail
ztier=$1 minimal=$2
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/estimate-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat > "$work/mlp.json" <<JSON
{"layers": [
  {"name": "fc1", "params": [{"name": "fc1.weight", "shape": [256, 32]}, {"name": "fc1.bias", "shape": [256]}]},
  {"name": "fc2", "params": [{"name": "fc2.weight", "shape": [256, 256]}, {"name": "fc2.bias", "shape": [256]}]},
  {"name": "fc3", "params": [{"name": "fc3.weight", "shape": [8, 256]}, {"name": "fc3.bias", "shape": [8]}]}]}
JSON
mkdir -p "$work/swap"
# with offload_optimizer.ratio 0.5 the first layer's (fc1's 8448 elements) master, m, v and
# gradient sum, 16 bytes each, are in device memory: the estimate counts them as the run does
for placement in "cpu cpu 1M" "nvme nvme 1M" "cpu cpu 600K" "none cpu 1M 0.5" "cpu cpu 1M 0.5"; do
  read -r pdev odev hbm ratio <<<"$placement"
  cat > "$work/ds.json" <<JSON
{"zero_optimization": {"stage3_param_persistence_threshold": 0,
  "offload_param": {"device": "$pdev", "nvme_path": "$work/swap"},
  "offload_optimizer": {"device": "$odev", "nvme_path": "$work/swap", "ratio": ${ratio:-1}}},
 "aio": {"block_size": 4096}, "ztier": {"hbm_capacity": "$hbm"}}
JSON
  run=$("$minimal" --config "$work/ds.json" --steps 3 | tail -n 1)
  est=$("$ztier" estimate --layers "$work/mlp.json" --ds-config "$work/ds.json" --json | tail -n 1)
  dev_run=$(sed -E 's/^device peak ([0-9]+) .*/\1/' <<<"$run")
  host_run=$(sed -E 's/.*host peak ([0-9]+) bytes.*/\1/' <<<"$run")
  dev_est=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["per_rank"]["device_peak"])' "$est")
  host_est=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["per_rank"]["host"])' "$est")
  echo "$pdev/$odev, budget $hbm: device peak $dev_run, estimated $dev_est; host $host_run, estimated $host_est"
  [ "$host_run" -eq "$host_est" ]
  opt_dev=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["per_rank"]["optimizer_device"])' "$est")
  [ "$opt_dev" -eq "$([ -n "$ratio" ] && echo $((16 * 8448)) || echo 0)" ]
  awk -v a="$dev_run" -v b="$dev_est" 'BEGIN { r = b / a; exit !(r >= 0.95 && r <= 1.05) }'
done
# a tied embedding (llm.c's wte, reused as the head after ln_f and held through backward):
# the minimum is its backward pass beside the largest block's, 2 * 4 * (20480 + 32768) bytes
# (without the tie: h1's alone, 2 * 4 * 32768); a budget below it is an error naming it, with
# no "peak under the budget"
tied_model() { # $1: the embedding's extra key
  cat > "$work/tied.json" <<JSON
{"layers": [
  {"name": "embed", $1 "params": [{"name": "wte", "shape": [256, 64]}, {"name": "wpe", "shape": [64, 64]}]},
  {"name": "h0", "params": [{"name": "h0.w", "shape": [64, 256]}]},
  {"name": "h1", "params": [{"name": "h1.w", "shape": [64, 512]}]},
  {"name": "h2", "params": [{"name": "h2.w", "shape": [64, 384]}]},
  {"name": "ln_f", "params": [{"name": "ln_f.w", "shape": [64]}, {"name": "ln_f.b", "shape": [64]}]}]}
JSON
}
min_of() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["per_rank"]["device_min"], d["per_rank"]["runs"])' "$1"; }
echo '{"zero_optimization": {"stage3_param_persistence_threshold": 0, "offload_param": {"device": "cpu"}}}' > "$work/tied_ds.json"
tied_model ''
[ "$(min_of "$("$ztier" estimate --layers "$work/tied.json" --ds-config "$work/tied_ds.json" --device-memory 262144 --json | tail -n 1)")" = "262144 True" ]
tied_model '"tied_after": "ln_f",'
out=$("$ztier" estimate --layers "$work/tied.json" --ds-config "$work/tied_ds.json" --device-memory 425984 --json)
grep -q "peak under the budget of 416.00 KiB" <<<"$out"
[ "$(min_of "$(tail -n 1 <<<"$out")")" = "425984 True" ]
if "$ztier" estimate --layers "$work/tied.json" --ds-config "$work/tied_ds.json" --device-memory 425983 --json > "$work/out" 2> "$work/err"; then
  echo "FAIL: a budget below the tied minimum exited 0"; exit 1
fi
cat "$work/err"
grep -q "device budget of 425983 bytes is below the 425984 bytes" "$work/err"
grep -q "layer 'h1' with 'embed' (backward) held" "$work/err"
grep -q "below the minimum: these steps cannot run" "$work/out"
if grep -q "peak under the budget" "$work/out"; then echo "FAIL: a peak under a budget below the minimum"; exit 1; fi
[ "$(min_of "$(tail -n 1 "$work/out")")" = "425984 False" ]
echo '{"layers": [{"name": "a", "tied_after": "zz", "params": [{"name": "a.w", "shape": [4]}]}]}' > "$work/bad.json"
if "$ztier" estimate --layers "$work/bad.json" 2> "$work/err"; then exit 1; fi
grep -q "layers\[0\].tied_after must name a layer" "$work/err"
# bad input names the problem
if "$ztier" estimate --layers "$work/missing.json" 2> "$work/err"; then exit 1; fi
grep -q "missing.json" "$work/err"
echo '{"layers": [{"name": "a", "params": [{"name": "a.w", "shape": [0]}]}]}' > "$work/bad.json"
if "$ztier" estimate --layers "$work/bad.json" 2> "$work/err"; then exit 1; fi
grep -q "layers\[0\].params\[0\]" "$work/err"
# numbers out of range or not numbers name the option (no wrap-around: 99999999999 ranks)
for bad in "--world 99999999999" "--world 0" "--world 4x" "--vocab -3" "--ranks-per-node -1"; do
  read -r opt val <<< "$bad"
  if "$ztier" estimate --config tiny $opt "$val" 2> "$work/err" > /dev/null; then
    echo "FAIL: estimate accepted $bad"; exit 1
  fi
  grep -q -- "$opt '$val': give an integer" "$work/err" || { cat "$work/err"; exit 1; }
done
echo "estimate CLI checks passed"

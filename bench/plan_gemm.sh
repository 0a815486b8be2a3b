#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier plan` at micro-batches other than the profile's (docs/plan.md, "The matmuls at other
# micro-batches"): one profile measured at batch BATCH x SEQ (`ztier bench profile`, which
# writes GEMM entries at every micro-batch dividing BATCH), and the GPT-2 trainer resident
# (parameters on the device, optimizer state in host memory, as bench/plan.sh's `resident`) at
# each of BATCHES, ROUNDS interleaved runs; the measured step the median of every run's steps
# after the second. Each micro-batch predicted twice from the same profile: with its GEMM
# entries (the matmuls from the entries at that m) and without them (the flat
# gemm_flops_per_s, what the plan did before). The exact layer entries (at BATCH only) are kept
# in both. Prints the table and one JSON line.
#   bench/plan_gemm.sh [BUILD_DIR]   env: CONFIG=d12 BATCH=4 SEQ=64 BATCHES="1 2 4" STEPS=6
#     ROUNDS=2 LOCK=<file> (each run under flock -x LOCK) PROFILE=<file> (instead of measuring)
#     KEEP=<dir> (keep the runs' output) PROFILE_SECONDS=120 (the profile's budget)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
ztier=$build/tools/ztier gpt2=$build/examples/gpt2/zt_gpt2
CONFIG=${CONFIG:-d12} BATCH=${BATCH:-4} SEQ=${SEQ:-64} BATCHES=${BATCHES:-1 2 4}
STEPS=${STEPS:-6} ROUNDS=${ROUNDS:-2} TEXT=${TEXT:-/usr/share/common-licenses/GPL-3}
work=${KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/plan-gemm.XXXXXX")}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
locked() { if [ -n "${LOCK:-}" ]; then flock -x "$LOCK" timeout 230 "$@"; else "$@"; fi; }
ds="$work/resident.json"
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "none"}, "offload_optimizer": {"device": "cpu"}}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "ztier": {"hbm_capacity": "16G"}}' > "$ds"

if [ -n "${PROFILE:-}" ]; then
  cp "$PROFILE" "$work/machine.json"
else
  locked "$ztier" bench profile --backend host --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" \
    --seconds "${PROFILE_SECONDS:-120}" \
    --nvme-path "$work" --out "$work/machine.json" > "$work/profile.log" 2>&1 < /dev/null ||
    { echo "bench/plan_gemm.sh: ztier bench profile failed:"; tail -5 "$work/profile.log"; exit 1; }
fi
python3 - "$work/machine.json" "$work/flat.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["compute"] = [e for e in p.get("compute", []) if e.get("op") != "gemm"]
json.dump(p, open(sys.argv[2], "w"))
PY

for r in $(seq "$ROUNDS"); do
  for b in $BATCHES; do
    locked "$gpt2" --config "$CONFIG" --batch "$b" --seq "$SEQ" --steps "$STEPS" --text "$TEXT" \
      --threads "$(nproc)" --ds-config "$ds" > "$work/b$b-$r.txt" 2>&1 < /dev/null ||
      { echo "bench/plan_gemm.sh: batch $b (round $r) failed:"; tail -5 "$work/b$b-$r.txt"; exit 1; }
  done
done
median_step() { # $1: batch -> median of every run's steps after the second (s)
  cat "$work/b$1"-[0-9]*.txt | awk -F'|' '/^step +[0-9]+ \|/ { split($1, a, " "); if (a[2] > 2) { t = $3; sub(/ms/, "", t); print t / 1000 } }' |
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
for b in $BATCHES; do
  for p in machine flat; do
    "$ztier" plan --config "$CONFIG" --batch "$b" --seq "$SEQ" --ds-config "$ds" \
      --profile "$work/$p.json" --json | tail -1 > "$work/plan-$p-$b.json"
  done
  median_step "$b" > "$work/measured-$b.txt"
done
python3 - "$work" "$CONFIG" "$BATCH" "$SEQ" "$BATCHES" <<'PY'
import json, sys
w, config, batch, seq, batches = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split()
print(f"GPT-2 {config} resident, profile at {batch} x {seq}; predicted with the flat gemm_flops_per_s "
      "and with the GEMM entries")
print("| micro-batch | matmuls from (GEMM entries) | measured | flat rate | ratio | GEMM entries | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- |")
rows = []
for b in batches:
    m = float(open(f"{w}/measured-{b}.txt").read())
    flat = json.load(open(f"{w}/plan-flat-{b}.json"))["step_s"]
    g = json.load(open(f"{w}/plan-machine-{b}.json"))
    src = g["matmul_source"]["block_forward"]["text"]
    print(f"| {b} x {seq} | {src} | {m:.3f} s | {flat:.3f} s | {flat / m:.2f} | {g['step_s']:.3f} s | {g['step_s'] / m:.2f} |")
    rows.append({"batch": int(b), "measured_s": m, "flat_s": flat, "gemm_s": g["step_s"],
                 "source": g["matmul_source"]["block_forward"]["source"]})
print(json.dumps({"config": config, "profile_batch": int(batch), "seq": int(seq), "rows": rows}))
PY

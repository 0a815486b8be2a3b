#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier plan --search` against measured steps (docs/plan.md, "Searching for the fastest
# configuration"): GPT-2 d12 (or CONFIG), batch 4 x 64, on this machine, within memory budgets
# that exclude some placements (the host backend's "device" memory is ztier.hbm_capacity). The
# search's pick and every case of bench/plan.sh's table (its CASES and ds_config, read from
# that script) that fits the same budgets by `ztier estimate`'s bytes run in the GPT-2 trainer,
# interleaved over ROUNDS rounds (pick, case 1, case 2, ..., pick, ...); the measured step is
# the median of every run's steps after the second. Prints a table (config, fits, predicted,
# measured), whether the pick's measured step is within 10% of the best measured case that
# fits, and one JSON line.
#   bench/plan_search.sh [BUILD_DIR]   env: CONFIG=d12 BATCH=4 SEQ=64 STEPS=6 ROUNDS=3
#     DEVICE_MEMORY=800M HOST_MEMORY=<size> (default: MemAvailable)
#     PROFILE=<file>: the machine profile (default: `ztier bench profile` measures one)
#     NVME=<folder for the swap files>, LOCK=<file>: each run holds `flock -x LOCK`
#     KEEP=<dir>: keep the runs' output there; REPORT_ONLY=1: no runs, the table from those in KEEP
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
ztier=$build/tools/ztier gpt2=$build/examples/gpt2/zt_gpt2
CONFIG=${CONFIG:-d12} BATCH=${BATCH:-4} SEQ=${SEQ:-64} STEPS=${STEPS:-6} ROUNDS=${ROUNDS:-3}
DEVICE_MEMORY=${DEVICE_MEMORY:-800M} TEXT=${TEXT:-/usr/share/common-licenses/GPL-3}
if [ -n "${KEEP:-}" ]; then work=$KEEP; else
  work=$(mktemp -d "${TMPDIR:-/tmp}/plan-search-bench.XXXXXX"); trap 'rm -rf "$work"' EXIT
fi
nvme=${NVME:-$work/nvme}
mkdir -p "$work" "$nvme"
budgets=(--device-memory "$DEVICE_MEMORY")
[ -z "${HOST_MEMORY:-}" ] || budgets+=(--host-memory "$HOST_MEMORY")
host_bytes=$(python3 -c "import sys; s = sys.argv[1].upper(); u = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
print(int(float(s[:-1]) * u[s[-1]]) if s and s[-1] in u else int(s or 0))" "${HOST_MEMORY:-}")

# bench/plan.sh's cases and their ds_config, as that script defines them (one table for both),
# and its mpirun and locked (each run under `flock -x LOCK`)
defs=$(sed -n -e '/^mpirun=/p' -e '/^locked() /p' -e '/^CASES="/,/^}/p' "$root/bench/plan.sh")
grep -q '^ds_config()' <<<"$defs" && grep -q '^locked()' <<<"$defs" ||
  { echo "bench/plan_search.sh: no CASES, ds_config or locked in bench/plan.sh"; exit 1; }
eval "$defs"
# the placements only: the prefetch-window rows vary a knob the search varies on its own
CASES=$(awk '$8 == "-"' <<<"$CASES")

if [ -n "${PROFILE:-}" ]; then
  cp "$PROFILE" "$work/machine.json"
else
  locked "$ztier" bench profile --out "$work/machine.json" --config "$CONFIG" --batch "$BATCH" \
    --seq "$SEQ" --nvme-path "$nvme" > "$work/profile.txt" 2>&1 ||
    { tail -5 "$work/profile.txt"; exit 1; }
fi

# 1. the search
"$ztier" plan --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --profile "$work/machine.json" \
  --search "${budgets[@]}" --nvme-path "$nvme" --json 2>&1 | tail -1 > "$work/search.json"
"$ztier" plan --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --profile "$work/machine.json" \
  --search "${budgets[@]}" --nvme-path "$nvme" > "$work/search.txt" 2>&1
# its pick as the trainer runs it: the ds_config, an optimizer, the device budget
python3 - "$work/search.json" "$work/pick.json" "$work/pick.args" "$DEVICE_MEMORY" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b = d["best"]
ds = b["ds_config"]
ds["optimizer"] = {"type": "AdamW", "params": {"lr": 1e-4}}
ds.setdefault("ztier", {})["hbm_capacity"] = sys.argv[4]
json.dump(ds, open(sys.argv[2], "w"))
open(sys.argv[3], "w").write(f"{b['micro_batch']} {b['checkpoint_activations']} {b['step_s']}\n")
PY
read -r pick_rows pick_pol pick_pred < "$work/pick.args"

# 2. which of the table's cases fit the budgets (`ztier estimate`'s bytes: the device total of
# its activation policy, its host and NVMe bytes), and their predictions
fits() { # $1: a CASES row -> "1" or "0 <why>"
  local name=$1 ranks=$2 stage=$3 p=$4 o=$5 pol=$6 act=$7 bucket=$8
  "$ztier" estimate --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --world "$ranks" \
    --ds-config "$(ds_config "$name" "$stage" "$p" "$o" "$act" "$bucket")" --device-memory "$DEVICE_MEMORY" \
    --json 2>/dev/null | tail -1 | python3 -c "
import json, sys
e = json.loads(sys.stdin.read()); r = e['per_rank']; a = e['activations']['policies']
row = a['full+offload' if '$act' != 'none' and '$pol' == 'full' else '$pol']
dev = row['device_total']
host = (r['host'] + r['pinned'] + ('$act' == 'cpu') * row['store_home']) * $ranks
budget, ram = e['machine']['device_budget'], $host_bytes or e['machine']['ram_available']
print('1' if dev <= budget and host <= ram else f'0 device {dev} of {budget}, host {host} of {ram}')"
}
plan_case() { # $1..: a CASES row -> predicted step (s)
  local name=$1 ranks=$2 stage=$3 p=$4 o=$5 pol=$6 act=$7 bucket=$8
  "$ztier" plan --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --world "$ranks" \
    --ds-config "$(ds_config "$name" "$stage" "$p" "$o" "$act" "$bucket")" --checkpoint-activations "$pol" \
    --profile "$work/machine.json" --json 2>/dev/null | tail -1 |
    python3 -c "import json,sys; t = sys.stdin.read(); print(json.loads(t)['step_s'] if t.strip() else 'nan')"
}
: > "$work/cases.tsv"
while read -r row; do
  read -r name _ <<<"$row"
  printf '%s\t%s\t%s\n' "$name" "$(fits $row)" "$(plan_case $row)" >> "$work/cases.tsv"
done <<<"$CASES"

# 3. the measurements, interleaved: the pick, then each case that fits
run() { # $1: label, $2: ranks, $3: round, rest: the trainer's arguments
  local label=$1 ranks=$2 r=$3 cmd=()
  shift 3
  [ "$ranks" -gt 1 ] && cmd=("${mpirun[@]}" -np "$ranks")
  locked "${cmd[@]}" "$gpt2" --config "$CONFIG" --seq "$SEQ" --steps "$STEPS" --text "$TEXT" \
    --threads $(($(nproc) / ranks)) "$@" > "$work/$label-$r.txt" 2>&1 < /dev/null ||
    { echo "bench/plan_search.sh: $label (round $r) failed:"; tail -5 "$work/$label-$r.txt"; exit 1; }
}
median_step() { # $1: label -> median of every run's steps after the second (s)
  cat "$work/$1"-[0-9]*.txt 2>/dev/null | awk -F'|' '/^step +[0-9]+ \|/ { split($1, a, " "); if (a[2] > 2) { t = $3; sub(/ms/, "", t); print t / 1000 } }' |
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
for r in $(seq "$ROUNDS"); do
  [ -z "${REPORT_ONLY:-}" ] || break # the runs already in KEEP (a run cut short)
  run pick 1 "$r" --batch "$pick_rows" --checkpoint-activations "$pick_pol" --ds-config "$work/pick.json"
  while read -r name ranks stage p o pol act bucket; do
    [ "$(awk -v n="$name" '$1 == n { print $2 }' "$work/cases.tsv")" = 1 ] || continue
    run "$name" "$ranks" "$r" --batch "$BATCH" --checkpoint-activations "$pol" \
      --ds-config "$(ds_config "$name" "$stage" "$p" "$o" "$act" "$bucket")"
  done <<<"$CASES"
done

# 4. the table
python3 - "$work" "$(median_step pick)" "$pick_pred" "$DEVICE_MEMORY" "${HOST_MEMORY:-MemAvailable}" \
  "$CONFIG" "$BATCH" "$SEQ" "$ROUNDS" "$STEPS" <<PY
import json, sys
work, pick_m, pick_p, dm, hm, config, batch, seq, rounds, steps = sys.argv[1:]
search = json.load(open(f"{work}/search.json"))
b = search["best"]
measured = {}
$(while read -r name _; do printf 'measured["%s"] = "%s"\n' "$name" "$(median_step "$name")"; done <<<"$CASES")
import glob, os
def runs(label):
    return sum(os.path.getsize(f) > 0 for f in glob.glob(f"{work}/{glob.escape(label)}-[0-9]*.txt"))
print(f"GPT-2 {config}, batch {batch} x {seq}; budgets: device {dm}, host {hm}; interleaved "
      f"runs of {steps} steps, the measured step the median of every run's steps 3 on")
print(f"search: {search['evaluated']} evaluated, {search['fit']} fit, {search['predicted']} "
      f"predicted in {search['seconds']:.2f} s")
pick = (f"pick: stage {b['stage']}, params {b['params']}, optimizer {b['optimizer']}, "
        f"{b['micro_batch']} x {b['accumulation']}, {b['activation_policy']}")
print("| config | fits | predicted | measured | runs |")
print("| --- | --- | --- | --- | --- |")
print(f"| {pick} | yes | {float(pick_p):.3f} s | {float(pick_m):.3f} s | {runs('pick')} |")
rows, best = [], None
for line in open(f"{work}/cases.tsv"):
    name, fit, pred = line.rstrip("\n").split("\t")
    m = float(measured[name]) if fit == "1" and measured[name] else None
    rows.append({"case": name, "fits": fit == "1", "why": fit[2:],
                 "predicted_s": None if pred == "nan" else float(pred), "measured_s": m})
    print(f"| {name} | {'yes' if fit == '1' else 'no: ' + fit[2:]} | {float(pred):.3f} s | "
          + (f"{m:.3f} s | {runs(name)} |" if m else "- | 0 |"))
    if m and (best is None or m < best[1]):
        best = (name, m)
ok = best is not None and float(pick_m) <= 1.10 * best[1]
print(f"pick {float(pick_m):.3f} s against the best measured case that fits, "
      + (f"{best[0]} {best[1]:.3f} s: ratio {float(pick_m) / best[1]:.3f}, " if best else "none, ")
      + ("within 10%" if ok else "NOT within 10%"))
print(json.dumps({"config": config, "batch": int(batch), "seq": int(seq), "device_memory": dm,
                  "host_memory": hm, "pick": {k: b[k] for k in ("stage", "params", "optimizer",
                  "micro_batch", "accumulation", "activation_policy", "optimizer_ratio",
                  "prefetch_window")} | {"predicted_s": float(pick_p), "measured_s": float(pick_m)},
                  "cases": rows, "best_case": best[0] if best else None,
                  "ratio": float(pick_m) / best[1] if best else None, "within_10pct": ok},
                 separators=(",", ":")))
PY

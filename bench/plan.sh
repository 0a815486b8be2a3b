#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier plan` against measured steps (docs/plan.md, "Accuracy"): GPT-2 d12 (or CONFIG), batch
# 4 x 64, on this machine, in each placement the acceptance asks for — parameters resident,
# parameters in host memory, parameters and optimizer state on NVMe, each activation
# checkpoint policy (none, selective, full) and full with the checkpoints offloaded to host
# memory and to NVMe, 2 ranks (mpirun) at ZeRO-3 and at stage 2. Every case runs the GPT-2
# trainer ROUNDS times, the cases interleaved (case 1, 2, ..., 1, 2, ...); its measured step is
# the median of the steps after the second of every run (the first two warm up: page faults,
# the first update's allocations). The prediction is `ztier plan` with the
# same ds_config and the profile measure_profile writes (`ztier bench profile`). Prints a table (predicted, measured,
# ratio) and one JSON line.
#   bench/plan.sh [BUILD_DIR]      env: CONFIG=d12 BATCH=4 SEQ=64 STEPS=5 ROUNDS=2
#     NVME=<folder for the swap files> (default: a folder under the work dir)
#     LOCK=<file>: each run holds `flock -x LOCK` (a shared machine: no one else's builds)
#     MEASURED=<file>: reuse the measured steps of an earlier run (its measured.tsv) and only plan
#     PROFILE=<file>: that profile's rates instead of measuring them with `ztier bench profile`;
#     CALIBRATE=0 keeps its gemm_flops_per_s and its exact-shape compute entries (a prediction
#     from measured compute alone), else the rate is calibrated on the resident case and the
#     entries are left out
#     KEEP=<dir>: keep the runs' output there; ONLY=<regex>: the cases whose row matches
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
ztier=$build/tools/ztier gpt2=$build/examples/gpt2/zt_gpt2
CONFIG=${CONFIG:-d12} BATCH=${BATCH:-4} SEQ=${SEQ:-64} STEPS=${STEPS:-6} ROUNDS=${ROUNDS:-2}
TEXT=${TEXT:-/usr/share/common-licenses/GPL-3}
work=${KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/plan-bench.XXXXXX")}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
nvme=${NVME:-$work/nvme}
mkdir -p "$nvme"
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
locked() { if [ -n "${LOCK:-}" ]; then flock -x "$LOCK" timeout 230 "$@"; else "$@"; fi; }
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])['$1'])"; }

# name ranks stage params-device optimizer-device policy activation-device prefetch-bucket
# (stage3_prefetch_bucket_size in elements; "-": the default, 5e7, about 7 of d12's blocks of
# 7,087,872; the window cases: none, one block, four blocks)
CASES="resident 1 3 none cpu none none -
params-host 1 3 cpu cpu none none -
params+optimizer-nvme 1 3 nvme nvme none none -
selective 1 3 cpu cpu selective none -
full 1 3 cpu cpu full none -
full+act-host 1 3 cpu cpu full cpu -
full+act-nvme 1 3 cpu cpu full nvme -
zero3-2ranks 2 3 cpu cpu none none -
zero2-2ranks 2 2 none cpu none none -
params-host-window0 1 3 cpu cpu none none 0
params-host-window1 1 3 cpu cpu none none 7087872
params-host-window4 1 3 cpu cpu none none 28351488
params+optimizer-nvme-window0 1 3 nvme nvme none none 0"

# ONLY=<regex>: only the cases whose row matches (e.g. ONLY=window for the prefetch-window rows)
[ -z "${ONLY:-}" ] || CASES=$(grep -E -- "$ONLY" <<<"$CASES")

ds_config() { # $1 name $2 stage $3 params $4 optimizer $5 activation device $6 prefetch bucket
  local f="$work/$1.json" bucket=
  [ "${6:--}" = - ] || bucket=", \"stage3_prefetch_bucket_size\": $6"
  printf '{"zero_optimization": {"stage": %d, "offload_param": {"device": "%s", "nvme_path": "%s"}, "offload_optimizer": {"device": "%s", "nvme_path": "%s"}%s}, "activation_checkpointing": {"device": "%s", "nvme_path": "%s"}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "ztier": {"hbm_capacity": "16G"}}\n' \
    "$2" "$3" "$nvme" "$4" "$nvme" "$bucket" "$5" "$nvme" > "$f"
  echo "$f"
}

# The machine profile (docs/plan.md, "The machine profile"): `ztier bench profile` on one
# rank (copies, new pages, NVMe at ztier's block size and queue depth, Adam at the cores, the
# model's compute at its shapes), then on 2 ranks under mpirun for the collectives, which are
# merged into the one-rank file (PROFILE=<file>: that profile instead).
measure_profile() { # -> $work/machine.json
  locked "$ztier" bench profile --backend host --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" \
    --nvme-path "$nvme" --out "$work/machine.json" > "$work/profile.log" 2>&1 < /dev/null ||
    { echo "bench/plan.sh: ztier bench profile failed:"; tail -5 "$work/profile.log"; exit 1; }
  locked "${mpirun[@]}" -np 2 "$ztier" bench profile --backend host --threads 1 --seconds 30 \
    --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --out "$work/machine-2.json" \
    > "$work/profile-2.log" 2>&1 < /dev/null ||
    { echo "bench/plan.sh: ztier bench profile on 2 ranks failed:"; tail -5 "$work/profile-2.log"; exit 1; }
  python3 - "$work/machine.json" "$work/machine-2.json" <<'PY'
import json, sys
one, two = (json.load(open(f)) for f in sys.argv[1:])
for k, v in two['rates'].items():
    if k.startswith(('allgather_', 'reduce_scatter_')):
        one['rates'][k] = v
json.dump(one, open(sys.argv[1], 'w'), indent=1)
PY
}

set_gemm() { # $1: FLOP/s -> rates.gemm_flops_per_s of $work/machine.json (its exact-shape
  # compute entries left out: the calibrated rate stands for the measured step instead)
  python3 - "$work/machine.json" "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p.pop("compute", None)
p["rates"]["gemm_flops_per_s"] = {"value": float(sys.argv[2]), "unit": "FLOP/s",
                                  "source": "from: bench/plan.sh's resident step (calibration)"}
json.dump(p, open(sys.argv[1], "w"), indent=1)
PY
}

# The compute rate calibrated on the resident case's measured step (the table's one row that is
# not a prediction). The step is compute / rate + what does not scale with it (Adam, copies): a
# secant on 1 / rate until the plan's resident step is the measured one.
calibrate() { # $1: resident step (s)
  local h0=1e-10 h1=2e-10 p0 p1
  set_gemm "$(python3 -c "print(1 / $h0)")"; p0=$(plan resident | field step_s)
  for _ in 1 2 3 4; do
    set_gemm "$(python3 -c "print(1 / $h1)")"; p1=$(plan resident | field step_s)
    read -r h0 p0 h1 < <(python3 -c "h0, p0, h1, p1, m = $h0, $p0, $h1, $p1, $1
print(h1, p1, h1 + (m - p1) * (h1 - h0) / (p1 - p0) if p1 != p0 else h1)")
  done
  set_gemm "$(python3 -c "print(1 / $h1)")"
}

plan() { # $1: case name -> plan's JSON line
  local name ranks stage p o pol act bucket
  read -r name ranks stage p o pol act bucket < <(grep "^$1 " <<<"$CASES")
  "$ztier" plan --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --world "$ranks" \
    --ds-config "$(ds_config "$name" "$stage" "$p" "$o" "$act" "$bucket")" --checkpoint-activations "$pol" \
    --profile "$work/machine.json" --json 2>/dev/null | tail -1
}

run_case() { # $1..: a CASES row, $9: round -> the run's output in $work/<name>-<round>.txt
  local name=$1 ranks=$2 stage=$3 p=$4 o=$5 pol=$6 act=$7 bucket=$8 r=$9 cmd=()
  [ "$ranks" -gt 1 ] && cmd=("${mpirun[@]}" -np "$ranks")
  locked "${cmd[@]}" "$gpt2" --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" \
    --text "$TEXT" --threads $(($(nproc) / ranks)) --checkpoint-activations "$pol" \
    --ds-config "$(ds_config "$name" "$stage" "$p" "$o" "$act" "$bucket")" > "$work/$name-$r.txt" 2>&1 < /dev/null ||
    { echo "bench/plan.sh: $name (round $r) failed:"; tail -5 "$work/$name-$r.txt"; exit 1; }
}

median_step() { # $1: case name -> median of every run's steps after the second (s)
  cat "$work/$1"-[0-9]*.txt | awk -F'|' '/^step +[0-9]+ \|/ { split($1, a, " "); if (a[2] > 2) { t = $3; sub(/ms/, "", t); print t / 1000 } }' |
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

if [ -n "${MEASURED:-}" ]; then
  cp "$MEASURED" "$work/measured.tsv"
else
  for r in $(seq "$ROUNDS"); do
    while read -r row; do run_case $row "$r"; done <<<"$CASES"
  done
  while read -r name _; do printf '%s\t%s\n' "$name" "$(median_step "$name")"; done <<<"$CASES" > "$work/measured.tsv"
fi
if [ -n "${PROFILE:-}" ]; then cp "$PROFILE" "$work/machine.json"; else measure_profile; fi
[ "${CALIBRATE:-1}" = 0 ] || calibrate "$(awk '$1 == "resident" { print $2 }' "$work/measured.tsv")"

echo "GPT-2 $CONFIG, batch $BATCH x $SEQ; $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $ROUNDS interleaved runs of $STEPS steps per case"
echo '| case | predicted | measured | ratio |'
echo '| --- | --- | --- | --- |'
json='{"config":"'$CONFIG'","batch":'$BATCH',"seq":'$SEQ',"cases":['
sep=
while read -r name _; do
  m=$(awk -v n="$name" '$1 == n { print $2 }' "$work/measured.tsv")
  p=$(plan "$name" | field step_s)
  ratio=$(python3 -c "print(f'{$p / $m:.2f}')")
  note=; [ "$name" = resident ] && note=' (calibration)'
  printf '| %s%s | %.3f s | %.3f s | %s |\n' "$name" "$note" "$p" "$m" "$ratio"
  json+="$sep{\"case\":\"$name\",\"predicted_s\":$p,\"measured_s\":$m,\"ratio\":$ratio}"
  sep=,
done <<<"$CASES"
echo "$json]}"

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
# same ds_config and the profile that make_profile writes. Prints a table (predicted, measured,
# ratio) and one JSON line.
#   bench/plan.sh [BUILD_DIR]      env: CONFIG=d12 BATCH=4 SEQ=64 STEPS=5 ROUNDS=2
#     NVME=<folder for the swap files> (default: a folder under the work dir)
#     LOCK=<file>: each run holds `flock -x LOCK` (a shared machine: no one else's builds)
#     MEASURED=<file>: reuse the measured steps of an earlier run (its measured.tsv) and only plan
#     PROFILE=<file>: that profile's rates instead of measuring them (e.g. `ztier bench profile`'s);
#     CALIBRATE=0 keeps its gemm_flops_per_s, else it is calibrated on the resident case
#     KEEP=<dir>: keep the runs' output there
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

# name ranks stage params-device optimizer-device policy activation-device
CASES="resident 1 3 none cpu none none
params-host 1 3 cpu cpu none none
params+optimizer-nvme 1 3 nvme nvme none none
selective 1 3 cpu cpu selective none
full 1 3 cpu cpu full none
full+act-host 1 3 cpu cpu full cpu
full+act-nvme 1 3 cpu cpu full nvme
zero3-2ranks 2 3 cpu cpu none none
zero2-2ranks 2 2 none cpu none none"

ds_config() { # $1 name $2 stage $3 params $4 optimizer $5 activation device -> the file
  local f="$work/$1.json"
  printf '{"zero_optimization": {"stage": %d, "offload_param": {"device": "%s", "nvme_path": "%s"}, "offload_optimizer": {"device": "%s", "nvme_path": "%s"}}, "activation_checkpointing": {"device": "%s", "nvme_path": "%s"}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "ztier": {"hbm_capacity": "16G"}}\n' \
    "$2" "$3" "$nvme" "$4" "$nvme" "$5" "$nvme" > "$f"
  echo "$f"
}

# The machine profile (docs/plan.md; the schema: profile-schema v1). Today from `ztier bench
# nvme|copy|adam` and the collectives of bench/plan_collectives.c (MPI, 2 ranks);
# `ztier bench profile` replaces this function (or PROFILE=<file>: that profile's rates).
measure_profile() { # -> $work/machine.json without a compute rate
  local nvme_j copy_j adam_j coll_j src
  nvme_j=$(locked "$ztier" bench nvme --path "$nvme" --size 256M --reps 3 --json 2>/dev/null | tail -1)
  copy_j=$(locked "$ztier" bench copy --size 64M --reps 3 --json 2>/dev/null | tail -1)
  adam_j=$(locked "$ztier" bench adam --params 8e6 --threads 2 --reps 3 --json 2>/dev/null | tail -1)
  # the collectives as comm/mpi.c calls them, on 2 ranks of this machine
  mpicc -O2 "$root/bench/plan_collectives.c" -o "$work/plan_collectives"
  coll_j=$(locked "${mpirun[@]}" -np 2 "$work/plan_collectives" $((256 << 20)) 9 < /dev/null | tail -1)
  src='"source": "measured: bench/plan_collectives.c, 256 MiB x9 on 2 ranks, median"'
  cat > "$work/machine.json" <<JSON
{"format": "ztier-profile", "version": 1,
 "machine": {"description": "$(uname -n): bench/plan.sh", "cpu": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')",
  "cores": $(nproc), "backend": "host", "comm": "single", "world": 1, "threads": 2, "nvme_path": "$nvme"},
 "rates": {
  "host_memcpy_bytes_per_s": {"value": $(field h2d_gbps <<<"$copy_j")e9, "unit": "B/s", "source": "measured: ztier bench copy --size 64M"},
  "nvme_read_bytes_per_s": {"value": $(field read_gbps <<<"$nvme_j")e9, "unit": "B/s", "source": "measured: ztier bench nvme --size 256M"},
  "nvme_write_bytes_per_s": {"value": $(field write_gbps <<<"$nvme_j")e9, "unit": "B/s", "source": "measured: ztier bench nvme --size 256M"},
  "adam_params_per_s": {"value": $(field params_per_s_back_to_back <<<"$adam_j"), "unit": "1/s", "source": "measured: ztier bench adam --params 8e6 --threads 2", "threads": 2},
  "allgather_bytes_per_s": {"value": $(field allgather_bytes_per_s <<<"$coll_j"), "unit": "B/s", $src, "world": 2},
  "reduce_scatter_bytes_per_s": {"value": $(field reduce_scatter_bytes_per_s <<<"$coll_j"), "unit": "B/s", $src, "world": 2},
  "allgather_latency_s": {"value": $(field allgather_latency_s <<<"$coll_j"), "unit": "s", $src, "world": 2},
  "reduce_scatter_latency_s": {"value": $(field reduce_scatter_latency_s <<<"$coll_j"), "unit": "s", $src, "world": 2}}}
JSON
}

set_gemm() { # $1: FLOP/s -> rates.gemm_flops_per_s of $work/machine.json
  python3 - "$work/machine.json" "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
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
  local name ranks stage p o pol act
  read -r name ranks stage p o pol act < <(grep "^$1 " <<<"$CASES")
  "$ztier" plan --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --world "$ranks" \
    --ds-config "$(ds_config "$name" "$stage" "$p" "$o" "$act")" --checkpoint-activations "$pol" \
    --profile "$work/machine.json" --json 2>/dev/null | tail -1
}

run_case() { # $1..: a CASES row, $8: round -> the run's output in $work/<name>-<round>.txt
  local name=$1 ranks=$2 stage=$3 p=$4 o=$5 pol=$6 act=$7 r=$8 cmd=()
  [ "$ranks" -gt 1 ] && cmd=("${mpirun[@]}" -np "$ranks")
  locked "${cmd[@]}" "$gpt2" --config "$CONFIG" --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" \
    --text "$TEXT" --threads $(($(nproc) / ranks)) --checkpoint-activations "$pol" \
    --ds-config "$(ds_config "$name" "$stage" "$p" "$o" "$act")" > "$work/$name-$r.txt" 2>&1 < /dev/null ||
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

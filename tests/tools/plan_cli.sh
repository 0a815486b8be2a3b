#!/usr/bin/env bash
# `ztier plan` against a measured step (docs/plan.md, "The CI check"): the GPT-2 trainer runs a
# small model (d4c512, batch 2 x 16) resident and with its parameters and optimizer state on
# NVMe, the runs interleaved; the profile takes its compute rate from the resident step (scaled
# so the plan's resident step equals it) and its NVMe, copy and Adam rates from `ztier bench
# nvme|copy|adam` in the same folder. Two checks of the NVMe case, which the NVMe traffic
# bounds (the plan before this model predicted 2.4 times the measured step here):
#   - the plan's NVMe bytes per step equal the trainer's counters (zt_stats) within 2%: exact
#     bookkeeping, not timing, so a noisy runner cannot move it;
#   - the predicted step is within TOL of the measured median (TOL: docs/plan.md).
# Without the model (no prediction, one blind to NVMe, or the old byte counts) it fails.
#   plan_cli.sh <ztier> <zt_gpt2>
set -euo pipefail
ztier=$1 gpt2=$2
TOL=${ZT_PLAN_TOL:-0.35} # documented in docs/plan.md (a shared 2-core runner is noisy)
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/plan-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 400) > "$work/text.txt"
M=(--config d4c512 --batch 2 --seq 16)
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])['$1'])"; }

cfg() { # $1: name, $2: offload_param device, $3: offload_optimizer device
  printf '{"zero_optimization": {"stage": 3, "offload_param": {"device": "%s", "nvme_path": "%s"}, "offload_optimizer": {"device": "%s", "nvme_path": "%s"}}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "ztier": {"hbm_capacity": "4G"}}' \
    "$2" "$work" "$3" "$work" > "$work/$1.json"
}
cfg resident none cpu
cfg nvme nvme nvme
# one measurement: the trainer's runs interleaved (resident, NVMe, resident, NVMe) with `ztier
# bench nvme` after each round, the faster of the two taken: this VM's disk has a slow mode in
# which ztier's reads run at 0.5 of fio's (1.3-1.5 GB/s against 2.5-2.7) from one bench to the
# next, which the trainer's steps do not show (their 0.62 GB of reads in 0.30 s need 2 GB/s). The bench runs at queue depth 64: the trainer's two swaps
# (parameters, optimizer state) keep up to 32 each in flight (82 reads sampled at once from
# /sys/block/vda/inflight), and where a disk is only fast past 32 (this VM's: 1.2-1.8 GB/s at
# 32, 2.8 at 64) a rate taken at 32 predicted 1.4-1.6 times the measured step
# The bench reads and writes 1 GiB: at 256 MiB its reads ran at 1.0-2.1 GB/s where the same
# bench at 1 GiB read 2.1-2.6 (ramp-up and drain weigh on a short run), and the test's ratios
# were 1.24-1.80 (passing on a second or third measurement) against 0.98-1.04 at 1 GiB
measure() {
  local r c n
  rm -f "$work/nvme-bench.txt"
  for r in 1 2; do
    for c in resident nvme; do
      "$gpt2" "${M[@]}" --steps 6 --threads 2 --text "$work/text.txt" --ds-config "$work/$c.json" \
        > "$work/$c-$r.txt" 2>&1 || { tail -5 "$work/$c-$r.txt"; exit 1; }
    done
    "$ztier" bench nvme --path "$work" --size 1G --queue-depth 64 --reps 3 --json 2>/dev/null | tail -1 >> "$work/nvme-bench.txt"
  done
  resident=$(median resident)
  offloaded=$(median nvme)
  # the last step's NVMe bytes: "nvme r 1.99G w 1.99G"
  io=$(grep -E '^step +6 \|' "$work/nvme-1.txt" | sed 's/.*nvme r \([0-9.]*[KMG]\) w \([0-9.]*[KMG]\).*/\1 \2/')
  read -r nvme_read nvme_write < <(python3 -c "import json,sys
v = [json.loads(l) for l in open(sys.argv[1])]
print(max(x['read_gbps'] for x in v), max(x['write_gbps'] for x in v))" "$work/nvme-bench.txt")
  copy=$("$ztier" bench copy --size 64M --reps 3 --json 2>/dev/null | tail -1)
  adam=$("$ztier" bench adam --params 2e6 --threads 2 --reps 3 --json 2>/dev/null | tail -1)
}
median() { # $1: case -> median step (s) of the steps after the second of each run
  cat "$work/$1"-[12].txt | awk -F'|' '/^step +[0-9]+ \|/ { split($1, a, " "); if (a[2] > 2) { t = $3; sub(/ms/, "", t); print t / 1000 } }' |
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
profile() { # $1: gemm FLOP/s
  cat > "$work/machine.json" <<JSON
{"format": "ztier-profile", "version": 1,
 "machine": {"description": "CI: plan_cli.sh", "backend": "host", "comm": "single", "world": 1, "cores": $(nproc), "threads": 2},
 "rates": {
  "host_memcpy_bytes_per_s": {"value": $(field h2d_gbps <<<"$copy")e9, "unit": "B/s", "source": "measured: ztier bench copy --size 64M"},
  "nvme_read_bytes_per_s": {"value": ${nvme_read}e9, "unit": "B/s", "source": "measured: ztier bench nvme --size 1G --queue-depth 64, the faster of 2"},
  "nvme_write_bytes_per_s": {"value": ${nvme_write}e9, "unit": "B/s", "source": "measured: ztier bench nvme --size 1G --queue-depth 64, the faster of 2"},
  "adam_params_per_s": {"value": $(field params_per_s_back_to_back <<<"$adam"), "unit": "1/s", "source": "measured: ztier bench adam --params 2e6"},
  "gemm_flops_per_s": {"value": $1, "unit": "FLOP/s", "source": "from: this test's resident step"}}}
JSON
}
plan() { "$ztier" plan "${M[@]}" --ds-config "$work/$1.json" --profile "$work/machine.json" --json 2>/dev/null | tail -1; }

calibrate() {
  # the compute rate: the step is compute / rate + what does not scale with it (Adam, copies):
  # a secant on 1 / rate until the plan's resident step is the measured one
  h0=1e-10 h1=2e-10
  profile "$(python3 -c "print(1 / $h0)")"; p0=$(plan resident | field step_s)
  for _ in 1 2 3 4; do
    profile "$(python3 -c "print(1 / $h1)")"; p1=$(plan resident | field step_s)
    read -r h0 p0 h1 < <(python3 -c "h0, p0, h1, p1, m = $h0, $p0, $h1, $p1, $resident
print(h1, p1, h1 + (m - p1) * (h1 - h0) / (p1 - p0) if p1 != p0 else h1)")
  done
  profile "$(python3 -c "print(1 / $h1)")"
}

measure
calibrate
# bad input: refused with a message naming the fix
for bad in "--checkpoint-activations bogus:use none, selective or full" \
           "--world 2:allgather_bytes_per_s"; do
  if msg=$("$ztier" plan "${M[@]}" ${bad%%:*} --profile "$work/machine.json" 2>&1); then
    echo "plan_cli: ztier plan accepted ${bad%%:*}"; exit 1
  fi
  grep -q "${bad#*:}" <<<"$msg" || { echo "plan_cli: ${bad%%:*}: $msg"; exit 1; }
done
check() { # 0: within TOL, 1: the timing off (measured again once), 2: the bytes off
  local out
  out=$(plan nvme)
  python3 - "$out" "$offloaded" "$resident" "$TOL" $io "$nvme_read" "$nvme_write" <<'PY'
import json, sys
out, m, r, tol = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
unit = {"K": 1e3, "M": 1e6, "G": 1e9}
rd, wr = (float(s[:-1]) * unit[s[-1]] for s in sys.argv[5:7])
p = out["step_s"]
ok, bytes_ok = True, True
for what, plan_b, run_b in (("read", out.get("nvme_read_bytes", 0), rd), ("written", out.get("nvme_write_bytes", 0), wr)):
    # the trainer prints 3 significant digits: 2% covers its rounding
    good = run_b > 0 and abs(plan_b / run_b - 1) <= 0.02
    print(f"NVMe bytes {what} per step: planned {plan_b / 1e9:.3f} GB, measured {run_b / 1e9:.3f} GB"
          f"{'' if good else '  <- off by more than 2%'}")
    bytes_ok &= good
ratio = p / m
print(f"NVMe step: predicted {p:.4f} s, measured {m:.4f} s, ratio {ratio:.3f} "
      f"(resident {r:.4f} s; tolerance +-{tol:.0%}); critical path: {out['critical_path'][:300]}")
ok = abs(ratio - 1) <= tol
print(f"profile: NVMe read {float(sys.argv[7]):.2f} GB/s, write {float(sys.argv[8]):.2f} GB/s")
sys.exit(2 if not bytes_ok else 0 if ok else 1)
PY
}
# A shared 2-core runner's disk and cores move between runs (one CI run's profile made the
# prediction 1.46 times the measured step): a timing miss measures everything again, up to
# three times in all; a model off by more than TOL misses every time, and wrong bytes fail at
# once.
rc=0; check || rc=$?
for _ in 2 3; do
  ((rc == 1)) || break
  echo "plan_cli: outside +-$TOL; measuring again"
  measure; calibrate; rc=0; check || rc=$?
done
exit $rc

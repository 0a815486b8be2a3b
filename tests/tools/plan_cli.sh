#!/usr/bin/env bash
# `ztier plan` against a measured step (docs/plan.md, "The CI check"): one `ztier bench gpt2`
# run measures the resident and the NVMe-offloaded step of the same model; the profile takes
# its compute rate from the resident step (scaled so the plan's compute equals it) and its
# NVMe, copy and Adam rates from `ztier bench nvme|copy|adam` in the same folder; the plan's
# prediction of the offloaded step (parameters and optimizer state on NVMe) must be within
# TOL of the measured one. Without the model (no prediction, or one blind to NVMe) it fails.
#   plan_cli.sh <ztier>
set -euo pipefail
ztier=$1
TOL=${ZT_PLAN_TOL:-0.5} # documented in docs/plan.md (a shared 2-core runner is noisy)
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/plan-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 400) > "$work/text.txt"
M=(--config tiny --batch 32 --seq 16)
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])['$1'])"; }

gpt2=$("$ztier" bench gpt2 "${M[@]}" --offload all --steps 3 --nvme-path "$work" \
         --text "$work/text.txt" --json 2>/dev/null | tail -1)
resident=$(field resident_step_s <<<"$gpt2")
offloaded=$(field offload_step_s <<<"$gpt2")
nvme=$("$ztier" bench nvme --path "$work" --size 64M --reps 3 --json 2>/dev/null | tail -1)
copy=$("$ztier" bench copy --size 64M --reps 3 --json 2>/dev/null | tail -1)
adam=$("$ztier" bench adam --params 2e6 --threads 2 --reps 3 --json 2>/dev/null | tail -1)

profile() { # $1: gemm FLOP/s
  cat > "$work/machine.json" <<JSON
{"format": "ztier-profile", "version": 1,
 "machine": {"description": "CI: plan_cli.sh", "backend": "host", "comm": "single", "world": 1, "threads": 2},
 "rates": {
  "host_memcpy_bytes_per_s": {"value": $(field h2d_gbps <<<"$copy")e9, "unit": "B/s", "source": "measured: ztier bench copy --size 64M"},
  "nvme_read_bytes_per_s": {"value": $(field read_gbps <<<"$nvme")e9, "unit": "B/s", "source": "measured: ztier bench nvme --size 64M"},
  "nvme_write_bytes_per_s": {"value": $(field write_gbps <<<"$nvme")e9, "unit": "B/s", "source": "measured: ztier bench nvme --size 64M"},
  "adam_params_per_s": {"value": $(field params_per_s_back_to_back <<<"$adam"), "unit": "1/s", "source": "measured: ztier bench adam --params 2e6"},
  "gemm_flops_per_s": {"value": $1, "unit": "FLOP/s", "source": "from: this test's resident step"}}}
JSON
}
cfg() { # $1: offload_param and offload_optimizer device
  printf '{"zero_optimization": {"stage": 3, "offload_param": {"device": "%s", "nvme_path": "%s"}, "offload_optimizer": {"device": "%s", "nvme_path": "%s"}}}' \
    "$1" "$work" "$([ "$1" = none ] && echo cpu || echo "$1")" "$work" > "$work/ds.json"
}
plan() { "$ztier" plan "${M[@]}" --ds-config "$work/ds.json" --profile "$work/machine.json" --json 2>/dev/null | tail -1; }

# the compute rate: the resident step predicted at a trial rate, scaled to the measured one
profile 1e10
cfg none
trial=$(plan | field step_s)
gemm=$(python3 -c "print(1e10 * $trial / $resident)")
profile "$gemm"
cfg nvme
out=$(plan)
predicted=$(field step_s <<<"$out")
# the offloaded plan must see the NVMe traffic (a model blind to it fails here)
python3 -c "import json,sys; b=json.loads(sys.argv[1])['busy_s']; sys.exit(0 if b['nvme'] > 0 and b['cpu_opt'] > 0 else 1)" "$out" ||
  { echo "plan_cli: the offloaded plan has no NVMe or optimizer time: $out"; exit 1; }
python3 - "$predicted" "$offloaded" "$resident" "$TOL" <<'PY'
import sys
p, m, r, tol = map(float, sys.argv[1:])
ratio = p / m
print(f"offloaded step: predicted {p:.4f} s, measured {m:.4f} s, ratio {ratio:.3f} "
      f"(resident {r:.4f} s; tolerance +-{tol:.0%})")
sys.exit(0 if abs(ratio - 1) <= tol else 1)
PY

#!/usr/bin/env bash
# `ztier plan` with the H200 profile (bench/profiles/h200-2026-11-26.json, written from the run
# docs/gpu.md records) on the runs docs/gpu.md measured: each case's predicted step and MFU must
# be the ones docs/plan.md's H200 table gives (within 0.5%: the table prints 3 digits), so a
# change to the step model that moves them is seen and the table is updated with it. Prints the
# table (predicted, measured, ratio, MFU).
#   plan_h200.sh <ztier> <source dir>
set -euo pipefail
ztier=$1 src=$2
profile=$src/bench/profiles/h200-2026-11-26.json
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/plan-h200.XXXXXX")
trap 'rm -rf "$work"' EXIT
ds() { # $1 name, $2 offload_param/optimizer device, $3 overlap_step, $4 hbm_capacity (or "")
  local hbm=; [ -n "$4" ] && hbm=", \"hbm_capacity\": \"$4\""
  printf '{"zero_optimization": {"stage": 3, "offload_param": {"device": "%s"}, "offload_optimizer": {"device": "%s"}}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "ztier": {"device_backend": "cuda", "overlap_step": "%s"%s}}\n' \
    "$2" "$2" "$3" "$hbm" > "$work/$1.json"
}
# name | measured step (docs/gpu.md) | model arguments (the run's command in docs/gpu.md)
ds d12-resident none auto ""
ds d12-offloaded cpu auto ""
ds d12-offloaded-overlap cpu on ""
ds d48-resident none auto ""
ds d48-offloaded-8G cpu on 8G
ds d40c3072-24G cpu on 24G
CASES="d12-resident|0.123|--config d12 --batch 16 --seq 1024
d12-offloaded|0.147|--config d12 --batch 16 --seq 1024
d12-offloaded-overlap|0.137|--config d12 --batch 16 --seq 1024
d48-resident|0.302|--config d48 --batch 4 --seq 1024
d48-offloaded-8G|0.614|--config d48 --batch 4 --seq 1024
d40c3072-24G|1.718|--config d40c3072 --vocab byte --batch 2 --seq 1024"
echo '| case | predicted | measured | ratio | MFU predicted |'
echo '| --- | --- | --- | --- | --- |'
while IFS='|' read -r name measured args; do
  # shellcheck disable=SC2086 # the model arguments are words
  "$ztier" plan $args --device-memory 141G --ds-config "$work/$name.json" --profile "$profile" \
    --json | tail -1 > "$work/$name.out"
  python3 - "$work/$name.out" "$name" "$measured" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = float(sys.argv[3])
print(f"| {sys.argv[2]} | {d['step_s']:.3f} s | {m:.3f} s | {d['step_s'] / m:.2f} | {d['mfu']:.3f} |")
PY
done <<<"$CASES" | tee "$work/table.md"
# the table in docs/plan.md: the same rows (the calibration row marked there)
python3 - "$work/table.md" "$src/docs/plan.md" <<'PY'
import sys
def rows(text):
    out = {}
    for line in text.splitlines():
        c = [x.strip() for x in line.strip().strip('|').split('|')]
        if len(c) == 5 and c[1].endswith(' s') and c[0] != 'case':
            out[c[0].split(' (')[0]] = (float(c[1][:-2]), float(c[4]))
    return out
got = rows(open(sys.argv[1]).read())
doc = open(sys.argv[2]).read()
doc = rows(doc[doc.index('## Accuracy on an H200'):])
assert set(got) == set(doc), ('docs/plan.md H200 table rows differ', sorted(got), sorted(doc))
for k, (p, u) in got.items():
    dp, du = doc[k]
    assert abs(p - dp) <= 0.005 * dp + 0.0005 and abs(u - du) <= 0.005 * du + 0.0005, \
        (k, 'predicted now', p, u, 'docs/plan.md', dp, du)
print('plan_h200: the predictions match docs/plan.md')
PY

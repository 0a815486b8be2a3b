#!/usr/bin/env bash
# `ztier plan --svg` and `--trace` (docs/plan.md, "The picture"): the predicted step of an
# offloaded tiny GPT-2 drawn as valid SVG with one lane per resource and, per lane, task
# rectangles whose durations add up to the busy time `--json` reports; the measured step of a
# real run's ZT_TRACE drawn on the same lanes over the trace's last step; both as two panels on
# one time scale; bad traces and paths fail naming the cause.
#   plan_svg.sh <ztier>
set -euo pipefail
ztier=$1
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/plan-svg.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "plan_svg: $*"; exit 1; }
cat > "$work/machine.json" <<'JSON'
{"format": "ztier-profile", "version": 1,
 "machine": {"description": "CI: plan_svg.sh, by hand", "backend": "host", "comm": "single", "world": 1, "threads": 2},
 "rates": {
  "host_memcpy_bytes_per_s": {"value": 5e9, "unit": "B/s", "source": "by hand"},
  "nvme_read_bytes_per_s": {"value": 1e9, "unit": "B/s", "source": "by hand"},
  "nvme_write_bytes_per_s": {"value": 1e9, "unit": "B/s", "source": "by hand"},
  "adam_params_per_s": {"value": 2e8, "unit": "1/s", "source": "by hand"},
  "gemm_flops_per_s": {"value": 2e10, "unit": "FLOP/s", "source": "by hand"}}}
JSON
printf '{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "nvme", "nvme_path": "%s"}}}' \
  "$work" > "$work/ds.json"
M=(--config tiny --batch 32 --seq 16 --ds-config "$work/ds.json")

# 1. the prediction: lanes, rectangles, boundaries, axis, against the model's own figures
"$ztier" plan "${M[@]}" --profile "$work/machine.json" --json --svg "$work/step.svg" > "$work/plan.json"
python3 - "$work/step.svg" "$work/plan.json" <<'PY'
import json, re, sys, xml.etree.ElementTree as ET
NS = '{http://www.w3.org/2000/svg}'
root = ET.parse(sys.argv[1]).getroot()          # valid XML or this raises
plan = json.loads(open(sys.argv[2]).read().splitlines()[-1])
lanes = [g.get('data-lane') for g in root.iter(NS + 'g') if g.get('class') == 'lane']
assert lanes == list(plan['busy_s']), f"lanes {lanes} are not the resources {list(plan['busy_s'])}"
busy, count = {l: 0.0 for l in lanes}, {l: 0 for l in lanes}
for r in root.iter(NS + 'rect'):
    if r.get('class') != 'task':
        continue
    m = re.search(r': ([0-9.e-]+) s \(([-0-9.e]+) \.\. ([-0-9.e]+) s\)$', r.find(NS + 'title').text)
    assert m, r.find(NS + 'title').text
    a, b = max(float(m[2]), 0), min(float(m[3]), plan['step_s'])
    busy[r.get('data-lane')] += max(b - a, 0)
    count[r.get('data-lane')] += 1
for l in lanes: # every task drawn once: per lane, the durations add up to the model's busy time
    assert abs(busy[l] - plan['busy_s'][l]) <= 1e-4 + 1e-3 * plan['busy_s'][l], (l, busy[l], plan['busy_s'][l])
assert count['compute'] > 0 and count['nvme'] > 0, count
# Adam drawn: on the host backend it shares the compute's cores (its lane is compute)
assert any('Adam' in (r.find(NS + 'title').text or '') for r in root.iter(NS + 'rect')
           if r.get('class') == 'task'), 'no Adam task drawn'
assert count['net'] == 0, count # one rank: no network tasks
assert sum(1 for e in root.iter(NS + 'line') if e.get('class') == 'step-boundary') == 2
assert sum(1 for e in root.iter(NS + 'line') if e.get('class') == 'tick') >= 3
stall = [r for r in root.iter(NS + 'rect') if r.get('class') == 'stall']
assert (len(stall) > 0) == (plan['stall_s'] > 1e-9), (len(stall), plan['stall_s'])
cap = ''.join(t.text or '' for t in root.iter(NS + 'text') if (t.text or '').startswith('predicted'))
assert f"step {plan['step_s']:.6f} s" in cap, cap
print(f"prediction: {sum(count.values())} tasks on {len(lanes)} lanes, busy times as --json's")
PY

# 2. a measured step: a real run's trace (NVMe offload), its last `step N` drawn
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 400) > "$work/text.txt"
ZT_TRACE="$work/run.json" "$ztier" bench gpt2 --config tiny --batch 32 --seq 16 --offload all --steps 2 \
  --nvme-path "$work" --text "$work/text.txt" > /dev/null 2>&1
"$ztier" plan --trace "$work/run.json" --svg "$work/meas.svg" --json > "$work/meas.json"
python3 - "$work/run.json" "$work/meas.svg" "$work/meas.json" <<'PY'
import json, re, sys, xml.etree.ElementTree as ET
NS = '{http://www.w3.org/2000/svg}'
trace, root = json.load(open(sys.argv[1])), ET.parse(sys.argv[2]).getroot()
meas = json.loads(open(sys.argv[3]).read())
ends = sorted((e['ts'] + e['dur']) * 1e-6 for e in trace
              if e.get('cat') == 'step' and re.fullmatch(r'step \d+( \(skipped\))?', e['name']))
assert abs(meas['step_s'] - (ends[-1] - ends[-2])) < 1e-5, (meas['step_s'], ends[-2:])
lanes = [g.get('data-lane') for g in root.iter(NS + 'g') if g.get('class') == 'lane']
assert lanes == ['compute', 'h2d', 'd2h', 'nvme', 'cpu_opt', 'net', 'nvme_write'], lanes
tasks = [r for r in root.iter(NS + 'rect') if r.get('class') == 'task']
assert len(tasks) == meas['tasks'], (len(tasks), meas['tasks'])
per = {l: sum(1 for r in tasks if r.get('data-lane') == l) for l in lanes}
# the trace's own events inside the step: the trainer's layer slices on compute, the NVMe
# transfers on nvme (async begin/end pairs by id)
begin, inside = {}, {'layer': 0, 'nvme': 0}
for e in trace:
    if e.get('ph') == 'b':
        begin[(e['cat'], e['id'])] = e['ts'] * 1e-6
    elif e.get('ph') == 'e' and e.get('cat') in inside:
        t0 = begin[(e['cat'], e['id'])]
        inside[e['cat']] += t0 < ends[-1] and e['ts'] * 1e-6 > ends[-2]
assert per['compute'] == inside['layer'] and per['nvme'] + per['nvme_write'] == inside['nvme'], (per, inside)
# the offloaded step trains on every layer and reads its NVMe-homed state
assert per['compute'] > 0 and per['nvme'] > 0 and per['cpu_opt'] > 0, per
# the copies by their direction: parameters in (h2d), gradients out (d2h)
assert per['h2d'] > 0 and per['d2h'] > 0, per
print(f"measurement: {len(tasks)} events of the last step, per lane {per}")
PY

# 3. both: two panels on one time scale (the lanes' widths in the ratio of the steps)
"$ztier" plan "${M[@]}" --profile "$work/machine.json" --json --trace "$work/run.json" \
  --svg "$work/both.svg" > "$work/both.json"
python3 - "$work/both.svg" "$work/plan.json" "$work/meas.json" <<'PY'
import json, sys, xml.etree.ElementTree as ET
NS = '{http://www.w3.org/2000/svg}'
root = ET.parse(sys.argv[1]).getroot()
pred = json.loads(open(sys.argv[2]).read().splitlines()[-1])['step_s']
meas = json.loads(open(sys.argv[3]).read())['step_s']
panels = [g for g in root.iter(NS + 'g') if g.get('class') == 'panel']
assert len(panels) == 2, len(panels)
w = [float(next(g for g in p.iter(NS + 'g') if g.get('class') == 'lane').find(NS + 'rect').get('width'))
     for p in panels]
assert abs(w[0] / w[1] - pred / meas) < 0.01 * pred / meas, (w, pred, meas)
print(f"both: panel widths {w[0]:.1f} and {w[1]:.1f} px for {pred:.4f} and {meas:.4f} s")
PY

# 4. bad input names its cause
expect_err() { # $1: what stderr must say; the rest: the command
  local want=$1; shift
  if "$@" > /dev/null 2> "$work/err"; then fail "'$*' succeeded"; fi
  grep -q "$want" "$work/err" || fail "'$*' said: $(cat "$work/err"), not '$want'"
}
expect_err "cannot read the trace" "$ztier" plan --trace "$work/missing.json"
echo '{"not": "a trace"}' > "$work/bad.json"
expect_err "is not a ZT_TRACE file" "$ztier" plan --trace "$work/bad.json"
echo '[]' > "$work/empty.json"
expect_err "has no events" "$ztier" plan --trace "$work/empty.json"
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); json.dump([e for e in t if e.get('cat')!='step'], open(sys.argv[2],'w'))" \
  "$work/run.json" "$work/nostep.json"
expect_err "has no step" "$ztier" plan --trace "$work/nostep.json"
expect_err "cannot write the SVG" "$ztier" plan --trace "$work/run.json" --svg "$work/no/such/dir/x.svg"
# a trace cut short (the run died) still reads, as Perfetto reads it
head -c $(( $(wc -c < "$work/run.json") - 200 )) "$work/run.json" > "$work/cut.json"
"$ztier" plan --trace "$work/cut.json" --json > /dev/null || fail "a trace cut short did not read"
echo "plan_svg: ok"

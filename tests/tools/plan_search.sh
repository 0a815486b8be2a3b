#!/usr/bin/env bash
# `ztier plan --search` (docs/plan.md, "Searching for the fastest configuration"), on hand-written
# profiles where the answer is clear-cut (each dimension: the activation policy, the optimizer
# split, the prefetch window, also below): a device budget too small for the optimizer state
# (as `ztier estimate` judges it) puts it in host memory; a very slow NVMe keeps the state out of
# NVMe although it fits there, because those candidates are predicted slower; each answer's
# printed ds_config is accepted by `ztier estimate --ds-config` within the same budget and
# `ztier plan` on it predicts the tokens/s the search printed; bad inputs fail naming the cause.
#   plan_search.sh <ztier>
set -euo pipefail
ztier=$1
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/plan-search.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "plan_search: $*"; exit 1; }
mkdir -p "$work/nvme"
profile() { # $1: file, $2: NVMe bytes/s
  cat > "$1" <<JSON
{"format": "ztier-profile", "version": 1,
 "machine": {"description": "CI: plan_search.sh, by hand", "backend": "host", "comm": "single", "world": 1, "threads": 2},
 "rates": {
  "host_memcpy_bytes_per_s": {"value": 5e9, "unit": "B/s", "source": "by hand"},
  "nvme_read_bytes_per_s": {"value": $2, "unit": "B/s", "source": "by hand"},
  "nvme_write_bytes_per_s": {"value": $2, "unit": "B/s", "source": "by hand"},
  "adam_params_per_s": {"value": 2e8, "unit": "1/s", "source": "by hand"},
  "gemm_flops_per_s": {"value": 2e10, "unit": "FLOP/s", "source": "by hand"}}}
JSON
}
profile "$work/fast.json" 2e9
profile "$work/slow.json" 1e6
M=(--config tiny --batch 32 --seq 16)

# 1. a device budget of 30 MiB: the optimizer state in device memory does not fit
"$ztier" plan "${M[@]}" --profile "$work/fast.json" --search --device-memory 30M \
  --nvme-path "$work/nvme" --json > "$work/small.json"
# 2. stage 3, a very slow NVMe, plenty of host memory
"$ztier" plan "${M[@]}" --stage 3 --profile "$work/slow.json" --search --host-memory 64G \
  --nvme-path "$work/nvme" --json > "$work/slow-out.json"
python3 - "$work/small.json" "$work/slow-out.json" <<'PY'
import json, sys
small, slow = (json.load(open(p)) for p in sys.argv[1:])
for d in (small, slow):
    assert d['evaluated'] == len(d['candidates']) > 10, d['evaluated']
    assert d['fit'] == sum(c['fits'] for c in d['candidates']) > 1
    best = d['best']
    fitting = [c for c in d['candidates'] if c['fits']]
    assert best['tokens_per_s'] >= (1 - 1e-9) * max(c['tokens_per_s'] for c in fitting), best
    assert d['runner_up'] and (d['runner_up']['params'], d['runner_up']['optimizer'], d['runner_up']['stage']) != \
        (best['params'], best['optimizer'], best['stage'])
b = small['best']
assert b['optimizer'] != 'none' and b['device_bytes'] <= 30 << 20, b
assert all(not c['fits'] for c in small['candidates'] if c['optimizer'] == 'none'), 'device optimizer fit in 30 MiB'
b = slow['best']
assert b['stage'] == 3 and 'nvme' not in (b['params'], b['optimizer']), b
on_nvme = [c for c in slow['candidates'] if c['fits'] and 'nvme' in (c['params'], c['optimizer'])]
assert on_nvme, 'no NVMe placement fit: the answer would be forced, not chosen'
# predicted slower, not only ranked lower: the NVMe candidates with offloaded parameters are
# far slower (the state's reads and writes bound the step); any as fast as the best (the
# step model does not yet put the update of device-resident parameters on the next step's
# path) loses only on the tie-break, which prefers no NVMe
assert any(c['tokens_per_s'] < 0.9 * b['tokens_per_s'] for c in on_nvme), 'NVMe not predicted slower'
assert all(c['tokens_per_s'] <= b['tokens_per_s'] * (1 + 1e-9) for c in on_nvme)
for name, d in (('small', small), ('slow', slow)):
    json.dump(d['best']['ds_config'], open(sys.argv[1].rsplit('/', 1)[0] + f'/best-{name}.json', 'w'))
    open(sys.argv[1].rsplit('/', 1)[0] + f'/best-{name}.args', 'w').write(
        f"{d['best']['micro_batch']} {d['best']['tokens_per_s']}\n")
print(f"small device: {small['best']['optimizer']} optimizer, micro-batch {small['best']['micro_batch']}; "
      f"slow NVMe: {slow['best']['params']}/{slow['best']['optimizer']}, {len(on_nvme)} NVMe candidates fit, none faster")
PY
# each answer's ds_config: accepted by estimate within the budget, predicted as the search said
for name in small slow; do
  read -r micro tps < "$work/best-$name.args"
  dm=$([ $name = small ] && echo 30M || echo 8G)
  "$ztier" estimate "${M[0]}" "${M[1]}" --batch "$micro" --seq 16 --ds-config "$work/best-$name.json" \
    --device-memory $dm > "$work/est.txt" 2>&1 || { cat "$work/est.txt"; fail "estimate rejects the $name answer"; }
  prof=$([ $name = small ] && echo fast || echo slow)
  got=$("$ztier" plan "${M[0]}" "${M[1]}" --batch "$micro" --seq 16 --ds-config "$work/best-$name.json" \
        --profile "$work/$prof.json" --json | tail -1 |
        python3 -c "import json,sys; print(json.load(sys.stdin)['tokens_per_s'])")
  python3 -c "import sys; a,b=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b) <= 1e-6*b else 1)" "$got" "$tps" ||
    fail "$name: plan on the answer predicts $got tokens/s, the search said $tps"
done
# the text form prints the section and the runner-up with its binding resource
"$ztier" plan "${M[@]}" --profile "$work/fast.json" --search --device-memory 30M --nvme-path "$work/nvme" > "$work/text.txt"
grep -q '^evaluated [0-9]* configurations' "$work/text.txt" || fail "no count: $(cat "$work/text.txt")"
grep -q '^ds_config (with the trainer' "$work/text.txt" && grep -q '^runner-up: .*' "$work/text.txt" &&
  grep -q 'bound by \(compute\|h2d\|d2h\|nvme\|cpu_opt\|net\)' "$work/text.txt" || fail "text: $(cat "$work/text.txt")"

# the dimensions beyond placement, stage and micro-batch (tiny at --vocab 256: layers of a size,
# so an optimizer split has layers to put on the device), on a profile where the CPU's Adam is
# slow beside the device's and element-wise passes are counted (selective differs from none)
python3 - "$work/fast.json" "$work/split.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["rates"]["adam_params_per_s"]["value"] = 1e6
p["rates"]["adam_device_params_per_s"] = {"value": 1e9, "unit": "1/s", "source": "by hand"}
p["rates"]["elementwise_bytes_per_s"] = {"value": 1e9, "unit": "B/s", "source": "by hand"}
json.dump(p, open(sys.argv[2], "w"))
PY
V=(--config tiny --vocab 256 --batch 8 --seq 16)
search() { "$ztier" plan "${V[@]}" --stage 3 --profile "$work/split.json" --search --nvme-path "$work/nvme" --json "$@" | tail -1; }
plan_on() { # $1: ds_config file, $2: policy -> plan's step (s), run on its own
  "$ztier" plan "${V[0]}" "${V[1]}" "${V[2]}" "${V[3]}" --batch "$3" --seq 16 --ds-config "$1" \
    --checkpoint-activations "$2" --profile "$work/split.json" --json | tail -1 |
    python3 -c "import json,sys; print(json.load(sys.stdin)['step_s'])"
}
search > "$work/free.json"
# budgets from the unconstrained search's bytes: one between a split's device bytes and the whole
# device optimizer's (no device optimizer, a split fits), one below every split (none fits)
read -r b_split b_nosplit < <(python3 - "$work/free.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = [c for c in d["candidates"] if c["fits"]]  # any micro-batch, policy, placement
devopt = min(x["device_bytes"] for x in c if x["optimizer"] == "none")
split = max(x["device_bytes"] for x in c if x["varies"] == "optimizer_ratio" and x["device_bytes"] < devopt)
whole = min(x["device_bytes"] for x in c if x["optimizer"] == "cpu" and x["varies"] is None)
lowest = min(x["device_bytes"] for x in c if x["varies"] == "optimizer_ratio")
assert whole < lowest and split < devopt, (whole, lowest, split, devopt)
print((split + devopt) // 2, (whole + lowest) // 2)
PY
)
search --device-memory "$b_split" > "$work/split-out.json"
search --device-memory "$b_nosplit" > "$work/nosplit-out.json"
python3 - "$work" "$b_split" "$b_nosplit" <<'PY'
import json, sys
w, b_split, b_nosplit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sp, ns = (json.load(open(f"{w}/{n}.json")) for n in ("split-out", "nosplit-out"))
for d, b in ((sp, b_split), (ns, b_nosplit)):
    assert all(c["device_bytes"] <= b for c in d["candidates"] if c["fits"]), "a fit over the budget"
    assert d["evaluated"] == len(d["candidates"]) and d["predicted"] == d["fit"]
# the split: searched (the model sees it), and the best puts part of the optimizer on the device
r = sp["dimensions"]["optimizer_ratio"]
assert r["searched"] and r["differs"] > 0 and r["step_vs_base_min"] < 0.9, r
b = sp["best"]
assert b["optimizer"] == "cpu" and b["optimizer_ratio"] is not None and b["optimizer_ratio"] < 1, b
assert not any(c["fits"] and c["optimizer"] == "none" for c in sp["candidates"]), "device optimizer fit"
json.dump(b["ds_config"], open(f"{w}/split-best.json", "w"))
whole = json.loads(json.dumps(b["ds_config"]))
del whole["zero_optimization"]["offload_optimizer"]["ratio"]
json.dump(whole, open(f"{w}/split-whole.json", "w"))
open(f"{w}/split-best.args", "w").write(f"{b['checkpoint_activations']} {b['micro_batch']} {b['step_s']}\n")
# a budget below every split excludes them all: listed, none fits, none chosen
r = ns["dimensions"]["optimizer_ratio"]
variants = [c for c in ns["candidates"] if c["varies"] == "optimizer_ratio"]
assert variants and r["tried"] == len(variants) and r["fit"] == 0, r
assert all(not c["fits"] and c["why"] == "device memory too small" for c in variants)
assert ns["best"]["optimizer_ratio"] is None, ns["best"]
# the policies: every one that fits is a candidate of its own; selective is told from none here
pol = sp["dimensions"]["activation_policy"]
assert pol["selective"]["placements"] > 0 and pol["selective"]["same"] < pol["selective"]["placements"], pol
assert pol["full"]["step_vs_none_min"] > 1, pol
grp = [c for c in sp["candidates"] if c["fits"] and c["varies"] is None and
       (c["stage"], c["params"], c["optimizer"], c["micro_batch"]) == (b["stage"], b["params"], b["optimizer"], b["micro_batch"])]
assert {c["activation_policy"] for c in grp} >= {"none", "selective", "full", "full+host", "full+nvme"}, grp
with open(f"{w}/policies.txt", "w") as f:
    for i, c in enumerate(grp):
        json.dump(c["ds_config"], open(f"{w}/pol-{i}.json", "w"))
        f.write(f"{i} {c['checkpoint_activations']} {c['micro_batch']} {c['step_s']} {c['activation_policy']}\n")
# the prefetch window: varied, and ranked only if some variant is predicted otherwise
pw = sp["dimensions"]["prefetch_window"]
pv = [c for c in sp["candidates"] if c["varies"] == "prefetch_window" and c["fits"]]
assert pw["tried"] > 0 and pv and pw["searched"] == (pw["differs"] > 0)
assert all(c["ranked"] == pw["searched"] for c in pv), "prefetch variants ranked against the count"
c = pv[0]
par = [p for p in sp["candidates"] if p["varies"] is None and p["fits"] and all(p[k] == c[k] for k in
       ("stage", "params", "optimizer", "micro_batch", "activation_policy"))][0]
json.dump(c["ds_config"], open(f"{w}/pw-var.json", "w"))
json.dump(par["ds_config"], open(f"{w}/pw-base.json", "w"))
open(f"{w}/pw.args", "w").write(f"{c['checkpoint_activations']} {c['micro_batch']} {c['step_s']} {par['step_s']} {int(pw['searched'])}\n")
PY
same() { python3 -c "import sys; a,b=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b) <= 1e-6*b else 1)" "$1" "$2"; }
# each checked against `ztier plan` run on its own ds_config (the independent reference)
read -r pol micro step < "$work/split-best.args"
got=$(plan_on "$work/split-best.json" "$pol" "$micro")
same "$got" "$step" || fail "split: plan on the answer predicts $got s, the search said $step"
whole=$(plan_on "$work/split-whole.json" "$pol" "$micro")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) * 1.1 else 1)" "$whole" "$step" ||
  fail "split: plan predicts ratio 1 at $whole s, not slower than the split's $step s"
fastest=
while read -r i pol micro step name; do
  got=$(plan_on "$work/pol-$i.json" "$pol" "$micro")
  same "$got" "$step" || fail "policy $name: plan predicts $got s, the search said $step"
  [ -z "$fastest" ] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$got" "$fastest" ||
    fail "policy $name is predicted faster ($got s) than the best's policy ($fastest s)"
  [ -n "$fastest" ] || fastest=$got  # the group's first candidate: the best's own (sorted first)
done < "$work/policies.txt"
read -r pol micro vstep bstep searched < "$work/pw.args"
v=$(plan_on "$work/pw-var.json" "$pol" "$micro") b=$(plan_on "$work/pw-base.json" "$pol" "$micro")
same "$v" "$vstep" && same "$b" "$bstep" || fail "prefetch: plan predicts $v / $b s, the search said $vstep / $bstep"
if same "$v" "$b"; then [ "$searched" = 0 ] || fail "prefetch searched though plan predicts $v s for both"
else [ "$searched" = 1 ] || fail "prefetch not searched though plan predicts $v s against $b s"; fi
# the prefetch window where layers move (tiny's layers are persistent by default: threshold 0)
# and copies take time (200 MB/s): searched, its variants ranked, no prefetch (bucket 0)
# predicted slower than its base, as `ztier plan` predicts each on its own
python3 - "$work/fast.json" "$work/slowcopy.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["rates"]["host_memcpy_bytes_per_s"]["value"] = 2e8
json.dump(p, open(sys.argv[2], "w"))
PY
echo '{"zero_optimization": {"stage3_param_persistence_threshold": 0}}' > "$work/moving.json"
"$ztier" plan "${V[@]}" --stage 3 --ds-config "$work/moving.json" --profile "$work/slowcopy.json" \
  --search --nvme-path "$work/nvme" --json | tail -1 > "$work/window-out.json"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
d = json.load(open(f"{w}/window-out.json"))
pw = d["dimensions"]["prefetch_window"]
assert pw["searched"] and pw["differs"] > 0 and pw["step_vs_base_max"] > 1, pw
pv = [c for c in d["candidates"] if c["varies"] == "prefetch_window" and c["fits"]]
assert pv and all(c["ranked"] for c in pv), "window variants not ranked"
c = [c for c in pv if c["prefetch_window"] == 0][0]
par = [p for p in d["candidates"] if p["varies"] is None and p["fits"] and all(p[k] == c[k] for k in
       ("stage", "params", "optimizer", "micro_batch", "activation_policy"))][0]
assert c["step_s"] > par["step_s"], (c["step_s"], par["step_s"])
json.dump(c["ds_config"], open(f"{w}/w0.json", "w"))
json.dump(par["ds_config"], open(f"{w}/wbase.json", "w"))
open(f"{w}/w0.args", "w").write(f"{c['checkpoint_activations']} {c['micro_batch']} {c['step_s']} {par['step_s']}\n")
PY
read -r pol micro vstep bstep < "$work/w0.args"
for f in w0 wbase; do
  "$ztier" plan "${V[0]}" "${V[1]}" "${V[2]}" "${V[3]}" --batch "$micro" --seq 16 --ds-config "$work/$f.json" \
    --checkpoint-activations "$pol" --profile "$work/slowcopy.json" --json | tail -1 |
    python3 -c "import json,sys; print(json.load(sys.stdin)['step_s'])" > "$work/$f.step"
done
same "$(cat "$work/w0.step")" "$vstep" && same "$(cat "$work/wbase.step")" "$bstep" ||
  fail "window: plan predicts $(cat "$work/w0.step") / $(cat "$work/wbase.step") s, the search said $vstep / $bstep"
# a policy's budget: between full's and none's device total at the largest micro-batch
# (`ztier estimate`'s activation table for the placement), none is excluded there, full is not
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}}}' > "$work/pc.json"
b_pol=$("$ztier" estimate "${V[@]}" --ds-config "$work/pc.json" --json | tail -1 | python3 -c "
import json,sys; a = json.load(sys.stdin)['activations']['policies']
n, f = a['none']['device_total'], a['full']['device_total']; assert f < n, (f, n); print((n + f) // 2)")
search --device-memory "$b_pol" > "$work/pol-out.json"
python3 - "$work/pol-out.json" "$b_pol" <<'PY'
import json, sys
d, b = json.load(open(sys.argv[1])), int(sys.argv[2])
g = {c["activation_policy"]: c for c in d["candidates"] if c["varies"] is None and c["micro_batch"] == 8
     and (c["params"], c["optimizer"]) == ("cpu", "cpu")}
assert not g["none"]["fits"] and g["none"]["why"] == "device memory too small" and g["none"]["device_bytes"] > b, g["none"]
assert g["full"]["fits"] and g["full"]["device_bytes"] <= b, g["full"]
PY
# no NVMe space: no placement or policy on NVMe fits
search --nvme-memory 1K > "$work/nonvme.json"
python3 -c "
import json,sys; d = json.load(open(sys.argv[1]))
bad = [c for c in d['candidates'] if c['fits'] and ('nvme' in (c['params'], c['optimizer']) or c['activation_policy'] == 'full+nvme')]
assert not bad and any(c['activation_policy'] == 'full+nvme' for c in d['candidates']), bad[:1]" "$work/nonvme.json" ||
  fail "an NVMe placement or policy fit in 1 KiB of NVMe"
# without an element-wise rate the text says selective is predicted as none
grep -q 'selective: predicted as none' "$work/text.txt" || fail "text: selective not said to be predicted as none"
grep -q '^prefetch window (stage3_prefetch_bucket_size): .*tried' "$work/text.txt" &&
  grep -q '^optimizer split (offload_optimizer.ratio): .*tried' "$work/text.txt" || fail "text: no knob lines"
grep -q '[0-9]* fit the budgets, [0-9]* predicted' "$work/text.txt" || fail "text: no predicted count"

# bad input names its cause
expect_err() {
  local want=$1; shift
  if "$@" > /dev/null 2> "$work/err"; then fail "'$*' succeeded"; fi
  grep -q "$want" "$work/err" || fail "'$*' said: $(cat "$work/err"), not '$want'"
}
expect_err "needs a GPT-2 --config with --batch" "$ztier" plan --config tiny --profile "$work/fast.json" --search
expect_err "search draws nothing" "$ztier" plan "${M[@]}" --profile "$work/fast.json" --search --svg "$work/x.svg"
expect_err "'lots' is not a size" "$ztier" plan "${M[@]}" --profile "$work/fast.json" --search --host-memory lots
expect_err "none of the [0-9]* configurations fits" "$ztier" plan "${M[@]}" --profile "$work/fast.json" --search --device-memory 1M
expect_err "cannot read the profile" "$ztier" plan "${M[@]}" --profile "$work/nvme" --search
python3 -c "import json,sys; p=json.load(open(sys.argv[1])); del p['rates']['gemm_flops_per_s']; json.dump(p, open(sys.argv[2], 'w'))" \
  "$work/fast.json" "$work/nogemm.json"
expect_err "no positive rates.gemm_flops_per_s" "$ztier" plan "${M[@]}" --profile "$work/nogemm.json" --search
echo "plan_search: ok"

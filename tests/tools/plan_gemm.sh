#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier plan`'s use of the profile's GEMM entries (docs/plan.md, "How it works", compute), on
# hand-written profiles whose effect is computed here from the entries:
#  1. entries at exactly the step's m (rows x seq) for a GPT-2 block's four matmuls and the
#     head move d12's resident step by 12 x (sum of the block's entries - the rate's time) plus
#     (the head's entries - the rate's time), forward and backward; matmul_source says "gemm";
#  2. entries at m 64 and 512 only: the step at m 128 and 256 takes each GEMM's FLOP rate
#     linearly interpolated in log m (the reference computed here), at m 1024 the rate of m 512
#     (clamped), at m 64 the entry itself; the JSON's per-use seconds and from_m agree, and the
#     text names the source;
#  3. entries for the head alone leave the blocks at gemm_flops_per_s (source "rate", the
#     blocks' time as before); an exact layer entry still wins (source "layer");
#  4. a GEMM entry without a pass fails naming it;
#  5. embed, ln_f and loss entries at batch 4 only (and a loss entry at 16): at batch 2 each is
#     the batch-4 entry scaled per token (half), the step moves by those halves (and ln_f's
#     rate time goes), layer_source and the text say "scaled per token" from 4 x 64; at batch 4
#     the entries themselves; a profile without them has no layer_source entries and no line.
#   plan_gemm.sh <ztier>
set -euo pipefail
ztier=$1
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/plan-gemm.XXXXXX")
[ -n "${KEEP_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
fail() { echo "plan_gemm: $*"; exit 1; }

# profiles: rates alone, and the same with GEMM entries (seconds from a formula per shape)
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
C, Vp = 768, 50304
base = {"format": "ztier-profile", "version": 1,
        "machine": {"description": "CI: plan_gemm.sh, by hand", "backend": "host", "cores": 2, "threads": 2},
        "rates": {k: {"value": v, "unit": "-", "source": "hand: CI"} for k, v in (
            ("host_memcpy_bytes_per_s", 1e15), ("nvme_read_bytes_per_s", 1e9),
            ("nvme_write_bytes_per_s", 1e9), ("adam_params_per_s", 1e9),
            ("attention_flops_per_s", 1e10), ("gemm_flops_per_s", 1e11))},
        "compute": []}
json.dump(base, open(f"{w}/rates.json", "w"))
block = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)]        # (k, n)
def rate(i, m, p):   # a distinct FLOP rate per shape, m and pass (FLOP/s)
    return (3e10 + 1e10 * i) * (1 + m / 256) * (0.8 if p else 1.0)
def entry(k, n, m, p, s):
    return {"op": "gemm", "pass": "backward" if p else "forward", "m": m, "n": n, "k": k,
            "seconds": s, "flops": (4 if p else 2) * m * n * k, "source": "hand: CI"}
allshapes = block + [(C, Vp)]
def entries(ms, shapes):
    out = []
    for k, n in shapes:
        i = allshapes.index((k, n))    # the rate's shape index: the head is 4
        for m in ms:
            for p in (0, 1):
                out.append(entry(k, n, m, p, (4 if p else 2) * m * n * k / rate(i, m, p)))
    return out
def write(name, compute):
    prof = json.loads(json.dumps(base)); prof["compute"] = compute
    json.dump(prof, open(f"{w}/{name}.json", "w"))
write("exact", entries([256], allshapes))
write("interp", entries([64, 512], allshapes))
write("head", entries([256], [(C, Vp)]))
layer = {"op": "layer_forward", "layer": "block", "B": 4, "T": 64, "C": C, "NH": 12,
         "seconds": 0.05, "source": "hand: CI"}
write("layer", entries([256], allshapes) + [layer])
bad = entries([256], [(C, Vp)]); del bad[0]["pass"]
write("bad", bad)
def lay(op, layer, B, s):
    return {"op": op, "layer": layer, "B": B, "T": 64, "C": C, "NH": 12, "seconds": s, "source": "hand: CI"}
write("lossent", [lay("layer_forward", "embed", 4, 0.004), lay("layer_backward", "embed", 4, 0.006),
                  lay("layer_forward", "ln_f", 4, 0.002), lay("layer_backward", "ln_f", 4, 0.003),
                  lay("layer_forward", "loss", 4, 0.08), lay("layer_forward", "loss", 16, 0.5)])
PY
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "none"}, "offload_optimizer": {"device": "cpu"}}}' > "$work/resident.json"
for b in 1 2 4 16; do
  for p in rates exact interp head layer lossent; do
    "$ztier" plan --config d12 --batch $b --seq 64 --ds-config "$work/resident.json" \
      --profile "$work/$p.json" --json | tail -1 > "$work/$p-$b.out"
  done
done
"$ztier" plan --config d12 --batch 2 --seq 64 --ds-config "$work/resident.json" \
  --profile "$work/interp.json" > "$work/interp.txt"
grep -q "^matmuls from: block forward: GEMM entries at m 128 (interpolated between m 64 and 512)" \
  "$work/interp.txt" || fail "the text names no source: $(cat "$work/interp.txt")"
grep -q "^matmuls from: block forward: gemm_flops_per_s" <("$ztier" plan --config d12 --batch 4 \
  --seq 64 --ds-config "$work/resident.json" --profile "$work/rates.json") ||
  fail "a profile without GEMM entries does not say gemm_flops_per_s"
if "$ztier" plan --config d12 --batch 4 --seq 64 --profile "$work/bad.json" > "$work/bad.out" 2>&1; then
  fail "a GEMM entry without a pass was accepted"
fi
grep -q 'compute\[0\] (op gemm) needs "pass"' "$work/bad.out" || fail "bad entry: $(cat "$work/bad.out")"
plan2() { "$ztier" plan --config d12 --batch 2 --seq 64 --ds-config "$work/resident.json" --profile "$@"; }
grep -q "^layers from: .*loss forward: the entry at 4 x 64 scaled per token (x0.5: 0.04 s)" \
  <(plan2 "$work/lossent.json") || fail "the text does not say the loss was scaled: $(plan2 "$work/lossent.json")"
if plan2 "$work/rates.json" | grep -q "^layers from:"; then fail "a profile without layer entries names some"; fi

python3 - "$work" <<'PY'
import json, math, sys
w = sys.argv[1]
C, Vp, T, gemm, att = 768, 50304, 64, 1e11, 1e10
block = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)]
def rate(i, m, p):
    return (3e10 + 1e10 * i) * (1 + m / 256) * (0.8 if p else 1.0)
def out(p, b): return json.loads(open(f"{w}/{p}-{b}.out").read())
def close(got, want, what):
    assert abs(got - want) <= 1e-6 * abs(want) + 1e-9, (what, got, want)
P = 12 * C * C + 13 * C                   # a block's parameters (the rate's FLOPs count them all)
def rate_time(b):                         # the rates' matmul seconds: block fwd, bwd; head fwd, bwd
    tok = b * T
    f, h = 2 * P * tok / gemm, 2 * Vp * C * tok / gemm
    return f, 2 * f, h, 2 * h
def ref_rate(i, m, p, ms):                # linear in log m between the nearest measured m, clamped
    lo = max([x for x in ms if x <= m], default=None)
    hi = min([x for x in ms if x > m], default=None)
    if lo is None or hi is None:
        return rate(i, lo if lo is not None else hi, p)
    t = (math.log(m) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return rate(i, lo, p) + t * (rate(i, hi, p) - rate(i, lo, p))
def entry_time(b, ms):                    # block fwd, bwd; head fwd, bwd from the entries
    m = b * T
    t = [sum((4 if p else 2) * m * n * k / ref_rate(i, m, p, ms) for i, (k, n) in enumerate(block))
         for p in (0, 1)]
    t += [(4 if p else 2) * m * Vp * C / ref_rate(4, m, p, ms) for p in (0, 1)]
    return t
def moved(r, e):                          # 12 blocks and the head, once each per pass
    return 12 * (e[0] - r[0] + e[1] - r[1]) + (e[2] - r[2]) + (e[3] - r[3])
names = ("block_forward", "block_backward", "head_forward", "head_backward")

# 1. exact entries at m 256
r, e = rate_time(4), entry_time(4, [256])
close(out("exact", 4)["step_s"] - out("rates", 4)["step_s"], moved(r, e), "exact entries' move")
src = out("exact", 4)["matmul_source"]
for n, s in zip(names, e):
    assert src[n]["source"] == "gemm" and src[n]["from_m"] == [256, 256], src[n]
    close(src[n]["seconds"], s, n)
assert out("rates", 4)["matmul_source"]["block_forward"]["source"] == "rate"
print(f"plan_gemm: entries at m 256 move the step by {moved(r, e):.4f} s, as computed")

# 2. entries at m 64 and 512: interpolated at 128 and 256, clamped at 1024, exact at 64
for b, kind, frm in ((1, "gemm", [64, 64]), (2, "gemm_interpolated", [64, 512]),
                     (4, "gemm_interpolated", [64, 512]), (16, "gemm_clamped", [512, 512])):
    r, e = rate_time(b), entry_time(b, [64, 512])
    close(out("interp", b)["step_s"] - out("rates", b)["step_s"], moved(r, e), f"batch {b}")
    src = out("interp", b)["matmul_source"]
    for n, s in zip(names, e):
        assert src[n]["source"] == kind and src[n]["from_m"] == frm and src[n]["m"] == b * T, (b, src[n])
        close(src[n]["seconds"], s, f"{n} at batch {b}")
    print(f"plan_gemm: m {b * T}: {kind} from m {frm}, step moved {moved(r, e):+.4f} s as computed")

# 3. the head's entries alone: the blocks at the rate; an exact layer entry wins
r, e = rate_time(4), entry_time(4, [256])
close(out("head", 4)["step_s"] - out("rates", 4)["step_s"], (e[2] - r[2]) + (e[3] - r[3]), "head only")
src = out("head", 4)["matmul_source"]
assert src["block_forward"]["source"] == "rate" and src["head_forward"]["source"] == "gemm", src
src = out("layer", 4)["matmul_source"]
assert src["block_forward"]["source"] == "layer" and src["block_backward"]["source"] == "gemm", src
assert src["block_forward"]["seconds"] == 0.05, src     # the layer entry's own seconds
# at batch 2 the layer entry (batch 4) does not apply: the GEMM entries at m 256, clamped
assert out("layer", 2)["matmul_source"]["block_forward"]["source"] == "gemm_clamped"
print("plan_gemm: sources reported; head-only entries leave the blocks at the rate")

# 5. embed, ln_f and loss at batch 4 (loss also at 16): scaled per token at batch 2, exact at 4
ent = {"embed_forward": 0.004, "embed_backward": 0.006, "ln_f_forward": 0.002,
       "ln_f_backward": 0.003, "loss_forward": 0.08}
lnf_rate = 2 * (2 * C) * T / gemm         # ln_f's forward from the rates (2 FLOP per parameter, token)
for b, kind, frm, scale in ((2, "layer_scaled", [4, 64], 0.5), (4, "layer", None, 1.0)):
    src = out("lossent", b)["layer_source"]
    assert sorted(src) == sorted(ent), src
    for n, s in ent.items():
        assert src[n]["source"] == kind and src[n]["from"] == frm, (b, n, src[n])
        close(src[n]["scale"], scale, f"{n} scale at batch {b}")
        close(src[n]["seconds"], s * scale, f"{n} at batch {b}")
    assert out("rates", b)["layer_source"] == {}, out("rates", b)["layer_source"]
# batch 4's entries (the rates count no embed and no loss, and ln_f at the rate) move its step by
# d4; batch 2's scaled entries move its step by half of that, less ln_f's rate time at each batch
d4 = out("lossent", 4)["step_s"] - out("rates", 4)["step_s"] + 3 * lnf_rate * 4
assert d4 > 0.08, d4                      # the loss entry (0.08 s) at least
close(out("lossent", 2)["step_s"] - out("rates", 2)["step_s"], d4 / 2 - 3 * lnf_rate * 2, "batch 2")
close(out("lossent", 16)["layer_source"]["loss_forward"]["seconds"], 0.5, "the entry at 16 itself")
print("plan_gemm: batch 2's embed, ln_f and loss are batch 4's entries halved, as reported")
PY
echo "plan_gemm: ok"

#!/usr/bin/env bash
# `ztier plan`'s use of the profile (docs/plan.md), on hand-written profiles whose effect on the
# predicted step is known from the step model's rules:
#  1. the exact-shape `compute` entries: a block's layer_forward/layer_backward entry at the
#     model's shape replaces the time the GEMM and attention rates give, so the step moves by
#     12 x (entry - rate time) at d12, with the rate time from the GPT-2 block's FLOPs (2 per
#     parameter and token forward, 4 backward; causal attention 2 B T^2 C forward, twice
#     backward); the head's and the loss's entries likewise; entries at another batch change
#     nothing; a matching entry without positive seconds fails naming it;
#  2. MFU on a GPU profile: `mfu` = GPT-2's FLOPs per token (6 N + 6 L T C, N = 124,475,904 at
#     d12 with the padded vocabulary) x tokens / step / gpu_peak_flops; null on a host profile;
#  3. ranks sharing a host (stage 2, 2 ranks, host backend): with host_fresh_bytes_per_s the
#     backward's gradient buffers and the step-end all-gather's receive buffers are written
#     as new pages (the model's bytes, 4 x N, twice at the fresh rate) and the step grows by
#     that; stage 3 and one rank do not change;
#  4. the keep rule (stage3_max_reuse_distance): h2d per step as the trainer counts it;
#  5. the prefetch window (stage3_prefetch_bucket_size): each gather starts when the runtime's
#     window issues it, so a bucket of 0, one layer and two layers give the steps a critical
#     path worked by hand from the rates gives (below).
#   plan_model.sh <ztier>
set -euo pipefail
ztier=$1
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/plan-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "plan_model: $*"; exit 1; }

profile() { # $1: file, $2: backend, $3: extra machine keys, $4: extra rates, $5: compute list
  cat > "$1" <<JSON
{"format": "ztier-profile", "version": 1,
 "machine": {"description": "CI: plan_model.sh, by hand", "backend": "$2", "cores": 2, "threads": 2 $3},
 "rates": {
  "host_memcpy_bytes_per_s": {"value": 1e15, "unit": "B/s", "source": "hand: CI"},
  "h2d_bytes_per_s": {"value": 1e15, "unit": "B/s", "source": "hand: CI"},
  "nvme_read_bytes_per_s": {"value": 1e9, "unit": "B/s", "source": "hand: CI"},
  "nvme_write_bytes_per_s": {"value": 1e9, "unit": "B/s", "source": "hand: CI"},
  "adam_params_per_s": {"value": 1e9, "unit": "1/s", "source": "hand: CI"},
  "allgather_bytes_per_s": {"value": 1e10, "unit": "B/s", "source": "hand: CI"},
  "reduce_scatter_bytes_per_s": {"value": 1e10, "unit": "B/s", "source": "hand: CI"},
  "attention_flops_per_s": {"value": 1e10, "unit": "FLOP/s", "source": "hand: CI"},
  "gemm_flops_per_s": {"value": 1e11, "unit": "FLOP/s", "source": "hand: CI"} $4},
 "compute": [$5]}
JSON
}
set_rates() { # $1: profile file, rest: rate=value pairs written into it
  python3 - "$@" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for kv in sys.argv[2:]:
    k, v = kv.split("=")
    p["rates"][k]["value"] = float(v)
json.dump(p, open(sys.argv[1], "w"))
PY
}
bucket_plans() { # $1: name, $2: --layers model, $3: profile, $4: the offload keys -> $1-<bucket>.out
  local bucket
  for bucket in 0 1000000 9000000; do
    echo "{\"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0, \"stage3_prefetch_bucket_size\": $bucket, $4}, \"ztier\": {\"device_backend\": \"cuda\", \"hbm_capacity\": \"1G\"}}" > "$work/$1-$bucket.json"
    "$ztier" plan --layers "$2" --ds-config "$work/$1-$bucket.json" --profile "$3" --json | tail -1 > "$work/$1-$bucket.out"
  done
}
check_buckets() { # $1: name, $2: what, $3-$5: the step (s) worked by hand at buckets 0, P, 9P
  python3 - "$work" "$@" <<'PY'
import json, sys
w, name, what = sys.argv[1:4]
want = dict(zip((0, 1000000, 9000000), map(float, sys.argv[4:7])))
got = {b: json.loads(open(f'{w}/{name}-{b}.out').read())['step_s'] for b in want}
for b in want:
    assert abs(got[b] - want[b]) < 1e-6, (what, 'bucket', b, 'predicted', got[b], 'by hand', want[b])
print(f'plan_model: {what} buckets 0, P, 9P give ' + ', '.join(f'{got[b] * 1e3:.1f}' for b in want) + ' ms, as worked by hand')
PY
}
entry() { # $1 op, $2 layer, $3 B, $4 seconds
  echo "{\"op\": \"$1\", \"layer\": \"$2\", \"B\": $3, \"T\": 64, \"C\": 768, \"NH\": 12, \"seconds\": $4, \"source\": \"hand: CI\"}"
}
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "none"}, "offload_optimizer": {"device": "cpu"}}}' > "$work/resident.json"
step() { # $1: profile, rest: plan arguments -> plan's JSON line
  local p=$1; shift
  "$ztier" plan --config d12 --batch 4 --seq 64 "$@" --profile "$p" --json | tail -1
}

# 1. exact-shape entries
profile "$work/rates.json" host "" "" ""
profile "$work/block.json" host "" "" "$(entry layer_forward block 4 0.05), $(entry layer_backward block 4 0.09)"
profile "$work/other.json" host "" "" "$(entry layer_forward block 8 0.05), $(entry layer_backward block 8 0.09)"
profile "$work/head.json" host "" "" "$(entry layer_forward head 4 0.2), $(entry layer_forward loss 4 0.03), $(entry layer_backward head 4 0.3)"
profile "$work/bad.json" host "" "" "$(entry layer_forward block 4 0)"
for p in rates block other head; do step "$work/$p.json" --ds-config "$work/resident.json" > "$work/$p.out"; done
if "$ztier" plan --config d12 --batch 4 --seq 64 --profile "$work/bad.json" > "$work/bad.out" 2>&1; then
  fail "a matching entry with 0 seconds was accepted"
fi
grep -q "compute\[0\].*positive seconds" "$work/bad.out" || fail "bad entry: $(cat "$work/bad.out")"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
s = {p: json.loads(open(f'{w}/{p}.out').read())['step_s'] for p in ('rates', 'block', 'other', 'head')}
C, B, T, Vp, gemm, att = 768, 4, 64, 50304, 1e11, 1e10
tok = B * T
P = 12 * C * C + 13 * C                    # a GPT-2 block's parameters
f = 2 * P * tok / gemm + 2 * B * T * T * C / att
b = 2 * (2 * P * tok / gemm) + 2 * (2 * B * T * T * C / att)
want = 12 * ((0.05 - f) + (0.09 - b))
got = s['block'] - s['rates']
assert abs(got - want) < 1e-4 * abs(want) + 1e-6, (got, want, s)
assert s['other'] == s['rates'], ('an entry at batch 8 changed the batch-4 step', s)
head = 2 * Vp * C * tok / gemm
want = (0.2 + 0.03 - head) + (0.3 - 2 * head)
got = s['head'] - s['rates']
assert abs(got - want) < 1e-4 * abs(want) + 1e-6, (got, want, s)
print(f'plan_model: exact entries move the step by {s["block"] - s["rates"]:.4f} s (blocks) and {got:.4f} s (head, loss) as computed')
PY

# 2. MFU on a GPU profile
profile "$work/gpu.json" cuda ', "gpu": "hand", "gpu_peak_flops": 1e15' "" ""
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}}, "ztier": {"device_backend": "cuda"}}' > "$work/cuda.json"
step "$work/gpu.json" --ds-config "$work/cuda.json" --device-memory 8G > "$work/gpu.out"
"$ztier" plan --config d12 --batch 4 --seq 64 --ds-config "$work/cuda.json" --device-memory 8G \
  --profile "$work/gpu.json" | grep -q "MFU 0\.[0-9]* of the profile's gpu_peak_flops" || fail "no MFU in the text"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
g = json.loads(open(f'{w}/gpu.out').read())
h = json.loads(open(f'{w}/rates.out').read())
N, L, T, C, tokens = 124475904, 12, 64, 768, 4 * 64
want = (6 * N + 6 * L * T * C) * tokens / g['step_s'] / 1e15
assert g['mfu'] is not None and abs(g['mfu'] - want) < 1e-6 * want, (g['mfu'], want)
assert h['mfu'] is None, h['mfu']
print(f"plan_model: MFU {g['mfu']:.5f} = 6N+6LTC x tokens / step / peak")
PY

# 3. two ranks on one host: new pages at stage 2
echo '{"zero_optimization": {"stage": 2, "offload_param": {"device": "none"}, "offload_optimizer": {"device": "cpu"}}}' > "$work/z2.json"
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}}}' > "$work/z3.json"
fresh=', "host_fresh_bytes_per_s": {"value": 1e8, "unit": "B/s", "source": "hand: CI"}'
profile "$work/fresh.json" host "" "$fresh" ""
for c in z2 z3; do
  step "$work/rates.json" --world 2 --ds-config "$work/$c.json" > "$work/$c-rates.out"
  step "$work/fresh.json" --world 2 --ds-config "$work/$c.json" > "$work/$c-fresh.out"
done
step "$work/fresh.json" --ds-config "$work/z2.json" > "$work/z2-1-fresh.out"
step "$work/rates.json" --ds-config "$work/z2.json" > "$work/z2-1-rates.out"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
s = {p: json.loads(open(f'{w}/{p}.out').read())['step_s'] for p in
     ('z2-rates', 'z2-fresh', 'z3-rates', 'z3-fresh', 'z2-1-rates', 'z2-1-fresh')}
N = 124475904
pages = 4 * N / 1e8                        # the model's fp32 bytes at the fresh rate
got = s['z2-fresh'] - s['z2-rates']
# the gradient buffers and the receive buffers: each the model's bytes; the packed shards
# (half of them) overlap with the gathers
assert 2 * pages * 0.99 < got < 2.5 * pages * 1.01, (got, pages, s)
assert s['z3-fresh'] == s['z3-rates'] and s['z2-1-fresh'] == s['z2-1-rates'], s
print(f'plan_model: stage 2 on 2 ranks, new pages add {got:.2f} s ({got / pages:.2f} x the model bytes at the fresh rate)')
PY
# 4. the prefetcher's keep rule: a released layer's copy stays for its next use only within
#    stage3_max_reuse_distance elements fetched in between (zt_sched_keep). With a distance of
#    1M elements every layer is fetched again before its next use: the trainer's counters
#    (zt_gpt2 d12 4 x 64, parameters in host memory) give h2d 995.8 MB per step against 497.9
#    MB at the default distance, twice the parameters' fp32 bytes; the plan must move the same
for d in 1000000000 1000000; do
  echo "{\"zero_optimization\": {\"stage\": 3, \"stage3_max_reuse_distance\": $d, \"offload_param\": {\"device\": \"cpu\"}, \"offload_optimizer\": {\"device\": \"cpu\"}}}" > "$work/reuse-$d.json"
done
sed 's/"host_memcpy_bytes_per_s": {"value": 1e15/"host_memcpy_bytes_per_s": {"value": 1e9/' "$work/rates.json" > "$work/slowcopy.json"
for d in 1000000000 1000000; do step "$work/slowcopy.json" --ds-config "$work/reuse-$d.json" > "$work/reuse-$d.out"; done
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
far, near = (json.loads(open(f'{w}/reuse-{d}.out').read())['busy_s']['h2d'] for d in (1000000000, 1000000))
N = 124475904
one = 4 * N / 1e9                          # the parameters once, fp32, at 1 GB/s
assert abs(far - one) < 0.01 * one, (far, one)
assert abs(near - 2 * one) < 0.01 * one, (near, one)
print(f'plan_model: h2d {far:.3f} s with the default reuse distance, {near:.3f} s with 1M elements')
PY
# 5. the prefetch window. Four layers, forward L0..L3, backward L3..L0: L0-L2 of P = 1e6
#    elements, L3 of 8P, fp32 in host memory on a GPU profile (the CPU Adam off the compute
#    stream). At 4e9 B/s a copy takes 1 ms per P (the gradients out the same); at 1e9 FLOP/s
#    and one token a forward takes 2 ms per P, a backward 4; Adam takes no time. The step,
#    from the end of one step's last compute: the gradients of L0 out (1 ms), the updates, the
#    forward F, then the backward (L3 32 ms, L2-L0 4 each: 44 ms; the copies stay gathered).
#    The window moves, after each fetch, the layers within the bucket's elements ahead (the
#    first always goes; zt_sched_window); at the step's end, zt_step's window the same. With
#    forward times from the update's end (copies queue on the one h2d stream):
#    - bucket 0, nothing ahead: copy L0 [0,1], compute [1,3]; L1 [3,4], [4,6]; L2 [6,7],
#      [7,9]; L3 [9,17], [17,33]: F = 33, the step 1 + 33 + 44 = 78 ms;
#    - bucket P (one small layer): L0 at the step's end, L1 at L0's fetch, L2 at L1's (after
#      L0's compute, 3), L3 at L2's (after L1's compute, 5): copies [0,1] [1,2] [3,4]
#      [5,13]; computes [1,3] [3,5] [5,7] [13,29]: F = 29, the step 74 ms;
#    - bucket 9P (two layers, or L3 and one): L0-L2 at the step's end, L3 at L1's fetch (L2,
#      gathered, is not counted then): copies [0,1] [1,2] [2,3] [3,11]; computes [1,3] [3,5]
#      [5,7] [11,27]: F = 27, the step 72 ms.
#    A fixed window of two (the model before) gives 74 ms whatever the bucket.
cat > "$work/four.json" <<'JSON'
{"layers": [
  {"name": "L0", "params": [{"name": "L0.w", "shape": [1000, 1000]}]},
  {"name": "L1", "params": [{"name": "L1.w", "shape": [1000, 1000]}]},
  {"name": "L2", "params": [{"name": "L2.w", "shape": [1000, 1000]}]},
  {"name": "L3", "params": [{"name": "L3.w", "shape": [8000, 1000]}]}],
 "order": [["fetch", "L0", "forward"], ["release", "L0", "forward"], ["fetch", "L1", "forward"], ["release", "L1", "forward"], ["fetch", "L2", "forward"], ["release", "L2", "forward"], ["fetch", "L3", "forward"], ["release", "L3", "forward"],
   ["fetch", "L3", "backward"], ["release", "L3", "backward"], ["fetch", "L2", "backward"], ["release", "L2", "backward"], ["fetch", "L1", "backward"], ["release", "L1", "backward"], ["fetch", "L0", "backward"], ["release", "L0", "backward"]]}
JSON
# the same model without its "order": the calls the registration declares (the same here)
python3 -c "import json, sys; d = json.load(open(sys.argv[1])); d.pop('order'); json.dump(d, open(sys.argv[2], 'w'))" \
  "$work/four.json" "$work/four-noorder.json"
profile "$work/window-gpu.json" cuda "" "" ""
set_rates "$work/window-gpu.json" h2d_bytes_per_s=4e9 adam_params_per_s=1e18 gemm_flops_per_s=1e9
bucket_plans window "$work/four.json" "$work/window-gpu.json" \
  '"offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}'
"$ztier" plan --layers "$work/four-noorder.json" --ds-config "$work/window-1000000.json" \
  --profile "$work/window-gpu.json" --json | tail -1 > "$work/window-noorder.out"
check_buckets window "prefetch" 0.078 0.074 0.072
python3 -c "import json, sys; n = json.loads(open(sys.argv[1]).read())['step_s']
assert abs(n - 0.074) < 1e-6, ('without its \"order\"', n)" "$work/window-noorder.out"
# 6. overlap_step with parameters and optimizer state on NVMe (zt_rt_fetch): a forward fetch
#    first updates its layer and the next one, on the caller, each update ending with the
#    working copy's synchronous store to its NVMe home; a prefetch of a layer not yet updated
#    is declined, so no read starts before the fetch that updated the layer has returned.
#    Two layers of P = 1e6 fp32 elements (4 MB), a cuda profile: NVMe 1e9 B/s both ways
#    (parameters 4 ms, state 12 ms), copies 4e9 (1 ms), Adam 1e9/s (1 ms, CPU threads),
#    1e8 FLOP/s at one token (forward 20 ms, backward 40). From the end of the previous step:
#    gradients of L0 out [0,1], Adam L0 [1,2], store L0 [2,6], state write L0 [6,18], Adam L1
#    [6,7], store L1 queued behind it [18,22] (the fetch of L0 returns from its updates at 22);
#    - bucket 0: read L0 [22,26], copy [26,27], F0 [27,47]; read L1 at its fetch [47,51],
#      copy [51,52], F1 [52,72], B1 [72,112], B0 [112,152]: 152 ms;
#    - bucket P: read L1 issued by L0's window [26,30], its copy at its fetch [47,48], F1
#      [48,68], B0 ends 148 ms; bucket 9P: the copy too [30,31], F1 [47,67], 147 ms.
#    main (updates at each layer's own fetch, the store not waited for): 132, 128, 127 ms.
cat > "$work/two.json" <<'JSON'
{"layers": [
  {"name": "L0", "params": [{"name": "L0.w", "shape": [1000, 1000]}]},
  {"name": "L1", "params": [{"name": "L1.w", "shape": [1000, 1000]}]}]}
JSON
profile "$work/nvme-gpu.json" cuda "" "" ""
set_rates "$work/nvme-gpu.json" h2d_bytes_per_s=4e9 host_memcpy_bytes_per_s=4e9 gemm_flops_per_s=1e8
bucket_plans nvme "$work/two.json" "$work/nvme-gpu.json" \
  "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"$work\"}, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$work\"}"
check_buckets nvme "NVMe with overlap_step, prefetch" 0.152 0.148 0.147
# 7. the NVMe optimizer step in sub-groups (zt_nvme_step). Two 1024x1024 fp32 layers resident
#    on the device, state on NVMe: sub_group_size 262144 (one 1 MiB aio block) cuts each into 4
#    sub-groups g0-g7 of m and v (2 MiB: read 2 ms, write 2 ms at 1048576000 B/s; the master is
#    the parameters), Adam 1 ms each (CPU lane, cuda profile); buffer_count 9: N = 3 sets, so
#    the read of g(j) is issued at g(j-1)'s start after g(j-3)'s write-back W(j-3), and Adam
#    A(j) waits for W(j-2). overlap_step (auto: on) runs all 8 at L0's forward fetch. Forward 10
#    ms, backward 20 (2 FLOP per element, one token, 209715200 FLOP/s); copies 4 ns (ignored).
#    From B0's end: reads of g0-g2 done (the runtime pre-reads N sets at the backward's first
#    fetch; the model reads g2 [1,3], off the path); A0 [0,1] W0 [1,3]; A1 [1,2] W1 [3,5]; R3
#    [3,5]; A2 [3,4] W2 [5,7]; R4 [5,7]; A3 [5,6] W3 [7,9]; R5 [7,9]; A4 [7,8] W4 [9,11]; R6
#    [9,11]; A5 [9,10] W5 [11,13]; R7 [11,13]; A6 [11,12] W6 [13,15]; A7 [13,14] W7 [15,17];
#    F0 [14,24] F1 [24,34] B1 [34,54] B0 [54,74]: 74 ms. The whole-layer model (one read, Adam
#    and write per layer, 3925bf8): reads done before, Adam L0 [0,4], L1 [4,8]: 68 ms.
cat > "$work/mib.json" <<'JSON'
{"layers": [
  {"name": "L0", "params": [{"name": "L0.w", "shape": [1024, 1024]}]},
  {"name": "L1", "params": [{"name": "L1.w", "shape": [1024, 1024]}]}]}
JSON
profile "$work/sub-gpu.json" cuda "" "" ""
set_rates "$work/sub-gpu.json" nvme_read_bytes_per_s=1048576000 nvme_write_bytes_per_s=1048576000 adam_params_per_s=262144000 gemm_flops_per_s=209715200
echo "{\"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 262144, \"stage3_param_persistence_threshold\": 0, \"offload_param\": {\"device\": \"none\"}, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$work\", \"buffer_count\": 9}}, \"ztier\": {\"device_backend\": \"cuda\", \"hbm_capacity\": \"1G\"}}" > "$work/sub.json"
"$ztier" plan --layers "$work/mib.json" --ds-config "$work/sub.json" --profile "$work/sub-gpu.json" \
  --json | tail -1 > "$work/sub.out"
python3 - "$work/sub.out" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))['step_s']
assert abs(got - 0.074) < 1e-6, ('NVMe step in sub-groups: predicted', got, 'by hand 0.074')
assert abs(got - 0.068) > 1e-3, ('the whole-layer update predicts 0.068', got)
print(f'plan_model: the NVMe step in 8 sub-groups over 3 sets gives {got * 1e3:.1f} ms, as worked by hand')
PY
# 8-11: case 7's shapes with other settings (sub_step: the predicted step in ms).
sub_step() { # $1: name, $2: offload_param device, $3: overlap_step, $4: buffer_count[, $5: profile]
  echo "{\"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 262144, \"stage3_param_persistence_threshold\": 0, \"offload_param\": {\"device\": \"$2\", \"nvme_path\": \"$work\"}, \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"$work\", \"buffer_count\": $4}}, \"ztier\": {\"device_backend\": \"cuda\", \"hbm_capacity\": \"1G\", \"overlap_step\": \"$3\"}}" > "$work/$1.json"
  "$ztier" plan --layers "$work/mib.json" --ds-config "$work/$1.json" --profile "${5:-$work/sub-gpu.json}" \
    --json | tail -1 > "$work/$1.out"
}
check_step() { # $1: name, $2: what, $3: the step (ms) worked by hand, $4: the model before (ms)
  python3 - "$work/$1.out" "$2" "$3" "$4" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))['step_s'] * 1e3
what, want, before = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
assert abs(got - want) < 1e-3, (what, 'predicted', got, 'ms; by hand', want)
assert abs(got - before) > 1, (what, 'the model before predicts', before, got)
print(f'plan_model: {what}: {got:.1f} ms, as worked by hand')
PY
}
# 8. overlap_step "off", parameters in host memory (fp32: the master; copies 4 ns, ignored):
#    zt_step runs the 8 sub-groups as case 7's fetch does and returns after A7 [13,14], its
#    write-back W7 [15,17] still in flight (the next step's pre-read waits for it, at the
#    backward's first fetch, long after): F0 [14,24] F1 [24,34] B1 [34,54] B0 [54,74]: 74 ms.
#    Waiting for W7 (the model before) gives 77.
sub_step off-host cpu off 9
check_step off-host "overlap_step off: zt_step returns after the last Adam" 74 77
# 9. case 7 with buffer_count 12: N = 4 sets, the read of g(j) issued at g(j-2)'s start after
#    W(j-4); g0-g3 pre-read. A0 [0,1] W0 [1,3]; A1 [1,2] W1 [3,5]; R4 [3,5]; A2 [3,4] W2 [5,7];
#    R5 [5,7]; A3 [5,6] W3 [7,9]; R6 [7,9]; A4 [7,8] W4 [9,11]; R7 [9,11]; A5 [9,10] W5
#    [11,13]; g6 and g7 issue no read, so A6 waits for R6 only [10,11] W6 [13,15], A7 for R7
#    [11,12] W7 [15,17]; F0 [12,22] F1 [22,32] B1 [32,52] B0 [52,72]: 72 ms. A6 after W4 and
#    A7 after W5 (the model before) give 74.
sub_step sets4 none auto 12
check_step sets4 "N = 4 sets: the last N - 2 sub-groups wait for no write-back" 72 74
# 10. case 8 with the parameters on the device (case 7's; nothing to move at a fetch): the
#    forward still waits for zt_step, which returns after A7 [13,14]: 74 ms as in case 8. A
#    fetch that waits for no update (the model before) gives F0 [0,10] .. B0 [40,60]: 60.
sub_step off-device none off 9
check_step off-device "overlap_step off, parameters on the device: the fetch waits for the update" 74 60
# 11. case 7 with a compute 10 times faster (forward 1 ms, backward 2): the pre-read, at the
#    backward's first fetch (zt_nvme_step_preread), waits for the last write-backs (and the
#    caller with it), then reads g0-g2. Steady state, from B0's end: g0-g2 read at the previous
#    B1's fetch [-4,-2] [-2,0] [0,2]; A0 [0,1] W0 [1,3]; A1 [1,2] W1 [3,5]; g2's start waits for
#    W0 to issue R3 [3,5]; A2 [3,4] W2 [5,7]; R4 after W1 [5,7]; A3 [5,6] W3 [7,9]; R5 [7,9]; A4
#    [7,8] W4 [9,11]; R6 [9,11]; A5 [9,10] W5 [11,13]; R7 [11,13]; A6 [11,12] W6 [13,15]; A7
#    [13,14] W7 [15,17]; F0 [14,15] F1 [15,16]; B1's fetch waits for W7 (17), then pre-reads
#    [17,19] [19,21] [21,23] (as assumed, shifted by 21); B1 [17,19] B0 [19,21]: 21 ms. Reading
#    g0 and g1 after the previous update, g2 after A0 (the model before): 20.
profile "$work/fast-gpu.json" cuda "" "" ""
set_rates "$work/fast-gpu.json" nvme_read_bytes_per_s=1048576000 nvme_write_bytes_per_s=1048576000 adam_params_per_s=262144000 gemm_flops_per_s=2097152000
sub_step pre-read none auto 9 "$work/fast-gpu.json"
check_step pre-read "the pre-read of N sub-groups at the backward's first fetch" 21 20
# 12. the parameters on NVMe too: each layer's working copy (4 MiB) stored synchronously after
#    its last sub-group (zt_home_store), so the state is master, m and v. Reads 3 ms per
#    sub-group (3 MiB at 1048576000 B/s), the parameters' 4; writes at twice that: W 1.5 ms, a
#    store 2; Adam 2 ms; forward 1 ms, backward 2; the window reads L1 at L0's fetch (case 6).
#    From B0's end: pre-read g0-g2 done at -1, 2, 5; A0 [0,2] W0 [2,3.5]; A1 [2,4] W1 [4,5.5];
#    R3 [5,8] (behind R2); A2 [5,7] W2 [7,8.5]; R4 issued at 7 after W1 [8,11]; A3 [8,10], the
#    store of L0 [10,12], W3 [12,13.5]; R5 issued as the caller returns from the store, at 12
#    (W2 ended at 8.5) [12,15]; A4 [12,14] W4 [14,15.5]; R6 after W3 [15,18]; A5 [15,17] W5
#    [17,18.5]; R7 [18,21]; A6 [18,20] W6 [20,21.5]; A7 [21,23], store of L1 [23,25], W7
#    [25,26.5]; L0's read [25,29], F0 [29,30]; L1's [29,33], F1 [33,34]; B1's fetch pre-reads
#    [34,37] [37,40] [40,43] (done at 38 - 1, 2, 5 as assumed); B1 [34,36] B0 [36,38]: 38 ms.
#    R5 issued after A3, before the store (the model before): 37.
profile "$work/store-gpu.json" cuda "" "" ""
set_rates "$work/store-gpu.json" nvme_read_bytes_per_s=1048576000 nvme_write_bytes_per_s=2097152000 adam_params_per_s=131072000 gemm_flops_per_s=2097152000
sub_step store nvme auto 9 "$work/store-gpu.json"
check_step store "a read after a shard's last sub-group waits for its store" 38 37
# 13. case 7 with copies at 1048576000 B/s (1 MiB a ms): the master of each sub-group (the
#    fp32 parameters in device memory) copied out O(j) beside its read, 1 ms on the d2h lane;
#    after A(j) its new values copied in I(j), 1 ms on h2d, the caller waiting (the next Adam
#    too); W(j) after I(j). The gradients out take 4 ms a layer (d2h). From B0's end: G0
#    [0,4]; g0-g2 and their copies done at B1's fetch; A0 [4,5] I0 [5,6] W0 [6,8]; A1 [6,7] I1
#    [7,8] W1 [8,10]; R3 and O3 at 8 (after g1's return and W0) [8,10] [8,9]; A2 (after W0)
#    [8,9] I2 [9,10] W2 [10,12]; R4 O4 at 10 [10,12]; A3 [10,11] I3 [11,12] W3 [12,14]; R5 O5
#    at 12; A4 [12,13] I4 [13,14] W4 [14,16]; R6 O6 at 14; A5 [14,15] I5 [15,16] W5 [16,18]; R7
#    O7 at 16; A6 [16,17] I6 [17,18] W6 [18,20]; A7 [18,19] I7 [19,20] W7 [20,22]; the fetch
#    returns at 20: F0 [20,30] F1 [30,40] B1 [40,60] (its fetch pre-reads g0-g2 and copies
#    their masters [40,46], as assumed) B0 [60,80]: 80 ms; d2h busy 16 ms (8 of them the
#    masters), h2d 8. Without the copies (the model before): 78 ms, d2h 8, h2d 0.
profile "$work/copy-gpu.json" cuda "" "" ""
set_rates "$work/copy-gpu.json" nvme_read_bytes_per_s=1048576000 nvme_write_bytes_per_s=1048576000 adam_params_per_s=262144000 gemm_flops_per_s=209715200 h2d_bytes_per_s=1048576000
sub_step master-copies none auto 9 "$work/copy-gpu.json"
check_step master-copies "the master's copies out of and into device memory" 80 78
python3 - "$work/master-copies.out" <<'PY'
import json, sys
busy = json.load(open(sys.argv[1]))['busy_s']
assert abs(busy['d2h'] - 0.016) < 1e-6 and abs(busy['h2d'] - 0.008) < 1e-6, ('copies busy', busy)
print(f"plan_model: the copies keep d2h {busy['d2h'] * 1e3:.1f} ms and h2d {busy['h2d'] * 1e3:.1f} ms busy, as counted by hand")
PY
echo "plan_model: ok"

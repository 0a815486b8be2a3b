#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier estimate --batch --seq` against the GPT-2 trainer: for each activation checkpointing
# policy, the estimate's "model" bytes equal the activations the trainer allocates (its
# "activations N bytes" line), and with full checkpoints in ztier's store (host memory and
# NVMe) its "store_device" equals the store's measured device peak (zt_stats), two blocks'
# inputs with prefetch_layers 1; none > selective > full >= full+offload. With bf16.enabled
# its "bf16_scratch" equals the trainer's fp32 copies of the bf16 layers (the figure it prints
# after the last step; on a GPU they are device memory) and every policy's device total is
# the parameters' peak + the model's + the store's + that scratch; without bf16 it is 0.
#   estimate_acts.sh <ztier> <zt_gpt2>
set -euo pipefail
ztier=$1 trainer=$2
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/estimate-acts.XXXXXX")
trap 'rm -rf "$work"' EXIT
for i in $(seq 200); do echo "the quick brown fox $i jumps over the lazy dog"; done > "$work/t.txt"
mkdir -p "$work/swap"
common=(--config tiny --vocab 256 --text "$work/t.txt" --batch 8 --seq 16 --steps 2 --device cpu)
"$ztier" estimate --config tiny --vocab 256 --batch 8 --seq 16 --json | tail -n 1 > "$work/est.json"
field() { python3 -c "import json,sys; print(json.load(open('$work/est.json'))['activations']['policies']['$1']['$2'])"; }
prev=
for policy in none selective full host nvme; do
  case $policy in
    host | nvme) opts=(--checkpoint-activations full --offload-activations "$policy" --nvme "$work/swap")
                 key=full+offload ;;
    *) opts=(--checkpoint-activations "$policy"); key=$policy ;;
  esac
  "$trainer" "${common[@]}" "${opts[@]}" > "$work/$policy.log" 2> /dev/null
  ran=$(sed -n 's/^activations \([0-9]*\) bytes .*/\1/p' "$work/$policy.log")
  est=$(field "$key" model)
  [ "$ran" = "$est" ] || { echo "$policy: the trainer allocates $ran bytes, the estimate says $est"; exit 1; }
  if [ "$key" = full+offload ]; then
    peak=$(sed -n 's/.*their device buffers at most \([0-9]*\) bytes.*/\1/p' "$work/$policy.log")
    est_store=$(field "$key" store_device)
    [ "$peak" = "$est_store" ] ||
      { echo "$policy: the store's device peak is $peak bytes, the estimate says $est_store"; exit 1; }
    echo "$policy: model $ran bytes, store's device peak $peak bytes: as estimated"
  else
    echo "$policy: model $ran bytes: as estimated"
  fi
  # tiny has 2 layers: full's one output per block and the store's two alternating are equal
  if [ -n "$prev" ] && [ "$policy" != nvme ]; then
    [ "$ran" -lt "$prev" ] || { [ "$policy" = host ] && [ "$ran" -le "$prev" ]; } ||
      { echo "$policy keeps $ran bytes, not under $prev"; exit 1; }
  fi
  prev=$ran
done

# bf16.enabled: the widening scratch the trainer allocates, counted on the device
cat > "$work/bf16.json" <<'JSON'
{"bf16": {"enabled": true}, "zero_optimization": {"stage": 3,
  "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}},
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}}
JSON
"$trainer" "${common[@]}" --ds-config "$work/bf16.json" > "$work/bf16.log" 2> /dev/null
ran=$(sed -n 's/.*fp32 copies of bf16 layers \([0-9]*\).*/\1/p' "$work/bf16.log")
"$ztier" estimate --config tiny --vocab 256 --batch 8 --seq 16 --ds-config "$work/bf16.json" \
  --json | tail -n 1 > "$work/est-bf16.json"
python3 - "$work/est-bf16.json" "$work/est.json" "$ran" <<'PY'
import json, sys
bf, fp, ran = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
scratch = bf["activations"]["bf16_scratch"]
if scratch != ran or ran <= 0:
    sys.exit(f"bf16: the trainer's fp32 copies of bf16 layers are {ran} bytes, the estimate says {scratch}")
if fp["activations"]["bf16_scratch"] != 0:
    sys.exit(f"fp32: the estimate counts {fp['activations']['bf16_scratch']} bytes of bf16 scratch")
peak = bf["per_rank"]["device_peak"]
for name, row in bf["activations"]["policies"].items():
    want = peak + row["model"] + row["store_device"] + scratch
    if row["device_total"] != want:
        sys.exit(f"bf16 {name}: device total {row['device_total']}, not {want} (parameters' peak "
                 f"{peak} + model {row['model']} + store {row['store_device']} + scratch {scratch})")
print(f"bf16: the trainer's fp32 copies of bf16 layers {ran} bytes: as estimated, in each device total")
PY

# The same on a GPU (the stand-in where the build has one; skipped without): the cuda device
# backend and the trainer's bf16 matmuls (its default --precision), whose GEMMs read the
# blocks' weight matrices in 16 bits, so its fp32 copies leave them out; the estimate counts
# the same bytes, fewer than the CPU trainer's.
sed 's/"optimizer": {/"ztier": {"device_backend": "cuda"}, "optimizer": {/' "$work/bf16.json" \
  > "$work/bf16-cuda.json"
gpu_common=("${common[@]/#cpu/cuda}")
if "$trainer" "${gpu_common[@]}" --ds-config "$work/bf16-cuda.json" > "$work/bf16-cuda.log" 2>&1; then
  gran=$(sed -n 's/.*fp32 copies of bf16 layers \([0-9]*\).*/\1/p' "$work/bf16-cuda.log")
  gest=$("$ztier" estimate --config tiny --vocab 256 --batch 8 --seq 16 --device-memory 1G \
    --ds-config "$work/bf16-cuda.json" --json | tail -n 1 |
    python3 -c "import json,sys; print(json.load(sys.stdin)['activations']['bf16_scratch'])")
  [ -n "$gran" ] && [ "$gran" = "$gest" ] && [ "$gran" -lt "$ran" ] ||
    { echo "bf16 on cuda: the trainer's fp32 copies are ${gran:-?} bytes, the estimate says $gest (cpu: $ran)"; exit 1; }
  echo "bf16 on cuda: the trainer's fp32 copies of bf16 layers $gran bytes (cpu $ran): as estimated"
elif grep -qE "no GPU found|no usable GPU" "$work/bf16-cuda.log"; then
  echo "bf16 on cuda: no GPU (nor stand-in) in this build: not checked"
else
  cat "$work/bf16-cuda.log"; exit 1
fi

# With the cuda device backend (the GPU trainer) the estimate counts what the CUDA ops
# allocate: tiny's heads of 16 take the fused attention, which keeps each row's logsumexp
# ([B,NH,T]) instead of the softmax ([B,NH,T,T]), and the fused DGELU GEMM needs no gradient
# at GELU's output ([B,T,4C]); every other tensor is the same. With every block's tensors kept
# (none): 2 layers x 8 x 2 heads x 16 x (16 - 1) floats less, and 8 x 16 x 4 x 32. The CUDA
# ops' att_keep and the model's allocation on such ops are checked by test_gpt2_flash and
# test_gpt2_sizes.
echo '{"ztier": {"device_backend": "cuda", "comm_backend": "single"}}' > "$work/cuda.json"
host_json=$work/est.json
if "$ztier" estimate --config tiny --vocab 256 --batch 8 --seq 16 --ds-config "$work/cuda.json" \
     --device-memory 1G --precision fp32 --json 2> "$work/cuda.err" | tail -n 1 > "$work/est-cuda.json"; then
  cpu_none=$(python3 -c "import json; print(json.load(open('$host_json'))['activations']['policies']['none']['model'])")
  read -r keeps gpu_none < <(python3 -c "import json; a = json.load(open('$work/est-cuda.json'))['activations']; print(a['attention_keeps'], a['policies']['none']['model'])")
  want=$((cpu_none - 4 * 2 * 8 * 2 * 16 * 15 - 4 * 8 * 16 * 4 * 32))
  [ "$keeps" = logsumexp ] && [ "$gpu_none" = "$want" ] ||
    { echo "cuda backend: attention keeps $keeps, model $gpu_none bytes, expected logsumexp, $want"; exit 1; }
  echo "cuda backend: model $gpu_none bytes (the logsumexp, not the softmax): as counted"
else
  echo "cuda backend: not in this build, skipped ($(head -c 200 "$work/cuda.err"))"
fi

# The GPU trainer's own allocation in both precisions (on the stand-in where the build has
# one): --precision bf16 (its default) keeps the activations and their gradients in bf16 (the
# statistics, logsumexp and logits in fp32), fp32 keeps them in fp32; the estimate with the
# same --precision counts the bytes the trainer prints, and bf16's are fewer.
for prec in bf16 fp32; do
  for policy in none full; do
    log=$work/cuda-$prec-$policy.log
    if "$trainer" "${gpu_common[@]}" --precision "$prec" --checkpoint-activations "$policy" \
         > "$log" 2>&1; then
      ran=$(sed -n 's/^activations \([0-9]*\) bytes .*/\1/p' "$log")
      est=$("$ztier" estimate --config tiny --vocab 256 --batch 8 --seq 16 --device-memory 1G \
        --ds-config "$work/cuda.json" --precision "$prec" --json | tail -n 1 |
        python3 -c "import json,sys; print(json.load(sys.stdin)['activations']['policies']['$policy']['model'])")
      [ -n "$ran" ] && [ "$ran" = "$est" ] ||
        { echo "cuda $prec $policy: the trainer allocates ${ran:-?} bytes, the estimate says $est"; exit 1; }
      eval "gpu_${prec}_${policy}=$ran"
      echo "cuda --precision $prec, $policy: model $ran bytes: as estimated"
    elif grep -qE "no GPU found|no usable GPU|no CUDA" "$log"; then
      echo "cuda --precision $prec: no GPU (nor stand-in) in this build: not checked"
      break 2
    else
      cat "$log"; exit 1
    fi
  done
done
if [ -n "${gpu_bf16_none:-}" ] && [ -n "${gpu_fp32_none:-}" ]; then
  [ "$gpu_bf16_none" -lt "$gpu_fp32_none" ] && [ "$gpu_bf16_full" -lt "$gpu_fp32_full" ] ||
    { echo "bf16 activations are not fewer bytes than fp32's"; exit 1; }
fi
echo "activation estimates match the trainer"

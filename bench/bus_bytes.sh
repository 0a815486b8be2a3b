#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bytes on the bus per step, fp32 parameters against bf16.enabled (docs/gpu.md, "16 bits on
# the wire"): the GPT-2 trainer on the GPU (--device cuda; on a machine without one, the
# stand-in cudasim of a ZT_CUDA_FAKE build) with ZeRO-3, parameters and optimizer state in
# host memory, the same model, batch and device budget (--hbm: the placement) for both. The
# counts are zt_stats' (the trainer's "last step's bytes" line: the last of `steps` steps, the
# first step moves more), deterministic, not timed. Each dtype runs twice: without activation
# checkpoints (every byte is a parameter or a gradient) and with full checkpointing handed to
# host memory (--offload-activations host); the difference is the activation traffic, named
# on its own line (fp32 in both: the activations stay fp32 in this step of the work).
# Exits 1 when bf16's parameter and gradient bytes are above 0.55 of fp32's.
#   bench/bus_bytes.sh <zt_gpt2> [config] [hbm] [batch] [seq] [steps]
# e.g. bench/bus_bytes.sh build-asan/examples/gpt2/zt_gpt2 tiny 96K 4 16 3   (the stand-in)
#      bench/bus_bytes.sh build/examples/gpt2/zt_gpt2 d12 1G 8 1024 4          (a GPU)
set -uo pipefail
prog=${1:?usage: bus_bytes.sh <zt_gpt2> [config] [hbm] [batch] [seq] [steps]}
config=${2:-tiny} hbm=${3:-96K} batch=${4:-4} seq=${5:-16} steps=${6:-3}
text=${TEXT:-/usr/share/common-licenses/GPL-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ ! -r "$text" ]; then
  text=$out/corpus.txt
  for i in $(seq 400); do echo "the quick brown fox $i jumps over the lazy dog"; done > "$text"
fi
for dt in fp32 bf16; do
  enabled=false
  [ "$dt" = bf16 ] && enabled=true
  cat > "$out/$dt.json" <<JSON
{"bf16": {"enabled": $enabled},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
  "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}},
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}, "gradient_clipping": 1.0}
JSON
  for acts in none host; do
    extra=()
    [ "$acts" = host ] && extra=(--checkpoint-activations full --offload-activations host)
    "$prog" --config "$config" --vocab byte --text "$text" --batch "$batch" --seq "$seq" \
      --steps "$steps" --device cuda --precision fp32 --hbm "$hbm" --ds-config "$out/$dt.json" \
      "${extra[@]}" > "$out/$dt-$acts.txt" 2>&1 ||
      { echo "$dt, activations $acts failed:"; tail -5 "$out/$dt-$acts.txt"; exit 1; }
  done
done
# "  last step's bytes: h2d H, d2h D (activation checkpoints saved A); ... layers S"
field() { sed -n "s/.*last step's bytes: h2d \([0-9]*\), d2h \([0-9]*\).*layers \([0-9]*\)$/\\$2/p" "$out/$1.txt"; }
params=$(sed -n 's/^GPT-2 [^:]*: \([0-9.]*M\) parameters.*/\1/p' "$out/fp32-none.txt")
echo "GPT-2 $config ($params parameters), batch $batch x $seq, device budget $hbm, step $steps of $steps; $(grep -o 'compute on [a-z]*.*' "$out/fp32-none.txt" | head -1)"
echo '| dtype | h2d per step | d2h per step | activation h2d | activation d2h | fp32 copies on the device |'
echo '| --- | --- | --- | --- | --- | --- |'
for dt in fp32 bf16; do
  h=$(field "$dt-none" 1) d=$(field "$dt-none" 2) s=$(field "$dt-none" 3)
  ah=$(($(field "$dt-host" 1) - h)) ad=$(($(field "$dt-host" 2) - d))
  echo "| $dt | $h | $d | $ah | $ad | $s |"
done
h32=$(field fp32-none 1) d32=$(field fp32-none 2) h16=$(field bf16-none 1) d16=$(field bf16-none 2)
awk -v a="$((h16 + d16))" -v b="$((h32 + d32))" -v h="$h16" -v H="$h32" -v d="$d16" -v D="$d32" 'BEGIN {
  r = a / b; printf "bf16 / fp32, parameters and gradients: h2d %.3f, d2h %.3f, both %.3f (goal <= 0.55)\n", h / H, d / D, r
  exit !(r <= 0.55) }'

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Trainer checks on the tiny GPT-2 with the byte-level GPL-3 text:
#  1. parameters and optimizer on NVMe over 2 MPI ranks == everything in memory on 1 rank
#     after 10 steps (relative L2 difference <= 1e-5 over all weights); before any step the
#     2-rank exports (llm.c and safetensors, each tensor gathered to rank 0) are the 1-rank
#     files byte for byte;
#  2. save at step 5, resume, and steps 6-10 == the uninterrupted run, bitwise;
#  3. ZeRO++ on 4 ranks (two nodes of two) stays within 10% of the unquantized loss;
#  4. bf16 parameter copies stay within 5% of the fp32 loss;
#  5. the text converted to an llm.c shard (--write-shard) trains bitwise like the text;
#  6. --eval-every (ZT_INFERENCE forwards between steps) leaves training bitwise unchanged;
#  7. --keep 2 keeps the newest two checkpoints; an edited manifest stops --resume with the
#     field named, before any training;
#  8. --demo DIR on the CPU (what make demo runs) trains bitwise like its explicit settings;
#  9. --checkpoint-activations selective and full train bitwise like none, in less memory;
# 10. full with its checkpoints in host memory or on NVMe (--offload-activations, or the
#     config's cpu_checkpointing) trains bitwise like none, the store's device buffers at
#     most two blocks' checkpoints.
#   run_trainer_checks.sh <zt_gpt2> <compare_weights> <mpirun or "">
set -euo pipefail
trainer=$1 compare=$2 mpirun=${3:-}
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/gpt2-checks.XXXXXX")
trap 'rm -rf "$work"' EXIT
text=$work/corpus.txt
# any prose works; the GPL text is on every Debian system, and a fallback keeps this hermetic
if [ -r /usr/share/common-licenses/GPL-3 ]; then cp /usr/share/common-licenses/GPL-3 "$text"
else for i in $(seq 400); do echo "the quick brown fox $i jumps over the lazy dog"; done > "$text"; fi
# the CPU trainer's checks (the GPU's are test_gpt2_cuda_train, label cuda): --device cpu
# also where a GPU is usable
common=(--config tiny --vocab 256 --text "$text" --batch 8 --seq 16 --lr 3e-3 --seed 7 --device cpu)
mkdir -p "$work/swap"

"$trainer" "${common[@]}" --steps 10 --export "$work/resident.bin" > "$work/resident.log"
# the offloaded run shards every layer (the tiny model is below the default persistence
# threshold) and keeps parameters and optimizer state on NVMe
cat > "$work/offload.json" <<JSON
{"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
  "offload_param": {"device": "nvme", "nvme_path": "$work/swap"},
  "offload_optimizer": {"device": "nvme", "nvme_path": "$work/swap"}},
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
 "gradient_clipping": 1.0, "aio": {"block_size": 4096}, "ztier": {"hbm_capacity": "1M"}}
JSON
if [ -n "$mpirun" ]; then
  $mpirun -np 2 "$trainer" "${common[@]}" --steps 10 --ds-config "$work/offload.json" \
    --export "$work/offload.bin" > "$work/offload.log"
  grep -q "tier peaks:.*nvme 0.0M$" "$work/offload.log" && { echo "the NVMe tier was not used"; exit 1; }
  "$compare" "$work/offload.bin" "$work/resident.bin" 1e-5
  "$trainer" "${common[@]}" --steps 0 --export "$work/init1.bin" --safetensors "$work/init1.st" \
    > /dev/null
  $mpirun -np 2 "$trainer" "${common[@]}" --steps 0 --ds-config "$work/offload.json" \
    --export "$work/init2.bin" --safetensors "$work/init2.st" > /dev/null
  cmp "$work/init1.bin" "$work/init2.bin"
  cmp "$work/init1.st" "$work/init2.st"
fi

# 3. ZeRO++ (qwZ + qgZ + hpZ) on 4 ranks as two nodes of 2: the loss after 50 steps stays
#    within 10% of the unquantized single-rank run's
if [ -n "$mpirun" ]; then
  "$trainer" "${common[@]}" --steps 50 > "$work/plain50.log"
  $mpirun -np 4 "$trainer" "${common[@]}" --steps 50 --ds-config "$(dirname "$0")/data/zeropp.json" \
    > "$work/zeropp50.log"
  a=$(awk '$1 == "step" && $2 == 50 {print $5}' "$work/plain50.log")
  b=$(awk '$1 == "step" && $2 == 50 {print $5}' "$work/zeropp50.log")
  echo "GPT-2 tiny, 50 steps: loss $a unquantized on 1 rank, $b with qwZ+qgZ+hpZ on 4 ranks"
  awk -v a="$a" -v b="$b" 'BEGIN { d = (b - a) / a; if (d < 0) d = -d; exit !(d <= 0.10) }'
fi

# 4. bf16 parameter copies (fp32 master weights and compute): within 5% of fp32 after 50 steps
cat > "$work/bf16.json" <<JSON
{"bf16": {"enabled": true}, "zero_optimization": {"stage": 3},
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
 "gradient_clipping": 1.0}
JSON
[ -f "$work/plain50.log" ] || "$trainer" "${common[@]}" --steps 50 > "$work/plain50.log"
"$trainer" "${common[@]}" --steps 50 --ds-config "$work/bf16.json" > "$work/bf16.log"
a=$(awk '$1 == "step" && $2 == 50 {print $5}' "$work/plain50.log")
b=$(awk '$1 == "step" && $2 == 50 {print $5}' "$work/bf16.log")
echo "GPT-2 tiny, 50 steps: loss $a with fp32 parameters, $b with bf16 parameter copies"
awk -v a="$a" -v b="$b" 'BEGIN { d = (b - a) / a; if (d < 0) d = -d; exit !(d <= 0.05) }'

# (ZT_PROGRESS=1: the progress lines of the save and the load, as a terminal shows them)
ZT_PROGRESS=1 "$trainer" "${common[@]}" --steps 5 --checkpoint "$work/ckpt" --save-every 5 > /dev/null 2> "$work/save.err"
ZT_PROGRESS=1 "$trainer" "${common[@]}" --steps 10 --resume "$work/ckpt" --export "$work/resumed.bin" > "$work/resumed.log" 2> "$work/resumed.err"
for f in save:save resumed:load; do
  tr '\r' '\n' < "$work/${f%%:*}.err" | grep -q "^checkpoint ${f#*:} (rank 0): [0-9.]* [kMG]B in [0-9.]* s, [0-9.]* GB/s"
done
"$compare" "$work/resumed.bin" "$work/resident.bin"
grep -q "^step    6 " "$work/resumed.log"   # the resumed run started at step 6
# the resume commits without initialising (zt_runtime_expect_load) and says what it cost from
# the process start to the first step
grep -q "^resume: the first step starts [0-9.]* s after the process started (the load [0-9.]* s of it)$" "$work/resumed.log"

# 5. text -> shard -> training equals training on the text
"$trainer" --text "$text" --write-shard "$work/corpus.bin" > /dev/null
args=("${common[@]}"); args[4]=--data; args[5]=$work/corpus.bin
"$trainer" "${args[@]}" --steps 10 --export "$work/shard.bin" > /dev/null
"$compare" "$work/shard.bin" "$work/resident.bin"
# 6. evaluations between steps change nothing in training
"$trainer" "${common[@]}" --steps 10 --eval-every 3 --export "$work/eval.bin" > "$work/eval.log"
"$compare" "$work/eval.bin" "$work/resident.bin"
[ "$(grep -c '^eval | loss' "$work/eval.log")" -eq 3 ]

# 7. the newest two checkpoints stay; a resume refuses an edited manifest
"$trainer" "${common[@]}" --steps 10 --checkpoint "$work/keep" --save-every 2 --keep 2 > /dev/null
[ "$(ls -d "$work"/keep/step-* | wc -l)" -eq 2 ]
[ "$(head -n1 "$work/keep/latest")" = step-00000010 ]
sed -i 's/"step": 10,/"step": -5,/' "$work/keep/step-00000010/manifest.json"
if "$trainer" "${common[@]}" --steps 12 --resume "$work/keep" > "$work/bad.log" 2>&1; then
  echo "a resume from an edited manifest did not fail"; exit 1
fi
grep -q 'manifest.*damaged or was edited' "$work/bad.log"
! grep -q '^step' "$work/bad.log"
# 8. the CPU demo preset is batch 4 x the context (16 here), a 512M budget and NVMe in DIR
demo=(--config tiny --vocab 256 --text "$text" --lr 3e-3 --seed 7 --device cpu --steps 3)
mkdir -p "$work/demo-swap" "$work/explicit-swap"
"$trainer" "${demo[@]}" --demo "$work/demo-swap" --export "$work/demo.bin" > "$work/demo.log"
"$trainer" "${demo[@]}" --batch 4 --seq 16 --hbm 512M --nvme "$work/explicit-swap" \
  --export "$work/explicit.bin" > /dev/null
"$compare" "$work/demo.bin" "$work/explicit.bin"
grep -q "batch 4 x 16 tokens" "$work/demo.log"
grep -q "tier peaks:.*nvme [1-9]" "$work/demo.log"
# 9. activation checkpointing: the weights of 10 steps bit for bit those of keeping everything
kept=$(sed -n 's/^activations \([0-9]*\) bytes .*/\1/p' "$work/resident.log")
prev=$kept
for policy in selective full; do
  "$trainer" "${common[@]}" --steps 10 --checkpoint-activations $policy \
    --export "$work/$policy.bin" > "$work/$policy.log"
  cmp "$work/resident.bin" "$work/$policy.bin"
  now=$(sed -n 's/^activations \([0-9]*\) bytes .*/\1/p' "$work/$policy.log")
  [ -n "$now" ] && [ "$now" -lt "$prev" ] || { echo "$policy keeps $now bytes, not under $prev"; exit 1; }
  prev=$now
done
# 10. full checkpoints offloaded: bitwise, and at most two blocks' inputs on the device
ckpt=$((8 * 16 * 32 * 4)) # batch x seq x channels, fp32: one block's input
cat > "$work/cpu_ckpt.json" <<JSON
{"optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
 "gradient_clipping": 1.0, "activation_checkpointing": {"cpu_checkpointing": true}}
JSON
for where in host nvme config; do
  case $where in
    config) opts=(--ds-config "$work/cpu_ckpt.json") ;;
    nvme) opts=(--offload-activations nvme --nvme "$work/swap") ;;
    *) opts=(--offload-activations host --eval-every 3) ;; # evaluations save nothing
  esac
  "$trainer" "${common[@]}" --steps 10 --checkpoint-activations full "${opts[@]}" \
    --export "$work/off-$where.bin" > "$work/off-$where.log"
  cmp "$work/resident.bin" "$work/off-$where.bin"
  peak=$(sed -n 's/.*their device buffers at most \([0-9]*\) bytes.*/\1/p' "$work/off-$where.log")
  [ -n "$peak" ] && [ "$peak" -gt 0 ] && [ "$peak" -le $((2 * ckpt)) ] ||
    { echo "offload to $where: store's device peak '$peak', not within 2 x $ckpt"; exit 1; }
done
grep -q "and each block's input ($ckpt bytes) in host memory" "$work/off-config.log" ||
  { echo "cpu_checkpointing in the config did not offload"; exit 1; }
# a policy that keeps more than the inputs cannot offload them: refused, not ignored
if "$trainer" "${common[@]}" --steps 1 --offload-activations host 2> "$work/refused.err"; then
  echo "--offload-activations without full was accepted"; exit 1
fi
grep -q "add that option" "$work/refused.err"
echo "trainer checks passed"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Everything the GPU-side issues ask to measure, in one run on a GPU machine, logs under
# $OUT (or ./gpu-logs): the cuda-labelled tests (the same ones CI runs on the CPU stand-in,
# docs/cudasim.md: compare what each said), the multi-rank trainer check, compute-sanitizer
# memcheck on each test, and the GPU benchmarks. With the lent machines:
#   ../shared/gpu/pack
#   device run: bash .gpu/remote.sh 'bash scripts/gpu-check.sh'   (carry: [".gpu"])
# A device call may run 10 minutes: `gpu-check.sh tests`, `gpu-check.sh bench`,
# `gpu-check.sh bf16`, `gpu-check.sh d48` and `gpu-check.sh largest` run the five parts in
# five calls (or several parts in one: `gpu-check.sh tests bench`). Every step has a time limit (rc 124 in summary.txt
# when it ran out), so one slow step cannot take the others' time; GPU_CHECK_SECONDS caps the
# whole run, and GPU_CHECK_QUICK=1 runs memcheck once per test (memory errors only).
set -uo pipefail
out=${OUT:-gpu-logs}
build=${BUILD:-build-gpu}
phases=${*:-all}
want() { local p; for p in $phases; do [ "$p" = all ] || [ "$p" = "$1" ] && return 0; done; return 1; }
mkdir -p "$out"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
# GPU_CHECK_SECONDS caps the whole run (a lease's device time is short): each step's limit
# shrinks to what is left, and a step with under 10 s left is skipped (rc 124 in the summary)
end=$(( $(date +%s) + ${GPU_CHECK_SECONDS:-100000} ))
timeout() {
  local limit=$1 left=$(( end - $(date +%s) ))
  shift
  [ "$left" -ge 10 ] || { echo "skipped: GPU_CHECK_SECONDS spent"; return 124; }
  [ "$left" -ge "$limit" ] || limit=$left
  command timeout "$limit" "$@"
}
if want tests; then
timeout 240 ctest --test-dir "$build" -L cuda --timeout 120 --output-on-failure > "$out/ctest-cuda.txt" 2>&1
echo "ctest -L cuda: rc=$?" | tee -a "$out/summary.txt"
# 2 ranks, a GPU each, over NCCL, against 1 rank on the CPU (and ZeRO++ on 4 with 4+ GPUs):
# what CI runs on the CPU stand-in's GPUs. Skipped (rc 77) with fewer than 2 GPUs or no mpirun
# on the machine (the lent machines carry none of the project's Debian packages).
timeout 240 bash tests/gpt2/run_cuda_trainer_checks.sh "$build"/examples/gpt2/zt_gpt2 \
  "$build"/tests/gpt2/compare_weights mpirun --allow-run-as-root --oversubscribe \
  > "$out/cuda-ranks.txt" 2>&1
echo "zt_gpt2 --device cuda, 2 ranks (NCCL) vs 1 on the CPU: rc=$? (77: skipped) \
$(tail -1 "$out/cuda-ranks.txt")" | tee -a "$out/summary.txt"
for t in "$build"/tests/cuda/test_cuda_backend "$build"/tests/cuda/test_cuda_mlp \
         "$build"/tests/cuda/test_nccl_backend \
         "$build"/tests/gpt2/test_gpt2_cuda_kernels "$build"/tests/gpt2/test_gpt2_flash \
         "$build"/tests/gpt2/test_gpt2_cuda_train; do
  name=$(basename "$t")
  if [ -z "${GPU_CHECK_QUICK:-}" ]; then
  timeout 120 compute-sanitizer --tool memcheck "$t" > "$out/memcheck-$name.txt" 2>&1
  echo "memcheck $name: rc=$? $(grep -h 'ERROR SUMMARY' "$out/memcheck-$name.txt")" |
    tee -a "$out/summary.txt"
  fi
  # the tests provoke some CUDA API errors on purpose (registering memory twice): the same
  # run without API errors tells them apart from memory errors
  timeout 120 compute-sanitizer --tool memcheck --report-api-errors no "$t" \
    > "$out/memcheck-noapi-$name.txt" 2>&1
  echo "memcheck (memory errors only) $name: rc=$? \
$(grep -h 'ERROR SUMMARY' "$out/memcheck-noapi-$name.txt")" | tee -a "$out/summary.txt"
done
# the GPT-2 kernels run a warp per row (shuffles, __syncwarp, a block's shared partial sums)
# and the fused attention tiles in shared memory: the sanitizer's checks of barriers and of
# shared-memory races on them
for tool in synccheck racecheck; do
  for name in test_gpt2_cuda_kernels test_gpt2_flash; do
  timeout 120 compute-sanitizer --tool $tool "$build"/tests/gpt2/$name \
    > "$out/$tool-$name.txt" 2>&1
  echo "$tool $name: rc=$? \
$(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/$tool-$name.txt")" |
    tee -a "$out/summary.txt"
  done
done
fi
if want bench; then
timeout 120 "$build"/tools/ztier bench copy --backend cuda --size 1G --reps 9 --json \
  > "$out/bench-copy.txt" 2>&1
echo "bench copy: rc=$? $(tail -1 "$out/bench-copy.txt")" | tee -a "$out/summary.txt"
timeout 120 "$build"/tools/ztier bench prefetch --backend cuda --layers 12 --hidden 4096 --batch 2048 \
  --steps 7 --json > "$out/bench-prefetch.txt" 2>&1
echo "bench prefetch: rc=$? $(tail -1 "$out/bench-prefetch.txt")" | tee -a "$out/summary.txt"
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 200) > "$out/text.txt"
timeout 120 "$build"/examples/gpt2/zt_gpt2 --text "$out/text.txt" --vocab byte --seq 16 --steps 20 \
  --device cuda > "$out/zt_gpt2-cuda.txt" 2>&1
echo "zt_gpt2 --device cuda: rc=$? $(grep -E '^step +20' "$out/zt_gpt2-cuda.txt")" |
  tee -a "$out/summary.txt"
timeout 150 "$build"/tools/ztier bench gpt2 --backend cuda --config d12 --batch 16 --seq 1024 --steps 5 \
  --offload all --json > "$out/bench-gpt2.txt" 2>&1
echo "bench gpt2 --backend cuda: rc=$? $(tail -1 "$out/bench-gpt2.txt")" | tee -a "$out/summary.txt"
# the default matmuls are bf16 inputs with fp32 accumulation (issue 14's MFU goal is against
# bf16's peak); the same in TF32 beside them
timeout 150 "$build"/tools/ztier bench gpt2 --backend cuda --config d12 --batch 16 --seq 1024 --steps 5 \
  --offload all --precision tf32 --json > "$out/bench-gpt2-tf32.txt" 2>&1
echo "bench gpt2 --backend cuda --precision tf32: rc=$? $(tail -1 "$out/bench-gpt2-tf32.txt")" |
  tee -a "$out/summary.txt"
# the same with the optimizer's CPU updates left to the next step's fetches (ztier.overlap_step)
timeout 150 "$build"/tools/ztier bench gpt2 --backend cuda --config d12 --batch 16 --seq 1024 --steps 5 \
  --offload all --overlap-step on --json > "$out/bench-gpt2-overlap.txt" 2>&1
echo "bench gpt2 --backend cuda --overlap-step on: rc=$? $(tail -1 "$out/bench-gpt2-overlap.txt")" |
  tee -a "$out/summary.txt"
# issue 29: full activation checkpoints kept by the model, in pinned host memory and on NVMe
# (a scratch folder: the swap files must not come back with the logs), interleaved
act_swap=$(mktemp -d)
timeout 240 "$build"/tools/ztier bench act --backend cuda --config d12 --batch 16 --seq 1024 --steps 5 \
  --nvme-path "$act_swap" --json > "$out/bench-act.txt" 2>&1
echo "bench act --backend cuda: rc=$? $(tail -1 "$out/bench-act.txt")" | tee -a "$out/summary.txt"
rm -rf "$act_swap"
fi
if want bf16; then
# issue 40's "16 bits on the wire": the trainer with bf16.enabled end to end (16-bit
# parameters fetched to the GPU and widened there, 16-bit gradients back), d12 resident
# (parameters and optimizer on the device) and offloaded (both in pinned host memory, a 1G
# device budget), batch 16 x 1024, then the same offloaded run with fp32 parameters: MFU,
# tokens/s, fetch stall and the bytes per step of each (the step lines and the summary).
# GPU_CHECK_BF16_CONFIG/_BATCH/_SEQ/_HBM shrink it for a dry run on the stand-in.
cfg=${GPU_CHECK_BF16_CONFIG:-d12} b=${GPU_CHECK_BF16_BATCH:-16} sq=${GPU_CHECK_BF16_SEQ:-1024}
budget=${GPU_CHECK_BF16_HBM:-1G}
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 2000) > "$out/text-bf16.txt"
for run in resident-bf16 offloaded-bf16 offloaded-fp32; do
  dev=cpu enabled=true hbm=()
  case $run in resident-*) dev=none ;; *) hbm=(--hbm "$budget") ;; esac
  case $run in *-fp32) enabled=false ;; esac
  cat > "$out/$run.json" <<JSON
{"bf16": {"enabled": $enabled}, "zero_optimization": {"stage": 3,
  "stage3_param_persistence_threshold": 0,
  "offload_param": {"device": "$dev"}, "offload_optimizer": {"device": "$dev"}},
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}, "gradient_clipping": 1.0}
JSON
  timeout 150 "$build"/examples/gpt2/zt_gpt2 --config "$cfg" --vocab byte --text "$out/text-bf16.txt" \
    --device cuda --batch "$b" --seq "$sq" --steps 6 --ds-config "$out/$run.json" "${hbm[@]}" \
    > "$out/zt_gpt2-$cfg-$run.txt" 2>&1
  echo "zt_gpt2 --config $cfg $run: rc=$? $(grep -E '^step +6' "$out/zt_gpt2-$cfg-$run.txt") \
$(grep -h "fetch stall\|last step's bytes" "$out/zt_gpt2-$cfg-$run.txt" | tr -s ' ' | tr '\n' ' ')" |
    tee -a "$out/summary.txt"
done
# the bytes per step, fp32 against bf16 on the same placement (the goal: bf16 <= 0.55x)
timeout 200 bash bench/bus_bytes.sh "$build"/examples/gpt2/zt_gpt2 "$cfg" "$budget" "$b" "$sq" 3 \
  > "$out/bus-bytes-$cfg.txt" 2>&1
echo "bench/bus_bytes.sh $cfg: rc=$? $(tail -1 "$out/bus-bytes-$cfg.txt")" | tee -a "$out/summary.txt"
fi
if want d48; then
# issue 14's offload goal: d48 (1.5B) with an 8 GiB device budget and the optimizer on the
# CPU, its updates overlapped with the next forward, against the resident run. Batch 4: the
# activations (fp32, kept per layer: 41 GiB at 4 x 1024) are the trainer's, outside the
# budget, and the resident and the offloaded run hold theirs at once (at batch 8, 164 GiB)
timeout 500 "$build"/tools/ztier bench gpt2 --backend cuda --config d48 --batch 4 --seq 1024 \
  --steps 3 --offload all --hbm 8G --overlap-step on --json > "$out/bench-gpt2-d48.txt" 2>&1
echo "bench gpt2 --backend cuda --config d48 --hbm 8G: rc=$? $(tail -1 "$out/bench-gpt2-d48.txt")" |
  tee -a "$out/summary.txt"
fi
want largest || exit 0
# issue 14's largest-model goal: the GPT-2 shape d40c3072 (4.7B parameters with GPT-2's
# vocabulary; run with --vocab byte: 4,535M, on one sentence repeated) whose state fits
# the host's RAM with the optimizer on the CPU, parameters and optimizer state in pinned host
# memory, a 24G device budget; batch 2 x 1024 (its activations take most of the rest). The
# per-step lines give MFU against the bf16 peak: TFLOPS = MFU x peak.
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 2000) > "$out/text-long.txt"
mkdir -p "$out/swap"
timeout 550 "$build"/examples/gpt2/zt_gpt2 --config d40c3072 --vocab byte --text "$out/text-long.txt" \
  --device cuda --demo "$out/swap" --batch 2 --seq 1024 --hbm 24G --steps 4 \
  > "$out/zt_gpt2-d40c3072.txt" 2>&1
echo "zt_gpt2 --config d40c3072 --vocab byte (4,535M parameters): rc=$? $(grep -E '^step +4' "$out/zt_gpt2-d40c3072.txt")" |
  tee -a "$out/summary.txt"

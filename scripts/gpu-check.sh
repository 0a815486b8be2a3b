#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Everything the GPU-side issues ask to measure, in one run on a GPU machine, logs under
# $OUT (or ./gpu-logs): the cuda-labelled tests (the same ones CI runs on the CPU stand-in,
# docs/cudasim.md: compare what each said), the multi-rank trainer check, compute-sanitizer
# memcheck on each test, and the GPU benchmarks. With the lent machines:
#   ../shared/gpu/pack
#   device run: bash .gpu/remote.sh 'bash scripts/gpu-check.sh'   (carry: [".gpu"])
# A device call may run 10 minutes: `gpu-check.sh tests`, `gpu-check.sh bench`,
# `gpu-check.sh bf16`, `gpu-check.sh d48`, `gpu-check.sh scale` (at most 8 minutes: the
# measurements, each beside `ztier estimate`) and `gpu-check.sh largest` run the six parts in
# six calls (or several parts in one: `gpu-check.sh tests bench`); `bench` ends with the
# machine profiles of `ztier bench profile` at d12's and d48's shapes and `ztier plan` on them,
# which `gpu-check.sh profile` runs alone (about 3 minutes). Every step has a time limit (rc 124 in summary.txt
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
# the default matmuls are bf16 inputs with fp32 accumulation (the MFU goal is against
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
# full activation checkpoints kept by the model, in pinned host memory and on NVMe
# (a scratch folder: the swap files must not come back with the logs), interleaved
act_swap=$(mktemp -d)
timeout 240 "$build"/tools/ztier bench act --backend cuda --config d12 --batch 16 --seq 1024 --steps 5 \
  --nvme-path "$act_swap" --json > "$out/bench-act.txt" 2>&1
echo "bench act --backend cuda: rc=$? $(tail -1 "$out/bench-act.txt")" | tee -a "$out/summary.txt"
rm -rf "$act_swap"
fi
if want bench || want profile; then
# the machine profile `ztier plan` predicts from (docs/plan.md, "Accuracy on an H200"), measured
# on this GPU at d12's shape (the bench gpt2 runs above) and d48's (part d48): the rates, the
# layers' exact entries and the GEMM entries at every micro-batch dividing the batch, which
# bench/profiles/ has none of at d48's shapes (so the H200 table's d48 resident row rests on
# d12's rate). Then `ztier plan` on each for the resident run, beside the measured step.
# GPU_CHECK_PROFILE_SHAPES ("config batch seq" per line), _BACKEND and _SECONDS shrink it for a
# dry run.
prof_swap=$(mktemp -d)
while read -r pc pb ps; do
  [ -n "$pc" ] || continue
  timeout 150 "$build"/tools/ztier bench profile --backend "${GPU_CHECK_PROFILE_BACKEND:-cuda}" \
    --config "$pc" --batch "$pb" --seq "$ps" --seconds "${GPU_CHECK_PROFILE_SECONDS:-60}" \
    --nvme-path "$prof_swap" \
    --out "$out/profile-$pc-$pb.json" > "$out/bench-profile-$pc-$pb.txt" 2>&1 < /dev/null
  rc=$?
  printf '{"zero_optimization": {"stage": 3, "offload_param": {"device": "none"}, "offload_optimizer": {"device": "none"}}, "ztier": {"device_backend": "%s"}}\n' \
    "${GPU_CHECK_PROFILE_BACKEND:-cuda}" > "$out/plan-$pc-$pb-resident.json"
  timeout 60 "$build"/tools/ztier plan --config "$pc" --batch "$pb" --seq "$ps" --device-memory 141G \
    --ds-config "$out/plan-$pc-$pb-resident.json" --profile "$out/profile-$pc-$pb.json" \
    > "$out/plan-$pc-$pb-resident.txt" 2>&1 < /dev/null
  prc=$?
  echo "bench profile --config $pc --batch $pb --seq $ps: rc=$rc, $(grep -o '"op": *"gemm"' \
"$out/profile-$pc-$pb.json" 2>/dev/null | wc -l) GEMM entries; ztier plan resident: rc=$prc \
$(head -1 "$out/plan-$pc-$pb-resident.txt") ($(grep '^matmuls from' "$out/plan-$pc-$pb-resident.txt"))" |
    tee -a "$out/summary.txt"
done <<< "${GPU_CHECK_PROFILE_SHAPES:-d12 16 1024
d48 4 1024}"
rm -rf "$prof_swap"
fi
if want bf16; then
# "16 bits on the wire": the trainer with bf16.enabled end to end (16-bit
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
# the offload goal: d48 (1.5B) with an 8 GiB device budget and the optimizer on the
# CPU, its updates overlapped with the next forward, against the resident run. Batch 4: the
# activations (fp32, kept per layer: 41 GiB at 4 x 1024) are the trainer's, outside the
# budget, and the resident and the offloaded run hold theirs at once (at batch 8, 164 GiB)
timeout 500 "$build"/tools/ztier bench gpt2 --backend cuda --config d48 --batch 4 --seq 1024 \
  --steps 3 --offload all --hbm 8G --overlap-step on --json > "$out/bench-gpt2-d48.txt" 2>&1
echo "bench gpt2 --backend cuda --config d48 --hbm 8G: rc=$? $(tail -1 "$out/bench-gpt2-d48.txt")" |
  tee -a "$out/summary.txt"
fi
if want scale; then
# the runs at scale, within GPU_CHECK_SCALE_SECONDS (default 480:
# 8 minutes of GPU time; inside GPU_CHECK_SECONDS): with bf16.enabled end to end and GPT-2's
# vocabulary (50257 rows) on a real text, /usr/share/common-licenses/GPL-3 (zt_gpt2 has no
# BPE tokenizer and the machine no network: the text's bytes are the tokens, within the
# 50257-row vocabulary), d12 resident and offloaded (batch 16 x 1024), d48 resident and
# offloaded in an 8 GiB device budget (batch 8 x 1024, full activation checkpointing), and
# d40c3072 (4,689M) offloaded, batch 16 x 1024, full activation checkpointing with the
# checkpoints in pinned host memory, a linear learning-rate warm-up (WarmupLR): its loss must
# fall (FAIL otherwise). Each run's line: MFU, tokens/s, median ms/step, fetch stall, GB per
# step on each link, and beside it `ztier estimate` for the same shape, configuration and
# budget (a count: parameters' device peak, host, the policy's device total, its verdict).
# GPU_CHECK_SCALE_DRY=1 shrinks every shape (tiny, batch 4 x 16, the byte vocabulary, a 16M
# budget, lr 3e-3 so tiny's loss falls in 6 steps) for a dry run on the CPU stand-in
# (BUILD=build-asan, a ZT_CUDA_FAKE build); GPU_CHECK_SCALE_D12/_D48/_BIG (configs), _SEQ,
# _HBM, _STEPS and _LR override one thing each.
scale_saved_end=$end
scale_end=$(( $(date +%s) + ${GPU_CHECK_SCALE_SECONDS:-480} ))
[ "$scale_end" -lt "$end" ] && end=$scale_end
dry=${GPU_CHECK_SCALE_DRY:-}
c12=${GPU_CHECK_SCALE_D12:-${dry:+tiny}} c12=${c12:-d12}
c48=${GPU_CHECK_SCALE_D48:-${dry:+tiny}} c48=${c48:-d48}
cbig=${GPU_CHECK_SCALE_BIG:-${dry:+tiny}} cbig=${cbig:-d40c3072}
sq=${GPU_CHECK_SCALE_SEQ:-${dry:+16}} sq=${sq:-1024}
b12=16 b48=8 bbig=16
[ -n "$dry" ] && b12=4 b48=4 bbig=4
hbm48=${GPU_CHECK_SCALE_HBM:-${dry:+16M}} hbm48=${hbm48:-8G}
steps=${GPU_CHECK_SCALE_STEPS:-6}
lr=${GPU_CHECK_SCALE_LR:-${dry:+3e-3}} lr=${lr:-3e-4}
vocab=gpt2 nvocab=50257
[ -n "$dry" ] && vocab=byte nvocab=256
text=/usr/share/common-licenses/GPL-3
[ -r "$text" ] || { printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 2000) > "$out/text-scale.txt"
                    text=$out/text-scale.txt; }
# scale_config NAME DEVICE WARMUP: a ds config, bf16, stage 3, parameters and optimizer on
# DEVICE (none: resident), the optimizer's CPU updates overlapped with the next forward, and
# with WARMUP > 0 a linear warm-up over that many steps; the cuda device backend, as the
# trainer sets it, so that the estimate counts the GPU ops' activations (the fused
# attention's logsumexp)
scale_config() {
  local sched=""
  [ "$3" -gt 0 ] && sched=', "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0,
  "warmup_max_lr": '"$lr"', "warmup_num_steps": '"$3"', "warmup_type": "linear"}}'
  cat > "$out/scale-$1.json" <<JSON
{"bf16": {"enabled": true}, "zero_optimization": {"stage": 3,
  "stage3_param_persistence_threshold": 0,
  "offload_param": {"device": "$2", "pin_memory": true},
  "offload_optimizer": {"device": "$2", "pin_memory": true}},
 "optimizer": {"type": "AdamW", "params": {"lr": $lr}}, "gradient_clipping": 1.0,
 "ztier": {"device_backend": "cuda",
  "overlap_step": "$( [ "$2" = none ] && echo off || echo on )"}$sched}
JSON
}
# scale_run NAME LIMIT CONFIG BATCH STEPS BUDGET POLICY [trainer options...]: the trainer, then
# `ztier estimate` for the same run (BUDGET: its --hbm, or the device's 80G when resident;
# POLICY: the estimate's row, none|full|full+offload), and one summary line of both
scale_run() {
  local name=$1 limit=$2 cfg=$3 b=$4 n=$5 budget=$6 policy=$7 log est hbm=()
  shift 7
  log=$out/zt_gpt2-scale-$name.txt est=$out/estimate-scale-$name.txt
  [ "$budget" = 80G ] || hbm=(--hbm "$budget")
  timeout "$limit" "$build"/examples/gpt2/zt_gpt2 --config "$cfg" --vocab "$vocab" --text "$text" \
    --device cuda --batch "$b" --seq "$sq" --steps "$n" --ds-config "$out/scale-$name.json" \
    "${hbm[@]}" "$@" > "$log" 2>&1
  local rc=$?
  timeout 60 "$build"/tools/ztier estimate --config "$cfg" --vocab "$nvocab" --batch "$b" --seq "$sq" \
    --ds-config "$out/scale-$name.json" --device-memory "$budget" > "$est" 2>&1
  local erc=$? last mfu toks ms stall bytes e_peak e_host e_total verdict
  last=$(grep -E '^step ' "$log" | tail -1)
  mfu=$(sed -n 's/.*| MFU \([0-9.]*\).*/\1/p' <<< "$last")
  toks=$(sed -n 's/.*| *\([0-9]*\) tok\/s.*/\1/p' <<< "$last")
  ms=$(sed -n 's/^summary: .*(median \([0-9.]*\) ms).*/\1/p' "$log")
  stall=$(sed -n 's/.*fetch stall [0-9.]* s (\([0-9]*%\)).*/\1/p' "$log")
  bytes=$(sed -n "s/.*last step's bytes: h2d \([0-9]*\), d2h \([0-9]*\) (activation checkpoints saved \([0-9]*\)).*/\1 \2 \3/p" "$log" |
    awk '{printf "h2d %.2f GB, d2h %.2f GB (activation checkpoints %.2f GB)", $1/1e9, $2/1e9, $3/1e9}')
  [ -n "$bytes" ] || bytes="(no complete run: the last step line) $(grep -o 'h2d .*' <<< "$last")"
  e_peak=$(sed -n 's/.* \([0-9.]* [KMGT]*i*B\) peak under the budget.*/\1/p' "$est")
  e_host=$(sed -n 's/^  host *\([0-9.]* [KMGT]*i*B\).*/\1/p' "$est")
  e_total=$(awk -v p="$policy" '$1 == p && NF == 12 {print $10, $11}' "$est")
  verdict=$(sed -n 's/^  \(batch .* fit.*\)/\1/p' "$est")
  echo "scale $name ($cfg, batch $b x $sq, bf16): rc=$rc MFU ${mfu:-n/a}, ${toks:-?} tok/s, \
median ${ms:-?} ms/step, fetch stall ${stall:-?}, per step $bytes; $(grep -h '^  tier peaks' "$log" |
    sed 's/^ *//'); estimate (a count, rc=$erc): parameters' device peak ${e_peak:-?}, host \
${e_host:-?}, device total ($policy) ${e_total:-?}; its verdict: ${verdict:-none}" | tee -a "$out/summary.txt"
  printf '%s\n' "${ms:-}" > "$out/scale-$name.ms"
}
# scale_ratio A B: B's median step time over A's
scale_ratio() {
  echo "scale $2 / $1 (median step time): $(paste "$out/scale-$1.ms" "$out/scale-$2.ms" |
    awk '$1 > 0 && $2 > 0 {printf "%.2f", $2 / $1; next} {print "n/a"}')" | tee -a "$out/summary.txt"
}
scale_config d12-resident none 0
scale_run d12-resident 40 "$c12" "$b12" "$steps" 80G none
scale_config d12-offloaded cpu 0
scale_run d12-offloaded 40 "$c12" "$b12" "$steps" 1G none
scale_ratio d12-resident d12-offloaded
scale_config d48-resident none 0
scale_run d48-resident 80 "$c48" "$b48" 4 80G full --checkpoint-activations full
scale_config d48-offloaded cpu 0
scale_run d48-offloaded 80 "$c48" "$b48" 4 "$hbm48" full --checkpoint-activations full
scale_ratio d48-resident d48-offloaded
# the 4.5B shape: the warm-up over half the steps; its loss must fall
scale_config big cpu $(( steps / 2 ))
scale_run big 400 "$cbig" "$bbig" "$steps" 24G full+offload --checkpoint-activations full \
  --offload-activations host
first=$(grep -E '^step ' "$out/zt_gpt2-scale-big.txt" | head -1 | sed -n 's/.*| loss \([0-9.]*\) .*/\1/p')
lastl=$(grep -E '^step ' "$out/zt_gpt2-scale-big.txt" | tail -1 | sed -n 's/.*| loss \([0-9.]*\) .*/\1/p')
if [ -n "$first" ] && [ -n "$lastl" ] && awk -v a="$first" -v b="$lastl" 'BEGIN {exit !(b < a)}'; then
  echo "scale big: loss fell, $first -> $lastl" | tee -a "$out/summary.txt"
else
  echo "scale big: FAIL: the loss did not fall (first ${first:-none}, last ${lastl:-none})" |
    tee -a "$out/summary.txt"
fi
end=$scale_saved_end
fi
want largest || exit 0
# the largest-model goal: the GPT-2 shape d40c3072 (4.7B parameters with GPT-2's
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

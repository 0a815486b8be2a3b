#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ZeRO stages side by side (docs/benchmarks.md, "ZeRO stages"): the GPT-2 trainer on N ranks
# of this machine (mpirun) at --zero-stage 0, 1, 2 and 3, the stages interleaved over
# `rounds` rounds, the same model, batch and data. One row per stage: the median step time
# over the steps after the first of every round, the bytes each rank sent per step and the
# tier peaks (zt_stats, rank 0). The optimizer state is in host memory for stages 1-3 (the
# trainer's built-in configuration, its parameters offloaded for stage 3 only) and on the
# device for stage 0 (DeepSpeed's rule).
#   bench/zero_stages.sh <zt_gpt2> [config] [ranks] [steps] [rounds] [batch] [seq]
# e.g. bench/zero_stages.sh build/examples/gpt2/zt_gpt2 d12 2 6 3 4 64
set -uo pipefail
prog=${1:?usage: zero_stages.sh <zt_gpt2> [config] [ranks] [steps] [rounds] [batch] [seq]}
config=${2:-d12} ranks=${3:-2} steps=${4:-6} rounds=${5:-3} batch=${6:-4} seq=${7:-64}
text=${TEXT:-/usr/share/common-licenses/GPL-3} accum=${ACCUM:-1} # ACCUM: micro-steps per step
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$ranks")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  for s in 0 1 2 3; do
    "${mpirun[@]}" "$prog" --config "$config" --vocab byte --text "$text" --batch "$batch" \
      --seq "$seq" --steps "$steps" --accum "$accum" --zero-stage "$s" --threads 1 > "$out/s$s-r$r.txt" 2>&1 ||
      { echo "stage $s, round $r failed:"; tail -5 "$out/s$s-r$r.txt"; exit 1; }
  done
done
echo "GPT-2 $config, $ranks ranks, batch $batch x $seq, $accum micro-step(s) per step, $steps steps x $rounds rounds; $(uname -n), $(nproc) cores"
printf '| stage | ms/step (median) | waits for collectives | sent per rank per step | device peak | host peak | loss at step %d |\n' "$steps"
echo '| --- | --- | --- | --- | --- | --- | --- |'
for s in 0 1 2 3; do
  # step lines: "step N | loss L | T ms | ..."; the first step of each run is left out
  ms=$(cat "$out"/s$s-r*.txt | awk -F'|' '/^step +[0-9]+ \|/ { split($1, a, " "); if (a[2] > 1) { t = $3; sub(/ms/, "", t); print t + 0 } }' |
       sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
  sent=$(grep -h 'sent to other ranks' "$out/s$s-r1.txt" | sed 's/.*(\(.*\) per step).*/\1/')
  peaks=$(grep -h 'tier peaks' "$out/s$s-r1.txt" | sed 's/.*device \([^ ]*\) of [^,]*, host \([^,]*\),.*/\1 | \2/')
  loss=$(grep -hE "^step +$steps \|" "$out/s$s-r1.txt" | awk -F'|' '{ split($2, a, " "); print a[2] }')
  # rank 0's waits for collectives over all rounds, as a share of its run time
  waits=$(grep -h 'waits for collectives' "$out"/s$s-r*.txt | sed 's/.*communication) \([0-9.]*\) s (\([0-9]*\)%).*/\2/' | sort -n |
          awk '{ v[NR] = $1 } END { if (NR) printf "%s%% (median of %d runs)", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), NR }')
  printf '| %d | %s | %s | %s | %s | %s |\n' "$s" "$ms" "$waits" "$sent" "$peaks" "$loss"
done

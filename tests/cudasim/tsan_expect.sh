#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs tsan_race and passes when ThreadSanitizer reported a data race in each kernel named on
# the command line (the proof that the TSan build finds races between CUDA threads). TSan drops
# a report whose earlier access it can no longer replay from its trace, which happens now and
# then under load (a CI run once saw only one of the two kernels), so a kernel not named is
# looked for again in up to two more runs; a build that finds no race still fails every run.
set -uo pipefail
bin=$1; shift
missing=("$@")
out=
for run in 1 2 3; do
  out=$(TSAN_OPTIONS="halt_on_error=0 exitcode=0 history_size=7" "$bin" 2>&1)
  still=()
  for kernel in "${missing[@]}"; do
    # a report's two stacks (the access and the one it raced with), whichever came first
    if printf '%s\n' "$out" | awk '/^==================$/ { n++ } /WARNING: ThreadSanitizer: data race/ { r = n }
                                    n == r && r { print }' | grep -q " $kernel "; then
      echo "ThreadSanitizer reported the race in $kernel (run $run)"
    else
      echo "run $run: no ThreadSanitizer report names $kernel"
      still+=("$kernel")
    fi
  done
  missing=("${still[@]+"${still[@]}"}")
  [ ${#missing[@]} -eq 0 ] && exit 0
done
echo "no ThreadSanitizer report named ${missing[*]} in 3 runs; the last run printed:"
printf '%s\n' "$out" | head -60
exit 1

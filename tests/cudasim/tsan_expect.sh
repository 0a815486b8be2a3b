#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs tsan_race and passes when ThreadSanitizer reported a data race in each kernel named on
# the command line (the proof that the TSan build finds races between CUDA threads).
set -uo pipefail
bin=$1; shift
out=$(TSAN_OPTIONS="halt_on_error=0 exitcode=0 history_size=7" "$bin" 2>&1)
status=0
for kernel in "$@"; do
  # a report's two stacks (the access and the one it raced with), whichever came first
  if printf '%s\n' "$out" | awk '/^==================$/ { n++ } /WARNING: ThreadSanitizer: data race/ { r = n }
                                  n == r && r { print }' | grep -q " $kernel "; then
    echo "ThreadSanitizer reported the race in $kernel"
  else
    echo "no ThreadSanitizer report names $kernel"
    status=1
  fi
done
[ $status -eq 0 ] || printf '%s\n' "$out" | tail -40
exit $status

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checkpoints loaded on other world sizes, stages and placements (test_mpi_reshard.c): saved
# on 4 ranks at stage 3 and loaded on 1, 2, 3 and 4 (stage 2 there, then stage 1 with the
# optimizer on NVMe, and parameters on NVMe); saved on 1 rank and loaded on 4; saved at stage
# 0 on 2 ranks (every layer whole in each file) and loaded at stage 2 on 3.
#   reshard.sh <test_mpi_reshard> <mpirun ...>
set -uo pipefail
prog=$1
shift
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/reshard.XXXXXX")
trap 'rm -rf "$work"' EXIT
step() { # <ranks> <save|load> <name> <param_device> <optimizer_device> <stage>
  local ranks=$1 rc
  shift
  "${MPIRUN[@]}" -np "$ranks" "$prog" "$1" "$work/$2" "$3" "$4" "$5" > "$work/out" 2>&1
  rc=$?
  grep -v "warn \[" "$work/out"
  return "$rc"
}
MPIRUN=("$@")
fails=0
check() { step "$@" || { echo "FAILED: $*"; fails=$((fails + 1)); }; }
check 4 save a cpu cpu 3
for ranks in 1 2 3; do check "$ranks" load a cpu cpu 3; done
check 4 load a none cpu 2
check 2 load a none nvme 1
check 3 load a nvme cpu 3
check 1 save b cpu cpu 3
check 4 load b cpu cpu 3
check 2 save c none none 0
check 3 load c none cpu 2
[ "$fails" = 0 ] && echo ok
exit "$fails"

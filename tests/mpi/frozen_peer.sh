#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A frozen rank must not keep the job alive: <np> ranks of test_mpi_frozen_peer train with
# rank <frozen> stopping itself (SIGSTOP). Every other rank must get ZT_ERR_COMM (from
# training and from creating another runtime) and exit by itself with status 2 within
# ZT_COMM_TIMEOUT + 2 s of the freeze, and the whole mpirun must end within
# ZT_COMM_TIMEOUT + 15 s. The frozen process must be gone afterwards: mpirun kills it;
# anything still alive is killed here and fails the test.
#   frozen_peer.sh <np> <frozen_rank> <micro|step>[,zeropp] <test_mpi_frozen_peer> \
#                  <mpirun> [mpirun args...]
# Each rank runs under this script's --rank mode, which records the program's exit status.
set -uo pipefail

# --rank <marks> <survivors> <program> [args...]: run one rank and write its exit status and
# time to <marks>/status.<rank>. mpirun ends the whole job as soon as one rank exits with an error,
# so each waits (at most 10 s) until every survivor has recorded its own status: a rank is
# then never counted as exiting by itself when mpirun in fact killed it.
if [ "${1:-}" = --rank ]; then
  : "${OMPI_COMM_WORLD_RANK:?--rank is for ranks started by mpirun}"
  marks=$2 survivors=$3
  shift 3
  echo "rank $OMPI_COMM_WORLD_RANK: pid $$" # for the safety net below
  "$@"
  status=$?
  echo "$status $(date +%s.%N)" > "$marks/status.$OMPI_COMM_WORLD_RANK"
  shopt -s nullglob
  for ((i = 0; i < 200; i++)); do
    recorded=("$marks"/status.*)
    [ "${#recorded[@]}" -ge "$survivors" ] && break
    sleep 0.05
  done
  exit "$status"
fi

np=$1 frozen=$2 prog=$4
IFS=, read -r -a mode <<< "$3" # micro|step[,zeropp]: the program's arguments
shift 4
comm_timeout=${ZT_COMM_TIMEOUT:-3}
limit=$((comm_timeout + 15)) rank_limit=$((comm_timeout + 2))
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/frozen-peer.XXXXXX")
log=$work/out.log
mkdir "$work/marks"
: > "$log"

# Safety net: kills every process of this run (program or --rank wrapper) still alive, and
# prints each. Only processes with $prog on their command line: a pid may have been reused.
kill_leftovers() {
  sed -n 's/^rank [0-9]*: pid \([0-9]*\)$/\1/p' "$log" | while read -r pid; do
    if { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2> /dev/null | grep -qF "$prog"; then
      echo "left behind: pid $pid"
      kill -CONT "$pid" 2> /dev/null
      kill -9 "$pid" 2> /dev/null
    fi
  done
}
trap 'kill_leftovers > /dev/null; rm -rf "$work"' EXIT

start=$(date +%s.%N)
timeout -k 5 "$limit" "$@" -x ZT_COMM_TIMEOUT="$comm_timeout" -np "$np" \
  bash "$0" --rank "$work/marks" $((np - 1)) "$prog" "$frozen" "${mode[@]}" \
  < /dev/null > "$log" 2>&1
rc=$?
end=$(date +%s.%N)
cat "$log"

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
since() { awk -v a="$1" -v b="${2:-$end}" 'BEGIN { printf "%.2f", b - a }'; }
late() { awk -v a="$1" -v b="$2" -v l="$rank_limit" 'BEGIN { exit !(b - a > l) }'; }
frozen_at=$(sed -n "s/^rank $frozen: freezing before .* at \([0-9.]*\)$/\1/p" "$log")
echo "mpirun ended with status $rc after $(since "$start") s" \
     "(${frozen_at:+$(since "$frozen_at") s after the freeze, }limit $limit s," \
     "ZT_COMM_TIMEOUT=$comm_timeout)"
{ [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && fail "mpirun ran past $limit s and was killed"
[ "$rc" -eq 0 ] && fail "mpirun reported success although a rank froze"
[ -n "$frozen_at" ] || fail "rank $frozen did not freeze"
grep -q WRONG "$log" && fail "a rank reported something unexpected"
for ((r = 0; r < np; r++)); do
  [ "$r" -eq "$frozen" ] && continue
  error_at=$(sed -En "s/^rank $r: (micro-step|zt_step) -> ZT_ERR_COMM at ([0-9.]*): .*/\2/p" "$log")
  [ -n "$error_at" ] || fail "rank $r did not get ZT_ERR_COMM from training"
  grep -q "^rank $r: creating another runtime -> ZT_ERR_COMM at .*\[as expected\]$" "$log" ||
    fail "rank $r did not get ZT_ERR_COMM creating another runtime"
  read -r status exit_at < "$work/marks/status.$r" 2> /dev/null
  if [ -z "${exit_at:-}" ]; then
    fail "rank $r did not exit by itself"
    continue
  fi
  echo "rank $r: ZT_ERR_COMM $(since "$frozen_at" "$error_at") s and exit (status $status)" \
       "$(since "$frozen_at" "$exit_at") s after the freeze"
  [ "$status" = 2 ] || fail "rank $r exited with status $status instead of 2"
  late "$frozen_at" "$error_at" && fail "rank $r got its error over $rank_limit s after the freeze"
  late "$frozen_at" "$exit_at" && fail "rank $r exited over $rank_limit s after the freeze"
done
leftovers=$(kill_leftovers)
[ -z "$leftovers" ] || fail "processes outlived mpirun: $leftovers"
[ "$fails" -eq 0 ] || exit 1
echo PASS

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A peer stopped past the timeout and then resumed, at one collective (test_mpi_late_peer.c):
# rank 0 must report ZT_ERR_COMM within ZT_COMM_TIMEOUT + 1 s and exit 75 after the late
# collective completed inside it, with no AddressSanitizer report (stack frames checked after
# return too) and no crash; rank 1 must complete the collective after it resumed.
#   late_peer.sh <site> <test_mpi_late_peer> <mpirun> [mpirun args...]
set -uo pipefail
site=$1 prog=$2
shift 2
timeout_s=${ZT_COMM_TIMEOUT:-1}
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/late-peer.XXXXXX")
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_stack_use_after_return=1"
timeout -k 5 60 "$@" -x ZT_COMM_TIMEOUT="$timeout_s" -x ASAN_OPTIONS -np 2 "$prog" "$site" \
  "$work" < /dev/null > "$work/log" 2>&1
rc=$?
cat "$work/log"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
after=$(sed -n "s/^rank 0: $site -> ZT_ERR_COMM after \([0-9.]*\) s: .*\[as expected\]$/\1/p" \
          "$work/log")
[ -n "$after" ] || fail "rank 0 did not get ZT_ERR_COMM from $site"
[ -n "$after" ] && awk -v a="$after" -v l="$timeout_s" 'BEGIN { exit !(a > l + 1) }' &&
  fail "rank 0 got its error $after s in, over ZT_COMM_TIMEOUT ($timeout_s s) + 1 s"
grep -q "^rank 1: $site after resuming -> ZT_OK" "$work/log" ||
  fail "rank 1 did not complete the collective after it resumed"
grep -q "^rank 0: exiting 75$" "$work/log" || fail "rank 0 did not exit 75 by itself"
grep -q "AddressSanitizer" "$work/log" && fail "AddressSanitizer reported an error"
[ "$rc" -eq 75 ] || fail "mpirun ended with status $rc, not rank 0's 75"
[ "$fails" -eq 0 ] || exit 1
echo PASS

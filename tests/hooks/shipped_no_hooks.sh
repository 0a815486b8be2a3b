#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The shipped libraries have no fault-injection hooks (core/test_hooks.h, tiers/io.h), in the
# symbol tables or as the environment variables' names (ZT_TEST_CRASH_AT, ZT_TEST_NODE_OF),
# while the tests' archive has them (so the check looks for the right names); and a program linked against libztier.so runs a
# checkpoint save to the end with ZT_TEST_CRASH_AT=1, which kills the same program linked
# against the tests' archive at the save's first crash point.
#   shipped_no_hooks.sh <libztier.so> <libztier.a> <tests' archive> <program on libztier.so>
#                       <program on the tests' archive>
set -euo pipefail
so=$1 static=$2 test_archive=$3 shipped_prog=$4 test_prog=$5
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/hooks.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "shipped_no_hooks: FAIL: $*" >&2
  exit 1
}
hooks='zt_test_crash_point|zt_test_node_of|zt_test_delay_point|zt_io_test_'

# symbols <name> <nm arguments...>: the hook symbols nm lists, one a line
symbols() {
  local name=$1
  shift
  nm "$@" > "$work/$name.nm" 2> "$work/$name.err" || fail "nm $*: $(cat "$work/$name.err")"
  grep -E "$hooks" "$work/$name.nm" || true
}
# env_name <file>: the environment variables' names where they are in the file
env_name() {
  strings -a "$1" > "$work/strings"
  grep -E 'ZT_TEST_CRASH_AT|ZT_TEST_NODE_OF|ZT_TEST_DELAY_AT' "$work/strings" || true
}

[[ -n $(symbols test "$test_archive") ]] || fail "no hook symbol in the tests' archive $test_archive"
for name in ZT_TEST_CRASH_AT ZT_TEST_NODE_OF; do
  env_name "$test_archive" | grep -qF $name || fail "no $name in the tests' archive $test_archive"
done
for lib in "$so" "$static"; do
  found=$(symbols lib "$lib")
  [[ -z $found ]] || fail "$lib has hook symbols:
$found"
  found=$(env_name "$lib")
  [[ -z $found ]] || fail "$lib names a test hook's variable: $found"
done
found=$(symbols dynamic -D "$so")
[[ -z $found ]] || fail "$so exports hook symbols:
$found"
echo "no hook symbol, ZT_TEST_CRASH_AT or ZT_TEST_NODE_OF in $(basename "$so") and $(basename "$static")"

readelf -d "$shipped_prog" | grep -q "NEEDED.*libztier\.so" ||
  fail "$shipped_prog is not linked against libztier.so"
status=0
ZT_TEST_CRASH_AT=1 "$test_prog" "$work/test" || status=$?
[[ $status -eq 137 ]] ||
  fail "the program on the tests' archive was not killed at the first crash point (exit $status)"
echo "tests' archive: killed at the first crash point, as asked"
ZT_TEST_CRASH_AT=1 "$shipped_prog" "$work/shipped" || fail "the program on libztier.so failed"
[[ -f $work/shipped/latest ]] || fail "the program on libztier.so saved no checkpoint"
echo "libztier.so: the checkpoint saved, ZT_TEST_CRASH_AT ignored"

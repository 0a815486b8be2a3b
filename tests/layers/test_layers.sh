#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The layer check on the sources, and the check's own test: a scratch copy of the library's
# folders with one upward include added (tiers/ including runtime/) must fail it, naming the
# file and the line, and one that includes sideways (optimizer/ including prefetch/) too.
#   test_layers.sh <source dir>
set -euo pipefail
src=$1
check=$src/scripts/check-layers.py
python3 "$check" "$src"
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/layers.XXXXXX")
trap 'rm -rf "$work"' EXIT
expect_refused() { # <file> <include> <what the message must say>
  rm -rf "$work/tree" && mkdir "$work/tree"
  cp "$src/CMakeLists.txt" "$work/tree/"
  for d in core device comm tiers prefetch optimizer runtime api; do cp -r "$src/$d" "$work/tree/"; done
  echo "#include \"$2\"" >> "$work/tree/$1"
  if python3 "$check" "$work/tree" > "$work/out"; then
    echo "FAIL: $1 including $2 passed the check"; exit 1
  fi
  grep -F "$3" "$work/out" || { echo "FAIL: the message does not say '$3':"; cat "$work/out"; exit 1; }
}
expect_refused tiers/pin.c runtime/runtime.h "tiers/pin.c:$(( $(wc -l < "$src/tiers/pin.c") + 1 )): includes \"runtime/runtime.h\": runtime/ is not below tiers/"
expect_refused optimizer/adam.h prefetch/schedule.h "prefetch/ is not below optimizer/"
expect_refused core/log.c device/device.h "device/ is not below core/"
echo "test_layers: the sources pass; upward and sideways includes are refused"

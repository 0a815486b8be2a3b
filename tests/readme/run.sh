#!/usr/bin/env bash
# The README's embedding walk-through is a complete program: extract it, compile it with
# warnings as errors against the library built here, run it, and check that it trained
# (it exits non-zero otherwise) and left a checkpoint that `latest` names.
#   run.sh <README.md> <include dir> <libztier.so>
set -euo pipefail
readme=$1 include=$2 lib=$3
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/readme.XXXXXX")
trap 'rm -rf "$work"' EXIT
awk '/<!-- walkthrough:begin -->/ {on = 1; next} /<!-- walkthrough:end -->/ {on = 0}
     on && !/^```/' "$readme" > "$work/walkthrough.c"
[ "$(wc -l < "$work/walkthrough.c")" -gt 50 ] || { echo "no walk-through found in $readme"; exit 1; }
cc -std=c11 -Wall -Wextra -Werror -I"$include" -o "$work/walkthrough" "$work/walkthrough.c" \
   "$lib" -Wl,-rpath,"$(dirname "$lib")" -lm
(cd "$work" && ./walkthrough) | tee "$work/out.txt"
grep -q "^step 100 " "$work/out.txt"
[ "$(head -n1 "$work/walkthrough-checkpoints/latest")" = step-00000100 ]
echo "README walk-through: compiled, trained, checkpointed"

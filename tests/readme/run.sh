#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's short example and the embedding walk-through in docs/embedding.md are complete
# programs: extract each, compile it with warnings as errors against the library built here,
# and run it. The example must take its 5 steps; the walk-through must train (it exits
# non-zero otherwise) and leave a checkpoint that `latest` names.
#   run.sh <README.md> <docs/embedding.md> <include dir> <libztier.so>
set -euo pipefail
readme=$1 embedding=$2 include=$3 lib=$4
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/readme.XXXXXX")
trap 'rm -rf "$work"' EXIT

# extract <file> <marker> <out.c> <min lines>: the fenced C between <!-- marker:begin/end -->
extract() {
    awk -v b="<!-- $2:begin -->" -v e="<!-- $2:end -->" \
        '$0 == b {on = 1; next} $0 == e {on = 0} on && !/^```/' "$1" > "$3"
    [ "$(wc -l < "$3")" -ge "$4" ] || { echo "no $2 found in $1"; exit 1; }
}
build() {
    cc -std=c11 -Wall -Wextra -Werror -I"$include" -o "${1%.c}" "$1" \
       "$lib" -Wl,-rpath,"$(dirname "$lib")" -lm
}

extract "$readme" example "$work/example.c" 20
build "$work/example.c"
(cd "$work" && ./example) | tee "$work/example.txt"
grep -q "^step 5: grad norm " "$work/example.txt"
echo "README example: compiled, ran 5 steps"

extract "$embedding" walkthrough "$work/walkthrough.c" 50
build "$work/walkthrough.c"
(cd "$work" && ./walkthrough) | tee "$work/walkthrough.txt"
grep -q "^step 100 " "$work/walkthrough.txt"
[ "$(head -n1 "$work/walkthrough-checkpoints/latest")" = step-00000100 ]
echo "docs/embedding.md walk-through: compiled, trained, checkpointed"

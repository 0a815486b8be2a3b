#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# zt_gpt2 --export / --safetensors on a full disk: every write into the export folder fails
# with ENOSPC (an LD_PRELOAD shim, as a full disk would), after a good export of each is
# there. The run fails naming the file and the full disk; the good files are byte for byte
# what they were, and nothing else is left in the folder (no temporary, no truncated file).
#   checkpoint_export_full_disk.sh <zt_gpt2> <fail_write_shim.so>
set -uo pipefail
gpt2=$1 shim=$2
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/export-full.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
out="$work/exports-full"
mkdir "$out" "$work/keep"
run() { # <steps> [env ...]: trains, then exports both files into $out
  local steps=$1
  shift
  env "$@" "$gpt2" --config tiny --vocab byte --text /usr/share/common-licenses/GPL-3 --batch 2 \
    --seq 16 --steps "$steps" --threads 1 --device cpu --export "$out/model.bin" \
    --safetensors "$out/model.safetensors" > "$work/log" 2>&1
}
run 1 || { tail -5 "$work/log"; fail "the first export"; }
cp "$out/model.bin" "$out/model.safetensors" "$work/keep/"
[ -s "$work/keep/model.bin" ] || fail "no first export"

for which in model.bin model.safetensors; do
  # two steps: the weights differ from the files there, so a partial write would show
  run 2 LD_PRELOAD="$shim" ZT_FAIL_WRITE_MATCH="exports-full/$which"
  rc=$?
  grep "^zt_gpt2:" "$work/log" | sed 's/^/    /'
  [ "$rc" != 0 ] || fail "the export of $which on a full disk exited 0"
  cmp -s "$out/$which" "$work/keep/$which" || fail "$which changed (a truncated or partial file replaced it)"
  left=$(ls -A "$out" | grep -vx -e model.bin -e model.safetensors)
  [ -z "$left" ] || fail "left in the folder: $left"
  grep -q "$which.*No space left on device" "$work/log" || fail "no message naming $which and the full disk"
  grep -q "a file there before is as it was" "$work/log" || fail "the message does not say the old file stays"
done
echo "ok"

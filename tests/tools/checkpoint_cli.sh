#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier checkpoint inspect` on checkpoints the GPT-2 trainer saved (tiny, byte vocabulary):
# one rank and, where mpirun is given, two; a root and a step folder are intact (exit 0, the
# step, world size, layers, parameters and files as saved); a flipped byte, a truncated file,
# an edited manifest and a folder that is no checkpoint are each named (exit 1); no folder is
# a usage error (2).
#   checkpoint_cli.sh <ztier> <zt_gpt2> [mpirun ...]
set -uo pipefail
ztier=$1 gpt2=$2
shift 2
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/checkpoint-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
train() { # <root> [mpirun ...]: 4 steps, a save at 2 and 4
  local root=$1
  shift
  "$@" "$gpt2" --config tiny --vocab byte --text /usr/share/common-licenses/GPL-3 --batch 2 \
    --seq 16 --steps 4 --checkpoint "$root" --save-every 2 --threads 1 --device cpu > "$root.log" 2>&1 ||
    { tail -5 "$root.log"; fail "training into $root"; }
}
expect() { # <exit status> <text> <args...>
  local want=$1 text=$2
  shift 2
  out=$("$ztier" checkpoint "$@" 2>&1)
  rc=$?
  echo "$out" | sed 's/^/    /'
  [ "$rc" = "$want" ] || fail "ztier checkpoint $* exited $rc, expected $want"
  grep -qF -- "$text" <<<"$out" || fail "ztier checkpoint $* does not say '$text'"
}

train "$work/one"
expect 0 "step 4, world size 1, ZeRO stage 3" inspect "$work/one"
expect 0 "34176 parameters" inspect "$work/one"
expect 0 "rank-00000-of-00001.zts" inspect "$work/one"
expect 0 "step 2, world size 1" inspect "$work/one/step-00000002"
if [ $# -gt 0 ]; then
  train "$work/two" "$@" -np 2
  expect 0 "rank-00001-of-00002.zts" inspect "$work/two"
  expect 0 "world size 2" inspect "$work/two"
fi

file="$work/one/step-00000004/rank-00000-of-00001.zts"
cp "$file" "$work/good.zts"
printf '\x5a' | dd of="$file" bs=1 seek=1000 conv=notrunc status=none
expect 1 "is damaged (CRC-32" inspect "$work/one"
expect 0 "intact" inspect "$work/one/step-00000002" # the older one still loads
truncate -s 500 "$file"
expect 1 "truncated" inspect "$work/one"
cp "$work/good.zts" "$file"
expect 0 "intact" inspect "$work/one"
sed -i 's/"step": 4/"step": 5/' "$work/one/step-00000004/manifest.json"
expect 1 "is damaged or was edited: its checksum" inspect "$work/one"
mkdir "$work/empty"
expect 1 "not a checkpoint" inspect "$work/empty"
expect 2 "usage" inspect
echo "ok"

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
step() { # <ranks> <save|load|refuse> <name> <param_device> <optimizer_device> <stage> [hidden]
  local ranks=$1 rc
  shift
  "${MPIRUN[@]}" -np "$ranks" "$prog" "$1" "$work/$2" "$3" "$4" "$5" "${@:6}" > "$work/out" 2>&1
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
# after zt_runtime_expect_load (nothing initialised): the pieces straight into the homes,
# resharded and in the same layout, the parameters on the device or in host memory
check 3 resume a cpu cpu 3
check 4 resume a cpu cpu 3
check 3 resume a none cpu 2
check 2 resume c none cpu 2
# One pass: on 3 ranks the bytes the ranks ask of the disk (the runtime's count, summed over
# the ranks) against the four files' bytes: a CRC pass over every file plus the pieces is 2.5x
# here; the pieces checked as they are read, under 2x (the files are 2.5 blocks each, so the
# ranks sharing a file both read the blocks and the tail their pieces meet in)
total=$(cat "$work"/a/step-*/rank-*.zts | wc -c)
ZT_LOG=info step 3 load a cpu cpu 3 > "$work/log" || { echo "FAILED: the counted load"; fails=$((fails + 1)); }
read=$(sed -n 's/.*this rank read \([0-9]*\) bytes of its files.*/\1/p' "$work/log" | awk '{s += $1} END {print s + 0}')
echo "resharded load on 3 ranks: $read bytes read of the files' $total"
[ "$read" -gt 0 ] && [ "$read" -lt $((2 * total)) ] || { echo "FAILED: read $read bytes of $total"; fails=$((fails + 1)); }
# Damage a resharded load must refuse on every rank (the file's owner naming it, the others
# that rank), the check made from the
# pieces' CRC-32s: a byte some rank reads, a header byte and the last byte (read by the file's
# owner for the check only: no rank needs the header or the last layer's padding), a truncated
# file
damaged() { # <file> <offset|truncate> <message>
  rm -rf "$work/d" "$work"/d.*
  cp -r "$work/a" "$work/d"
  for f in "$work"/a.*; do cp "$f" "$work/d.${f##*/a.}"; done
  local f size
  f=$(echo "$work"/d/step-*/"$1")
  size=$(stat -c %s "$f")
  if [ "$2" = truncate ]; then
    truncate -s $((size - 4)) "$f"
  else
    local at=$(($2 < 0 ? size + $2 : $2))
    printf '%b' "\\x$(printf '%02x' $((0x$(xxd -s "$at" -l 1 -p "$f") ^ 0x5a)))" |
      dd of="$f" bs=1 seek="$at" conv=notrunc status=none
  fi
  if step 3 load d cpu cpu 3 > "$work/damaged"; then
    echo "FAILED: $1 $2 loaded"
    fails=$((fails + 1))
  elif ! grep -q "$3" "$work/damaged" || [ "$(grep -c "FAILED: checkpoint" "$work/damaged")" != 3 ]; then
    echo "FAILED: $1 $2 not refused on every rank, one naming the file ('$3'):"
    cat "$work/damaged"
    fails=$((fails + 1))
  fi
}
damaged rank-00001-of-00004.zts 5000 "rank-00001-of-00004.zts' is damaged"
damaged rank-00002-of-00004.zts 9 "rank-00002-of-00004.zts' is damaged"
damaged rank-00003-of-00004.zts -1 "rank-00003-of-00004.zts' is damaged"
damaged rank-00000-of-00004.zts truncate "rank-00000-of-00004.zts' has"
# one pass: the ranks read every byte of the files once (a wider model, so that the pieces
# dwarf the blocks around them)
check 4 save d cpu cpu 3 1024
check 3 load d cpu cpu 3 1024
check 1 load d none cpu 2 1024
check 1 save e cpu cpu 3 1024
check 4 load e cpu cpu 3 1024
# a damaged file is refused and nothing changes: where a rank reads it, where no rank needs
# it (c's file 1 holds layer 0 whole, rank 1 of 3 reads its middle third), in the header, and
# a file cut short
damage() { # <what> <file> <offset|truncate>
  local f
  rm -rf "$work/dmg" && cp -r "$work/c" "$work/dmg"
  f=$(ls "$work/dmg/$(head -1 "$work/c/latest")/$2")
  if [ "$3" = truncate ]; then
    truncate -s -4 "$f"
  else
    printf '\x5a' | dd of="$f" bs=1 seek="$3" conv=notrunc status=none
  fi
  step 3 refuse dmg none cpu 2 || { echo "FAILED: damage $1"; fails=$((fails + 1)); }
}
damage "a piece rank 0 reads" rank-00000-of-00002.zts 100
damage "a piece no rank needs" rank-00001-of-00002.zts 60
damage "the header" rank-00001-of-00002.zts 12
damage "the last byte" rank-00000-of-00002.zts "$(($(stat -c %s "$work/c/$(head -1 "$work/c/latest")/rank-00000-of-00002.zts") - 1))"
damage "a file cut short" rank-00001-of-00002.zts truncate
[ "$fails" = 0 ] && echo ok
exit "$fails"

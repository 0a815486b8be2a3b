#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A checkpoint on shared storage whose write fails on one rank: the GPT-2 trainer on 3 ranks
# saves every 2 steps into one folder; rank 1's file of the second save fails with ENOSPC
# (fail_write_shim.so, LD_PRELOAD on that rank alone). Every rank's save must fail: rank 1
# naming its file and the full disk, ranks 0 and 2 naming rank 1; `latest` must still name
# step 2's checkpoint, no partial or step-4 folder may be left, and the run resumes from it.
#   save_failure.sh <zt_gpt2> <fail_write_shim.so> <mpirun> [mpirun args...]
set -uo pipefail
if [ "${1:-}" = --rank ]; then # --rank <zt_gpt2> <shim> args...: one rank, the shim on rank 1
  gpt2=$2 shim=$3
  shift 3
  if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
    LD_PRELOAD=$shim ZT_IO_ENGINE=threads ZT_FAIL_WRITE_MATCH=step-00000004/rank-00001 \
      exec "$gpt2" "$@"
  fi
  exec "$gpt2" "$@"
fi
gpt2=$1 shim=$2
shift 2
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/save-failure.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work" || exit 1
model=(--config tiny --vocab byte --text /usr/share/common-licenses/GPL-3 --seq 16 --batch 6
       --threads 1 --device cpu --checkpoint "$work/ck")
"$@" -np 3 --tag-output bash "$0" --rank "$gpt2" "$shim" "${model[@]}" --steps 6 --save-every 2 > run.log 2>&1 &&
  fail "the run went on although a rank's save failed"
grep -E "checkpoint" run.log | sed 's/^/    /'
grep -q '^\[1,1\]<stderr>:zt_gpt2: checkpoint save: .*rank-00001-of-00003.zts.*No space left' run.log ||
  fail "rank 1 does not name its file and the full disk"
for r in 0 2; do
  grep -q "^\[1,$r\]<stderr>:zt_gpt2: checkpoint save: .*rank 1" run.log || fail "rank $r does not name rank 1"
done
[ "$(head -1 ck/latest)" = step-00000002 ] || fail "latest names $(head -1 ck/latest)"
ls -a ck | grep -qE "partial|step-00000004" && fail "the failed save left $(ls -a ck)"
"$@" -np 3 "$gpt2" "${model[@]}" --steps 4 --resume "$work/ck" > resume.log 2>&1 ||
  { tail -5 resume.log; fail "resuming from step 2"; }
grep -q "resumed .* at step 2 on 3 ranks" resume.log || fail "did not resume at step 2"
echo "ok"

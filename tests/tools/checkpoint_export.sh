#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier checkpoint export` of a checkpoint the GPT-2 trainer saved on 4 ranks (1 without
# mpirun) with its parameters and optimizer state on NVMe, against the trainer's own exports of
# the same weights read through the API (zt_param_read_to):
#  - llmc fp32: the same bytes; safetensors fp32: the same data section, the manifest's names
#    and shapes in the header; the llm.c file loads in the trainer on 3 ranks (--init) and
#    comes back out bitwise; the bf16 one within bf16 rounding;
#  - the export's own peak memory under 2x the largest parameter;
#  - bad input: a missing rank file, a file of another checkpoint, a folder that is none, a
#    full disk (where tmpfs can be mounted): exit 1, one line naming the file and the cause,
#    the target untouched and no partial file left.
# With --python PY: only loads the safetensors export with PY's `safetensors` package and
# compares it with the trainer's (exit 77 when PY lacks safetensors or numpy).
#   checkpoint_export.sh <ztier> <zt_gpt2> <compare_weights> [--python PY] [mpirun ...]
set -uo pipefail
ztier=$1 gpt2=$2 compare=$3
shift 3
python=
if [ "${1:-}" = "--python" ]; then
  python=$2
  shift 2
  "$python" -c "import safetensors, numpy" 2>/dev/null || { echo "skipped: $python has no safetensors"; exit 77; }
fi
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/checkpoint-export.XXXXXX")
trap 'mountpoint -q "$work/full" && umount "$work/full"; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work" || exit 1
ranks=1 init_ranks=1
[ $# -gt 0 ] && ranks=4 init_ranks=3
run() { # <ranks> <args...>
  local n=$1
  shift
  if [ $# -gt 0 ] && [ -n "${MPIRUN[*]:-}" ]; then "${MPIRUN[@]}" -np "$n" "$gpt2" "$@"; else "$gpt2" "$@"; fi
}
MPIRUN=("$@")
mkdir nvme
cat > ds.json <<'JSON'
{"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
  "offload_param": {"device": "nvme", "nvme_path": "nvme"},
  "offload_optimizer": {"device": "nvme", "nvme_path": "nvme"}}}
JSON
# d2c256: the largest parameter (the MLP's 4C x C weights, 1 MiB) outweighs the fixed costs
model=(--config d2c256 --vocab byte --text /usr/share/common-licenses/GPL-3 --seq 16 --threads 1 --device cpu)
run $ranks "${model[@]}" --batch 12 --steps 3 --checkpoint ck --save-every 3 --ds-config ds.json \
  --export api.bin --safetensors api.safetensors > train.log 2>&1 || { tail -5 train.log; fail "training"; }

export_ok() { # <args...>: exit 0, the summary line printed
  out=$("$ztier" checkpoint export ck "$@" 2>&1) || { echo "$out"; fail "export $* exited $?"; }
  grep "^exported" <<<"$out" | sed 's/^/    /'
}
data_section() { # <safetensors file>: its bytes after the 8-byte length and the header
  local n
  n=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1"
}

if [ -n "$python" ]; then
  export_ok --format safetensors --out t.safetensors
  "$python" - <<'PY' || fail "safetensors load"
from safetensors.numpy import load_file
from safetensors import safe_open
import numpy as np
api, ours = load_file("api.safetensors"), load_file("t.safetensors")
assert list(api) == list(ours), (list(api), list(ours))
for k in api:
    assert api[k].dtype == ours[k].dtype == np.float32 and api[k].shape == ours[k].shape, k
    assert np.array_equal(api[k].view(np.uint32), ours[k].view(np.uint32)), k
with safe_open("t.safetensors", "np") as f:
    assert f.metadata()["ztier_step"] == "3", f.metadata()
print("   ", len(api), "tensors loaded by safetensors", flush=True)
PY
  echo "ok"
  exit 0
fi

# llm.c, fp32: the bytes of the trainer's own export
export_ok --format llmc --out t.bin
cmp t.bin api.bin || fail "the llm.c export differs from the trainer's"
# one read of the master values only: the export's progress line (ZT_PROGRESS=1, as on a
# terminal) counts a third of the rank files' bytes after their 48-byte headers (each file is
# the header and per layer its master, m and v parts of one size; stage 3 without persistent
# parameters partitions every layer, so no layer is read twice), where format 2's export read
# the files whole for their CRC-32s (3x) and before it the checks and the copy 1 1/3 times
files=$(stat -c %s ck/"$(head -1 ck/latest)"/rank-*.zts | awk '{s += $1 - 48} END {print s / 3}')
want=$(awk -v b="$files" 'BEGIN {u = "kB"; v = b / 1000; if (v >= 1000) {v /= 1000; u = "MB"}
  if (v >= 1000) {v /= 1000; u = "GB"}; printf "%.2f %s", v, u}')
ZT_PROGRESS=1 "$ztier" checkpoint export ck --format llmc --out p.bin 2> progress.err > /dev/null ||
  fail "export with ZT_PROGRESS=1"
tr '\r' '\n' < progress.err | grep -q "^checkpoint export (read): $want in [0-9.]* s, [0-9.]* GB/s" ||
  { cat -v progress.err | tail -c 600; fail "the export's progress line does not count the master values ($want) read once"; }
cmp p.bin api.bin || fail "the llm.c export with a progress line differs"
# safetensors, fp32: the same data, the manifest's names and shapes
export_ok --format safetensors --out t.safetensors
cmp <(data_section t.safetensors) <(data_section api.safetensors) || fail "safetensors data differ"
head -c 4096 t.safetensors | grep -qF '"h.1.mlp.c_fc.weight":{"dtype":"F32","shape":[1024,256]' ||
  fail "the safetensors header lacks h.1.mlp.c_fc.weight's shape"
# the export's own memory: the largest parameter (1 MiB) in fp32, + the 1 MiB buffer of the checks
export_ok --format safetensors --dtype bf16 --out b.safetensors
own=$(grep -o "of which the export's [0-9.]* [KMG]iB" <<<"$out" | awk '{v=$4; u=$5; print v*(u=="KiB"?1024:u=="MiB"?1048576:1073741824)}')
[ -n "$own" ] && awk -v o="$own" 'BEGIN{exit !(o < 2 * 1048576 * 2)}' || fail "the export's own peak memory is $own bytes"
# the llm.c files load in the trainer on another number of ranks and come back out
export_ok --format llmc --dtype bf16 --out b.bin
for f in t b; do
  run $init_ranks "${model[@]}" --batch 12 --steps 0 --init $f.bin --export re-$f.bin > init-$f.log 2>&1 ||
    { tail -3 init-$f.log; fail "--init $f.bin"; }
done
cmp t.bin re-t.bin || fail "the fp32 llm.c file did not load bitwise"
# a file of another shape, or cut short: refused on every rank, naming the file and the mismatch
run $init_ranks --config tiny --vocab byte --text /usr/share/common-licenses/GPL-3 --seq 16 \
  --threads 1 --device cpu --batch 12 --steps 0 --init t.bin > bad-init.log 2>&1 && fail "--init of another shape"
grep -q "t.bin' holds a model with max_seq 1024, this one has 16" bad-init.log || { cat bad-init.log; fail "--init of another shape: no reason"; }
head -c 5000 t.bin > short.bin
run $init_ranks "${model[@]}" --batch 12 --steps 0 --init short.bin > short-init.log 2>&1 && fail "--init of a short file"
grep -q "cannot read '.*short.bin': it ends early" short-init.log || { cat short-init.log; fail "--init of a short file: no reason"; }
"$compare" api.bin re-b.bin 0.004 || fail "the bf16 llm.c file is not the weights rounded to bf16"
"$compare" api.bin re-b.bin 0.0001 > /dev/null && fail "the bf16 export was not rounded"

# bad input: exit 1, one line naming the file, the target untouched, nothing partial left
echo "old" > target
expect_bad() { # <text> <dir> <args...>
  local text=$1 dir=$2
  shift 2
  out=$("$ztier" checkpoint export "$dir" --out target "$@" 2>&1)
  rc=$?
  grep "export:" <<<"$out" | sed 's/^/    /'
  [ $rc = 1 ] || fail "export of $dir exited $rc, expected 1"
  grep -F "export:" <<<"$out" | grep -qF -- "$text" || fail "the export of $dir does not say '$text'"
  [ "$(cat target)" = "old" ] && [ ! -e target.partial ] || fail "the failed export touched its target"
}
step=$(head -1 ck/latest)
last=$(ls ck/"$step"/rank-*.zts | tail -1)
mv "$last" "$work/saved.zts"
expect_bad "$(basename "$last")' is missing: No such file" ck --format llmc
cp "$work/saved.zts" "$last"
mkdir other && cp -r ck/"$step" other/
if [ $ranks -gt 1 ]; then # another rank's file in rank 0's place
  cp "$last" other/"$step"/"$(basename "$(ls ck/"$step"/rank-*.zts | head -1)")"
  expect_bad "is damaged (CRC-32" other/"$step" --format safetensors
  cp ck/"$step"/rank-*.zts other/"$step"/
fi
truncate -s 1000 other/"$step"/"$(basename "$last")"
expect_bad "truncated" other/"$step" --format safetensors
mkdir empty
expect_bad "no checkpoint in" empty --format safetensors
"$ztier" checkpoint export ck --format onnx > /dev/null 2>&1
[ $? = 2 ] || fail "an unknown format is not a usage error"
mkdir full
if mount -t tmpfs -o size=256k tmpfs full 2>/dev/null; then
  echo "old" > full/target
  out=$("$ztier" checkpoint export ck --format safetensors --out full/target 2>&1)
  rc=$?
  grep "export:" <<<"$out" | sed 's/^/    /'
  [ $rc = 1 ] && grep -qF "the disk is full" <<<"$out" || fail "a full disk: exit $rc"
  [ "$(cat full/target)" = "old" ] && [ ! -e full/target.partial ] || fail "a full disk touched the target"
  umount full
else
  echo "    skipped the full disk (tmpfs cannot be mounted here)"
fi
echo "ok"

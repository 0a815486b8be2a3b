#!/usr/bin/env bash
# A save where io_uring refuses to register the checkpoint writer's buffers (a memlock limit of
# 64 KiB, and for root CAP_IPC_LOCK dropped, which would lift the limit): the trainer says so
# once at info level, naming the limit and the fix, and the checkpoint is byte for byte the one
# a save with registered buffers writes (same seed, same steps).
#   checkpoint_memlock.sh <zt_gpt2>
set -euo pipefail
gpt2=$1
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/ckpt-memlock.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 200) > "$work/text.txt"
run=("$gpt2" --config tiny --batch 2 --seq 16 --steps 2 --threads 2 --device cpu
     --text "$work/text.txt" --save-every 2)
limited() { # the command with a 64 KiB memlock limit that applies (root: without CAP_IPC_LOCK)
  if [ "$(id -u)" = 0 ]; then
    (ulimit -l 64 && capsh --drop=cap_ipc_lock -- -c '"$@"' -- "$@")
  else
    (ulimit -l 64 && "$@")
  fi
}
ZT_LOG=info "${run[@]}" --checkpoint "$work/registered" > "$work/registered.txt" 2>&1 ||
  { tail -5 "$work/registered.txt"; exit 1; }
ZT_LOG=info limited "${run[@]}" --checkpoint "$work/refused" > "$work/refused.txt" 2>&1 ||
  { tail -5 "$work/refused.txt"; exit 1; }
msg='checkpoint writes run from unregistered buffers: io_uring refused'
if grep -q "$msg" "$work/registered.txt"; then
  echo "checkpoint_memlock: the registered save said it was refused"; exit 1
fi
n=$(grep -c "$msg.*raise the memlock limit (ulimit -l)" "$work/refused.txt" || true)
[ "$n" = 1 ] || { echo "checkpoint_memlock: the refusal said $n times, not once:"; cat "$work/refused.txt"; exit 1; }
files=0
for f in "$work/registered/step-00000002"/*; do
  cmp "$f" "$work/refused/step-00000002/${f##*/}" || exit 1
  files=$((files + 1))
done
[ "$files" -ge 2 ] || { echo "checkpoint_memlock: $files files saved"; exit 1; }
echo "checkpoint_memlock: refused once, said once; $files files byte for byte as registered"

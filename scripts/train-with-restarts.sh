#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs a multi-rank training job and, when it loses a rank, resumes it from its last
# checkpoint on the ranks still available: the loop a batch scheduler's requeue would run.
#
#   train-with-restarts.sh --checkpoint DIR --np N [--min-np M] [--restarts K]
#                          [--ranks-cmd CMD] [--grace S] -- LAUNCH...
#
# LAUNCH is the launcher and the trainer, with {np} where the rank count goes and {wrap} in
# front of the trainer, e.g.
#   mpirun --enable-recovery -x ZT_COMM_TIMEOUT -np {np} {wrap} zt_gpt2 --config d12 --batch 12
# The script adds `--checkpoint DIR` to each run, and `--resume DIR` once DIR holds one.
# {wrap} records each rank's exit status (its rank from OMPI_COMM_WORLD_RANK, PMI_RANK or
# SLURM_PROCID), so the outcome does not depend on the launcher's own exit status:
#  - every rank 0: done, exit 0;
#  - a rank exited 75 (zt_gpt2's status for a lost rank), died of a signal or recorded nothing
#    (its node is gone): restart, with --ranks-cmd's answer (it prints a number), or else the
#    ranks that recorded an exit, as the new {np}; below --min-np (default 1) or after
#    --restarts (default 3) restarts, stop with 75;
#  - any other status (bad input, a full disk): stop with that status; a restart would fail
#    alike.
# Once one rank has failed, the launcher gets --grace seconds (default 30) after the last rank
# recorded its exit to end by itself, then is stopped (Open MPI 4.1's mpirun may keep running
# under --enable-recovery). The global batch stays the trainer's --batch: choose one that every
# rank count you may resume on divides.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

if [ "${1:-}" = --wrap ]; then # --wrap STATUS_DIR -- TRAINER...: one rank
  marks=$2
  shift 3
  rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}
  "$@"
  status=$?
  echo "$status $(date +%s.%N)" > "$marks/status.$rank"
  exit "$status"
fi

usage() { echo "usage: $0 --checkpoint DIR --np N [--min-np M] [--restarts K] [--ranks-cmd CMD] [--grace S] -- LAUNCH... ({np}, {wrap})" >&2; exit 2; }
ckpt= np= min_np=1 restarts=3 ranks_cmd= grace=30
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  case $1 in
  --checkpoint) ckpt=$2 ;;
  --np) np=$2 ;;
  --min-np) min_np=$2 ;;
  --restarts) restarts=$2 ;;
  --ranks-cmd) ranks_cmd=$2 ;;
  --grace) grace=$2 ;;
  *) usage ;;
  esac
  shift 2 || usage
done
[ "${1:-}" = -- ] && [ -n "$ckpt" ] && [ -n "$np" ] || usage
shift
[ $# -gt 0 ] || usage
launch=("$@")
marks=$(mktemp -d "${TMPDIR:-/tmp}/train-with-restarts.XXXXXX")
trap 'rm -rf "$marks"' EXIT
say() { echo "train-with-restarts: $*" >&2; }

# One run on $np ranks; sets failed_rank_count (ranks that recorded an exit) and verdict.
run_once() {
  rm -f "$marks"/status.*
  local cmd=() a resume=()
  [ -s "$ckpt/latest" ] && resume=(--resume "$ckpt")
  for a in "${launch[@]}"; do
    case $a in
    {np}) cmd+=("$np") ;;
    {wrap}) cmd+=(bash "$here" --wrap "$marks" --) ;;
    *) cmd+=("$a") ;;
    esac
  done
  say "run $attempt on $np ranks${resume[*]:+, resuming from $ckpt}"
  "${cmd[@]}" --checkpoint "$ckpt" "${resume[@]}" &
  local pid=$! last_count=0 last_change=$SECONDS
  while kill -0 "$pid" 2> /dev/null; do
    sleep 0.5
    shopt -s nullglob
    local files=("$marks"/status.*) bad=0 f
    for f in "${files[@]}"; do [ "$(cut -d' ' -f1 "$f")" != 0 ] && bad=1; done
    [ "${#files[@]}" != "$last_count" ] && last_count=${#files[@]} last_change=$SECONDS
    if [ "$bad" = 1 ] && [ $((SECONDS - last_change)) -ge "$grace" ]; then
      say "a rank failed and the launcher is still running $grace s after the last exit: stopping it"
      kill -TERM "$pid" 2> /dev/null
      sleep 5
      kill -KILL "$pid" 2> /dev/null
    fi
  done
  wait "$pid" 2> /dev/null
  shopt -s nullglob
  local files=("$marks"/status.*) f s lost=0 other=0
  recorded=${#files[@]}
  for f in "${files[@]}"; do
    read -r s t < "$f"
    say "rank ${f##*.} exited with status $s at $t"
    if [ "$s" = 75 ] || [ "$s" -ge 128 ]; then lost=1; elif [ "$s" != 0 ]; then other=$s; fi
  done
  [ "$recorded" -lt "$np" ] && lost=1
  if [ "$other" != 0 ]; then verdict=$other; elif [ "$lost" = 1 ]; then verdict=lost; else verdict=0; fi
}

attempt=1
while :; do
  run_once
  case $verdict in
  0) say "done after $attempt run(s)"; exit 0 ;;
  lost) ;;
  *) say "a rank exited with status $verdict (not a lost rank): not restarting"; exit "$verdict" ;;
  esac
  if [ "$attempt" -gt "$restarts" ]; then
    say "lost a rank again after $restarts restarts: giving up"
    exit 75
  fi
  survivors=0
  for f in "$marks"/status.*; do
    s=$(cut -d' ' -f1 "$f")
    { [ "$s" = 0 ] || [ "$s" = 75 ]; } && survivors=$((survivors + 1))
  done
  if [ -n "$ranks_cmd" ]; then np=$(bash -c "$ranks_cmd"); else np=$survivors; fi
  if ! [ "$np" -ge "$min_np" ] 2> /dev/null; then
    say "lost a rank; ${np:-no} ranks left, fewer than --min-np $min_np: giving up"
    exit 75
  fi
  say "lost a rank ($recorded of the run's ranks recorded an exit, $survivors of them alive); restarting on $np"
  attempt=$((attempt + 1))
done

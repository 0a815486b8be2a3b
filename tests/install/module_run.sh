#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A program linked with libztier.so runs on a backend from its module: it succeeds and ztier
# logged that the backend came from libztier-<backend>.so beside libztier.so (<libdir>). Skips
# (77) where the cuda backend finds no GPU (a real CUDA build on a machine without one).
#   module_run.sh <backend> <libdir> <command...>
set -uo pipefail
backend=$1
libdir=$2
shift 2
out=$(ZT_LOG=info "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [[ $rc -ne 0 && $out == *"no usable GPU"* && $out == *"the cuda backend from"* ]]; then
  echo "module_run: the cuda module loaded; no GPU to run on: skipped"
  exit 77
fi
[[ $rc -eq 0 ]] || { echo "module_run: FAIL: exit $rc" >&2; exit 1; }
want="the $backend backend from $libdir/libztier-$backend.so"
[[ $out == *"$want"* ]] || { echo "module_run: FAIL: no '$want' in the log" >&2; exit 1; }
echo "module_run: $backend from its module ok"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# zt_gpt2 refuses integer options out of range or not integers, naming the option and the
# range, before it trains anything; a good command line still trains; --nvme's folder is
# text, whatever it looks like ("1234", "null").
#   bad_options.sh <zt_gpt2>
set -euo pipefail
trainer=$1
text=/usr/share/common-licenses/GPL-3
[ -r "$text" ] || { echo "no $text: skipped"; exit 77; }
for bad in "--steps -5" "--batch 0" "--accum -1" "--threads -4" "--seq 1" "--steps 99999999999" \
           "--eval-every x" "--vocab 0" "--keep 0"; do
  read -r opt val <<< "$bad"
  if out=$("$trainer" --config tiny --text "$text" "$opt" "$val" 2>&1); then
    echo "FAIL: zt_gpt2 accepted $bad"; exit 1
  fi
  grep -q -- "zt_gpt2: $opt '$val': give an integer from" <<< "$out" ||
    { echo "FAIL: $bad: $out"; exit 1; }
done
for lr in abc 1e-3x nan; do
  if out=$("$trainer" --config tiny --text "$text" --lr "$lr" 2>&1); then
    echo "FAIL: zt_gpt2 accepted --lr $lr"; exit 1
  fi
  grep -q -- "zt_gpt2: --lr '$lr': give a number" <<< "$out" || { echo "FAIL: --lr $lr: $out"; exit 1; }
done
out=$("$trainer" --config tiny --vocab byte --text "$text" --seq 16 --batch 2 --steps 1 2>&1)
grep -q '^step *1 ' <<< "$out" || { echo "FAIL: a good command line: $out"; exit 1; }
# User text reaches the configuration as text (the typed setters), never parsed as JSON: a
# folder named "1234" or "null" is that folder; a missing one is named in the refusal.
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/bad-options.XXXXXX")
trap 'rm -rf "$work"' EXIT
for name in 1234 null; do
  nvme_run() { (cd "$work" && "$trainer" --config tiny --vocab byte --text "$text" --seq 16 \
                 --batch 2 --steps 1 --nvme "$name" 2>&1); }
  if out=$(nvme_run); then
    echo "FAIL: --nvme $name with no such folder was accepted: $out"; exit 1
  fi
  grep -q "NVMe swap folder '$name' cannot be used" <<< "$out" ||
    { echo "FAIL: --nvme $name (missing) is not named as the folder: $out"; exit 1; }
  mkdir "$work/$name"
  out=$(nvme_run) || { echo "FAIL: --nvme $name (an existing folder): $out"; exit 1; }
  grep -q '^step *1 ' <<< "$out" || { echo "FAIL: --nvme $name: $out"; exit 1; }
  grep -Eq 'written [0-9.]*[1-9][0-9.]*M' <<< "$out" ||
    { echo "FAIL: --nvme $name wrote nothing to NVMe: $out"; exit 1; }
done
echo "zt_gpt2: every bad integer option named; folders named 1234 and null used as folders"

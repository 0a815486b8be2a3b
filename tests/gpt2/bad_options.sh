#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# zt_gpt2 refuses integer options out of range or not integers, naming the option and the
# range, before it trains anything; a good command line still trains.
#   bad_options.sh <zt_gpt2>
set -euo pipefail
trainer=$1
text=/usr/share/common-licenses/GPL-3
[ -r "$text" ] || { echo "no $text: skipped"; exit 77; }
for bad in "--steps -5" "--batch 0" "--accum -1" "--threads -4" "--seq 1" "--steps 99999999999" \
           "--eval-every x" "--vocab 0"; do
  read -r opt val <<< "$bad"
  if out=$("$trainer" --config tiny --text "$text" "$opt" "$val" 2>&1); then
    echo "FAIL: zt_gpt2 accepted $bad"; exit 1
  fi
  grep -q -- "zt_gpt2: $opt '$val': give an integer from" <<< "$out" ||
    { echo "FAIL: $bad: $out"; exit 1; }
done
out=$("$trainer" --config tiny --vocab byte --text "$text" --seq 16 --batch 2 --steps 1 2>&1)
grep -q '^step *1 ' <<< "$out" || { echo "FAIL: a good command line: $out"; exit 1; }
echo "zt_gpt2: every bad integer option named"

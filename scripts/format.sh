#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The sources in the layout of .clang-format (clang-format 14, Debian 12's).
#   scripts/format.sh          reformats every C, C++ and CUDA source in place
#   scripts/format.sh --check  lists the files that differ and exits 1 (tests/format)
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then echo "format: no clang-format (make deps installs it)"; exit 77; fi
major=$("$cf" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$major" != 14 ]; then
  echo "format: $cf is version $major; the layout is defined by clang-format 14"; exit 77
fi
mapfile -t files < <(find api core device comm tiers prefetch optimizer runtime models examples \
  tools tests cudasim -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' \) \
  2> /dev/null | sort)
if [ "${1:-}" != --check ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$cf" --dry-run --Werror "$f" > /dev/null 2>&1; then
    echo "format: $f differs from .clang-format's layout"; bad=1
  fi
done
if [ "$bad" = 1 ]; then echo "format: run scripts/format.sh to reformat"; exit 1; fi
echo "format: ${#files[@]} files in .clang-format's layout"

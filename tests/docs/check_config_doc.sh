#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails when docs/config.md is not what tools/config_doc.c prints now (a key added, changed
# or documented since the file was last generated).
#   check_config_doc.sh <zt_config_doc> <docs/config.md>
set -euo pipefail
gen=$1 doc=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$gen" > "$out"
if ! diff -u "$doc" "$out"; then
    echo "docs/config.md is out of date: run \`$gen > $doc\` to regenerate it"
    exit 1
fi
echo "docs/config.md matches $(basename "$gen")"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A scratch Python venv with the test readers (safetensors, numpy) that checkpoint_export_python
# loads the export with. Never fails `make test`: without PyPI that test is skipped (77).
#   test-venv.sh DIR
dir=$1
if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "import safetensors, numpy" 2>/dev/null; then
  exit 0
fi
if python3 -m venv "$dir" > /dev/null 2>&1 &&
  timeout 300 "$dir/bin/pip" install -q safetensors numpy > /dev/null 2>&1; then
  echo "test-venv: safetensors and numpy in $dir"
else
  echo "test-venv: no safetensors reader (no python3-venv or no PyPI): checkpoint_export_python will be skipped"
fi
exit 0

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages ztier needs to build, test and run its demo, skipping the ones
# already present. Uses sudo when not run as root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libjansson-dev   # config parsing
  liburing-dev     # NVMe tier I/O engine
  libnuma-dev      # NUMA placement of pinned buffers and optimizer threads
  zlib1g-dev       # CRC-32 of checkpoint files
  libisal-dev      # ISA-L's faster CRC-32, the same values (optional: zlib without it)
  libcmocka-dev    # test framework
  libopenmpi-dev openmpi-bin  # mpi comm backend and multi-rank tests
  libopenblas-dev  # GPT-2 example matmuls
  fio              # the NVMe benchmark's reference
  libcap2-bin      # capsh: a test drops CAP_IPC_LOCK to meet a memlock limit as root
  python3          # the layer, docs and config-reference checks
  python3-venv     # the scratch venv of the safetensors reader (scripts/test-venv.sh)
  clang-format     # the layout check (tests/format)
  abigail-tools    # abidw/abidiff: the ABI check against abi/libztier.abi (scripts/abi-check.sh)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

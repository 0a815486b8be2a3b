#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the build tree to a temporary prefix, then builds and runs consumers of it, the
# way docs/linking.md tells users to:
#  - find_package(ztier): ztier::ztier (shared) and ztier::ztier_static. Their compile lines
#    must carry no MPI or CUDA include directory or definition.
#  - pkg-config: `--cflags` must name no MPI or CUDA path, and ztier.h must compile with
#    -Wall -Wextra -Werror and those flags alone. A shared consumer linked with the documented
#    -Wl,-rpath,$(pkg-config --variable=libdir ztier) runs as is; one linked without it must
#    fail to start ("libztier.so.0: cannot open") and run with LD_LIBRARY_PATH=<libdir>.
#    A static consumer links libztier.a with `pkg-config --static --libs`.
#   run.sh <build-dir> <source-dir-of-this-folder>
set -euo pipefail
build=$1
here=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Nothing from the caller's environment may add a run-time search path: LD_LIBRARY_PATH would
# hide a missing rpath, LD_RUN_PATH would give one to a program linked without -rpath.
unset LD_LIBRARY_PATH LD_RUN_PATH

fail() {
  echo "install consumers: FAIL: $*" >&2
  exit 1
}

# mpi_cuda_words <flags>: prints, one a line, the include directories, definitions and
# absolute paths in <flags> that mention MPI or CUDA (case-insensitive). The temporary
# directory and this folder are replaced first: their names are not ztier's to choose.
mpi_cuda_words() {
  local text=${1//"$work"/<work>} w
  text=${text//"$here"/<here>}
  local -a words
  read -ra words <<<"$text"
  for w in "${words[@]}"; do
    case "$w" in
      -I* | -isystem* | -iquote* | -idirafter* | -D* | /*)
        case "${w,,}" in *mpi* | *cuda*) printf '%s\n' "$w" ;; esac ;;
    esac
  done
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null

# --- CMake package --------------------------------------------------------------------------
cmake -S "$here/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
cmake --build "$work/cmake-build" >/dev/null
commands=$(grep '"command"' "$work/cmake-build/compile_commands.json" | sed 's/^ *"command": *//')
[[ $(grep -c . <<<"$commands") -eq 2 ]] || fail "expected 2 compile commands, got: $commands"
bad=$(mpi_cuda_words "$commands")
[[ -z $bad ]] || fail "find_package(ztier) consumers compile with MPI/CUDA flags:
$bad
compile commands:
$commands"
"$work/cmake-build/consumer_shared"
"$work/cmake-build/consumer_static"

# --- pkg-config -----------------------------------------------------------------------------
PKG_CONFIG_PATH=$(find "$work/prefix" -name ztier.pc -printf '%h\n' | head -n1)
[[ -n $PKG_CONFIG_PATH ]] || fail "no ztier.pc installed under $work/prefix"
export PKG_CONFIG_PATH
for mode in "" "--static"; do
  # shellcheck disable=SC2086
  cflags=$(pkg-config $mode --cflags ztier)
  bad=$(mpi_cuda_words "$cflags")
  [[ -z $bad ]] || fail "\`pkg-config ${mode:+$mode }--cflags ztier\` names MPI/CUDA paths:
$bad
full flags: $cflags"
done
src="$here/consumer/consumer.c"
libdir=$(pkg-config --variable=libdir ztier)
[[ -f $libdir/libztier.so.0 ]] || fail "pkg-config's libdir ($libdir) has no libztier.so.0"

# ztier.h with pkg-config's flags only, warnings as errors.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -c -o "$work/consumer_pc.o" "$src" $(pkg-config --cflags ztier)

# Shared, with the documented rpath: runs without LD_LIBRARY_PATH.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/consumer_pc" "$src" $(pkg-config --cflags --libs ztier) \
   -Wl,-rpath,"$(pkg-config --variable=libdir ztier)"
readelf -d "$work/consumer_pc" | grep -E '\((RPATH|RUNPATH)\)' | grep -qF "[$libdir]" ||
  fail "consumer_pc has no rpath to $libdir: $(readelf -d "$work/consumer_pc" | grep -E 'RPATH|RUNPATH')"
"$work/consumer_pc" || fail "consumer_pc, linked with -Wl,-rpath,$libdir, did not run"

# Shared, without rpath: the loader cannot find libztier.so.0 (the .pc adds no rpath, on
# purpose) until LD_LIBRARY_PATH names libdir.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/consumer_pc_norpath" "$src" $(pkg-config --cflags --libs ztier)
if readelf -d "$work/consumer_pc_norpath" | grep -qE '\((RPATH|RUNPATH)\)'; then
  fail "consumer_pc_norpath got an rpath from pkg-config: $(readelf -d "$work/consumer_pc_norpath" | grep -E 'RPATH|RUNPATH')"
fi
rc=0
out=$("$work/consumer_pc_norpath" 2>&1) || rc=$?
if [[ $rc -ne 127 || $out != *"libztier.so.0: cannot open shared object file"* ]]; then
  fail "consumer_pc_norpath without LD_LIBRARY_PATH: expected the loader to fail on libztier.so.0 (exit 127), got exit $rc: $out"
fi
echo "consumer_pc_norpath without LD_LIBRARY_PATH fails as expected: $out"
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc_norpath" ||
  fail "consumer_pc_norpath did not run with LD_LIBRARY_PATH=$libdir"

# Static: libztier.a (-l:libztier.a instead of -lztier, which picks libztier.so) and its
# private dependencies from `pkg-config --static --libs`.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/consumer_pc_static" "$src" $(pkg-config --cflags ztier) \
   $(pkg-config --static --libs ztier | sed 's/-lztier\b/-l:libztier.a/')
if readelf -d "$work/consumer_pc_static" | grep -q 'NEEDED.*libztier'; then
  fail "consumer_pc_static needs libztier.so: $(readelf -d "$work/consumer_pc_static" | grep NEEDED)"
fi
"$work/consumer_pc_static"
echo "install consumers: find_package shared+static, pkg-config shared (rpath, LD_LIBRARY_PATH)+static ok"

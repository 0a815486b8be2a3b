#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the build tree to a temporary prefix, then builds and runs consumers of it, the
# way docs/linking.md tells users to:
#  - libztier.so needs no CUDA runtime, NCCL or MPI (readelf: no such NEEDED entry), nor does a
#    CPU-only program linked with it (ldd); its backends that do are modules beside it.
#  - The shared route on a machine with only the runtime libraries: find_package(ztier) with
#    MPI, CUDAToolkit and PkgConfig disabled and no package registry, and pkg-config with
#    PKG_CONFIG_LIBDIR naming only the prefix (no system .pc file visible), each builds a
#    consumer of libztier.so that runs.
#  - find_package(ztier COMPONENTS static): ztier::ztier and ztier::ztier_static. Their compile
#    lines must carry no MPI or CUDA include directory or definition.
#  - pkg-config: `--cflags` must name no MPI or CUDA path, and ztier.h must compile with
#    -Wall -Wextra -Werror and those flags alone. A shared consumer linked with the documented
#    -Wl,-rpath,$(pkg-config --variable=libdir ztier) runs as is; one linked without it must
#    fail to start ("libztier.so.<major>: cannot open") and run with LD_LIBRARY_PATH=<libdir>.
#    A static consumer links libztier.a with ztier-static.pc (`--libs` and `--static --libs`).
#  - The cuda module (when built): loaded from beside libztier.so; with it deleted, or with a
#    library it needs missing, or of another module ABI, `device_backend: cuda` fails with a
#    message naming libztier-cuda.so and the cause.
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

# no_gpu_libs <what> <file> <ldd|readelf>: fails if <file> needs the CUDA runtime, NCCL or MPI.
no_gpu_libs() {
  local list
  if [[ $3 == ldd ]]; then list=$(ldd "$2"); else list=$(readelf -d "$2" | grep NEEDED); fi
  if grep -E 'libcudart|libnccl|libmpi|libcuda\.' <<<"$list"; then
    fail "$1 ($2) needs the CUDA runtime, NCCL or MPI:
$list"
  fi
}

cmake --install "$build" --prefix "$work/prefix" >/dev/null
pcdir=$(find "$work/prefix" -name ztier.pc -printf '%h\n' | head -n1)
[[ -n $pcdir ]] || fail "no ztier.pc installed under $work/prefix"
[[ -f $pcdir/ztier-static.pc ]] || fail "no ztier-static.pc beside $pcdir/ztier.pc"
libdir=$(dirname "$pcdir")
# The soname and the package versions follow the version in ztier.h (docs/abi.md).
header_version=$(for p in MAJOR MINOR PATCH; do
  sed -n "s/^#define ZT_VERSION_$p \([0-9]*\)$/\1/p" "$here/../../api/ztier.h"; done | paste -sd.)
major=${header_version%%.*}
so=libztier.so.$major
[[ -f $libdir/$so ]] || fail "no $so installed in $libdir (ztier.h says $header_version): $(ls "$libdir")"
pc_version=$(PKG_CONFIG_LIBDIR=$pcdir pkg-config --modversion ztier)
[[ $pc_version == "$header_version" ]] || fail "ztier.pc says Version $pc_version, ztier.h $header_version"
no_gpu_libs "the installed libztier.so" "$libdir/$so" readelf

# --- The shared route with only the runtime libraries ----------------------------------------
# No -dev file of jansson, liburing, numa, zlib, MPI or CUDA may be needed: pkg-config sees
# only the prefix's .pc files, CMake finds no MPI, CUDAToolkit or PkgConfig and no package
# registry, only the prefix.
empty="$work/empty"
mkdir -p "$empty"
PKG_CONFIG_LIBDIR="$empty" cmake -S "$here/consumer" -B "$work/cmake-runtime" \
  -DZT_CONSUMER_STATIC=OFF -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -DCMAKE_DISABLE_FIND_PACKAGE_Threads=ON \
  >"$work/cmake-runtime.log" 2>&1 ||
  fail "find_package(ztier) needs more than ztier: $(cat "$work/cmake-runtime.log")"
cmake --build "$work/cmake-runtime" >/dev/null
"$work/cmake-runtime/consumer_shared" || fail "the runtime-only find_package consumer did not run"
no_gpu_libs "the CPU-only find_package consumer" "$work/cmake-runtime/consumer_shared" ldd
for mode in "--cflags" "--libs"; do
  PKG_CONFIG_LIBDIR="$pcdir" pkg-config $mode ztier >/dev/null 2>"$work/pc.err" ||
    fail "\`pkg-config $mode ztier\` needs more than ztier.pc: $(cat "$work/pc.err")"
done
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/consumer_runtime" "$here/consumer/consumer.c" \
   $(PKG_CONFIG_LIBDIR="$pcdir" pkg-config --cflags --libs ztier) -Wl,-rpath,"$libdir"
"$work/consumer_runtime" || fail "the runtime-only pkg-config consumer did not run"
no_gpu_libs "the CPU-only pkg-config consumer" "$work/consumer_runtime" ldd

# --- CMake package, shared and static ---------------------------------------------------------
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
export PKG_CONFIG_PATH=$pcdir
for pc in ztier ztier-static; do
  for mode in "" "--static"; do
    # shellcheck disable=SC2086
    cflags=$(pkg-config $mode --cflags $pc)
    bad=$(mpi_cuda_words "$cflags")
    [[ -z $bad ]] || fail "\`pkg-config ${mode:+$mode }--cflags $pc\` names MPI/CUDA paths:
$bad
full flags: $cflags"
  done
done
src="$here/consumer/consumer.c"
pclibdir=$(pkg-config --variable=libdir ztier) # as written, relative to the .pc file
[[ $pclibdir -ef $libdir ]] || fail "pkg-config's libdir ($pclibdir) is not $libdir"

# ztier.h with pkg-config's flags only, warnings as errors.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -c -o "$work/consumer_pc.o" "$src" $(pkg-config --cflags ztier)

# Shared, with the documented rpath: runs without LD_LIBRARY_PATH.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/consumer_pc" "$src" $(pkg-config --cflags --libs ztier) \
   -Wl,-rpath,"$(pkg-config --variable=libdir ztier)"
readelf -d "$work/consumer_pc" | grep -E '\((RPATH|RUNPATH)\)' | grep -qF "[$pclibdir]" ||
  fail "consumer_pc has no rpath to $pclibdir: $(readelf -d "$work/consumer_pc" | grep -E 'RPATH|RUNPATH')"
"$work/consumer_pc" || fail "consumer_pc, linked with -Wl,-rpath,$libdir, did not run"

# Shared, without rpath: the loader cannot find libztier.so.<major> (the .pc adds no rpath, on
# purpose) until LD_LIBRARY_PATH names libdir.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror -o "$work/consumer_pc_norpath" "$src" $(pkg-config --cflags --libs ztier)
if readelf -d "$work/consumer_pc_norpath" | grep -qE '\((RPATH|RUNPATH)\)'; then
  fail "consumer_pc_norpath got an rpath from pkg-config: $(readelf -d "$work/consumer_pc_norpath" | grep -E 'RPATH|RUNPATH')"
fi
rc=0
out=$("$work/consumer_pc_norpath" 2>&1) || rc=$?
if [[ $rc -ne 127 || $out != *"$so: cannot open shared object file"* ]]; then
  fail "consumer_pc_norpath without LD_LIBRARY_PATH: expected the loader to fail on $so (exit 127), got exit $rc: $out"
fi
echo "consumer_pc_norpath without LD_LIBRARY_PATH fails as expected: $out"
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc_norpath" ||
  fail "consumer_pc_norpath did not run with LD_LIBRARY_PATH=$libdir"

# Static: ztier-static.pc names libztier.a (-l:libztier.a) and what it needs, with and without
# --static.
for mode in "" "--static"; do
  # shellcheck disable=SC2046,SC2086
  cc -Wall -Wextra -Werror -o "$work/consumer_pc_static" "$src" \
     $(pkg-config $mode --cflags --libs ztier-static)
  if readelf -d "$work/consumer_pc_static" | grep -q 'NEEDED.*libztier'; then
    fail "consumer_pc_static ($mode) needs libztier.so: $(readelf -d "$work/consumer_pc_static" | grep NEEDED)"
  fi
  "$work/consumer_pc_static"
done

# --- The cuda module --------------------------------------------------------------------------
# consumer_cuda <libdir>: runs the shared consumer with device_backend "cuda" against the
# libztier.so of <libdir>; prints its output, exit status in $rc.
consumer_cuda() {
  rc=0
  out=$(ZT_LOG=info LD_LIBRARY_PATH="$1" "$work/consumer_pc_norpath" cuda 2>&1) || rc=$?
}
# expect_failure <what> <texts...>: the last consumer_cuda failed with all <texts> in its output.
expect_failure() {
  local what=$1 t
  shift
  [[ $rc -ne 0 ]] || fail "$what: device_backend cuda did not fail: $out"
  for t in "$@"; do
    [[ $out == *"$t"* ]] || fail "$what: the message does not name '$t': $out"
  done
  echo "$what fails as expected: $(grep 'consumer:' <<<"$out")"
}
if [[ -f $libdir/libztier-cuda.so ]]; then
  no_gpu_libs "the CPU-only consumer" "$work/consumer_pc" ldd
  # Installed: loaded from beside libztier.so (then the GPU, or the lack of one, decides).
  consumer_cuda "$libdir"
  [[ $out == *"the cuda backend from $libdir/libztier-cuda.so"* ]] ||
    fail "the cuda module was not loaded from $libdir: $out"
  [[ $out != *"libztier-cuda.so, the cuda backend's module"* ]] ||
    fail "the installed cuda module did not load: $out"
  # Deleted: the message names the module, where it was looked for and what it needs.
  cp -a "$work/prefix" "$work/nocuda"
  rm "$work/nocuda/${libdir#"$work/prefix/"}/libztier-cuda.so"
  consumer_cuda "$work/nocuda/${libdir#"$work/prefix/"}"
  expect_failure "without libztier-cuda.so" 'ztier.device_backend "cuda"' \
    "libztier-cuda.so, the cuda backend's module, was not found next to libztier.so" \
    "$work/nocuda/${libdir#"$work/prefix/"}" "libcudart.so"
  # A library the module needs is missing (here a stand-in for libcudart.so.N), and a module
  # of another ABI.
  fake="$work/fake"
  mkdir -p "$fake/dep"
  cp -a "$libdir"/libztier.so* "$fake/"
  echo 'int zt_fake_runtime(void) { return 1; }' | cc -shared -fPIC -x c -o "$fake/dep/libztfakert.so" -
  echo 'int zt_fake_runtime(void); int ztier_cuda_module_v1(void) { return zt_fake_runtime(); }' |
    cc -shared -fPIC -x c -o "$fake/libztier-cuda.so" - -L"$fake/dep" -lztfakert
  rm "$fake/dep/libztfakert.so"
  consumer_cuda "$fake"
  expect_failure "with libztier-cuda.so's runtime library missing" \
    "cannot load $fake/libztier-cuda.so" "libztfakert.so: cannot open shared object file" \
    "libcudart.so"
  printf '%s\n' '#include <stdint.h>' \
    'static const struct { uint32_t abi; const char *name; const void *iface; } m = {999, "cuda", 0};' \
    'const void *ztier_cuda_module_v1(void) { return &m; }' |
    cc -shared -fPIC -x c -o "$fake/libztier-cuda.so" -
  consumer_cuda "$fake"
  expect_failure "with a libztier-cuda.so of another ABI" "$fake/libztier-cuda.so" \
    "module ABI 999"
else
  echo "install consumers: no libztier-cuda.so (built without ZT_CUDA): module checks skipped"
fi
# --- docs/embedding.md's build recipe, as written, in a shell with no pkg-config variables -----
# Its /opt/ztier/lib/pkgconfig is this install's; the recipe must say itself where ztier.pc is.
doc="$here/../../docs/embedding.md"
between() { awk -v b="<!-- $2:begin -->" -v e="<!-- $2:end -->" \
  '$0 == b {on = 1; next} $0 == e {on = 0} on && !/^```/' "$1"; }
between "$doc" walkthrough >"$work/walkthrough.c"
between "$doc" build | sed "s|/opt/ztier/lib/pkgconfig|$pcdir|g" >"$work/build.sh"
grep -q 'pkg-config' "$work/build.sh" || fail "no build recipe (<!-- build:begin -->) in $doc"
(cd "$work" && env -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR bash -e build.sh) >"$work/build.log" 2>&1 ||
  fail "docs/embedding.md's build recipe failed against $work/prefix: $(cat "$work/build.sh" "$work/build.log")"
readelf -d "$work/walkthrough" | grep -E '\((RPATH|RUNPATH)\)' | grep -qF "$libdir" ||
  fail "docs/embedding.md's recipe links no rpath to $libdir"
echo "docs/embedding.md's build recipe builds the walk-through against the install"
echo "install consumers: runtime-only shared (find_package, pkg-config), find_package shared+static, pkg-config shared (rpath, LD_LIBRARY_PATH)+static, cuda module ok"

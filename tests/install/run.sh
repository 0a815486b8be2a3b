#!/usr/bin/env bash
# Installs the build tree to a temporary prefix, then builds and runs a consumer with
# find_package (shared and static) and with pkg-config.
#   run.sh <build-dir> <source-dir-of-this-folder>
set -euo pipefail
build=$1
here=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$here/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/consumer_shared"
"$work/cmake-build/consumer_static"
libdir=$(ls -d "$work/prefix"/lib*/ | head -n1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
cc -o "$work/consumer_pc" "$here/consumer/consumer.c" $(pkg-config --cflags --libs ztier) \
   -Wl,-rpath,"$libdir"
"$work/consumer_pc"
# shellcheck disable=SC2046
cc -o "$work/consumer_pc_static" "$here/consumer/consumer.c" \
   $(pkg-config --cflags ztier) "$libdir/libztier.a" $(pkg-config --libs-only-l --static ztier | sed 's/-lztier//')
"$work/consumer_pc_static"
echo "install consumers: find_package shared+static, pkg-config shared+static ok"

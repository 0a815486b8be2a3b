#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/abi-check.sh against baselines edited to differ from the built libztier.so the way a
# change to ztier.h would (the baseline plays the old library, the build the new one): each
# kind of change must pass or fail as docs/abi.md says, at the version it says.
#   selftest.sh <source dir> <build dir>
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/abi-selftest.XXXXXX")
trap 'rm -rf "$work"' EXIT
base=$src/abi/libztier.abi
fails=0

# A copy of the checker with its header and an edited baseline (stdin), at version <v>, with
# or without a CHANGELOG.md section for it.
setup() { # <version> <changelog: yes|no>
    rm -rf "$work/root"
    mkdir -p "$work/root/scripts" "$work/root/api" "$work/root/abi"
    cp "$src/scripts/abi-check.sh" "$work/root/scripts/"
    IFS=. read -r ma mi pa <<< "$1"
    sed -E "s/^#define ZT_VERSION_MAJOR [0-9]+$/#define ZT_VERSION_MAJOR $ma/;
            s/^#define ZT_VERSION_MINOR [0-9]+$/#define ZT_VERSION_MINOR $mi/;
            s/^#define ZT_VERSION_PATCH [0-9]+$/#define ZT_VERSION_PATCH $pa/" \
        "$src/api/ztier.h" > "$work/root/api/ztier.h"
    cat > "$work/root/abi/libztier.abi"
    [ "$2" = no ] || printf '# Changelog\n\n## %s\n- the change\n' "$1" > "$work/root/CHANGELOG.md"
}
# expect <name> <exit status> <fragment of the output> [options]
expect() {
    local name=$1 want=$2 text=$3 rc=0
    shift 3
    "$work/root/scripts/abi-check.sh" "$@" "$build" > "$work/out.txt" 2>&1 || rc=$?
    if [ $rc -ne "$want" ] || ! grep -qF -- "$text" "$work/out.txt"; then
        echo "FAIL $name: expected exit $want and \"$text\", got exit $rc:"
        sed 's/^/    /' "$work/out.txt"
        fails=$((fails + 1))
    else
        echo "ok   $name"
    fi
}
in_step_info() { sed "/<class-decl name='zt_step_info'/,/<\/class-decl>/ $1" "$base"; }
id_of() { sed -n "s/.*<type-decl name='$1' size-in-bits='[0-9]*' id='\([^']*\)'.*/\1/p" "$base" | head -n1; }
float=$(id_of float)
double=$(id_of double)
lr_at=$(sed -n "/<class-decl name='zt_step_info'/,/<\/class-decl>/p" "$base" | grep -B1 "<var-decl name='lr'" |
    sed -n "s/.*layout-offset-in-bits='\([0-9]*\)'.*/\1/p")
step_info_bits=$(sed -n "s/.*<class-decl name='zt_step_info' size-in-bits='\([0-9]*\)'.*/\1/p" "$base")
if [ -z "$float" ] || [ -z "$double" ] || [ -z "$lr_at" ] || [ -z "$step_info_bits" ]; then
    echo "the baseline has no zt_step_info.lr or no float/double: update this test"
    exit 1
fi
version=$(for p in MAJOR MINOR PATCH; do sed -n "s/^#define ZT_VERSION_$p \([0-9]*\)$/\1/p" "$src/api/ztier.h"; done | paste -sd.)
IFS=. read -r major minor _ <<< "$version"
next_minor=$major.$((minor + 1)).0

setup "$version" no < "$base"
expect "unchanged" 0 "is the baseline's"

# The build added a function (zt_version is missing from the baseline).
no_fn() { sed "/<elf-symbol name='zt_version' /d; /<function-decl name='zt_version' /,/<\/function-decl>/d" "$base"; }
no_fn | setup "$version" no
expect "added function, same version" 1 "the ABI changed (compatible additions) and the version is still $version"
no_fn | setup "$next_minor" no
expect "added function, new minor, no CHANGELOG section" 1 "CHANGELOG.md has no section for $next_minor"
no_fn | setup "$next_minor" yes
expect "added function, new minor" 0 "OK: ztier $next_minor may change the ABI"

# The build appended zt_step_info.lr, its last field (struct_size struct: compatible).
in_step_info "{ s/size-in-bits='$step_info_bits'/size-in-bits='$lr_at'/; /layout-offset-in-bits='$lr_at'/,/<\/data-member>/d }" |
    setup "$next_minor" yes
expect "field appended to a struct_size struct, new minor" 0 "OK: ztier $next_minor may change the ABI"

# The build changed zt_step_info.lr's type (was double): a break.
in_step_info "s/<var-decl name='lr' type-id='$float'/<var-decl name='lr' type-id='$double'/" |
    setup "$next_minor" yes
expect "field type changed, new minor" 1 "an incompatible ABI change, and the major version is still $major"

# The build removed a function (the baseline has one more): a break.
ret=$(sed -n "/<function-decl name='zt_version' /,/<\/function-decl>/p" "$base" | sed -n "s/.*<return type-id='\([^']*\)'.*/\1/p")
sed "s|^\( *\)<elf-symbol name='zt_version' \(.*\)$|&\n\1<elf-symbol name='zt_removed' \2|;
     s|^\( *\)</abi-instr>$|\1  <function-decl name='zt_removed' mangled-name='zt_removed' visibility='default' binding='global' size-in-bits='64' elf-symbol-id='zt_removed'><return type-id='$ret'/></function-decl>\n&|" \
    "$base" | setup "$next_minor" yes
expect "function removed, new minor" 1 "an incompatible ABI change"

# --update: refused for a change at the same version (the baseline stays), --amend replaces
# the baseline of the same, untagged version.
no_fn | setup "$version" no
cp "$work/root/abi/libztier.abi" "$work/edited.abi"
expect "update refused without a bump" 1 "FAILED" --update
cmp -s "$work/edited.abi" "$work/root/abi/libztier.abi" || { echo "FAIL: a refused --update changed the baseline"; fails=$((fails + 1)); }
expect "update --amend of an unreleased version" 0 "wrote abi/libztier.abi for ztier $version" --update --amend
expect "after the amend" 0 "is the baseline's"

# A baseline abidiff cannot read: abidiff itself exits 0, the check must not.
sed '2a\  <!-- a -- b -->' "$base" | setup "$version" no
expect "unreadable baseline" 2 "abidiff failed"

[ $fails -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
echo "abi-check: every kind of change passes or fails as docs/abi.md says"

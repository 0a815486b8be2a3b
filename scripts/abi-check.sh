#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks the ABI of the built libztier.so against the committed baseline, abi/libztier.abi
# (docs/abi.md). Only the public API counts: the functions api/ztier.h declares (ZT_API) and
# the types they reach; the internals libztier.so exports for its backend modules do not.
#
#   scripts/abi-check.sh [build dir]            check (make test and ctest -L abi run it)
#   scripts/abi-check.sh --update [build dir]   write the baseline, when the policy allows it
#   scripts/abi-check.sh --update --amend [...] replace the baseline of a version not yet
#                                               released (no git tag v<version>), e.g. after
#                                               merging additions into an unreleased version
#
# The check fails when
#   - the ABI changed and the version in api/ztier.h is still the baseline's;
#   - a change is incompatible (anything but added functions, fields appended to a struct
#     that starts with struct_size, or enumerators added before a *_COUNT) and the major
#     version is still the baseline's;
#   - the version differs from the baseline's and CHANGELOG.md has no section for it;
#   - the soname is not libztier.so.<major>.
# So the baseline moves only in a commit that bumps the version and says so in CHANGELOG.md.
# The build must carry debug info (RelWithDebInfo or Debug: `make build` does).
# Exit 0: the ABI keeps the policy; 1: it does not (the fix is printed); 2: cannot check.
set -euo pipefail

update=0 amend=0 build=
for a in "$@"; do
    case $a in
    --update) update=1 ;;
    --amend) amend=1 ;;
    -h | --help) sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "abi-check: unknown option $a (see --help)" >&2; exit 2 ;;
    *) build=$a ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
build=${build:-$root/build}
header=$root/api/ztier.h
baseline=$root/abi/libztier.abi
base_rel=abi/libztier.abi
lib=$build/libztier.so

die() { echo "abi-check: $*" >&2; exit 2; }
for tool in abidw abidiff readelf; do
    command -v $tool > /dev/null || die "$tool not found: install abigail-tools and binutils (scripts/install-deps.sh)"
done
[ -e "$lib" ] || die "$lib not found: build first (make build)"
readelf -S --wide "$lib" | grep -q '\.debug_info' ||
    die "$lib has no debug info: configure $build with -DCMAKE_BUILD_TYPE=RelWithDebInfo"

version_of() { # the header's ZT_VERSION_MAJOR.MINOR.PATCH
    local v=
    for p in MAJOR MINOR PATCH; do
        v+=${v:+.}$(sed -n "s/^#define ZT_VERSION_$p \([0-9]*\)$/\1/p" "$1")
    done
    [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "no ZT_VERSION_MAJOR/MINOR/PATCH in $1"
    echo "$v"
}
code() { local a b c; IFS=. read -r a b c <<< "$1"; echo $((a * 1000000 + b * 1000 + c)); }
version=$(version_of "$header")
major=${version%%.*}

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libztier.so.$major" ]; then
    echo "abi-check: the soname of $lib is '$soname', the version in api/ztier.h is $version:" \
        "expected libztier.so.$major (reconfigure: cmake -S . -B $build)" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The ABI of the public API only: every function but the header's ZT_API ones dropped, every
# type not defined in api/ drops with them. Type ids are hashes and no paths or locations are
# written, so two builds of the same sources give the same text.
names=$(grep -oE '^ZT_API [^(]*\(' "$header" | sed -E 's/.*[ *]([A-Za-z_0-9]+)\($/\1/' |
    sort -u | paste -sd'|')
[ -n "$names" ] || die "no ZT_API declarations found in $header"
cat > "$tmp/public.supp" << EOF
[suppress_function]
  symbol_name_not_regexp = ^($names)\$
  drop = yes
[suppress_variable]
  symbol_name_regexp = .*
  drop = yes
EOF
abidw --headers-dir "$root/api" --drop-private-types --no-corpus-path --no-comp-dir-path \
    --no-show-locs --type-id-style hash --suppressions "$tmp/public.supp" \
    --out-file "$tmp/dump.abi" "$lib" || die "abidw failed on $lib"
# line 2 names the version the baseline belongs to (an XML comment: no double hyphen in it)
sed "1a\\  <!-- ztier $version: written by scripts/abi-check.sh in update mode; never edit by hand (docs/abi.md) -->" \
    "$tmp/dump.abi" > "$tmp/current.abi"

write_baseline() {
    mkdir -p "$(dirname "$baseline")"
    cp "$tmp/current.abi" "$baseline"
    echo "abi-check: wrote $base_rel for ztier $version; commit it with the version bump and CHANGELOG.md"
    exit 0
}

if [ ! -e "$baseline" ]; then
    [ $update = 1 ] && write_baseline
    echo "abi-check: no baseline $base_rel: create it with scripts/abi-check.sh --update" >&2
    exit 1
fi
base_version=$(sed -n '2s/.*<!-- ztier \([0-9.]*\):.*/\1/p' "$baseline")
[[ $base_version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    die "$base_rel does not name its version on line 2: regenerate it with --update --amend"
base_major=${base_version%%.*}
base_minor=${base_version#*.}
base_minor=${base_minor%.*}
minor=${version#*.}
minor=${minor%.*}

# abidiff exits 0 on a file it could not parse, saying so only on stderr: any word there fails.
set +e
abidiff --no-show-locs "$baseline" "$tmp/current.abi" > "$tmp/report.txt" 2> "$tmp/err.txt"
rc=$?
abidiff --no-show-locs --no-added-syms --leaf-changes-only --no-redundant "$baseline" \
    "$tmp/current.abi" > "$tmp/leaf.txt" 2>> "$tmp/err.txt"
leaf_rc=$?
set -e
unreleased() { [ -z "$(git -C "$root" tag -l "v$version" 2> /dev/null)" ]; }
if (((rc | leaf_rc) & 3)) || [ -s "$tmp/err.txt" ]; then
    cat "$tmp/err.txt" >&2
    if [ $update = 1 ] && [ $amend = 1 ] && unreleased; then
        echo "abi-check: --amend: the baseline is unreadable and ztier $version not released: replacing it" >&2
        write_baseline
    fi
    die "abidiff failed (exit $rc) on $base_rel or the dump of $lib: regenerate a damaged baseline with --update --amend"
fi

# The structs whose first member is size_t struct_size: they may gain fields at their end.
extensible=$(awk '/^typedef struct [a-z_0-9]+ \{/ { name = $3; next }
                  name != "" { if ($1 == "size_t" && $2 == "struct_size;") print name; name = "" }' \
    "$header" | paste -sd' ')

# Every leaf change but the compatible kinds (no added functions: --no-added-syms) is a break.
# A struct_size struct may grow at its end (new members at or past its old size); an enum may
# gain enumerators, which moves only its *_COUNT. Anything else in a block is a break.
incompatible=$(awk -v ext=" $extensible " '
    function flush() { if (blk != "" && !ok) print blk; blk = "" }
    /^Removed\/Changed\/Added (functions|variables) summary:/ {
        if ($4 + 0 > 0 || $6 + 0 > 0) print "removed or changed " $2 " (" $4 " removed, " $6 " changed)"
        next }
    /^'"'"'/ { flush(); blk = $0; kind = $1; name = $2; gsub(/'"'"'/, "", kind); gsub(/'"'"'/, "", name)
        ok = (kind == "struct" && index(ext, " " name " ")) || kind == "enum"; old = -1; next }
    blk == "" || /^$/ { next }
    { blk = blk "\n" $0 }
    kind == "struct" && /type size changed from [0-9]+ to [0-9]+/ { old = $5; next }
    kind == "struct" && /data member insertions?:$/ { next }
    kind == "struct" && /, at offset [0-9]+ \(in bits\)/ {
        off = $0; sub(/.*, at offset /, "", off); sub(/ .*/, "", off)
        if (old < 0 || off + 0 < old) ok = 0; next }
    kind == "enum" && /type size hasn'"'"'t changed|enumerator insertions?:$|^    '"'"'[^'"'"']*'"'"' value / { next }
    kind == "enum" && /enumerator changes?:$/ { next }
    kind == "enum" && /^    '"'"'[^'"'"']*_COUNT'"'"' from value/ { next }
    { ok = 0 }
    END { flush() }' "$tmp/leaf.txt")

changed=$(((rc & 12) != 0))
show_report() {
    echo "---- abidiff $base_rel (ztier $base_version) against $lib (ztier $version) ----"
    cat "$tmp/report.txt"
    [ -z "$incompatible" ] || { echo "---- incompatible ----"; echo "$incompatible"; }
    echo "----"
}
fix="bump the version per docs/abi.md (ZT_VERSION_* in api/ztier.h; the soname follows the major), update CHANGELOG.md, regenerate with scripts/abi-check.sh --update"
problem=
if (($(code "$version") < $(code "$base_version"))); then
    problem="the version in api/ztier.h ($version) is older than the baseline's ($base_version)"
elif [ -n "$incompatible" ] && ((major <= base_major)); then
    problem="an incompatible ABI change, and the major version is still $major: $fix (a new major: $((base_major + 1)).0.0)"
elif ((changed)) && ((major == base_major && minor <= base_minor)); then
    problem="the ABI changed (compatible additions) and the version is still $version: $fix (a new minor: $base_major.$((base_minor + 1)).0)"
elif [ "$version" != "$base_version" ] && ! grep -qE "^#+ .*\\b${version//./\\.}\\b" "$root/CHANGELOG.md" 2> /dev/null; then
    problem="the version is $version, the baseline's $base_version, and CHANGELOG.md has no section for $version: add one (docs/abi.md)"
fi

if [ -n "$problem" ]; then
    show_report >&2
    if [ $update = 1 ] && [ $amend = 1 ] && unreleased && [ "$version" = "$base_version" ]; then
        echo "abi-check: --amend: ztier $version is not released (no tag v$version): replacing its baseline" >&2
        write_baseline
    fi
    echo "abi-check: FAILED: $problem" >&2
    [ $amend = 1 ] && echo "abi-check: (--amend replaces only the baseline of the same, unreleased version)" >&2
    exit 1
fi
if [ $update = 1 ]; then
    [ "$version" = "$base_version" ] && ! ((changed)) && { echo "abi-check: the baseline is up to date (ztier $version)"; exit 0; }
    write_baseline
fi
if ((changed)); then
    show_report
    echo "abi-check: OK: ztier $version may change the ABI of $base_version this way; regenerate the baseline (--update) in the commit that bumps the version"
else
    echo "abi-check: OK: the public ABI of $lib is the baseline's (ztier $base_version)"
fi

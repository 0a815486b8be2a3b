#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Static resource gate for the CUDA kernels, for CI machines without a GPU.
#   check-kernel-resources.sh [--archs=80,90] <nvcc> [nvcc flags: -I, -D, --fmad=false ...] <file.cu>...
# Compiles each file for each architecture with ptxas -v and prints, per kernel, registers,
# spill stores/loads, local memory (stack frame), static shared memory and the most dynamic
# shared memory it is launched with. Fails (exit 1, naming the kernel) on
#  - any spill or any local memory: a slow path no functional test notices;
#  - static + max dynamic shared memory > 48 KiB: the launch fails at run time unless the
#    kernel opts in with cudaFuncSetAttribute, and only on the GPU this machine lacks.
# A kernel whose PTX references an `extern __shared__` array states its largest dynamic size
# in a comment on a line before its `__global__` line, e.g.
#   // max dynamic shared: kSharedMax (49152 bytes)
# (the first "<N> bytes" counts); one without that comment fails the check.
# Architectures that are not numbers (native, all) are skipped; with none left, 80 and 90.
set -euo pipefail
limit=49152

archs=""
if [[ ${1:-} == --archs=* ]]; then
  archs=${1#--archs=}
  shift
fi
if [ $# -lt 2 ]; then
  sed -n '2,3p' "$0" >&2
  exit 2
fi
nvcc=$1
shift
flags=() files=()
for a in "$@"; do
  case $a in *.cu) files+=("$a") ;; *) flags+=("$a") ;; esac
done
arch_list=()
for a in ${archs//[,;]/ }; do
  a=${a%-real}
  [[ $a =~ ^[0-9]+a?$ ]] && arch_list+=("$a") || echo "note: skipping architecture '$a'"
done
[ ${#arch_list[@]} -gt 0 ] || arch_list=(80 90)
filt=$(command -v c++filt || echo cat)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for f in "${files[@]}"; do
  # annotated kernels: "<name> <bytes>" for the first __global__ after each annotation
  awk '/max dynamic shared:/ { n = split($0, w, /[^0-9a-z]+/); pend = ""
                               for (i = n; i > 1; i--) if (w[i] == "bytes" && w[i - 1] ~ /^[0-9]+$/) pend = w[i - 1] }
       /__global__/ && pend != "" { s = $0; gsub(/__launch_bounds__ *\([^)]*\)/, "", s)
                                    if (match(s, /[A-Za-z_][A-Za-z0-9_]* *\(/)) {
                                      s = substr(s, RSTART, RLENGTH); sub(/ *\($/, "", s)
                                      print s, pend }
                                    pend = "" }' "$f" > "$tmp/annotated"
  for a in "${arch_list[@]}"; do
    d=$tmp/$(basename "$f" .cu).sm_$a
    mkdir -p "$d"
    echo "== $f sm_$a"
    if ! "$nvcc" "${flags[@]}" -arch="sm_$a" -c -keep -keep-dir "$d" -Xptxas -v \
         -o "$d/out.o" "$f" > "$d/log" 2>&1; then
      grep -v '^ptxas info\|^    [0-9]* bytes stack' "$d/log" | "$filt" >&2
      echo "FAIL: $f does not compile for sm_$a (see the errors above)" >&2
      status=1
      continue
    fi
    # entries that reference an extern shared array, directly or through called functions
    awk 'function toks(s) { gsub(/[][ \t,;()+]+/, " ", s); return split(s, t, " ") }
         /^\.extern[ \t]+\.shared/ { n = toks($0); ext[t[n]] = 1; next }
         /^(\.visible[ \t]+|\.weak[ \t]+)?\.(entry|func)[ \t]/ {
           match($0, /[A-Za-z_$][A-Za-z0-9_$]*\(/); pend = substr($0, RSTART, RLENGTH - 1)
           fn[pend] = 1; if ($0 ~ /\.entry/) entry[pend] = 1; next }
         /^\{/ { cur = pend; next }
         /^\}/ { cur = ""; next }
         cur != "" { n = toks($0)
                     for (i = 1; i <= n; i++) {
                       if (t[i] in ext) uses[cur] = 1
                       else if (t[i] in fn) calls[cur, t[i]] = 1 } }
         END { do { changed = 0
                     for (k in calls) { split(k, c, SUBSEP)
                                        if ((c[2] in uses) && !(c[1] in uses)) uses[c[1]] = changed = 1 }
               } while (changed)
               for (e in entry) if (e in uses) print e }' "$d"/*.ptx > "$d/extern"
    # "<mangled> regs spill-stores spill-loads local smem" per entry, from ptxas -v
    awk 'function num(s, re) { return match(s, re) ? substr(s, RSTART, RLENGTH) + 0 : 0 }
         function max(a, b) { return a > b ? a : b }
         /Compiling entry function/ { split($0, q, "\047"); cur = q[2]; entry[cur] = 1 }
         /Function properties for/ { props = $NF }
         /bytes stack frame/ && (props in entry) {
           lmem[props] = num($0, "[0-9]+ bytes stack"); st[props] = num($0, "[0-9]+ bytes spill stores")
           ld[props] = num($0, "[0-9]+ bytes spill loads") }
         /Used [0-9]+ registers/ {
           sub(/.*Used /, ""); lmem[cur] = max(max(lmem[cur], num($0, "[0-9]+ bytes lmem")),
                                             num($0, "[0-9]+ bytes cumulative stack"))
           print cur, $1 + 0, st[cur] + 0, ld[cur] + 0, lmem[cur], num($0, "[0-9]+ bytes smem") }' \
      "$d/log" > "$d/rows"
    # readable names: (anonymous namespace)::layernorm_bwd(float*, ...) -> layernorm_bwd
    cut -d' ' -f1 "$d/rows" | "$filt" |
      sed -e 's/(anonymous namespace):://g' -e 's/^void //' -e 's/[(<].*//' > "$d/names"
    paste -d' ' "$d/rows" "$d/names" |
      awk -v limit=$limit -v file="$f" -v arch="sm_$a" '
        FILENAME == ARGV[1] { dyn[$1] = $2; next }
        FILENAME == ARGV[2] { ext[$1] = 1; next }
        FNR == 1 { printf "%5s %8s %8s %6s %6s %8s  %s\n", "regs", "spill-st", "spill-ld",
                          "local", "smem", "max-dyn", "kernel" }
        { name = $7; short = name; sub(/.*::/, "", short); d = 0
          if ($1 in ext) {
            if (short in dyn) d = dyn[short]
            else fail[++nf] = sprintf("%s references extern __shared__ memory but %s has no " \
                                      "\"// max dynamic shared: <N> bytes\" comment for it", name, file)
          }
          printf "%5d %8d %8d %6d %6d %8s  %s\n", $2, $3, $4, $5, $6, !($1 in ext) ? "-" : (short in dyn) ? d : "?", name
          if ($3 || $4) fail[++nf] = sprintf("%s spills registers: %d bytes stores, %d bytes loads", name, $3, $4)
          else if ($5) fail[++nf] = sprintf("%s uses %d bytes of local memory", name, $5)
          if ($6 + d > limit)
            fail[++nf] = sprintf("%s needs %d bytes of shared memory (%d static + %d dynamic) > %d",
                                 name, $6 + d, $6, d, limit) }
        END { fflush()
              for (i = 1; i <= nf; i++) printf "FAIL: %s (%s): %s\n", file, arch, fail[i] > "/dev/stderr"
              exit (nf > 0) }' "$tmp/annotated" "$d/extern" - || status=1
  done
done
exit $status

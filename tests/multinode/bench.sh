#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Multi-node latency benchmark (docs/benchmarks.md, "Several nodes"): the GPT-2
# trainer (examples/gpt2, zt_gpt2) on 2 namespace "nodes" x 2 ranks (the setup of run.sh:
# veth + bridge, Open MPI over TCP only), at 0 ms and, through relay.py, at each given
# one-way delay; plain ZeRO-3 and ZeRO++ (qwZ + qgZ + hpZ). Prints one row per run: the
# median step time over the steps after the first, and the bytes that left the nodes' links
# over the run divided by the steps (commit and the first gathers included).
#   bench.sh <zt_gpt2>[=<label>[:ENV=VALUE,...]]... -- [configs] [delays] [steps] [mpirun]
# e.g. bench.sh build-before/zt_gpt2=before build/zt_gpt2=after:ZT_MPI_LANES=4 -- \
#        "d2c128 d4c256" "0 20 50" 6
# Needs root (network namespaces); not a ctest test (minutes, and timing on a shared host).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
progs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do progs+=("$1"); shift; done
[ $# -gt 0 ] && shift
configs=${1:-"d2c128 d4c256"} delays=${2:-"0 20 50"} steps=${3:-6} mpirun=${4:-mpirun}
[ "${#progs[@]}" -gt 0 ] || { echo "usage: bench.sh <zt_gpt2>[=label[:ENV=V,...]]... -- [configs] [delays] [steps]"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }

P=ztb$$ net=10.77.0
work=$(mktemp -d /tmp/mnbench.XXXXXX)
namespaces=() relay_pid=
cleanup() {
  [ -n "$relay_pid" ] && kill "$relay_pid" 2> /dev/null
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null; done
    ip netns del "$ns" 2> /dev/null
  done
  namespaces=() relay_pid=
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM

# nodes <delay ms>: 2 nodes and the head (10.77.0.1, .2, .100) joined by a kernel bridge
# (0 ms) or by relay.py (delayed), as run.sh's make_nodes
nodes() {
  cleanup
  local delay=$1 ports=() i
  ip netns add "${P}b" && namespaces+=("${P}b")
  ip -n "${P}b" link set lo up
  [ "$delay" = 0 ] && ip -n "${P}b" link add br0 type bridge && ip -n "${P}b" link set br0 up
  for i in 1 2 100; do
    local ns=${P}n$i
    [ "$i" = 100 ] && ns=${P}h
    ip netns add "$ns" && namespaces+=("$ns")
    ip -n "${P}b" link add "v$i" type veth peer name eth0 netns "$ns"
    ip -n "$ns" addr add "$net.$i/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    [ "$delay" = 0 ] && ip -n "${P}b" link set "v$i" master br0
    ip -n "${P}b" link set "v$i" up
    ports+=("v$i")
  done
  if [ "$delay" != 0 ]; then
    ip netns exec "${P}b" python3 "$here/relay.py" "$delay" "${ports[@]}" > "$work/relay.log" 2>&1 &
    relay_pid=$!
    sleep 0.5
  fi
}

tx() { # bytes sent by both nodes' links
  local s=0 i
  for i in 1 2; do s=$((s + $(ip netns exec "${P}n$i" cat /sys/class/net/eth0/statistics/tx_bytes))); done
  echo "$s"
}

# the trainer's built-in configuration (examples/gpt2/train_gpt2.c), with ZeRO++ on top
zeropp_cfg=$work/zeropp.json
cat > "$zeropp_cfg" << 'JSON'
{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"},
  "offload_optimizer": {"device": "cpu"}, "stage3_prefetch_bucket_size": 5e7,
  "zero_quantized_weights": true, "zero_quantized_gradients": true,
  "zero_hpz_partition_size": 2},
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "weight_decay": 0.1}},
 "gradient_clipping": 1.0, "ztier": {"hbm_capacity": "2G"}}
JSON
text=$work/text.txt
cat "$here"/../../docs/*.md "$here"/../../README.md | head -c 300000 > "$text"
printf '%-8s %-8s %-6s %-16s %12s %14s\n' config mode delay binary "ms/step" "MB/step(wire)"
for delay in $delays; do
  nodes "$delay"
  for config in $configs; do
    for mode in ${ZT_BENCH_MODES:-plain zeropp}; do
      for p in "${progs[@]}"; do
        bin=${p%%=*} label=${p#*=} envs=
        [ "$label" = "$p" ] && label=$(basename "$(dirname "$bin")")
        case "$label" in *:*) envs=${label#*:} label=${label%%:*} ;; esac
        extra=()
        [ "$mode" = zeropp ] && extra=(--ds-config "$zeropp_cfg")
        printf '%s\n' "$net.1 slots=2" "$net.2 slots=2" > "$work/hosts"
        t0=$(tx)
        env ${envs//,/ } ZT_MN_PREFIX=$P ip netns exec "${P}h" timeout -k 5 600 "$mpirun" \
          --allow-run-as-root --oversubscribe --bind-to none -np 4 --hostfile "$work/hosts" \
          --mca plm_rsh_agent "$here/rsh_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
          --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" \
          --mca oob_tcp_if_include "$net.0/24" ${envs:+-x ${envs//,/ -x }} \
          "$bin" --config "$config" --vocab byte --text "$text" --batch 4 --seq 64 \
          --steps "$steps" --threads 1 "${extra[@]}" < /dev/null > "$work/run.log" 2>&1
        rc=$?
        t1=$(tx)
        ms=$(sed -n 's/^step *\([0-9]*\) | loss [^|]*| *\([0-9.]*\) ms.*/\1 \2/p' "$work/run.log" |
          awk '$1 > 1 { print $2 }' | sort -n | awk '{ v[NR] = $1 } END {
            if (NR) printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
        [ "$rc" = 0 ] || { ms="failed($rc)"; tail -5 "$work/run.log"; }
        printf '%-8s %-8s %-6s %-16s %12s %14.2f\n' "$config" "$mode" "$delay" "$label" "${ms:-?}" \
          "$(awk -v a="$t0" -v b="$t1" -v s="$steps" 'BEGIN { print (b - a) / s / 1e6 }')"
      done
    done
  done
done

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Multi-node tests over Linux network namespaces (docs/multinode.md). Each "node" is a
# network namespace with its own host name (a UTS namespace, node<i>), joined by a veth pair
# to a bridge in a namespace of its own; mpirun runs in a "head" namespace on the same bridge
# and starts Open MPI's daemons in the nodes through rsh_agent.sh. Ranks talk over TCP on the
# veths only (btl tcp,self: no shared memory, even between ranks of one node), so every byte
# between nodes crosses a node's eth0, whose tx_bytes mn_train reads.
#   run.sh <scenario> <mn_train> <mpirun> [mpirun args...]
# Scenarios:
#   same-<plain|zeropp|stage2>-<nodes>x<ranks>  trained across the nodes, the weights are
#       bitwise the same job's on one node (ztier.ranks_per_node standing in for the nodes);
#       the bytes that crossed the nodes' links match zt_stats' comm_bytes_inter (and, for
#       plain ZeRO-3 and stage 2, the formula) within WIRE_OVERHEAD
#   uneven       ZeRO++ on 3 nodes of 2+1+1 ranks commits within 5 s, with hpZ's warning
#   map-by-node  ZeRO++ with --map-by node moves the by-slot placement's bytes between the
#                nodes (wire counters) within 5%
#   kill         a rank of the second node SIGKILLs itself mid-training: every other rank
#                fails with ZT_ERR_COMM naming its world rank and exits within
#                ZT_COMM_TIMEOUT + 3 s
#   freeze       both ranks of the second node stop (SIGSTOP) mid-training, collectives of
#                4 lanes in flight (hosts differ): both ranks of the first node fail with
#                ZT_ERR_COMM and exit by themselves (status 2, no crash) within
#                ZT_COMM_TIMEOUT + 2 s; also in sanitizer builds, with no report
#   delay        a relay.py switch delays every frame 10 ms one way: ZeRO-3 and ZeRO++ train to
#                the same weights as on one node
#   split-save   the second node's link goes down during a checkpoint save, after rank 0
#                committed it and before the others heard (rank 0 stalls there: the tests'
#                ZT_TEST_DELAY_AT hook): ranks 0 and 1 report the save committed, ranks 2 and
#                3 (cut off) that they cannot know, none that it failed; `latest` names it
# Exit 77 (skipped) where this process may not create network namespaces.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# --rank <marks> <survivors> <program> [args...]: one rank of the kill and freeze scenarios;
# records the program's
# exit status and time in <marks>/status.<world rank>, then waits (at most 10 s) for the
# other survivors to record theirs: a rank that exits with an error makes mpirun end the
# job, and a survivor must not be counted as exiting by itself when mpirun killed it.
if [ "${1:-}" = --rank ]; then
  marks=$2 survivors=$3
  shift 3
  "$@"
  status=$?
  echo "$status $(date +%s.%N)" > "$marks/status.$OMPI_COMM_WORLD_RANK"
  shopt -s nullglob
  for ((i = 0; i < 200; i++)); do
    recorded=("$marks"/status.*)
    [ "${#recorded[@]}" -ge "$survivors" ] && break
    sleep 0.05
  done
  exit "$status"
fi

scenario=$1 prog=$2
shift 2
mpirun=("$@")
# TCP/IP and Ethernet headers (66 bytes a segment of at most 1448: 4.6%), the receivers'
# ACKs (counted on their links), Open MPI's fragment headers and the barriers around the
# measured steps, over the bytes ztier counts. Measured with this model: 1.02-1.05
# (ZeRO-3; GSO packs segments, fewer ACKs) and 1.04-1.08 (ZeRO++, smaller messages).
WIRE_MIN=0.90 WIRE_MAX=1.12

skip() { echo "SKIP: $*"; exit 77; }
[ -n "${ZT_MN_SANITIZE:-}" ] && [ "$scenario" != freeze ] &&
  skip "sanitizer build: these tests check the network behaviour, which the plain build covers"
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
P=zt$$
ip netns add "${P}b" 2> /dev/null || skip "cannot create network namespaces (ip netns add)"
command -v unshare > /dev/null && unshare --uts true 2> /dev/null ||
  { ip netns del "${P}b"; skip "cannot create UTS namespaces (unshare --uts)"; }

work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/multinode.XXXXXX")
namespaces=("${P}b")
relay_pid=
cleanup() {
  [ -n "$relay_pid" ] && kill "$relay_pid" 2> /dev/null
  for ns in "${namespaces[@]}"; do # anything of this run still alive in its namespaces
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null; done
  done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2> /dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
net=10.77.0
nodes_made=0

# make_nodes <n> [delay ms]: namespaces ${P}n1..n (10.77.0.<i>, host node<i>) and ${P}h
# (10.77.0.100, mpirun), joined by a bridge in ${P}b, or by relay.py when delayed.
make_nodes() {
  local n=$1 delay=${2:-}
  ip -n "${P}b" link set lo up
  [ -z "$delay" ] && { ip -n "${P}b" link add br0 type bridge && ip -n "${P}b" link set br0 up; }
  local i ports=()
  for i in $(seq 1 "$n") 100; do
    local ns=${P}n$i
    [ "$i" = 100 ] && ns=${P}h
    ip netns add "$ns" || return 1
    namespaces+=("$ns")
    ip -n "${P}b" link add "v$i" type veth peer name eth0 netns "$ns" || return 1
    ip -n "$ns" addr add "$net.$i/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    [ -z "$delay" ] && ip -n "${P}b" link set "v$i" master br0
    ip -n "${P}b" link set "v$i" up
    ports+=("v$i")
  done
  if [ -n "$delay" ]; then
    ip netns exec "${P}b" python3 "$here/relay.py" "$delay" "${ports[@]}" > "$work/relay.log" 2>&1 &
    relay_pid=$!
  fi
  nodes_made=$n
}

# across <np> <hostfile lines> <log> [mpirun options --] <mn_train args...>: mpirun in the
# head namespace over the nodes; the program's output goes to <log>.
across() {
  local np=$1 hosts=$2 log=$3 opts=()
  shift 3
  if [ "$1" = -- ]; then shift; else
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
  fi
  printf '%s\n' "$hosts" > "$work/hostfile"
  # the environment reaches the daemons and ranks through rsh_agent.sh, a local process
  ZT_MN_PREFIX=$P ZT_MN_IFACE=eth0 ip netns exec "${P}h" timeout -k 5 120 "${mpirun[@]}" -np "$np" \
    --hostfile "$work/hostfile" --mca plm_rsh_agent "$here/rsh_agent.sh" \
    --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" \
    --mca oob_tcp_if_include "$net.0/24" "${opts[@]}" "$@" < /dev/null > "$log" 2>&1
}

# one_node <np> <log> <mn_train args...>: the reference: the same job in the root namespace
one_node() {
  local np=$1 log=$2
  shift 2
  timeout -k 5 120 "${mpirun[@]}" -np "$np" "$@" < /dev/null > "$log" 2>&1
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; } # field <name> < "mn rank=..." lines
sum() { awk '{ s += $1 } END { printf "%.0f", s }'; }

# wire <log>: bytes that left the nodes over the measured steps: per host, the tx_bytes
# difference seen by its lowest rank (every rank of a node reads the same counter)
wire() {
  grep '^mn rank=' "$1" | sort -t= -k2 -n | awk '{
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      if (!(f["host"] in seen)) { seen[f["host"]] = 1; s += f["tx1"] - f["tx0"] } }
    END { printf "%.0f", s }'
}

# hosts_of <log>: "rank:host" of each rank, in rank order
hosts_of() {
  grep '^mn rank=' "$1" | sort -t= -k2 -n | awk '{
      for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
      printf "%s:%s ", f["rank"], f["host"] }'
}

ratio_ok() { awk -v a="$1" -v b="$2" -v lo="$3" -v hi="$4" 'BEGIN { r = a / b; exit !(r >= lo && r <= hi) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b ? a / b : -1 }'; }

# same <plain|zeropp> <nodes> <ranks per node> [delay ms]
same() {
  local mode=$1 n=$2 r=$3 delay=${4:-} np=$(($2 * $3)) steps=6 hosts="" i
  for i in $(seq 1 "$n"); do hosts+="$net.$i slots=$r"$'\n'; done
  one_node "$np" "$work/one.log" "$prog" "$mode" "$steps" "$work/one.bin" "rpn=$r" ||
    { cat "$work/one.log"; fail "the one-node run failed"; return; }
  [ "$nodes_made" -ge "$n" ] || make_nodes "$n" "$delay" || { fail "could not build the nodes"; return; }
  if [ -n "$delay" ]; then # a TCP connect from node2 to node1 takes one round trip
    local rtt
    rtt=$(ip netns exec "${P}n2" python3 -c '
import socket, subprocess, sys, time
srv = subprocess.Popen(["ip", "netns", "exec", sys.argv[1], "python3", "-c",
    "import socket; s = socket.create_server((\"\", 5999)); print(flush=True); s.accept()"],
    stdout=subprocess.PIPE)
srv.stdout.readline()
t = time.monotonic(); c = socket.create_connection((sys.argv[2], 5999))
print("%.1f" % ((time.monotonic() - t) * 1000)); c.close(); srv.wait()' "${P}n1" "$net.1")
    echo "TCP connect between the nodes: ${rtt:-?} ms (one round trip; $delay ms each way)"
    awk -v r="${rtt:-0}" -v d="$delay" 'BEGIN { exit !(r >= 1.8 * d) }' ||
      fail "the link is not delayed"
  fi
  local t0=$SECONDS
  across "$np" "$hosts" "$work/across.log" -- "$prog" "$mode" "$steps" "$work/across.bin"
  local rc=$?
  cat "$work/across.log"
  echo "$np ranks on $n nodes${delay:+ with $delay ms one way}: status $rc after $((SECONDS - t0)) s"
  [ "$rc" = 0 ] || { fail "training across the nodes failed"; return; }
  local want="" k
  for ((k = 0; k < np; k++)); do want+="$k:node$((k / r + 1)) "; done
  [ "$(hosts_of "$work/across.log")" = "$want" ] ||
    fail "ranks on hosts $(hosts_of "$work/across.log"), expected $want"
  if cmp "$work/one.bin" "$work/across.bin"; then
    echo "weights bitwise equal to the one-node run ($(stat -c %s "$work/one.bin") bytes)"
  else
    fail "weights differ from the one-node run"
  fi
  [ -n "$delay" ] && return
  local counted wired
  counted=$(grep '^mn rank=' "$work/across.log" | field inter | sum)
  wired=$(wire "$work/across.log")
  echo "inter-node bytes over $((steps - 1)) steps: $wired on the links, $counted counted by" \
       "zt_stats (x$(ratio "$wired" "$counted"), allowed $WIRE_MIN-$WIRE_MAX)"
  ratio_ok "$wired" "$counted" "$WIRE_MIN" "$WIRE_MAX" || fail "link bytes do not match zt_stats"
  # The bytes every rank sends to the np - r ranks on other nodes over the steps measured,
  # summed over the ranks, from how many times per step each layer's shard is sent (the awk
  # expression of l, the layer): its parameters, each rounded up to 16 elements, rounded up
  # to np x 16 and split over the np ranks (fp32).
  # ZeRO-3: its gradients reduce-scattered and the layer gathered twice, for the forward pass
  # and again for the backward one (stage3_max_reuse_distance 0), but the last: its backward
  # follows its forward at once. Stage 2: a reduce-scatter and one all-gather of the replica
  # after the step.
  local sends=""
  [ "$mode" = plain ] && sends="l < 2 ? 3 : 2"
  [ "$mode" = stage2 ] && sends="2"
  if [ -n "$sends" ]; then
    local formula
    formula=$(awk -v np="$np" -v r="$r" -v s=$((steps - 1)) '
      function up(x, m) { return int((x + m - 1) / m) * m }
      BEGIN {
        split("32 256 256 256 256 8", d, " "); b = 0
        for (l = 0; l < 3; l++)
          b += ('"$sends"') * up(up(d[2*l+1] * d[2*l+2], 16) + up(d[2*l+2], 16), np * 16) / np
        printf "%.0f", 4 * b * (np - r) * np * s }')
    echo "$mode formula: $formula bytes (zt_stats x$(ratio "$counted" "$formula"))"
    ratio_ok "$counted" "$formula" 1 1 || fail "zt_stats differ from the formula"
  fi
}

uneven() {
  make_nodes 3 || { fail "could not build the nodes"; return; }
  local t0=$SECONDS
  across 4 "$net.1 slots=2"$'\n'"$net.2 slots=1"$'\n'"$net.3 slots=1" "$work/across.log" -- \
    "$prog" zeropp 4 "$work/across.bin"
  local rc=$?
  cat "$work/across.log"
  echo "2+1+1 ranks on 3 nodes: status $rc after $((SECONDS - t0)) s"
  [ "$rc" = 0 ] || fail "ZeRO++ on uneven nodes failed"
  [ "$(hosts_of "$work/across.log")" = "0:node1 1:node1 2:node2 3:node3 " ] ||
    fail "ranks on hosts $(hosts_of "$work/across.log")"
  local slow
  slow=$(grep '^mn rank=' "$work/across.log" | field commit_s | awk '$1 >= 5')
  [ -z "$slow" ] && [ "$(grep -c '^mn rank=.*commit_s=' "$work/across.log")" = 4 ] ||
    fail "not every rank committed within 5 s"
  grep -Eqi "warn.*(hpz.*\<off\>|\<off\>.*hpz)" "$work/across.log" || fail "no warning that hpZ is off"
}

map_by_node() {
  make_nodes 2 || { fail "could not build the nodes"; return; }
  local hosts="$net.1 slots=2"$'\n'"$net.2 slots=2" bytes=() counts=()
  local how
  for how in slot node; do
    across 4 "$hosts" "$work/$how.log" --map-by "$how" -- "$prog" zeropp 6 "$work/$how.bin" ||
      { cat "$work/$how.log"; fail "ZeRO++ mapped by $how failed"; return; }
    cat "$work/$how.log"
    bytes+=("$(wire "$work/$how.log")")
    counts+=("$(grep '^mn rank=' "$work/$how.log" | field inter | sum)")
    echo "--map-by $how: ranks on $(hosts_of "$work/$how.log"): ${bytes[-1]} bytes between" \
         "nodes on the links, ${counts[-1]} counted by zt_stats (x$(ratio "${bytes[-1]}" "${counts[-1]}"))"
  done
  [ "$(hosts_of "$work/node.log")" = "0:node1 1:node2 2:node1 3:node2 " ] ||
    fail "--map-by node placed the ranks on $(hosts_of "$work/node.log")"
  # By slot the links carry what zt_stats counts. zt_stats counts each collective as if every
  # rank sent its block straight to the ranks that need it; Open MPI's recursive doubling over
  # the world pairs rank r with r^1 first, which by node is the other node: then a block
  # crosses once where the count says twice, so by node the links may carry less than the
  # count, never more. What --map-by node must not do (hpZ's groups spanning both nodes made
  # it 3.6x) is move more between nodes than by slot.
  ratio_ok "${bytes[0]}" "${counts[0]}" "$WIRE_MIN" "$WIRE_MAX" ||
    fail "--map-by slot: link bytes do not match zt_stats"
  echo "by node / by slot, counted by zt_stats: x$(ratio "${counts[1]}" "${counts[0]}") (allowed 0.95-1.05)"
  ratio_ok "${counts[1]}" "${counts[0]}" 0.95 1.05 ||
    fail "--map-by node counts other bytes between nodes than by slot"
  echo "by node / by slot, on the links: x$(ratio "${bytes[1]}" "${bytes[0]}") (allowed at most 1.05)"
  ratio_ok "${bytes[1]}" "${bytes[0]}" 0 1.05 ||
    fail "--map-by node moves more bytes between nodes than by slot"
  ratio_ok "${bytes[1]}" "${counts[1]}" 0 "$WIRE_MAX" ||
    fail "--map-by node: the links carry more than zt_stats counts"
}

# lose <kill|freeze>: kill: rank 2 (node 2) SIGKILLs itself before step 3; freeze: ranks 2
# and 3 (all of node 2) stop themselves there. The other ranks must fail with ZT_ERR_COMM
# naming their world rank and host, and exit by themselves with status 2 in time.
lose() {
  local how=$1 timeout=${ZT_COMM_TIMEOUT:-5} victim=2 survivors=(0 1 3) slack=3
  local at="" # freeze: $ZT_MN_FREEZE_MS ms into the step (default 3), collectives in flight
  [ "$how" = freeze ] && survivors=(0 1) slack=2 at=+${ZT_MN_FREEZE_MS:-3}
  make_nodes 2 || { fail "could not build the nodes"; return; }
  mkdir "$work/marks"
  local t0=$SECONDS
  ZT_COMM_TIMEOUT=$timeout across 4 "$net.1 slots=2"$'\n'"$net.2 slots=2" "$work/across.log" \
    --enable-recovery -- bash "$0" --rank "$work/marks" "${#survivors[@]}" \
    "$prog" plain 20 "$work/across.bin" "$how=$victim@3$at" &
  local mpirun_pid=$! waited=0
  # With --enable-recovery, Open MPI 4.1's mpirun may stay after every rank has gone: once
  # the survivors have recorded their exit, it gets 5 s, then is ended here.
  while kill -0 "$mpirun_pid" 2> /dev/null &&
    [ "$(ls "$work/marks" | wc -l)" -lt "${#survivors[@]}" ] &&
    [ $((SECONDS - t0)) -lt 60 ]; do sleep 0.2; done
  while kill -0 "$mpirun_pid" 2> /dev/null && [ "$waited" -lt 25 ]; do sleep 0.2; waited=$((waited + 1)); done
  if kill -0 "$mpirun_pid" 2> /dev/null; then
    echo "mpirun still running 5 s after the ranks exited: ended here"
    for pid in $(ip netns pids "${P}h"); do kill "$pid" 2> /dev/null; done
  fi
  wait "$mpirun_pid"
  cat "$work/across.log"
  local lost_at word=killed
  [ "$how" = freeze ] && word=frozen
  lost_at=$(grep "^mn rank=$victim $word=" "$work/across.log" | field "$word")
  [ -n "$lost_at" ] || { fail "rank $victim was not $word"; return; }
  grep -q "^mn rank=$victim $word=.* host=node2" "$work/across.log" ||
    fail "rank $victim was not on the second node"
  grep -q "AddressSanitizer" "$work/across.log" && fail "AddressSanitizer reported an error"
  local r
  for r in "${survivors[@]}"; do
    local line status exit_at error_at
    line=$(grep "^mn rank=$r error=" "$work/across.log")
    error_at=$(field at <<< "$line")
    read -r status exit_at < "$work/marks/status.$r" 2> /dev/null
    echo "rank $r: error $(awk -v a="$lost_at" -v b="${error_at:-0}" 'BEGIN { printf "%.2f", b - a }') s," \
         "exit (status ${status:-none}) $(awk -v a="$lost_at" -v b="${exit_at:-0}" 'BEGIN { printf "%.2f", b - a }') s after rank $victim was $word"
    grep -q "error=ZT_ERR_COMM" <<< "$line" || fail "rank $r did not fail with ZT_ERR_COMM"
    grep -Eq "world rank $r \(host node[0-9]+\)" <<< "$line" || fail "rank $r's message does not name its world rank and host"
    [ "${status:-}" = 2 ] || fail "rank $r did not exit by itself with status 2"
    awk -v a="$lost_at" -v b="${exit_at:-1e18}" -v l=$((timeout + slack)) 'BEGIN { exit !(b - a <= l) }' ||
      fail "rank $r did not exit within ZT_COMM_TIMEOUT + $slack s of rank $victim being $word"
  done
}

split_save() {
  local timeout=8 ckpt=$work/ckpt t0=$SECONDS
  make_nodes 2 || { fail "could not build the nodes"; return; }
  ZT_COMM_TIMEOUT=$timeout across 4 "$net.1 slots=2"$'\n'"$net.2 slots=2" "$work/across.log" \
    -- "$prog" plain 3 "$work/across.bin" "save=$ckpt@3" &
  local mpirun_pid=$!
  while [ ! -s "$ckpt/latest" ] && kill -0 "$mpirun_pid" 2> /dev/null &&
    [ $((SECONDS - t0)) -lt 60 ]; do sleep 0.02; done
  [ -s "$ckpt/latest" ] || { fail "rank 0 did not commit the save"; wait "$mpirun_pid"; return; }
  ip -n "${P}b" link set v2 down # node2 cut off while rank 0 stalls before its word
  echo "node2 cut off $((SECONDS - t0)) s after the start, once $ckpt/latest appeared"
  # ranks 2 and 3 give up on rank 0's word ZT_COMM_TIMEOUT after they began to wait for it
  # (before the cut); their output reaches mpirun through their node's link, once it is back
  sleep $((timeout + 3))
  ip -n "${P}b" link set v2 up
  wait "$mpirun_pid"
  grep '^mn rank=[0-3] save=' "$work/across.log"
  local r line
  for r in 0 1; do
    grep -q "^mn rank=$r save=ok .*host=node1" "$work/across.log" ||
      fail "rank $r (node1) did not report the save committed"
  done
  for r in 2 3; do
    line=$(grep "^mn rank=$r save=" "$work/across.log")
    grep -q "save=ZT_ERR_COMM .*host=node2" <<< "$line" || fail "rank $r (node2) did not fail with ZT_ERR_COMM"
    grep -q "cannot know" <<< "$line" || fail "rank $r does not say that it cannot know the outcome"
    grep -q "latest" <<< "$line" || fail "rank $r does not name the latest file"
  done
  local newest
  newest=$(head -n 1 "$ckpt/latest")
  [ -n "$newest" ] && [ -d "$ckpt/$newest" ] || fail "latest does not name a checkpoint folder ($newest)"
}

case "$scenario" in
  same-*)
    IFS=-x read -r _ mode n r <<< "$scenario"
    same "$mode" "$n" "$r"
    ;;
  uneven) ZT_COMM_TIMEOUT=${ZT_COMM_TIMEOUT:-5} uneven ;;
  map-by-node) map_by_node ;;
  kill) lose kill ;;
  freeze) lose freeze ;;
  split-save) split_save ;;
  delay)
    same plain 2 2 10
    same zeropp 2 2 10
    ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
[ "$fails" = 0 ] || exit 1
echo PASS

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ztier bench profile` (docs/plan.md, "The machine profile"): a short run on the tiny model writes a profile
# whose machine fields are there and whose every rate is positive with a "measured: ..."
# source; the compute list's FLOP counts are the formulas of docs/plan.md (recomputed
# here from the shapes) and the rates are their medians; `ztier plan` reads the file and
# predicts a step; nothing is left beside it. Bad arguments fail with the named cause, before
# measuring, and a failed run leaves an existing --out file as it was. With mpirun (after
# the two paths): two ranks, and the collectives' rates are there too.
#   bench_profile.sh <ztier> [mpirun ...]
set -euo pipefail
ztier=$1
shift
mpirun=("$@")
work=$(mktemp -d "${ZT_TEST_TMPDIR:-/tmp}/bench-profile.XXXXXX")
trap 'rm -rf "$work"' EXIT
M=(--config tiny --vocab 64 --batch 4 --seq 16)

# check_profile <file> <world> <nvme folder>: the contract of docs/plan.md ("The machine profile"), asserted
check_profile() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, os, statistics, sys
path, world, nvme = sys.argv[1], int(sys.argv[2]), os.path.realpath(sys.argv[3])
p = json.load(open(path))
def fail(msg): sys.exit(f"{path}: {msg}")
if p.get("format") != "ztier-profile" or p.get("version") != 1:
    fail(f"format/version {p.get('format')!r}/{p.get('version')!r}")
m = p["machine"]
for k in ("description", "cpu", "backend", "comm", "nvme_path", "measured_at", "ztier"):
    if not isinstance(m.get(k), str) or not m[k]:
        fail(f"machine.{k} = {m.get(k)!r}: not a non-empty string")
for k in ("cores", "memory_bytes", "threads"):
    if not isinstance(m.get(k), int) or m[k] <= 0:
        fail(f"machine.{k} = {m.get(k)!r}: not a positive integer")
if "gpu" not in m or "gpu_peak_flops" not in m:
    fail("machine.gpu / gpu_peak_flops missing (null where there is no GPU)")
if m["world"] != world or m["backend"] not in ("host", "cuda"):
    fail(f"machine.world {m['world']} (want {world}), backend {m['backend']!r}")
if m["comm"] != ("single" if world == 1 else "mpi"):
    fail(f"machine.comm {m['comm']!r} with world {world}")
if m["nvme_path"] != nvme or nvme not in p["rates"]["nvme_read_bytes_per_s"]["source"]:
    fail(f"machine.nvme_path {m['nvme_path']!r}, want the folder measured, {nvme!r}")
if "commit " not in m["ztier"]:
    fail(f"machine.ztier {m['ztier']!r} names no commit")
required = ["h2d_bytes_per_s", "d2h_bytes_per_s", "h2d_d2h_both_bytes_per_s",
            "host_memcpy_bytes_per_s", "nvme_read_bytes_per_s", "nvme_write_bytes_per_s",
            "adam_params_per_s", "quantize_bytes_per_s", "dequantize_bytes_per_s",
            "gemm_flops_per_s", "attention_flops_per_s", "elementwise_bytes_per_s"]
if m["backend"] == "cuda":
    required += ["adam_device_params_per_s"]
if world > 1:
    required += ["allgather_bytes_per_s", "reduce_scatter_bytes_per_s",
                 "allgather_latency_s", "reduce_scatter_latency_s"]
r = p["rates"]
for k in required:
    v = r.get(k)
    if v is None:
        fail(f"rates.{k} missing")
    if not isinstance(v.get("value"), (int, float)) or not v["value"] > 0:
        fail(f"rates.{k}.value = {v.get('value')!r}: not positive")
    if not v.get("unit") or not str(v.get("source", "")).startswith("measured: "):
        fail(f"rates.{k}: unit {v.get('unit')!r}, source {v.get('source')!r}")
for k in ("nvme_read_bytes_per_s", "nvme_write_bytes_per_s"):
    if r[k].get("block_bytes", 0) < 4096 or r[k].get("queue_depth", 0) < 1:
        fail(f"rates.{k}: no block_bytes/queue_depth")
if r["adam_params_per_s"].get("threads") != m["threads"]:
    fail("rates.adam_params_per_s.threads is not machine.threads")
if world > 1 and any(r[k].get("world") != world for k in required[-4:]):
    fail("a collective's rate does not name the world")
# the compute list: the tiny model (C 32, NH 2, Vp 64) at B 4, T 16 -> N 64
B, T, C, NH, Vp, N = 4, 16, 32, 2, 64, 64
# the GEMMs at every micro-batch `ztier plan --search` tries for B rows (d x T, d dividing B:
# 1, 2, 4), forward and backward; gemm_flops_per_s the median of those at the model's N alone
gemms = [e for e in p["compute"] if e["op"] == "gemm"]
want = {(d * T, oc, k, ps) for k, oc in ((C, 3 * C), (C, C), (C, 4 * C), (4 * C, C), (C, Vp))
        for d in (1, 2, 4) for ps in ("forward", "backward")}
got = sorted((e["m"], e["n"], e["k"], e["pass"]) for e in gemms)
if set(got) != want or len(got) != len(want):
    fail(f"gemm shapes {got}, want {sorted(want)}")
for e in gemms:
    f = (2 if e["pass"] == "forward" else 4) * e["m"] * e["n"] * e["k"]
    if e["flops"] != f or not e["seconds"] > 0 or not e["source"].startswith("measured: "):
        fail(f"gemm entry {e}: flops want {f}")
med = statistics.median(e["flops"] / e["seconds"] for e in gemms if e["m"] == N)
if abs(r["gemm_flops_per_s"]["value"] / med - 1) > 1e-6:
    fail(f"gemm_flops_per_s {r['gemm_flops_per_s']['value']} is not the entries' median {med}")
att = [e for e in p["compute"] if e["op"] == "attention"]
if len(att) != 1 or (att[0]["B"], att[0]["T"], att[0]["C"], att[0]["NH"]) != (B, T, C, NH):
    fail(f"attention entries {att}")
a = att[0]
if a["flops"] != 6 * B * T * T * C or abs(a["seconds"] - a["forward_s"] - a["backward_s"]) > 1e-12:
    fail(f"attention entry {a}: flops want {6 * B * T * T * C}")
if abs(r["attention_flops_per_s"]["value"] * a["seconds"] / a["flops"] - 1) > 1e-6:
    fail("attention_flops_per_s is not the entry's flops / seconds")
# the layers: each kind once per pass, FLOPs as docs/plan.md counts them
layers = {(e["op"], e["layer"]): e for e in p["compute"] if e["op"].startswith("layer_")}
fwd = {"embed": 0, "block": 2 * N * 12 * C * C + 2 * B * T * T * C, "ln_f": 0,
       "head": 2 * N * C * Vp, "loss": 0}
want = {("layer_forward", k): f for k, f in fwd.items()}
want.update({("layer_backward", k): 2 * f for k, f in fwd.items() if k != "loss"})
if set(layers) != set(want):
    fail(f"layer entries {sorted(layers)}, want {sorted(want)}")
for key, e in layers.items():
    if e["flops"] != want[key] or not e["seconds"] > 0 or (e["B"], e["T"], e["C"], e["NH"]) != (B, T, C, NH):
        fail(f"layer entry {e}: flops want {want[key]}")
print(f"{path}: {len(r)} rates, {len(p['compute'])} compute entries, backend {m['backend']}, ok")
PY
}

# expect_fail <code> <message part> <args...>: fails with that exit code and message
expect_fail() {
  local code=$1 msg=$2 rc=0
  shift 2
  "$ztier" bench profile "$@" > "$work/out" 2> "$work/err" || rc=$?
  if [ "$rc" != "$code" ] || ! grep -qF -- "$msg" "$work/err"; then
    echo "ztier bench profile $*: exit $rc (want $code), stderr:"; cat "$work/err"
    echo "(want a message with: $msg)"; exit 1
  fi
  if grep -q '\[1/' "$work/err"; then
    echo "ztier bench profile $*: measured before failing:"; cat "$work/err"; exit 1
  fi
  echo "bad arguments ($*): ok"
}

if [ ${#mpirun[@]} -eq 0 ]; then
  mkdir "$work/nvme"
  "$ztier" bench profile "${M[@]}" --seconds 2 --nvme-path "$work/nvme" --out "$work/m.json"
  check_profile "$work/m.json" 1 "$work/nvme"
  # --json: the same profile on one line, the last, on standard output
  "$ztier" bench profile "${M[@]}" --seconds 1 --nvme-path "$work/nvme" --json 2> /dev/null |
    tail -n 1 > "$work/line.json"
  check_profile "$work/line.json" 1 "$work/nvme" && rm "$work/line.json"
  leftovers=$(ls -A "$work/nvme"; ls "$work" | grep -v '^\(m.json\|nvme\|out\|err\)$' || true)
  [ -z "$leftovers" ] || { echo "left behind: $leftovers"; exit 1; }
  plan=$("$ztier" plan "${M[@]}" --profile "$work/m.json")
  echo "$plan"
  python3 -c "import re,sys; s=float(re.search(r'predicted step: ([0-9.e+-]+) s', sys.argv[1]).group(1)); sys.exit(0 if s > 0 else 1)" "$plan" ||
    { echo "ztier plan printed no step"; exit 1; }
  # at micro-batch 2 (as --search tries for a batch of 4) the matmuls come from the GEMM
  # entries measured at m 2 x 16 (the exact layer entries are at batch 4 only)
  "$ztier" plan --config tiny --vocab 64 --batch 2 --seq 16 --profile "$work/m.json" |
    grep -q "^matmuls from: block forward: GEMM entries at m 32;.*head backward: GEMM entries at m 32$" ||
    { echo "ztier plan at batch 2 did not use the GEMM entries at m 32"; exit 1; }

  expect_fail 2 "cannot create a file in the folder '$work/missing'" "${M[@]}" --out "$work/missing/m.json"
  expect_fail 2 "--out '$work' is a folder: give the profile's file name" "${M[@]}" --out "$work"
  expect_fail 2 "--nvme-path '$work/none': No such file or directory" "${M[@]}" --nvme-path "$work/none"
  expect_fail 2 "--nvme-path '$work/m.json': not a folder" "${M[@]}" --nvme-path "$work/m.json"
  expect_fail 2 "--seconds '0': give the time budget in seconds" --seconds 0
  expect_fail 2 "--seconds 'soon': give the time budget in seconds" --seconds soon
  expect_fail 2 "--config 'd7x': not a model" --config d7x
  expect_fail 2 "--batch '0': give an integer from 1" --batch 0
  expect_fail 2 "--seq 4096: tiny takes at most 16 tokens" --config tiny --seq 4096
  expect_fail 2 "--backend 'tpu': give auto, host or cuda" --backend tpu
  expect_fail 2 "unknown option '--nvme'" --nvme "$work"

  # a run that fails while measuring (the swap file cannot be made: its folder is a file's
  # name once the run starts) leaves the existing profile as it was, and no temporary file
  echo '{"old": true}' > "$work/keep.json"
  rc=0
  "$ztier" bench profile "${M[@]}" --seconds 1 --nvme-path /proc/self --out "$work/keep.json" \
    > /dev/null 2> "$work/err" || rc=$?
  [ "$rc" = 1 ] || { echo "a run failing in the NVMe phase: exit $rc, want 1"; cat "$work/err"; exit 1; }
  [ "$(cat "$work/keep.json")" = '{"old": true}' ] || { echo "keep.json changed"; exit 1; }
  [ -z "$(ls "$work" | grep tmp || true)" ] || { echo "a temporary file is left"; ls "$work"; exit 1; }
  echo "failed run keeps the old file: ok"

  # stopped midway (SIGINT, as Ctrl-C): the old file stays, the temporary file goes
  "$ztier" bench profile "${M[@]}" --seconds 30 --nvme-path "$work/nvme" --out "$work/keep.json" \
    > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do ls "$work" | grep -q 'keep.json.tmp' && break; sleep 0.05; done
  kill -INT "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 130 ] || { echo "after SIGINT: exit $rc, want 130"; exit 1; }
  [ "$(cat "$work/keep.json")" = '{"old": true}' ] || { echo "keep.json changed by SIGINT"; exit 1; }
  [ -z "$(ls "$work" | grep tmp || true)" ] || { echo "SIGINT left a temporary file"; ls "$work"; exit 1; }
  echo "stopped run keeps the old file, leaves no temporary file: ok"
else
  "${mpirun[@]}" -np 2 "$ztier" bench profile "${M[@]}" --seconds 2 --nvme-path "$work" \
    --out "$work/m2.json"
  check_profile "$work/m2.json" 2 "$work"
  "$ztier" plan "${M[@]}" --world 2 --profile "$work/m2.json" | grep -q 'predicted step' ||
    { echo "ztier plan --world 2 did not read the profile"; exit 1; }
fi
echo "bench_profile: ok"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checkpoint save and load throughput against the disk (docs/benchmarks.md, "Checkpoints"):
# the GPT-2 trainer on 4 ranks of this machine saves `rounds` checkpoints into DIR (each
# written, fsynced and committed: the time zt_checkpoint_save takes on rank 0), then, round by
# round and interleaved, `ztier bench nvme` writes and reads as many bytes in DIR (O_DIRECT,
# fio's best as the limit), the checkpoint is loaded on 4 ranks (the same layout: one file per
# rank) and on 3 (resharded: each rank reads its pieces of several files), with the page cache
# dropped before each load (root only; otherwise the loads read memory and the script says
# so). Medians and the ratios to fio's figures.
# RANKS=1 saves and loads on one rank (resharded: on 2); KEEP=DIR copies the runs' output there.
# REUSE=1 saves with --reuse-files (ztier.checkpoint_reuse_files): rounds + 2 saves, the save
# figure the median of those after the second (the first two write new files: nothing removed
# yet to reuse), the first two's median printed beside it.
# The last line is the figures as one JSON object.
#   bench/checkpoints.sh <zt_gpt2> <ztier> <DIR> [config] [rounds]
# e.g. RANKS=4 bench/checkpoints.sh build/examples/gpt2/zt_gpt2 build/tools/ztier /mnt/nvme/bench d12 3
set -uo pipefail
gpt2=${1:?usage: checkpoints.sh <zt_gpt2> <ztier> <DIR> [config] [rounds]} ztier=${2:?} dir=${3:?}
config=${4:-d12} rounds=${5:-3}
np=${RANKS:-4}
np2=$((np > 1 ? np - 1 : 2))
text=${TEXT:-/usr/share/common-licenses/GPL-3}
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
model=(--config "$config" --text "$text" --batch 12 --seq 64 --threads 1 --device cpu)
mkdir -p "$dir" || exit 1
out=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && cp -r "$out"/. "$KEEP"/; rm -rf "$out" "$dir/ck" "$dir/nvme"' EXIT
rm -rf "$dir/ck"
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2> /dev/null; }
drop && cached=0 || cached=1
reuse=${REUSE:-0}
saves=$((reuse == 1 ? rounds + 2 : rounds))
"${mpirun[@]}" -np "$np" "$gpt2" "${model[@]}" --steps "$saves" --checkpoint "$dir/ck" --save-every 1 \
  --keep 1 $([ "$reuse" = 1 ] && echo --reuse-files) > "$out/save.txt" 2>&1 || { tail -5 "$out/save.txt"; exit 1; }
bytes=$(du -sb "$dir/ck/$(head -1 "$dir/ck/latest")" | cut -f1)
mkdir -p "$dir/nvme"
for r in $(seq "$rounds"); do
  "$ztier" bench nvme --path "$dir/nvme" --size "$bytes" --reps 1 --json > "$out/nvme$r.txt" 2>&1 ||
    { tail -3 "$out/nvme$r.txt"; exit 1; }
  # fio writing new files, one per rank (what a save writes; `bench nvme` overwrites its own): KiB/s
  command -v fio > /dev/null && fio --name=new --directory="$dir/nvme" --filename_format='new.$jobnum' \
    --numjobs="$np" --group_reporting --ioengine=io_uring --direct=1 --rw=write --bs=8M --iodepth=4 \
    --size=$((bytes / np)) --end_fsync=1 --output-format=terse 2> /dev/null | cut -d';' -f48 > "$out/fionew$r.txt"
  rm -f "$dir"/nvme/new.*
  for n in same reshard; do
    drop
    k=$([ $n = same ] && echo "$np" || echo "$np2")
    "${mpirun[@]}" -np "$k" "$gpt2" "${model[@]}" --steps "$rounds" --resume "$dir/ck" > "$out/load$n-$r.txt" 2>&1 ||
      { tail -5 "$out/load$n-$r.txt"; exit 1; }
  done
done
median() { sort -g | awk '{a[NR] = $1} END {print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
gbps() { awk -v b="$bytes" '{printf "%.3f\n", b / $1 / 1e9}'; }
save_times() { sed -n 's/^checkpoint saved to .* in \([0-9.]*\) s$/\1/p' "$out/save.txt"; }
skip=$((reuse == 1 ? 2 : 0))
save=$(save_times | tail -n +$((skip + 1)) | gbps | median)
first=$(save_times | head -2 | gbps | median)
load4=$(cat "$out"/loadsame-*.txt | sed -n 's/^resumed .* in \([0-9.]*\) s$/\1/p' | gbps | median)
load3=$(cat "$out"/loadreshard-*.txt | sed -n 's/^resumed .* in \([0-9.]*\) s$/\1/p' | gbps | median)
# a restart's cost: process start -> first step (the trainer's "resume:" line, same layout),
# against fio's time to read the checkpoint (the goal: at most 1.2 x that)
resume_s=$(cat "$out"/loadsame-*.txt | sed -n 's/^resume: the first step starts \([0-9.]*\) s after.*/\1/p' | median)
fio_w=$(cat "$out"/nvme*.txt | sed -n 's/.*"fio_write_gbps":\([0-9.]*\).*/\1/p' | median)
fio_r=$(cat "$out"/nvme*.txt | sed -n 's/.*"fio_read_gbps":\([0-9.]*\).*/\1/p' | median)
zt_w=$(cat "$out"/nvme*.txt | sed -n 's/.*"write_gbps":\([0-9.]*\).*/\1/p' | median)
zt_r=$(cat "$out"/nvme*.txt | sed -n 's/.*"read_gbps":\([0-9.]*\).*/\1/p' | median)
fio_new=$(cat "$out"/fionew*.txt 2> /dev/null | awk '$1 > 0 {printf "%.3f\n", $1 * 1024 / 1e9}' | median)
fio_new=${fio_new:-0}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "GPT-2 $config checkpoint, $bytes bytes ($np files), $rounds rounds, $dir; $(uname -n), $(nproc) cores"
[ "$cached" = 1 ] && echo "the page cache could not be dropped (not root): the loads read memory, not the disk"
echo "| | GB/s (median) | fio on the same folder | ratio |"
echo "| --- | --- | --- | --- |"
[ "$reuse" = 1 ] && echo "saves reuse the removed checkpoint's files (--reuse-files): the first two (new files, nothing to reuse yet) $first GB/s"
echo "| save on $np ranks (write + fsync) | $save | $fio_w write (ztier bench nvme $zt_w) | $(ratio "$save" "$fio_w") |"
[ "$fio_new" != 0 ] && echo "| save on $np ranks, against fio writing $np new files | $save | $fio_new write, new files | $(ratio "$save" "$fio_new") |"
echo "| load on $np ranks (the same layout) | $load4 | $fio_r read (ztier bench nvme $zt_r) | $(ratio "$load4" "$fio_r") |"
echo "| load on $np2 ranks (resharded) | $load3 | $fio_r read | $(ratio "$load3" "$fio_r") |"
echo "resharded / same-layout load: $(ratio "$load3" "$load4")"
resume_ratio=$(awk -v s="$resume_s" -v b="$bytes" -v r="$fio_r" 'BEGIN {printf "%.2f", s / (b / r / 1e9)}')
echo "resume on $np ranks, process start -> first step: $resume_s s, $resume_ratio x fio's time to read the checkpoint (goal <= 1.2)"
# where a resume's time goes (zt_gpt2's phases, each same-layout run), and the machine's own
# first touch of fresh memory after a cache drop (bench/first_touch.c, as many bytes as the
# checkpoint, split over as many processes as ranks, their rates summed): a VM that gives freed
# pages back to its host slows every fresh page, ztier's or not, and a load into a new process
# backs at least the checkpoint's bytes of fresh memory (docs/benchmarks.md)
sed -n 's/^resume phases (s): /  phases (s): /p' "$out"/loadsame-*.txt
touch_first=null touch_refreed=null touch_later=null
if cc -O2 -o "$out/first_touch" "$(dirname "$0")/first_touch.c" 2> /dev/null; then
  drop
  for k in $(seq "$np"); do "$out/first_touch" $((bytes / np)) > "$out/touch$k.txt" & done
  wait
  sum() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" "$out"/touch*.txt | awk '{s += $1} END {printf "%.3f", s}'; }
  touch_first=$(sum first_touch_gbps) touch_refreed=$(sum refreed_gbps) touch_later=$(sum after_4s_gbps)
  echo "  the machine's first touch of $bytes fresh bytes on $np processes (GB/s): after a cache" \
    "drop $touch_first; of pages freed a moment before $touch_refreed, 4 s after $touch_later"
fi
goal() { awk -v a="$1" -v g="$2" 'BEGIN {print ((a + 0 >= g) ? "met" : "not met")}'; }
echo "goals: save $(goal "$(ratio "$save" "$fio_w")" 0.8), load $(goal "$(ratio "$load4" "$fio_r")" 0.8)," \
  "resharded $(goal "$(ratio "$load3" "$load4")" 0.9)," \
  "resume $(awk -v a="$resume_ratio" 'BEGIN {print ((a + 0 <= 1.2) ? "met" : "not met")}')"
printf '{"config":"%s","ranks":%d,"bytes":%s,"rounds":%d,"cached":%d,"reuse_files":%d,"save_gbps":%s,"load_gbps":%s,' \
  "$config" "$np" "$bytes" "$rounds" "$cached" "$reuse" "$save" "$load4"
printf '"reshard_load_gbps":%s,"fio_write_gbps":%s,"fio_read_gbps":%s,"save_ratio":%s,' \
  "$load3" "$fio_w" "$fio_r" "$(ratio "$save" "$fio_w")"
printf '"load_ratio":%s,"reshard_ratio":%s,"fio_new_file_write_gbps":%s,' "$(ratio "$load4" "$fio_r")" \
  "$(ratio "$load3" "$load4")" "$fio_new"
printf '"resume_s":%s,"resume_ratio":%s,"first_touch_gbps":%s,"refreed_touch_gbps":%s,' "$resume_s" \
  "$resume_ratio" "$touch_first" "$touch_refreed"
printf '"touch_4s_after_gbps":%s}\n' "$touch_later"

# ---- export: `ztier checkpoint export` of the same checkpoint against fio's write ----
# The export reads the rank files' master values (format 3; formats 1-2: every rank file
# whole, for their CRC-32s) and writes the fp32 safetensors file beside them (written, synced,
# renamed), with the page cache dropped before each round; its GB/s is the file it writes over
# its whole time (the checks included), set against fio's write on the same folder measured
# above. What it read: its summary line's "(N bytes)" (the folder's bytes where it has none).
export_bench() {
  local r t
  for r in $(seq "$rounds"); do
    drop
    "$ztier" checkpoint export "$dir/ck" --format safetensors --out "$dir/export.safetensors" \
      > "$out/export$r.txt" 2>&1 || { tail -3 "$out/export$r.txt"; return 1; }
  done
  local ebytes rb
  ebytes=$(stat -c %s "$dir/export.safetensors")
  rb=$(sed -n 's/^exported .* of the rank files (\([0-9]*\) bytes).*/\1/p' "$out/export1.txt")
  rb=${rb:-$bytes}
  rm -f "$dir/export.safetensors"
  export_gbps=$(cat "$out"/export*.txt | sed -n 's/^exported .* in \([0-9.]*\) s, .*/\1/p' |
    awk -v b="$ebytes" '{printf "%.3f\n", b / $1 / 1e9}' | median)
  echo "| export to safetensors fp32 (reads $rb, writes $ebytes) | $export_gbps | $fio_w write | $(ratio "$export_gbps" "$fio_w") |"
  # the time fio would take to read what the export reads and write what it writes, over its
  local disk
  disk=$(awk -v e="$export_gbps" -v eb="$ebytes" -v rb="$rb" -v r="$fio_r" -v w="$fio_w" \
    'BEGIN {printf "%.2f", (rb / r + eb / w) / (eb / e)}')
  echo "export / the disk (fio's time to read the rank files and write the export, over the export's): $disk"
  # the bound with the reads overlapped with the writes: the export cannot end before fio
  # would have read what it reads (and checks); against fio's write alone it is capped at
  # (written / read bytes) x (fio read / fio write) where reading is the longer
  local bound cap
  bound=$(awk -v e="$export_gbps" -v eb="$ebytes" -v rb="$rb" -v r="$fio_r" -v w="$fio_w" \
    'BEGIN {t = rb / r; if (eb / w > t) t = eb / w; printf "%.2f", t / (eb / e)}')
  cap=$(awk -v eb="$ebytes" -v rb="$rb" -v r="$fio_r" -v w="$fio_w" \
    'BEGIN {t = rb / r; if (eb / w > t) t = eb / w; printf "%.2f", eb / t / w}')
  echo "export / the disk's bound (max of fio reading what it reads, fio writing the export): $bound (the most an export reading $rb bytes can reach against fio's write here: $cap)"
  echo "{\"export_gbps\":$export_gbps,\"export_read_bytes\":$rb,\"fio_write_gbps\":$fio_w,\"export_ratio\":$(ratio "$export_gbps" "$fio_w"),\"export_disk_ratio\":$disk,\"export_bound_ratio\":$bound,\"export_ratio_cap\":$cap}"
}
export_bench || exit 1

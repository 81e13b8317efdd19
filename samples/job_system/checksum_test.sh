#!/usr/bin/env bash
# The game frame is deterministic: the same checksum on 1, 2 and 4 workers,
# twice each; and, given bench/jobbench's frame_tbb as a second argument, with
# oneTBB running the same systems.
#   checksum_test.sh path/to/job_system [path/to/frame_tbb]
set -euo pipefail
bin=$1
tbb=${2:-}
args=(--frames 40 --entities 20000 --warmup 0)
want=""
runs=("$bin:1" "$bin:2" "$bin:4" "$bin:1" "$bin:2" "$bin:4")
[[ -n $tbb ]] && runs+=("$tbb:1" "$tbb:2" "$tbb:1" "$tbb:2")
for run in "${runs[@]}"; do
  prog=${run%:*}
  w=${run##*:}
  got=$("$prog" "${args[@]}" --workers "$w" | sed -n 's/^checksum: //p')
  if [[ -z $got ]]; then
    echo "FAIL: no checksum line from $(basename "$prog") on $w workers" >&2
    exit 1
  fi
  echo "$(basename "$prog") W=$w checksum $got"
  if [[ -z $want ]]; then
    want=$got
  elif [[ $got != "$want" ]]; then
    echo "FAIL: $(basename "$prog") on $w workers gave $got, expected $want" >&2
    exit 1
  fi
done
# Traced (one frame unless --frames says otherwise) and with --stats: the same
# frames, a trace file, and a counters table.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$("$bin" "${args[@]}" --workers 2 --trace "$dir/frame.json" --stats)
got=$(sed -n 's/^checksum: //p' <<<"$out")
[[ $got == "$want" ]] || { echo "FAIL: traced run gave $got, expected $want" >&2; exit 1; }
grep -q '"traceEvents"' "$dir/frame.json" || { echo "FAIL: no trace written" >&2; exit 1; }
grep -q '"name":"job"' "$dir/frame.json" || { echo "FAIL: the trace has no job slice" >&2; exit 1; }
grep -Eq '^total +[0-9]+' <<<"$out" || { echo "FAIL: no --stats table" >&2; exit 1; }
one=$("$bin" --entities 20000 --workers 2 --trace "$dir/one.json")
grep -q ', 1 frames' <<<"$one" || { echo "FAIL: --trace alone should run one frame" >&2; exit 1; }
echo "PASS: one checksum, $want; traced and counted"

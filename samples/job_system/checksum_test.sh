#!/usr/bin/env bash
# The game frame is deterministic: the same checksum on 1, 2 and 4 workers,
# twice each, and with oneTBB running the same systems.
set -euo pipefail
bin=$1
args=(--frames 40 --entities 20000 --warmup 0)
want=""
for backend in tessera tbb; do
  for w in 1 2 4 1 2 4; do
    [[ $backend == tbb && $w == 4 ]] && continue
    got=$("$bin" "${args[@]}" --workers "$w" --backend "$backend" | sed -n 's/^checksum: //p')
    if [[ -z $got ]]; then
      echo "FAIL: no checksum line from $backend on $w workers" >&2
      exit 1
    fi
    echo "$backend W=$w checksum $got"
    if [[ -z $want ]]; then
      want=$got
    elif [[ $got != "$want" ]]; then
      echo "FAIL: $backend on $w workers gave $got, expected $want" >&2
      exit 1
    fi
  done
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

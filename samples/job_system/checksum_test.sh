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
echo "PASS: one checksum, $want"

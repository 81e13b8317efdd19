#!/usr/bin/env bash
# Tessera's jobs beside oneTBB, OpenMP and a std::thread pool, in one run, on
# 1 and 2 workers: the game frame (samples/job_system, p50/p99 frame time),
# parallel_for at three grains, fork-join fib and skynet, spawn latency from a
# plain thread, and the context-switch floor (samples/jobbench). Installs
# what is missing, builds Release, writes out/jobbench.csv, prints the ratios
# against oneTBB and draws out/jobbench.png.
#   scripts/jobbench.sh            # the full run (~3 minutes)
#   scripts/jobbench.sh --quick    # a smoke run: fib(25), fewer repetitions, 60 frames
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target jobbench job_system
mkdir -p out
quick=0
[[ ${1:-} == --quick ]] && quick=1
frames=300
jb_args=()
if ((quick)); then
  frames=60
  jb_args=(--quick)
fi

build/release/samples/jobbench "${jb_args[@]}" --csv out/jobbench.csv

runs=("tessera 1" "tbb 1" "tessera 2" "tbb 2")
i=0
for run in "${runs[@]}"; do
  read -r backend w <<<"$run"
  i=$((i + 1))
  echo "[frame $i/${#runs[@]}] job_system --backend $backend --workers $w --frames $frames"
  line=$(build/release/samples/job_system --backend "$backend" --workers "$w" --frames "$frames" |
    sed -n 's/^frame time ms: p50 \([0-9.]*\) .* p99 \([0-9.]*\) .*/\1 \2/p')
  read -r p50 p99 <<<"$line"
  echo "  p50 $p50 ms, p99 $p99 ms"
  echo "frame-p50,$w,$backend,$p50,ms" >>out/jobbench.csv
  echo "frame-p99,$w,$backend,$p99,ms" >>out/jobbench.csv
done

python3 - <<'PY'
import csv, collections
rows = list(csv.DictReader(open("out/jobbench.csv")))
val = collections.defaultdict(dict)
order = []
for r in rows:
    key = (r["benchmark"], int(r["workers"]))
    if key not in val:
        order.append(key)
    val[key][r["system"]] = float(r["value"])
systems = ["tessera", "openmp", "pool"]
print("\nTime / oneTBB's time, same run (< 1.00 is faster than oneTBB):")
print(f"  {'benchmark':<14}{'W':>3}" + "".join(f"{s:>10}" for s in systems))
with open("out/jobbench-ratios.dat", "w") as f:
    for key in order:
        v = val[key]
        if "tbb" not in v:
            continue
        ratios = [v[s] / v["tbb"] if s in v else None for s in systems]
        print(f"  {key[0]:<14}{key[1]:>3}" + "".join(f"{r:>10.2f}" if r else f"{'-':>10}" for r in ratios))
        f.write(f'"{key[0]} W={key[1]}" ' + " ".join(f"{r:.4f}" if r else "NaN" for r in ratios) + "\n")
if ("jump-rt", 1) in val and ("pingpong-rt", 1) in val:
    print(f"\n  park/unpark round trip {val[('pingpong-rt',1)]['tessera']:.1f} ns = "
          f"{val[('pingpong-rt',1)]['tessera'] / val[('jump-rt',1)]['boost']:.2f}x the two-jump floor "
          f"({val[('jump-rt',1)]['boost']:.1f} ns)")
if ("jump-call-rt", 1) in val:
    print(f"  the same two jumps, each made from a returning call: "
          f"{val[('jump-call-rt',1)]['boost']:.1f} ns = "
          f"{val[('jump-call-rt',1)]['boost'] / val[('jump-rt',1)]['boost']:.2f}x the floor")
PY

gnuplot <<'GP'
set terminal pngcairo size 1400,560 noenhanced font 'sans,10'
set output 'out/jobbench.png'
set title "Time relative to oneTBB, same run (below 1 = faster than oneTBB; log scale)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [0.1:1000]
set ytics (0.1, 0.25, 0.5, 1, 2, 4, 10, 100, 1000)
set grid ytics
set xtics rotate by 35 right scale 0
set key outside bottom center horizontal
set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black"
plot 'out/jobbench-ratios.dat' using 2:xtic(1) title 'Tessera' lc rgb "#d62728", \
     '' using 3 title 'OpenMP' lc rgb "#1f77b4", \
     '' using 4 title 'std::thread pool' lc rgb "#7f7f7f"
GP
echo "CSV: out/jobbench.csv  plot: out/jobbench.png"

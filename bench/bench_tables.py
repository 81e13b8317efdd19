#!/usr/bin/env python3
"""Tables of ratios from the benchmarks' CSVs.

  bench/bench_tables.py main out/semabench.csv out/fiberbench.csv
      Markdown for docs/benchmarks.md: the semabench table (iterations/s, with
      each implementation's ratio to its peer in the same run) and the
      fiberbench table (Tessera beside Boost.Fiber).
  bench/bench_tables.py jobbench out/jobbench.csv out/jobbench-ratios.dat
      jobbench's table of times over oneTBB's (printed by scripts/jobbench.sh),
      and the .dat that bench/plots/jobbench.gp draws.
"""
import collections
import csv
import sys

# Which peer each implementation is read against (same run, same thread count).
PEER = {
    "twa": "sem_t", "twa-fifo": "sem_t", "barging": "sem_t", "twa-spin": "sem_t",
    "ticket": "sem_t", "std::counting_semaphore": "sem_t",
    "tessera::mutex": "std::mutex", "absl::Mutex": "std::mutex",
    "rw:tessera::shared_mutex": "rw:std::shared_mutex", "rw:absl::Mutex": "rw:std::shared_mutex",
    "rw:preshing_shared_mutex": "rw:std::shared_mutex",
}


def human(v):
    return f"{v / 1e6:.1f} M" if v >= 1e6 else f"{v / 1e3:.0f} k"


def semabench(path):
    rows = list(csv.DictReader(open(path)))
    med = {(r["impl"], int(r["threads"])): float(r["median_ops_per_s"]) for r in rows}
    lo = {(r["impl"], int(r["threads"])): float(r["min_ops_per_s"]) for r in rows}
    hi = {(r["impl"], int(r["threads"])): float(r["max_ops_per_s"]) for r in rows}
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    threads = sorted({int(r["threads"]) for r in rows})
    print("| impl \\ threads | " + " | ".join(str(t) for t in threads) + " |")
    print("|---|" + "---|" * len(threads))
    for i in impls:
        cells = []
        for t in threads:
            v = med[(i, t)]
            peer = PEER.get(i)
            ratio = f" ({v / med[(peer, t)]:.2f}×)" if peer and (peer, t) in med else ""
            cells.append(human(v) + ratio)
        print(f"| `{i}` | " + " | ".join(cells) + " |")
    print()
    print("Spread (min–max of the rounds, iterations/s) of the Tessera rows:")
    print()
    print("| impl \\ threads | " + " | ".join(str(t) for t in threads) + " |")
    print("|---|" + "---|" * len(threads))
    for i in impls:
        if i in ("twa", "barging", "tessera::mutex", "rw:tessera::shared_mutex"):
            print(f"| `{i}` | " + " | ".join(f"{human(lo[(i, t)])}–{human(hi[(i, t)])}"
                                            for t in threads) + " |")


def fiberbench(path):
    rows = list(csv.DictReader(open(path)))
    print("| benchmark | unit | Tessera | Boost.Fiber | Tessera's advantage |")
    print("|---|---|---|---|---|")
    for r in rows:
        t, b, unit = r["tessera"], r["boost_fiber"], r["unit"]
        try:
            tv, bv = float(t), float(b)
            better = tv / bv if unit.startswith("iter") else bv / tv
            adv = f"{better:.2f}×" if tv > 0 and bv > 0 else "–"
        except ValueError:
            adv = "–"
        t = f"{float(t):.4g}" if t else "–"
        b = f"{float(b):.4g}" if adv != "–" else "–"  # no Boost figure for this row
        print(f"| {r['benchmark']} | {unit} | {t} | {b} | {adv} |")


def jobbench(path, dat):
    rows = list(csv.DictReader(open(path)))
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
    with open(dat, "w") as f:
        for key in order:
            v = val[key]
            if "tbb" not in v:
                continue
            ratios = [v[s] / v["tbb"] if s in v else None for s in systems]
            print(f"  {key[0]:<14}{key[1]:>3}" +
                  "".join(f"{r:>10.2f}" if r else f"{'-':>10}" for r in ratios))
            f.write(f'"{key[0]} W={key[1]}" ' +
                    " ".join(f"{r:.4f}" if r else "NaN" for r in ratios) + "\n")
    if ("jump-rt", 1) in val and ("pingpong-rt", 1) in val:
        rt, floor = val[("pingpong-rt", 1)]["tessera"], val[("jump-rt", 1)]["boost"]
        print(f"\n  park/unpark round trip {rt:.1f} ns = {rt / floor:.2f}x the two-jump floor "
              f"({floor:.1f} ns)")
    traced = [(k, v["tessera-traced"] / v["tessera"]) for k, v in val.items()
              if "tessera-traced" in v and "tessera" in v]
    for (bench, w), ratio in traced:
        print(f"  {bench} W={w} with the scheduler trace on: {ratio:.2f}x the time with it off")
    if ("jump-call-rt", 1) in val:
        call, floor = val[("jump-call-rt", 1)]["boost"], val[("jump-rt", 1)]["boost"]
        print(f"  the same two jumps, each made from a returning call: {call:.1f} ns = "
              f"{call / floor:.2f}x the floor")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "main":
        semabench(sys.argv[2])
        print()
        fiberbench(sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "jobbench":
        jobbench(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)

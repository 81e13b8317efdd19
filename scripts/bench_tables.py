#!/usr/bin/env python3
"""Markdown tables from the main job's CSVs, for docs/benchmarks.md.

  scripts/bench_tables.py out/semabench.csv out/fiberbench.csv

Prints the semabench table (iterations/s, with each implementation's ratio to
its peer in the same run) and the fiberbench table (Tessera beside Boost.Fiber).
"""
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
        b = b if adv != "–" or b not in ("0", "") else "–"  # no Boost figure for this row
        print(f"| {r['benchmark']} | {unit} | {t} | {b} | {adv} |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    semabench(sys.argv[1])
    print()
    fiberbench(sys.argv[2])

#!/usr/bin/env python3
"""Tables of ratios from the benchmarks' CSVs.

  bench/bench_tables.py main out/semabench.csv out/fiberbench.csv
      Markdown for docs/benchmarks.md: the semabench table (iterations/s, with
      each implementation's ratio to its peer in the same run) and the
      fiberbench table (Tessera beside Boost.Fiber).
  bench/bench_tables.py jobbench out/jobbench.csv out/jobbench-ratios.dat
      jobbench's table of times over oneTBB's (printed by bench/jobbench.sh),
      and the .dat that bench/plots/jobbench.gp draws.
  bench/bench_tables.py netbench out/netbench.csv plot.dat
      netbench's tables (HTTP, system calls per request, HTTPS, open-loop
      latency, echo, CPU per request, memory per idle connection), each with
      Tessera's ratio to its peers (a title marked ↓ is a cost: there a ratio
      below 1 is Tessera's win), and the .dat that bench/plots/netbench.gp
      draws.
  bench/bench_tables.py tfbbench out/tfbbench.csv plot.dat
      tfbbench's tables (per test type and level: each server's median
      requests/s of three runs with their spread, Tessera's ratio to each
      peer, CPU per request of server and database), the headline ratios at
      256 connections, the response sizes, and the .dat that
      bench/plots/tfbbench.gp draws.

A figure recorded as "failed" (non-2xx answers, socket errors, fewer
connections open than asked) prints as "failed" and gives no ratio.
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


def number(v):
    """A CSV value as a float, or None for "failed" (or empty)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


def shown(v, fmt="{:.0f}"):
    return "failed" if v is None else fmt.format(v)


def plotted(v):
    """A figure for gnuplot: NaN where there is none (failed or not measured)."""
    return "NaN" if v is None else f"{v:.0f}"


def netbench(path, dat):
    rows = list(csv.DictReader(open(path)))
    val = collections.defaultdict(dict)  # (section, point) -> server -> value; echo keeps the best
    for r in rows:
        key, v = (r["section"], r["point"]), number(r["value"])
        if r["section"] == "echo" and r["server"] in val[key]:
            good = [x for x in (v, val[key][r["server"]]) if x is not None]
            v = max(good) if good else None
        val[key][r["server"]] = v
    order = list(dict.fromkeys((r["section"], r["point"]) for r in rows))

    def points(section):
        return [p for s, p in order if s == section]

    # Ratios of each of `bases` (Tessera on epoll; also on io_uring's
    # completion path where it ran) to each peer.
    def table(title, section, servers, peers, fmt="{:.0f}", bases=("tessera",)):
        bases = [b for b in bases if b in servers]
        head = f"{title:<22}" + "".join(f"{s:>14}" for s in servers)
        head += "".join(f"{b.replace('tessera-', '') + '/' + p:>18}" for b in bases for p in peers)
        print(head)
        for point in points(section):
            v = val[(section, point)]
            line = f"{point:<22}" + "".join(f"{shown(v[s], fmt) if s in v else '-':>14}" for s in servers)
            line += "".join(f"{ratio(v.get(b), v.get(p)):>18}" for b in bases for p in peers)
            print(line)
        print()
    both = ("tessera", "tessera-uring")

    for point in points("http"):
        v = val[("http", point)]
        t, u = v.get("tessera"), v.get("tessera-nodeadline")
        if t is not None and u:
            print(f"timed reads (a deadline on every read) at {point} connections: {t:.0f} against "
                  f"{u:.0f} requests/s without: {(t / u - 1) * 100:+.1f}%")
    print()
    table("response bytes", "bytes", ["tessera", "go", "fasthttp", "beast", "nginx", "threads"], [])
    table("HTTP requests/s", "http",
          ["tessera", "tessera-uring", "go", "fasthttp", "beast", "nginx", "threads"],
          ["nginx", "go", "fasthttp", "beast", "threads"], bases=both)
    table("syscalls/request ↓", "syscalls", ["tessera", "tessera-uring", "nginx", "go", "fasthttp", "beast"],
          ["nginx", "go", "fasthttp", "beast"], "{:.2f}", bases=both)
    table("HTTPS requests/s", "https", ["tessera", "go", "nginx"], ["nginx", "go"])
    for q in ("p50", "p99", "p99.9"):
        table(f"open loop {q} us ↓", f"open-loop-{q}", ["tessera", "tessera-uring", "go", "nginx"],
              ["nginx", "go"], bases=both)
    table("echo round trips/s", "echo", ["tessera", "go", "threads", "ceiling"], ["go", "ceiling", "threads"])
    # CPU per request: ticks / requests, per server.
    for kind, unit, servers, peers in (
            ("http", "requests", ["tessera", "tessera-uring", "nginx", "go", "fasthttp", "beast",
                                  "threads"], ["nginx", "go", "fasthttp", "beast"]),
            ("echo", "round-trips", ["tessera", "tessera-uring", "go", "threads"], ["go"])):
        for r in [r for r in rows if r["section"] == f"cpu-{kind}-ticks"]:
            n = number(val[(f"cpu-{kind}-{unit}", r["point"])].get(r["server"]))
            ticks, hz = number(r["value"]), float(r["unit"].split("/")[1].split()[0])
            per = ticks / hz * 1e6 / n if ticks is not None and n else None
            val[(f"cpu-{kind}", r["point"])][r["server"]] = per
            if (f"cpu-{kind}", r["point"]) not in order:
                order.append((f"cpu-{kind}", r["point"]))
        table(f"CPU-us per {'request' if kind == 'http' else 'round trip'} ↓", f"cpu-{kind}", servers, peers,
              "{:.2f}", bases=both)
    table("bytes per idle conn. ↓", "idle", ["tessera", "tessera-uring", "go"], ["go"], bases=both)
    # The plot: one row per HTTP and echo point; columns Tessera, Go, nginx,
    # threads, the ceiling (bench/plots/netbench.gp).
    with open(dat, "w") as f:
        for section, label in (("http", "HTTP {} conns"), ("echo", "echo {}")):
            for point in points(section):
                v = val[(section, point)]
                f.write(f'"{label.format(point)}" ' +
                        " ".join(plotted(v.get(s)) for s in ("tessera", "go", "nginx", "threads", "ceiling")) +
                        "\n")


TFB_SERVERS = ("tessera", "nethttp", "fasthttp", "beast")
TFB_NAMES = {"tessera": "Tessera", "nethttp": "net/http", "fasthttp": "fasthttp", "beast": "Beast"}


def median_spread(values):
    """The median of a point's runs and their spread (max-min over median),
    or (None, None) if any run failed."""
    if not values or any(v is None for v in values):
        return None, None
    v = sorted(values)
    m = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
    return m, ((v[-1] - v[0]) / m if m else 0.0)


def tfbbench(path, dat):
    rows = list(csv.DictReader(open(path)))
    runs = collections.defaultdict(list)   # (type, queries, conns, server) -> [rps]
    cpu = collections.defaultdict(lambda: [0.0, 0.0, 0.0])  # same key -> CPU s of server, db, wrk
    requests = collections.defaultdict(float)
    size = {}
    for r in rows:
        k = (r["type"], int(r["queries"]), int(r["connections"]), r["server"])
        v = number(r["requests_per_s"])
        runs[k].append(v)
        size[(r["server"], r["type"])] = r["bytes"]
        if v is not None:
            requests[k] += v * float(r["seconds"])
            for i, c in enumerate(("server_cpu_s", "db_cpu_s", "wrk_cpu_s")):
                cpu[k][i] += float(r[c])
    points = list(dict.fromkeys(k[:3] for k in runs))
    med = {k: median_spread(v) for k, v in runs.items()}

    def servers_of(t):
        return [s for s in TFB_SERVERS if any(k[0] == t and k[3] == s for k in runs)]

    def md(cells):
        return "| " + " | ".join(str(c) for c in cells) + " |"

    def table(t, key_name, keys):
        ss = servers_of(t)
        peers = [s for s in ss if s != "tessera"]
        head = [t, key_name] + [TFB_NAMES[s] for s in ss] + ["/" + TFB_NAMES[s] for s in peers]
        head += ["µs CPU/req. " + TFB_NAMES[s] + " (db)" for s in ss]
        print(md(head))
        print(md(["---"] * len(head)))
        for p in keys:
            cells = ["", p[1] if key_name == "queries" else p[2]]
            for s in ss:
                m, sp = med.get(p + (s,), (None, None))
                cells.append(f"{shown(m)} ±{sp * 100:.0f}%" if m is not None else "failed")
            t_m = med.get(p + ("tessera",), (None,))[0]
            cells += [ratio(t_m, med.get(p + (s,), (None,))[0]) for s in peers]
            for s in ss:
                k = p + (s,)
                n = requests.get(k, 0.0)
                cells.append(f"{cpu[k][0] / n * 1e6:.0f} ({cpu[k][1] / n * 1e6:.0f})" if n else "-")
            print(md(cells))
        print()

    print("Requests/s: the median of 3 runs ± their spread (max-min over median); ratios are "
          "Tessera's to each peer; CPU per request of the server (and of the database).")
    print()
    for t in dict.fromkeys(p[0] for p in points):
        keys = [p for p in points if p[0] == t]
        table(t, "queries" if keys[0][1] > 0 else "connections", keys)

    # The headline: 256 connections (and 20 queries), plaintext on its own row.
    def headline(t):
        ps = [p for p in points if p[0] == t and p[2] == 256 and p[1] in (0, 20)]
        return ps[0] if ps else None
    print("At 256 connections (queries and updates: 20 queries), Tessera's ratio to each peer:")
    print()
    print(md(["type"] + ["/" + TFB_NAMES[s] for s in TFB_SERVERS[1:]]))
    print(md(["---"] * len(TFB_SERVERS)))
    order = [t for t in ("json", "db", "queries", "fortunes", "updates", "plaintext")
             if headline(t) is not None]
    for t in order:
        p = headline(t)
        t_m = med.get(p + ("tessera",), (None,))[0]
        label = t + (" (pipelined 16)" if t == "plaintext" else "")
        print(md([label] + [ratio(t_m, med[p + (s,)][0]) if p + (s,) in med else ""
                            for s in TFB_SERVERS[1:]]))
    print()
    print("Response bytes (headers and body; /queries and /updates with 20 rows):")
    print()
    print(md(["type"] + [TFB_NAMES[s] for s in TFB_SERVERS]))
    print(md(["---"] * (len(TFB_SERVERS) + 1)))
    for t in dict.fromkeys(p[0] for p in points):
        print(md([t] + [size.get((s, t), "") for s in TFB_SERVERS]))
    with open(dat, "w") as out:
        for t in order:
            p = headline(t)
            vals = [med.get(p + (s,), (None,))[0] for s in TFB_SERVERS]
            label = "plaintext (pipelined 16)" if t == "plaintext" else t
            out.write(f'"{label}" ' + " ".join(plotted(v) for v in vals) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "main":
        semabench(sys.argv[2])
        print()
        fiberbench(sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "jobbench":
        jobbench(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "netbench":
        netbench(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "tfbbench":
        tfbbench(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)

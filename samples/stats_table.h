// samples/stats_table.h — the samples' --stats: runtime::stats() as a table.
#pragma once

#include <tessera/runtime.h>

#include <cstdio>

namespace tessera::samples {

/// Prints one row per worker and a total row to stdout.
inline void print_stats(const runtime::statistics& s) {
  std::printf("%-7s %12s %12s %9s %9s %10s %11s %10s\n", "worker", "fibers run", "parks", "steals",
              "sleeps", "idle ms", "I/O events", "jobs run");
  runtime::worker_statistics total;
  auto row = [](const char* name, const runtime::worker_statistics& w) {
    std::printf(
        "%-7s %12llu %12llu %9llu %9llu %10.1f %11llu %10llu\n", name,
        static_cast<unsigned long long>(w.fibers_run), static_cast<unsigned long long>(w.parks),
        static_cast<unsigned long long>(w.steals), static_cast<unsigned long long>(w.sleeps),
        static_cast<double>(w.idle.count()) / 1e6, static_cast<unsigned long long>(w.io_events),
        static_cast<unsigned long long>(w.jobs_run));
  };
  for (std::size_t i = 0; i < s.per_worker.size(); ++i) {
    const auto& w = s.per_worker[i];
    row(std::to_string(i).c_str(), w);
    total.fibers_run += w.fibers_run;
    total.parks += w.parks;
    total.steals += w.steals;
    total.sleeps += w.sleeps;
    total.idle += w.idle;
    total.io_events += w.io_events;
    total.jobs_run += w.jobs_run;
  }
  row("total", total);
  std::printf("fibers started %llu, remote wake-ups %llu\n",
              static_cast<unsigned long long>(s.fibers_started),
              static_cast<unsigned long long>(s.remote_wakeups));
}

}  // namespace tessera::samples

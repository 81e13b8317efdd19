// simbench: how fast the simulation explores (tessera/testing/simulation.h),
// and how many runs each schedule needs to find a bug.
//
//   speed      runs and switches per second of a 10-fiber body that makes
//              1,000 switches (each fiber yields 100 times), random and pct;
//   find       runs to the first failure, over --bases explorations that
//              start from different seeds (median, min, max), for the
//              restored auto_reset_event race, a lost update, and an order
//              only an uninterrupted run makes (tests/simulated_bugs.h).
//
// Shuttle and loom publish no runs-per-second figures to set beside these;
// docs/benchmarks.md says so. Prints a progress line per measurement, and
// with --csv writes one row per measurement.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../../tests/simulated_bugs.h"

namespace {

using tessera::testing::explore_options;
using tessera::testing::strategy;

void ten_fibers_thousand_switches() {
  std::vector<tessera::fiber> fibers;
  for (int i = 0; i < 10; ++i) {
    fibers.emplace_back([] {
      for (int k = 0; k < 100; ++k) tessera::this_fiber::yield();
    });
  }
  for (auto& f : fibers) f.join();
}

struct schedule_kind {
  const char* name;
  strategy how;
  unsigned depth;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"simbench: exploration speed and runs to find a bug"};
  std::uint64_t speed_runs = 2000, max_runs = 200000;
  unsigned bases = 9;
  std::string csv;
  bool quick = false;
  app.add_option("--speed-runs", speed_runs, "runs per speed measurement");
  app.add_option("--max-runs", max_runs, "runs an exploration may take to find a bug");
  app.add_option("--bases", bases, "explorations per bug and schedule (different seeds)");
  app.add_option("--csv", csv, "write the rows here");
  app.add_flag("--quick", quick, "fewer runs and explorations");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    speed_runs = 500;
    max_runs = 50000;
    bases = 3;
  }
  std::vector<std::string> rows{"kind,body,schedule,value,min,max,unit"};
  const schedule_kind kinds[] = {{"random", strategy::random, 0},
                                 {"pct d=2", strategy::pct, 2},
                                 {"pct d=3", strategy::pct, 3},
                                 {"pct d=5", strategy::pct, 5}};

  std::printf("%-28s %-10s %12s %14s\n", "speed: body", "schedule", "runs/s", "switches/s");
  for (const auto& k : kinds) {
    explore_options o;
    o.strategy = k.how;
    o.depth = k.depth == 0 ? 3 : k.depth;
    o.runs = speed_runs;
    o.verbose = false;
    o.check_determinism = false;
    const auto r = tessera::testing::explore_report(ten_fibers_thousand_switches, o);
    const double s = std::chrono::duration<double>(r.elapsed).count();
    std::printf("%-28s %-10s %12.0f %14.0f\n", "10 fibers, 1000 switches", k.name,
                static_cast<double>(r.runs) / s, static_cast<double>(r.steps) / s);
    std::fflush(stdout);
    rows.push_back(std::string("speed,10x100 yields,") + k.name + "," +
                   std::to_string(static_cast<double>(r.runs) / s) + ",,,runs/s");
  }

  struct bug {
    const char* name;
    void (*body)();
  };
  const bug bugs[] = {{"auto_reset_event race", simulated::timed_waits_body<false>},
                      {"lost update", simulated::lost_update_body},
                      {"uninterrupted run", simulated::uninterrupted_run_body}};
  std::printf("\n%-28s %-10s %10s %10s %10s  (runs to the first failure, %u explorations)\n",
              "find: bug", "schedule", "median", "min", "max", bases);
  for (const auto& b : bugs) {
    for (const auto& k : kinds) {
      std::vector<std::uint64_t> found;
      unsigned missed = 0;
      for (unsigned i = 0; i < bases; ++i) {
        std::fprintf(stderr, "\r  %s, %s: exploration %u of %u   ", b.name, k.name, i + 1, bases);
        explore_options o;
        o.strategy = k.how;
        o.depth = k.depth == 0 ? 3 : k.depth;
        o.runs = max_runs;
        o.seed = std::uint64_t{i} * 1'000'003;
        o.verbose = false;
        o.check_determinism = false;
        o.max_steps = 2000;
        o.max_virtual_time = std::chrono::seconds(10);
        const auto r = tessera::testing::explore_report(b.body, o);
        if (r.failing_seed) {
          found.push_back(r.runs);
        } else {
          ++missed;
        }
      }
      std::fprintf(stderr, "\r%60s\r", "");
      std::sort(found.begin(), found.end());
      if (found.size() < bases) {
        std::printf("%-28s %-10s %10s %10s %10s  (%u of %u found nothing in %llu runs)\n", b.name,
                    k.name, found.empty() ? "-" : std::to_string(found[found.size() / 2]).c_str(),
                    found.empty() ? "-" : std::to_string(found.front()).c_str(),
                    found.empty() ? "-" : std::to_string(found.back()).c_str(), missed, bases,
                    static_cast<unsigned long long>(max_runs));
      } else {
        std::printf("%-28s %-10s %10llu %10llu %10llu\n", b.name, k.name,
                    static_cast<unsigned long long>(found[found.size() / 2]),
                    static_cast<unsigned long long>(found.front()),
                    static_cast<unsigned long long>(found.back()));
      }
      std::fflush(stdout);
      rows.push_back(std::string("find,") + b.name + "," + k.name + "," +
                     (found.size() == bases ? std::to_string(found[found.size() / 2]) : "") + "," +
                     (found.empty() ? "" : std::to_string(found.front())) + "," +
                     (found.size() == bases ? std::to_string(found.back()) : "") + ",runs");
    }
  }
  if (!csv.empty()) {
    std::ofstream out(csv);
    for (const auto& r : rows) out << r << '\n';
  }
  return 0;
}

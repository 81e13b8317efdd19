// semabench — the benchmark of Dice & Kogan, "Semaphores Augmented with a
// Waiting Array" (Dice & Kogan, §3), with the peers side by side in one run.
//
// T threads each loop { acquire S; advance a shared std::mt19937 one step;
// release S; advance a thread-private std::mt19937 one step }. S is released
// once before the threads start, so it behaves as a lock. Reported: aggregate
// iterations per second, the median of R runs, for each T; ratios against
// pthread sem_t from the same run (absolute figures drift on a shared machine,
// so the R rounds interleave the implementations).
//
// The rw:* entries run the same loop read-mostly on a reader-writer lock: every
// 101st iteration takes it exclusively and advances the shared PRNG (1 write per
// 100 reads); the others take it shared and read the PRNG's last output.
#include <absl/synchronization/mutex.h>
#include <semaphore.h>
#include <tessera/tessera.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <semaphore>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "baseline/preshing_shared_mutex.h"
#include "baseline/ticket_semaphore.h"
#include "baseline/twa_spin_semaphore.h"
#include "harness.h"
#include "wait_tail.h"

namespace {

// ---- the contenders: each is a semaphore or a lock with acquire/release ------
struct twa {
  static constexpr const char* name = "twa";
  tessera::counting_semaphore<> s{0};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
};
struct twa_fifo {  // the paper's strict FIFO, without concurrency restriction
  static constexpr const char* name = "twa-fifo";
  tessera::counting_semaphore<> s{0, tessera::admission::fifo};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
};
struct barging {  // the same class with admission::barging: no tickets, sem_t's policy
  static constexpr const char* name = "barging";
  tessera::counting_semaphore<> s{0, tessera::admission::barging};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
};
struct faa {  // admission::faa: Koval & Elizarov's FAA semaphore on a segment queue
  static constexpr const char* name = "faa";
  tessera::counting_semaphore<> s{0, tessera::admission::faa};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
};
struct faa_restricted {  // admission::faa_restricted: the FAA semaphore behind a lobby
  static constexpr const char* name = "faa-restricted";
  tessera::counting_semaphore<> s{0, tessera::admission::faa_restricted};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
};
struct handoff {  // admission::handoff: the count and a FIFO under one small lock
  static constexpr const char* name = "handoff";
  tessera::counting_semaphore<> s{0, tessera::admission::handoff};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
};
struct twa_spin {
  static constexpr const char* name = "twa-spin";
  tessera::twa_spin_semaphore s{0};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
};
struct ticket {
  static constexpr const char* name = "ticket";
  tessera::ticket_semaphore s{0};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
};
struct posix {
  static constexpr const char* name = "sem_t";
  sem_t s;
  posix() { sem_init(&s, 0, 0); }
  ~posix() { sem_destroy(&s); }
  void release() { sem_post(&s); }
  void acquire() {
    while (sem_wait(&s) != 0) {
    }
  }
};
struct std_sem {
  static constexpr const char* name = "std::counting_semaphore";
  std::counting_semaphore<> s{0};
  void release() { s.release(); }
  void acquire() { s.acquire(); }
  // libstdc++ 12 can lose a wake-up here (GCC bug 98033): release() notifies
  // only when the count was zero, so an acquirer that missed its notification
  // sleeps while the count is positive — we saw one thread stuck for good at
  // T=16. At the end of a run (only then) take the permit if it is free and give
  // it back: that release starts from zero, so it notifies. Exclusion holds.
  void unstick() {
    if (s.try_acquire()) s.release();
  }
};
// Locks: "released once before the threads start" means starting unlocked, so
// the first release() is a no-op. `Ops` says how to lock and unlock an `M`.
template <class M, class Ops>
struct lock_as_semaphore {
  M m;
  bool first = true;
  void release() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (first) {
      first = false;
      return;
    }
    Ops::unlock(m);
  }
  void acquire() ABSL_NO_THREAD_SAFETY_ANALYSIS { Ops::lock(m); }
};
struct std_style_ops {
  template <class M>
  static void lock(M& m) {
    m.lock();
  }
  template <class M>
  static void unlock(M& m) {
    m.unlock();
  }
};
struct absl_ops {
  static void lock(absl::Mutex& m) ABSL_NO_THREAD_SAFETY_ANALYSIS { m.Lock(); }
  static void unlock(absl::Mutex& m) ABSL_NO_THREAD_SAFETY_ANALYSIS { m.Unlock(); }
};
struct std_mutex : lock_as_semaphore<std::mutex, std_style_ops> {
  static constexpr const char* name = "std::mutex";
};
struct absl_mutex : lock_as_semaphore<absl::Mutex, absl_ops> {
  static constexpr const char* name = "absl::Mutex";
};
struct tessera_mutex : lock_as_semaphore<tessera::mutex, std_style_ops> {
  static constexpr const char* name = "tessera::mutex";
};

// Read-mostly entries: `M` is a reader-writer lock with the standard interface.
template <class M>
struct read_mostly {
  static constexpr bool rw = true;
  M m;
  void release() {}
};
struct rw_std : read_mostly<std::shared_mutex> {
  static constexpr const char* name = "rw:std::shared_mutex";
};
struct rw_absl {
  static constexpr const char* name = "rw:absl::Mutex";
  static constexpr bool rw = true;
  struct shim {  // absl::Mutex under the standard names
    absl::Mutex mu;
    void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu.Lock(); }
    void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu.Unlock(); }
    void lock_shared() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu.ReaderLock(); }
    void unlock_shared() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu.ReaderUnlock(); }
  } m;
  void release() {}
};
struct rw_tessera : read_mostly<tessera::shared_mutex> {
  static constexpr const char* name = "rw:tessera::shared_mutex";
};
struct rw_preshing : read_mostly<tessera::preshing_shared_mutex> {
  static constexpr const char* name = "rw:preshing_shared_mutex";
};

using clock_type = std::chrono::steady_clock;

// --latency: every 16th acquisition is timed (acquire call to acquired), so
// fairness shows as the tail: p99.9 and the longest wait.
bool g_latency = false;

struct run_result {
  double ops_per_s = 0;
  double p999_us = 0;
  double max_us = 0;
};

// One run: T threads for `seconds`; aggregate iterations per second (and, with
// --latency, the acquisition-latency tail).
template <class S>
run_result run_once(int threads, double seconds) {
  auto sem = std::make_unique<S>();
  std::mt19937 shared_rng(42);
  std::uint32_t shared_value = 0;  // rw: the PRNG's last output, read shared
  sem->release();                  // post once: the semaphore now acts as a lock
  std::atomic<bool> stop{false};
  std::atomic<int> finished{0};
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(threads) * 16, 0);      // padded
  std::vector<std::vector<std::uint32_t>> waits(static_cast<std::size_t>(threads));  // ns
  std::latch ready(threads + 1);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      std::mt19937 private_rng(static_cast<unsigned>(i) + 1);
      std::uint64_t n = 0;
      std::uint32_t sink = 0;
      auto& my_waits = waits[static_cast<std::size_t>(i)];
      if (g_latency) my_waits.reserve(1 << 16);
      ready.arrive_and_wait();
      while (!stop.load(std::memory_order_relaxed)) {
        if constexpr (requires { S::rw; }) {  // read-mostly: 1 write per 100 reads
          if (n % 101 == 100) {
            std::lock_guard w(sem->m);
            shared_value = shared_rng();
          } else {
            std::shared_lock r(sem->m);
            sink += shared_value;
          }
        } else {
          if (g_latency && (n & 15) == 0) {
            tessera::samples::timed_acquire(my_waits, [&] { sem->acquire(); });
          } else {
            sem->acquire();
          }
          sink += shared_rng();  // critical section: one step of the shared PRNG
          sem->release();
        }
        sink += private_rng();  // non-critical section: one private step
        ++n;
      }
      counts[static_cast<std::size_t>(i) * 16] = n + (sink == 0xFFFFFFFFu);
      finished.fetch_add(1);
    });
  }
  ready.arrive_and_wait();
  const auto start = clock_type::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true, std::memory_order_relaxed);
  const auto stop_time = clock_type::now();
  if constexpr (requires { sem->unstick(); }) {
    while (finished.load() < threads) {
      sem->unstick();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (auto& t : pool) t.join();
  std::uint64_t total = 0;
  for (int i = 0; i < threads; ++i) total += counts[static_cast<std::size_t>(i) * 16];
  run_result r;
  r.ops_per_s =
      static_cast<double>(total) / std::chrono::duration<double>(stop_time - start).count();
  std::vector<std::uint32_t> all;
  for (auto& w : waits) all.insert(all.end(), w.begin(), w.end());
  const tessera::samples::wait_tail tail = tessera::samples::tail_of(all);
  r.p999_us = tail.p999_us;
  r.max_us = tail.max_us;
  return r;
}

struct impl_entry {
  std::string name;
  std::function<run_result(int, double)> run;
};

template <class S>
impl_entry entry() {
  return {S::name, [](int t, double s) { return run_once<S>(t, s); }};
}

std::vector<impl_entry> all_impls() {
  return {entry<twa>(),           entry<twa_fifo>(),       entry<barging>(),
          entry<faa>(),           entry<faa_restricted>(), entry<handoff>(),
          entry<twa_spin>(),      entry<ticket>(),         entry<posix>(),
          entry<std_sem>(),       entry<std_mutex>(),      entry<absl_mutex>(),
          entry<tessera_mutex>(), entry<rw_std>(),         entry<rw_absl>(),
          entry<rw_tessera>(),    entry<rw_preshing>()};
}

// One table: a row per implementation, a column per thread count; `cell`
// formats the cell for (impl, threads).
template <class Cell>
void print_table(const std::vector<impl_entry>& impls, const std::vector<int>& threads,
                 Cell&& cell) {
  std::printf("%-26s", "impl \\ threads");
  for (int t : threads) std::printf("%16d", t);
  std::printf("\n");
  for (const auto& e : impls) {
    std::printf("%-26s", e.name.c_str());
    for (int t : threads) {
      char text[40];
      cell(e.name, t, text, sizeof text);
      std::printf("%16s", text);
    }
    std::printf("\n");
  }
}

std::string human(double ops) {
  char buf[32];
  if (ops >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", ops / 1e6);
  } else if (ops >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1fk", ops / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", ops);
  }
  return buf;
}

// The plot's panel for an implementation (a CSV column).
const char* family_of(const std::string& impl) {
  if (impl.rfind("rw:", 0) == 0) return "rwlock";
  if (impl.find("mutex") != std::string::npos || impl.find("Mutex") != std::string::npos) {
    return "mutex";
  }
  return "semaphore";
}

// Whether an implementation is Tessera's (drawn thick in the plot; a CSV column).
bool is_tessera(const std::string& impl) {
  return impl == "twa" || impl == "twa-fifo" || impl == "barging" || impl == "faa" ||
         impl == "faa-restricted" || impl == "handoff" ||
         impl.find("tessera::") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"semabench: the TWA-semaphore paper's benchmark (Dice & Kogan, §3), with peers"};
  std::vector<int> threads{1, 2, 4, 8, 16, 32};
  double seconds = 2.0;
  int runs = 5;
  bool quick = false;
  std::vector<std::string> impl_names;
  std::string csv_path = "semabench.csv";
  std::uint32_t threshold = tessera::detail::twa_config().long_term_threshold.load();
  std::uint32_t spins = tessera::detail::twa_config().spin_iterations.load();
  std::uint32_t yields = tessera::detail::twa_config().yield_iterations.load();

  std::vector<std::string> known;
  for (auto& e : all_impls()) known.push_back(e.name);
  app.add_option("-t,--threads", threads, "Thread counts to measure")
      ->check(CLI::PositiveNumber)
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-s,--seconds", seconds, "Measurement interval of one run, seconds")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str();
  app.add_option("-r,--runs", runs, "Runs per point; the median is reported")
      ->check(CLI::Range(1, 101))
      ->capture_default_str();
  app.add_option("-i,--impl", impl_names, "Implementations to run (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(known));
  app.add_flag("-q,--quick", quick, "Quick mode: 0.4 s x 3 runs per point (about 1 minute)");
  app.add_option("--csv", csv_path,
                 "Write medians as CSV here ('' to skip; bench/plots/semabench.gp draws it)")
      ->capture_default_str();
  app.add_flag("--latency", g_latency,
               "Also time every 16th acquisition: report p99.9 and max acquisition latency");
  app.add_option("--threshold", threshold, "TWA LongTermThreshold (tickets)")
      ->capture_default_str();
  app.add_option("--spin", spins, "TWA short-term spin iterations")->capture_default_str();
  app.add_option("--yield", yields, "TWA short-term yields before parking")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (quick) {
    seconds = 0.4;
    runs = 3;
  }
  tessera::detail::twa_config().long_term_threshold = threshold;
  tessera::detail::twa_config().spin_iterations = spins;
  tessera::detail::twa_config().yield_iterations = yields;
  std::vector<impl_entry> impls;
  for (auto& e : all_impls()) {
    if (impl_names.empty() ||
        std::find(impl_names.begin(), impl_names.end(), e.name) != impl_names.end()) {
      impls.push_back(std::move(e));
    }
  }

  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("semabench: %zu implementations x %zu thread counts x %d runs of %.2f s (%u cores)\n",
              impls.size(), threads.size(), runs, seconds, cores);
  std::printf("%s\n", tessera::bench::machine().c_str());
  std::printf("TWA tuning: LongTermThreshold=%u, spin=%u, yield=%u\n\n", threshold, spins, yields);

  // results[impl][threads] = median ops/s
  std::map<std::string, std::map<int, double>> results;
  std::map<std::string, std::map<int, run_result>> tails;              // median p99.9, max of max
  std::map<std::string, std::map<int, std::vector<double>>> by_round;  // ops/s of round r
  tessera::bench::progress bar(impls.size() * threads.size() * static_cast<std::size_t>(runs));
  // Rounds interleave the implementations (round r runs each of them once, in
  // turn), so a slow stretch of a shared machine lands on all of them alike and
  // the ratios of one run stay fair even when the absolute figures drift.
  for (int t : threads) {
    std::map<std::string, std::vector<double>> p999s;
    std::map<std::string, double> worst;
    for (int r = 0; r < runs; ++r) {
      for (auto& e : impls) {
        bar.step("T=" + std::to_string(t) + " " + e.name + " run " + std::to_string(r + 1) + "/" +
                 std::to_string(runs));
        const run_result rr = e.run(t, seconds);
        by_round[e.name][t].push_back(rr.ops_per_s);
        p999s[e.name].push_back(rr.p999_us);
        worst[e.name] = std::max(worst[e.name], rr.max_us);
      }
    }
    for (auto& e : impls) {
      tails[e.name][t] = {0, tessera::bench::median(p999s[e.name]), worst[e.name]};
      results[e.name][t] = tessera::bench::median(by_round[e.name][t]);
    }
  }
  bar.done();

  // ---- table: throughput, and ratio to sem_t --------------------------------
  const bool have_sem_t = results.count("sem_t") != 0;
  std::printf("Throughput (iterations/s, median of %d)%s\n", runs,
              have_sem_t ? ", and ratio to sem_t in the same run" : "");
  print_table(impls, threads, [&](const std::string& name, int t, char* cell, std::size_t size) {
    const double v = results[name][t];
    if (have_sem_t && results["sem_t"][t] > 0) {
      std::snprintf(cell, size, "%s (%.2fx)", human(v).c_str(), v / results["sem_t"][t]);
    } else {
      std::snprintf(cell, size, "%s", human(v).c_str());
    }
  });

  if (g_latency) {
    std::printf(
        "\nAcquisition latency, every 16th acquisition: p99.9 (median of runs) / max (of all "
        "runs), us\n");
    print_table(impls, threads, [&](const std::string& name, int t, char* cell, std::size_t size) {
      std::snprintf(cell, size, "%.0f / %.0f", tails[name][t].p999_us, tails[name][t].max_us);
    });
  }

  // ---- the targets, as ratios measured in this run ---------------------
  auto has = [&](const char* n, int t) { return results.count(n) && results[n].count(t); };
  // One key ratio: the ratio of the medians, and beside it the range of the
  // per-round ratios (round r's run of `a` over round r's run of `b`: seconds
  // apart at one thread count), which shows how far a slow stretch of the
  // machine moved it.
  auto key = [&](int ta, const char* a, int tb, const char* b, const char* label,
                 const char* target) {
    if (!has(a, ta) || !has(b, tb)) return;
    const auto& ra = by_round[a][ta];
    const auto& rb = by_round[b][tb];
    double lo = 0, hi = 0;
    for (std::size_t r = 0; r < ra.size() && r < rb.size(); ++r) {
      const double q = ra[r] / rb[r];
      lo = r == 0 ? q : std::min(lo, q);
      hi = r == 0 ? q : std::max(hi, q);
    }
    std::printf("  %-40s = %7.2fx  (rounds %.2f-%.2fx; target >= %s)\n", label,
                results[a][ta] / results[b][tb], lo, hi, target);
  };
  auto at = [](int t, const char* what) { return "T=" + std::to_string(t) + " " + what; };
  std::printf("\nKey ratios (this run; medians, and the range of the per-round ratios):\n");
  key(1, "twa", 1, "ticket", "T=1 twa / ticket", "0.9");
  key(1, "twa", 1, "std::counting_semaphore", "T=1 twa / std::counting_semaphore", "5");
  key(4, "twa", 4, "ticket", "T=4 twa / ticket", "30");
  key(32, "twa", 4, "twa", "twa T=32 / twa T=4", "0.5");
  key(1, "faa", 1, "twa-fifo", "T=1 faa / twa-fifo", "0.91");
  for (int t : threads) {
    if (t >= 4) key(t, "faa", t, "twa-fifo", at(t, "faa / twa-fifo").c_str(), "1.0");
  }
  key(1, "faa-restricted", 1, "twa", "T=1 faa-restricted / twa", "0.91");
  for (int t : threads) {
    if (t >= 4) {
      key(t, "faa-restricted", t, "twa", at(t, "faa-restricted / twa").c_str(), "1.0");
    }
  }
  for (int t : threads) {
    key(t, "tessera::mutex", t, "std::mutex", at(t, "tessera::mutex / std::mutex").c_str(), "1.0");
  }
  for (int t : threads) {
    key(t, "rw:tessera::shared_mutex", t, "rw:std::shared_mutex",
        at(t, "rw:tessera / rw:std::shared_mutex").c_str(), "2.0");
  }
  for (int t : threads) {
    if (has("twa", t) && has("sem_t", t) && t > static_cast<int>(cores))
      std::printf("  T=%-3d twa / sem_t (FIFO vs barging) = %8.3fx\n", t,
                  results["twa"][t] / results["sem_t"][t]);
  }

  // ---- CSV (bench/plots/semabench.gp draws it) ------------------------------------
  if (!csv_path.empty()) {
    tessera::bench::csv_writer csv(
        csv_path, {"impl", "family", "tessera", "threads", "median_ops_per_s", "min_ops_per_s",
                   "max_ops_per_s", "runs", "seconds"});
    for (auto& e : impls) {
      for (int t : threads) {
        const auto& v = by_round[e.name][t];
        const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
        csv.row(e.name, family_of(e.name), is_tessera(e.name) ? 1 : 0, t, results[e.name][t], *lo,
                *hi, runs, seconds);
      }
    }
    std::printf("\nCSV:  %s\n", csv_path.c_str());
  }
  return 0;
}

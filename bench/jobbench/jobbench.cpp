// jobbench — Tessera's jobs beside oneTBB, OpenMP and a plain std::thread
// pool, in one run, on W workers (W = 1 and 2 by default):
//
//   fib          fork-join fib(N) with a task per call (oneTBB's classic):
//                tessera::task_group, tbb::task_group, `omp task` (not the
//                pool: a plain pool cannot fork-join — a wait that blocks
//                deadlocks, one that helps without bound overflows the stack,
//                one that helps to a bound deadlocks at the bound)
//   skynet       1,000,000 tasks in a 10-ary tree summing their ids
//   pfor-G       parallel_for over 1M trivial iterations at grain G (1, 64,
//                4096): tessera::parallel_for and tbb::parallel_for
//                (blocked_range, default partitioner), `omp parallel for
//                schedule(dynamic, G)`, the pool with G-sized chunks
//   spawn        a job submitted from a plain thread into an idle runtime:
//                time until it starts, p50, 2 ms apart (Tessera
//                task_group(rt).run, tbb::task_group::run, the pool). How
//                idle "idle" is differs: Tessera's workers sleep on a futex
//                after runtime_options::idle_spin (50 µs), oneTBB's keep
//                spinning and yielding for a while longer, the pool's sleep on
//                a condition variable at once.
//   floor        the switch floor: a raw Boost.Context jump_fcontext round trip
//                (two jumps), the same two jumps each made from a function that
//                returns afterwards (as any scheduler's are), beside Tessera's
//                fiber park/unpark ping-pong round trip and a fiber
//                create+join, 1 worker
//
// Each figure is the median of --reps runs. Parallelism W means: Tessera W
// workers (the benchmark runs on one of them); oneTBB global_control
// max_allowed_parallelism W (the calling thread is one); OpenMP W threads;
// the pool W-1 threads plus the calling thread, which helps while it waits.
// Output: a table, ratios against oneTBB, and --csv rows
// (benchmark,workers,system,value,unit).
#include <tessera/jobs.h>
#include <tessera/runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/context/detail/fcontext.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <omp.h>
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_group.h>

#include "harness.h"
#include "pingpong.h"
#include "thread_pool.h"

namespace {

using steady = std::chrono::steady_clock;
using jobbench::thread_pool;

// One Boost.Context jump made by a `call` from inside a function that then
// returns, as a scheduler's switch usually is: the jump leaves the return
// predictor one entry off, so the first return after it mispredicts
// (Tessera enters the jump without a call: sched::jump in sched/context.h).
[[gnu::noinline]] boost::context::detail::transfer_t jump_from_call(
    boost::context::detail::fcontext_t to, void* data) {
  const auto t = boost::context::detail::jump_fcontext(to, data);
  asm volatile("" ::: "memory");  // no tail call: return after the jump
  return t;
}

double ns_since(steady::time_point t0) {
  return std::chrono::duration<double, std::nano>(steady::now() - t0).count();
}

// Nanoseconds per round trip of two contexts handing control back and forth
// with `Jump` (jump_fcontext itself, or jump_from_call), on `stack`.
template <auto Jump>
double jump_round_trip_ns(char* stack, std::size_t size, int rounds) {
  namespace ctx = boost::context::detail;
  ctx::fcontext_t other = ctx::make_fcontext(stack + size, size, [](ctx::transfer_t t) {
    for (;;) t = Jump(t.fctx, nullptr);
  });
  const auto t0 = steady::now();
  for (int i = 0; i < rounds; ++i) other = Jump(other, nullptr).fctx;
  return ns_since(t0) / rounds;
}

using tessera::bench::median;
using tessera::bench::median_of;

// ---- fib -------------------------------------------------------------------------
// The same code for both libraries: Group is tessera::task_group or tbb::task_group.
template <class Group>
long fib(int n) {
  if (n < 2) return n;
  long a = 0;
  Group g;
  g.run([&a, n] { a = fib<Group>(n - 1); });
  const long b = fib<Group>(n - 2);
  g.wait();
  return a + b;
}
long fib_omp(int n) {
  if (n < 2) return n;
  long a = 0;
#pragma omp task shared(a) firstprivate(n)
  a = fib_omp(n - 1);
  const long b = fib_omp(n - 2);
#pragma omp taskwait
  return a + b;
}
// ---- skynet ----------------------------------------------------------------------
template <class Group>
long skynet(long num, long size) {
  if (size == 1) return num;
  long sums[10];
  Group g;
  const long sub = size / 10;
  for (long i = 0; i < 10; ++i) g.run([&sums, i, num, sub] { sums[i] = skynet<Group>(num + i * sub, sub); });
  g.wait();
  long t = 0;
  for (long s : sums) t += s;
  return t;
}
long skynet_omp(long num, long size) {
  if (size == 1) return num;
  long sums[10];
  const long sub = size / 10;
  for (long i = 0; i < 10; ++i) {
#pragma omp task shared(sums) firstprivate(i, num, sub)
    sums[i] = skynet_omp(num + i * sub, sub);
  }
#pragma omp taskwait
  long t = 0;
  for (long s : sums) t += s;
  return t;
}
void check(const char* what, long got, long want) {
  if (got != want) {
    std::fprintf(stderr, "jobbench: %s computed %ld, expected %ld\n", what, got, want);
    std::exit(1);
  }
}

// ---- the results table ---------------------------------------------------------------
struct row {
  std::string bench;
  unsigned workers;
  std::string system;
  double value;
  std::string unit;
};
std::vector<row> rows;

void record(const std::string& bench, unsigned w, const std::string& sys, double v,
            const std::string& unit) {
  rows.push_back({bench, w, sys, v, unit});
  std::printf("  %-12s W=%u  %-14s %12.1f %s\n", bench.c_str(), w, sys.c_str(), v, unit.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"jobbench: Tessera's jobs beside oneTBB, OpenMP and a std::thread pool"};
  std::vector<unsigned> worker_counts{1, 2};
  int reps = 5;
  int fib_n = 30;
  std::string csv;
  bool quick = false;
  long idle_spin_us = 50;
  app.add_option("--workers", worker_counts, "worker counts to run")->expected(1, 8);
  app.add_option("--reps", reps, "runs per figure (median)")->check(CLI::PositiveNumber);
  app.add_option("--fib", fib_n, "n of fib(n)")->check(CLI::Range(10, 40));
  app.add_option("--csv", csv, "write rows benchmark,workers,system,value,unit");
  app.add_option("--idle-spin", idle_spin_us, "Tessera workers' idle spin, µs (runtime_options::idle_spin)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--quick", quick, "fewer repetitions, fib(25) (a smoke run)");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    reps = std::min(reps, 3);
    fib_n = std::min(fib_n, 25);
  }
  long fib_want = 0;
  {
    long a = 0, b = 1;
    for (int i = 0; i < fib_n; ++i) {
      const long c = a + b;
      a = b;
      b = c;
    }
    fib_want = a;
  }
  constexpr long kSkynet = 1'000'000;
  constexpr long kSkynetSum = kSkynet * (kSkynet - 1) / 2;
  constexpr long kIters = 1'000'000;
  std::vector<int> out(kIters);
  const std::string fib_name = "fib" + std::to_string(fib_n);

  std::printf("jobbench: %s\n", tessera::bench::machine().c_str());
  const unsigned total = static_cast<unsigned>(worker_counts.size());
  unsigned done = 0;
  for (unsigned w : worker_counts) {
    std::printf("[%u/%u] W=%u: fork-join, parallel_for, spawn latency\n", ++done, total, w);
    tessera::runtime rt({.workers = w, .idle_spin = std::chrono::microseconds(idle_spin_us)});
    // The most restrictive live global_control wins: the spawn figure needs
    // W workers *besides* the submitting thread, so this one ends before it.
    std::optional<tbb::global_control> gc(std::in_place, tbb::global_control::max_allowed_parallelism, w);
    omp_set_num_threads(static_cast<int>(w));
    thread_pool pool(w - 1 == 0 ? 1 : w - 1);  // W=1: one thread, the caller only helps
    rt.start();  // the Tessera figures run as submitted fibers on a started runtime

    // fib
    record(fib_name, w, "tessera", median_of(reps, [&] {
             return rt.submit([&] {
               const auto t0 = steady::now();
               check("tessera fib", fib<tessera::task_group>(fib_n), fib_want);
               return ns_since(t0) / 1e6;
             }).get();
           }), "ms");
    record(fib_name, w, "tbb", median_of(reps, [&] {
             const auto t0 = steady::now();
             check("tbb fib", fib<tbb::task_group>(fib_n), fib_want);
             return ns_since(t0) / 1e6;
           }), "ms");
    record(fib_name, w, "openmp", median_of(reps, [&] {
             const auto t0 = steady::now();
             long r = 0;
#pragma omp parallel
#pragma omp single
             r = fib_omp(fib_n);
             check("omp fib", r, fib_want);
             return ns_since(t0) / 1e6;
           }), "ms");
    // skynet
    record("skynet", w, "tessera", median_of(reps, [&] {
             return rt.submit([&] {
               const auto t0 = steady::now();
               check("tessera skynet", skynet<tessera::task_group>(0, kSkynet), kSkynetSum);
               return ns_since(t0) / 1e6;
             }).get();
           }), "ms");
    record("skynet", w, "tbb", median_of(reps, [&] {
             const auto t0 = steady::now();
             check("tbb skynet", skynet<tbb::task_group>(0, kSkynet), kSkynetSum);
             return ns_since(t0) / 1e6;
           }), "ms");
    {
      // The same skynet with the scheduler trace on (runtime_options::
      // trace_events: 64 Ki events a worker), in its own runtime for the
      // length of this figure: what tracing costs.
      tessera::runtime traced({.workers = w,
                               .idle_spin = std::chrono::microseconds(idle_spin_us),
                               .trace_events = std::size_t{1} << 16});
      traced.start();
      record("skynet", w, "tessera-traced", median_of(reps, [&] {
               return traced.submit([&] {
                 const auto t0 = steady::now();
                 check("traced skynet", skynet<tessera::task_group>(0, kSkynet), kSkynetSum);
                 return ns_since(t0) / 1e6;
               }).get();
             }), "ms");
      traced.stop();
    }
    record("skynet", w, "openmp", median_of(reps, [&] {
             const auto t0 = steady::now();
             long r = 0;
#pragma omp parallel
#pragma omp single
             r = skynet_omp(0, kSkynet);
             check("omp skynet", r, kSkynetSum);
             return ns_since(t0) / 1e6;
           }), "ms");
    // parallel_for: 10 calls per figure, time per call
    for (std::size_t grain : {std::size_t{1}, std::size_t{64}, std::size_t{4096}}) {
      const std::string name = "pfor-" + std::to_string(grain);
      constexpr int kCalls = 10;
      record(name, w, "tessera", median_of(reps, [&] {
               return rt.submit([&] {
                 const auto t0 = steady::now();
                 for (int c = 0; c < kCalls; ++c) {
                   tessera::parallel_for(tessera::blocked_range<long>(0, kIters, grain),
                                         [&](const tessera::blocked_range<long>& r) {
                                           for (long i = r.begin(); i != r.end(); ++i) out[i] = int(i) + c;
                                         });
                 }
                 return ns_since(t0) / 1e3 / kCalls;
               }).get();
             }), "us");
      record(name, w, "tbb", median_of(reps, [&] {
               const auto t0 = steady::now();
               for (int c = 0; c < kCalls; ++c) {
                 tbb::parallel_for(tbb::blocked_range<long>(0, kIters, grain),
                                   [&](const tbb::blocked_range<long>& r) {
                                     for (long i = r.begin(); i != r.end(); ++i) out[i] = int(i) + c;
                                   });
               }
               return ns_since(t0) / 1e3 / kCalls;
             }), "us");
      record(name, w, "openmp", median_of(reps, [&] {
               const auto t0 = steady::now();
               const long g = static_cast<long>(grain);
               for (int c = 0; c < kCalls; ++c) {
#pragma omp parallel for schedule(dynamic, g)
                 for (long i = 0; i < kIters; ++i) out[i] = int(i) + c;
               }
               return ns_since(t0) / 1e3 / kCalls;
             }), "us");
      if (grain >= 64) {
        record(name, w, "pool", median_of(std::min(reps, 3), [&] {
                 const auto t0 = steady::now();
                 for (int c = 0; c < kCalls; ++c) {
                   thread_pool::group g;
                   for (long b = 0; b < kIters; b += static_cast<long>(grain)) {
                     const long e = std::min(kIters, b + static_cast<long>(grain));
                     pool.submit(g, [&out, b, e, c] {
                       for (long i = b; i < e; ++i) out[i] = int(i) + c;
                     });
                   }
                   pool.wait(g);
                 }
                 return ns_since(t0) / 1e3 / kCalls;
               }), "us");
      }
    }

    // spawn-to-run latency from a plain thread into an idle runtime (workers asleep)
    {
      constexpr int kSamples = 200;
      auto sample = [&](auto submit) {
        std::vector<double> lat;
        for (int i = 0; i < kSamples; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let the workers sleep
          std::atomic<std::int64_t> started{0};
          const auto t0 = steady::now();
          submit([&started] {
            started.store(steady::now().time_since_epoch().count());
            started.notify_one();
          });
          // Block, not spin: a spinning submitter would hold the core that a
          // pinned worker needs to wake up on.
          started.wait(0);
          lat.push_back(std::chrono::duration<double, std::micro>(
                            steady::time_point(steady::duration(started.load())) - t0)
                            .count());
        }
        return median(lat);
      };
      {
        tessera::task_group g(rt);
        record("spawn", w, "tessera", sample([&](auto f) {
                 g.run(f);
               }), "us");
        g.wait();
      }
      rt.stop();
      gc.reset();
      {
        tbb::global_control spawn_gc(tbb::global_control::max_allowed_parallelism, w + 1);
        tbb::task_group g;  // run() from this external thread: oneTBB's W workers take it
        record("spawn", w, "tbb", sample([&](auto f) { g.run(f); }), "us");
        g.wait();
      }
      {
        thread_pool::group g;
        record("spawn", w, "pool", sample([&](auto f) { pool.submit(g, f); }), "us");
        pool.wait(g);
      }
    }
  }

  // The floor: Boost.Context's raw jump, Tessera's park/unpark and create+join.
  std::printf("[floor] context switch floor, 1 worker\n");
  {
    namespace ctx = boost::context::detail;
    constexpr int kRounds = 2'000'000;
    static char stack[64 * 1024];
    // Interleaved, so that a slow spell of the shared host falls on all three
    // alike; they are short, so three times the repetitions of the rest.
    std::vector<double> jump, jump_call, pingpong;
    for (int i = 0; i < 3 * reps; ++i) {
      jump.push_back(jump_round_trip_ns<&ctx::jump_fcontext>(stack, sizeof stack, kRounds));
      jump_call.push_back(jump_round_trip_ns<&jump_from_call>(stack, sizeof stack, kRounds));
      pingpong.push_back(tessera::samples::pingpong_park_ns(1, 1'000'000));
    }
    record("jump-rt", 1, "boost", median(jump), "ns");
    record("jump-call-rt", 1, "boost", median(jump_call), "ns");
    record("pingpong-rt", 1, "tessera", median(pingpong), "ns");
    tessera::runtime rt1({.workers = 1});
    record("create-join", 1, "tessera", median_of(reps, [&] {
             return rt1.run([] {
               constexpr int kN = 200'000;
               const auto t0 = steady::now();
               for (int i = 0; i < kN; ++i) tessera::fiber([] {}).join();
               return ns_since(t0) / kN;
             });
           }), "ns");
    record("job-run-wait", 1, "tessera", median_of(reps, [&] {
             return rt1.run([] {
               constexpr int kN = 1'000'000;
               tessera::task_group g;
               const auto t0 = steady::now();
               for (int i = 0; i < kN; ++i) {
                 g.run([] {});
                 g.wait();
               }
               return ns_since(t0) / kN;
             });
           }), "ns");
    record("job-run-wait", 1, "tbb", median_of(reps, [&] {
             tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
             constexpr int kN = 1'000'000;
             tbb::task_group g;
             const auto t0 = steady::now();
             for (int i = 0; i < kN; ++i) {
               g.run([] {});
               g.wait();
             }
             return ns_since(t0) / kN;
           }), "ns");
  }

  // Ratios against oneTBB (time ratio: < 1 is faster than oneTBB).
  std::printf("\nTessera's time / oneTBB's time (same run; < 1.00 is faster):\n");
  std::map<std::pair<std::string, unsigned>, std::map<std::string, double>> by;
  for (const auto& r : rows) by[{r.bench, r.workers}][r.system] = r.value;
  for (const auto& [key, sys] : by) {
    if (sys.count("tessera") && sys.count("tbb")) {
      std::printf("  %-12s W=%u  %.2fx\n", key.first.c_str(), key.second,
                  sys.at("tessera") / sys.at("tbb"));
    }
  }
  if (const auto it = by.find({"jump-rt", 1}); it != by.end()) {
    const double floor = it->second.at("boost");
    std::printf("  park/unpark round trip / two-jump floor: %.2fx\n",
                by[{"pingpong-rt", 1}]["tessera"] / floor);
    const double called = by[{"jump-call-rt", 1}]["boost"];
    std::printf("  two jumps made from returning calls / two-jump floor: %.2fx\n", called / floor);
  }
  if (!csv.empty()) {
    tessera::bench::csv_writer f(csv, {"benchmark", "workers", "system", "value", "unit"});
    for (const auto& r : rows) f.row(r.bench, r.workers, r.system, r.value, r.unit);
  }
  return 0;
}

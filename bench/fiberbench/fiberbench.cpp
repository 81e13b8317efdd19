// fiberbench — Tessera's fibers beside Boost.Fiber, in one run, as ratios.
//
//   skynet       1,000,000 fibers in a 10-ary tree summing their ids, 2 workers
//                (Boost.Fiber: work_stealing on 2 threads), wall time
//   pingpong     two fibers hand a turn back and forth, round trip, on 1 and on
//                2 workers: Tessera's raw park/unpark, and each hand-off a user
//                calls — binary_semaphore release→acquire (the default
//                admission and admission::handoff), condition_variable
//                notify→wait (with its mutex), mutex unlock→lock (two fibers
//                hand over hand around three mutexes), channel send→receive —
//                each beside Boost.Fiber's same hand-off (for the semaphore and
//                park: its mutex + condition_variable) and over the park figure
//   create-join  start a fiber and join it, 1 worker
//   yield        two fibers yielding to each other, 1 worker, per yield
//   semabench-F  F fibers on 2 workers contending one lock (the paper's loop,
//                Dice & Kogan §3): tessera::counting_semaphore (restricted admission,
//                the default, admission::barging, admission::faa and
//                admission::faa_restricted) and tessera::mutex
//                (barging, eventually fair) vs boost::fibers::mutex, iterations/s
//                and F=2 beside a third fiber that only yields, tessera::mutex
//   latency      the same loop with tessera::mutex and boost::fibers::mutex,
//                every 16th lock() timed: p99.9 and max wait, µs (fairness)
//   channel      P producer and P consumer fibers on 2 workers pass ints through
//                one channel until it is closed, ns per item: tessera::channel
//                with capacity 0 (rendezvous) and 64 vs Boost.Fiber's
//                unbuffered_channel and buffered_channel (capacity 64)
//   memory       100,000 fibers parked on a semaphore: RSS per parked fiber
//
// Boost.Fiber's work_stealing can be set up once per process (static state), so
// all its 2-thread figures come from one pool of two threads; 1-thread figures
// use round_robin on a fresh thread.
#include <tessera/tessera.h>

#include "boost_pool.h"
#include "harness.h"
#include "pingpong.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <boost/fiber/algo/work_stealing.hpp>
#include <boost/fiber/all.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "wait_tail.h"

namespace {

using steady = std::chrono::steady_clock;
namespace bf = boost::fibers;

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

// Tessera and Boost.Fiber run interleaved, so that a slow stretch of a shared
// machine lands on both alike and the ratios of one run stay fair.
using tessera::bench::boost_pool;
using tessera::bench::interleaved_medians;

// ---- Boost.Fiber harnesses -------------------------------------------------------
// Runs fn on the main fiber of a fresh thread with round_robin (1 thread).
double boost_1thread(const std::function<double()>& fn) {
  double out = 0;
  std::thread([&] { out = fn(); }).join();
  return out;
}

// ---- skynet -------------------------------------------------------------------------
// The same code for both libraries: `Fiber` is tessera::fiber or bf::fiber.
template <class Fiber>
long skynet(long num, long size) {
  if (size == 1) return num;
  long sums[10];
  Fiber fs[10];
  const long sub = size / 10;
  for (long i = 0; i < 10; ++i) {
    fs[i] = Fiber([&sums, i, num, sub] { sums[i] = skynet<Fiber>(num + i * sub, sub); });
  }
  long total = 0;
  for (long i = 0; i < 10; ++i) {
    fs[i].join();
    total += sums[i];
  }
  return total;
}

void check_skynet(long got) {
  if (got != 499999500000L) {
    std::fprintf(stderr, "skynet: wrong sum %ld\n", got);
    std::exit(1);
  }
}

// ---- channel operations, either library ---------------------------------------------
void chan_send(tessera::channel<int>& ch, int v) {
  (void)ch.send(v);
}
bool chan_receive(tessera::channel<int>& ch, int& v) {
  const auto got = ch.receive();
  if (got) v = *got;
  return got.has_value();
}
template <class Ch>
void chan_send(Ch& ch, int v) {
  (void)ch.push(v);
}
template <class Ch>
bool chan_receive(Ch& ch, int& v) {
  return ch.pop(v) == bf::channel_op_status::success;
}

// ---- ping-pong ------------------------------------------------------------------------
// Returns ns per round trip.
double tessera_pingpong_park(unsigned workers, int rounds) {
  return tessera::samples::pingpong_park_ns(workers, rounds);
}

// `mode`: the default admission (restricted), or another.
double tessera_pingpong_sem(unsigned workers, int rounds,
                            tessera::admission mode = tessera::admission::restricted) {
  tessera::runtime rt({.workers = workers});
  return rt.run([rounds, mode] {
    tessera::binary_semaphore ping(0, mode), pong(0, mode);
    const auto t0 = steady::now();
    tessera::fiber a([&] {
      for (int i = 0; i < rounds; ++i) {
        ping.release();
        pong.acquire();
      }
    });
    tessera::fiber b([&] {
      for (int i = 0; i < rounds; ++i) {
        ping.acquire();
        pong.release();
      }
    });
    a.join();
    b.join();
    return seconds_since(t0) * 1e9 / rounds;
  });
}

// The hand-offs a user calls, as round trips between two fibers: the same
// code for both libraries (Fiber, Mutex, CondVar, channel types given).
// condition_variable: a turn under a mutex, each side waits for its turn and
// notifies the other (Boost.Fiber's idiomatic hand-off).
template <class Fiber, class Mutex, class CondVar>
double condvar_pingpong(int rounds) {
  Mutex m;
  CondVar cv;
  int turn = 0;
  auto player = [&](int me) {
    for (int i = 0; i < rounds; ++i) {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return turn == me; });
      turn = 1 - me;
      cv.notify_one();
    }
  };
  const auto t0 = steady::now();
  Fiber a(player, 0), b(player, 1);
  a.join();
  b.join();
  return seconds_since(t0) * 1e9 / rounds;
}
// mutex: two fibers walk hand over hand around a ring of three mutexes, each
// holding one and locking the next before it unlocks the one it holds. Each
// step's unlock() wakes the other fiber, which holds the mutex the waker needs
// next: the fibers alternate, one unlock→lock hand-off each way per round, and
// barging cannot run ahead (a lock the other holds cannot be barged). Each
// starts walking once both hold their first mutex (`yield` until then).
template <class Fiber, class Mutex, class Yield>
double mutex_ring(int rounds, Yield yield) {
  Mutex m[3];
  std::atomic<int> holding{0};
  auto walk = [&](int at) {
    m[at].lock();
    holding.fetch_add(1);
    while (holding.load() < 2) yield();
    for (int i = 0; i < rounds; ++i) {
      const int next = (at + 1) % 3;
      m[next].lock();
      m[at].unlock();
      at = next;
    }
    m[at].unlock();
  };
  const auto t0 = steady::now();
  Fiber a([&] { walk(0); });
  Fiber b([&] { walk(1); });
  a.join();
  b.join();
  return seconds_since(t0) * 1e9 / rounds;
}
// channel: a value sent on one rendezvous channel, and back on another.
template <class Fiber, class Ch>
double channel_pingpong(Ch& ping, Ch& pong, int rounds) {
  const auto t0 = steady::now();
  Fiber a([&] {
    int v = 0;
    for (int i = 0; i < rounds; ++i) {
      chan_send(ping, i);
      (void)chan_receive(pong, v);
    }
  });
  Fiber b([&] {
    int v = 0;
    for (int i = 0; i < rounds; ++i) {
      (void)chan_receive(ping, v);
      chan_send(pong, v);
    }
  });
  a.join();
  b.join();
  return seconds_since(t0) * 1e9 / rounds;
}

// ---- create+join, yield -------------------------------------------------------------
double tessera_create_join(int n) {
  tessera::runtime rt({.workers = 1});
  return rt.run([n] {
    const auto t0 = steady::now();
    for (int i = 0; i < n; ++i) tessera::fiber([] {}).join();
    return seconds_since(t0) * 1e9 / n;
  });
}
double boost_create_join(int n) {
  const auto t0 = steady::now();
  for (int i = 0; i < n; ++i) bf::fiber([] {}).join();
  return seconds_since(t0) * 1e9 / n;
}
double tessera_yield(int n) {
  tessera::runtime rt({.workers = 1});
  return rt.run([n] {
    const auto t0 = steady::now();
    tessera::fiber a([n] {
      for (int i = 0; i < n; ++i) tessera::this_fiber::yield();
    });
    tessera::fiber b([n] {
      for (int i = 0; i < n; ++i) tessera::this_fiber::yield();
    });
    a.join();
    b.join();
    return seconds_since(t0) * 1e9 / (2.0 * n);
  });
}
double boost_yield(int n) {
  const auto t0 = steady::now();
  bf::fiber a([n] {
    for (int i = 0; i < n; ++i) boost::this_fiber::yield();
  });
  bf::fiber b([n] {
    for (int i = 0; i < n; ++i) boost::this_fiber::yield();
  });
  a.join();
  b.join();
  return seconds_since(t0) * 1e9 / (2.0 * n);
}

// ---- semabench in fibers ---------------------------------------------------------------
// The paper's loop with F fibers for `secs` seconds; returns iterations/s. With
// `waits`, every 16th acquisition is timed and its wait (ns) appended there.
// With `yield`, one more fiber calls it in a loop all along (a fiber that
// only yields, competing for the workers).
template <class Fiber, class Lock, class Sleep>
double semabench_loop(int fibers, double secs, Lock& lock, Sleep&& sleep_for,
                      std::vector<std::uint32_t>* waits = nullptr,
                      const std::function<void()>& yield = nullptr) {
  std::mt19937 shared_rng(1);
  std::atomic<bool> stop{false};
  std::atomic<long> total{0};
  std::vector<std::vector<std::uint32_t>> per_fiber(waits != nullptr ? fibers : 0);
  std::vector<Fiber> fs;
  const auto t0 = steady::now();
  for (int i = 0; i < fibers; ++i) {
    fs.emplace_back([&, i] {
      std::mt19937 mine(static_cast<unsigned>(i));
      std::vector<std::uint32_t>* my_waits = waits != nullptr ? &per_fiber[i] : nullptr;
      long n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (my_waits != nullptr && (n & 15) == 0) {
          tessera::samples::timed_acquire(*my_waits, [&] { lock.acquire(); });
        } else {
          lock.acquire();
        }
        shared_rng();
        lock.release();
        mine();
        ++n;
      }
      total.fetch_add(n);
    });
  }
  if (yield) {
    fs.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) yield();
    });
  }
  sleep_for(std::chrono::duration<double>(secs));
  stop = true;
  for (auto& f : fs) f.join();
  const double rate = static_cast<double>(total.load()) / seconds_since(t0);
  if (waits != nullptr) {
    for (auto& w : per_fiber) waits->insert(waits->end(), w.begin(), w.end());
  }
  return rate;
}

struct tessera_lock {
  tessera::counting_semaphore<> s{1};
  void acquire() { s.acquire(); }
  void release() { s.release(); }
};
struct tessera_barging_lock {
  tessera::counting_semaphore<> s{1, tessera::admission::barging};
  void acquire() { s.acquire(); }
  void release() { s.release(); }
};
struct tessera_faa_lock {
  tessera::counting_semaphore<> s{1, tessera::admission::faa};
  void acquire() { s.acquire(); }
  void release() { s.release(); }
};
struct tessera_faa_restricted_lock {
  tessera::counting_semaphore<> s{1, tessera::admission::faa_restricted};
  void acquire() { s.acquire(); }
  void release() { s.release(); }
};
struct tessera_mutex_lock {
  tessera::mutex m;
  void acquire() { m.lock(); }
  void release() { m.unlock(); }
};
struct boost_lock {
  bf::mutex m;
  void acquire() { m.lock(); }
  void release() { m.unlock(); }
};

// One semabench run: `fibers` fibers on `rt`'s workers contend a fresh Lock;
// iterations/s (and, with `waits`, every 16th acquisition's wait).
template <class Lock>
double tessera_semabench(tessera::runtime& rt, int fibers, double secs,
                         std::vector<std::uint32_t>* waits = nullptr, bool yielder = false) {
  return rt.run([&] {
    Lock lock;
    return semabench_loop<tessera::fiber>(
        fibers, secs, lock, [](auto d) { tessera::this_fiber::sleep_for(d); }, waits,
        yielder ? std::function<void()>([] { tessera::this_fiber::yield(); }) : nullptr);
  });
}
// The same with boost::fibers::mutex on the Boost pool.
double boost_semabench(int fibers, double secs, std::vector<std::uint32_t>* waits = nullptr,
                       bool yielder = false) {
  return boost_pool::get().run([&] {
    boost_lock lock;
    return semabench_loop<bf::fiber>(
        fibers, secs, lock,
        [](auto d) {
          boost::this_fiber::sleep_for(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
        },
        waits, yielder ? std::function<void()>([] { boost::this_fiber::yield(); }) : nullptr);
  });
}

// ---- memory ----------------------------------------------------------------------------
long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// ---- channel ------------------------------------------------------------------------
// `pairs` producers send 0..items-1 between them, `pairs` consumers receive
// until the channel is closed; ns per item. The same code for both libraries.
template <class Fiber, class Ch>
double channel_transfer(Ch& ch, int pairs, int items) {
  std::atomic<int> producers_left{pairs};
  std::atomic<long> sum{0};
  const auto t0 = steady::now();
  std::vector<Fiber> fs;
  for (int p = 0; p < pairs; ++p) {
    fs.emplace_back([&, p] {
      for (int i = p; i < items; i += pairs) chan_send(ch, i);
      if (producers_left.fetch_sub(1) == 1) ch.close();
    });
    fs.emplace_back([&] {
      long s = 0;
      for (int v; chan_receive(ch, v);) s += v;
      sum.fetch_add(s);
    });
  }
  for (auto& f : fs) f.join();
  const double ns = seconds_since(t0) * 1e9 / items;
  if (sum.load() != static_cast<long>(items) * (items - 1) / 2) {
    std::fprintf(stderr, "channel: items lost or duplicated (sum %ld)\n", sum.load());
    std::exit(1);
  }
  return ns;
}

// ---- reporting --------------------------------------------------------------------------
struct row {
  std::string bench, unit;
  double tessera, boost;
  bool lower_is_better;
  std::string note;
};

void print_rows(const std::vector<row>& rows) {
  auto g4 = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4g", v);
    return std::string(text);
  };
  tessera::bench::table t({"benchmark", "tessera", "Boost.Fiber", "ratio", "unit / note"});
  t.left(4);
  for (const auto& r : rows) {
    if (r.boost > 0) {
      const double ratio = r.lower_is_better ? r.boost / r.tessera : r.tessera / r.boost;
      t.add({r.bench, g4(r.tessera), g4(r.boost), tessera::bench::fixed(ratio) + "x",
             r.unit + r.note});
    } else {
      t.add({r.bench, g4(r.tessera), "-", "-", r.unit + r.note});
    }
  }
  std::printf("\n");
  t.print();
  std::printf(
      "ratio: how many times better Tessera is (time: Boost/Tessera; rate: Tessera/Boost)\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fiberbench: Tessera fibers beside Boost.Fiber"};
  int runs = 3;
  bool quick = false;
  std::vector<std::string> only;
  std::vector<int> fiber_counts{2, 8, 32, 128, 512, 1024};
  double seconds = 0.3;
  long parked = 100000;
  std::string csv;
  app.add_option("--runs", runs, "runs per figure (median)")->check(CLI::Range(1, 100));
  app.add_flag("--quick", quick, "fewer rounds (for CI)");
  app.add_option("--only", only, "benchmarks to run")
      ->check(CLI::IsMember({"skynet", "pingpong", "create-join", "yield", "semabench", "latency",
                             "channel", "memory"}));
  app.add_option("--fibers", fiber_counts, "fiber counts for semabench (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000));
  app.add_option("--seconds", seconds, "seconds per semabench point")
      ->check(CLI::Range(0.01, 60.0));
  app.add_option("--parked", parked, "fibers parked in the memory benchmark")
      ->check(CLI::Range(1L, 10000000L));
  app.add_option("--csv", csv, "also write the table as CSV here");
  CLI11_PARSE(app, argc, argv);
  auto want = [&](const char* b) {
    return only.empty() || std::count(only.begin(), only.end(), b) > 0;
  };
  const int rounds = quick ? 50000 : 200000;
  std::vector<row> rows;
  {
    tessera::runtime probe({.workers = 2});
    std::printf("fiberbench: %s\n  %s; %d run(s) per figure, median\n",
                tessera::bench::machine().c_str(), probe.describe().c_str(), runs);
  }
  tessera::bench::progress bar;
  auto fmt = [](const char* format, auto... args) {
    char text[96];
    std::snprintf(text, sizeof text, format, args...);
    return std::string(text);
  };

  if (want("skynet")) {
    bar.step("skynet");
    tessera::runtime rt({.workers = 2});
    const auto [t, b] = interleaved_medians(
        runs,
        [&] {
          const auto t0 = steady::now();
          check_skynet(rt.run([] { return skynet<tessera::fiber>(0, 1000000); }));
          return seconds_since(t0);
        },
        [&] {
          return boost_pool::get().run([] {
            const auto t0 = steady::now();
            check_skynet(skynet<bf::fiber>(0, 1000000));
            return seconds_since(t0);
          });
        });
    rows.push_back({"skynet 1M, 2 workers", "s", t, b, true, ""});
  }
  if (want("pingpong")) {
    // Raw park/unpark and every hand-off a user calls, on 1 and 2 workers;
    // each hand-off's note gives its time over the raw park round trip of
    // the same run.
    for (unsigned w : {1u, 2u}) {
      bar.step(fmt("ping-pong, %u worker(s)", w));
      const int n = w == 1 ? rounds : rounds / 10;
      auto on_boost = [&](auto fn) {
        return w == 1 ? boost_1thread(fn) : boost_pool::get().run(fn);
      };
      auto on_tessera = [&](auto fn) {
        tessera::runtime rt({.workers = w});
        return rt.run(fn);
      };
      const auto [park, sem, sem_h, cv, bcv, mx, bmx, ch, bch] = interleaved_medians(
          runs, [&] { return tessera_pingpong_park(w, n); },
          [&] { return tessera_pingpong_sem(w, n); },
          [&] { return tessera_pingpong_sem(w, n, tessera::admission::handoff); },
          [&] {
            return on_tessera([&] {
              return condvar_pingpong<tessera::fiber, tessera::mutex,
                                      tessera::condition_variable>(n);
            });
          },
          [&] {
            return on_boost([&] {
              return condvar_pingpong<bf::fiber, bf::mutex, bf::condition_variable>(n);
            });
          },
          [&] {
            return on_tessera([&] {
              return mutex_ring<tessera::fiber, tessera::mutex>(
                  n, [] { tessera::this_fiber::yield(); });
            });
          },
          [&] {
            return on_boost([&] {
              return mutex_ring<bf::fiber, bf::mutex>(n, [] { boost::this_fiber::yield(); });
            });
          },
          [&] {
            return on_tessera([&] {
              tessera::channel<int> ping(0), pong(0);
              return channel_pingpong<tessera::fiber>(ping, pong, n);
            });
          },
          [&] {
            return on_boost([&] {
              bf::unbuffered_channel<int> ping, pong;
              return channel_pingpong<bf::fiber>(ping, pong, n);
            });
          });
      const std::string ws = ", " + std::to_string(w) + "w";
      auto over_park = [&](double v) {
        return " (" + tessera::bench::fixed(v / park) + "x the park round trip)";
      };
      rows.push_back({"pingpong park" + ws, "ns/round trip", park, bcv, true,
                      " (raw park/unpark; Boost: mutex+condvar)"});
      rows.push_back({"  binary_semaphore" + ws, "ns/round trip", sem, bcv, true,
                      over_park(sem) + " (restricted, the default; Boost: mutex+condvar)"});
      rows.push_back({"  binary_semaphore handoff" + ws, "ns/round trip", sem_h, bcv, true,
                      over_park(sem_h) + " (admission::handoff; Boost: mutex+condvar)"});
      rows.push_back(
          {"  condition_variable" + ws, "ns/round trip", cv, bcv, true, over_park(cv)});
      rows.push_back({"  mutex ring" + ws, "ns/round trip", mx, bmx, true, over_park(mx)});
      rows.push_back(
          {"  channel rendezvous" + ws, "ns/round trip", ch, bch, true, over_park(ch)});
    }
  }
  if (want("create-join")) {
    bar.step("create+join");
    const int n = rounds / 2;
    const auto [t, b] = interleaved_medians(
        runs, [&] { return tessera_create_join(n); },
        [&] { return boost_1thread([&] { return boost_create_join(n); }); });
    rows.push_back({"create+join, 1w", "ns/fiber", t, b, true, ""});
  }
  if (want("yield")) {
    bar.step("yield");
    const auto [t, b] = interleaved_medians(
        runs, [&] { return tessera_yield(rounds); },
        [&] { return boost_1thread([&] { return boost_yield(rounds); }); });
    rows.push_back({"yield, 1w", "ns/yield", t, b, true, ""});
  }
  if (want("semabench")) {
    tessera::runtime rt({.workers = 2});
    for (int f : fiber_counts) {
      bar.step(fmt("semabench F=%d", f));
      const auto [t, b, tm, tb, tf, tfr] = interleaved_medians(
          runs, [&] { return tessera_semabench<tessera_lock>(rt, f, seconds); },
          [&] { return boost_semabench(f, seconds); },
          [&] { return tessera_semabench<tessera_mutex_lock>(rt, f, seconds); },
          [&] { return tessera_semabench<tessera_barging_lock>(rt, f, seconds); },
          [&] { return tessera_semabench<tessera_faa_lock>(rt, f, seconds); },
          [&] { return tessera_semabench<tessera_faa_restricted_lock>(rt, f, seconds); });
      rows.push_back(
          {"semabench F=" + std::to_string(f) + ", 2w", "iter/s", t, b, false,
           " (tessera::counting_semaphore, restricted admission, vs Boost fibers::mutex)"});
      rows.push_back(
          {"  barging F=" + std::to_string(f) + ", 2w", "iter/s", tb, b, false,
           " (tessera::counting_semaphore, admission::barging, vs Boost fibers::mutex)"});
      rows.push_back({"  faa F=" + std::to_string(f) + ", 2w", "iter/s", tf, b, false,
                      " (tessera::counting_semaphore, admission::faa, vs Boost fibers::mutex)"});
      rows.push_back(
          {"  faa_restricted F=" + std::to_string(f) + ", 2w", "iter/s", tfr, b, false,
           " (tessera::counting_semaphore, admission::faa_restricted, vs Boost fibers::mutex)"});
      rows.push_back({"  mutex F=" + std::to_string(f) + ", 2w", "iter/s", tm, b, false,
                      " (tessera::mutex vs Boost fibers::mutex)"});
    }
    // Two fibers contending while a third only yields: what a yielding
    // fiber costs the lock's hand-offs.
    bar.step("semabench F=2 and a yielder");
    const auto [ty, by] = interleaved_medians(
        runs,
        [&] { return tessera_semabench<tessera_mutex_lock>(rt, 2, seconds, nullptr, true); },
        [&] { return boost_semabench(2, seconds, nullptr, true); });
    rows.push_back({"  mutex F=2 + a yielder, 2w", "iter/s", ty, by, false,
                    " (a third fiber yields in a loop; tessera::mutex vs Boost fibers::mutex)"});
  }
  if (want("latency")) {
    // Fairness: how long the longest acquisitions of the fiber mutexes wait.
    // Separate runs from the throughput figures (timing costs two clock reads
    // per 16 iterations). p99.9: median over runs; max: over all runs.
    tessera::runtime rt({.workers = 2});
    for (int f : fiber_counts) {
      bar.step(fmt("mutex latency F=%d", f));
      std::vector<double> tp, bp;
      double tmax = 0, bmax = 0;
      for (int r = 0; r < runs; ++r) {
        std::vector<std::uint32_t> tw, bw;
        (void)tessera_semabench<tessera_mutex_lock>(rt, f, seconds, &tw);
        (void)boost_semabench(f, seconds, &bw);
        const auto t = tessera::samples::tail_of(tw), b = tessera::samples::tail_of(bw);
        tp.push_back(t.p999_us);
        bp.push_back(b.p999_us);
        tmax = std::max(tmax, t.max_us);
        bmax = std::max(bmax, b.max_us);
      }
      std::sort(tp.begin(), tp.end());
      std::sort(bp.begin(), bp.end());
      const std::string fs = std::to_string(f);
      rows.push_back({"  mutex F=" + fs + " p99.9 wait", "us", tp[tp.size() / 2], bp[bp.size() / 2],
                      true, " (every 16th lock() timed; median of runs)"});
      rows.push_back({"  mutex F=" + fs + " max wait", "us", tmax, bmax, true,
                      " (longest timed lock() over all runs)"});
    }
  }
  if (want("channel")) {
    tessera::runtime rt({.workers = 2});
    const int items = rounds;
    for (int pairs : {1, 4}) {
      for (int cap : {0, 64}) {
        bar.step(fmt("channel capacity %d, %d+%d fibers", cap, pairs, pairs));
        const auto [t, b] = interleaved_medians(
            runs,
            [&] {
              return rt.run([&] {
                tessera::channel<int> ch(static_cast<std::size_t>(cap));
                return channel_transfer<tessera::fiber>(ch, pairs, items);
              });
            },
            [&] {
              return boost_pool::get().run([&] {
                if (cap == 0) {
                  bf::unbuffered_channel<int> ch;
                  return channel_transfer<bf::fiber>(ch, pairs, items);
                }
                bf::buffered_channel<int> ch(static_cast<std::size_t>(cap));
                return channel_transfer<bf::fiber>(ch, pairs, items);
              });
            });
        rows.push_back({"channel cap " + std::to_string(cap) + ", " + std::to_string(pairs) + "+" +
                            std::to_string(pairs) + ", 2w",
                        "ns/item", t, b, true,
                        cap == 0 ? " (Boost: unbuffered_channel)" : " (Boost: buffered_channel)"});
      }
    }
  }
  if (want("memory")) {
    bar.step(fmt("memory: %ld parked fibers", parked));
    try {
      tessera::runtime rt({.workers = 2});
      const long before = rss_kib();
      long during = 0;
      rt.run([&] {
        tessera::counting_semaphore<> gate(0);
        tessera::latch left(parked);  // the gate must outlive every acquire() in it
        for (long i = 0; i < parked; ++i) {
          tessera::spawn([&gate, &left] {
            gate.acquire();
            left.count_down();
          });
        }
        while (gate.waiting() < parked)
          tessera::this_fiber::sleep_for(std::chrono::milliseconds(1));
        during = rss_kib();
        gate.release(parked);
        left.wait();
      });
      const double per = (during - before) * 1024.0 / static_cast<double>(parked);
      std::ostringstream note;
      note << " (" << parked << " parked: RSS +" << (during - before) / 1024 << " MiB, "
           << rt.config().stack_size / 1024 << " KiB stacks + guard region)";
      rows.push_back({"memory per parked fiber", "bytes", per, 0, true, note.str()});
    } catch (const std::exception& e) {
      std::printf("memory: %s\n", e.what());
    }
  }

  bar.done();
  print_rows(rows);
  if (!csv.empty()) {
    tessera::bench::csv_writer out(csv, {"benchmark", "unit", "tessera", "boost_fiber"});
    for (const auto& r : rows) out.row(r.bench, r.unit, r.tessera, r.boost);
    std::printf("wrote %s\n", csv.c_str());
  }
  return 0;
}

// chanbench — channels side by side. P producers and P consumers pass the
// ints 0..N-1 through one channel until it is closed; nanoseconds per item,
// the median of R runs, the contenders interleaved in each run:
//
//   lockfree   tessera::lockfree_channel<int> (no lock on any path)
//   spin       tessera::channel<int> (every operation under one spin lock)
//   boost      Boost.Fiber's buffered_channel (capacity 64) or
//              unbuffered_channel (capacity 0)
//   go         Go's chan, goroutines with GOMAXPROCS=2 (bench/peers/chan;
//              the same program for the threads and the fibers rows)
//
// as OS threads (P = 1..16 on this machine's cores) and as fibers on two
// workers (Boost.Fiber: a work_stealing pool of two threads). The select
// rows: the producers send round-robin over K channels, and each consumer
// receives with one select over all K until every channel is closed (over
// lock-free channels, over spin-lock channels, and Go's select).
#include <tessera/tessera.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "boost_pool.h"
#include "harness.h"

namespace {

using steady = std::chrono::steady_clock;
namespace bf = boost::fibers;
using tessera::bench::boost_pool;
using tessera::bench::interleaved_medians;

// ---- one way to send, receive and close on each kind of channel -------------
template <class Ch>
void send(Ch& ch, int v) {
  if constexpr (requires { ch.push(v); }) {
    (void)ch.push(v);
  } else {
    (void)ch.send(v);
  }
}
template <class Ch>
bool receive(Ch& ch, int& v) {
  if constexpr (requires { ch.pop(v); }) {
    return ch.pop(v) == bf::channel_op_status::success;
  } else {
    const auto got = ch.receive();
    if (got) v = *got;
    return got.has_value();
  }
}

void check_sum(long sum, int items) {
  if (sum != static_cast<long>(items) * (items - 1) / 2) {
    std::fprintf(stderr, "chanbench: items lost or duplicated (sum %ld)\n", sum);
    std::exit(1);
  }
}

/// `pairs` producers (`produce(p)`) and `pairs` consumers (`consume()`, which
/// returns the sum of what it received) of kind `Worker` (std::thread,
/// tessera::fiber or bf::fiber), passing 0..items-1: ns per item. Exits if an
/// item was lost or duplicated.
template <class Worker, class Produce, class Consume>
double run_pairs(int pairs, int items, Produce produce, Consume consume) {
  std::atomic<long> sum{0};
  const auto t0 = steady::now();
  {
    std::vector<Worker> ws;
    for (int p = 0; p < pairs; ++p) {
      ws.emplace_back([&, p] { produce(p); });
      ws.emplace_back([&] { sum.fetch_add(consume()); });
    }
    for (auto& w : ws) w.join();
  }
  const double ns = std::chrono::duration<double, std::nano>(steady::now() - t0).count() / items;
  check_sum(sum.load(), items);
  return ns;
}

/// Through one channel until the last producer closes it.
template <class Worker, class Ch>
double transfer(Ch& ch, int pairs, int items) {
  std::atomic<int> producers_left{pairs};
  return run_pairs<Worker>(
      pairs, items,
      [&](int p) {
        for (int i = p; i < items; i += pairs) send(ch, i);
        if (producers_left.fetch_sub(1) == 1) ch.close();
      },
      [&] {
        long s = 0;
        for (int v; receive(ch, v);) s += v;
        return s;
      });
}

/// The same over K channels (`Chan`: either of Tessera's): producers send
/// round-robin, consumers select.
template <class Worker, class Chan>
double select_transfer(int pairs, int k, std::size_t capacity, int items) {
  std::vector<std::unique_ptr<Chan>> chs;
  for (int i = 0; i < k; ++i) chs.push_back(std::make_unique<Chan>(capacity));
  std::atomic<int> producers_left{pairs};
  return run_pairs<Worker>(
      pairs, items,
      [&](int p) {
        for (int i = p; i < items; i += pairs) (void)chs[i % k]->send(i);
        if (producers_left.fetch_sub(1) == 1) {
          for (auto& c : chs) c->close();
        }
      },
      [&] {
        long s = 0;
        int v = 0;
        std::vector<tessera::select_case> cases;
        for (auto& c : chs) cases.push_back(tessera::recv_case(*c, v));
        for (std::size_t open = cases.size(); open > 0;) {
          const auto r = tessera::select(cases);
          if (r.status == tessera::channel_status::success) {
            s += v;
          } else {  // closed: leave that case out from now on (Go: a nil channel)
            cases[r.index].disable();
            --open;
          }
        }
        return s;
      });
}

/// One row: the four contenders, interleaved. `run_ours(fn)` and
/// `run_theirs(fn)` run fn where Tessera's and Boost.Fiber's workers live (the
/// calling thread, a runtime, Boost's pool); `Ours` and `Theirs` are the
/// workers' types; `go()` runs the Go peer.
template <class Ours, class Theirs, class RunOurs, class RunTheirs, class Go>
std::array<double, 4> contest(int runs, std::size_t cap, int pairs, int items, RunOurs run_ours,
                              RunTheirs run_theirs, Go go) {
  return interleaved_medians(
      runs,
      [&] {
        return run_ours([&] {
          tessera::lockfree_channel<int> ch(cap);
          return transfer<Ours>(ch, pairs, items);
        });
      },
      [&] {
        return run_ours([&] {
          tessera::channel<int> ch(cap);
          return transfer<Ours>(ch, pairs, items);
        });
      },
      [&] {
        return run_theirs([&] {
          if (cap == 0) {
            bf::unbuffered_channel<int> ch;
            return transfer<Theirs>(ch, pairs, items);
          }
          bf::buffered_channel<int> ch(cap);
          return transfer<Theirs>(ch, pairs, items);
        });
      },
      go);
}

/// Runs the Go peer once; its ns per item.
double run_go(const std::string& go, int pairs, std::size_t capacity, int items, int select_k) {
  const std::string cmd = "GOMAXPROCS=2 '" + go + "' -p " + std::to_string(pairs) + " -cap " +
                          std::to_string(capacity) + " -items " + std::to_string(items) +
                          (select_k != 0 ? " -select " + std::to_string(select_k) : "");
  std::FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) throw std::runtime_error("chanbench: cannot run " + cmd);
  double ns = 0;
  const int got = std::fscanf(f, "%lf", &ns);
  if (pclose(f) != 0 || got != 1) throw std::runtime_error("chanbench: '" + cmd + "' failed");
  return ns;
}

struct row {
  std::string name, group;
  std::size_t capacity;
  int pairs;
  double lockfree, spin, boost, go;
};

std::string g4(double v) {
  if (v <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}
std::string ratio(double theirs, double ours) {
  return theirs > 0 && ours > 0 ? tessera::bench::fixed(theirs / ours) + "x" : "-";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("chanbench: channels with P producers and P consumers, beside Boost.Fiber and Go");
  bool quick = false;
  int runs = 0, items = 0;
  std::string go, csv;
  app.add_flag("--quick", quick, "fewer runs and items (CI-sized)");
  app.add_option("--runs", runs, "runs per figure (median); default 5, --quick 3");
  app.add_option("--items", items, "items per run; default 200000, --quick 40000");
  app.add_option("--go", go, "the Go peer (built from bench/peers/chan); without it, no Go column");
  app.add_option("--csv", csv, "also write the table as CSV here");
  std::vector<std::string> only;
  app.add_option("--only", only, "run only these groups: threads, fibers, select")
      ->check(CLI::IsMember({"threads", "fibers", "select"}));
  CLI11_PARSE(app, argc, argv);
  if (runs <= 0) runs = quick ? 3 : 5;
  if (items <= 0) items = quick ? 40000 : 200000;

  auto want = [&](const char* group) {
    return only.empty() || std::find(only.begin(), only.end(), group) != only.end();
  };
  std::vector<row> rows;
  const std::vector<int> thread_pairs{1, 2, 4, 8, 16};
  const std::vector<int> fiber_pairs{1, 4, 16};
  tessera::bench::progress bar(2 * (thread_pairs.size() + fiber_pairs.size()) + 4);
  tessera::runtime rt({.workers = 2});
  auto go_or_0 = [&](int pairs, std::size_t cap, int k) {
    return go.empty() ? 0.0 : run_go(go, pairs, cap, items, k);
  };

  for (std::size_t cap : {std::size_t{0}, std::size_t{64}}) {
    for (int pairs : thread_pairs) {
      if (!want("threads")) break;
      bar.step("threads, capacity " + std::to_string(cap) + ", P=" + std::to_string(pairs));
      const auto direct = [](auto&& fn) { return fn(); };
      const auto [lf, sp, bo, g] = contest<std::thread, std::thread>(
          runs, cap, pairs, items, direct, direct, [&] { return go_or_0(pairs, cap, 0); });
      rows.push_back({"threads cap " + std::to_string(cap) + ", P=" + std::to_string(pairs),
                      "threads", cap, pairs, lf, sp, bo, g});
    }
    for (int pairs : fiber_pairs) {
      if (!want("fibers")) break;
      bar.step("fibers, capacity " + std::to_string(cap) + ", P=" + std::to_string(pairs));
      const auto [lf, sp, bo, g] = contest<tessera::fiber, bf::fiber>(
          runs, cap, pairs, items, [&](auto&& fn) { return rt.run(fn); },
          [](auto&& fn) { return boost_pool::get().run(fn); },
          [&] { return go_or_0(pairs, cap, 0); });
      rows.push_back({"fibers 2w cap " + std::to_string(cap) + ", P=" + std::to_string(pairs),
                      "fibers", cap, pairs, lf, sp, bo, g});
    }
  }
  for (int k : {2, 8}) {
    if (!want("select")) break;
    for (std::size_t cap : {std::size_t{0}, std::size_t{64}}) {
      bar.step("select over " + std::to_string(k) + ", capacity " + std::to_string(cap));
      const auto [lf, sp, g] = interleaved_medians(
          runs,
          [&] {
            return rt.run([&] {
              return select_transfer<tessera::fiber, tessera::lockfree_channel<int>>(4, k, cap,
                                                                                      items);
            });
          },
          [&] {
            return rt.run([&] {
              return select_transfer<tessera::fiber, tessera::channel<int>>(4, k, cap, items);
            });
          },
          [&] { return go_or_0(4, cap, k); });
      rows.push_back(
          {"select " + std::to_string(k) + " chans, fibers 2w cap " + std::to_string(cap) + ", P=4",
           "select" + std::to_string(k), cap, 4, lf, sp, 0, g});
    }
  }
  bar.done();

  tessera::bench::table t({"ns per item", "lockfree", "spin", "Boost.Fiber", "Go", "spin/lockfree",
                           "Go/lockfree", "Go/spin"});
  for (const auto& r : rows) {
    t.add({r.name, g4(r.lockfree), g4(r.spin), g4(r.boost), g4(r.go), ratio(r.spin, r.lockfree),
           ratio(r.go, r.lockfree), ratio(r.go, r.spin)});
  }
  std::printf(
      "chanbench: %d items, median of %d runs; a ratio above 1: the denominator is faster\n%s\n",
      items, runs, tessera::bench::machine().c_str());
  t.print();
  if (!csv.empty()) {
    tessera::bench::csv_writer out(
        csv, {"group", "capacity", "pairs", "lockfree_ns", "spin_ns", "boost_ns", "go_ns"});
    for (const auto& r : rows)
      out.row(r.group, r.capacity, r.pairs, r.lockfree, r.spin, r.boost, r.go);
  }
  return 0;
}

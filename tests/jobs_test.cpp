// The job system (tessera/jobs.h) in every execution environment: called from
// a plain thread on a started runtime, from fibers on 1, 2 and 4 workers, and
// from a thread and a fiber at once (mixed).
#include <tessera/jobs.h>
#include <tessera/event.h>
#include <tessera/runtime.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <list>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera {
namespace {

using test::exec_kind;

/// Calls body(rt) as the environment says: on the test thread with a started
/// runtime (threads), inside run() (fibers), or both at once (mixed).
void in_env(exec_kind kind, const std::function<void(runtime&)>& body) {
  switch (kind) {
    case exec_kind::threads: {
      runtime rt({.workers = 2});
      rt.start();
      body(rt);
      rt.stop();
      return;
    }
    case exec_kind::mixed: {
      runtime rt({.workers = 2});
      rt.start();
      auto f = rt.submit([&] { body(rt); });
      body(rt);
      f.get();
      rt.stop();
      return;
    }
    default: {
      const unsigned w = kind == exec_kind::fibers_1w ? 1 : kind == exec_kind::fibers_4w ? 4 : 2;
      runtime rt({.workers = w});
      rt.run([&] { body(rt); });
      return;
    }
  }
}

class Jobs : public ::testing::TestWithParam<exec_kind> {};

TEST_P(Jobs, TaskGroupRunsEveryJobOnce) {
  in_env(GetParam(), [](runtime& rt) {
    constexpr int kJobs = 2000;
    std::vector<std::atomic<int>> hits(kJobs);
    task_group g(rt);
    for (int i = 0; i < kJobs; ++i) g.run([&hits, i] { hits[i].fetch_add(1); });
    EXPECT_EQ(g.wait(), task_group_status::complete);
    for (int i = 0; i < kJobs; ++i) ASSERT_EQ(hits[i].load(), 1) << "job " << i;
  });
}

TEST_P(Jobs, TaskGroupRethrowsTheFirstExceptionOnceAndIsReusable) {
  in_env(GetParam(), [](runtime& rt) {
    task_group g(rt);
    std::atomic<int> ran{0};
    for (int i = 0; i < 50; ++i) {
      g.run([&ran, i] {
        ran.fetch_add(1);
        if (i == 7) throw std::runtime_error("job 7 failed");
      });
    }
    EXPECT_THROW(
        {
          try {
            g.wait();
          } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "job 7 failed");
            throw;
          }
        },
        std::runtime_error);
    EXPECT_GE(ran.load(), 1);
    // Reset after the wait: the group runs new jobs and reports no old error.
    std::atomic<int> again{0};
    for (int i = 0; i < 10; ++i) g.run([&again] { again.fetch_add(1); });
    EXPECT_EQ(g.wait(), task_group_status::complete);
    EXPECT_EQ(again.load(), 10);
  });
}

TEST_P(Jobs, CancelStopsUnstartedJobs) {
  in_env(GetParam(), [](runtime& rt) {
    task_group g(rt);
    manual_reset_event gate;
    std::atomic<int> started{0};
    // The first job holds a worker until the group is cancelled. Of the jobs
    // queued before cancel(), the workers may start any number meanwhile (a
    // descheduled caller lets them drain all 250); none may start after it,
    // and none of the 250 queued after it may start at all.
    g.run([&] {
      started.fetch_add(1);
      gate.wait();
    });
    std::stop_token tok = g.get_stop_token();
    for (int i = 0; i < 250; ++i) g.run([&started] { started.fetch_add(1); });
    const int before = started.load();
    g.cancel();
    EXPECT_TRUE(g.is_canceling());
    EXPECT_TRUE(tok.stop_requested());
    const int at_cancel = started.load();
    for (int i = 0; i < 250; ++i) g.run([&started] { started.fetch_add(1000); });
    gate.set();
    EXPECT_EQ(g.wait(), task_group_status::canceled);
    // A job that a worker had taken and found uncancelled just before cancel()
    // counts itself only once its body runs, possibly after at_cancel was
    // read: at most one such job per worker.
    EXPECT_LE(started.load(), at_cancel + static_cast<int>(rt.workers()))
        << "a job started after cancel()";
    EXPECT_GE(at_cancel, before);
    EXPECT_LE(started.load(), 251) << "a job queued after cancel() ran";
    EXPECT_FALSE(g.is_canceling()) << "wait() resets the group";
  });
}

TEST_P(Jobs, ParallelForCoversTheRangeExactlyOnce) {
  in_env(GetParam(), [](runtime& rt) {
    for (std::size_t grain : {std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
      constexpr int kN = 100'003;
      std::vector<std::uint8_t> hit(kN, 0);
      parallel_for(rt, 0, kN, [&hit](int i) { ++hit[i]; }, grain);
      ASSERT_EQ(std::count(hit.begin(), hit.end(), 1), kN) << "grain " << grain;
    }
    // Ranges: every piece at least the grain (except a short remainder).
    std::atomic<std::size_t> pieces{0}, covered{0};
    parallel_for(rt, blocked_range<long>(10, 5010, 100), [&](const blocked_range<long>& r) {
      EXPECT_GE(r.size(), 50U);
      pieces.fetch_add(1);
      covered.fetch_add(r.size());
    });
    EXPECT_EQ(covered.load(), 5000U);
    EXPECT_LE(pieces.load(), 50U);
    parallel_for(rt, 5, 5, [](int) { ADD_FAILURE() << "empty range ran"; });
  });
}

TEST_P(Jobs, ParallelForEachVisitsEveryElement) {
  in_env(GetParam(), [](runtime& rt) {
    std::vector<int> v(10'000, 1);
    parallel_for_each(rt, v.begin(), v.end(), [](int& x) { x *= 3; });
    EXPECT_EQ(std::accumulate(v.begin(), v.end(), 0), 30'000);
    std::list<int> l(1000, 2);  // not random access: collected first
    parallel_for_each(rt, l.begin(), l.end(), [](int& x) { x += 1; });
    EXPECT_EQ(std::accumulate(l.begin(), l.end(), 0), 3000);
  });
}

TEST_P(Jobs, ParallelReduceIsDeterministic) {
  in_env(GetParam(), [](runtime& rt) {
    std::vector<double> x(200'000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0 / static_cast<double>(i + 1);
    auto sum = [&] {
      return parallel_reduce(
          rt, blocked_range<std::size_t>(0, x.size(), 64), 0.0,
          [&x](const blocked_range<std::size_t>& r, double acc) {
            for (std::size_t i = r.begin(); i != r.end(); ++i) acc += x[i];
            return acc;
          },
          [](double a, double b) { return a + b; });
    };
    const double first = sum();
    EXPECT_NEAR(first, 12.783, 0.01);
    for (int i = 0; i < 20; ++i) ASSERT_EQ(sum(), first) << "run " << i;  // bit-identical
  });
}

TEST(JobsDeterminism, ReduceIsBitIdenticalAcrossWorkerCounts) {
  std::vector<double> x(100'000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i)) * 1e-3;
  auto sum_on = [&](unsigned workers) {
    runtime rt({.workers = workers});
    return rt.run([&] {
      return parallel_reduce(
          blocked_range<std::size_t>(0, x.size()), 0.0,
          [&x](const blocked_range<std::size_t>& r, double acc) {
            for (std::size_t i = r.begin(); i != r.end(); ++i) acc += x[i];
            return acc;
          },
          [](double a, double b) { return a + b; });
    });
  };
  const double one = sum_on(1);
  EXPECT_EQ(sum_on(2), one);
  EXPECT_EQ(sum_on(4), one);
}

TEST_P(Jobs, ExceptionsPropagateFromNestedParallelFor) {
  in_env(GetParam(), [](runtime& rt) {
    std::atomic<int> after{0};
    EXPECT_THROW(parallel_for(rt, 0, 64,
                              [&](int i) {
                                parallel_for(0, 64, [&](int j) {
                                  if (i == 33 && j == 17) throw std::out_of_range("inner 33/17");
                                  after.fetch_add(1);
                                });
                              }),
                 std::out_of_range);
    EXPECT_LT(after.load(), 64 * 64);
  });
}

TEST_P(Jobs, ParallelInvokeRunsAll) {
  in_env(GetParam(), [](runtime& rt) {
    task_group outer(rt);
    std::atomic<int> mask{0};
    // parallel_invoke needs a fiber: run it as a job.
    outer.run([&] {
      parallel_invoke([&] { mask.fetch_or(1); }, [&] { mask.fetch_or(2); },
                      [&] { mask.fetch_or(4); });
    });
    outer.wait();
    EXPECT_EQ(mask.load(), 7);
  });
}

TEST_P(Jobs, JobsWaitMidwayOnACounterWithoutHoldingTheWorker) {
  // Naughty Dog's pattern: half the jobs wait on a counter that only the other
  // half brings to zero. With one worker this deadlocks unless a waiting job
  // parks only itself.
  in_env(GetParam(), [](runtime& rt) {
    constexpr int kPairs = 200;
    wait_group counter;
    counter.add(kPairs);
    std::atomic<int> waited{0};
    task_group g(rt);
    for (int i = 0; i < kPairs; ++i) {
      g.run([&] {
        counter.wait();
        waited.fetch_add(1);
      });
    }
    for (int i = 0; i < kPairs; ++i) g.run([&] { counter.done(); });
    g.wait();
    EXPECT_EQ(waited.load(), kPairs);
  });
}

std::uint64_t frame_checksum(runtime& rt, task_graph& g, std::vector<std::uint64_t>& out) {
  g.run(rt);
  std::uint64_t h = 1469598103934665603ULL;
  for (std::uint64_t v : out) h = (h ^ v) * 1099511628211ULL;
  return h;
}

TEST_P(Jobs, TaskGraphRerunsWithTheSameChecksum) {
  in_env(GetParam(), [](runtime& rt) {
    // A diamond-rich graph of 20 nodes; each node folds its predecessors'
    // values, so any ordering error changes the checksum.
    constexpr int kNodes = 20;
    std::vector<std::uint64_t> value(kNodes);
    std::vector<std::vector<int>> preds(kNodes);
    task_graph g;
    std::vector<task_graph::node> nodes;
    std::uint64_t frame = 0;
    for (int i = 0; i < kNodes; ++i) {
      nodes.push_back(g.emplace([&, i] {
        std::uint64_t v = frame * 31 + static_cast<std::uint64_t>(i);
        for (int p : preds[i]) v = v * 1000003 ^ value[p];
        value[i] = v;
      }));
    }
    for (int i = 0; i < kNodes; ++i) {
      for (int p = std::max(0, i - 3); p < i; ++p) {
        if ((i + p) % 2 == 0 || p == i - 1) {
          nodes[p].precede(nodes[i]);
          preds[i].push_back(p);
        }
      }
    }
    std::vector<std::uint64_t> sums;
    for (int run = 0; run < 2; ++run) {
      for (frame = 0; frame < 500; ++frame) {
        const std::uint64_t c = frame_checksum(rt, g, value);
        if (run == 0) {
          sums.push_back(c);
        } else {
          ASSERT_EQ(c, sums[frame]) << "frame " << frame;
        }
      }
    }
  });
}

TEST(TaskGraph, CyclesAndMisuseAreReported) {
  runtime rt({.workers = 2});
  rt.start();
  task_graph g;
  auto a = g.emplace([] {});
  auto b = g.emplace([] {});
  auto c = g.emplace([] {});
  a.precede(b);
  b.precede(c);
  c.precede(a);
  EXPECT_THROW(
      {
        try {
          g.run(rt);
        } catch (const std::logic_error& e) {
          EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
          throw;
        }
      },
      std::logic_error);
  EXPECT_THROW(a.precede(a), std::logic_error);
  task_graph h;
  manual_reset_event gate;
  h.emplace([&] { gate.wait(); });
  h.run_async(rt);
  EXPECT_THROW(h.run_async(rt), std::logic_error);
  EXPECT_THROW(h.emplace([] {}), std::logic_error);
  gate.set();
  h.wait();
  h.run(rt);  // reusable after the run
  rt.stop();
}

TEST(TaskGraph, ANodeExceptionSkipsTheRestAndIsRethrown) {
  runtime rt({.workers = 2});
  rt.start();
  task_graph g;
  std::atomic<int> ran{0};
  auto a = g.emplace([&] { ran.fetch_add(1); });
  auto b = g.emplace([&] { throw std::runtime_error("b"); });
  auto c = g.emplace([&] { ran.fetch_add(1); });
  a.precede(b);
  b.precede(c);
  EXPECT_THROW(g.run(rt), std::runtime_error);
  EXPECT_EQ(ran.load(), 1) << "c ran although its predecessor failed";
  ran = 0;
  EXPECT_THROW(g.run(rt), std::runtime_error);  // the same on a rerun
  rt.stop();
}

TEST(JobsPriority, AHighJobOvertakesAFloodOfLowJobs) {
  // One worker, 5,000 queued low jobs of ~20 µs: a high job submitted after
  // them must run after at most one low job per worker plus the one pick in
  // 16 that may go to a lower class (tessera/jobs.h) — not after the flood.
  runtime rt({.workers = 1});
  rt.start();
  task_group low(rt, priority::low), high(rt, priority::high);
  std::atomic<int> low_done{0};
  std::atomic<int> low_done_at_high{-1};
  auto spin = [] { test::spin_for(std::chrono::microseconds(20)); };
  // Queue from a job so that everything goes on the one worker's queue.
  task_group setup(rt);
  setup.run([&] {
    for (int i = 0; i < 5000; ++i) low.run([&] {
        spin();
        low_done.fetch_add(1);
      });
    high.run([&] { low_done_at_high = low_done.load(); });
  });
  setup.wait();
  high.wait();
  low.wait();
  EXPECT_GE(low_done_at_high.load(), 0);
  EXPECT_LE(low_done_at_high.load(), 2) << "the high job waited behind the low flood";
  rt.stop();
}

TEST(JobsPriority, LowJobsAreNotStarvedByAHighFlood) {
  runtime rt({.workers = 1});
  rt.start();
  task_group low(rt, priority::low), high(rt, priority::high);
  std::atomic<int> high_done{0};
  std::atomic<int> high_done_at_low{-1};
  task_group setup(rt);
  setup.run([&] {
    low.run([&] { high_done_at_low = high_done.load(); });
    for (int i = 0; i < 5000; ++i) high.run([&] { high_done.fetch_add(1); });
  });
  setup.wait();
  high.wait();
  low.wait();
  EXPECT_GE(high_done_at_low.load(), 0);
  EXPECT_LE(high_done_at_low.load(), 16) << "a low job waited more than 16 picks";
  rt.stop();
}

TEST(PinnedQueue, JobsRunOnlyOnTheOwnerThread) {
  pinned_queue main_thread;
  runtime rt({.workers = 2});
  rt.start();
  const auto me = std::this_thread::get_id();
  std::atomic<int> ran_here{0}, ran_elsewhere{0};
  task_group g(rt);
  for (int i = 0; i < 100; ++i) {
    g.run([&] {
      main_thread.post([&] {
        (std::this_thread::get_id() == me ? ran_here : ran_elsewhere).fetch_add(1);
      });
    });
  }
  // A worker may not drain it.
  std::atomic<bool> refused{false};
  g.run([&] {
    try {
      main_thread.run_pending();
    } catch (const std::logic_error&) {
      refused = true;
    }
  });
  g.wait();
  EXPECT_TRUE(refused.load());
  std::size_t total = 0;
  while (total < 100) {
    ASSERT_TRUE(main_thread.wait_pending_for(std::chrono::seconds(10)) || total == 100);
    total += main_thread.run_pending();
  }
  EXPECT_EQ(ran_here.load(), 100);
  EXPECT_EQ(ran_elsewhere.load(), 0);
  EXPECT_FALSE(main_thread.wait_pending_for(std::chrono::milliseconds(5)));
  rt.stop();
}

TEST(PinnedQueue, AnExceptionLosesNoOtherJob) {
  pinned_queue q;
  int ran = 0;
  q.post([&] { ++ran; });
  q.post([] { throw std::runtime_error("second"); });
  q.post([&] { ++ran; });
  EXPECT_THROW(q.run_pending(), std::runtime_error);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(q.size(), 1U);
  EXPECT_EQ(q.run_pending(), 1U);
  EXPECT_EQ(ran, 2);
}

int fib(int n) {
  if (n < 2) return n;
  int a = 0, b = 0;
  task_group g;
  g.run([&] { a = fib(n - 1); });
  b = fib(n - 2);
  g.wait();
  return a + b;
}

TEST_P(Jobs, ForkJoinFib) {
  in_env(GetParam(), [](runtime& rt) {
    task_group g(rt);
    int r = 0;
    g.run([&] { r = fib(20); });
    g.wait();
    EXPECT_EQ(r, 6765);
  });
}

int nest(int depth) {
  if (depth == 0) return 0;
  int r = 0;
  task_group g;
  g.run([&] { r = nest(depth - 1) + 1; });
  g.wait();
  return r;
}

TEST(JobsDepth, TenThousandNestedTaskGroupsDoNotOverflow) {
  // Helping nests jobs on the waiter's stack only while 64 KiB are left; past
  // that the waiter parks and the chain continues on other runners' stacks.
  runtime rt({.workers = 2, .stack_size = 128 * 1024});
  EXPECT_EQ(rt.run([] { return nest(10'000); }), 10'000);
}

TEST(Jobs, NoRuntimeIsAClearError) {
  try {
    task_group g;
    ADD_FAILURE() << "no exception";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a worker"), std::string::npos) << e.what();
  }
  runtime rt({.workers = 1});
  task_group g(rt);  // not running
  EXPECT_THROW(g.run([] {}), std::logic_error);
  EXPECT_EQ(g.wait(), task_group_status::complete);
}

TEST(Jobs, RunWaitsForQueuedJobs) {
  // Jobs count as work of the runtime: run() returns only after they end.
  std::atomic<int> ran{0};
  runtime rt({.workers = 2});
  rt.run([&] {
    auto* g = new task_group;  // deliberately not waited on here
    for (int i = 0; i < 1000; ++i) g->run([&ran] { ran.fetch_add(1); });
    spawn([g] {
      g->wait();
      delete g;
    });
  });
  EXPECT_EQ(ran.load(), 1000);
}

INSTANTIATE_TEST_SUITE_P(Env, Jobs, ::testing::ValuesIn(test::all_exec_kinds()),
                         [](const auto& p) { return test::to_string(p.param); });

}  // namespace
}  // namespace tessera

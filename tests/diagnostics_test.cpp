// Diagnostics: what each waiter waits on (wait_scope, written on the slow
// paths only) and runtime::dump, which lists a runtime's fibers with it.
#include <poll.h>
#include <signal.h>
#include <tessera/channel.h>
#include <tessera/condition_variable.h>
#include <tessera/io.h>
#include <tessera/jobs.h>
#include <tessera/latch.h>
#include <tessera/mutex.h>
#include <tessera/net.h>
#include <tessera/park.h>
#include <tessera/runtime.h>
#include <tessera/shared_mutex.h>
#include <tessera/testing/simulation.h>
#include <tessera/wait_group.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace tessera::test {
namespace {

std::string dump_of(const runtime& rt) {
  std::ostringstream os;
  rt.dump(os);
  return os.str();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(WaitScope, RecordsTheWaitWhileItLivesAndTheOutermostWins) {
  int a = 0, b = 0;
  waiter* me = self();
  EXPECT_EQ(me->wait.kind.load(), nullptr);
  {
    const wait_scope outer("latch", &a);
    EXPECT_STREQ(me->wait.kind.load(), "latch");
    EXPECT_EQ(me->wait.object.load(), &a);
    EXPECT_EQ(me->wait.since.load(), 0) << "stamped before anyone looked";
    const std::int64_t first = me->wait.seen_since();
    EXPECT_NE(first, 0) << "the first look stamps the wait";
    EXPECT_EQ(me->wait.seen_since(), first) << "a later look keeps the first stamp";
    {
      const wait_scope inner("counting_semaphore", &b);  // the latch's own gate, say
      EXPECT_STREQ(me->wait.kind.load(), "latch");
      EXPECT_EQ(me->wait.object.load(), &a);
    }
    EXPECT_STREQ(me->wait.kind.load(), "latch");
  }
  EXPECT_EQ(me->wait.kind.load(), nullptr);
}

TEST(WaitScope, AnUncontendedLockRecordsNothing) {
  mutex m;
  waiter* me = self();
  const auto since = me->wait.since.load();
  for (int i = 0; i < 1000; ++i) {
    std::lock_guard lock(m);
    EXPECT_EQ(me->wait.kind.load(), nullptr);
  }
  EXPECT_EQ(me->wait.since.load(), since) << "the fast path wrote a wait record";
}

// Fibers parked on each kind of primitive show in the dump with what they
// wait for; once released, they are gone from it.
TEST(Dump, ListsEachParkedFiberWithWhatItWaitsFor) {
  watchdog dog("Dump.ListsEachParkedFiberWithWhatItWaitsFor", 60s);
  runtime rt({.workers = 2});
  rt.start();
  latch gate(1);
  mutex m;
  m.lock();  // held by this thread: the locking fiber parks
  channel<int> ch(0);
  condition_variable cv;
  mutex cv_mu;
  bool cv_ready = false;
  auto listener = net::tcp_listener::listen("127.0.0.1:0");
  const int listen_fd = listener.descriptor().native_handle();
  std::atomic<int> finished{0};
  // One call site for both: the dump groups fibers by where they were
  // created, and a compiler may unroll a loop of two spawns into two sites
  // (a count it cannot see stops it).
  volatile int two = 2;
  for (int i = 0; i < two; ++i) {
    rt.spawn([&] {
      gate.wait();
      finished.fetch_add(1);
    });
  }
  rt.spawn([&] {
    std::lock_guard lock(m);
    finished.fetch_add(1);
  });
  rt.spawn([&] {
    EXPECT_EQ(ch.receive(), 7);
    finished.fetch_add(1);
  });
  rt.spawn([&] {
    std::unique_lock lock(cv_mu);
    cv.wait(lock, [&] { return cv_ready; });
    finished.fetch_add(1);
  });
  rt.spawn([&] {
    this_fiber::sleep_for(200ms);
    finished.fetch_add(1);
  });
  rt.spawn([&] {
    std::error_code ec;
    auto s = listener.accept(ec);  // woken by close() below
    EXPECT_TRUE(ec);
    finished.fetch_add(1);
  });
  auto joiner = rt.submit([&] {
    fiber child([&] { gate.wait(); });
    child.join();
    finished.fetch_add(1);
  });

  std::string text;
  // Both latch fibers parked, not only the first: the dump groups them.
  const std::vector<std::string> expected = {"2 fibers [latch ",
                                             "mutex ",
                                             "channel receive ",
                                             "condition_variable ",
                                             "sleep",
                                             "join of fiber",
                                             "socket read fd " + std::to_string(listen_fd)};
  const bool all_seen = eventually([&] {
    text = dump_of(rt);
    for (const auto& e : expected)
      if (!has(text, e)) return false;
    return true;
  });
  EXPECT_TRUE(all_seen) << text;
  EXPECT_TRUE(has(text, "tessera: runtime dump: 2 workers")) << text;
  EXPECT_TRUE(has(text, "worker 0 [")) << text;
  EXPECT_TRUE(has(text, "2 fibers [latch ")) << "two fibers on one latch from one spawn group:\n"
                                             << text;
  EXPECT_TRUE(has(text, "] created at ")) << text;
  // The mutex's holder is found in every build (holder_mark): this thread.
  EXPECT_TRUE(has(text, "held by a thread")) << text;

  gate.count_down();
  m.unlock();
  EXPECT_TRUE(ch.send(7));
  {
    std::lock_guard lock(cv_mu);
    cv_ready = true;
  }
  cv.notify_all();
  listener.close();
  joiner.get();
  rt.stop();
  EXPECT_EQ(finished.load(), 8);
  const std::string after = dump_of(rt);
  EXPECT_TRUE(has(after, "0 fibers")) << after;
}

// Submits to `rt` (started) a fiber that waits on `gate`; returns once its
// wait is recorded (`who` is then its identity), with the fiber's future.
auto submit_latch_wait(runtime& rt, latch& gate, std::atomic<waiter*>& who) {
  auto done = rt.submit([&] {
    who = self();
    gate.wait();
  });
  EXPECT_TRUE(eventually([&] {
    waiter* w = who.load();
    return w != nullptr && w->wait.kind.load() != nullptr;
  })) << "the fiber never began to wait";
  return done;
}

// A wait is dated by the first look at it (wait_info::since): a dump's, or
// the watchdog's a few times per grace period; until then it costs no clock
// read.
TEST(Dump, DatesAWaitAtTheFirstLookAndKeepsThatDate) {
  watchdog dog("dating a wait", 60s);
  runtime rt({.workers = 1, .on_deadlock = deadlock_policy::off, .stall_threshold = 0ms});
  rt.start();
  latch gate(1);
  std::atomic<waiter*> who{nullptr};
  auto done = submit_latch_wait(rt, gate, who);
  ASSERT_NE(who.load(), nullptr);
  const wait_info& wait = who.load()->wait;
  EXPECT_EQ(wait.since.load(), 0) << "no watchdog, no dump: nobody has looked";
  EXPECT_EQ(wait.since_ns(), 0);
  const auto before_look = std::chrono::steady_clock::now();
  // (The wait record is written before the fiber parks: the dump shows the
  // wait once it has.)
  EXPECT_TRUE(eventually([&] { return has(dump_of(rt), "[latch "); })) << dump_of(rt);
  const std::int64_t first = wait.since.load();
  EXPECT_NE(first, 0) << "the dump dated the wait";
  const auto ns = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  // Without the TSC a stamp is the coarse clock: a kernel tick (up to 4 ms) early.
  EXPECT_GE(wait.since_ns(), ns(before_look) - 5'000'000) << "dated before the look";
  std::this_thread::sleep_for(20ms);  // time passes: a second stamp would differ
  (void)dump_of(rt);
  EXPECT_EQ(wait.since.load(), first) << "a later dump dated it again";
  gate.count_down();
  done.get();
  rt.stop();
}

TEST(Dump, TheWatchdogDatesWaitsWhileItLooksForDeadlocks) {
  watchdog dog("the watchdog dating a wait", 60s);
  runtime rt({.workers = 1, .deadlock_grace = 40ms});
  rt.start();
  latch gate(1);
  std::atomic<waiter*> who{nullptr};
  auto done = submit_latch_wait(rt, gate, who);
  ASSERT_NE(who.load(), nullptr);
  EXPECT_TRUE(eventually([&] { return who.load()->wait.since.load() != 0; }))
      << "the watchdog never dated the wait";
  gate.count_down();
  done.get();
  rt.stop();
}

// A runtime that ran jobs ends with idle runner fibers; their records go
// back to the pool. A later runtime, even one allocated where the first one
// was (which the allocator makes likely here), must not list them as its
// own: the dump would show ghosts, and the deadlock watchdog, seeing a fiber
// that is not parked, would never report.
TEST(Dump, ARuntimeListsNoFiberOfAnEarlierOne) {
  for (int round = 0; round < 20; ++round) {
    {
      // Jobs that park (half wait for the other half), so runners park and
      // more of them are made.
      runtime jobs_ran({.workers = 2});
      jobs_ran.run([&] {
        constexpr int kPairs = 50;
        wait_group counter;
        counter.add(kPairs);
        task_group g(jobs_ran);
        for (int i = 0; i < kPairs; ++i) g.run([&] { counter.wait(); });
        for (int i = 0; i < kPairs; ++i) g.run([&] { counter.done(); });
        EXPECT_EQ(g.wait(), task_group_status::complete);
      });
    }
    runtime later({.workers = 1});
    const std::string text = dump_of(later);
    ASSERT_TRUE(has(text, "0 fibers\n")) << "round " << round << ":\n" << text;
  }
}

// Go's debug=1: ten thousand fibers on one latch are one line.
TEST(Dump, GroupsIdenticalWaits) {
  watchdog dog("Dump.GroupsIdenticalWaits", 60s);
  runtime rt({.workers = 2});
  rt.start();
  latch gate(1);
  constexpr int kFibers = 500;
  for (int i = 0; i < kFibers; ++i) rt.spawn([&] { gate.wait(); });
  std::string text;
  EXPECT_TRUE(eventually([&] {
    text = dump_of(rt);
    return has(text, std::to_string(kFibers) + " fibers [latch ");
  })) << text;
  std::size_t lines = 0;  // not counting the group's backtrace (indented)
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines += line.rfind("  ", 0) == 0 ? 0 : 1;
  EXPECT_LE(lines, 2u + 2u + 1u) << "header, two workers, one group:\n" << text;
  gate.count_down();
  rt.stop();
}

// A parked fiber's backtrace, walked from the registers its switch saved
// (sched/stack_trace.h): it must pass through the function it parked in. If
// Boost.Context's saved-register layout changes, this is the test that fails.
[[gnu::noinline]] void parked_in_named_function(latch& gate) {
  gate.wait();
  asm volatile("" ::: "memory");  // not a tail call: this frame stays
}

TEST(Dump, ShowsEachParkedFibersNameAndBacktrace) {
  watchdog dog("Dump.ShowsEachParkedFibersNameAndBacktrace", 60s);
  runtime rt({.workers = 1});
  rt.start();
  latch gate(1);
  rt.spawn([&] {
    this_fiber::set_name("conn 127.0.0.1:5512");
    EXPECT_EQ(this_fiber::get_name(), "conn 127.0.0.1:5512");
    parked_in_named_function(gate);
  });
  std::string text;
  EXPECT_TRUE(eventually([&] {
    text = dump_of(rt);
    return has(text, "\"conn 127.0.0.1:5512\" [latch 0x");
  })) << text;
  EXPECT_TRUE(has(text, "parked_in_named_function")) << text;
  EXPECT_FALSE(has(text, "tessera::sched::worker::switch_to")) << "scheduler frames shown:\n"
                                                               << text;
  gate.count_down();
  rt.stop();
}

TEST(Dump, NamesAreCutToFitAndPerFiber) {
  runtime rt({.workers = 1});
  const std::string longer(100, 'x');
  rt.run([&] {
    this_fiber::set_name(longer);
    EXPECT_EQ(this_fiber::get_name(), std::string(47, 'x'));
    fiber other([] { EXPECT_EQ(this_fiber::get_name(), ""); });
    other.join();
  });
}

// runtime::stats() per worker: what the fibers and jobs did adds up.
TEST(Stats, CountEachWorkersRunsParksJobsAndIdleTime) {
  watchdog dog("Stats.CountEachWorkersRunsParksJobsAndIdleTime", 60s);
  runtime rt({.workers = 2});
  constexpr int kFibers = 50, kParksEach = 20, kJobs = 200;
  rt.run([] {
    std::vector<fiber> fs;
    for (int i = 0; i < kFibers; ++i) {
      fs.emplace_back([] {
        for (int k = 0; k < kParksEach; ++k) this_fiber::sleep_for(10us);
      });
    }
    for (auto& f : fs) f.join();
    task_group g;
    for (int i = 0; i < kJobs; ++i) g.run([] {});
    g.wait();
  });
  const auto s = rt.stats();
  ASSERT_EQ(s.per_worker.size(), 2u);
  runtime::worker_statistics total;
  for (const auto& w : s.per_worker) {
    total.fibers_run += w.fibers_run;
    total.parks += w.parks;
    total.jobs_run += w.jobs_run;
    total.idle += w.idle;
  }
  // A sleep whose deadline has passed before it looks (a slow sanitizer
  // build) does not park, so the sleeps give no exact count; joins, the
  // task group's wait and idle job runners park as well.
  EXPECT_GT(total.parks, 0u);
  EXPECT_GE(total.fibers_run, total.parks) << "each park is followed by a run";
  EXPECT_EQ(total.jobs_run, std::uint64_t{kJobs});
  EXPECT_GT(total.idle.count(), 0);
  // Counters accumulate over runs, and stop counting once stopped.
  rt.run([] {});
  const auto again = rt.stats();
  std::uint64_t runs = 0;
  for (const auto& w : again.per_worker) runs += w.fibers_run;
  EXPECT_GT(runs, total.fibers_run);
}

// The deadlock report, in each fiber environment: 1, 2 and 4 workers; the
// report's contents also in a simulation (DeadlockReportIn, "simulated":
// found at once, no grace period, the same report).
class DeadlockIn : public ::testing::TestWithParam<unsigned> {
 protected:
  static constexpr auto kGrace = 150ms;
  static constexpr unsigned kSimulated = 0;
  runtime::options opts() const { return {.workers = GetParam(), .deadlock_grace = kGrace}; }
  // Runs `root` and expects run() to throw deadlock_error naming `waits`
  // within a bounded time; returns the report.
  template <class F>
  std::string expect_deadlock(F root, std::initializer_list<const char*> waits) {
    watchdog dog("a deadlock that is never reported", 60s);
    if (GetParam() == kSimulated) {
      const auto r =
          tessera::testing::run_once(root, tessera::testing::seed_for({}, 0), {.verbose = false});
      std::string report;
      try {
        if (r.failure != nullptr) std::rethrow_exception(r.failure);
        ADD_FAILURE() << "a deadlocked simulated run passed";
      } catch (const deadlock_error& e) {
        report = e.what();
      }
      EXPECT_TRUE(has(report, "tessera: deadlock: all ")) << report;
      EXPECT_TRUE(has(report, "nothing in the simulation can wake them")) << report;
      for (const char* w : waits) EXPECT_TRUE(has(report, w)) << "no '" << w << "' in:\n" << report;
      return report;
    }
    runtime rt(opts());
    const auto start = clock::now();
    std::string report;
    try {
      rt.run(root);
      ADD_FAILURE() << "run() returned from a deadlocked program";
    } catch (const deadlock_error& e) {
      report = e.what();
    }
    EXPECT_LT(clock::now() - start, 10s) << "reported, but late";
    EXPECT_TRUE(has(report, "tessera: deadlock: all ")) << report;
    for (const char* w : waits) EXPECT_TRUE(has(report, w)) << "no '" << w << "' in:\n" << report;
    // The runtime runs again after a deadlock, and its dump no longer lists
    // the abandoned fibers.
    EXPECT_EQ(rt.run([] { return 5; }), 5);
    EXPECT_TRUE(has(dump_of(rt), "0 fibers")) << dump_of(rt);
    return report;
  }
};
INSTANTIATE_TEST_SUITE_P(Workers, DeadlockIn, ::testing::Values(1u, 2u, 4u),
                         [](const auto& p) { return std::to_string(p.param) + "w"; });
class DeadlockReportIn : public DeadlockIn {};
INSTANTIATE_TEST_SUITE_P(Workers, DeadlockReportIn, ::testing::Values(1u, 2u, 4u, 0u),
                         [](const auto& p) {
                           return p.param == 0 ? std::string("simulated")
                                               : std::to_string(p.param) + "w";
                         });

TEST_P(DeadlockReportIn, LockOrderInversionBetweenTwoFibers) {
  const std::string report = expect_deadlock(
      [] {
        mutex a, b;
        latch both_hold(2);
        fiber one([&] {
          this_fiber::set_name("takes a then b");
          std::lock_guard la(a);
          both_hold.arrive_and_wait();
          std::lock_guard lb(b);
        });
        fiber two([&] {
          this_fiber::set_name("takes b then a");
          std::lock_guard lb(b);
          both_hold.arrive_and_wait();
          std::lock_guard la(a);
        });
        one.join();
        two.join();
      },
      {"all 3 fibers are parked", "[mutex 0x", "join of fiber"});
  std::size_t mutex_waits = 0;
  for (auto at = report.find("[mutex 0x"); at != std::string::npos;
       at = report.find("[mutex 0x", at + 1))
    ++mutex_waits;
  EXPECT_EQ(mutex_waits, 2u) << "each fiber waits for the other's mutex:\n" << report;
  EXPECT_FALSE(has(report, "latch")) << report;
  EXPECT_TRUE(has(report, "\"takes a then b\" [mutex 0x")) << report;
  EXPECT_TRUE(has(report, "created at ")) << report;
  EXPECT_TRUE(has(report, "] created at ")) << report;
  const std::size_t line = report.find("\"takes a then b\" [mutex");
  const std::size_t next = report.find('\n', line);
  EXPECT_TRUE(line != std::string::npos && report.compare(next + 1, 4, "    ") == 0)
      << "no backtrace under the fiber's line:\n"
      << report;
  EXPECT_FALSE(has(report, "tessera::sched::")) << "the scheduler's frames are hidden:\n" << report;
  // The holders are known in every build (holder_mark): the report follows
  // them round the cycle.
  EXPECT_TRUE(has(report, "tessera: the waits form a cycle:\n")) << report;
  EXPECT_TRUE(has(report, "\"takes a then b\" waits for mutex 0x")) << report;
  EXPECT_TRUE(has(report, "\"takes b then a\" waits for mutex 0x")) << report;
}

// timed_mutex and recursive_mutex (held two levels deep) name their holders
// too, in every build: the report prints the cycle between them.
TEST_P(DeadlockReportIn, TimedAndRecursiveMutexesNameTheirHoldersInACycle) {
  const std::string report = expect_deadlock(
      [] {
        timed_mutex t;
        recursive_mutex r;
        latch both_hold(2);
        fiber one([&] {
          this_fiber::set_name("holds r twice");
          std::lock_guard outer(r);
          std::lock_guard inner(r);
          both_hold.arrive_and_wait();
          std::lock_guard lt(t);
        });
        fiber two([&] {
          this_fiber::set_name("holds t");
          std::lock_guard lt(t);
          both_hold.arrive_and_wait();
          std::lock_guard lr(r);
        });
        one.join();
        two.join();
      },
      {"all 3 fibers are parked"});
  EXPECT_TRUE(has(report, "tessera: the waits form a cycle:\n")) << report;
  EXPECT_TRUE(has(report, "\"holds r twice\" waits for mutex 0x")) << report;
  EXPECT_TRUE(has(report, "\"holds t\" waits for mutex 0x")) << report;
  EXPECT_TRUE(has(report, ", held by fiber ")) << report;
}

// A shared_mutex names its writer to a waiting writer and to waiting readers.
TEST_P(DeadlockReportIn, SharedMutexWritersAreNamedToWritersAndReaders) {
  const std::string report = expect_deadlock(
      [] {
        shared_mutex s;
        mutex m;
        latch both_hold(2);
        latch reader_may_go(1);
        fiber one([&] {
          this_fiber::set_name("writes s");
          std::lock_guard ls(s);
          both_hold.arrive_and_wait();
          std::lock_guard lm(m);
        });
        fiber two([&] {
          this_fiber::set_name("holds m");
          std::lock_guard lm(m);
          both_hold.arrive_and_wait();
          reader_may_go.count_down();
          std::lock_guard ls(s);
        });
        fiber three([&] {
          this_fiber::set_name("reads s");
          reader_may_go.wait();
          std::shared_lock ls(s);
        });
        one.join();
        two.join();
        three.join();
      },
      {"all 4 fibers are parked", "shared_mutex (shared) 0x"});
  EXPECT_TRUE(has(report, "tessera: the waits form a cycle:\n")) << report;
  EXPECT_TRUE(has(report, "\"holds m\" waits for shared_mutex 0x")) << report;
  EXPECT_TRUE(has(report, "\"writes s\" waits for mutex 0x")) << report;
  // The reader's line names the writer (its id: the first fiber made).
  const std::size_t reader = report.find("\"reads s\" [");
  ASSERT_NE(reader, std::string::npos) << report;
  const std::string line = report.substr(reader, report.find('\n', reader) - reader);
  EXPECT_TRUE(has(line, ", held by fiber ")) << report;
}

TEST_P(DeadlockReportIn, ALatchNobodyCountsDown) {
  expect_deadlock(
      [] {
        latch never(1);
        never.wait();
      },
      {"all 1 fiber is parked", "latch 0x"});
}

TEST_P(DeadlockReportIn, AChannelReceiveWithNoSender) {
  expect_deadlock(
      [] {
        channel<int> ch(4);
        (void)ch.receive();
      },
      {"channel receive 0x"});
}

TEST_P(DeadlockReportIn, AJoinOfAFiberThatWaitsOnItsJoiner) {
  expect_deadlock(
      [] {
        latch after_join(1);
        fiber child([&] { after_join.wait(); });
        child.join();
        after_join.count_down();
      },
      {"all 2 fibers are parked", "join of fiber", "latch 0x"});
}

TEST_P(DeadlockReportIn, AJoinCycleIsFollowed) {
  const std::string report = expect_deadlock(
      [] {
        // Two fibers join each other; the root waits on a latch nobody counts down.
        fiber* first_handle = nullptr;
        latch both_made(1);
        fiber second([&] {
          both_made.wait();
          first_handle->join();
        });
        fiber first([&] { second.join(); });
        first_handle = &first;
        both_made.count_down();
        latch never(1);
        never.wait();
      },
      {"join of fiber"});
  EXPECT_TRUE(has(report, "tessera: the waits form a cycle:\n")) << report;
}

TEST_P(DeadlockIn, AStoppedRuntimeReportsFromStop) {
  watchdog dog("a deadlock that is never reported", 60s);
  runtime rt(opts());
  rt.start();
  latch never(1);
  rt.spawn([&] { never.wait(); });
  try {
    rt.stop();
    ADD_FAILURE() << "stop() returned although a fiber can never finish";
  } catch (const deadlock_error& e) {
    EXPECT_TRUE(has(e.what(), "latch 0x")) << e.what();
  }
}

// Not deadlocks: whatever the runtime knows can wake a fiber, and a plain
// thread that unparks within the grace period.
TEST_P(DeadlockIn, SleepsSocketsBlockingCallsAndLateThreadsAreNotReported) {
  watchdog dog("no deadlock: the run must end", 60s);
  runtime rt(opts());
  auto listener = net::tcp_listener::listen("127.0.0.1:0");
  std::atomic<waiter*> parked{nullptr};
  std::atomic<bool> go{false};
  std::thread closer;
  std::thread late;
  EXPECT_NO_THROW(rt.run([&] {
    fiber sleeper([] { this_fiber::sleep_for(kGrace * 3); });
    fiber acceptor([&] {
      std::error_code ec;
      auto s = listener.accept(ec);  // closed by a plain thread after 3 grace periods
      EXPECT_TRUE(ec);
    });
    fiber blocked([] { io::blocking([] { std::this_thread::sleep_for(kGrace * 3); }); });
    fiber waiting([&] {
      parked.store(self());
      while (!go.load()) park();
    });
    closer = std::thread([&] {
      std::this_thread::sleep_for(kGrace * 3);
      listener.close();
    });
    late = std::thread([&] {
      while (parked.load() == nullptr) std::this_thread::yield();
      std::this_thread::sleep_for(kGrace / 2);  // within the grace: not a deadlock
      go.store(true);
      unpark(parked.load());
    });
    sleeper.join();
    acceptor.join();
    blocked.join();
    waiting.join();
  }));
  closer.join();
  late.join();
}

TEST(Deadlock, TheReportPolicyPrintsAndGoesOnWaiting) {
  watchdog dog("the report policy", 60s);
  runtime rt({.workers = 2, .on_deadlock = deadlock_policy::report, .deadlock_grace = 100ms});
  latch gate(1);
  std::thread opener([&] {
    std::this_thread::sleep_for(600ms);  // far beyond the grace: reported, then released
    gate.count_down();
  });
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(rt.run([&] { gate.wait(); }));
  const std::string err = ::testing::internal::GetCapturedStderr();
  opener.join();
  EXPECT_TRUE(has(err, "tessera: deadlock: all 1 fiber is parked")) << err;
  EXPECT_EQ(err.find("tessera: deadlock"), err.rfind("tessera: deadlock"))
      << "the same deadlock was reported twice:\n"
      << err;
}

// The stall report: a fiber that holds its worker past the threshold is
// reported once; one that yields, parks or sleeps as long is not.
[[gnu::noinline]] void hog_the_worker_for(std::chrono::milliseconds d) {
  const auto until = clock::now() + d;
  while (clock::now() < until) {  // neither parks nor yields
  }
}

TEST(Stall, AFiberThatHoldsItsWorkerIsReportedOnce) {
  watchdog dog("the stall report", 60s);
  runtime rt({.workers = 2, .stall_threshold = 100ms});
  std::uint64_t spinner = 0;
  ::testing::internal::CaptureStderr();
  rt.run([&] {
    fiber hog([] {
      this_fiber::set_name("hog");
      hog_the_worker_for(600ms);
    });
    spinner = hog.get_id().value();
    fiber polite([] {
      const auto until = clock::now() + 600ms;
      while (clock::now() < until) this_fiber::yield();
    });
    fiber sleeper([] { this_fiber::sleep_for(600ms); });
    hog.join();
    polite.join();
    sleeper.join();
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string expected =
      "tessera: stall: fiber " + std::to_string(spinner) + " \"hog\" has held worker";
  EXPECT_TRUE(has(err, expected)) << err;
#if defined(__SANITIZE_THREAD__)  // no signal into a ThreadSanitizer build's running worker
  EXPECT_TRUE(has(err, "(no backtrace: a ThreadSanitizer build")) << err;
#else
  EXPECT_TRUE(has(err, "hog_the_worker_for")) << "no backtrace of the stalled fiber:\n" << err;
#endif
  EXPECT_EQ(err.find("tessera: stall"), err.rfind("tessera: stall"))
      << "one stall, one report (only the hog stalls):\n"
      << err;
}

TEST(Stall, AZeroThresholdTurnsTheReportOff) {
  watchdog dog("the stall report, off", 60s);
  runtime rt({.workers = 1, .stall_threshold = 0ms});
  ::testing::internal::CaptureStderr();
  rt.run([] { spin_for(300ms); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(has(err, "tessera: stall")) << err;
}

// dump_on_sigquit: SIGQUIT writes the dump to stderr, and the program goes on.
TEST(Dump, SigquitWritesTheDumpToStderr) {
  watchdog dog("the SIGQUIT dump", 60s);
  runtime rt({.workers = 2, .dump_on_sigquit = true});
  rt.start();
  latch gate(1);
  rt.spawn([&] { gate.wait(); });
  ASSERT_TRUE(eventually([&] { return has(dump_of(rt), "[latch "); }));

  // Stderr into a pipe while the signal is handled; read until the dump's
  // fiber line has come (bounded by poll's timeout).
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(fds[1], 2);
  ::close(fds[1]);
  ASSERT_EQ(::kill(::getpid(), SIGQUIT), 0);
  std::string got;
  const auto until = clock::now() + 10s;
  while (!has(got, "[latch ") && clock::now() < until) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;
    char buf[512];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) got.append(buf, static_cast<std::size_t>(n));
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fds[0]);
  EXPECT_TRUE(has(got, "tessera: runtime dump: 2 workers, 1 fiber")) << got;
  EXPECT_TRUE(has(got, "[latch ")) << got;
  gate.count_down();
  rt.stop();  // still running after the signal
}

}  // namespace
}  // namespace tessera::test

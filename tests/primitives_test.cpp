// Condition variables, events, latch, barrier and wait group, in every execution
// environment (threads, fibers on 1/2/4 workers, mixed).
#include <tessera/condition_variable.h>
#include <tessera/event.h>
#include <tessera/barrier.h>
#include <tessera/latch.h>
#include <tessera/wait_group.h>
#include <tessera/mutex.h>

#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <stop_token>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

class PrimitivesIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, PrimitivesIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

// ---- condition variables ------------------------------------------------------
TEST_P(PrimitivesIn, BoundedQueueDeliversEveryItemExactlyOnce) {
  watchdog dog("cv bounded queue", 90s);
  mutex m;
  condition_variable not_full, not_empty;
  std::deque<int> queue;
  constexpr int kProducers = 3, kConsumers = 3, kItems = 3000, kCapacity = 8;
  std::vector<std::atomic<int>> seen(kProducers * kItems);
  std::atomic<int> consumed{0};
  run_all(GetParam(), kProducers + kConsumers, [&](int id) {
    if (id < kProducers) {
      for (int i = 0; i < kItems; ++i) {
        std::unique_lock lock(m);
        not_full.wait(lock, [&] { return queue.size() < kCapacity; });
        queue.push_back(id * kItems + i);
        not_empty.notify_one();
      }
      return;
    }
    for (;;) {
      std::unique_lock lock(m);
      not_empty.wait(lock,
                     [&] { return !queue.empty() || consumed.load() == kProducers * kItems; });
      if (queue.empty()) return;  // everything consumed
      const int item = queue.front();
      queue.pop_front();
      not_full.notify_one();
      seen[item].fetch_add(1);
      if (consumed.fetch_add(1) + 1 == kProducers * kItems) not_empty.notify_all();
    }
  });
  for (auto& s : seen) ASSERT_EQ(s.load(), 1);
}

TEST_P(PrimitivesIn, NotifyOneWakesOneAndNotifyAllTheRest) {
  watchdog dog("notify_one", 60s);
  mutex m;
  condition_variable cv;
  int entered = 0;  // guarded by m
  std::atomic<int> woken{0};
  constexpr int kWaiters = 5;
  group g(GetParam());
  g.spawn_n(kWaiters, [&](int) {
    std::unique_lock lock(m);
    ++entered;
    cv.wait(lock);  // no predicate: exactly the notifications count
    woken.fetch_add(1);
  });
  // Once we hold the lock with everyone entered, everyone is queued (a waiter
  // queues before it unlocks).
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(m);
    return entered == kWaiters;
  }));
  cv.notify_one();
  ASSERT_TRUE(eventually([&] { return woken.load() == 1; }));
  std::this_thread::sleep_for(30ms);  // give a wrongly woken waiter time to show
  EXPECT_EQ(woken.load(), 1) << "notify_one woke more than one";
  cv.notify_all();
  g.join();
  EXPECT_EQ(woken.load(), kWaiters);
}

TEST_P(PrimitivesIn, TimedWaitsTimeOutNeverEarlyAndReportNotifications) {
  mutex m;
  condition_variable cv;
  condition_variable_any cva;
  std::mutex sm;
  std::atomic<bool> flag{false}, timeouts_done{false};
  run_all(GetParam(), 2, [&](int who) {
    if (who == 0) {
      std::unique_lock lock(m);
      auto start = clock::now();
      EXPECT_EQ(cv.wait_for(lock, 15ms), cv_status::timeout);
      EXPECT_GE(clock::now() - start, 15ms);
      EXPECT_TRUE(lock.owns_lock());
      start = clock::now();
      EXPECT_FALSE(
          cv.wait_until(lock, std::chrono::system_clock::now() + 10ms, [] { return false; }));
      std::unique_lock slock(sm);  // condition_variable_any over std::mutex
      EXPECT_EQ(cva.wait_for(slock, 5ms), cv_status::timeout);
      // Its stop_token forms time out too, with a token that is never stopped
      // and with one that has no stop state at all.
      std::stop_source never;
      start = clock::now();
      EXPECT_FALSE(cva.wait_for(slock, never.get_token(), 10ms, [] { return false; }));
      EXPECT_GE(clock::now() - start, 10ms);
      EXPECT_FALSE(cva.wait_until(slock, std::stop_token{}, std::chrono::system_clock::now() + 5ms,
                                  [] { return false; }));
      timeouts_done = true;
      EXPECT_TRUE(cva.wait(slock, never.get_token(), [&] { return flag.load(); }));
    } else {
      while (!timeouts_done.load()) yield_now();
      std::lock_guard slock(sm);
      flag = true;
      cva.notify_all();
    }
  });
}

// C++20's interruptible waits: a stop request wakes exactly the callers waiting
// with that token, whether they wait untimed or with a deadline, over
// tessera::mutex or std::mutex; the others keep waiting for a notification.
TEST_P(PrimitivesIn, ConditionVariableAnyStopRequestEndsTheWaitsOfItsToken) {
  watchdog dog("cv_any stop token", 60s);
  mutex m;
  std::mutex sm;
  condition_variable_any cv;
  std::stop_source stopped, other;
  int entered = 0;  // guarded by m
  bool go = false;  // guarded by m
  std::atomic<int> returned{0};
  constexpr int kStopped = 4;  // 0, 1: untimed; 2, 3: wait_for 60 s
  group g(GetParam());
  g.spawn_n(kStopped + 1, [&](int id) {
    std::unique_lock lock(m);
    ++entered;
    const auto start = clock::now();
    bool got = false;
    if (id == kStopped) {  // another token: only the notification ends its wait
      got = cv.wait(lock, other.get_token(), [&] { return go; });
      EXPECT_TRUE(got);
    } else if (id < 2) {
      got = cv.wait(lock, stopped.get_token(), [] { return false; });
    } else {
      got = cv.wait_for(lock, stopped.get_token(), 60s, [] { return false; });
      EXPECT_LT(clock::now() - start, 30s) << "the stop request did not wake a timed waiter";
    }
    EXPECT_TRUE(lock.owns_lock());
    if (id != kStopped) {
      EXPECT_FALSE(got);
      EXPECT_TRUE(stopped.stop_requested());
    }
    returned.fetch_add(1);
  });
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(m);
    return entered == kStopped + 1;
  }));
  stopped.request_stop();
  ASSERT_TRUE(eventually([&] { return returned.load() == kStopped; }));
  std::this_thread::sleep_for(20ms);  // give a wrongly woken waiter time to show
  EXPECT_EQ(returned.load(), kStopped) << "a stop request woke a waiter of another token";
  {
    std::lock_guard lock(m);
    go = true;
  }
  cv.notify_all();
  g.join();
  // Over std::mutex too, and with the stop already requested: no wait at all.
  std::unique_lock slock(sm);
  EXPECT_FALSE(cv.wait(slock, stopped.get_token(), [] { return false; }));
  EXPECT_TRUE(cv.wait_for(slock, stopped.get_token(), 60s, [] { return true; }));
}

// Stop requests racing notifications: one item and one notify_one per waiter;
// odd waiters' tokens are stopped at points among the notifications, even
// waiters' never. A stopped waiter returns at once, with an item if one is
// there; every even waiter must still get an item. (With a stopped waiter's
// node left queued, a notify_one chose the dead node and an even waiter slept
// until the watchdog.)
TEST_P(PrimitivesIn, ConditionVariableAnyStopRequestsRacingNotificationsLoseNothing) {
  watchdog dog("cv_any stop race", 90s);
  constexpr int kWaiters = 6, kRounds = 40;
  for (int round = 0; round < kRounds; ++round) {
    mutex m;
    condition_variable_any cv;
    int items = 0, entered = 0;  // guarded by m
    std::vector<std::stop_source> sources(kWaiters);
    std::array<std::atomic<int>, kWaiters> got{};  // 1: returned with an item, 2: without
    run_all(GetParam(), kWaiters + 1, [&](int id) {
      if (id == kWaiters) {  // producer and stopper, once every waiter has queued
        ASSERT_TRUE(eventually([&] {
          std::lock_guard lock(m);
          return entered == kWaiters;
        }));
        for (int i = 0; i < kWaiters; ++i) {
          const int odd = 2 * ((i + round) % (kWaiters / 2)) + 1;
          if (i % 2 == round % 2) sources[static_cast<std::size_t>(odd)].request_stop();
          {
            std::lock_guard lock(m);
            ++items;
          }
          cv.notify_one();
        }
        for (int odd = 1; odd < kWaiters; odd += 2) {
          sources[static_cast<std::size_t>(odd)].request_stop();
        }
        return;
      }
      std::unique_lock lock(m);
      ++entered;  // queued before m is released: cv.wait pushes, then unlocks
      const auto token = sources[static_cast<std::size_t>(id)].get_token();
      auto available = [&] { return items > 0; };
      const bool item = (id / 2) % 2 == 0 ? cv.wait(lock, token, available)
                                          : cv.wait_for(lock, token, 60s, available);
      if (item) --items;
      got[static_cast<std::size_t>(id)] = item ? 1 : 2;
      EXPECT_TRUE(item || token.stop_requested()) << "waiter " << id << " returned empty-handed";
    });
    for (int id = 0; id < kWaiters; id += 2) {
      EXPECT_EQ(got[static_cast<std::size_t>(id)].load(), 1)
          << "even waiter " << id << ", round " << round;
    }
  }
}

TEST_P(PrimitivesIn, ConditionVariableAtomicWaitsOnItsObjectOnly) {
  watchdog dog("cv atomic", 60s);
  condition_variable_atomic cva;
  std::atomic<int> a{0}, b{0};
  std::atomic<int> a_done{0}, b_done{0};
  group g(GetParam());
  g.spawn_n(4, [&](int i) {
    if (i % 2 == 0) {
      cva.wait(a, 0);
      a_done.fetch_add(1);
    } else {
      cva.wait(b, 0, [](int v) { return v >= 2; });
      b_done.fetch_add(1);
    }
  });
  a.store(1);
  cva.notify_all(a);
  ASSERT_TRUE(eventually([&] { return a_done.load() == 2; }));
  b.store(1);
  cva.notify_all(b);  // the predicate still fails: they wait on
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(b_done.load(), 0);
  b.store(2);
  cva.notify_all(b);
  g.join();
  EXPECT_EQ(b_done.load(), 2);
  const auto start = clock::now();
  EXPECT_FALSE(cva.wait_for(a, 1, 10ms));
  EXPECT_GE(clock::now() - start, 10ms);
}

// ---- events ------------------------------------------------------------------------
TEST_P(PrimitivesIn, AutoResetEventLetsOneThroughPerSignal) {
  watchdog dog("auto_reset_event", 60s);
  auto_reset_event ev;
  ev.signal();
  ev.signal();  // collapses into the first
  EXPECT_TRUE(ev.try_wait());
  EXPECT_FALSE(ev.try_wait());
  std::atomic<int> passed{0};
  group g(GetParam());
  g.spawn_n(4, [&](int) {
    ev.wait();
    passed.fetch_add(1);
  });
  for (int i = 1; i <= 4; ++i) {
    // Each signal admits exactly one waiter (or leaves one signal pending).
    ev.signal();
    ASSERT_TRUE(eventually([&] { return passed.load() == i; }));
  }
  g.join();
  EXPECT_FALSE(ev.try_wait());
}

TEST_P(PrimitivesIn, AutoResetEventTimedWaitsLoseNoSignal) {
  watchdog dog("auto_reset_event timed", 60s);
  auto_reset_event ev;
  std::atomic<long> passes{0}, signals{0};
  run_all(GetParam(), 4, [&](int id) {
    for (int i = 0; i < 2000; ++i) {
      if ((i + id) % 2 == 0) {
        ev.signal();
        signals.fetch_add(1);
      } else if (ev.wait_for(std::chrono::microseconds(i % 40))) {
        passes.fetch_add(1);
      }
    }
  });
  // Every pass used a distinct signal; signals that found the event already set
  // collapsed. What is left is at most one pending signal.
  const long pending = ev.try_wait() ? 1 : 0;
  EXPECT_LE(passes.load() + pending, signals.load());
  EXPECT_FALSE(ev.try_wait());
  const auto start = clock::now();
  EXPECT_FALSE(ev.wait_for(10ms));
  EXPECT_GE(clock::now() - start, 10ms);
  ev.signal();
  EXPECT_TRUE(ev.wait_for(0ms));
}

TEST_P(PrimitivesIn, ManualResetEventReleasesEveryoneUntilReset) {
  manual_reset_event ev;
  EXPECT_FALSE(ev.is_set());
  EXPECT_FALSE(ev.wait_for(5ms));
  std::atomic<int> passed{0};
  group g(GetParam());
  g.spawn_n(5, [&](int) {
    ev.wait();
    passed.fetch_add(1);
  });
  ev.set();
  g.join();
  EXPECT_EQ(passed.load(), 5);
  EXPECT_TRUE(ev.is_set());
  ev.wait();  // stays set
  ev.reset();
  EXPECT_FALSE(ev.wait_for(5ms));
}

// ---- latch, barrier, wait group --------------------------------------------------
TEST_P(PrimitivesIn, LatchReleasesWaitersWhenCountedDown) {
  latch done(4);
  std::atomic<int> before{0};
  run_all(GetParam(), 4, [&](int) {
    before.fetch_add(1);
    done.arrive_and_wait();
    EXPECT_EQ(before.load(), 4) << "released before everyone arrived";
  });
  EXPECT_TRUE(done.try_wait());
  EXPECT_THROW(latch(-1), std::invalid_argument);
}

TEST_P(PrimitivesIn, BarrierRunsTheCompletionOncePerPhase) {
  watchdog dog("barrier", 60s);
  constexpr int kParticipants = 4, kPhases = 200;
  std::atomic<int> arrived{0};
  int completions = 0;  // only the completion touches it
  int bad_phases = 0;
  barrier sync(kParticipants, [&]() noexcept {
    if (arrived.exchange(0) != kParticipants) ++bad_phases;
    ++completions;
  });
  run_all(GetParam(), kParticipants, [&](int) {
    for (int p = 0; p < kPhases; ++p) {
      arrived.fetch_add(1);
      sync.arrive_and_wait();
    }
  });
  EXPECT_EQ(completions, kPhases);
  EXPECT_EQ(bad_phases, 0);
}

TEST_P(PrimitivesIn, BarrierArriveAndDropShrinksLaterPhases) {
  int completions = 0;
  barrier sync(3, [&]() noexcept { ++completions; });
  run_all(GetParam(), 3, [&](int id) {
    if (id == 0) {
      sync.arrive_and_drop();  // phase 0 counts it; later phases expect 2
      return;
    }
    for (int p = 0; p < 10; ++p) sync.arrive_and_wait();
  });
  EXPECT_EQ(completions, 10);
}

TEST_P(PrimitivesIn, WaitGroupWaitsForEveryDone) {
  wait_group wg;
  std::atomic<int> finished{0};
  wg.add(6);
  group g(GetParam());
  g.spawn_n(6, [&](int) {
    finished.fetch_add(1);
    wg.done();
  });
  wg.wait();
  EXPECT_EQ(finished.load(), 6);
  g.join();
  EXPECT_EQ(wg.count(), 0);
  wg.wait();  // at zero: returns at once
}

TEST(PrimitivesDeathTest, MisusedCountersAbortWithMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        wait_group wg;
        wg.done();
      },
      "tessera::wait_group: negative counter");
  EXPECT_DEATH(
      {
        latch l(1);
        l.count_down(2);
      },
      "tessera::latch::count_down: counted below zero");
}

}  // namespace
}  // namespace tessera::test

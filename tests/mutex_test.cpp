// The mutexes, in every execution environment: mutual exclusion under stress,
// try_lock, timeouts, recursion, the standard lock adaptors, bounded waiting
// (eventual fairness), and debug-checked misuse.
#include <tessera/mutex.h>
#include <tessera/runtime.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

// A few hundred nanoseconds of work the optimiser cannot remove.
void busy_work(int n) {
  std::atomic<int> sink{0};
  for (int k = 0; k < n; ++k) sink.fetch_add(1, std::memory_order_relaxed);
}

class MutexIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, MutexIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

template <class M>
void exclusion_stress(exec_kind kind) {
  watchdog dog("mutex stress", 90s);
  M m;
  long counter = 0;  // guarded by m: TSan checks the happens-before edges
  int inside = 0;    // guarded by m
  std::atomic<int> violations{0};
  constexpr int kParticipants = 6, kIters = 4000;
  run_all(kind, kParticipants, [&](int id) {
    for (int i = 0; i < kIters; ++i) {
      std::unique_lock lock(m);
      if (++inside != 1) violations.fetch_add(1);
      ++counter;
      if ((i + id) % 64 == 0) yield_now();  // hold it across a switch now and then
      --inside;
    }
  });
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(counter, long{kParticipants} * kIters);
}

TEST_P(MutexIn, MutexExcludes) {
  exclusion_stress<mutex>(GetParam());
}
TEST_P(MutexIn, TimedMutexExcludes) {
  exclusion_stress<timed_mutex>(GetParam());
}
TEST_P(MutexIn, RecursiveMutexExcludes) {
  exclusion_stress<recursive_mutex>(GetParam());
}

TEST_P(MutexIn, TryLockFailsWhileHeldAndTimeoutsAreNeverEarly) {
  timed_mutex m;
  m.lock();
  run_all(GetParam(), 2, [&](int) {
    EXPECT_FALSE(m.try_lock());
    const auto start = clock::now();
    EXPECT_FALSE(m.try_lock_for(20ms));
    EXPECT_GE(clock::now() - start, 20ms);
    EXPECT_FALSE(m.try_lock_until(std::chrono::system_clock::now() + 5ms));
  });
  m.unlock();
  EXPECT_TRUE(m.try_lock_for(0ms)) << "a timed-out waiter left the mutex unusable";
  m.unlock();
}

TEST_P(MutexIn, TimedWaiterGetsTheLockWhenReleasedInTime) {
  timed_mutex m;
  m.lock();
  std::atomic<bool> got{false};
  group g(GetParam());
  g.spawn([&] {
    got = m.try_lock_for(10s);
    if (got) m.unlock();
  });
  std::this_thread::sleep_for(10ms);
  m.unlock();
  g.join();
  EXPECT_TRUE(got.load());
}

TEST_P(MutexIn, MixedTimedAndUntimedWaitersLoseNothing) {
  // Timed-out waiters leave the queue while others are being woken: afterwards
  // the mutex is free and every untimed locker got in.
  watchdog dog("timed mutex stress", 90s);
  timed_mutex m;
  std::atomic<long> entered{0};
  run_all(GetParam(), 6, [&](int id) {
    for (int i = 0; i < 2000; ++i) {
      if ((i + id) % 3 == 0) {
        if (!m.try_lock_for(std::chrono::microseconds((i * 7) % 50))) continue;
      } else {
        m.lock();
      }
      entered.fetch_add(1);
      if (i % 16 == 0) yield_now();
      m.unlock();
    }
  });
  EXPECT_GT(entered.load(), 6 * 2000 * 2 / 3 - 1);
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST_P(MutexIn, RecursiveLocksNestAndReleaseAtTheLastUnlock) {
  recursive_timed_mutex m;
  std::atomic<bool> other_got{false};
  run_all(GetParam(), 1, [&](int) {
    m.lock();
    EXPECT_TRUE(m.try_lock());
    EXPECT_TRUE(m.try_lock_for(1ms));
    m.unlock();
    m.unlock();
    std::thread other([&] { other_got = m.try_lock(); });  // still held once
    other.join();
    m.unlock();
  });
  EXPECT_FALSE(other_got.load());
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST_P(MutexIn, NoWaiterStarvesWhileOthersHammer) {
  // Two participants re-lock in a tight loop; a third asks once. Eventual
  // fairness hands it the lock within ~1 ms of queueing, plus scheduling delay.
  watchdog dog("fairness", 60s);
  mutex m;
  std::atomic<bool> stop{false};
  std::atomic<long> waited_us{-1};
  group hammer(GetParam());
  hammer.spawn_n(2, [&](int) {
    while (!stop.load(std::memory_order_relaxed)) {
      std::lock_guard lock(m);
      busy_work(50);
    }
  });
  std::this_thread::sleep_for(5ms);
  group asker(GetParam());
  asker.spawn([&] {
    const auto start = clock::now();
    m.lock();
    waited_us = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start).count();
    m.unlock();
    stop = true;
  });
  asker.join();
  hammer.join();
  EXPECT_GE(waited_us.load(), 0);
  EXPECT_LT(waited_us.load(), 1'000'000) << "a waiter starved for " << waited_us.load() << " us";
}

TEST(Mutex, ManyFibersAllGetTheLockWhileOthersBarge) {
  // 512 fibers on 2 workers hammer one mutex. Barging lets the running fibers
  // re-lock at will; every queued one must still get in, by fair hand-offs.
  // (How fast is fiberbench's `mutex latency`, not a test's business.)
  watchdog dog("512 fibers barging", 120s);
  constexpr int kFibers = 512;
  runtime rt({.workers = 2});
  const int had_it = rt.run([] {
    mutex m;
    std::atomic<bool> stop{false};
    std::atomic<int> have_had_it{0};
    std::vector<fiber> fs;
    fs.reserve(kFibers);
    for (int i = 0; i < kFibers; ++i) {
      fs.emplace_back([&] {
        bool counted = false;
        while (!stop.load(std::memory_order_relaxed)) {
          std::lock_guard lock(m);
          if (!counted) {
            counted = true;
            if (have_had_it.fetch_add(1) + 1 == kFibers) stop = true;
          }
          busy_work(20);
        }
      });
    }
    for (auto& f : fs) f.join();
    return have_had_it.load();
  });
  EXPECT_EQ(had_it, kFibers);
}

// "Lost races" (mutex.h): a woken OS thread that finds the lock taken again
// keeps WOKEN and sleeps on a retry timer, so later unlocks do not wake it.
// These drive a waiter into that state: it queues, and within the 1 ms before
// a fair hand-off is due the owner wakes it and barges back in before it runs.
// Whether the waiter had parked by then cannot be observed from outside, so
// each test repeats the scenario; every assertion holds whatever the
// interleaving, and with the protocol broken (no retry timer; WOKEN given up
// while the lock is free) a round hangs and the watchdog fails the test.
constexpr int kLostRaceRounds = 20;

TEST(Mutex, AWaiterThatLostTheRaceNoticesTheFinalUnlockByItself) {
  watchdog dog("lost race, final unlock", 60s);
  for (int round = 0; round < kLostRaceRounds; ++round) {
    timed_mutex m;
    m.lock();
    std::atomic<bool> got{false};
    std::thread waiter([&] {
      m.lock();  // untimed: only an unlock or its own retry timer can wake it
      got = true;
      m.unlock();
    });
    std::this_thread::sleep_for(300us);  // let it queue (under 1 ms: no hand-off)
    m.unlock();                          // wakes it (WOKEN) ...
    m.lock();                            // ... and barges back in before it runs
    std::this_thread::sleep_for(2ms);    // it loses, keeps WOKEN, sleeps on its timer
    const auto released = clock::now();
    m.unlock();  // the fast path if WOKEN is set: this wakes nobody
    waiter.join();
    EXPECT_TRUE(got.load());
    // kRetryAfter (200 us) plus timer slack and scheduling; generous for a VM.
    EXPECT_LT(clock::now() - released, 500ms) << "round " << round;
  }
}

TEST(Mutex, AWaiterThatTimesOutAfterLosingTheRaceLeavesTheNextOneWakeable) {
  watchdog dog("lost race, deadline", 60s);
  for (int round = 0; round < kLostRaceRounds; ++round) {
    timed_mutex m;
    m.lock();
    std::atomic<bool> second_got{false};
    std::thread timed([&] {
      if (m.try_lock_for(5ms)) m.unlock();  // either outcome is legal here
    });
    std::thread second([&] {
      m.lock();
      second_got = true;
      m.unlock();
    });
    std::this_thread::sleep_for(300us);  // let both queue (under 1 ms: no hand-off)
    m.unlock();                          // wakes the front waiter (WOKEN) ...
    m.lock();                            // ... which loses the race
    std::this_thread::sleep_for(10ms);   // past the deadline: the timed one gives up
    timed.join();
    m.unlock();  // must wake the untimed waiter if it still waits
    second.join();
    EXPECT_TRUE(second_got.load());
    EXPECT_TRUE(m.try_lock()) << "round " << round;
    m.unlock();
  }
}

TEST(Mutex, WorksWithStandardLockAdaptors) {
  mutex a;
  timed_mutex b;
  {
    std::scoped_lock both(a, b);
    EXPECT_FALSE(a.try_lock());
    EXPECT_FALSE(b.try_lock());
  }
  std::unique_lock lb(b, std::defer_lock);
  EXPECT_TRUE(lb.try_lock_for(1ms));
  lb.unlock();
  EXPECT_TRUE(a.try_lock());
  a.unlock();
}

#if TESSERA_CHECKS
TEST(MutexDeathTest, UnlockByNonOwnerAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        mutex m;
        m.lock();
        std::thread([&] { m.unlock(); }).join();
      },
      "tessera::mutex::unlock: the caller does not own the mutex");
}

TEST(MutexDeathTest, DestroyingALockedMutexAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto* m = new timed_mutex;
        m->lock();
        delete m;
      },
      "tessera::timed_mutex destroyed while locked or with waiters");
}
#endif

TEST(MutexDeathTest, RecursiveUnlockByNonOwnerAbortsInEveryBuild) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        recursive_mutex m;
        m.unlock();
      },
      "tessera::recursive_mutex::unlock: the caller does not own the mutex");
}

}  // namespace
}  // namespace tessera::test

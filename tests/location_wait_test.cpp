// location_wait / location_wake_all (Dice & Kogan, Listing 5), in every
// execution environment: release by wake-all, elements left behind on a chain
// by a waiter that stopped waiting, keys sharing a chain, and a bounded
// ping-pong stress.
#include <tessera/location_wait.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

class LocationWaitIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, LocationWaitIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

std::uintptr_t key_of(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

// Two keys whose chains are the same slot.
std::pair<std::uintptr_t, std::uintptr_t> colliding_keys() {
  const std::uintptr_t a = 0x10000;
  for (std::uintptr_t b = a + 64;; b += 64) {
    if (detail::location_slot_index(b) == detail::location_slot_index(a)) return {a, b};
  }
}

TEST_P(LocationWaitIn, WakeAllReleasesEveryWaiter) {
  watchdog dog("location_wait wake-all", 60s);
  constexpr int kWaiters = 5;
  std::atomic<bool> ready{false};
  std::atomic<int> arrived{0}, released{0};
  group g(GetParam());
  g.spawn_n(kWaiters, [&](int) {
    arrived.fetch_add(1);
    while (!ready.load(std::memory_order_acquire)) location_wait(key_of(&ready));
    released.fetch_add(1);
  });
  ASSERT_TRUE(eventually([&] { return arrived.load() == kWaiters; }));
  EXPECT_EQ(released.load(), 0);
  ready.store(true, std::memory_order_relaxed);  // any order: the wake fences
  location_wake_all(key_of(&ready));
  g.join();
  EXPECT_EQ(released.load(), kWaiters);
}

// Listing 5's stranded element: a waiter emplaces its element on chain A, finds
// its condition true at ratification and leaves without waiting. A waiter
// pushed on A after it sits above it; the wake must still reach that one (the
// walk, not systolic propagation), and the first waiter's next wait, on
// another key, must flush A and work.
TEST_P(LocationWaitIn, AnElementLeftOnAChainNeitherOccludesOthersNorBreaksItsNextWait) {
  watchdog dog("location_wait stranded element", 60s);
  std::atomic<int> a_phase{0};  // 1: the stray has emplaced and left; 2: a waiter is on A
  std::atomic<bool> a_ready{false}, b_ready{false};
  std::atomic<int> done{0};
  const std::uintptr_t key_a = key_of(&a_ready), key_b = key_of(&b_ready);
  run_all(GetParam(), 3, [&](int who) {
    if (who == 0) {
      // The stray: one call emplaces and returns (a spurious return by design);
      // it leaves the loop as if its condition had become true.
      location_wait(key_a);
      a_phase = 1;
      while (a_phase.load() != 2) yield_now();
      // Its next wait is on B: the element must come off A first.
      while (!b_ready.load()) location_wait(key_b);
      done.fetch_add(1);
    } else if (who == 1) {
      while (a_phase.load() != 1) yield_now();
      int calls = 0;
      while (!a_ready.load()) {
        location_wait(key_a);
        if (++calls == 1) a_phase = 2;  // emplaced above the stray element
      }
      done.fetch_add(1);
    } else {
      while (a_phase.load() != 2) yield_now();
      a_ready = true;
      location_wake_all(key_a);
      b_ready = true;
      location_wake_all(key_b);
      done.fetch_add(1);
    }
  });
  EXPECT_EQ(done.load(), 3);
}

TEST_P(LocationWaitIn, KeysSharingAChainOnlyCostSpuriousReturns) {
  watchdog dog("location_wait collisions", 60s);
  // Not a structured binding: clang 14 cannot capture one in a lambda.
  const auto keys = colliding_keys();
  const std::uintptr_t key_x = keys.first, key_y = keys.second;
  std::atomic<bool> x_ready{false}, y_ready{false};
  std::atomic<int> waiting{0};
  std::atomic<bool> y_done{false};
  group g(GetParam());
  g.spawn([&] {
    waiting.fetch_add(1);
    while (!x_ready.load()) location_wait(key_x);
  });
  g.spawn([&] {
    waiting.fetch_add(1);
    while (!y_ready.load()) location_wait(key_y);
    y_done = true;
  });
  ASSERT_TRUE(eventually([&] { return waiting.load() == 2; }));
  x_ready = true;
  location_wake_all(key_x);  // wakes y's waiter too: it re-checks and waits on
  EXPECT_FALSE(eventually([&] { return y_done.load(); }, 20ms));
  y_ready = true;
  location_wake_all(key_y);
  g.join();
  EXPECT_TRUE(y_done.load());
}

TEST_P(LocationWaitIn, PingPongLosesNoWakeUp) {
  watchdog dog("location_wait ping-pong", 60s);
  constexpr int kRounds = 5000;
  std::atomic<int> turn{0};
  run_all(GetParam(), 2, [&](int who) {
    for (int i = 0; i < kRounds; ++i) {
      while (turn.load(std::memory_order_acquire) != who) location_wait(key_of(&turn) + who);
      turn.store(1 - who, std::memory_order_release);
      location_wake_all(key_of(&turn) + (1 - who));
    }
  });
  EXPECT_EQ(turn.load(), 0);
}

// Regression (found by WakeAllReleasesEveryWaiter on threads): a thread left
// its element on a chain after the wake and exited; a thread that had already
// checked its condition (false, before the wake) then got the recycled record,
// found the element "already emplaced on this chain" and waited without
// ratifying: for ever. A record's new owner must treat it as stranded.
TEST(LocationWait, ARecycledRecordsStrandedElementIsNotMistakenForItsOwn) {
  (void)self();  // the test thread takes its own record now, not X's later
  std::atomic<bool> ready{false};
  const std::uintptr_t key = key_of(&ready);
  std::latch checked(1), go(1);
  std::atomic<bool> done{false};
  waiter* y_record = nullptr;
  // Y checks the condition before anything else touches Tessera on its
  // thread, so it has no record yet.
  std::thread y([&] {
    bool first = true;
    while (!ready.load()) {
      if (first) {
        first = false;
        checked.count_down();
        go.wait();
      }
      location_wait(key);
      if (y_record == nullptr) y_record = self();
    }
    done = true;
  });
  checked.wait();
  ready = true;
  location_wake_all(key);  // the chain is empty: nobody to release
  waiter* x_record = nullptr;
  std::thread x([&] {
    location_wait(key);  // emplaces, then leaves as if its condition held
    x_record = self();
  });
  x.join();  // X's record, its element stranded on key's chain, goes back to the pool
  go.count_down();
  const bool finished = eventually([&] { return done.load(); }, 5s);
  if (!finished) location_wake_all(key);  // unstick Y so the test can end
  y.join();
  ASSERT_EQ(y_record, x_record) << "Y did not get X's recycled record: the case is not exercised";
  EXPECT_TRUE(finished) << "Y waited on an element an earlier owner had left on the chain";
}

}  // namespace
}  // namespace tessera::test

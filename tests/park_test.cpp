// The park façade's OS-thread path: permit semantics, timeouts, stale identities.
#include <tessera/detail/tick_clock.h>
#include <tessera/park.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

TEST(Park, UnparkBeforeParkMakesParkReturnAtOnce) {
  watchdog guard("Park.UnparkBeforeParkMakesParkReturnAtOnce", 30s);
  unpark(self());
  const auto start = clock::now();
  park();  // consumes the permit; without it, the watchdog fails the test
  EXPECT_LT(clock::now() - start, 1s) << "park() waited although a permit was available";
  EXPECT_FALSE(park_until(clock::now() + 20ms)) << "park() left the permit behind";
}

TEST(Park, PermitsDoNotAccumulate) {
  unpark(self());
  unpark(self());
  EXPECT_TRUE(park_until(clock::now() + 1s));     // the one permit
  EXPECT_FALSE(park_until(clock::now() + 20ms));  // no second permit
}

TEST(Park, ParkUntilTimesOutNeverEarly) {
  for (auto timeout : {1ms, 10ms, 30ms}) {
    const auto start = clock::now();
    EXPECT_FALSE(park_until(start + timeout));
    const auto elapsed = clock::now() - start;
    EXPECT_GE(elapsed, timeout);
    EXPECT_LT(elapsed, timeout + 500ms) << "grossly late";
  }
}

TEST(Park, ParkUntilPastDeadlineConsumesPendingPermit) {
  unpark(self());
  EXPECT_TRUE(park_until(clock::now() - 1s));
  EXPECT_FALSE(park_until(clock::now() - 1s));
}

TEST(Park, SelfIsStableAndDistinctPerThread) {
  waiter* mine = self();
  EXPECT_EQ(mine, self());
  waiter* other = nullptr;
  std::thread t([&] { other = self(); });
  t.join();
  EXPECT_NE(other, nullptr);
  EXPECT_NE(other, mine);
}

TEST(Park, UnparkFromAnotherThreadWakesParkedThread) {
  std::atomic<bool> flag{false};
  std::atomic<waiter*> who{nullptr};
  std::thread sleeper([&] {
    who = self();
    while (!flag.load()) park();  // loop on our own condition: spurious returns allowed
  });
  ASSERT_TRUE(eventually([&] { return who.load() != nullptr; }));
  flag = true;
  unpark(who.load());
  sleeper.join();
}

TEST(Park, PingPongManyRounds) {
  constexpr int kRounds = 20000;
  std::atomic<int> turn{0};
  waiter* main_w = self();
  std::atomic<waiter*> peer{nullptr};
  std::thread t([&] {
    peer = self();
    for (int i = 0; i < kRounds; ++i) {
      while (turn.load() != 1) park();
      turn = 0;
      unpark(main_w);
    }
  });
  ASSERT_TRUE(eventually([&] { return peer.load() != nullptr; }));
  for (int i = 0; i < kRounds; ++i) {
    turn = 1;
    unpark(peer.load());
    while (turn.load() != 0) park();
  }
  t.join();
}

// docs/design.md: identity records are type-stable, so unparking an exited thread is
// harmless. Run under ASan this would report any use-after-free.
TEST(Park, UnparkingExitedThreadsIsHarmless) {
  std::vector<waiter*> stale;
  for (int round = 0; round < 8; ++round) {
    std::vector<std::thread> threads;
    std::vector<waiter*> ids(16);
    for (int i = 0; i < 16; ++i) threads.emplace_back([&ids, i] { ids[i] = self(); });
    for (auto& t : threads) t.join();
    stale.insert(stale.end(), ids.begin(), ids.end());
  }
  for (int k = 0; k < 100; ++k) {
    for (waiter* w : stale) unpark(w);
  }
  // New threads may reuse those records; a stale permit is at most one spurious
  // wake-up, so a thread that loops on its condition still behaves.
  std::atomic<bool> go{false};
  std::atomic<int> done{0};
  std::vector<std::atomic<waiter*>> fresh(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      fresh[i] = self();
      while (!go.load()) park();
      done.fetch_add(1);
    });
  }
  ASSERT_TRUE(eventually([&] {
    for (auto& w : fresh)
      if (w.load() == nullptr) return false;
    return true;
  }));
  EXPECT_EQ(done.load(), 0) << "a thread left its loop without its condition";
  go = true;
  for (auto& w : fresh) unpark(w.load());
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 16);
}

TEST(Park, UnparkNullIsIgnored) {
  unpark(nullptr);  // must neither crash nor grant anybody a permit
  EXPECT_FALSE(park_until(clock::now() + 20ms)) << "unpark(nullptr) granted the caller a permit";
}

// The façade's contract in every execution environment: the fiber path
// (a user-space switch) keeps the same permit semantics as the futex path.
class ParkIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, ParkIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

TEST_P(ParkIn, PermitSemanticsAndTimeouts) {
  watchdog dog("park permit semantics", 60s);
  std::atomic<int> checked{0};
  run_all(GetParam(), 3, [&](int) {
    unpark(self());
    park();  // consumes the permit at once
    unpark(self());
    unpark(self());
    EXPECT_TRUE(park_until(clock::now() + 1s));    // the one permit
    EXPECT_FALSE(park_until(clock::now() + 5ms));  // no second one
    const auto start = clock::now();
    EXPECT_FALSE(park_until(start + 10ms));
    EXPECT_GE(clock::now() - start, 10ms) << "a timed park returned early";
    unpark(self());
    EXPECT_TRUE(park_until(clock::now() - 1s));  // past deadline: takes the pending permit
    checked.fetch_add(1);
  });
  EXPECT_EQ(checked.load(), 3);
}

TEST_P(ParkIn, PingPongHandsOneTokenBackAndForth) {
  watchdog dog("park ping-pong", 60s);
  constexpr int kRounds = 5000;
  std::atomic<int> turn{0};
  std::atomic<waiter*> who[2] = {nullptr, nullptr};
  run_all(GetParam(), 2, [&](int me) {
    who[me] = self();
    while (who[1 - me].load() == nullptr) yield_now();
    for (int i = 0; i < kRounds; ++i) {
      while (turn.load() != me) park();  // spurious returns allowed: loop
      turn = 1 - me;
      unpark(who[1 - me].load());
    }
  });
  EXPECT_EQ(turn.load(), 0);
}

// The hot paths' clock: its intervals match steady_clock's, and a wait stamp
// converts back to steady_clock time.
TEST(TickClock, IntervalsMatchSteadyClock) {
  using detail::tick_clock;
  using namespace std::chrono_literals;
  const auto s0 = std::chrono::steady_clock::now();
  const tick_clock::rep t0 = tick_clock::now();
  std::this_thread::sleep_for(20ms);
  const tick_clock::rep t1 = tick_clock::now();
  const auto elapsed = std::chrono::steady_clock::now() - s0;
  ASSERT_GT(t1, t0);
  // The readings' difference against ticks() of the steady_clock interval
  // around it: equal within 10 % (both clocks read the same 20 ms).
  const double ratio = static_cast<double>(t1 - t0) /
                       static_cast<double>(tick_clock::ticks(std::chrono::nanoseconds(elapsed)));
  EXPECT_GT(ratio, 0.9);
  EXPECT_LT(ratio, 1.1);
  EXPECT_EQ(tick_clock::ticks(0ns), 0);
  EXPECT_LT(tick_clock::ticks(40us), tick_clock::ticks(1ms));
}

TEST(TickClock, AWaitStampConvertsToSteadyClockTime) {
  using detail::tick_clock;
  using namespace std::chrono_literals;
  const auto ns = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  };
  const tick_clock::rep stamp = tick_clock::stamp();
  const auto taken = std::chrono::steady_clock::now();
  EXPECT_NE(stamp, 0);
  std::this_thread::sleep_for(30ms);
  // Without the TSC a stamp is the coarse clock: a kernel tick (up to 4 ms) early.
  const std::int64_t back = tick_clock::stamp_to_ns(stamp);
  EXPECT_NEAR(static_cast<double>(back), static_cast<double>(ns(taken)), 5e6);
  EXPECT_LT(back, ns(std::chrono::steady_clock::now()) - 20'000'000) << "the wait looks shorter";
}

}  // namespace
}  // namespace tessera::test

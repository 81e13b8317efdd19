// atomic_wait / atomic_notify_one / atomic_notify_all (P0514R2 §32.10) on wait chains.
#include <tessera/atomic_wait.h>

#include <atomic>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

TEST(AtomicWait, ReturnsAtOnceWhenValueDiffers) {
  std::atomic<int> a{1};
  atomic_wait(&a, 0);
  SUCCEED();
}

// The waiting tests run in every execution environment (exec_env.h).
class AtomicWaitIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, AtomicWaitIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

TEST_P(AtomicWaitIn, PingPong) {
  watchdog dog("atomic_wait ping-pong", 60s);
  constexpr int kRounds = 20000;
  std::atomic<int> turn{0};
  run_all(GetParam(), 2, [&](int who) {
    // Participant 0 waits for 1 and sets 0; participant 1 waits for 0 and sets 1.
    const int mine = who, theirs = 1 - who;
    for (int i = 0; i < kRounds; ++i) {
      while (turn.load(std::memory_order_acquire) != mine) atomic_wait(&turn, theirs);
      turn.store(theirs, std::memory_order_release);
      atomic_notify_one(&turn);
    }
  });
  EXPECT_EQ(turn.load(), 0);
}

TEST_P(AtomicWaitIn, NotifyAllWakesEveryWaiter) {
  watchdog dog("atomic_wait notify_all", 60s);
  std::atomic<long> gen{0};
  std::atomic<int> woken{0}, arrived{0};
  group g(GetParam());
  g.spawn_n(5, [&](int) {
    arrived.fetch_add(1);
    atomic_wait(&gen, 0L);
    woken.fetch_add(1);
  });
  ASSERT_TRUE(eventually([&] { return arrived.load() == 5; }));
  gen.store(1, std::memory_order_relaxed);  // any order: notify fences
  atomic_notify_all(&gen);
  g.join();
  EXPECT_EQ(woken.load(), 5);
}

TEST_P(AtomicWaitIn, WorksForPointers) {
  int x = 0;
  std::atomic<int*> p{nullptr};
  run_all(GetParam(), 2, [&](int who) {
    if (who == 0) {
      p = &x;
      atomic_notify_one(&p);
    } else {
      atomic_wait(&p, static_cast<int*>(nullptr));
      EXPECT_EQ(p.load(), &x);
    }
  });
}

TEST_P(AtomicWaitIn, TimedWaitTimesOutNeverEarlyAndSucceedsOnChange) {
  std::atomic<unsigned char> a{0};
  std::atomic<bool> timed_out{false};
  run_all(GetParam(), 2, [&](int who) {
    if (who == 0) {
      const auto start = clock::now();
      EXPECT_FALSE(atomic_wait_until(&a, static_cast<unsigned char>(0), start + 20ms));
      EXPECT_GE(clock::now() - start, 20ms);
      timed_out = true;
      EXPECT_TRUE(atomic_wait_until(&a, static_cast<unsigned char>(0), clock::now() + 10s));
    } else {
      while (!timed_out.load()) yield_now();
      a = 1;
      atomic_notify_all(&a);
    }
  });
}

}  // namespace
}  // namespace tessera::test

namespace tessera::test {
namespace {
// Regression: an unqualified atomic_notify_one(&a) on a non-const std::atomic
// once resolved (by ADL) to std::atomic_notify_one, whose wake-up never reached
// a waiter parked in tessera::atomic_wait. The ping-pong above hung.
TEST(AtomicWait, UnqualifiedCallsResolveToTessera) {
  std::atomic<int> a{0};
  static_assert(std::is_same_v<decltype(atomic_notify_one), const detail::atomic_notify_fn>);
  std::thread t([&] {
    a.store(1);
    atomic_notify_one(&a);  // unqualified, non-const pointer: must be ours
  });
  atomic_wait(&a, 0);
  t.join();
  EXPECT_EQ(a.load(), 1);
}
}  // namespace
}  // namespace tessera::test

// atomic_wait / atomic_notify_one / atomic_notify_all (P0514R2 §32.10) on wait chains.
#include <tessera/atomic_wait.h>

#include <atomic>
#include <thread>
#include <vector>

#include "test_util.h"

namespace tessera::test {
namespace {

TEST(AtomicWait, ReturnsAtOnceWhenValueDiffers) {
  std::atomic<int> a{1};
  atomic_wait(&a, 0);
  SUCCEED();
}

TEST(AtomicWait, PingPongBetweenTwoThreads) {
  constexpr int kRounds = 20000;
  std::atomic<int> turn{0};
  std::thread t([&] {
    for (int i = 0; i < kRounds; ++i) {
      atomic_wait(&turn, 0);
      turn.store(0, std::memory_order_release);
      atomic_notify_one(&turn);
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    turn.store(1, std::memory_order_release);
    atomic_notify_one(&turn);
    atomic_wait(&turn, 1);
  }
  t.join();
  EXPECT_EQ(turn.load(), 0);
}

TEST(AtomicWait, NotifyAllWakesEveryWaiter) {
  std::atomic<long> gen{0};
  std::atomic<int> woken{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&] {
      atomic_wait(&gen, 0L);
      woken.fetch_add(1);
    });
  }
  gen.store(1, std::memory_order_relaxed);  // any order: notify fences
  atomic_notify_all(&gen);
  for (auto& t : threads) t.join();
  EXPECT_EQ(woken.load(), 5);
}

TEST(AtomicWait, WorksForPointers) {
  int x = 0;
  std::atomic<int*> p{nullptr};
  std::thread t([&] {
    p = &x;
    atomic_notify_one(&p);
  });
  atomic_wait(&p, static_cast<int*>(nullptr));
  EXPECT_EQ(p.load(), &x);
  t.join();
}

TEST(AtomicWait, TimedWaitTimesOutNeverEarlyAndSucceedsOnChange) {
  std::atomic<unsigned char> a{0};
  const auto start = clock::now();
  EXPECT_FALSE(atomic_wait_until(&a, static_cast<unsigned char>(0), start + 20ms));
  EXPECT_GE(clock::now() - start, 20ms);
  std::thread t([&] {
    a = 1;
    atomic_notify_all(&a);
  });
  EXPECT_TRUE(atomic_wait_until(&a, static_cast<unsigned char>(0), clock::now() + 10s));
  t.join();
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

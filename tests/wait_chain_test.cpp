// Waiting chains (Dice & Kogan, Listings 3 and 4): signalling, collisions, timeouts,
// and the mis-queue recovery under races.
#include <tessera/wait_chain.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

std::uintptr_t key_of(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

// Two distinct keys that hash onto the same chain.
std::pair<std::uintptr_t, std::uintptr_t> colliding_keys() {
  const std::uintptr_t a = 0x10000;
  for (std::uintptr_t b = a + 8;; b += 8) {
    if (&detail::chain_for_key(b) == &detail::chain_for_key(a)) return {a, b};
  }
}

TEST(WaitChain, ReturnsAtOnceWhenAlreadySatisfied) {
  int calls = 0;
  auto v = address_wait_until(0x1234, [&] { return ++calls; });
  EXPECT_EQ(v, 1);
  EXPECT_EQ(calls, 1);
}

TEST(WaitChain, SignalWakesWaiter) {
  std::atomic<int> x{0};
  std::thread t([&] {
    x.store(1, std::memory_order_relaxed);
    address_signal(key_of(&x));
  });
  const int seen =
      address_wait_until(key_of(&x), [&] { return x.load(std::memory_order_relaxed); });
  EXPECT_EQ(seen, 1);
  t.join();
}

TEST(WaitChain, OneSignalWakesEveryWaiterOfTheKey) {
  std::atomic<int> x{0};
  std::atomic<int> woken{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      address_wait_until(key_of(&x), [&] { return x.load() == 1; });
      woken.fetch_add(1);
    });
  }
  ASSERT_TRUE(eventually([&] { return detail::chain_for_key(key_of(&x)).head.load() != nullptr; }));
  x = 1;
  address_signal_polite(key_of(&x));
  for (auto& t : threads) t.join();
  EXPECT_EQ(woken.load(), 6);
}

TEST(WaitChain, CollidingKeyWakesButDoesNotReleaseOtherKeysWaiter) {
  const auto keys = colliding_keys();  // clang 14 cannot capture a structured binding
  const std::uintptr_t a = keys.first, b = keys.second;
  std::atomic<bool> a_ready{false};
  std::atomic<int> evaluations{0};
  std::atomic<bool> returned{false};
  std::thread waiter_a([&] {
    address_wait_until(a, [&] {
      evaluations.fetch_add(1);
      return a_ready.load();
    });
    returned = true;
  });
  ASSERT_TRUE(eventually([&] { return detail::chain_for_key(a).head.load() != nullptr; }));
  const int before = evaluations.load();
  address_signal(b);  // same chain, other key: a spurious wake-up for waiter_a
  ASSERT_TRUE(eventually([&] { return evaluations.load() > before; }));
  // It re-evaluated, found its condition false and went back to wait.
  ASSERT_TRUE(eventually([&] { return detail::chain_for_key(a).head.load() != nullptr; }));
  EXPECT_FALSE(returned.load());
  a_ready = true;
  address_signal(a);
  waiter_a.join();
  EXPECT_TRUE(returned.load());
}

TEST(WaitChain, DeadlineTimesOutNeverEarly) {
  for (auto timeout : {0ms, 2ms, 25ms}) {
    const auto start = clock::now();
    const bool ok = address_wait_until(
        0xABCD0, [] { return false; }, start + timeout);
    EXPECT_FALSE(ok);
    EXPECT_GE(clock::now() - start, timeout);
    EXPECT_LT(clock::now() - start, timeout + 500ms);
  }
  // The chain holds no stale element afterwards.
  EXPECT_EQ(detail::chain_for_key(0xABCD0).head.load(), nullptr);
}

TEST(WaitChain, DeadlineWaitSucceedsWhenSignalled) {
  std::atomic<int> x{0};
  std::thread t([&] {
    x = 7;
    address_signal(key_of(&x));
  });
  const int v = address_wait_until(
      key_of(&x), [&] { return x.load(); }, clock::now() + 10s);
  EXPECT_EQ(v, 7);
  t.join();
}

TEST(KeyWait, SignalAdvancesSequenceAndWakes) {
  const std::uintptr_t key = 0x55550;
  std::atomic<bool> cond{false};
  std::thread t([&] {
    for (;;) {
      const auto seq = key_monitor(key);
      if (cond.load()) break;
      key_wait(key, seq);
    }
  });
  ASSERT_TRUE(eventually([&] { return detail::chain_for_key(key).head.load() != nullptr; }));
  const auto before = key_monitor(key);
  cond = true;
  key_signal(key);
  EXPECT_EQ(key_monitor(key), before + 1);
  t.join();
}

TEST(KeyWait, StaleSequenceReturnsAtOnceAndTimedWaitTimesOut) {
  const std::uintptr_t key = 0x66660;
  const auto seq = key_monitor(key);
  key_signal_polite(key);
  key_wait(key, seq);  // sequence already moved: must not block
  const auto now_seq = key_monitor(key);
  const auto start = clock::now();
  EXPECT_FALSE(key_wait_until(key, now_seq, start + 15ms));
  EXPECT_GE(clock::now() - start, 15ms);
}

// The chain protocol in every execution environment: waiters that are fibers
// park by switching, and signals cross between threads and fibers.
class WaitChainIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, WaitChainIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

TEST_P(WaitChainIn, OneSignalWakesEveryWaiterOfTheKey) {
  watchdog dog("wait chain wake-all", 60s);
  std::atomic<int> x{0}, woken{0};
  group g(GetParam());
  g.spawn_n(6, [&](int) {
    address_wait_until(key_of(&x), [&] { return x.load() == 1; });
    woken.fetch_add(1);
  });
  ASSERT_TRUE(eventually([&] { return detail::chain_for_key(key_of(&x)).head.load() != nullptr; }));
  x = 1;
  address_signal(key_of(&x));
  g.join();
  EXPECT_EQ(woken.load(), 6);
}

// Stress of the chain protocol on one crowded chain: waiters with and without
// deadlines, signallers with both forms, all racing pushes, mis-queue recovery
// (CAS undo and flush), timeouts and systolic propagation. Each waiter waits for
// a counter to pass a target; at the end everything must have returned.
TEST_P(WaitChainIn, StressMisqueueRecoveryAndTimeoutsOnOneChain) {
  watchdog dog("wait chain stress", 60s);
  const auto keys = colliding_keys();  // clang 14 cannot capture a structured binding
  const std::uintptr_t a = keys.first, b = keys.second;
  std::atomic<std::uint64_t> counter[2] = {0, 0};
  std::atomic<bool> stop{false};
  constexpr int kRounds = 1500;
  std::atomic<int> finished{0};
  std::thread signaller([&] {
    for (std::uint64_t i = 0; !stop.load(); ++i) {
      counter[i % 2].fetch_add(1);
      if (i % 4 < 2)
        address_signal(i % 2 ? b : a);
      else
        address_signal_polite(i % 2 ? b : a);
      if (i % 64 == 0) std::this_thread::yield();
    }
  });
  constexpr int kWaiters = 6;
  run_all(GetParam(), kWaiters, [&](int w) {
    auto& ctr = counter[w % 2];
    const std::uintptr_t key = w % 2 ? b : a;
    for (int r = 0; r < kRounds; ++r) {
      const std::uint64_t target = ctr.load() + 1;
      auto pred = [&] { return ctr.load() >= target; };
      if (r % 3 == 0) {
        address_wait_until(key, pred, clock::now() + std::chrono::microseconds(r % 50));
      } else {
        address_wait_until(key, pred);
      }
    }
    finished.fetch_add(1);
  });
  stop = true;
  signaller.join();
  EXPECT_EQ(finished.load(), kWaiters);
  EXPECT_EQ(detail::chain_for_key(a).head.load(), nullptr) << "an element was left on the chain";
}

}  // namespace
}  // namespace tessera::test

// blocking_pool and blocking_stack in every execution environment: element
// order, waiters served in arrival order, hand-over straight to a waiter,
// timed and stopped takes that take nothing, and conservation under stress.
#include <gtest/gtest.h>
#include <tessera/blocking_pool.h>
#include <tessera/blocking_stack.h>
#include <tessera/latch.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <stop_token>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

class PoolIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, PoolIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

TEST(BlockingPool, StoredElementsComeOutInTheirOrder) {
  blocking_pool<int> q;
  blocking_stack<int> st;
  for (int k = 0; k < 5; ++k) {
    q.put(k);
    st.push(k);
  }
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(st.size(), 5u);
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(q.take(), k);
    EXPECT_EQ(st.pop(), 4 - k);
  }
  EXPECT_FALSE(q.try_take().has_value());
  EXPECT_FALSE(st.try_pop().has_value());
}

TEST(BlockingPool, MoveOnlyElementsAreNeitherCopiedNorLost) {
  blocking_pool<std::unique_ptr<int>, pool_order::lifo> p;
  p.put(std::make_unique<int>(7));
  auto got = p.take();
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(*got, 7);
}

// Takers that queue one by one are handed elements in that order, each the
// element of the put that found it waiting (the stack's newer elements never
// overtake a hand-over).
TEST_P(PoolIn, WaitersAreHandedElementsInArrivalOrder) {
  watchdog dog("pool arrival order", 60s);
  blocking_stack<int> st;
  std::mutex mu;
  std::vector<std::pair<int, int>> got;  // (taker, element)
  group g(GetParam());
  for (int t = 0; t < 5; ++t) {
    g.spawn([&, t] {
      const int v = st.pop();
      std::lock_guard lock(mu);
      got.emplace_back(t, v);
    });
    ASSERT_TRUE(eventually([&] { return st.waiting() == static_cast<std::size_t>(t + 1); }));
  }
  for (int k = 0; k < 5; ++k) st.push(100 + k);
  g.join();
  ASSERT_EQ(got.size(), 5u);
  std::sort(got.begin(), got.end());
  for (int t = 0; t < 5; ++t) EXPECT_EQ(got[t].second, 100 + t) << "taker " << t;
  EXPECT_EQ(st.size(), 0u);
}

TEST_P(PoolIn, TryTakeNeverBargesPastAWaiter) {
  watchdog dog("pool no barging", 60s);
  blocking_pool<int> p;
  group g(GetParam());
  std::atomic<int> got{-1};
  g.spawn([&] { got = p.take(); });
  ASSERT_TRUE(eventually([&] { return p.waiting() == 1; }));
  p.put(1);
  EXPECT_FALSE(p.try_take().has_value());  // the element went to the waiter
  g.join();
  EXPECT_EQ(got.load(), 1);
}

TEST_P(PoolIn, TimedAndStoppedTakesGiveUpTakingNothing) {
  watchdog dog("pool timed take", 60s);
  blocking_pool<int> p;
  group g(GetParam());
  std::atomic<int> timed_out{0};
  std::atomic<int> stopped{0};
  std::stop_source stop;
  latch waiting(3);
  for (int k = 0; k < 2; ++k) {
    g.spawn([&] {
      const auto t0 = clock::now();
      waiting.count_down();
      if (!p.try_take_for(30ms).has_value() && clock::now() - t0 >= 30ms) ++timed_out;
    });
  }
  g.spawn([&] {
    waiting.count_down();
    if (!p.take(stop.get_token()).has_value()) ++stopped;
  });
  waiting.wait();
  ASSERT_TRUE(eventually([&] { return p.waiting() == 1 && timed_out.load() == 2; }));
  stop.request_stop();
  g.join();
  EXPECT_EQ(timed_out.load(), 2);
  EXPECT_EQ(stopped.load(), 1);
  // Three cancelled cells: the next puts pay them back and are then stored.
  p.put(1);
  p.put(2);
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.take(), 1);
  EXPECT_EQ(p.try_take(), std::optional<int>(2));
  // A stop already requested: take() does not wait.
  EXPECT_FALSE(p.take(stop.get_token()).has_value());
}

// After quiescence: drains what the pool still holds into `seen`; every
// element must then have been seen once, `taken` of them by the takers.
template <class Pool>
void expect_each_element_once(Pool& p, std::vector<std::atomic<int>>& seen, int taken) {
  int left = 0;
  while (auto v = p.try_take()) {
    seen[*v].fetch_add(1);
    ++left;
  }
  EXPECT_EQ(taken + left, static_cast<int>(seen.size()));
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "element " << i;
}

// Producers and consumers with timed and stopped takes mixed in: after
// quiescence every element was taken exactly once or is still in the pool.
TEST_P(PoolIn, StressConservesEveryElement) {
  watchdog dog("pool stress", 120s);
  constexpr int kProducers = 3, kPerProducer = 3000, kConsumers = 3;
  blocking_pool<int, pool_order::lifo> p;
  std::vector<std::atomic<int>> seen(kProducers * kPerProducer);
  std::atomic<int> taken{0};
  std::atomic<bool> done{false};
  std::stop_source stop;
  group g(GetParam());
  for (int c = 0; c < kConsumers; ++c) {
    g.spawn([&, c] {
      for (int k = 0; !done.load(); ++k) {
        std::optional<int> v;
        if (c == 0) {
          v = p.try_take_for(std::chrono::microseconds(k % 50));
        } else if (c == 1) {
          v = p.take(stop.get_token());
        } else {
          v = p.try_take();
          if (!v) yield_now();
        }
        if (v) {
          seen[*v].fetch_add(1);
          ++taken;
        }
      }
    });
  }
  for (int pr = 0; pr < kProducers; ++pr) {
    g.spawn([&, pr] {
      for (int k = 0; k < kPerProducer; ++k) {
        p.put(pr * kPerProducer + k);
        if (k % 64 == 0) yield_now();
      }
    });
  }
  ASSERT_TRUE(eventually(
      [&] { return taken.load() + static_cast<int>(p.size()) >= kProducers * kPerProducer; }, 60s));
  done = true;
  stop.request_stop();
  g.join();
  expect_each_element_once(p, seen, taken.load());
  EXPECT_EQ(p.waiting(), 0u);
}

// Stop requests land at random moments on takes in flight (each take its
// own stop_source, requested by a canceller that sleeps a random few
// microseconds between requests): a stopped take takes nothing, and every
// element is taken once or is still in the pool, in both orders. Halfway
// through, one producer waits until a stop has woken a waiting take.
template <pool_order Order>
void stop_requests_race_takes(exec_kind kind) {
  watchdog dog("pool takes stopped at random", 120s);
  constexpr int kProducers = 2, kPerProducer = 2000, kTakers = 2;
  blocking_pool<int, Order> p;
  std::vector<std::atomic<int>> seen(kProducers * kPerProducer);
  std::atomic<int> taken{0}, stopped{0}, producers_left{kProducers};
  std::mutex slot_mu;  // the takers' current stop_sources (test scaffolding only)
  std::vector<std::stop_source> slot(kTakers);
  bool all_taken = false;  // under slot_mu
  group g(kind);
  for (int t = 0; t < kTakers; ++t) {
    g.spawn([&, t] {
      while (producers_left.load() > 0 || p.size() > 0) {
        std::stop_source src;
        {
          std::lock_guard lock(slot_mu);
          if (all_taken) return;  // the canceller's last round is over
          slot[t] = src;          // shares src's stop state
        }
        std::optional<int> v =
            t == 0 ? p.take(src.get_token()) : p.try_take_for(std::chrono::milliseconds(2));
        if (v) {
          seen[*v].fetch_add(1);
          ++taken;
        } else if (src.stop_requested()) {
          ++stopped;
        }
      }
    });
  }
  g.spawn([&] {  // the canceller
    std::mt19937 rng(7);
    while (producers_left.load() > 0 || taken.load() < kProducers * kPerProducer) {
      const auto until = clock::now() + std::chrono::microseconds(rng() % 40);
      while (clock::now() < until) yield_now();
      std::stop_source victim;
      {
        std::lock_guard lock(slot_mu);
        victim = slot[rng() % kTakers];
      }
      victim.request_stop();
    }
    // Whoever still waits is let go, and nobody starts another take.
    std::lock_guard lock(slot_mu);
    all_taken = true;
    for (auto& s : slot) s.request_stop();
  });
  for (int pr = 0; pr < kProducers; ++pr) {
    g.spawn([&, pr] {
      for (int k = 0; k < kPerProducer; ++k) {
        if (pr == 0 && k == kPerProducer / 2) {
          // Halfway, until a stop has landed on a waiting take (the others
          // drain the pool meanwhile), so that every run has one.
          EXPECT_TRUE(eventually([&] { return stopped.load() > 0; }, 20s))
              << "no stop request ever woke a waiting take";
        }
        p.put(pr * kPerProducer + k);
        if (k % 8 == 0) {  // a pause now and then, in which takers wait
          const auto until = clock::now() + 10us;
          while (clock::now() < until) yield_now();
        }
      }
      producers_left.fetch_sub(1);
    });
  }
  g.join();
  expect_each_element_once(p, seen, taken.load());
  EXPECT_EQ(p.waiting(), 0u);
}

TEST_P(PoolIn, StopRequestsRacingTakesLoseNothingFifo) {
  stop_requests_race_takes<pool_order::fifo>(GetParam());
}
TEST_P(PoolIn, StopRequestsRacingTakesLoseNothingLifo) {
  stop_requests_race_takes<pool_order::lifo>(GetParam());
}

}  // namespace
}  // namespace tessera::test

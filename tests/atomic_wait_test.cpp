// atomic_wait / atomic_notify_one / atomic_notify_all (P0514R2 §32.10) on wait chains.
#include <tessera/atomic_wait.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

TEST(AtomicWait, ReturnsAtOnceWhenValueDiffers) {
  watchdog guard("AtomicWait.ReturnsAtOnceWhenValueDiffers", 30s);
  std::atomic<int> a{1};
  const auto start = clock::now();
  atomic_wait(&a, 0);  // 1 != 0: must not wait (the watchdog fails a hang)
  EXPECT_LT(clock::now() - start, 1s) << "atomic_wait waited on a value that differed";
  EXPECT_EQ(a.load(), 1);
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

// The standard waits on any trivially copyable T, compared by value
// representation: floating point, small and large structs (the large one is
// not lock-free), volatile atomics, and the _explicit spelling.
struct small_pair {
  std::int16_t a;
  std::int16_t b;
};
struct large_block {
  std::int64_t v[6];
};

// Waits in one participant for `a` to leave `from`, while the other stores `to`.
template <class A, class T>
void wait_for_change(exec_kind kind, A& a, T from, T to) {
  std::atomic<bool> waiting{false};
  run_all(kind, 2, [&](int who) {
    if (who == 0) {
      waiting = true;
      atomic_wait_explicit(&a, from, std::memory_order_acquire);
      const T seen = a.load();
      EXPECT_EQ(std::memcmp(&seen, &to, sizeof(T)), 0);
    } else {
      while (!waiting.load()) yield_now();
      a.store(to);
      atomic_notify_all(&a);
    }
  });
}

TEST_P(AtomicWaitIn, WaitsOnFloatingPointByValueRepresentation) {
  watchdog dog("atomic_wait float/double", 60s);
  std::atomic<float> f{1.5f};
  wait_for_change(GetParam(), f, 1.5f, 2.5f);
  std::atomic<double> d{0.0};
  // -0.0 == 0.0, but its representation differs: the standard's wait returns.
  wait_for_change(GetParam(), d, 0.0, -0.0);
  // And a value whose representation is unchanged does not end a wait.
  std::atomic<double> same{-0.0};
  EXPECT_FALSE(atomic_wait_until(&same, -0.0, clock::now() + 5ms));
  EXPECT_TRUE(atomic_wait_until(&same, 0.0, clock::now() + 5ms));
}

TEST_P(AtomicWaitIn, WaitsOnSmallAndLargeStructs) {
  watchdog dog("atomic_wait structs", 60s);
  std::atomic<small_pair> p{small_pair{1, 2}};
  static_assert(std::atomic<small_pair>::is_always_lock_free);
  wait_for_change(GetParam(), p, small_pair{1, 2}, small_pair{1, 3});
  std::atomic<large_block> b{large_block{{1, 2, 3, 4, 5, 6}}};
  static_assert(!std::atomic<large_block>::is_always_lock_free);
  wait_for_change(GetParam(), b, large_block{{1, 2, 3, 4, 5, 6}}, large_block{{1, 2, 3, 4, 5, 7}});
}

TEST_P(AtomicWaitIn, WaitsOnVolatileAtomics) {
  watchdog dog("atomic_wait volatile", 60s);
  volatile std::atomic<int> v{0};
  std::atomic<bool> waiting{false};
  run_all(GetParam(), 2, [&](int who) {
    if (who == 0) {
      waiting = true;
      atomic_wait(&v, 0);
      EXPECT_EQ(v.load(), 1);
    } else {
      while (!waiting.load()) yield_now();
      v.store(1);
      atomic_notify_one(&v);
    }
  });
  EXPECT_FALSE(atomic_wait_until(&v, 1, clock::now() + 2ms));
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

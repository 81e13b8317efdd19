// The primitives' spin lock (tessera/detail/spin_lock.h): mutual exclusion in
// every execution environment, the calibrated back-off step count, and which
// back-off a caller gets (a fiber batches, an OS thread polls tightly).
#include <gtest/gtest.h>
#include <tessera/detail/spin_lock.h>
#include <tessera/runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "exec_env.h"

namespace {

using tessera::test::all_exec_kinds;
using tessera::test::exec_kind;

class SpinLockIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, SpinLockIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& env) { return tessera::test::to_string(env.param); });

// Eight callers each add 1 to two plain counters 20,000 times under the lock,
// with a gap between holds so that holds also interleave across workers: both
// counters end exact and equal (no two holders at once; ThreadSanitizer sees
// the plain accesses ordered by the lock).
TEST_P(SpinLockIn, ExcludesEveryOtherHolder) {
  tessera::detail::spin_lock lock;
  std::uint64_t a = 0, b = 0;
  std::atomic<int> overlaps{0};
  std::atomic<bool> inside{false};
  constexpr int kCallers = 8, kHolds = 20000;
  tessera::test::run_all(GetParam(), kCallers, [&](int) {
    for (int i = 0; i < kHolds; ++i) {
      lock.lock();
      if (inside.exchange(true, std::memory_order_relaxed)) overlaps.fetch_add(1);
      ++a;
      ++b;
      inside.store(false, std::memory_order_relaxed);
      lock.unlock();
      if (i % 64 == 0) tessera::yield_now();
    }
  });
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(a, std::uint64_t{kCallers} * kHolds);
  EXPECT_EQ(b, a);
}

TEST(SpinLock, TryLockFailsWhileHeldAndSucceedsAfter) {
  tessera::detail::spin_lock lock;
  ASSERT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

// relax_steps_for(ns) is a step count whose spin takes about ns: monotone in
// ns, within its clamp, and 750 ns worth of steps spins for a time of that
// order (the shortest of five tries, so a preemption cannot fail it; bounds a
// factor of ten either way, as the step was measured on a possibly noisy core).
TEST(SpinLock, RelaxStepsAreCalibratedToTime) {
  using tessera::detail::relax_steps_for;
  const unsigned short_wait = relax_steps_for(100), long_wait = relax_steps_for(750);
  EXPECT_GE(short_wait, 1u);
  EXPECT_LE(long_wait, 65536u);
  EXPECT_LE(short_wait, long_wait);
  EXPECT_EQ(relax_steps_for(0), 1u);
  EXPECT_EQ(relax_steps_for(1000000000), 65536u);
  double best_ns = 1e12;
  for (int t = 0; t < 5; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < long_wait; ++i) tessera::detail::cpu_relax();
    best_ns = std::min(
        best_ns,
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  EXPECT_GE(best_ns, 75.0) << long_wait << " steps";
  EXPECT_LE(best_ns, 7500.0) << long_wait << " steps";
}

// An OS thread polls at every step (its next wait may be a futex sleep); a
// fiber backs off between polls (batching_backoff).
TEST(SpinLock, BackoffFollowsTheCaller) {
  const tessera::detail::spin_backoff on_thread = tessera::detail::caller_backoff();
  EXPECT_EQ(on_thread.steps, 1u);
  EXPECT_EQ(on_thread.polls, 64u);
  tessera::runtime rt({.workers = 1});
  const tessera::detail::spin_backoff on_fiber =
      rt.run([] { return tessera::detail::caller_backoff(); });
  EXPECT_EQ(on_fiber.steps, tessera::detail::relax_steps_for(750));
  EXPECT_EQ(on_fiber.polls, 4u);
}

}  // namespace

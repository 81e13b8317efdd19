// The segment queue synchronizer's cell protocol, driven directly
// (tessera/detail/segment_queue.h): asynchronous and synchronous resumption,
// broken and cancelled cells, and the indices staying in step after each.
#include <gtest/gtest.h>
#include <tessera/detail/segment_queue.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stop_token>
#include <thread>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

using detail::deadline;
using detail::segment_queue;
using mode = segment_queue::resume_mode;

constexpr const char* kKind = "segment_queue_test";

alignas(8) const long kElement = 42;

TEST(SegmentQueue, AnAsyncResumeThatComesFirstLeavesItsHandOver) {
  segment_queue q;
  EXPECT_TRUE(q.resume(segment_queue::element(&kElement)));
  // The suspend that comes takes it without waiting (a past deadline would
  // cancel a cell it had to wait in).
  const std::uintptr_t got = q.suspend(deadline::after(0ms), kKind, &q);
  EXPECT_EQ(segment_queue::element_of<const long>(got), &kElement);
}

TEST(SegmentQueue, ASyncResumeWithNobodyComingBreaksTheCell) {
  segment_queue q;
  EXPECT_FALSE(q.resume(segment_queue::element(&kElement), mode::sync));
  // The suspender of that cell finds it broken and is told to start over,
  // at once, whatever its deadline.
  EXPECT_EQ(q.suspend({}, kKind, &q), segment_queue::kBroken);
  EXPECT_EQ(q.parked(), 0);
  // The next pair meets in the next cell.
  EXPECT_TRUE(q.resume());
  EXPECT_EQ(q.suspend({}, kKind, &q), segment_queue::kPermit);
}

TEST(SegmentQueue, ACancelledCellFailsAResumeOfEitherMode) {
  segment_queue q;
  EXPECT_EQ(q.suspend(deadline::after(0ms), kKind, &q), 0u);
  EXPECT_EQ(q.suspend(deadline::after(1ms), kKind, &q), 0u);
  EXPECT_FALSE(q.resume());
  EXPECT_FALSE(q.resume(segment_queue::kPermit, mode::sync));
  EXPECT_TRUE(q.resume());
  EXPECT_EQ(q.suspend(deadline::after(0ms), kKind, &q), segment_queue::kPermit);
}

TEST(SegmentQueue, AStopRequestCancelsAParkedSuspend) {
  segment_queue q;
  std::stop_source stop;
  std::atomic<std::uintptr_t> got{1};
  std::thread t([&] {
    const std::stop_token token = stop.get_token();
    got = q.suspend({}, kKind, &q, &token);
  });
  ASSERT_TRUE(eventually([&] { return q.parked() == 1; }));
  stop.request_stop();
  t.join();
  EXPECT_EQ(got.load(), 0u);
  EXPECT_FALSE(q.resume(segment_queue::kPermit, mode::sync));
}

class SegmentQueueIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, SegmentQueueIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

// A sync resume into a parked waiter's cell hands over and returns true.
TEST_P(SegmentQueueIn, ASyncResumeHandsToAParkedWaiter) {
  watchdog dog("sync resume to a parked waiter", 60s);
  segment_queue q;
  std::atomic<std::uintptr_t> got{0};
  group g(GetParam());
  g.spawn([&] { got = q.suspend({}, kKind, &q); });
  ASSERT_TRUE(eventually([&] { return q.parked() == 1; }));
  EXPECT_TRUE(q.resume(segment_queue::element(&kElement), mode::sync));
  g.join();
  EXPECT_EQ(segment_queue::element_of<const long>(got.load()), &kElement);
}

// Suspenders and sync resumers racing: every hand-over a resume reports as
// given is received exactly once, every failed one is a broken cell its
// suspender saw (so both sides count the same cells).
TEST_P(SegmentQueueIn, SyncResumesAndSuspendersAgreeOnEveryCell) {
  watchdog dog("sync resume race", 120s);
  constexpr int kPairs = 2, kEach = 2000 / kSanitizerSlowdown;
  segment_queue q;
  std::atomic<long> handed{0}, received{0}, broken_resumes{0}, broken_suspends{0};
  run_all(GetParam(), 2 * kPairs, [&](int id) {
    for (int k = 0; k < kEach; ++k) {
      if (id % 2 == 0) {
        if (q.resume(segment_queue::kPermit, mode::sync)) {
          handed.fetch_add(1);
        } else {
          broken_resumes.fetch_add(1);
        }
      } else if (q.suspend({}, kKind, &q) == segment_queue::kBroken) {
        broken_suspends.fetch_add(1);
      } else {
        received.fetch_add(1);
      }
    }
  });
  EXPECT_EQ(handed.load(), received.load());
  EXPECT_EQ(broken_resumes.load(), broken_suspends.load());
  EXPECT_EQ(handed.load() + broken_resumes.load(), long{kPairs} * kEach);
}

}  // namespace
}  // namespace tessera::test

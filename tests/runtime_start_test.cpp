// Long-lived runtimes: start(), spawn()/submit() from plain threads, stop()
// draining, and the misuse errors.
#include <tessera/latch.h>
#include <tessera/runtime.h>
#include <tessera/semaphore.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace tessera::test {
namespace {

TEST(RuntimeStart, PlainThreadsSubmitWorkAndGetResults) {
  watchdog dog("start/submit", 60s);
  runtime rt({.workers = 2});
  EXPECT_FALSE(rt.running());
  rt.start();
  EXPECT_TRUE(rt.running());
  // From the main thread and from two other plain threads at once.
  auto answer = rt.submit([](int a, int b) { return a * b; }, 6, 7);
  std::vector<std::thread> ts;
  std::atomic<long> sum{0};
  for (int t = 0; t < 2; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto f = rt.submit([i, t] { return i + t * 1000; });
        sum.fetch_add(f.get());
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(answer.get(), 42);
  EXPECT_FALSE(answer.valid());
  EXPECT_EQ(sum.load(), 2 * (199 * 200 / 2) + 200 * 1000);
  rt.stop();
  EXPECT_FALSE(rt.running());
}

TEST(RuntimeStart, SubmittedExceptionsAreRethrownByGet) {
  runtime rt({.workers = 1});
  rt.start();
  auto f = rt.submit([]() -> int { throw std::runtime_error("submitted failure"); });
  EXPECT_THROW(
      {
        try {
          f.get();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "submitted failure");
          throw;
        }
      },
      std::runtime_error);
  auto v = rt.submit([] {});
  v.get();
  rt.stop();
}

TEST(RuntimeStart, StopDrainsEveryFiberIncludingOnesStartedMeanwhile) {
  watchdog dog("stop drains", 60s);
  runtime rt({.workers = 2});
  rt.start();
  std::atomic<int> finished{0};
  counting_semaphore<> gate(0);
  // A spawned fiber that starts more fibers and waits on a semaphore a plain
  // thread releases only after stop() has begun.
  rt.spawn([&] {
    std::vector<fiber> kids;
    for (int i = 0; i < 50; ++i) {
      kids.emplace_back([&] {
        gate.acquire();
        finished.fetch_add(1);
      });
    }
    for (auto& k : kids) k.join();
    finished.fetch_add(1);
  });
  std::thread releaser([&] {
    std::this_thread::sleep_for(
        20ms);  // let stop() start waiting first (not a sync: either order passes)
    gate.release(50);
  });
  rt.stop();  // returns only once all 51 fibers have ended
  EXPECT_EQ(finished.load(), 51);
  releaser.join();
}

TEST(RuntimeStart, FibersOfOneRuntimeFeedAnotherAndRestartWorks) {
  watchdog dog("two runtimes", 60s);
  runtime server({.workers = 1});
  server.start();
  runtime client({.workers = 1});
  const int got = client.run([&] {
    // A fiber of another runtime submits and waits by parking.
    return server.submit([] { return 7; }).get();
  });
  EXPECT_EQ(got, 7);
  server.stop();
  server.start();  // a stopped runtime starts again
  EXPECT_EQ(server.submit([] { return 8; }).get(), 8);
  server.stop();
}

// runtime::spawn from a plain thread starts detached fibers, as tessera::spawn
// does from a fiber: dropping nothing aborts, and stop() waits for them all
// (the pattern the README shows: `rt.spawn(f)` in a loop).
TEST(RuntimeStart, SpawnInALoopFromAThreadStartsDetachedFibers) {
  watchdog dog("spawn in a loop", 60s);
  runtime rt({.workers = 2});
  rt.start();
  std::atomic<int> ran{0};
  for (int i = 0; i < 1000; ++i) rt.spawn([&ran, i] { ran.fetch_add(i % 2 == 0 ? 1 : 2); });
  rt.stop();
  EXPECT_EQ(ran.load(), 500 * 1 + 500 * 2);
}

TEST(RuntimeStart, MisuseIsReportedWithTheRule) {
  runtime rt({.workers = 1});
  try {
    (void)rt.submit([] {});
    FAIL() << "submit on a runtime that is not running must throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("not running"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rt.stop(), std::logic_error);
  rt.start();
  EXPECT_THROW(rt.start(), std::logic_error);
  EXPECT_THROW(rt.run([] {}), std::logic_error);
  auto self_stop = rt.submit([&] {
    try {
      rt.stop();
      return std::string("no error");
    } catch (const std::logic_error& e) {
      return std::string(e.what());
    }
  });
  EXPECT_NE(self_stop.get().find("own workers"), std::string::npos);
  rt.stop();
}

TEST(RuntimeStart, DestroyingAStartedRuntimeDrainsIt) {
  std::atomic<bool> ran{false};
  {
    runtime rt({.workers = 1});
    rt.start();
    rt.spawn([&] {
      this_fiber::sleep_for(5ms);
      ran = true;
    });
  }
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace tessera::test

// shared_mutex in every execution environment: readers share, writers exclude,
// neither side starves, standard lock adaptors, misuse.
#include <tessera/shared_mutex.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

class SharedMutexIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, SharedMutexIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

TEST_P(SharedMutexIn, ReadersHoldItTogether) {
  watchdog dog("readers share", 60s);
  shared_mutex m;
  std::atomic<int> inside{0};
  run_all(GetParam(), 2, [&](int) {
    std::shared_lock lock(m);
    inside.fetch_add(1);
    // Both must be inside at once: only possible if the lock is shared.
    while (inside.load() < 2) yield_now();
  });
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST_P(SharedMutexIn, WritersExcludeEveryone) {
  watchdog dog("rw stress", 90s);
  shared_mutex m;
  std::atomic<int> readers{0}, writers{0}, violations{0};
  long value = 0;  // written under the exclusive lock only: TSan checks it
  run_all(GetParam(), 6, [&](int id) {
    for (int i = 0; i < 3000; ++i) {
      if ((i + id) % 5 == 0) {
        std::unique_lock lock(m);
        if (writers.fetch_add(1) != 0 || readers.load() != 0) violations.fetch_add(1);
        ++value;
        if (i % 50 == 0) yield_now();
        writers.fetch_sub(1);
      } else {
        std::shared_lock lock(m);
        readers.fetch_add(1);
        if (writers.load() != 0) violations.fetch_add(1);
        const long seen = value;
        (void)seen;
        if (i % 50 == 1) yield_now();
        readers.fetch_sub(1);
      }
    }
  });
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(value, 6 * 3000 / 5);
}

TEST_P(SharedMutexIn, AWriterGetsInWhileReadersKeepReading) {
  watchdog dog("writer not starved", 60s);
  shared_mutex m;
  std::atomic<bool> stop{false};
  group readers(GetParam());
  readers.spawn_n(3, [&](int) {
    while (!stop.load()) {
      std::shared_lock lock(m);
      yield_now();  // overlapping readers: the lock is never free of readers for long
    }
  });
  group writer(GetParam());
  writer.spawn([&] {
    for (int i = 0; i < 20; ++i) {
      std::unique_lock lock(m);
    }
    stop = true;
  });
  writer.join();
  readers.join();
  SUCCEED();
}

TEST_P(SharedMutexIn, ReadersGetInWhileWritersKeepWriting) {
  watchdog dog("readers not starved", 60s);
  shared_mutex m;
  std::atomic<bool> stop{false};
  group writers(GetParam());
  writers.spawn_n(2, [&](int) {
    while (!stop.load()) {
      std::unique_lock lock(m);
      yield_now();
    }
  });
  group reader(GetParam());
  reader.spawn([&] {
    for (int i = 0; i < 20; ++i) {
      std::shared_lock lock(m);
    }
    stop = true;
  });
  reader.join();
  writers.join();
  SUCCEED();
}

TEST(SharedMutex, TryLocksAndAdaptors) {
  shared_mutex m;
  {
    std::shared_lock r1(m);
    EXPECT_TRUE(m.try_lock_shared());
    m.unlock_shared();
    EXPECT_FALSE(m.try_lock());
  }
  {
    std::scoped_lock w(m);
    EXPECT_FALSE(m.try_lock_shared());
    EXPECT_FALSE(m.try_lock());
  }
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

#if TESSERA_CHECKS
TEST(SharedMutexDeathTest, UnlockingWhatIsNotHeldAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        shared_mutex m;
        m.unlock_shared();
      },
      "tessera::shared_mutex::unlock_shared: the lock is not held shared");
}
#endif

}  // namespace
}  // namespace tessera::test

// shared_mutex in every execution environment: readers share, writers exclude,
// neither side starves, standard lock adaptors, misuse.
#include <tessera/shared_mutex.h>
#include "baseline/preshing_shared_mutex.h"

#include <atomic>
#include <latch>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "exec_env.h"
#include "test_util.h"

namespace tessera::test {
namespace {

class SharedMutexIn : public ::testing::TestWithParam<exec_kind> {};
INSTANTIATE_TEST_SUITE_P(Envs, SharedMutexIn, ::testing::ValuesIn(all_exec_kinds()),
                         [](const auto& p) { return to_string(p.param); });

template <class M>
void readers_hold_it_together(exec_kind kind) {
  watchdog dog("readers share", 60s);
  M m;
  std::atomic<int> inside{0};
  run_all(kind, 2, [&](int) {
    std::shared_lock lock(m);
    inside.fetch_add(1);
    // Both must be inside at once: only possible if the lock is shared.
    while (inside.load() < 2) yield_now();
  });
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

template <class M>
void writers_exclude_everyone(exec_kind kind, int callers = 6, int rounds = 3000) {
  watchdog dog("rw stress", 90s);
  M m;
  std::atomic<int> readers{0}, writers{0}, violations{0};
  long value = 0;  // written under the exclusive lock only: TSan checks it
  run_all(kind, callers, [&](int id) {
    for (int i = 0; i < rounds; ++i) {
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
  EXPECT_EQ(value, callers * rounds / 5);
  EXPECT_TRUE(m.try_lock()) << "a reader's count-out was lost";
  m.unlock();
}

// Neither side starves: `hogs` callers keep taking the lock one way (`Hog`)
// while one caller must get it the other way (`Get`) 20 times.
template <class Hog, class Get, class M>
void one_gets_in(exec_kind kind, const char* what, int hogs) {
  watchdog dog(what, 60s);
  M m;
  std::atomic<bool> stop{false};
  group hogging(kind);
  hogging.spawn_n(hogs, [&](int) {
    while (!stop.load()) {
      Hog lock(m);
      yield_now();  // overlapping holders: the lock is rarely free of them
    }
  });
  group getter(kind);
  getter.spawn([&] {
    for (int i = 0; i < 20; ++i) {
      Get lock(m);
    }
    stop = true;
  });
  getter.join();
  hogging.join();
  SUCCEED();
}

template <class M>
void writer_gets_in(exec_kind kind) {
  one_gets_in<std::shared_lock<M>, std::unique_lock<M>, M>(kind, "writer not starved", 3);
}

template <class M>
void readers_get_in(exec_kind kind) {
  one_gets_in<std::unique_lock<M>, std::shared_lock<M>, M>(kind, "readers not starved", 2);
}

TEST_P(SharedMutexIn, ReadersHoldItTogether) {
  readers_hold_it_together<shared_mutex>(GetParam());
}
TEST_P(SharedMutexIn, WritersExcludeEveryone) {
  writers_exclude_everyone<shared_mutex>(GetParam());
}
TEST_P(SharedMutexIn, AWriterGetsInWhileReadersKeepReading) {
  writer_gets_in<shared_mutex>(GetParam());
}
TEST_P(SharedMutexIn, ReadersGetInWhileWritersKeepWriting) {
  readers_get_in<shared_mutex>(GetParam());
}
TEST_P(SharedMutexIn, PreshingReadersShare) {
  readers_hold_it_together<preshing_shared_mutex>(GetParam());
}
TEST_P(SharedMutexIn, PreshingWritersExcludeEveryone) {
  writers_exclude_everyone<preshing_shared_mutex>(GetParam());
}
TEST_P(SharedMutexIn, PreshingAWriterGetsIn) {
  writer_gets_in<preshing_shared_mutex>(GetParam());
}
TEST_P(SharedMutexIn, PreshingReadersGetIn) {
  readers_get_in<preshing_shared_mutex>(GetParam());
}
TEST_P(SharedMutexIn, TimedReadersShare) {
  readers_hold_it_together<shared_timed_mutex>(GetParam());
}
TEST_P(SharedMutexIn, TimedWritersExcludeEveryone) {
  writers_exclude_everyone<shared_timed_mutex>(GetParam());
}
TEST_P(SharedMutexIn, TimedAWriterGetsIn) {
  writer_gets_in<shared_timed_mutex>(GetParam());
}
TEST_P(SharedMutexIn, TimedReadersGetIn) {
  readers_get_in<shared_timed_mutex>(GetParam());
}

TEST_P(SharedMutexIn, TimedAcquisitionsTimeOutNeverEarly) {
  shared_timed_mutex m;
  m.lock_shared();  // held shared: writers must time out, readers may join
  run_all(GetParam(), 2, [&](int) {
    const auto start = clock::now();
    EXPECT_FALSE(m.try_lock_for(15ms));
    EXPECT_GE(clock::now() - start, 15ms);
    EXPECT_TRUE(m.try_lock_shared_for(1s)) << "the timed-out writer left the queue blocked";
    m.unlock_shared();
  });
  m.unlock_shared();
  m.lock();  // held exclusively: readers must time out
  run_all(GetParam(), 2, [&](int) {
    const auto start = clock::now();
    EXPECT_FALSE(m.try_lock_shared_until(std::chrono::system_clock::now() + 10ms));
    EXPECT_GE(clock::now() - start, 10ms);
  });
  m.unlock();
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

TEST_P(SharedMutexIn, TimedStressLeavesNothingBehind) {
  watchdog dog("shared_timed_mutex stress", 90s);
  shared_timed_mutex m;
  std::atomic<int> readers{0}, writers{0}, violations{0};
  run_all(GetParam(), 6, [&](int id) {
    for (int i = 0; i < 2000; ++i) {
      const auto timeout = std::chrono::microseconds((i * 13 + id) % 60);
      if ((i + id) % 4 == 0) {
        if (!m.try_lock_for(timeout)) continue;
        if (writers.fetch_add(1) != 0 || readers.load() != 0) violations.fetch_add(1);
        if (i % 32 == 0) yield_now();
        writers.fetch_sub(1);
        m.unlock();
      } else {
        if (!m.try_lock_shared_for(timeout)) continue;
        readers.fetch_add(1);
        if (writers.load() != 0) violations.fetch_add(1);
        if (i % 32 == 1) yield_now();
        readers.fetch_sub(1);
        m.unlock_shared();
      }
    }
  });
  EXPECT_EQ(violations.load(), 0);
  EXPECT_TRUE(m.try_lock()) << "a timed-out caller left the lock blocked";
  m.unlock();
}

// More threads than owned slots: readers count out with plain stores (owned
// slots) and RMWs (shared slots) side by side; writers park waiting for them.
TEST(SharedMutex, OwnedAndSharedReaderSlotsTogether) {
  writers_exclude_everyone<shared_mutex>(exec_kind::threads,
                                         static_cast<int>(detail::kOwnedSlots) + 4, 400);
}

// Owned reader slots: one live thread per index, given back when it exits.
TEST(SharedMutex, OwnedReaderSlotsAreExclusiveAndComeBack) {
  constexpr int n = static_cast<int>(detail::kOwnedSlots) + 4;
  auto batch = [] {
    std::vector<std::uint32_t> codes(n);
    std::latch alive(n);
    std::vector<std::thread> ts;
    for (int i = 0; i < n; ++i) {
      ts.emplace_back([&, i] {
        codes[static_cast<std::size_t>(i)] = detail::current_reader_slot();
        alive.arrive_and_wait();  // all alive at once: owned indices must differ
      });
    }
    for (auto& t : ts) t.join();
    return codes;
  };
  auto check = [](const std::vector<std::uint32_t>& codes) {
    std::set<std::uint32_t> owned;
    int shared = 0;
    for (const std::uint32_t c : codes) {
      const std::uint32_t index = detail::reader_slot_index(c);
      if ((c & detail::kSlotOwned) != 0) {
        EXPECT_LT(index, detail::kOwnedSlots);
        EXPECT_TRUE(owned.insert(index).second) << "owned slot " << index << " dealt twice";
      } else {
        EXPECT_GE(index, detail::kOwnedSlots);
        EXPECT_LT(index, detail::kReaderSlots);
        ++shared;
      }
    }
    EXPECT_GE(shared, 4);
    return owned.size();
  };
  const std::size_t first = check(batch());
  const std::size_t second = check(batch());
  if (detail::owned_reader_slots_enabled()) {
    EXPECT_GE(first, 1u);
    EXPECT_EQ(second, first) << "exited threads did not give their owned slots back";
  } else {
    EXPECT_EQ(first, 0u);
    EXPECT_EQ(second, 0u);
  }
}

// A reader that leaves through a slot the lock has never counted through — a
// fiber that migrated to another worker; here two live OS threads, so the two
// slots differ — marks that slot in used_ on the way out. A writer reads only
// the marked slots: without the mark it would see the count-in and never the
// count-out, and wait for a reader that has left (until the deadline here).
TEST(SharedMutex, AReaderLeavingThroughAnotherSlotLetsTheWriterIn) {
  for (int round = 0; round < 20; ++round) {
    shared_timed_mutex m;
    std::latch counted_in(1), left(1);
    std::uint32_t in_slot = 0, out_slot = 0;
    std::thread a([&] {
      m.lock_shared();  // counts in through thread a's slot
      in_slot = detail::current_reader_slot();
      counted_in.count_down();
      left.wait();  // stays alive: its slot index is not dealt to b
    });
    counted_in.wait();
    std::thread b([&] {
      m.unlock_shared();  // counts out through thread b's slot, new to m
      out_slot = detail::current_reader_slot();
    });
    b.join();
    left.count_down();
    a.join();
    ASSERT_NE(detail::reader_slot_index(in_slot), detail::reader_slot_index(out_slot));
    ASSERT_TRUE(m.try_lock_for(std::chrono::seconds(5))) << "round " << round;
    m.unlock();
  }
}

// Reader bias: the first reader with an owned slot biases a fresh lock to its
// thread, which then counts in with plain stores; the first write by another
// thread revokes the bias (membarrier), racing the biased reader's count-ins.
// A fresh lock per round, so every round races a revocation. The reader's
// critical section only loads (no RMW that would drain its store buffer and
// hide a missing barrier); the writer writes two words it must see equal.
// The SPIN model (model_shared_mutex) checks the same protocol exhaustively.
TEST(SharedMutex, BiasedReaderAndRevokingWriterExclude) {
  watchdog dog("bias revocation", 60s);
  const auto until = clock::now() + 1500ms;
  for (int rounds = 0; another_round(rounds, 20, 2000, until); ++rounds) {
    shared_mutex m;
    std::atomic<long> a{0}, b{0};
    std::atomic<bool> stop{false};
    std::atomic<long> torn{0};
    std::latch biased(2);
    std::thread reader([&] {
      { std::shared_lock first(m); }  // takes the bias
      biased.arrive_and_wait();
      while (!stop.load(std::memory_order_relaxed)) {
        std::shared_lock r(m);
        for (int k = 0; k < 16; ++k) {  // long enough for an overlap to show
          const long x = a.load(std::memory_order_relaxed);
          const long y = b.load(std::memory_order_relaxed);
          if (x != y) torn.store(1, std::memory_order_relaxed);
        }
      }
    });
    biased.arrive_and_wait();
    for (long w = 1; w <= 100; ++w) {
      std::unique_lock lock(m);  // the first one revokes the bias
      a.store(w, std::memory_order_relaxed);
      b.store(w, std::memory_order_relaxed);
    }
    stop.store(true);
    reader.join();
    ASSERT_EQ(torn.load(), 0) << "a reader saw a write in progress (round " << rounds << ")";
    ASSERT_TRUE(m.try_lock()) << "the lock is not free after round " << rounds;
    m.unlock();
  }
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

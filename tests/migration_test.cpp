// A fiber that parks on one worker and resumes on another, over and over: the
// library's own per-thread reads (self(), the current fiber, the current
// worker, the job cache) must be made afresh after each park, never through an
// address the compiler kept from before it (tessera/detail/tls_access.h).
// In the clang preset this file and the library are built with -O2 -flto, so
// an inlined thread_local read would be merged across the park and this test
// fails: the identity read after the park is another fiber's or thread's.
//
// The migration is made, not hoped for: two anchor fibers are locked
// (this_fiber::lock_os_thread) to the two workers, and the fiber under test
// has them wake it in turn, so it resumes on the waker's worker each time.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <tessera/tessera.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <stdexcept>

#include "test_util.h"

namespace {

using namespace std::chrono_literals;

/// The kernel's id of the calling thread: a system call, never cached.
long os_thread_id() {
  return syscall(SYS_gettid);
}

/// A fiber locked to one worker that wakes `target` each time it is asked to.
struct anchor {
  tessera::auto_reset_event go;
  std::atomic<long> thread{0};
  std::atomic<bool> stop{false};
  std::atomic<int> moved{0};  // times it woke on another OS thread: must stay 0
};

TEST(Migration, LibraryThreadLocalReadsStayRightAcrossMigratingParks) {
  tessera::test::watchdog dog("Migration", 120s);
  tessera::runtime rt({.workers = 2});
  constexpr int kRounds = 2000;
  std::atomic<int> bad_self{0}, bad_slot{0}, bad_id{0}, bad_local{0}, bad_exception{0};
  std::atomic<int> migrations{0};
  rt.run([&] {
    std::array<anchor, 2> anchors;
    tessera::auto_reset_event wake_tester;
    // Place the anchors on different workers: each registers, then spins
    // (holding its worker) until the other has too, so the other must run on
    // the other worker.
    tessera::latch placed(2);
    std::array<tessera::fiber, 2> anchor_fibers;
    for (int k = 0; k < 2; ++k) {
      anchor_fibers[k] = tessera::fiber([&, k] {
        anchor& me = anchors[k];
        tessera::this_fiber::lock_os_thread();
        me.thread = os_thread_id();
        placed.count_down();
        const auto limit = std::chrono::steady_clock::now() + 10s;
        while (anchors[1 - k].thread.load() == 0 && std::chrono::steady_clock::now() < limit) {
        }
        for (;;) {
          me.go.wait();
          if (os_thread_id() != me.thread) ++me.moved;
          if (me.stop) break;
          wake_tester.signal();
        }
        tessera::this_fiber::unlock_os_thread();
      });
    }
    placed.wait();  // parked: a yielding root would keep the idle worker from stealing
    EXPECT_NE(anchors[0].thread.load(), anchors[1].thread.load()) << "anchors share a worker";

    tessera::fiber tester([&] {
      static tessera::fiber_local<int> local(0);
      const tessera::fiber::id my_id = tessera::this_fiber::get_id();
      tessera::waiter* const me = tessera::self();
      *local = 42;
      for (int round = 0; round < kRounds; ++round) {
        const long before = os_thread_id();
        try {
          throw std::runtime_error("in flight");
        } catch (const std::runtime_error&) {
          anchors[round % 2].go.signal();
          wake_tester.wait();  // resumes on anchors[round % 2]'s worker
          if (tessera::self() != me) ++bad_self;
          // The slot the worker's switch writes, by reference: the address a
          // compiler would keep from before the park if the call were inlined.
          if (tessera::detail::current_waiter_slot() != me) ++bad_slot;
          if (tessera::this_fiber::get_id() != my_id) ++bad_id;
          if (*local != 42) ++bad_local;
          try {
            throw;
          } catch (const std::runtime_error& e) {
            if (std::string(e.what()) != "in flight") ++bad_exception;
          }
        }
        if (os_thread_id() != before) ++migrations;
      }
      // Job calls find the runtime of the worker they now run on.
      std::atomic<int> ran{0};
      tessera::parallel_for(0, 64, [&](int) { ++ran; });
      EXPECT_EQ(ran.load(), 64);
    });
    tester.join();
    for (anchor& a : anchors) {
      a.stop = true;
      a.go.signal();
    }
    for (auto& f : anchor_fibers) f.join();
    EXPECT_EQ(anchors[0].moved.load(), 0) << "a locked fiber ran on another thread";
    EXPECT_EQ(anchors[1].moved.load(), 0) << "a locked fiber ran on another thread";
  });
  EXPECT_EQ(bad_self.load(), 0) << "self() read another thread's identity after a migration";
  EXPECT_EQ(bad_slot.load(), 0) << "the running-identity slot was an earlier worker's";
  EXPECT_EQ(bad_id.load(), 0);
  EXPECT_EQ(bad_local.load(), 0);
  EXPECT_EQ(bad_exception.load(), 0);
  // The test means something only if the fiber did move.
  EXPECT_GE(migrations.load(), kRounds / 2);
}

// A locked fiber stays on its OS thread through every kind of wait while
// other fibers keep all four workers busy, and is free again once unlocked.
TEST(Migration, LockedFiberStaysOnItsThreadThroughEveryWait) {
  tessera::test::watchdog dog("LockedFiber", 120s);
  tessera::runtime rt({.workers = 4});
  std::atomic<int> moved{0};
  rt.run([&] {
    tessera::mutex m;
    std::atomic<bool> done{false};
    std::vector<tessera::fiber> busy;
    for (int i = 0; i < 8; ++i) {
      busy.emplace_back([&] {
        while (!done) {
          std::lock_guard lock(m);
          tessera::this_fiber::yield();
        }
      });
    }
    std::vector<tessera::fiber> locked;
    for (int i = 0; i < 4; ++i) {
      locked.emplace_back([&] {
        EXPECT_FALSE(tessera::this_fiber::os_thread_locked());
        tessera::this_fiber::lock_os_thread();
        tessera::this_fiber::lock_os_thread();  // nests
        tessera::this_fiber::unlock_os_thread();
        EXPECT_TRUE(tessera::this_fiber::os_thread_locked());
        const long home = os_thread_id();
        for (int round = 0; round < 300; ++round) {
          switch (round % 4) {
            case 0: {
              std::lock_guard lock(m);  // contended: parks
              break;
            }
            case 1:
              tessera::this_fiber::yield();
              break;
            case 2:
              tessera::this_fiber::sleep_for(20us);  // a timer any worker may fire
              break;
            case 3: {
              tessera::fiber child([] {});  // join parks until another fiber ends
              child.join();
              break;
            }
          }
          if (os_thread_id() != home) ++moved;
        }
        tessera::this_fiber::unlock_os_thread();
        EXPECT_FALSE(tessera::this_fiber::os_thread_locked());
        tessera::this_fiber::unlock_os_thread();  // unbalanced: no effect, as Go's
        EXPECT_FALSE(tessera::this_fiber::os_thread_locked());
      });
    }
    for (auto& f : locked) f.join();
    done = true;
    for (auto& f : busy) f.join();
  });
  EXPECT_EQ(moved.load(), 0);
}

// A thread that is not a fiber never moves: locking is a no-op there.
TEST(Migration, OsThreadsCountAsLocked) {
  EXPECT_TRUE(tessera::this_fiber::os_thread_locked());
  tessera::this_fiber::lock_os_thread();
  tessera::this_fiber::unlock_os_thread();
  EXPECT_TRUE(tessera::this_fiber::os_thread_locked());
}

}  // namespace
